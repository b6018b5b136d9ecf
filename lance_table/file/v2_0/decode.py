"""Decoding of Lance 2.0 page encodings (``lance.encodings.ArrayEncoding``) into Arrow arrays.

Every decoder takes the selected positions as :class:`Runs` and fetches only the bytes those
positions need: fixed-width values and bitmaps by byte range, variable-width values through their
end offsets. Compressed buffers are fetched and inflated whole (once per page).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file import utf8
from lance_table.file.arrow import build_binary, with_validity
from lance_table.file.arrow_take import take
from lance_table.file.compression import fsst
from lance_table.file.pageio import PageIO, bits_runs
from lance_table.file.runs import Runs

_U64 = pa.uint64()


def decode(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    """Decode the selected values of one page encoding as an array of ``dtype``."""
    kind = enc.WhichOneof("array_encoding")
    handler = _HANDLERS.get(kind or "")
    if handler is None:
        raise UnsupportedFormatError(f"{io.what}: 2.0 encoding {kind!r} is not supported", path=io.path)
    return handler(getattr(enc, kind), io, runs, dtype)


def _nullable(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    which = enc.WhichOneof("nullability")
    if which == "no_nulls":
        return decode(enc.no_nulls.values, io, runs, dtype)
    if which == "all_nulls" or which is None:
        return pa.nulls(runs.total, dtype)
    valid = decode_bits(enc.some_nulls.validity, io, runs)
    values = decode(enc.some_nulls.values, io, runs, dtype)
    return with_validity(values, valid)


def _compressed(flat: Any) -> bool:
    """Whether a flat buffer is compressed (pylance writes scheme ``"none"`` for a field whose
    ``lance-encoding:compression`` is ``none``: stored as is)."""
    return bool(flat.HasField("compression") and flat.compression.scheme not in ("", "none"))


def decode_bits(enc: Any, io: PageIO, runs: Runs) -> np.ndarray:
    """A 1-bit flat encoding (validity) as a bool array."""
    if enc.WhichOneof("array_encoding") != "flat" or enc.flat.bits_per_value != 1:
        raise UnsupportedFormatError(f"{io.what}: validity must be a 1-bit flat buffer", path=io.path)
    flat = enc.flat
    if _compressed(flat):
        n = runs.end
        data = io.decompressed(
            flat.buffer.buffer_index, flat.compression.scheme, None, flat.buffer.buffer_type
        )
        if len(data) * 8 < n:
            raise io.corrupt("validity bitmap is shorter than the page")
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[runs.positions()].astype(bool)
    _, size = io.locate(flat.buffer.buffer_index, flat.buffer.buffer_type)
    if runs.count and (runs.end + 7) // 8 > size:
        raise io.corrupt(f"bitmap of {size} bytes cannot hold {runs.end} bits")
    return bits_runs(io, flat.buffer.buffer_index, runs, flat.buffer.buffer_type)


def flat_bytes(enc: Any, io: PageIO, runs: Runs) -> bytes | memoryview:
    """The selected values of a byte-aligned flat buffer, concatenated."""
    bits = int(enc.bits_per_value)
    if bits == 0 or bits % 8:
        raise UnsupportedFormatError(f"{io.what}: flat values of {bits} bits are not supported", path=io.path)
    width = bits // 8
    buf = enc.buffer
    if _compressed(enc):
        data = io.decompressed(buf.buffer_index, enc.compression.scheme, None, buf.buffer_type)
        if len(data) < runs.end * width:
            raise io.corrupt(f"decompressed buffer of {len(data)} bytes cannot hold {runs.end} values")
        if runs.count == 1:
            s = int(runs.starts[0]) * width
            return data[s : s + int(runs.lengths[0]) * width]
        return b"".join(
            data[s : s + n] for s, n in zip((runs.starts * width).tolist(), (runs.lengths * width).tolist())
        )
    return io.byte_runs(buf.buffer_index, runs.scale(width), buf.buffer_type)


def _flat(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    n = runs.total
    if enc.bits_per_value == 1:
        if not pa.types.is_boolean(dtype):
            raise io.corrupt(f"1-bit flat values cannot be read as {dtype}")
        bits = decode_bits(_as_encoding(enc), io, runs)
        return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(np.packbits(bits, bitorder="little"))])
    width = _byte_width(dtype)
    if width is None or width * 8 != enc.bits_per_value:
        raise io.corrupt(f"{enc.bits_per_value}-bit flat values cannot be read as {dtype}")
    return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(flat_bytes(enc, io, runs))])


def _as_encoding(flat: Any) -> Any:
    from lance_table._proto import encodings_v2_0_pb2

    e = encodings_v2_0_pb2.ArrayEncoding()
    e.flat.CopyFrom(flat)
    return e


def _byte_width(dtype: pa.DataType) -> int | None:
    if pa.types.is_dictionary(dtype):
        dtype = dtype.index_type
    try:
        bits = dtype.bit_width
    except ValueError:
        return None
    return bits // 8 if bits and bits % 8 == 0 else None


def _constant(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    value = bytes(enc.value)
    n = runs.total
    if pa.types.is_boolean(dtype):
        bit = bool(value and value[0] & 1)
        return pa.array(np.full(n, bit), pa.bool_())
    width = _byte_width(dtype)
    if width is None or len(value) != width:
        raise io.corrupt(f"constant of {len(value)} bytes cannot be read as {dtype}")
    return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(value * n)])


def _fixed_size_list(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    if not pa.types.is_fixed_size_list(dtype) or dtype.list_size != enc.dimension:
        raise io.corrupt(f"fixed_size_list of dimension {enc.dimension} cannot be read as {dtype}")
    items = decode(enc.items, io, runs.scale(enc.dimension), dtype.value_type)
    return pa.FixedSizeListArray.from_arrays(items, type=dtype)


def _fixed_size_binary(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    width = enc.byte_width
    if _byte_width(dtype) != width:
        raise io.corrupt(f"fixed_size_binary of width {width} cannot be read as {dtype}")
    raw = decode(enc.bytes, io, runs.scale(width), pa.uint8())
    return pa.Array.from_buffers(dtype, runs.total, [None, raw.buffers()[1]])


def read_end_offsets(enc: Any, io: PageIO, runs: Runs) -> tuple[np.ndarray, np.ndarray]:
    """Raw u64 end offsets of the selected positions, and for each run the end before it (0 at start)."""
    if runs.count == 1:
        s, n = int(runs.starts[0]), int(runs.lengths[0])
        if s == 0:
            return _u64(enc, io, runs), np.zeros(1, np.uint64)
        vals = _u64(enc, io, Runs.span(s - 1, n + 1))
        return vals[1:], vals[:1]
    if not runs.count:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    wide = runs.with_predecessors()
    vals = _u64(enc, io, wide)
    pos = wide.positions()
    ends = vals[np.searchsorted(pos, runs.positions())]
    prev = vals[np.searchsorted(pos, np.maximum(runs.starts - 1, 0))]
    prev = np.where(runs.starts > 0, prev, np.uint64(0))
    return ends, prev


def _u64(enc: Any, io: PageIO, runs: Runs) -> np.ndarray:
    arr = decode(enc, io, runs, _U64)
    if arr.null_count:
        raise io.corrupt("offsets contain nulls")
    return np.frombuffer(arr.buffers()[1], np.uint64, len(arr), arr.offset * 8)


def resolve_ends(
    raw_ends: np.ndarray, raw_prev: np.ndarray, runs: Runs, adjustment: int, io: PageIO
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Turn raw end offsets (nulls stored as ``end + adjustment``) into per-position lengths.

    Returns ``(valid, lengths, run_first, run_last)``: the validity of each selected position, its
    length, and for each run the first and one-past-last offset it covers.
    """
    adj = np.uint64(adjustment)
    valid = raw_ends < adj if adjustment else np.ones(raw_ends.size, bool)
    ends = (
        np.where(valid, raw_ends, raw_ends - adj).astype(np.int64)
        if adjustment
        else raw_ends.astype(np.int64)
    )
    prev_valid = raw_prev < adj if adjustment else np.ones(raw_prev.size, bool)
    prev = (
        np.where(prev_valid, raw_prev, raw_prev - adj).astype(np.int64)
        if adjustment
        else raw_prev.astype(np.int64)
    )
    starts = np.empty_like(ends)
    if ends.size:
        starts[1:] = ends[:-1]
        run_begin = np.concatenate([[0], np.cumsum(runs.lengths)[:-1]])
        starts[run_begin] = prev
    lengths = ends - starts
    if lengths.size and (lengths.min() < 0):
        raise io.corrupt("end offsets decrease")
    run_last_idx = np.cumsum(runs.lengths) - 1
    run_last = ends[run_last_idx] if ends.size else np.zeros(0, np.int64)
    return valid, lengths, prev, run_last


def _binary(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    raw_ends, raw_prev = read_end_offsets(enc.indices, io, runs)
    adjustment = int(enc.null_adjustment)
    if runs.count == 1 and raw_ends.size:
        # ends that never decrease hold no null (a null's end is raised by the adjustment) when
        # the last one is below the adjustment: one pass over them, not a check and a maximum
        rising = raw_ends.size < 2 or not bool(np.any(raw_ends[1:] < raw_ends[:-1]))
        if rising and (not adjustment or int(raw_ends[-1]) < adjustment):
            start = int(raw_prev[0])
            if adjustment and start >= adjustment:  # the row before the run is null
                start -= adjustment
            return _contiguous_binary(enc, io, raw_ends, start, dtype, rising=True)
    valid, lengths, first, last = resolve_ends(raw_ends, raw_prev, runs, enc.null_adjustment, io)
    byte_runs = Runs(first, last - first)
    data = decode(enc.bytes, io, byte_runs, pa.uint8())
    return build_binary(dtype, valid, lengths, data.buffers()[1], data.offset, io)


def _contiguous_binary(
    enc: Any, io: PageIO, raw_ends: np.ndarray, start: int, dtype: pa.DataType, rising: bool = False
) -> pa.Array:
    """Fast path: one run of rows without nulls; the offsets are the stored ends shifted
    (``rising``: the ends are known not to decrease)."""
    n = raw_ends.size
    end = int(raw_ends[-1])
    if end < start or (not rising and n > 1 and bool(np.any(raw_ends[1:] < raw_ends[:-1]))):
        raise io.corrupt("end offsets decrease")
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    if not large and end - start >= 2**31:
        raise UnsupportedFormatError(
            f"{io.what}: {end - start} bytes of {dtype} exceed 2 GiB; read the column as large_{dtype}",
            path=io.path,
        )
    offsets = np.empty(n + 1, np.int64 if large else np.int32)
    offsets[0] = 0
    np.subtract(raw_ends.view(np.int64), start, out=offsets[1:], casting="unsafe")
    data = decode(enc.bytes, io, Runs.span(start, end - start), pa.uint8())
    data_buf = data.buffers()[1]
    if data.offset:
        data_buf = data_buf.slice(data.offset)
    return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(offsets), data_buf], null_count=0)


def _dictionary(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    items_n = int(enc.num_dictionary_items)
    if items_n > io.max_items():
        raise io.corrupt(f"a dictionary of {items_n} items")
    if pa.types.is_dictionary(dtype):
        indices = decode(enc.indices, io, runs, dtype.index_type)
        items = decode(enc.items, io, Runs.span(0, items_n), dtype.value_type)
        _check_indices(indices, items_n, 0, io)
        if items.null_count:
            # Rows pointing at a null item are null rows (that is how nulls are stored).
            points_at_null = np.asarray(items.is_null())[indices.fill_null(0).to_numpy(zero_copy_only=False)]
            if points_at_null.any():
                valid = np.asarray(indices.is_valid()) & ~points_at_null
                indices = with_validity(indices, valid)
        if io.filtered:  # the dictionary would outlive the read as a view of the file's map
            items = pa.concat_arrays([items])
        return pa.DictionaryArray.from_arrays(indices, items)
    # A dictionary the writer chose for a plain column: index 0 is null, i means items[i - 1].
    items = decode(enc.items, io, Runs.span(0, items_n), dtype)
    inner = enc.indices
    if (
        inner.WhichOneof("array_encoding") == "nullable"
        and inner.nullable.WhichOneof("nullability") == "no_nulls"
    ):
        inner = inner.nullable.no_nulls.values
    if inner.WhichOneof("array_encoding") != "flat" or inner.flat.bits_per_value not in (8, 16, 32, 64):
        raise UnsupportedFormatError(f"{io.what}: unsupported dictionary index encoding", path=io.path)
    itype = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[int(inner.flat.bits_per_value)]
    idx = np.frombuffer(flat_bytes(inner.flat, io, runs), itype).astype(np.int64)
    if idx.size and int(idx.max()) > items_n:
        raise io.corrupt(f"dictionary index {int(idx.max())} exceeds the {items_n} dictionary items")
    if utf8.holds_strings(dtype):  # the values are the dictionary's: pylance checks it whole
        problem = utf8.problem_of(items, dtype)
        if problem is not None:
            raise io.corrupt(f"dictionary strings are not valid UTF-8 ({problem})")
        io.strings_checked = True
    return take(items, pa.array(idx - 1, mask=idx == 0))


def _check_indices(indices: pa.Array, n: int, base: int, io: PageIO) -> None:
    if len(indices) - indices.null_count == 0:
        return
    import pyarrow.compute as pc

    mm = pc.min_max(indices)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo < base or hi >= n + base:
        raise io.corrupt(f"dictionary indices [{lo}, {hi}] fall outside the {n} dictionary items")


def _fsst(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    inner = decode(enc.binary, io, runs, pa.large_binary())
    offsets = np.frombuffer(inner.buffers()[1], np.int64, len(inner) + 1, inner.offset * 8)
    data_buf = inner.buffers()[2]
    data = memoryview(data_buf) if data_buf is not None else b""
    try:
        out, new_offsets, ascii = fsst.decode_text(enc.symbol_table, data, offsets - offsets[0])
    except fsst.FsstError as exc:
        raise io.corrupt(f"FSST data: {exc}") from exc
    io.strings_checked |= ascii  # (the page's values are these strings: nothing else to check)
    valid = np.asarray(inner.is_valid())
    return build_binary(dtype, valid, np.diff(new_offsets), pa.py_buffer(out), 0, io)


def _packed_struct(enc: Any, io: PageIO, runs: Runs, dtype: pa.DataType) -> pa.Array:
    if not pa.types.is_struct(dtype) or len(enc.inner) != dtype.num_fields:
        raise io.corrupt(f"packed struct of {len(enc.inner)} children cannot be read as {dtype}")
    widths = []
    for child in enc.inner:
        c = child
        while c.WhichOneof("array_encoding") == "nullable":
            c = c.nullable.no_nulls.values
        if c.WhichOneof("array_encoding") != "flat" or c.flat.bits_per_value % 8:
            raise UnsupportedFormatError(
                f"{io.what}: packed struct child is not byte-aligned flat", path=io.path
            )
        widths.append(int(c.flat.bits_per_value) // 8)
    row = sum(widths)
    buf = enc.buffer
    raw = np.frombuffer(io.byte_runs(buf.buffer_index, runs.scale(row), buf.buffer_type), np.uint8)
    n = runs.total
    rows = raw.reshape(n, row) if row else raw.reshape(n, 0)
    kids = []
    at = 0
    for w, f in zip(widths, dtype):
        col = np.ascontiguousarray(rows[:, at : at + w])
        at += w
        if pa.types.is_boolean(f.type) or _byte_width(f.type) != w:
            raise UnsupportedFormatError(
                f"{io.what}: packed struct child {f.name} of type {f.type}", path=io.path
            )
        kids.append(pa.Array.from_buffers(f.type, n, [None, pa.py_buffer(col)]))
    return pa.StructArray.from_arrays(kids, fields=list(dtype))


_HANDLERS = {
    "nullable": _nullable,
    "flat": _flat,
    "constant": _constant,
    "fixed_size_list": _fixed_size_list,
    "fixed_size_binary": _fixed_size_binary,
    "binary": _binary,
    "dictionary": _dictionary,
    "fsst": _fsst,
    "packed_struct": _packed_struct,
}
