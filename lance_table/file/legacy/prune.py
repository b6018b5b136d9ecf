"""Skipping batches of a legacy file with its page statistics.

Two questions can be asked of the statistics of a batch:

* :func:`may_match`: can any row *as the reader returns it* satisfy ``column <op> literal``? Only a
  batch whose bounds prove that no row can is excluded. Values as read differ from what was written:
  a null number reads as 0 (a bool as False) and is not in the bounds but counted in ``null_count``;
  NaN is never in float bounds, and compares as pylance compares it (greater than every number, equal
  to itself; -0.0 equals +0.0); a string is null as read when it was null or empty on a nullable field.
* :func:`pylance_verdicts`: what pylance's filtered scan decides for each batch from the same
  statistics (DataFusion guarantees): ``NONE`` (skipped, even when a row as read would match),
  ``ALL`` (returned whole, even rows that as read do not match) or ``SOME`` (the filter is
  evaluated on the rows as read). Reproducing ``to_table(filter=...)`` needs these.

Supported ops: ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``is_null``, ``is_not_null``, ``in``
(a list of literals) and ``between`` (a ``(low, high)`` pair, both inclusive).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.file.legacy.decode import is_var_binary
from lance_table.file.legacy.stats import FieldStatistics, PageStatistics

NONE, SOME, ALL = 0, 1, 2
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
OPS = (*COMPARISONS, "is_null", "is_not_null", "in", "between")


def may_match(
    stats: PageStatistics, field_id: int, op: str, value: Any = None, *, nullable: bool = True
) -> np.ndarray:
    """Per batch, whether a row as read may satisfy ``field <op> value`` (False only when proven).

    ``nullable`` is the data field's nullability (it decides whether empty strings read as null).
    A field without statistics gives True for every batch, and so do batches whose statistics
    cannot be true (``FieldStatistics.trusted``).

    Raises:
        ValueError: the op is unknown or its literal has the wrong shape.
    """
    nb = stats.num_batches
    fs = stats.fields.get(field_id)
    op = _op(op)
    if fs is None:
        return np.ones(nb, bool)
    if op == "in":
        out = np.zeros(nb, bool)
        for v in _values(value, op):
            out |= may_match(stats, field_id, "=", v, nullable=nullable)
        return out
    if op == "between":
        lo, hi = _values(value, op, 2)
        return may_match(stats, field_id, ">=", lo, nullable=nullable) & may_match(
            stats, field_id, "<=", hi, nullable=nullable
        )
    return _may_match(stats, fs, op, value, nullable) | fs.untrusted()


def _may_match(stats: PageStatistics, fs: FieldStatistics, op: str, value: Any, nullable: bool) -> np.ndarray:
    """:func:`may_match` of one comparison or null test, as far as the statistics tell."""
    nb = stats.num_batches
    rows = stats.batch_rows
    t = fs.min_value.type
    string = is_var_binary(t)
    if op in ("is_null", "is_not_null"):
        if not string or not nullable:
            return (rows > 0) if op == "is_not_null" else np.zeros(nb, bool)
        # Null as read: written null, or empty (an empty minimum itself reads back as null).
        can_null = (fs.null_count > 0) | np.asarray(fs.min_value.is_null())
        return can_null if op == "is_null" else fs.null_count < rows
    if value is None:
        return np.zeros(nb, bool)  # a comparison with NULL is never true
    if string:
        present = fs.null_count < rows
        return present & _interval(fs, op, value, unbounded=True)
    present = rows > 0
    out = present & _interval(fs, op, value, unbounded=False)
    # Nulls read back as the zero value, which the bounds do not cover.
    zero = pa.Array.from_buffers(t, 1, [None, pa.py_buffer(bytes(max(t.bit_width // 8, 1)))])
    if _holds(zero, op, value):
        out |= fs.null_count > 0
    if pa.types.is_floating(t) and _nan_holds(op, value):
        out |= present  # a NaN row may be there: the bounds ignore NaN
    return out


def pylance_verdicts(
    stats: PageStatistics, field_id: int, op: str, value: Any = None, *, nullable: bool = True
) -> np.ndarray:
    """Per batch, pylance's decision from the statistics: ``NONE``, ``SOME`` or ``ALL`` (int8).

    A batch whose ``null_count`` equals its rows is all null for pylance (``is_null`` gives ALL,
    anything else NONE); otherwise ``is_null`` gives NONE, ``is_not_null`` ALL, and comparisons
    follow the ``[min, max]`` interval alone (a null bound is unbounded). ``in`` and ``between``
    combine their comparisons. A field without statistics gives SOME everywhere.

    Raises:
        ValueError: the op is unknown or its literal has the wrong shape.
    """
    nb = stats.num_batches
    fs = stats.fields.get(field_id)
    op = _op(op)
    if fs is None:
        return np.full(nb, SOME, np.int8)
    if op == "in":
        parts = [pylance_verdicts(stats, field_id, "=", v, nullable=nullable) for v in _values(value, op)]
        return np.maximum.reduce(parts) if parts else np.full(nb, NONE, np.int8)
    if op == "between":
        lo, hi = _values(value, op, 2)
        return np.minimum(
            pylance_verdicts(stats, field_id, ">=", lo, nullable=nullable),
            pylance_verdicts(stats, field_id, "<=", hi, nullable=nullable),
        )
    rows = stats.batch_rows
    all_null = (fs.null_count == rows) if nullable else np.zeros(nb, bool)
    out = np.full(nb, SOME, np.int8)
    if op in ("is_null", "is_not_null"):
        out[:] = NONE if op == "is_null" else ALL
    elif value is None:
        out[:] = NONE
    else:
        never = _interval(fs, op, value, unbounded=True)
        always = ~_interval(fs, _NEGATE[op], value, unbounded=True)
        out[~never] = NONE
        out[never & always] = ALL
    out[all_null] = ALL if op == "is_null" else NONE
    out[rows == 0] = NONE
    return out


_NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _op(op: str) -> str:
    op = {"==": "=", "<>": "!="}.get(op, op).lower()
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; expected one of {OPS}")
    return op


def _values(value: Any, op: str, n: int | None = None) -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{op} needs a sequence of literals, got {value!r}")
    out = list(value)
    if n is not None and len(out) != n:
        raise ValueError(f"{op} needs {n} literals, got {len(out)}")
    return out


def _literal(value: Any, t: pa.DataType) -> pa.Scalar | None:
    """The literal as a scalar of the field's type, or None when the type cannot hold it."""
    try:
        return pa.scalar(value, t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _interval(fs: FieldStatistics, op: str, value: Any, *, unbounded: bool) -> np.ndarray:
    """Whether some value in ``[min, max]`` satisfies the comparison (NaN-free bounds).

    With ``unbounded``, a null bound does not limit the interval; otherwise the bounds are
    non-null and a batch whose min exceeds its max holds no value in them.
    """
    lo, hi = fs.min_value, fs.max_value
    nb = len(lo)
    t = lo.type
    if _is_nan(value):
        # NaN is above every number and equal to itself.
        return np.full(nb, op in ("!=", "<", "<="), bool)
    v = _literal(value, t)
    if v is None:
        return _out_of_range(fs, op, value)
    fill = unbounded

    def cmp(fn: Any, a: pa.Array) -> np.ndarray:
        return np.asarray(fn(a, v).fill_null(fill), bool)

    nonempty = np.ones(nb, bool) if unbounded else np.asarray(pc.less_equal(lo, hi).fill_null(True), bool)
    if op == "=":
        return nonempty & cmp(pc.less_equal, lo) & cmp(pc.greater_equal, hi)
    if op == "!=":
        single = np.asarray(pc.and_(pc.equal(lo, v), pc.equal(hi, v)).fill_null(False), bool)
        return nonempty & ~single
    if op in ("<", "<="):
        return nonempty & cmp(pc.less if op == "<" else pc.less_equal, lo)
    return nonempty & cmp(pc.greater if op == ">" else pc.greater_equal, hi)


def _out_of_range(fs: FieldStatistics, op: str, value: Any) -> np.ndarray:
    """Comparisons with a number the field's integer type cannot hold."""
    nb = len(fs.min_value)
    t = fs.min_value.type
    if not (pa.types.is_integer(t) and isinstance(value, (int, float)) and not isinstance(value, bool)):
        return np.ones(nb, bool)  # unknown literal kind: keep the batch
    above = value > 0  # beyond the type's maximum (or below its minimum)
    if op == "=":
        return np.zeros(nb, bool)
    if op == "!=":
        return np.ones(nb, bool)
    return np.full(nb, above == (op in ("<", "<=")), bool)


def _holds(zero: pa.Array, op: str, value: Any) -> bool:
    """Whether the single value ``zero[0]`` satisfies the comparison (as pylance compares)."""
    if _is_nan(value):
        return op in ("!=", "<", "<=")
    v = _literal(value, zero.type)
    if v is None:
        return bool(_out_of_range(FieldStatistics(-1, np.zeros(1, np.int64), zero, zero), op, value)[0])
    fn = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater}
    return bool(fn.get(op, pc.greater_equal)(zero, v)[0].as_py())


def _nan_holds(op: str, value: Any) -> bool:
    """Whether a NaN row satisfies the comparison: NaN is the greatest value and equals itself."""
    if _is_nan(value):
        return op in ("=", "<=", ">=")
    return op in ("!=", ">", ">=")
