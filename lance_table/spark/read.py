"""Reading: about equal Spark partitions of fragments' rows (large fragments split, small ones
packed; a small read spread over the cores), one version.

Spark plans a DataFrame's read once (partitions and the pickled reader) and reuses that plan in
every later query on the DataFrame or on a temporary view over it. A read that pins no version
must still show each query the latest version, so tasks look for a newer version when their query
started after the plan was made: every task of that query takes the latest version committed
before the query started (Spark's query id is a UUIDv7, which holds that time), so all of them read
the same version, and each reads its share (every ``slots``-th range) of that version's fragments.
"""

from __future__ import annotations

import bisect
import datetime as dt
import decimal
import itertools
import os
import time
import uuid
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

from lance_table.errors import VersionGoneError
from lance_table.format.manifest import Fragment, Manifest
from lance_table.schema import LanceField, arrow_schema_from_fields, build_tree
from lance_table.spark.options import merge_storage, task_storage_options
from lance_table.spark.types import cast_batch
from lance_table.spark.worker import on_task_cores, settle_worker
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.fragment import FragmentReader
from lance_table.table.scan import READ_CHUNK_ROWS, ROW_READS, ScanPlan, make_spec, output_schema
from lance_table.table.scan_groups import scan_tasks, task_groups

# Values whose meaning does not depend on a session time zone can be pushed down safely.
_PUSHABLE = (bool, int, float, str, bytes, decimal.Decimal, dt.date)


# System columns a read may project (appended after the data columns; cast_batch orders them).
SYSTEM_COLUMNS = ("_rowaddr", "_rowid")

# Spark's id of the running query (a UUIDv7 since Spark 4.0), which tasks see as a local property.
QUERY_ID_PROPERTY = "spark.sql.execution.query.id"


@dataclass
class FragmentRange(InputPartition):
    """A task's share: rows ``[start, stop)`` of one fragment (none for the placeholder of an empty
    dataset), and the row ranges of further small fragments in ``more``; the ``slot``-th of
    ``slots`` partitions planned."""

    fragment: Fragment | None
    start: int
    stop: int
    slot: int = 0
    slots: int = 1
    more: tuple[tuple[Fragment, int, int], ...] = ()


#: a task reads at least this many rows (when the read has that many): each Spark task costs far
#: more than opening a small fragment
MIN_PARTITION_ROWS = 64 * 1024


def planning_cores() -> int:
    """The cores a read is planned for: those this process may run on. Spark gives a Python data
    source's planning no view of the cluster; in local mode these are the executor's cores, and
    ``max_rows_per_partition`` bounds a task's share on a larger cluster."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def task_rows(total: int, max_rows: int, cores: int) -> int:
    """The rows of a task's share: an equal part of ``total`` for each of ``cores`` (as Spark's own
    file sources split a small read over the cores), at least :data:`MIN_PARTITION_ROWS`, at most
    ``max_rows``."""
    return max(1, min(max_rows, max(MIN_PARTITION_ROWS, -(-total // max(1, cores)))))


def _packed(
    ranges: Sequence[tuple[Fragment, int, int]], share: int, max_rows: int
) -> list[list[tuple[Fragment, int, int]]]:
    """Consecutive row ranges (each of at most ``share`` rows) grouped into about equal partitions
    of about ``share`` rows: as many as ``share`` makes of all the rows, cut where the running
    total comes nearest each equal part; a group above ``max_rows`` is cut again."""
    n = len(ranges)
    if not n:
        return []
    ends = list(itertools.accumulate(hi - lo for _, lo, hi in ranges))
    total = ends[-1]
    parts = max(1, -(-total // share))
    cuts = [0]
    for k in range(1, parts):
        goal = total * k / parts
        at = bisect.bisect_left(ends, goal)  # the range in which the goal falls
        before = ends[at - 1] if at else 0
        cut = at + 1 if ends[at] - goal <= goal - before else at
        if cuts[-1] < cut < n:
            cuts.append(cut)
    cuts.append(n)
    groups: list[list[tuple[Fragment, int, int]]] = []
    for lo, hi in itertools.pairwise(cuts):
        rows = max_rows + 1  # opens a group at the first range
        for piece in ranges[lo:hi]:
            size = piece[2] - piece[1]
            if rows + size > max_rows:
                groups.append([])
                rows = 0
            groups[-1].append(piece)
            rows += size
    return groups


def _ranges(fragments: Sequence[Fragment], max_rows: int) -> list[tuple[Fragment, int, int]]:
    """Each fragment's rows in equal ranges of at most ``max_rows`` rows."""
    out: list[tuple[Fragment, int, int]] = []
    for frag in fragments:
        n = frag.physical_rows
        if not n:
            continue
        size = -(-n // -(-n // max_rows))
        out.extend((frag, start, min(start + size, n)) for start in range(0, n, size))
    return out


def query_started() -> float | None:
    """When the query running this task started (seconds since the epoch), if Spark says."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    qid = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    try:
        parsed = uuid.UUID(qid) if qid else None
    except ValueError:
        return None
    if parsed is None or parsed.version != 7:
        return None
    return (parsed.int >> 80) / 1000.0


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
        version: int = 0,
        planned_at: float | None = None,
    ) -> None:
        self.uri = uri
        self.version = version
        # when the plan was made, for a read that follows the latest version (None: pinned)
        self.planned_at = planned_at
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
        # when pushFilters ran (see PushdownReader): the pushed filters belong to that query only
        self.pushed_at: float | None = None

    def partitions(self) -> list[FragmentRange]:
        total = sum(f.physical_rows for f in self.fragments)
        share = task_rows(total, self.max_rows, planning_cores())
        ranges = _ranges(self.fragments, share)
        if not ranges:
            # A read that follows the latest version needs a task for the rows appended later.
            return [FragmentRange(None, 0, 0)] if self.planned_at is not None else []
        groups = _packed(ranges, share, self.max_rows)
        n = len(groups)
        return [
            FragmentRange(frag, lo, hi, i, n, tuple(rest)) for i, ((frag, lo, hi), *rest) in enumerate(groups)
        ]

    def _spec(self, fields: Sequence[LanceField], schema_metadata: Mapping[str, bytes]) -> ScanPlan:
        schema = arrow_schema_from_fields(fields, schema_metadata)
        expr = None
        if self.sql_filter:  # the SQL parser is imported only by reads that need it
            from lance_table.filters import parse_filter

            expr = parse_filter(self.sql_filter, schema)
        for pushed in self._pushed_here():
            expr = pushed if expr is None else expr & pushed
        system = [c for c in self.columns if c in SYSTEM_COLUMNS and c not in schema.names]
        data = [c for c in self.columns if c not in system]
        return make_spec(schema, data, expr, False, self.batch_size, None, None, system=system)

    def _pushed_here(self) -> list[pc.Expression]:
        """The pushed filters, if the query running this task is the one they were pushed for.

        Spark 4.3 keeps the last planned read of a DataFrame (this pickled reader, pushed filters
        and all) and runs it for later queries on the DataFrame that push no filters. Filters are
        applied only by a task whose query started before they were pushed (the query that pushed
        them); Spark re-applies every filter itself (:meth:`PushdownReader.pushFilters` hands them
        all back), so skipping them is always correct and applying them only saves work. Outside a
        Spark task (no query to tell apart) they are applied.
        """
        if not self.pushed or self.pushed_at is None:
            return self.pushed
        from pyspark import TaskContext

        if TaskContext.get() is None:
            return self.pushed
        started = query_started()
        if started is None or started > self.pushed_at:
            return []
        return self.pushed

    def _newer(self, storage: Storage) -> Manifest | None:
        """The version this task's query must read instead of the planned one, if any: the latest
        committed before the query started, when the query started after the plan was made."""
        if self.planned_at is None:
            return None
        started = query_started()
        if started is None or started <= self.planned_at:
            return None  # the query that made the plan (or one Spark does not date)
        cutoff_ns = int((started + 0.001) * 1e9)  # the query id's time is in whole milliseconds
        for entry in reversed(versions.list_versions(storage)):
            if entry.version <= self.version:
                return None
            try:
                manifest = versions.read_manifest_file(storage, entry).manifest
            except VersionGoneError:
                continue  # cleaned up since the listing
            if manifest.timestamp_ns <= cutoff_ns:
                return manifest
        return None

    def read(self, partition: FragmentRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        settle_worker()
        return on_task_cores(self._read(partition))

    def _read(self, partition: FragmentRange) -> Iterator[pa.RecordBatch]:
        storage = open_storage(self.uri, merge_storage(task_storage_options(), self.storage_options))
        newer = self._newer(storage)
        if newer is None:
            if partition.fragment is None:
                return
            pieces = [(partition.fragment, partition.start, partition.stop), *partition.more]
            yield from self._read_pieces(
                storage, self.fields, self.schema_metadata, self.dictionaries, pieces
            )
            return
        pieces = _ranges(newer.fragments, self.max_rows)[partition.slot :: partition.slots]
        yield from self._read_pieces(
            storage, newer.fields, newer.schema_metadata, newer.dictionaries or {}, pieces
        )

    def _read_pieces(
        self,
        storage: Storage,
        fields: Sequence[LanceField],
        schema_metadata: Mapping[str, bytes],
        dictionaries: Mapping[int, pa.Array],
        pieces: Sequence[tuple[Fragment, int, int]],
    ) -> Iterator[pa.RecordBatch]:
        """The rows of the ranges ``pieces`` in batches of at most ``batch_size`` rows: the rows
        of small fragments are joined into one batch (each batch Spark takes costs it a little),
        and read as one (see :func:`scan_groups.scan_tasks`: a fragment of a few hundred rows read
        on its own costs far more in Python than its decoding). A large fragment is read
        :data:`~lance_table.table.scan.READ_CHUNK_ROWS` rows at a time, as a scan reads it (each
        read of a range pays for its pages' headers again), and handed on in slices of what was
        decoded, not copies."""
        roots = {n.name: n for n in build_tree(fields)}
        spec = self._spec(fields, schema_metadata)
        out_schema = output_schema(arrow_schema_from_fields(fields, schema_metadata), spec)
        step = max(self.batch_size, READ_CHUNK_ROWS)
        tasks = [
            (FragmentReader(fragment, storage, roots, dictionaries=dictionaries), lo, min(lo + step, stop))
            for fragment, start, stop in pieces
            for lo in range(start, stop, step)
        ]
        if not spec.columns and not spec.system:  # no columns (a count): only the number of rows matters
            for group in task_groups(tasks, self.batch_size):
                rows = sum(t.num_rows for t in scan_tasks(group, spec, out_schema, ROW_READS))
                if rows:
                    yield _no_columns(rows)
            return
        small = max(1, self.batch_size // SMALL_BATCH_PART)
        # slices of fewer than ``small`` rows not yet handed to Spark, and their fragments' ids
        pending: list[pa.RecordBatch] = []
        count = first = last = 0
        for group in task_groups(tasks, self.batch_size):
            ids = (group[0][0].fragment.id, group[-1][0].fragment.id)
            for table in scan_tasks(group, spec, out_schema, ROW_READS):
                for piece in table.to_batches(max_chunksize=self.batch_size):
                    rows = piece.num_rows
                    if pending and (rows >= small or count + rows > self.batch_size):
                        yield self._spark_batch(_joined(pending), first, last)
                        pending, count = [], 0
                    if rows >= small:
                        yield self._spark_batch(piece, *ids)
                    elif rows:
                        if not pending:
                            first = ids[0]
                        pending.append(piece)
                        count += rows
                        last = ids[1]
        if pending:
            yield self._spark_batch(_joined(pending), first, last)

    def _spark_batch(self, batch: pa.RecordBatch, first: int, last: int) -> pa.RecordBatch:
        """``batch`` (rows of fragments ``first`` to ``last``) in Spark's schema."""
        where = f"{self.uri} fragment {first}" if first == last else f"{self.uri} fragments {first} to {last}"
        return cast_batch(batch, self.spark_arrow, where)


#: slices of a read smaller than this part of a batch for Spark (pieces of small fragments) are
#: joined into full batches, each of which costs Spark a little; larger ones pass as they are
#: (zero-copy slices of what was decoded)
SMALL_BATCH_PART = 8


def _joined(batches: Sequence[pa.RecordBatch]) -> pa.RecordBatch:
    """One batch of the rows of ``batches`` (of one schema), in order."""
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def _no_columns(n: int) -> pa.RecordBatch:
    """A batch of ``n`` rows and no columns."""
    return pa.RecordBatch.from_struct_array(pa.StructArray.from_buffers(pa.struct([]), n, [None]))


class PushdownReader(LanceTableReader):
    """The reader with filter pushdown. Spark refuses every query through a reader that defines
    ``pushFilters`` unless ``spark.sql.python.filterPushdown.enabled`` is true, so this variant is
    only used by the source that :func:`lance_table.spark.register` installs (and which sets it).
    """

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Keep the filters that translate exactly to apply them while reading, and hand every
        filter back to Spark, which applies them again after the scan.

        Pushdown is thereby only a saving: a task applies the pushed filters only when its query
        is the one that pushed them (see :meth:`LanceTableReader._pushed_here`), and Spark's own
        filter keeps the answer exact when a later query runs this reader without them. Each
        call states the whole set of pushed filters for the query about to run.
        """
        pushed = [expr for expr in map(to_expression, filters) if expr is not None]
        self.pushed = pushed
        self.pushed_at = time.time() if pushed else None
        return iter(filters)
