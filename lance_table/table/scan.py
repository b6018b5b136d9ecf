"""Scans: stream the rows of a dataset version, with projection, filter, offset/limit and the
system columns ``_rowid``, ``_rowaddr`` and ``_rowoffset``.

This is the execution layer: a :class:`ScanPlan` names top-level columns only. What users ask for
(nested fields, SQL expressions, pylance's options) is resolved into a plan by
:mod:`lance_table.table.scanner`; the plan itself and its checks are in
:mod:`lance_table.table.scan_plan` (its names are importable from here too).

A filtered scan reads only the columns the predicate needs to decide which rows match, then
fetches the projected columns of the matching rows alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import acero

from lance_table._parallel import FRAGMENTS, IO, ahead_on, io_threads, map_grouped, map_groups, workers
from lance_table.file.arrow_take import filter_rows
from lance_table.file.runs import Runs
from lance_table.table.fragment import FragmentReader
from lance_table.table.row_ids import ROW_ADDR, ROW_ID, addresses, row_offsets
from lance_table.table.scan_groups import RowReads, Task, scan_each, scan_tasks, task_groups
from lance_table.table.scan_groups import matching_rows as batch_matching_rows
from lance_table.table.scan_interval import interval_rows, rows_read
from lance_table.table.scan_metrics import note_range
from lance_table.table.scan_plan import (
    Predicate,
    ScanPlan,
    filter_schema,
    make_spec,
    output_schema,
)

if TYPE_CHECKING:
    from lance_table.filters.bounds import Condition


# Rows read from a fragment at a time; output batches are sliced from these.
READ_CHUNK_ROWS = 256 * 1024
# A whole-table scan reads ranges of at most this many rows (bounding each worker's scratch).
TABLE_RANGE_ROWS = 512 * 1024
# A whole-table scan splits its fragments into at most this many ranges per worker in all.
TASKS_PER_WORKER = 4
# When at least this share of the rows match, a filtered scan reads whole chunks and masks them.
DENSE_SELECTION = 0.02
# The same for 2.1+ files: their reads of selected rows decode only the selected strings of a
# chunk (FSST decompression is the dearest part of a scan), which pays off up to a larger share.
DENSE_SELECTION_STRUCTURAL = 0.2
# A streaming scan of a remote store reads ahead up to this many rows (in ranges of fragments).
READ_AHEAD_ROWS = 1 << 20
_POS = "__lance_table_position"


def system_column(
    frag: FragmentReader, name: str, positions: np.ndarray, bases: Mapping[int, int]
) -> pa.Array:
    """The system column ``name`` of a fragment's physical rows at ``positions``.

    Raises:
        CorruptFileError: the fragment's row id sequence is damaged.
    """
    if name == ROW_ID and frag.row_ids is not None:
        return pa.array(frag.row_ids[positions], pa.uint64())
    if name in (ROW_ID, ROW_ADDR):
        return pa.array(addresses(frag.fragment.id, positions), pa.uint64())
    return pa.array(row_offsets(bases[frag.fragment.id], frag.deleted, positions), pa.uint64())


def _with_system(
    table: pa.Table, frag: FragmentReader, names: Sequence[str], runs: Runs, bases: Mapping[int, int]
) -> pa.Table:
    """``table`` (the rows at ``runs``) with the system columns ``names`` appended."""
    if not names:
        return table
    positions = runs.positions()
    for name in names:
        table = table.append_column(pa.field(name, pa.uint64()), system_column(frag, name, positions, bases))
    return table


def _filter_pass(frag: FragmentReader, spec: ScanPlan, live: Runs) -> tuple[pa.Table, np.ndarray]:
    """Read the predicate's columns for ``live`` rows; return them and the mask of matching rows."""
    table = filter_table(frag, spec, live)
    return table, filter_mask(table, spec)


def filter_table(frag: FragmentReader, spec: ScanPlan, live: Runs) -> pa.Table:
    """The columns ``spec``'s predicate reads (system columns too) of the ``live`` rows of ``frag``."""
    assert spec.filter is not None
    # Rows match only when they meet every condition of ``exact``: values below a floor it sets
    # can only fail it, and need not be decoded.
    floors = _floors(spec.exact) if spec.exact else None
    table = frag.read(spec.filter_columns, live, floors) if spec.filter_columns else empty_rows(live.total)
    return _with_system(table, frag, spec.filter_system, live, spec.offset_bases)


def filter_mask(table: pa.Table, spec: ScanPlan) -> np.ndarray:
    """Which rows of ``table`` (read by :func:`filter_table`, from one fragment or several) match
    ``spec``'s predicate."""
    assert spec.filter is not None
    fast = None
    if spec.exact:
        from lance_table.filters import vectorized  # (loaded by the filter's compilation already)

        fast = vectorized.mask(table, spec.exact)
    return fast if fast is not None else evaluate_mask(table, spec.filter)


def _floors(conditions: Sequence[Condition]) -> dict[str, int]:
    """Per column, a positive integer that its values must reach to meet the conditions (from
    ``>=``, ``>`` and ``=`` with an integer literal)."""
    out: dict[str, int] = {}
    for cond in conditions:
        value = cond.value
        if cond.op in (">=", ">", "=") and type(value) is int and value > 0:
            out[cond.column] = max(out.get(cond.column, 0), value)
    return out


def evaluate_mask(table: pa.Table, expr: pc.Expression) -> np.ndarray:
    """Which rows of ``table`` satisfy ``expr`` (SQL semantics: a null outcome does not match)."""
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("project", acero.ProjectNodeOptions([expr], [_POS])),
        ]
    )
    result = plan.to_table(use_threads=False).column(0)
    if result.null_count:
        result = pc.fill_null(result, False)
    mask = np.zeros(table.num_rows, bool)
    at = 0
    for chunk in result.chunks:  # chunks arrive in order with use_threads=False
        n = len(chunk)
        if n:  # the value bits unpacked (a bitmap to bools in one numpy call)
            data = np.frombuffer(chunk.buffers()[1], np.uint8, (chunk.offset + n + 7) // 8)
            mask[at : at + n] = np.unpackbits(data, bitorder="little")[chunk.offset : chunk.offset + n]
        at += n
    return mask


def matching_positions(frag: FragmentReader, spec: ScanPlan, lo: int, hi: int) -> Runs:
    """Live rows of ``[lo, hi)`` that pass the filter (all live rows without a filter)."""
    live = frag.live_runs(lo, hi)
    if spec.filter is None or not live.total:
        return live
    return Runs.from_sorted_unique(_passing(frag, spec, live))


def matching_rows(frag: FragmentReader, spec: ScanPlan, lo: int, hi: int) -> np.ndarray:
    """:func:`matching_positions` as sorted int64 positions, never made into runs (a delete of
    every tenth row would make as many runs as rows)."""
    live = frag.live_runs(lo, hi)
    if spec.filter is None or not live.total:
        return live.positions()
    return _passing(frag, spec, live)


def _passing(frag: FragmentReader, spec: ScanPlan, live: Runs) -> np.ndarray:
    """The positions among ``live`` (not empty) that pass the filter."""
    live = frag.prune(live, spec.conditions)
    note_range(frag.fragment.id, live.total)
    if not live.total:
        return np.zeros(0, np.int64)
    rows = interval_rows(frag, spec.interval, live) if spec.interval is not None else None
    if rows is not None:
        return rows
    _, mask = _filter_pass(frag, spec, live)
    return live.select(np.flatnonzero(mask))


def _read_matching(frag: FragmentReader, spec: ScanPlan, lo: int, hi: int) -> tuple[pa.Table, Runs]:
    """The projected columns of the matching live rows of ``[lo, hi)``, and where they are."""
    live = frag.live_runs(lo, hi)
    if not live.total:
        return empty_rows(0), live
    if spec.filter is None:
        note_range(frag.fragment.id, live.total)
        table = frag.read(spec.columns, live) if spec.columns else empty_rows(live.total)
        return table, live
    live = frag.prune(live, spec.conditions)
    note_range(frag.fragment.id, live.total)
    if not live.total:
        return empty_rows(0), live
    rows = interval_rows(frag, spec.interval, live) if spec.interval is not None else None
    if rows is not None:  # (read off the packed values: no predicate column was decoded)
        runs = Runs.from_sorted_unique(rows)
        if not rows.size or not spec.columns:
            return empty_rows(rows.size), runs
        dense = DENSE_SELECTION_STRUCTURAL if frag.structural else DENSE_SELECTION
        return rows_read(frag, spec.columns, live, rows, runs, dense), runs
    ftable, mask = _filter_pass(frag, spec, live)
    selected = int(mask.sum())
    runs = Runs.from_sorted_unique(live.select(np.flatnonzero(mask)))
    if not selected:
        return empty_rows(0), runs
    if not spec.columns:
        return empty_rows(selected), runs
    # The predicate's columns are already read; the rest of the projection is read for every live
    # row and masked in memory when many rows match, else only the matching rows' bytes.
    chosen = pa.array(mask)
    cols = {n: filter_rows(ftable.column(n), chosen) for n in spec.filter_columns if n in spec.columns}
    rest = [c for c in spec.columns if c not in cols]
    dense = DENSE_SELECTION_STRUCTURAL if frag.structural else DENSE_SELECTION
    if rest and selected >= dense * live.total:
        other = frag.read(rest, live)
        cols.update({n: filter_rows(other.column(n), chosen) for n in rest})
    elif rest:
        other = frag.read(rest, runs)
        cols.update({n: other.column(n) for n in rest})
    return pa.table({n: cols[n] for n in spec.columns}), runs


def _row_ranges(
    frag: FragmentReader, spec: ScanPlan, split: int = 1, most: int | None = None
) -> list[tuple[int, int]]:
    """The fragment's physical rows as the ranges it is read in: equal parts of at most ``most``
    rows (by default ``max(READ_CHUNK_ROWS, spec.batch_size)``), and at least ``split`` parts
    where they can hold ``READ_CHUNK_ROWS`` rows each."""
    return row_ranges(frag.physical_rows, split, most or max(READ_CHUNK_ROWS, spec.batch_size))


def row_ranges(n: int, split: int, most: int) -> list[tuple[int, int]]:
    """``n`` rows as equal ``[lo, hi)`` ranges of at most ``most`` rows, and at least ``split``
    ranges where they can hold ``READ_CHUNK_ROWS`` rows each."""
    if not n:
        return []
    parts = max(-(-n // most), min(split, n // READ_CHUNK_ROWS))
    size = -(-n // parts)
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


def fragment_split(fragments: int) -> int:
    """Into how many ranges a whole-table scan splits each fragment: enough that the workers get
    the same number of (similar) ranges, when there are fewer than a few fragments per worker;
    a split costs a little, so it is not done for its own sake."""
    n = workers()
    if not fragments or fragments >= TASKS_PER_WORKER * n:
        return 1
    return max(1, min(n // math.gcd(fragments, n), -(-TASKS_PER_WORKER * n // fragments)))


def _scan_range(
    frag: FragmentReader, spec: ScanPlan, out_schema: pa.Schema, lo: int, hi: int
) -> pa.Table | None:
    """The matching rows of ``[lo, hi)`` of one fragment (None when none match); a table without
    columns keeps its row count."""
    table, runs = _read_matching(frag, spec, lo, hi)
    if not runs.total:
        return None
    table = _with_system(table, frag, spec.system, runs, spec.offset_bases)
    if table.num_columns:
        table = pa.Table.from_arrays(table.columns, schema=out_schema)
    return table


def empty_rows(n: int) -> pa.Table:
    """A table with ``n`` rows and no columns."""
    return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])


def in_flight(frags: Sequence[FragmentReader]) -> int:
    """How many fragments are worth reading at once: their storage's ``read_parallelism``."""
    return frags[0].storage.read_parallelism if frags else 0


def open_all(frags: Sequence[FragmentReader]) -> None:
    """Read every fragment's footers and deletions (each cached on its reader) in parallel: in
    groups of small fragments on the workers, or many at once on a remote store."""
    sizes = [f.fragment.physical_rows for f in frags]
    map_grouped(lambda f: (f.deleted, f.physical_rows), frags, sizes, in_flight=in_flight(frags))


def scan_all(frags: Sequence[FragmentReader], spec: ScanPlan, out_schema: pa.Schema) -> pa.Table:
    """Every matching row as one table; fragments are scanned in parallel when no limit applies."""
    if spec.limit is not None or spec.offset:
        return pa.Table.from_batches(list(scan(frags, spec, out_schema)), schema=out_schema)
    # Fragments are read in ranges, each a task of its own, so that a few big fragments keep every
    # worker busy (the ranges are even: equal parts of each fragment, none above the chunk size);
    # the footers and deletions are read first, once per fragment.
    # Small fragments are read a group to a task (see map_grouped).
    open_all(frags)
    split = fragment_split(len(frags))
    # ranges of at most TABLE_RANGE_ROWS whatever the batch size (the table is one anyway): each
    # worker holds the decoding scratch of one such range, not of a whole fragment
    ranges = [_row_ranges(f, spec, split, TABLE_RANGE_ROWS) for f in frags]
    tasks = [(f, lo, hi) for f, spans in zip(frags, ranges) for lo, hi in spans]
    sizes = [hi - lo for _, lo, hi in tasks]
    # small fragments a batch at a time
    tables = map_groups(
        lambda group: scan_tasks(group, spec, out_schema, ROW_READS), tasks, sizes, in_flight=in_flight(frags)
    )
    if not out_schema.names:  # no columns: only the row count matters
        return empty_rows(sum(t.num_rows for t in tables))
    return pa.concat_tables(tables) if tables else out_schema.empty_table()


def scan(frags: Sequence[FragmentReader], spec: ScanPlan, out_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of at most ``spec.batch_size`` rows, honouring offset and limit."""
    skip = spec.offset
    remaining = spec.limit
    if remaining == 0:
        return
    # Ranges are read ahead on the worker threads while the caller consumes batches (not when a
    # limit may stop the scan early: that work would be thrown away).
    depth = 0 if spec.limit is not None else workers()
    name = FRAGMENTS
    wait = in_flight(frags)
    # small fragments a group at a time, as a batch; with a limit, groups of the rows it still
    # needs at most (read inline, each when the rows before it were not enough)
    most = max(READ_CHUNK_ROWS, spec.batch_size)
    if depth and wait > depth:  # a remote store: more groups in flight, up to READ_AHEAD_ROWS rows
        # in ranges as large as a whole-table scan's: each range asks for its columns' pages in
        # requests of its own (a 300k-row file in two ranges: 14 GETs where to_table sends 6)
        most = max(most, TABLE_RANGE_ROWS)
        rows = max(1, min(most, STREAM_GROUP_TASKS * max(f.fragment.physical_rows for f in frags)))
        depth = max(depth, min(wait, io_threads(), READ_AHEAD_ROWS // rows))
        name = IO if depth > workers() else FRAGMENTS
    tasks = ((frag, lo, hi) for frag in frags for lo, hi in _row_ranges(frag, spec, 1, most))

    def needed() -> int:
        return most if remaining is None else min(most, skip + remaining)

    groups = _stream_groups(tasks, most, STREAM_GROUP_TASKS, needed if not depth else None)
    found = ahead_on(name, lambda g: scan_each(g, spec, out_schema, ROW_READS), groups, depth, even=True)
    tables = (t for group in found for t in group)
    try:
        for table in tables:
            if table is None:
                continue
            if skip:
                if skip >= table.num_rows:
                    skip -= table.num_rows
                    continue
                table = table.slice(skip)
                skip = 0
            if remaining is not None:
                table = table.slice(0, remaining)
                remaining -= table.num_rows
            for batch in batches_of(table, spec.batch_size):
                if batch.num_rows:
                    yield batch
            if remaining == 0:
                return
    finally:
        found.close()  # stops the reads ahead when the caller stops early


#: a stream reads at most this many small fragments' ranges as one batch
STREAM_GROUP_TASKS = 64


def _stream_groups(
    tasks: Iterator[Task], most: int, count: int, needed: Callable[[], int] | None = None
) -> Iterator[list[Task]]:
    """Consecutive ``tasks`` in groups of at most ``count`` tasks and ``most`` rows (a range of
    more than a quarter of ``most`` rows is a group of its own: large ranges keep a worker each):
    a stream of a table of many small appends reads them as batches, while the groups stay
    bounded and the workers busy. ``needed``: how many rows a stream with a limit still needs,
    asked as each group starts; a group ends once its ranges hold that many."""
    if needed is None:
        yield from task_groups(tasks, most, count, alone=most // 4)
        return
    group: list[Task] = []
    rows = 0
    for task in tasks:
        group.append(task)
        rows += task[2] - task[1]
        if rows >= needed() or len(group) >= count:
            yield group
            group, rows = [], 0
    if group:
        yield group


def batches_of(table: pa.Table, size: int) -> Iterator[pa.RecordBatch]:
    """``table`` as batches of ``size`` rows (the last may be shorter). Columns of one chunk are
    sliced, not copied; only a batch that spans chunks of a column (pages that end inside it,
    or rows kept from several runs) has that column's pieces copied together."""
    if all(col.num_chunks <= 1 for col in table.columns):
        yield from table.combine_chunks().to_batches(max_chunksize=size)
        return
    for at in range(0, table.num_rows, size):
        part = table.slice(at, size)
        if all(col.num_chunks <= 1 for col in part.columns):
            yield from part.to_batches(max_chunksize=size)
        else:
            yield from part.combine_chunks().to_batches(max_chunksize=size)


def count_matching(frags: Sequence[FragmentReader], spec: ScanPlan) -> int:
    """How many live rows of ``frags`` match the plan's filter (all live rows without one): the
    predicate's columns of small fragments read a group at a time, as batches."""

    def count(frag: FragmentReader) -> int:
        if spec.filter is None:
            return frag.physical_rows - int(frag.deleted.size)
        return sum(
            matching_positions(frag, spec, lo, min(lo + READ_CHUNK_ROWS, frag.physical_rows)).total
            for lo in range(0, frag.physical_rows, READ_CHUNK_ROWS)
        )

    def count_small(group: list[FragmentReader]) -> list[int]:
        found = batch_matching_rows(group, spec, READ_CHUNK_ROWS, ROW_READS)
        return [sum(0 if rows is None else rows.size for rows in found)]

    small = [f for f in frags if f.physical_rows <= READ_CHUNK_ROWS] if spec.filter is not None else []
    large = [f for f in frags if f.physical_rows > READ_CHUNK_ROWS] if small else list(frags)
    total = sum(map_grouped(count, large, [f.physical_rows for f in large], in_flight=in_flight(large)))
    if small:
        sizes = [f.physical_rows for f in small]
        total += sum(map_groups(count_small, small, sizes, in_flight=in_flight(small)))
    return total


#: The reads of one fragment above, for the batches of many small fragments (see scan_groups).
ROW_READS = RowReads(_scan_range, matching_positions, evaluate_mask, system_column, _floors)


__all__ = [
    "DENSE_SELECTION",
    "DENSE_SELECTION_STRUCTURAL",
    "READ_AHEAD_ROWS",
    "READ_CHUNK_ROWS",
    "ROW_READS",
    "TABLE_RANGE_ROWS",
    "TASKS_PER_WORKER",
    "Predicate",
    "ScanPlan",
    "batches_of",
    "count_matching",
    "empty_rows",
    "evaluate_mask",
    "filter_mask",
    "filter_schema",
    "filter_table",
    "fragment_split",
    "in_flight",
    "make_spec",
    "matching_positions",
    "matching_rows",
    "open_all",
    "output_schema",
    "row_ranges",
    "scan",
    "scan_all",
    "system_column",
]
