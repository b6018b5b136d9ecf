"""The top-level columns a pyarrow compute expression reads."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc


def _binds(expr: pc.Expression, schema: pa.Schema, names: Sequence[str]) -> bool:
    """Whether ``expr`` can be evaluated with only the columns ``names`` of ``schema``."""
    wanted = set(names)
    sub = pa.schema([f for f in schema if f.name in wanted])
    try:
        sub.empty_table().filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
        return False
    return True


def expression_columns(expr: pc.Expression, schema: pa.Schema) -> list[str]:
    """The top-level columns ``expr`` reads, found by group testing: binding fails iff one is missing."""
    names = list(schema.names)
    if len(set(names)) != len(names) or not _binds(expr, schema, names):
        return names

    @functools.cache
    def binds(kept: frozenset[str]) -> bool:
        return _binds(expr, schema, [n for n in names if n in kept])

    def needed(candidates: list[str], base: frozenset[str]) -> list[str]:
        # invariant: the expression binds with base + candidates; find the candidates it reads
        if binds(base):
            return []
        if len(candidates) == 1:
            return candidates
        mid = len(candidates) // 2
        left, right = candidates[:mid], candidates[mid:]
        from_left = needed(left, base | frozenset(right))
        return from_left + needed(right, base | frozenset(from_left))

    # The columns named in the expression's text are a likely superset; when they suffice (the binding
    # says so, exactly), search only among them.
    text = str(expr)
    candidates = [n for n in names if n in text]
    if not binds(frozenset(candidates)):
        candidates = names
    found = set(needed(candidates, frozenset())) if candidates else set()
    return [n for n in names if n in found]
