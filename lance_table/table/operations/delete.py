"""Planning a delete: find matching rows with the predicate's columns only, write deletion files."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._numpy import sorted_unique
from lance_table._parallel import map_fragments, map_grouped, map_groups
from lance_table.errors import CommitConflictError, FilterEvaluationError
from lance_table.file.runs import Runs
from lance_table.format.manifest import Fragment
from lance_table.format.transaction import Delete
from lance_table.table import fragment_batch, versions
from lance_table.table.commit import Pending, check_can_commit, check_rebasable
from lance_table.table.commit.retry import DEFAULT_RETRY_TIMEOUT, retry_on_conflict
from lance_table.table.deletion import union, write_deletions
from lance_table.table.fragment import FragmentReader
from lance_table.table.scan import (
    READ_CHUNK_ROWS,
    ROW_READS,
    TABLE_RANGE_ROWS,
    ScanPlan,
    filter_mask,
    filter_table,
    fragment_split,
    in_flight,
    make_spec,
    matching_positions,
    matching_rows,
    row_ranges,
)
from lance_table.table.scan_groups import matching_rows as batch_matching_rows
from lance_table.table.scan_metrics import note_range
from lance_table.table.snapshot import Snapshot


def plan_delete(ds: Snapshot, predicate: str | pc.Expression) -> Pending:
    """The Delete operation for ``predicate`` against ``ds`` (deletion files already written).

    Raises:
        CommitConflictError: (retryable) a read of a file of ``ds`` failed, and versions
            committed since ``ds`` are gone (cleanup removed the file with them).
        FilterError: the predicate does not parse.
        FilterEvaluationError: the predicate fails on the rows (a division by zero).
    """
    # Versions committed since ds that cleanup removed are a retryable conflict. The commit's own
    # listing (after the transaction file is written, so that cleanup spares what it lists) finds
    # them and deletes the deletion files written meanwhile, so no listing is sent for them here
    # (pylance's delete lists once to open and once to commit). But cleanup may also have removed
    # files of ds that the rows are read from: a failed read is that conflict when versions since
    # ds are gone, and the delete is then re-run on the latest version.
    try:
        found, frags, wait = find_matching(ds, predicate)
    except pa.ArrowInvalid as exc:  # the predicate failed on the rows (a division by zero)
        raise FilterEvaluationError(f"{FilterEvaluationError.PREFIX}{exc} (predicate: {predicate})") from exc
    except Exception:
        try:
            check_rebasable(ds.storage, Pending(Delete((), (), ""), ds.version))
        except CommitConflictError as conflict:
            raise conflict from None
        except Exception:  # the listing failed too: the read's error says more
            pass
        raise
    removed: list[int] = []
    additions: dict[int, np.ndarray] = {}
    bases = {}
    rewritten: list[tuple[FragmentReader, np.ndarray]] = []
    for frag, matched in zip(frags, found):
        if matched is None:
            continue
        additions[frag.fragment.id] = matched
        bases[frag.fragment.id] = frag.fragment.deletion_file
        # (the matched rows are sorted and unique already)
        merged = union(frag.deleted, matched) if frag.deleted.size else matched
        if merged.size >= frag.physical_rows:
            removed.append(frag.fragment.id)
        else:
            rewritten.append((frag, merged))
    files = map_grouped(
        lambda item: write_deletions(ds.storage, item[0].fragment, item[1], ds.version),
        rewritten,
        [1] * len(rewritten),
        in_flight=wait,
    )
    written = [df.path(frag.fragment.id) for (frag, _), df in zip(rewritten, files)]
    updated = [replace(frag.fragment, deletion_file=df) for (frag, _), df in zip(rewritten, files)]
    text = predicate if isinstance(predicate, str) else str(predicate)
    return Pending(Delete(tuple(updated), tuple(removed), text), ds.version, additions, bases, tuple(written))


def find_matching(
    ds: Snapshot, predicate: str | pc.Expression, advance: Callable[[int], object] | None = None
) -> tuple[list[np.ndarray | None], list[FragmentReader], int]:
    """The rows of each fragment of ``ds`` matching ``predicate`` (None: none), the fragments, and
    how many of them are read at once. ``advance`` (called on the workers) hears of the rows of
    each group of fragments searched.

    Raises:
        FilterError: the predicate does not parse.
    """
    spec = make_spec(ds.schema, [], predicate, False, None, None, None)

    frags = ds.fragment_readers()
    # large fragments are read in the ranges of a whole-table scan: as many as keep the workers
    # busy, of at most TABLE_RANGE_ROWS (each range read costs about as much as 20k values decoded)
    split = fragment_split(len(frags))

    def matches(group: list[FragmentReader]) -> list[np.ndarray | None]:
        # small fragments' predicate columns read a batch at a time; the rows of large ones range
        # by range, as positions (runs of them would cost a merge and an expansion)
        out: list[np.ndarray | None] = [None] * len(group)
        small = [k for k, f in enumerate(group) if f.physical_rows <= READ_CHUNK_ROWS]
        if small and spec.filter is not None:
            # fragments of one small page per column are read as a batch; the others' predicate
            # columns are read one by one but evaluated together (see _evaluated_rows)
            names = list(spec.filter_columns)
            plans = fragment_batch.plans([group[k] for k in small], names) if names else [None] * len(small)
            alone = [k for k, plan in zip(small, plans) if plan is None]
            if len(alone) > 1:
                for k, rows in zip(alone, _evaluated_rows([group[k] for k in alone], spec)):
                    out[k] = rows
                small = [k for k, plan in zip(small, plans) if plan is not None]
        if small:
            found = batch_matching_rows([group[k] for k in small], spec, READ_CHUNK_ROWS, ROW_READS)
            for k, rows in zip(small, found):
                out[k] = rows.astype(np.uint32) if rows is not None else None
        for k, f in enumerate(group):
            if f.physical_rows > READ_CHUNK_ROWS:
                f.deleted  # noqa: B018 - read here once, not by the first range tasks at once
                # ranges on the fragment pool: inline inside a map over fragments, in parallel
                # when this is the only fragment (the first on this thread)
                ranges = row_ranges(f.physical_rows, split, TABLE_RANGE_ROWS)
                parts = map_fragments(partial(_range_rows, f, spec), ranges, even=True, helping=True)
                rows = np.concatenate(parts).astype(np.uint32)
                out[k] = rows if rows.size else None
        if advance is not None:
            advance(sum(f.physical_rows for f in group))
        return out

    wait = in_flight(frags)
    found = map_groups(matches, frags, [f.fragment.physical_rows for f in frags], in_flight=wait)
    return found, frags, wait


# the most rows of predicate columns read before they are evaluated together
EVALUATE_ROWS = 1 << 20


def _evaluated_rows(frags: list[FragmentReader], spec: ScanPlan) -> list[np.ndarray | None]:
    """The matching rows of each of ``frags`` (all of their rows; None: none), their predicate
    columns read fragment by fragment but evaluated a batch of fragments at a time: an evaluation
    has a fixed cost that thousands of fragments would each pay."""
    out: list[np.ndarray | None] = [None] * len(frags)
    batch: list[tuple[int, Runs, pa.Table]] = []
    rows = 0

    def flush() -> None:
        tables = [t for _, _, t in batch]
        try:
            masks = _split(filter_mask(pa.concat_tables(tables), spec), [t.num_rows for t in tables])
        except pa.ArrowInvalid:  # the fragments' columns differ in type: evaluated one by one
            masks = [filter_mask(t, spec) for t in tables]
        for (k, live, _), mask in zip(batch, masks):
            hits = live.select(np.flatnonzero(mask))
            out[k] = hits.astype(np.uint32) if hits.size else None
        batch.clear()

    for k, frag in enumerate(frags):
        live = frag.live_runs(0, frag.physical_rows)
        if not live.total:
            continue
        live = frag.prune(live, spec.conditions)  # as a scan does: ranges the statistics rule out
        note_range(frag.fragment.id, live.total)
        if not live.total:
            continue
        table = filter_table(frag, spec, live)
        batch.append((k, live, table))
        rows += table.num_rows
        if rows >= EVALUATE_ROWS:
            flush()
            rows = 0
    if batch:
        flush()
    return out


def _split(mask: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    """``mask`` cut into consecutive pieces of ``sizes``."""
    return np.split(mask, np.cumsum(sizes)[:-1]) if sizes else []


def _range_rows(frag: FragmentReader, spec: ScanPlan, span: tuple[int, int]) -> np.ndarray:
    """The matching rows of the rows ``[lo, hi)`` of ``frag``."""
    return matching_rows(frag, spec, *span)


def delete_rows(
    ds: Snapshot, predicate: str | pc.Expression, conflict_retries: int | None, message: str | None
) -> tuple[Snapshot, int]:
    """Delete the rows matching ``predicate`` from ``ds``: the version committed and how many rows
    this delete removed (as last planned). ``conflict_retries`` (None: those of ``ds``'s commit
    options) bounds the retries after lost races, and the re-runs after retryable conflicts.

    Raises:
        FilterError: the predicate does not parse.
        FilterEvaluationError: the predicate fails on the rows (a division by zero).
        UnsupportedFormatError: the version needs writer features lance_table lacks.
        CommitConflictError: a concurrent commit makes this delete impossible.
    """
    versions.check_writable(ds.manifest, ds.uri)
    planned = ds
    if conflict_retries is not None:
        planned = replace(ds, commit_options=replace(ds.commit_options, max_retries=conflict_retries))
    check_can_commit(planned.commit_options, ds.storage)

    def attempt(current: Snapshot) -> tuple[Snapshot, int]:
        pending = plan_delete(current, predicate)
        deleted = sum(len(rows) for rows in pending.delete_additions.values())
        return current.commit(pending, message=message), deleted

    # a conflict the commit cannot rebase over (an update rewrote rows of the same fragments)
    # re-runs the delete on the latest version, as pylance's delete does
    retries = planned.commit_options.max_retries
    done, deleted = retry_on_conflict(planned, attempt, retries, DEFAULT_RETRY_TIMEOUT)
    return replace(done, commit_options=ds.commit_options), deleted


def delete_in_fragment(
    ds: Snapshot, fragment_id: int, predicate: str | pc.Expression, *, tag: str = ""
) -> Fragment | None:
    """The fragment ``fragment_id`` of ``ds`` with the rows matching ``predicate`` deleted too (a
    new deletion file, its id carrying the write ``tag``, is written; nothing is committed); None
    when no row would be left.

    Raises:
        ValueError: the version has no such fragment.
        FilterError: the predicate does not parse.
    """
    (frag,) = ds.fragment_readers([fragment_id])
    spec = make_spec(ds.schema, [], predicate, False, None, None, None)
    parts = [
        matching_positions(frag, spec, lo, min(lo + READ_CHUNK_ROWS, frag.physical_rows)).positions()
        for lo in range(0, frag.physical_rows, READ_CHUNK_ROWS)
    ]
    matched = np.concatenate(parts).astype(np.uint32) if parts else np.zeros(0, np.uint32)
    return _with_deleted(ds, frag, matched, tag)


def delete_offsets_in_fragment(ds: Snapshot, fragment_id: int, offsets: Iterable[int]) -> Fragment | None:
    """The fragment ``fragment_id`` of ``ds`` with the rows at these physical offsets deleted too
    (pylance's ``LanceFragment.delete_rows``; a new deletion file is written, nothing is
    committed); None when no row would be left.

    Raises:
        ValueError: the version has no such fragment.
        IndexError: an offset lies outside the fragment.
    """
    (frag,) = ds.fragment_readers([fragment_id])
    given = np.asarray(offsets)
    if given.dtype.kind not in "iu":
        given = np.fromiter((int(o) for o in offsets), np.int64)
    wanted = sorted_unique(given.astype(np.int64, copy=False))
    if wanted.size and (wanted[0] < 0 or wanted[-1] >= frag.physical_rows):
        bad = int(wanted[0] if wanted[0] < 0 else wanted[-1])
        raise IndexError(f"row offset {bad} is outside fragment {fragment_id} of {frag.physical_rows} rows")
    return _with_deleted(ds, frag, wanted.astype(np.uint32))


def _with_deleted(ds: Snapshot, frag: FragmentReader, matched: np.ndarray, tag: str = "") -> Fragment | None:
    """``frag``'s fragment with the rows ``matched`` deleted too (None when none would be left)."""
    if not matched.size:
        return frag.fragment
    merged = union(frag.deleted, matched)
    if merged.size >= frag.physical_rows:
        return None
    return replace(
        frag.fragment, deletion_file=write_deletions(ds.storage, frag.fragment, merged, ds.version, tag=tag)
    )
