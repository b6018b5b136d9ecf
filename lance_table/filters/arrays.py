"""``array_has``, ``array_has_any`` and ``array_has_all`` as Arrow compute functions.

Arrow has no kernel that tests list membership, so each is registered once per argument types as a
vectorized scalar function (a user-defined function of Arrow's registry, which compute expressions,
``Table.filter`` and Acero plans call like a built-in). The answers are DataFusion's, as pylance gives
them:

* ``array_has(l, v)``: TRUE when some element of ``l`` equals ``v``; NULL when ``l`` or ``v`` is NULL.
* ``array_has_any(l, [v, ...])``: TRUE when some element equals one of the values (a NULL value
  matches a NULL element); NULL for a NULL list, except that an empty value list gives FALSE for
  every row.
* ``array_has_all(l, [v, ...])``: TRUE when every value is an element (a NULL value is found where
  the list has a NULL element); NULL for a NULL list, except that an empty value list gives TRUE
  for every row.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._parallel import after_fork_in_child

_LOCK = threading.Lock()


def _new_lock() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # a forked child: another thread may have held it at the fork


after_fork_in_child(_new_lock)
_REGISTERED: dict[tuple[str, pa.DataType, pa.DataType], str] = {}


def call(kind: str, array: pc.Expression, array_type: pa.DataType, needle: pa.Scalar) -> pc.Expression:
    """The expression ``kind(array, needle)``; ``kind`` is ``has``, ``has_any`` or ``has_all``."""
    name = _function(kind, array_type, needle.type)
    # the kernel on no rows: raises now when the element and needle types do not compare
    _KERNELS[kind](_NoRows(), pa.array([], type=array_type), needle)
    return pc.Expression._call(name, [array, pc.scalar(needle)])


class _NoRows:
    batch_length = 0


def _function(kind: str, array_type: pa.DataType, needle_type: pa.DataType) -> str:
    key = (kind, array_type, needle_type)
    with _LOCK:
        name = _REGISTERED.get(key)
        if name is None:
            name = (
                f"lance_table_array_{kind}_{len(_REGISTERED)}_{re.sub(r'[^0-9a-z]+', '_', str(array_type))}"
            )
            pc.register_scalar_function(
                _KERNELS[kind],
                name,
                {"summary": f"array_{kind} as DataFusion answers it", "description": __doc__ or ""},
                {"array": array_type, "needle": needle_type},
                pa.bool_(),
            )
            _REGISTERED[key] = name
    return name


def _parents(array: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The elements of every (non-null) list, and the row each belongs to."""
    flat = pc.list_flatten(array)
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False)
    return flat, np.repeat(np.arange(len(array)), lengths)


def _rows_with(array: pa.Array, hits: pa.Array, parents: np.ndarray) -> np.ndarray:
    """Per row of ``array``: whether any of its elements is a hit."""
    found = np.asarray(pc.fill_null(hits, False).to_numpy(zero_copy_only=False), bool)
    return np.bincount(parents[found], minlength=len(array)) > 0


def _as_array(array: Any, length: int) -> pa.Array:
    if isinstance(array, pa.Scalar):
        return pa.array([array.as_py()] * length, type=array.type)
    return array


def _has(ctx: Any, array: Any, needle: Any) -> pa.Array:
    array = _as_array(array, ctx.batch_length)
    valid = pc.is_valid(array)
    if not needle.is_valid:
        return pa.nulls(len(array), pa.bool_())
    flat, parents = _parents(array)
    rows = _rows_with(array, pc.equal(flat, needle), parents)
    return pc.if_else(valid, pa.array(rows), None)


def _has_any(ctx: Any, array: Any, needle: Any) -> pa.Array:
    array = _as_array(array, ctx.batch_length)
    if not needle.is_valid or len(needle.values) == 0:
        return pa.array(np.zeros(len(array), bool))
    flat, parents = _parents(array)
    # a NULL value matches a NULL element
    hits = pc.is_in(flat, value_set=needle.values, skip_nulls=False)
    return pc.if_else(pc.is_valid(array), pa.array(_rows_with(array, hits, parents)), None)


def _has_all(ctx: Any, array: Any, needle: Any) -> pa.Array:
    array = _as_array(array, ctx.batch_length)
    if not needle.is_valid or len(needle.values) == 0:
        return pa.array(np.ones(len(array), bool))
    flat, parents = _parents(array)
    rows = np.ones(len(array), bool)
    for value in needle.values:  # a NULL value is found where a list has a NULL element
        hits = pc.equal(flat, value) if value.is_valid else pc.is_null(flat)
        rows &= _rows_with(array, hits, parents)
    return pc.if_else(pc.is_valid(array), pa.array(rows), None)


_KERNELS: dict[str, Callable[..., pa.Array]] = {"has": _has, "has_any": _has_any, "has_all": _has_all}
