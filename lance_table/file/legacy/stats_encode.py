"""Page statistics of legacy (0.1) Lance files: which fields get them, their values and their schema.

Every row group ("batch") of a legacy file gets one statistics row per eligible field: the number of
nulls and a lower and upper bound of the values. The rules follow the format documents and what
pylance 14 writes:

* integers, dates and decimals: the plain minimum and maximum; when every value is null, the
  smallest and largest value of the type;
* floats: NaN is ignored and infinities count as values; with no value left the bounds are -inf
  and +inf; a zero minimum is stored as -0.0 and a zero maximum as +0.0;
* bool: the minimum is true only if no false is present, the maximum is false only if no true is;
* strings and binary: values longer than 64 bytes are cut to 64 bytes (strings at a character
  boundary) before comparing; if any value was cut, the maximum is raised to the next string
  (or byte string) so that it stays an upper bound, and becomes null if there is none. With no
  value the bounds are null.

The statistics are themselves stored as a small columnar table: for the k-th eligible field a
struct named after the field id (id ``4k``) with the children ``null_count`` (``4k+1``),
``min_value`` (``4k+2``) and ``max_value`` (``4k+3``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.schema import (
    ENCODING_NONE,
    ENCODING_PLAIN,
    ENCODING_VAR_BINARY,
    FieldNode,
    LanceField,
)

#: Values longer than this many bytes are cut before they are compared.
PREFIX_BYTES = 64

_INT_DTYPES: dict[pa.DataType, np.dtype[Any]] = {
    pa.int8(): np.dtype("<i1"),
    pa.uint8(): np.dtype("<u1"),
    pa.int16(): np.dtype("<i2"),
    pa.uint16(): np.dtype("<u2"),
    pa.int32(): np.dtype("<i4"),
    pa.uint32(): np.dtype("<u4"),
    pa.int64(): np.dtype("<i8"),
    pa.uint64(): np.dtype("<u8"),
    pa.date32(): np.dtype("<i4"),
    pa.date64(): np.dtype("<i8"),
}
_FLOAT_DTYPES: dict[pa.DataType, np.dtype[Any]] = {
    pa.float32(): np.dtype("<f4"),
    pa.float64(): np.dtype("<f8"),
}
_STRING_TYPES = (pa.string(), pa.large_string())
_BINARY_TYPES = (pa.binary(), pa.large_binary())
_DECIMAL_MIN = -(1 << 127)
_DECIMAL_MAX = (1 << 127) - 1


def has_statistics(t: pa.DataType) -> bool:
    """Whether legacy files carry page statistics for a field of Arrow type ``t``."""
    return (
        t in _INT_DTYPES
        or t in _FLOAT_DTYPES
        or t == pa.bool_()
        or t in _STRING_TYPES
        or t in _BINARY_TYPES
        or pa.types.is_decimal128(t)
    )


@dataclass(frozen=True)
class BatchStats:
    """The statistics of one field in one batch.

    ``min_value``/``max_value`` are Python values: ``int`` for integers and dates (days or
    milliseconds) and for decimals (the unscaled integer), ``float``, ``bool``, ``str`` or
    ``bytes``, or ``None`` (strings and binary only) when there is no bound.
    """

    null_count: int
    min_value: Any
    max_value: Any


def compute_stats(arr: pa.Array) -> BatchStats:
    """The statistics of one batch of a field.

    Args:
        arr: the field's values in the batch (for a struct child, the child array itself, whose
            nulls do not include the parent's).

    Raises:
        ValueError: the array's type gets no statistics (see :func:`has_statistics`).
    """
    t = arr.type
    nulls = arr.null_count
    lo: Any
    hi: Any
    if t in _INT_DTYPES:
        lo, hi = _int_bounds(arr, _INT_DTYPES[t])
    elif t in _FLOAT_DTYPES:
        lo, hi = _float_bounds(arr)
    elif t == pa.bool_():
        lo, hi = _bool_bounds(arr)
    elif pa.types.is_decimal128(t):
        lo, hi = _decimal_bounds(arr)
    elif t in _STRING_TYPES or t in _BINARY_TYPES:
        lo, hi = _bytes_bounds(arr, text=t in _STRING_TYPES)
    else:
        raise ValueError(f"no statistics for Arrow type {t}")
    return BatchStats(nulls, lo, hi)


def _int_bounds(arr: pa.Array, dtype: np.dtype[Any]) -> tuple[int, int]:
    vals = np.frombuffer(arr.buffers()[1], dtype, len(arr), arr.offset * dtype.itemsize)
    if arr.null_count:
        vals = vals[np.asarray(arr.is_valid())]
    if not vals.size:
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return int(vals.min()), int(vals.max())


def _float_bounds(arr: pa.Array) -> tuple[float, float]:
    vals = np.asarray(arr.to_numpy(zero_copy_only=False))  # nulls come back as NaN
    vals = vals[~np.isnan(vals)]
    if not vals.size:
        return float("-inf"), float("inf")
    lo, hi = float(vals.min()), float(vals.max())
    return (-0.0 if lo == 0 else lo), (0.0 if hi == 0 else hi)


def _bool_bounds(arr: pa.Array) -> tuple[bool, bool]:
    vals = np.asarray(arr.drop_null().to_numpy(zero_copy_only=False), bool)
    true_seen = bool(vals.any())
    false_seen = bool(vals.size) and not bool(vals.all())
    return true_seen and not false_seen, true_seen or not false_seen


def _decimal_bounds(arr: pa.Array) -> tuple[int, int]:
    raw = np.frombuffer(arr.buffers()[1], np.dtype([("lo", "<u8"), ("hi", "<i8")]), len(arr), arr.offset * 16)
    if arr.null_count:
        raw = raw[np.asarray(arr.is_valid())]
    if not raw.size:
        return _DECIMAL_MIN, _DECIMAL_MAX
    order = np.lexsort((raw["lo"], raw["hi"]))
    lo, hi = raw[order[0]], raw[order[-1]]
    return (int(lo["hi"]) << 64) | int(lo["lo"]), (int(hi["hi"]) << 64) | int(hi["lo"])


def _bytes_bounds(arr: pa.Array, *, text: bool) -> tuple[Any, Any]:
    vals = arr.drop_null()
    if not len(vals):
        return None, None
    long = np.asarray(pc.greater(pc.binary_length(vals), PREFIX_BYTES))
    if not long.any():
        mm = pc.min_max(vals)
        return mm["min"].as_py(), mm["max"].as_py()
    short = vals.filter(pa.array(~long))
    # Only the (rare) long values are cut one by one.
    cut = [_truncate(v, text) for v in vals.filter(pa.array(long)).to_pylist()]
    candidates = cut
    if len(short):
        mm = pc.min_max(short)
        candidates = [*cut, mm["min"].as_py(), mm["max"].as_py()]
    key = (lambda v: v.encode()) if text else (lambda v: v)
    lo = min(candidates, key=key)
    hi = max(candidates, key=key)
    return lo, (increment_utf8(hi) if text else increment_binary(hi))


def _truncate(value: Any, text: bool) -> Any:
    if not text:
        return value[:PREFIX_BYTES]
    # Cutting valid UTF-8 can only leave a partial character at the end, which "ignore" drops.
    return value.encode()[:PREFIX_BYTES].decode("utf-8", "ignore")


def increment_utf8(value: str) -> str | None:
    """The string a truncated maximum becomes: raise the last byte that can be raised so that
    the bytes stay valid UTF-8 (later bytes are kept). ``None`` if no byte can be raised."""
    data = bytearray(value.encode())
    for i in range(len(data) - 1, -1, -1):
        original = data[i]
        for byte in range(original + 1, 256):
            data[i] = byte
            try:
                return data.decode()
            except UnicodeDecodeError:
                continue
        data[i] = original
    return None


def increment_binary(value: bytes) -> bytes | None:
    """A byte-wise +1 with carry; ``None`` when every byte overflows."""
    data = bytearray(value)
    for i in range(len(data) - 1, -1, -1):
        if data[i] != 0xFF:
            data[i] += 1
            return bytes(data)
        data[i] = 0
    return None


# ---------------------------------------------------------------------------------------------
# collecting over a file


@dataclass
class StatsColumn:
    """The statistics of one data field over all the batches of a file."""

    field: LanceField
    arrow_type: pa.DataType
    null_counts: list[int] = dc_field(default_factory=list)
    mins: list[Any] = dc_field(default_factory=list)
    maxs: list[Any] = dc_field(default_factory=list)


def stats_fields(roots: Iterable[FieldNode]) -> list[FieldNode]:
    """The fields that get statistics, by field id: every eligible field reached from the top
    level through structs only (not into lists, maps or dictionaries)."""
    out: list[FieldNode] = []

    def visit(node: FieldNode) -> None:
        if pa.types.is_struct(node.arrow_type):
            for child in node.children:
                visit(child)
        elif has_statistics(node.arrow_type):
            out.append(node)

    for root in roots:
        visit(root)
    return sorted(out, key=lambda n: n.id)


class StatisticsCollector:
    """Gathers one statistics row per batch for every eligible field of a schema."""

    def __init__(self, roots: list[FieldNode]) -> None:
        self._roots = roots
        self.columns = {n.id: StatsColumn(n.field, n.arrow_type) for n in stats_fields(roots)}

    def add_batch(self, columns: Iterable[pa.Array]) -> None:
        """Add the statistics of one batch, given the arrays of the top-level fields."""
        for node, arr in _walk_structs(self._roots, columns):
            col = self.columns.get(node.id)
            if col is not None:
                st = compute_stats(arr)
                col.null_counts.append(st.null_count)
                col.mins.append(st.min_value)
                col.maxs.append(st.max_value)

    def finish(self) -> list[StatsColumn]:
        """The collected columns, by field id."""
        return [self.columns[k] for k in sorted(self.columns)]


def _walk_structs(
    nodes: Iterable[FieldNode], arrays: Iterable[pa.Array]
) -> Iterator[tuple[FieldNode, pa.Array]]:
    for node, arr in zip(nodes, arrays):
        if pa.types.is_struct(node.arrow_type):
            yield from _walk_structs(node.children, (arr.field(i) for i in range(len(node.children))))
        else:
            yield node, arr


def stats_schema(columns: Iterable[StatsColumn]) -> list[LanceField]:
    """The Lance fields of the statistics table (ids ``4k .. 4k+3`` for the k-th column)."""
    out: list[LanceField] = []
    for k, col in enumerate(columns):
        base = 4 * k
        enc = ENCODING_VAR_BINARY if col.arrow_type in _STRING_TYPES + _BINARY_TYPES else ENCODING_PLAIN
        lt = col.field.logical_type
        out += [
            LanceField(base, -1, str(col.field.id), "struct", nullable=False, encoding=ENCODING_NONE),
            LanceField(base + 1, base, "null_count", "int64", nullable=False, encoding=ENCODING_PLAIN),
            LanceField(base + 2, base, "min_value", lt, nullable=True, encoding=enc),
            LanceField(base + 3, base, "max_value", lt, nullable=True, encoding=enc),
        ]
    return out


def stats_arrays(col: StatsColumn) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The ``null_count``, ``min_value`` and ``max_value`` columns of one field's statistics."""
    counts = pa.array(col.null_counts, pa.int64())
    t = col.arrow_type
    if pa.types.is_decimal128(t):
        return counts, _raw_decimals(col.mins, t), _raw_decimals(col.maxs, t)
    return counts, pa.array(col.mins, t), pa.array(col.maxs, t)


def _raw_decimals(values: list[int], t: pa.DataType) -> pa.Array:
    """Decimals from unscaled integers, which may lie outside the precision (all-null bounds)."""
    data = b"".join(v.to_bytes(16, "little", signed=True) for v in values)
    return pa.Array.from_buffers(t, len(values), [None, pa.py_buffer(data)])
