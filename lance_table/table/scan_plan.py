"""The plan of a scan: the top-level columns, system columns, filter, offset, limit and batch size
it reads, checked against the schema; filters compiled once per predicate and schema."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import SchemaError
from lance_table.extensions import storage_schema
from lance_table.table.row_ids import FILTERABLE, ROW_ID, ROW_OFFSET
from lance_table.table.scan_spec import default_batch_size

if TYPE_CHECKING:
    from lance_table.filters.bounds import Condition
    from lance_table.filters.interval import Interval


Predicate: TypeAlias = "str | pc.Expression"


@dataclass
class ScanPlan:
    """What a scan reads: top-level ``columns``, then the ``system`` columns, of the live rows that
    pass ``filter`` (which reads ``filter_columns`` and the system columns ``filter_system``)."""

    columns: list[str]
    filter: pc.Expression | None
    filter_columns: list[str]
    system: tuple[str, ...]
    batch_size: int
    offset: int
    limit: int | None
    # simple conditions the filter implies, for skipping pages by their statistics
    conditions: tuple[Condition, ...] = ()
    # the filter as simple conditions, when they are all of it (evaluated with numpy if they can)
    exact: tuple[Condition, ...] | None = None
    filter_system: tuple[str, ...] = ()
    # the ``_rowoffset`` of each fragment's first live row, by fragment id (when ``_rowoffset`` is read)
    offset_bases: Mapping[int, int] = field(default_factory=dict)
    # the filter as an interval of one integer column, when it is only that (read off packed values)
    interval: Interval | None = None

    @property
    def with_row_id(self) -> bool:
        return ROW_ID in self.system


def make_spec(
    schema: pa.Schema,
    columns: Sequence[str] | None,
    filter: Predicate | None,
    with_row_id: bool,
    batch_size: int | None,
    offset: int | None,
    limit: int | None,
    use_stats: bool = True,
    *,
    system: Sequence[str] = (),
    offset_bases: Mapping[int, int] | None = None,
) -> ScanPlan:
    """Validate scan options against the schema.

    With ``use_stats``, pages whose statistics prove the filter false are skipped (legacy files).
    ``system`` names the system columns appended after ``columns`` (``with_row_id`` appends
    ``_rowid``); ``offset_bases`` is needed for ``_rowoffset`` (see :func:`row_ids.offset_bases`).
    The filter may read ``_rowid`` and ``_rowaddr``.

    Raises:
        SchemaError: an unknown column.
        FilterError: the predicate does not parse.
        ValueError: a negative offset, limit or batch size.
    """
    names = schema.names
    if columns is None:
        cols = list(names)
    else:
        if isinstance(columns, str):
            raise TypeError("columns must be a list of column names")
        cols = list(columns)
        for c in cols:
            if c not in names:
                raise SchemaError(f"column {c!r} is not in the dataset; columns are {names}")
    expr = None
    fcols: list[str] = []
    fsystem: tuple[str, ...] = ()
    fschema = filter_schema(schema)
    if filter is not None:
        expr, fcols = _compile_filter(filter, fschema)
        fsystem = tuple(c for c in fcols if c not in names)
        fcols = [c for c in fcols if c in names]
    if (offset or 0) < 0 or (limit is not None and limit < 0):
        raise ValueError("offset and limit must not be negative")
    size = batch_size or default_batch_size()
    if size <= 0:
        raise ValueError("batch_size must be positive")
    conditions: tuple[Condition, ...] = ()
    exact = None
    if isinstance(filter, str):
        found, stats, whole = _terms_cached(filter, hashable(fschema))
        conditions = stats if use_stats else ()
        exact = found if whole else None
    extra = tuple(dict.fromkeys([*((ROW_ID,) if with_row_id else ()), *system]))
    if ROW_OFFSET in extra and offset_bases is None:
        raise ValueError("reading _rowoffset needs the offsets of the fragments' first rows")
    bases = offset_bases or {}
    bounded = None
    if exact and not fsystem:
        from lance_table.filters.interval import interval  # (loaded with the filter already)

        bounded = interval(exact, fschema)
    return ScanPlan(
        cols, expr, fcols, extra, size, offset or 0, limit, conditions, exact, fsystem, bases, bounded
    )


def filter_schema(schema: pa.Schema) -> pa.Schema:
    """The schema a filter is compiled against: ``schema`` and the system columns a filter may
    read (a dataset column of the same name wins)."""
    extra = [pa.field(n, pa.uint64()) for n in FILTERABLE if n not in schema.names]
    return pa.schema([*schema, *extra], metadata=schema.metadata) if extra else schema


def hashable(schema: pa.Schema) -> pa.Schema:
    """``schema``, or its storage form when a Python extension type in it cannot be hashed (the
    compiled filters are cached by schema)."""
    try:
        hash(schema)
    except TypeError:
        return storage_schema(schema)
    return schema


@functools.lru_cache(maxsize=256)
def _terms_cached(
    predicate: str, schema: pa.Schema
) -> tuple[tuple[Condition, ...], tuple[Condition, ...], bool]:
    """The predicate's simple conditions, those of them statistics may decide, and whether the
    conditions are the whole predicate."""
    from lance_table.filters.bounds import stats_conditions, terms  # sqlglot loads with the first filter

    found, whole = terms(predicate, schema)
    return tuple(found), stats_conditions(found), whole


@functools.lru_cache(maxsize=256)
def _compile_cached(predicate: str, schema: pa.Schema) -> tuple[pc.Expression, tuple[str, ...]]:
    from lance_table.filters import compile_filter  # sqlglot loads on the first filter, not on import

    expr, columns = compile_filter(predicate, schema)
    return expr, tuple(columns)


def _compile_filter(predicate: Predicate, schema: pa.Schema) -> tuple[pc.Expression, list[str]]:
    """The expression and the columns it reads (SQL text is compiled once per schema)."""
    if isinstance(predicate, str):
        expr, cols = _compile_cached(predicate, hashable(schema))
        return expr, list(cols)
    from lance_table.filters import compile_filter

    return compile_filter(predicate, schema)


def output_schema(schema: pa.Schema, spec: ScanPlan) -> pa.Schema:
    fields = [schema.field(c) for c in spec.columns]
    fields.extend(pa.field(n, pa.uint64()) for n in spec.system)
    return pa.schema(fields, metadata=schema.metadata)
