"""Update (pylance's ``update``): the live rows matching a predicate are written again, with new
values in some columns, into new fragments, and marked deleted where they were; one ``Update``
transaction commits both.

Memory stays bounded: the predicate's columns are read first (in parallel, chunk by chunk) to find
the matching rows' positions; then, fragment by fragment and chunk by chunk, only those rows are
read, their new values computed and streamed into the new data files. On a dataset with stable row
ids the rewritten rows keep their ids (and the version that created them); the commit records the
version that last updated them. Index metadata is left as it is, as pylance leaves it: the new
fragments are in no index's fragment bitmap, so the rewritten rows read as unindexed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._parallel import FRAGMENTS, ahead_on, map_grouped, workers
from lance_table.errors import (
    ColumnNotFoundError,
    UnsupportedFormatError,
    UpdateError,
    UpdateEvaluationError,
)
from lance_table.file.runs import Runs
from lance_table.file.v2_1.blob_v2 import is_blob_v2
from lance_table.format.manifest import Fragment
from lance_table.format.operations import REWRITE_ROWS, Update
from lance_table.format.row_ids import row_id_meta
from lance_table.schema import build_tree
from lance_table.table import blob_write, versions
from lance_table.table.commit import Pending, check_can_commit, check_rebasable
from lance_table.table.commit.retry import DEFAULT_CONFLICT_RETRIES, DEFAULT_RETRY_TIMEOUT, retry_on_conflict
from lance_table.table.commit.row_ids import uses_stable_row_ids
from lance_table.table.deletion import union, write_deletions
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations.delete import find_matching
from lance_table.table.operations.write import FragmentWriter, check_blob_fields, writable_data_format
from lance_table.table.progress import SILENT, Progress, Reporter, reporter
from lance_table.table.scan import (
    READ_CHUNK_ROWS,
    Predicate,
    ScanPlan,
    in_flight,
    make_spec,
    matching_positions,
)
from lance_table.table.snapshot import Snapshot

# Matching rows are read and rewritten this many at a time.
UPDATE_CHUNK_ROWS = 64 * 1024


@dataclass(frozen=True)
class Assignments:
    """What an update writes: per updated top-level column its compiled value, and the field ids
    of those columns (with their children), sorted, as pylance records them in the transaction."""

    values: Mapping[str, pc.Expression]
    field_ids: tuple[int, ...]


def compile_assignments(ds: Snapshot, updates: Mapping[str, str]) -> Assignments:
    """Compile ``{column: SQL}`` against ``ds``'s schema, each value cast to its column's type.

    Raises:
        TypeError: ``updates`` is not a mapping of strings to strings.
        UpdateError: no columns are given, or a nested field or a blob v2 column is named.
        ColumnNotFoundError: a column the schema does not have.
        FilterError: a value does not compile or cannot be cast to its column's type.
    """
    if not isinstance(updates, Mapping):
        raise TypeError(
            f"updates must be a dict of column names to SQL expressions, not {type(updates).__name__}"
        )
    if not updates:
        raise UpdateError("no updates provided: give at least one column and its new value")
    from lance_table.filters.values import compile_value  # (the SQL parser loads on first use)

    schema = ds.schema
    nodes = {n.name: n for n in build_tree(ds.manifest.fields)}
    values: dict[str, pc.Expression] = {}
    ids: set[int] = set()
    for name, sql in updates.items():
        if not isinstance(name, str) or not isinstance(sql, str):
            raise TypeError(f"updates must map column names to SQL text; got {name!r}: {type(sql).__name__}")
        node = nodes.get(name)
        if node is None:
            top = name.split(".", 1)[0]
            if "." in name and top in nodes:
                raise UpdateError(
                    f"cannot update the nested field {name!r}: update the whole column {top!r} "
                    "(pylance does not update nested fields either)"
                )
            raise ColumnNotFoundError(name, schema.names)
        if is_blob_v2(node.field):
            raise UpdateError(f"column {name!r} is a blob v2 column; updating blobs is not supported")
        values[name] = compile_value(sql, schema, to=schema.field(name).type)
        ids.update(n.field.id for n in node.walk())
    return Assignments(values, tuple(sorted(ids)))


def update_format(ds: Snapshot, data_storage_version: str | None = None) -> str:
    """The data format an update of ``ds`` writes (the dataset's own).

    Raises:
        UnsupportedFormatError: ``data_storage_version`` is not the dataset's own data format, the
            dataset's format is not one lance_table writes, or it has blob columns lance_table
            does not write.
    """
    data_format = writable_data_format(ds.manifest, ds.uri)
    if data_storage_version is not None:
        asked = writable_data_format(ds.manifest, ds.uri, data_storage_version)
        if asked != data_format:
            raise UnsupportedFormatError(
                f"{ds.uri} stores data files in format {data_format}; an update writes the same "
                f"format, not {asked} (data_storage_version={data_storage_version!r})"
            )
    check_blob_fields(ds.manifest.fields, data_format, ds.uri)
    return data_format


def _matching(frag: FragmentReader, spec: ScanPlan) -> np.ndarray | None:
    """The positions of ``frag``'s live rows that ``spec``'s filter selects (None: none)."""
    parts = []
    for lo in range(0, frag.physical_rows, READ_CHUNK_ROWS):
        runs = matching_positions(frag, spec, lo, min(lo + READ_CHUNK_ROWS, frag.physical_rows))
        if runs.total:
            parts.append(runs.positions())
    return np.concatenate(parts).astype(np.uint32) if parts else None


@dataclass
class FragmentUpdate:
    """An update of one fragment: the new fragments holding its rewritten rows (ids not yet
    assigned), the fragment removed or given a new deletion file, the files written, the count."""

    new: list[Fragment]
    removed: list[int]
    updated: list[Fragment]
    written: list[str]
    count: int


def update_fragment(
    ds: Snapshot,
    fragment_id: int,
    assignments: Assignments,
    where: Predicate | None,
    data_format: str,
    *,
    write_tag: str = "",
) -> FragmentUpdate:
    """Update the rows of fragment ``fragment_id`` of ``ds`` matching ``where``: the matching rows
    are written again with their new values into new data files and deleted where they were
    (files named with ``write_tag``); nothing is committed, and nothing is left behind when it
    raises.

    Raises:
        ValueError: the version has no such fragment.
        FilterError: ``where`` does not parse.
        UnsupportedFormatError: new values of a legacy dictionary column are not in the dataset's
            dictionary.
    """
    (frag,) = ds.fragment_readers([fragment_id])
    pos = _matching(frag, make_spec(ds.schema, [], where, False, None, None, None))
    if pos is None:
        return FragmentUpdate([], [], [], [], 0)
    new, removed, updated, written = _write_update(
        ds, [(frag, pos)], assignments, data_format, write_tag=write_tag
    )
    return FragmentUpdate(new, removed, updated, written, int(pos.size))


def _write_update(
    ds: Snapshot,
    touched: list[tuple[FragmentReader, np.ndarray]],
    assignments: Assignments,
    data_format: str,
    *,
    write_tag: str = "",
    report: Reporter = SILENT,
) -> tuple[list[Fragment], list[int], list[Fragment], list[str]]:
    """Rewrite the ``touched`` rows with their new values and delete the old copies: the new
    fragments, the fragments left without rows, the fragments with new deletion files, and every
    file written. A failure deletes what it wrote."""
    written: list[str] = []
    writer = FragmentWriter(
        ds.storage,
        ds.schema,
        list(ds.manifest.fields),
        data_format=data_format,
        dictionaries=ds.manifest.dictionaries,
        write_tag=write_tag,
        progress=report,
    )
    try:
        new = _rewrite(ds, touched, assignments, writer)
        written.extend(writer.paths)
        removed, updated = _delete_rewritten(ds, touched, written, write_tag)
    except BaseException:
        writer.abort()
        for path in written:
            with contextlib.suppress(OSError):
                ds.storage.delete(path)
        raise
    return new, removed, updated, written


def plan_update(
    ds: Snapshot,
    updates: Mapping[str, str],
    where: Predicate | None = None,
    data_storage_version: str | None = None,
    report: Reporter = SILENT,
) -> tuple[Pending, int]:
    """The Update operation for ``updates`` of the rows matching ``where`` (all rows if None) in
    ``ds``, with its new data and deletion files written, and how many rows it rewrites.
    ``report`` hears of the rows scanned (phase ``scan``) and rewritten (phase ``write``).

    Raises:
        TypeError, UpdateError, ColumnNotFoundError, FilterError: as :func:`compile_assignments`;
            FilterError also for a ``where`` that does not parse.
        UnsupportedFormatError: ``data_storage_version`` is not the dataset's own data format, the
            dataset's format is not one lance_table writes, or new values of a legacy dictionary
            column are not in the dataset's dictionary.
        CommitConflictError: versions committed since ``ds`` are gone (checked before writing).
    """
    data_format = update_format(ds, data_storage_version)
    assignments = compile_assignments(ds, updates)
    spec = make_spec(ds.schema, [], where, False, None, None, None)
    check_rebasable(ds.storage, Pending(Update((), (), ()), ds.version))

    def matches(frag: FragmentReader) -> np.ndarray | None:
        found = _matching(frag, spec)
        report.advance(frag.physical_rows)
        return found

    if where is not None:
        # as a delete finds its rows: small fragments' predicate columns read as batches
        report.phase("scan", rows_total=sum(f.physical_rows for f in ds.manifest.fragments))
        found, frags, wait = find_matching(ds, where, report.advance)
    else:
        frags = ds.fragment_readers()
        wait = in_flight(frags)
        # the manifest's counts: each fragment's files are opened (and their counts checked) by
        # the task that scans it, on the pool, not one at a time here (a round trip each on S3)
        sizes = [f.fragment.physical_rows for f in frags]
        report.phase("scan", rows_total=sum(sizes))
        found = map_grouped(matches, frags, sizes, in_flight=wait)
    touched = [(frag, pos) for frag, pos in zip(frags, found) if pos is not None]
    report.phase("write", rows_total=sum(int(pos.size) for _, pos in touched))
    new, removed, updated, written = _write_update(ds, touched, assignments, data_format, report=report)
    op = Update(tuple(removed), tuple(updated), tuple(new), (), assignments.field_ids, REWRITE_ROWS)
    count = sum(int(pos.size) for _, pos in touched)
    return Pending(op, ds.version, written=tuple(written)), count


def _chunks(touched: list[tuple[FragmentReader, np.ndarray]]) -> Iterator[tuple[FragmentReader, np.ndarray]]:
    """The matching rows of each fragment in pieces of at most :data:`UPDATE_CHUNK_ROWS` rows that
    span at most :data:`READ_CHUNK_ROWS` physical rows (pieces are read in parallel)."""
    for frag, positions in touched:
        bounds = np.searchsorted(positions, np.arange(0, frag.physical_rows, READ_CHUNK_ROWS)[1:])
        for part in np.split(positions, bounds):
            for start in range(0, part.size, UPDATE_CHUNK_ROWS):
                yield frag, part[start : start + UPDATE_CHUNK_ROWS].astype(np.int64)


def _rewrite(
    ds: Snapshot,
    touched: list[tuple[FragmentReader, np.ndarray]],
    assignments: Assignments,
    writer: FragmentWriter,
) -> list[Fragment]:
    """Write the matching rows with their new values; the new fragments (with the rows' stable
    row ids, on a dataset that has them). Pieces are read and computed ahead on the fragment pool
    (a few at a time: memory stays bounded) while the writer writes the previous ones in order."""
    from lance_table.filters.values import project

    names = ds.schema.names
    targets = list(assignments.values)
    exprs = list(assignments.values.values())

    def compute(item: tuple[FragmentReader, np.ndarray]) -> tuple[FragmentReader, pa.Table, Runs]:
        frag, chunk = item
        runs = Runs.from_sorted_unique(chunk)
        table = frag.read(names, runs)
        computed = project(table, exprs, targets)
        for name in targets:
            column = computed.column(name)
            target = ds.schema.field(name)
            if column.type != target.type:
                column = column.cast(target.type)
            table = table.set_column(names.index(name), target, column)
        return frag, table, runs

    for frag, table, runs in ahead_on(FRAGMENTS, compute, _chunks(touched), workers()):
        for batch in blob_write.with_blob_bytes(ds, frag, table, runs, ds.schema):
            writer.write(batch)
    new = writer.finish()
    _check_dictionaries(ds, writer)
    if not uses_stable_row_ids(ds.manifest):
        return new
    ids = [_row_ids(frag)[positions.astype(np.int64)] for frag, positions in touched]
    all_ids = np.concatenate(ids) if ids else np.zeros(0, np.uint64)
    out, at = [], 0
    for f in new:
        # only the ids: the commit adds the versions (created: the row's; last updated: this one)
        out.append(replace(f, row_id_meta=row_id_meta(all_ids[at : at + f.physical_rows], None, None)))
        at += f.physical_rows
    return out


def _row_ids(frag: FragmentReader) -> np.ndarray:
    ids = frag.row_ids
    assert ids is not None  # a dataset with stable row ids has them for every fragment
    return ids


def _check_dictionaries(ds: Snapshot, writer: FragmentWriter) -> None:
    """An Update cannot change a legacy dataset's dictionaries: refuse values they lack.

    Raises:
        UnsupportedFormatError: naming the field.
    """
    for fid, values in writer.dictionaries.items():
        known = ds.manifest.dictionaries.get(fid)
        if known is not None and len(values) != len(known):
            raise UnsupportedFormatError(
                f"{ds.uri}: the new values of dictionary field {fid} are not all in the dataset's "
                "dictionary; lance_table cannot update them"
            )


def _delete_rewritten(
    ds: Snapshot, touched: list[tuple[FragmentReader, np.ndarray]], written: list[str], tag: str = ""
) -> tuple[list[int], list[Fragment]]:
    """Deletion files for the rewritten rows: the fragments left without live rows, and the others
    with their new deletion files (whose paths are added to ``written``)."""
    removed: list[int] = []
    updated: list[Fragment] = []
    for frag, positions in touched:
        merged = union(frag.deleted, positions)
        if merged.size >= frag.physical_rows:
            removed.append(frag.fragment.id)
            continue
        df = write_deletions(ds.storage, frag.fragment, merged, ds.version, tag=tag)
        written.append(df.path(frag.fragment.id))
        updated.append(replace(frag.fragment, deletion_file=df))
    return removed, updated


def update_rows(
    ds: Snapshot,
    updates: Mapping[str, str],
    where: Predicate | None = None,
    *,
    conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
    retry_timeout: dt.timedelta = DEFAULT_RETRY_TIMEOUT,
    data_storage_version: str | None = None,
    message: str | None = None,
    progress: Progress = None,
) -> tuple[Snapshot, dict[str, int]]:
    """Update the rows of ``ds`` matching ``where``: the version committed and pylance's result,
    ``{"num_rows_updated": n}``. A conflict that a new attempt can get past (another update or
    delete of the same fragments) re-runs the whole update on the latest version, up to
    ``conflict_retries`` times within ``retry_timeout``. ``progress``: see
    :mod:`lance_table.table.progress` (a retry starts the phases again).

    Raises:
        as :func:`plan_update`; UnsupportedFormatError also for a version lance_table cannot
        write; CommitConflictError when the retries run out or the conflict is not retryable;
        InputTypeError when ``progress`` is of no kind taken; UpdateEvaluationError when a value
        or the condition fails on the rows (a division by zero).
    """
    report = reporter("update", progress)
    versions.check_writable(ds.manifest, ds.uri)
    check_can_commit(ds.commit_options, ds.storage)
    if conflict_retries < 0:
        raise UpdateError(f"conflict_retries must not be negative, not {conflict_retries}")

    def attempt(current: Snapshot) -> tuple[Snapshot, dict[str, int]]:
        try:
            pending, count = plan_update(current, updates, where, data_storage_version, report)
        except pa.ArrowInvalid as exc:  # a value or the condition failed on the rows
            raise UpdateEvaluationError(f"LanceError(Arrow): {exc}") from exc
        return current.commit(pending, message=message), {"num_rows_updated": count}

    with report:
        return retry_on_conflict(ds, attempt, conflict_retries, retry_timeout)


__all__ = [
    "DEFAULT_CONFLICT_RETRIES",
    "DEFAULT_RETRY_TIMEOUT",
    "Assignments",
    "FragmentUpdate",
    "compile_assignments",
    "plan_update",
    "update_format",
    "update_fragment",
    "update_rows",
]
