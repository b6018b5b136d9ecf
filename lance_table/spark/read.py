"""Reading: one Spark partition per fragment (large fragments split into row ranges), one pinned version."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from lance_table.format.manifest import Fragment
from lance_table.schema import LanceField, build_tree
from lance_table.spark.types import cast_batch
from lance_table.storage import open_storage
from lance_table.table.fragment import FragmentReader
from lance_table.table.scan import ScanPlan, _read_matching, make_spec

# Values whose meaning does not depend on a session time zone can be pushed down safely.
_PUSHABLE = (bool, int, float, str, bytes, decimal.Decimal, dt.date)


@dataclass
class FragmentRange(InputPartition):
    """A task's share: rows ``[start, stop)`` of one fragment."""

    fragment: Fragment
    start: int
    stop: int


def _literal(value: Any) -> bool:
    return isinstance(value, _PUSHABLE) and not isinstance(value, dt.datetime)


def to_expression(f: Filter) -> pc.Expression | None:
    """A pyarrow expression with Spark's semantics for a pushed filter, or None to leave it to Spark."""
    field = getattr(f, "attribute", None)
    ref = pc.field(*field) if field else None
    value = getattr(f, "value", None)
    if isinstance(f, (EqualTo, EqualNullSafe)) and _literal(value):
        return ref == value  # with a non-null value, <=> and = select the same rows
    comparisons = {
        GreaterThan: lambda r, v: r > v,
        GreaterThanOrEqual: lambda r, v: r >= v,
        LessThan: lambda r, v: r < v,
        LessThanOrEqual: lambda r, v: r <= v,
    }
    for kind, make in comparisons.items():
        if isinstance(f, kind) and _literal(value):
            return make(ref, value)
    if isinstance(f, In) and f.value and all(_literal(v) for v in f.value):
        return ref.isin(list(f.value))  # type: ignore[union-attr]
    if isinstance(f, IsNull):
        return ref.is_null()  # type: ignore[union-attr]
    if isinstance(f, IsNotNull):
        return ref.is_valid()  # type: ignore[union-attr]
    if isinstance(f, StringStartsWith):
        return pc.starts_with(ref, f.value)
    if isinstance(f, StringEndsWith):
        return pc.ends_with(ref, f.value)
    if isinstance(f, StringContains):
        return pc.match_substring(ref, f.value)
    if isinstance(f, Not):
        inner = to_expression(f.child)
        return ~inner if inner is not None else None
    return None


class LanceTableReader(DataSourceReader):
    """Plans partitions on the driver and reads them in the tasks."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None,
        fields: Sequence[LanceField],
        schema_metadata: Mapping[str, bytes],
        fragments: Sequence[Fragment],
        columns: list[str],
        spark_arrow: pa.Schema,
        sql_filter: str | None,
        batch_size: int,
        max_rows_per_partition: int,
        *,
        dictionaries: Mapping[int, pa.Array] | None = None,
    ) -> None:
        self.uri = uri
        # legacy datasets: the manifest's dictionary values, which their files are read with
        self.dictionaries = dict(dictionaries or {})
        self.storage_options = dict(storage_options) if storage_options else None
        self.fields = tuple(fields)
        self.schema_metadata = dict(schema_metadata)
        self.fragments = tuple(fragments)
        self.columns = columns
        self.spark_arrow = spark_arrow
        self.sql_filter = sql_filter
        self.batch_size = batch_size
        self.max_rows = max_rows_per_partition
        self.pushed: list[pc.Expression] = []

    def partitions(self) -> list[FragmentRange]:
        parts = []
        for frag in self.fragments:
            for start in range(0, frag.physical_rows, self.max_rows):
                parts.append(FragmentRange(frag, start, min(start + self.max_rows, frag.physical_rows)))
        return parts

    def _spec(self) -> ScanPlan:
        from lance_table.filters import parse_filter
        from lance_table.schema import arrow_schema_from_fields

        schema = arrow_schema_from_fields(self.fields, self.schema_metadata)
        expr = parse_filter(self.sql_filter, schema) if self.sql_filter else None
        for pushed in self.pushed:
            expr = pushed if expr is None else expr & pushed
        return make_spec(schema, self.columns, expr, False, self.batch_size, None, None)

    def read(self, partition: FragmentRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        storage = open_storage(self.uri, self.storage_options)
        roots = {n.name: n for n in build_tree(self.fields)}
        frag = FragmentReader(partition.fragment, storage, roots, dictionaries=self.dictionaries)
        spec = self._spec()
        where = f"{self.uri} fragment {partition.fragment.id}"
        step = max(self.batch_size, 64 * 1024)
        for lo in range(partition.start, partition.stop, step):
            hi = min(lo + step, partition.stop)
            table, runs = _read_matching(frag, spec, lo, hi)
            if not runs.total:
                continue
            if not spec.columns:
                yield _no_columns(runs.total)
                continue
            for batch in table.combine_chunks().to_batches(max_chunksize=self.batch_size):
                yield cast_batch(batch, self.spark_arrow, where)


def _no_columns(n: int) -> pa.RecordBatch:
    """A batch of ``n`` rows and no columns."""
    return pa.RecordBatch.from_struct_array(pa.StructArray.from_buffers(pa.struct([]), n, [None]))


class PushdownReader(LanceTableReader):
    """The reader with filter pushdown. Spark refuses every query through a reader that defines
    ``pushFilters`` unless ``spark.sql.python.filterPushdown.enabled`` is true, so this variant is
    only used by the source that :func:`lance_table.spark.register` installs (and which sets it).
    """

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Keep the filters that translate exactly; hand the rest back to Spark.

        Each call states the whole set of pushed filters for the query about to run.
        """
        pushed, rejected = [], []
        for f in filters:
            expr = to_expression(f)
            if expr is None:
                rejected.append(f)
            else:
                pushed.append(expr)
        self.pushed = pushed
        return iter(rejected)
