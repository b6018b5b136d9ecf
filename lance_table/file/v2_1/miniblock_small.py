"""Small mini-block pages (one chunk) of a column without nesting, decoded in a few calls.

A table of many small appends holds thousands of files of a few hundred rows: every page is one
mini-block chunk, and the general decoder (:func:`miniblock.mini_block`), built to decode
thousands of chunks in one numpy pass, spends a few hundred Python calls on each. Here a page's
description is read once (:func:`plan`, kept by the file reader per page) and its one chunk is
decoded with ``struct`` and at most a few numpy calls: plain values, FastLanes inline bitpacking
and plain or FSST-compressed variable-width values, with definition levels of any form
:func:`batch.levels` reads.

:func:`decode` returns None for anything else it meets: more than one chunk, another encoding, or
any check that fails. The caller then decodes the page the general way, which also says what is
wrong with a damaged page: this path raises only what the general decoder raises for the same
bytes (from the same level and FSST decoders), so results and errors are the general decoder's.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import LanceTableError
from lance_table.file.arrow import rows_of, with_validity
from lance_table.file.compression import bitpacking
from lance_table.file.compression.general import SCHEMES_BY_NUMBER
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import batch, batch_runs, repdef
from lance_table.file.v2_1.compress import decode_levels
from lance_table.file.v2_1.miniblock import dictionary_of, values_at
from lance_table.file.v2_1.values import Fixed, Var, byte_width, expand, is_binary, to_arrow

FLAT = 0
BITPACKED = 1
VARIABLE = 2
RLE = 3
#: variable-width values in a general compression (LZ4/ZSTD) per chunk: only reads of a few rows
#: of many files take these pages (see :func:`plan`'s ``general``); :func:`decode` does not
GENERAL = 4

# chunk values the general decoder accepts (see miniblock.MAX_CHUNK_VALUES)
_MAX_CHUNK_VALUES = 1 << 16
_LAYERS = ([repdef.ALL_VALID_ITEM], [repdef.NULLABLE_ITEM])
_UINT = {4: np.uint32, 8: np.uint64}
_MAX_SMALL_OFFSET = 2**31 - 1
# a chunk's header: its level count, the size of its definition levels (when it has them) and
# of each value buffer, in u16 words (2.1) or the buffer sizes in u32 (2.2); by (levels, 2.2,
# value buffers)
_HEADERS = {
    (has_def, large, buffers): struct.Struct(
        "<H" + ("H" if has_def else "") + ("I" if large else "H") * buffers
    )
    for has_def in (False, True)
    for large in (False, True)
    for buffers in (1, 2)
}


@dataclass(frozen=True, slots=True)
class SmallPage:
    """What decoding a page's one chunk needs, read from its layout once.

    ``bits``: bits per value (plain and bitpacked values) or per offset (variable-width values);
    ``symbols``: the FSST symbol table of compressed strings; ``defs``: the compression of the
    definition levels (None: the page has none)."""

    kind: int
    bits: int
    num_items: int
    symbols: bytes | None
    defs: Any
    header: struct.Struct  # the chunk's header words, for 2.1 (u16 sizes) or 2.2 (u32)
    large: bool
    #: the mini-block layout of a page of dictionary indices (None: the values are the data)
    dictionary: Any = None
    #: the value compression of run-length encoded values (None: another kind)
    runs: Any = None
    #: value buffers of the chunk: 2 for run values and run lengths stored apart
    buffers: int = 1


def plan(layout: Any, large: bool, lists: int = 0, general: bool = False) -> SmallPage | None:
    """The description of a 2.1/2.2 page (a ``PageLayout``) that :func:`decode` can take: a
    mini-block page of one value buffer, without repetition, dictionary or repetition index, whose
    values are plain, inline-bitpacked or variable-width (plain or FSST); else None.

    ``lists``: the items per value of a column of fixed-size lists (of fixed-size lists...) of
    plain values, whose page is taken too when its values are such lists without validity, of
    that many items in all (a page for :mod:`small_many`, whose values :func:`batch.values`
    decodes; :func:`decode` does not take it).

    ``general``: variable-width values in a general compression are taken too (kind
    :data:`GENERAL`), for :mod:`small_take`, which decompresses just the chunks it reads."""
    if layout.WhichOneof("layout") != "mini_block_layout":
        return None
    mini = layout.mini_block_layout
    if (
        mini.HasField("rep_compression")
        or int(mini.repetition_index_depth)
        or list(mini.layers) not in _LAYERS
    ):
        return None
    found = _values_form(mini.value_compression) if not lists else _list_form(mini.value_compression, lists)
    if found is None and general and not lists:
        found = _general_form(mini.value_compression)
    if found is None:
        return None
    kind, bits, symbols = found
    buffers = int(mini.num_buffers)
    if buffers != 1 and not (kind == RLE and buffers == 2):  # run values and lengths apart, or one block
        return None
    runs = mini.value_compression if kind == RLE else None
    dictionary = mini if mini.HasField("dictionary") else None
    if dictionary is not None and (kind in (VARIABLE, GENERAL) or bits % 8):
        return None  # dictionary indices are whole-byte integers
    has_def = mini.HasField("def_compression")
    header = _HEADERS[has_def, large, buffers]
    defs = mini.def_compression if has_def else None
    return SmallPage(kind, bits, int(mini.num_items), symbols, defs, header, large, dictionary, runs, buffers)


def _list_form(enc: Any, items: int) -> tuple[int, int, bytes | None] | None:
    """(FLAT, bits of a whole list, None) of plain fixed-size lists without validity of ``items``
    whole-byte items in all, else None."""
    per = 1
    while enc.WhichOneof("compression") == "fixed_size_list":
        fsl = enc.fixed_size_list
        if fsl.has_validity or int(fsl.items_per_value) <= 0:
            return None
        per *= int(fsl.items_per_value)
        enc = fsl.values
    if per != items or enc.WhichOneof("compression") != "flat" or enc.flat.HasField("data"):
        return None
    bits = int(enc.flat.bits_per_value)
    return (FLAT, bits * per, None) if bits > 0 and not bits % 8 else None


def _values_form(enc: Any) -> tuple[int, int, bytes | None] | None:
    """(kind, bits, FSST symbols) of a value compression this module decodes, else None."""
    kind = enc.WhichOneof("compression")
    if kind == "flat" and not enc.flat.HasField("data"):
        bits = int(enc.flat.bits_per_value)
        return (FLAT, bits, None) if bits > 0 else None
    if kind == "inline_bitpacking":
        bits = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        return (BITPACKED, bits, None) if bits in bitpacking.DTYPES else None
    if kind == "rle":  # run values and lengths of whole bytes, in one block (see batch.values)
        widths = [_flat_bits(e) for e in (enc.rle.values, enc.rle.run_lengths)]
        return (RLE, widths[0], None) if all(w in bitpacking.DTYPES for w in widths) else None
    symbols = None
    if kind == "fsst":
        symbols = bytes(enc.fsst.symbol_table)
        enc = enc.fsst.values
        kind = enc.WhichOneof("compression")
    if kind == "variable":
        offsets = enc.variable.offsets
        if offsets.WhichOneof("compression") != "flat" or offsets.flat.HasField("data"):
            return None
        bits = int(offsets.flat.bits_per_value)
        return (VARIABLE, bits, symbols) if bits // 8 in _UINT and bits % 8 == 0 else None
    return None


def _general_form(enc: Any) -> tuple[int, int, bytes | None] | None:
    """(GENERAL, offset bits, None) of plain variable-width values in a general compression of a
    known scheme, else None."""
    if enc.WhichOneof("compression") != "general":
        return None
    if int(enc.general.compression.scheme) not in SCHEMES_BY_NUMBER:
        return None
    found = _values_form(enc.general.values)
    if found is None or found[0] != VARIABLE or found[2] is not None:
        return None
    return (GENERAL, found[1], None)


def _flat_bits(enc: Any) -> int:
    """The bits per value of plain flat values (0: another form)."""
    if enc.WhichOneof("compression") != "flat" or enc.flat.HasField("data"):
        return 0
    return int(enc.flat.bits_per_value)


def decode(
    page: SmallPage, io: PageIO, dtype: pa.DataType, runs: Runs, floor: int | None = None
) -> pa.Array | None:
    """The rows ``runs`` of a page of one chunk described by ``page``, or None when the page is
    not one chunk or anything in it does not check out (the general decoder then decides).
    Integer values below ``floor`` may read as 0 (see :func:`batch.values`)."""
    n = page.num_items
    buffers = 2 if page.dictionary is None else 3
    if page.kind == GENERAL:  # (a page for small_take only)
        return None
    if n != io.page.length or not 0 < n <= _MAX_CHUNK_VALUES or len(io.buffers) != buffers:
        return None
    meta = io.whole(0)
    word_bytes = 4 if page.large else 2
    if len(meta) != word_bytes:  # more than one chunk
        return None
    chunk_bytes = ((int.from_bytes(meta, "little") >> 4) + 1) * 8
    data = io.whole(1)
    if chunk_bytes > len(data) or page.header.size > chunk_bytes:
        return None
    head = page.header.unpack_from(data, 0)
    at = (page.header.size + 7) & ~7
    def_at = at
    if page.defs is not None:
        if head[0] != n:
            return None
        at += (head[1] + 7) & ~7
    size = head[-1]
    first = -1  # the size of the run values, when the run lengths follow in a buffer of their own
    if page.buffers == 2:
        first = head[-2]
        size += (first + 7) & ~7
    if at + size > chunk_bytes:
        return None
    valid = None
    if page.defs is not None:  # decoded as the general decoder decodes the levels of one chunk
        def_size = head[1]
        defs = batch.levels(page.defs, data, np.array([def_at]), np.array([def_size]), np.array([n]), io)
        if defs is None:
            defs = decode_levels(page.defs, data[def_at : def_at + def_size], n, io)
        if defs.size != n:
            return None
        valid = defs == 0
    if page.kind == VARIABLE:
        arr = _variable(page, data, at, size, n, dtype, io)
        if arr is None:
            return None
    else:
        values = _fixed(page, data, at, size, n, floor if page.dictionary is None else None, io, first)
        if values is None:
            return None
        if page.dictionary is None:
            width = _plain_width(dtype)
            if width and values.bits == width * 8 and len(values.data) >= n * width:
                arr = pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(values.data)])
            else:
                arr = to_arrow(values, dtype, n, io)
        else:
            dictionary = dictionary_of(page.dictionary, io)
            arr = values_at(values, n, False, None, page.dictionary, dictionary, dtype, valid, io)[0]
    if valid is not None and not valid.all():
        arr = with_validity(arr, valid)
    return rows_of(arr, runs)


def _fixed(
    page: SmallPage,
    data: memoryview,
    at: int,
    size: int,
    n: int,
    floor: int | None,
    io: PageIO,
    first: int = -1,
) -> Fixed | None:
    """Plain, run-length encoded or inline-bitpacked values (None where the general decoder
    must look). ``first``: the size of the run values when the run lengths follow them in a
    buffer of their own (at the next multiple of 8), ``size`` bytes in all."""
    t = page.bits
    if page.kind == FLAT:
        need = (n * t + 7) // 8
        if need > size:
            return None
        return Fixed(bytes(data[at : at + need]), t)
    if page.kind == RLE:
        at_, n_ = np.array([at]), np.array([n])
        try:
            if first < 0:
                got = batch.values(page.runs, data, at_, np.array([size]), n_, io)
            else:
                second = (first + 7) & ~7
                sizes = np.array([first]), np.array([size - second])
                runs = batch_runs.chunk_runs(
                    page.runs.rle, data, at_, sizes[0], at_ + second, sizes[1], n_, io
                )
                got = batch_runs.values(runs)
        except LanceTableError:  # damaged runs: the general decoder says how
            return None
        return got if isinstance(got, Fixed) else None
    # inline bitpacking: blocks of 1024 values, each led by a word holding its bit width
    word = t // 8
    if at % word:
        return None
    words = np.frombuffer(data, bitpacking.DTYPES[t], size // word, at)
    lanes = bitpacking.BLOCK // t
    blocks = []
    pos = 0
    for first in range(0, n, bitpacking.BLOCK):
        if pos >= words.size:
            return None
        w = int(words[pos])
        if w > t or pos + 1 + w * lanes > words.size:
            return None
        count = min(n - first, bitpacking.BLOCK)  # values of this block that are the page's
        block = words[pos + 1 : pos + 1 + w * lanes]
        if floor is not None and floor > 0 and w < t and (1 << w) <= floor:
            blocks.append(np.zeros(count, bitpacking.DTYPES[t]))
        elif count <= bitpacking.HEAD_VALUES:
            blocks.append(bitpacking.unpack_head(block, t, w, count))
        else:
            blocks.append(bitpacking.unpack(block, t, w, 1)[:count])
        pos += 1 + w * lanes
    unpacked = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
    return Fixed(batch.as_bytes(unpacked), t)


def _variable(
    page: SmallPage, data: memoryview, at: int, size: int, n: int, dtype: pa.DataType, io: PageIO
) -> pa.Array | None:
    """Variable-width values (``[n + 1 offsets][bytes]``), decompressed if FSST, as Arrow."""
    width = page.bits // 8
    if (n + 1) * width > size or not _is_binary(dtype):
        return None
    offsets = np.frombuffer(data, _UINT[width], n + 1, at).astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    if lo < (n + 1) * width or hi > size or hi - lo > _MAX_SMALL_OFFSET:
        return None
    if bool(np.any(offsets[1:] < offsets[:-1])):
        return None
    body: bytes | memoryview = bytes(data[at + lo : at + hi])
    offsets -= lo
    if page.symbols is not None:
        got = expand(Var(body, offsets, page.symbols), io)
        body, offsets = got.data, got.offsets
        if int(offsets[-1]) > _MAX_SMALL_OFFSET:
            return None
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    index = offsets if large else offsets.astype(np.int32)
    return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(index), pa.py_buffer(body)], null_count=0)


@functools.lru_cache(maxsize=256)
def _plain_width(dtype: pa.DataType) -> int:
    """The byte width of a type whose Arrow array is its values' bytes as they are (what
    :func:`to_arrow` builds for them), or 0 (booleans, lists, anything else)."""
    if pa.types.is_boolean(dtype) or pa.types.is_fixed_size_list(dtype):
        return 0
    return byte_width(dtype)


@functools.lru_cache(maxsize=256)
def _is_binary(dtype: pa.DataType) -> bool:
    """:func:`is_binary`, remembered by type."""
    return is_binary(dtype)
