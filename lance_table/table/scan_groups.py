"""Scans, filters and takes over many small fragments, a group of fragments at a time.

Each task of a whole-table scan is a range of a fragment; a table of many small appends makes
thousands of them, each worth a few microseconds of decoding. The tasks whose fragments
:mod:`fragment_batch` reads as one batch are read together here: the predicate's columns of all
of them decoded in one pass and evaluated in one call, then the projection of the fragments with
matching rows in one more pass. Other tasks are read one by one as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from lance_table.file.arrow_take import filter_rows
from lance_table.file.runs import EMPTY, Runs
from lance_table.table import fragment_batch, fragment_plans
from lance_table.table.fragment import FragmentReader
from lance_table.table.scan_metrics import note_range


class Plan(Protocol):
    """What a batch reads of a scan's plan (:class:`scan.Plan`)."""

    columns: list[str]
    filter: Any
    filter_columns: list[str]
    system: tuple[str, ...]
    exact: Any
    filter_system: tuple[str, ...]
    offset_bases: Mapping[int, int]


@dataclass(frozen=True)
class RowReads:
    """The reads of one fragment that :mod:`scan` makes and batches build on or fall back to
    (given by :mod:`scan`, which calls into this module: no import cycle)."""

    scan_range: Callable[[FragmentReader, Any, pa.Schema, int, int], pa.Table | None]
    matching_positions: Callable[[FragmentReader, Any, int, int], Runs]
    evaluate_mask: Callable[[pa.Table, Any], np.ndarray]
    system_column: Callable[[FragmentReader, str, np.ndarray, Mapping[int, int]], pa.Array]
    floors: Callable[[Any], dict[str, int]]


def _empty_rows(n: int) -> pa.Table:
    """A table with ``n`` rows and no columns."""
    return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])


Task = tuple[FragmentReader, int, int]


def _with_system(
    table: pa.Table,
    frags: Sequence[FragmentReader],
    names: Sequence[str],
    runs: Sequence[Runs],
    spec: Plan,
    ops: RowReads,
) -> pa.Table:
    """``table`` (the rows ``runs[k]`` of each fragment ``frags[k]``, one after another) with the
    system columns ``names`` appended."""
    for name in names:
        parts = [
            ops.system_column(f, name, r.positions(), spec.offset_bases)
            for f, r in zip(frags, runs)
            if r.total
        ]
        column = pa.chunked_array(parts, pa.uint64()) if parts else pa.chunked_array([], pa.uint64())
        table = table.append_column(pa.field(name, pa.uint64()), column)
    return table


def task_groups(
    tasks: Iterable[Task], most: int, count: int | None = None, alone: int | None = None
) -> Iterator[list[Task]]:
    """Consecutive ``tasks`` in groups of at most ``most`` rows (a larger task is a group of its
    own) and ``count`` tasks; a task of more than ``alone`` rows is always a group of its own."""
    group: list[Task] = []
    rows = 0
    for task in tasks:
        n = task[2] - task[1]
        if alone is not None and n > alone:
            if group:
                yield group
                group, rows = [], 0
            yield [task]
            continue
        if group and (rows + n > most or (count is not None and len(group) >= count)):
            yield group
            group, rows = [], 0
        group.append(task)
        rows += n
    if group:
        yield group


def _needed(spec: Plan) -> list[str]:
    return list(dict.fromkeys([*spec.columns, *spec.filter_columns]))


def _planned(spec: Plan) -> list[str]:
    """The columns whose plans decide which tasks a scan reads as batches: the predicate's (the
    rest of the projection, of the fragments with matching rows, is then read as a batch where it
    can be, else fragment by fragment), or the projection's."""
    return list(spec.filter_columns) if spec.filter is not None and spec.filter_columns else _needed(spec)


def _batches(
    tasks: Sequence[Task], names: list[str]
) -> tuple[list[tuple[int, int, bool]], list[fragment_batch.Plan | None]]:
    """Runs ``[i, j)`` of the tasks, each read as a batch (True) or task by task (False), and
    the plans of the tasks' fragments for ``names``."""
    frags = [t[0] for t in tasks]
    found = fragment_batch.plans(frags, names)
    ok = fragment_plans.by_columns(frags, names, found, [hi - lo for _, lo, hi in tasks])
    out: list[tuple[int, int, bool]] = []
    i, n = 0, len(tasks)
    while i < n:
        j = i
        while j < n and ok[j]:
            j += 1
        if j - i > 1:
            out.append((i, j, True))
        else:
            j = max(j, i + 1)
            out.append((i, j, False))
        i = j
    return out, found


def scan_tasks(tasks: Sequence[Task], spec: Plan, out_schema: pa.Schema, ops: RowReads) -> list[pa.Table]:
    """The matching rows of each task's range ``[lo, hi)`` of its fragment (as ``_scan_range``
    reads one), the tasks of small fragments read as batches; tables without rows left out."""
    return [t for t in _scan_tasks(tasks, spec, out_schema, ops, False) if t is not None]


def scan_each(
    tasks: Sequence[Task], spec: Plan, out_schema: pa.Schema, ops: RowReads
) -> list[pa.Table | None]:
    """:func:`scan_tasks` with a result for each task, in order (None where no row matches): the
    rows of a batch are sliced back into each task's (zero-copy), so that a stream keeps the
    boundaries of reading the tasks one by one."""
    return _scan_tasks(tasks, spec, out_schema, ops, True)


def _scan_tasks(
    tasks: Sequence[Task], spec: Plan, out_schema: pa.Schema, ops: RowReads, each: bool
) -> list[pa.Table | None]:
    if len(tasks) == 1:
        return [ops.scan_range(tasks[0][0], spec, out_schema, tasks[0][1], tasks[0][2])]
    out: list[pa.Table | None] = []
    # with a filter, a batch reads the predicate's columns; the rest of the projection, of the
    # fragments with matching rows only, is read as a batch where it can be, else one by one
    runs, found = _batches(tasks, _planned(spec))
    for i, j, batched in runs:
        if batched:
            table, selected = _scan_batch(tasks[i:j], spec, out_schema, found[i:j], ops)
            out.extend(_per_task(table, selected) if each else [table])
        else:
            out.extend(ops.scan_range(f, spec, out_schema, lo, hi) for f, lo, hi in tasks[i:j])
    return out


def _per_task(table: pa.Table | None, selected: Sequence[Runs]) -> list[pa.Table | None]:
    """The rows of a batch's ``table`` cut into each task's (``selected``: the rows each task
    contributed, in order); None for a task without rows."""
    out: list[pa.Table | None] = []
    at = 0
    for runs in selected:
        n = runs.total
        out.append(table.slice(at, n) if n and table is not None else None)
        at += n
    return out


def _matching(
    frags: Sequence[FragmentReader],
    spec: Plan,
    lives: list[Runs],
    ops: RowReads,
    found: Sequence[fragment_batch.Plan | None] | None = None,
) -> tuple[list[Runs], pa.Table]:
    """The runs of the matching live rows of each fragment, and the predicate's columns of the
    matching rows (one table for all)."""
    rows, table = _matching_rows(frags, spec, lives, ops, found, True)
    assert table is not None
    return [EMPTY if r is None else Runs.from_sorted_unique(r) for r in rows], table


def _matching_rows(
    frags: Sequence[FragmentReader],
    spec: Plan,
    lives: list[Runs],
    ops: RowReads,
    found: Sequence[fragment_batch.Plan | None] | None,
    keep_table: bool,
) -> tuple[list[np.ndarray | None], pa.Table | None]:
    """The matching live rows of each fragment as sorted positions (None: none), and, when
    ``keep_table``, the predicate's columns of the matching rows (one table for all)."""
    assert spec.filter is not None
    floors = ops.floors(spec.exact) if spec.exact else None
    total = sum(r.total for r in lives)
    if spec.filter_columns:
        table = fragment_batch.read(frags, spec.filter_columns, lives, floors, found)
    else:
        table = _empty_rows(total)
    table = _with_system(table, frags, spec.filter_system, lives, spec, ops)
    mask = None
    if spec.exact:
        from lance_table.filters import vectorized

        mask = vectorized.mask(table, spec.exact)
    if mask is None:
        mask = ops.evaluate_mask(table, spec.filter)
    hits = np.flatnonzero(mask)
    bounds = np.zeros(len(lives) + 1, np.int64)
    np.cumsum([r.total for r in lives], out=bounds[1:])
    cuts = np.searchsorted(hits, bounds)
    matched: list[np.ndarray | None] = [None] * len(lives)
    for k in np.flatnonzero(np.diff(cuts)).tolist():
        matched[k] = lives[k].select(hits[cuts[k] : cuts[k + 1]] - bounds[k])
    if not keep_table:
        return matched, None
    return matched, filter_rows(table, pa.array(mask)) if hits.size < total else table


def _scan_batch(
    tasks: Sequence[Task],
    spec: Plan,
    out_schema: pa.Schema,
    found: Sequence[fragment_batch.Plan | None],
    ops: RowReads,
) -> tuple[pa.Table | None, Sequence[Runs]]:
    """The matching rows of tasks whose fragments read as a batch (``found``: their plans for
    the projection and the predicate's columns; None when none match), and the rows of each
    task among them."""
    frags = [t[0] for t in tasks]
    lives = [f.live_runs(lo, hi) for f, lo, hi in tasks]
    for frag, live in zip(frags, lives):
        note_range(frag.fragment.id, live.total)
    if spec.filter is None:
        selected = lives
        total = sum(r.total for r in lives)
        same = spec.columns == _planned(spec)  # the plans are for these columns
        if spec.columns:
            table = fragment_batch.read(frags, spec.columns, lives, found=found if same else None)
        else:
            table = _empty_rows(total)
    else:
        planned = list(spec.filter_columns) == _planned(spec)
        selected, ftable = _matching(frags, spec, lives, ops, found if planned else None)
        total = ftable.num_rows
        cols = {n: ftable.column(n) for n in spec.filter_columns if n in spec.columns}
        rest = [c for c in spec.columns if c not in cols]
        if rest and total:
            keep = [k for k, r in enumerate(selected) if r.total]
            other = fragment_batch.read([frags[k] for k in keep], rest, [selected[k] for k in keep])
            cols.update({n: other.column(n) for n in rest})
        table = pa.table({n: cols[n] for n in spec.columns}) if spec.columns and total else _empty_rows(total)
    if not total:
        return None, selected
    table = _with_system(table, frags, spec.system, selected, spec, ops)
    if table.num_columns:
        table = pa.Table.from_arrays(table.columns, schema=out_schema)
    return table, selected


def matching_rows(
    frags: Sequence[FragmentReader], spec: Plan, chunk: int, ops: RowReads
) -> list[np.ndarray | None]:
    """:func:`matching_positions` over all the rows of each fragment (in ranges of ``chunk`` rows
    for fragments larger than that) as sorted positions (None: none), small fragments' predicate
    columns read as batches."""
    out: list[np.ndarray | None] = []
    small = [f.physical_rows <= chunk for f in frags]
    runs, plans = _batches([(f, 0, f.physical_rows) for f in frags], list(spec.filter_columns))
    for i, j, batched in runs:
        if batched and spec.filter is not None and all(small[i:j]):
            group = frags[i:j]
            lives = [f.live_runs(0, f.physical_rows) for f in group]
            for frag, live in zip(group, lives):
                note_range(frag.fragment.id, live.total)
            found, _ = _matching_rows(group, spec, lives, ops, plans[i:j], False)
            out.extend(found)
            continue
        for f in frags[i:j]:
            parts = [
                ops.matching_positions(f, spec, lo, min(lo + chunk, f.physical_rows))
                for lo in range(0, f.physical_rows, chunk)
            ]
            rows = [p.positions() for p in parts if p.total]
            out.append(np.concatenate(rows) if rows else None)
    return out


def take_batch(
    frags: Sequence[FragmentReader], runs: Sequence[Runs], spec: Plan, out_schema: pa.Schema, ops: RowReads
) -> pa.Table:
    """The projected columns, then the system columns, of the rows ``runs[k]`` of each fragment
    ``frags[k]``, in order."""
    if spec.columns:
        table = fragment_batch.read(frags, spec.columns, runs, take=True)
    else:
        table = _empty_rows(sum(r.total for r in runs))
    table = _with_system(table, frags, spec.system, runs, spec, ops)
    return pa.Table.from_arrays(table.columns, schema=out_schema)
