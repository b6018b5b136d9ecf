"""Planning a merge_insert against one version: match the source's keys with the target's, fragment
by fragment, reading only the key columns; then rewrite only the fragments with matched (or
deleted) rows. The result is pylance's ``Update`` transaction: touched fragments get deletion files
(or are removed), and new fragments hold the updated rows (first, with their stable row ids) and
the inserted ones.

Memory: the source's keys of one key range (see :meth:`MergeSource.key_ranges`), the matches found
(two integers per matched row), and the rows of one fragment being rewritten; never the target.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lance_table.errors import MergeSourceError, UnsupportedOperationError
from lance_table.file.arrow_take import filter_rows
from lance_table.file.runs import Runs
from lance_table.format.manifest import Fragment
from lance_table.format.operations import REWRITE_ROWS, Update
from lance_table.format.row_ids import row_id_meta
from lance_table.schema import arrow_schema_from_fields
from lance_table.table.blob_write import blob_column, is_blob_v2_arrow, with_blob_bytes
from lance_table.table.commit import Pending
from lance_table.table.commit.row_ids import uses_stable_row_ids
from lance_table.table.deletion import union, write_deletions
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations.merge_match import find_matches
from lance_table.table.operations.merge_source import MergeSource
from lance_table.table.operations.write import FragmentWriter, check_blob_fields, writable_data_format
from lance_table.table.operations.write_bases import WriteTarget, plan_bases
from lance_table.table.progress import SILENT, Reporter
from lance_table.table.scan import READ_CHUNK_ROWS, evaluate_mask, make_spec, matching_positions
from lance_table.table.snapshot import Snapshot

# New rows are queued up to this many (or this many bytes: blobs) before they are written.
WRITE_BATCH_ROWS = 64 * 1024
WRITE_BATCH_BYTES = 64 * 1024 * 1024
# What happens to matched target rows.
UPDATE, DELETE, FAIL = "update", "delete", "fail"


@dataclass(frozen=True)
class MergeSpec:
    """What a merge_insert does (the builder's choices), independent of the data."""

    on: tuple[str, ...]
    matched: str | None = None
    matched_condition: str | None = None
    insert: bool = False
    by_source_delete: bool = False
    by_source_condition: str | None = None
    data_format: str | None = None
    # where new data files go (pylance's ``target_bases``/``target_all_bases``; see write_bases)
    target_bases: tuple[str, ...] | None = None
    target_all_bases: bool | None = None


@dataclass
class MergeStats:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    def as_dict(self) -> dict[str, int]:
        """pylance's statistics dict."""
        return {
            "num_inserted_rows": self.inserted,
            "num_updated_rows": self.updated,
            "num_deleted_rows": self.deleted,
        }


def _describe_key(rows: Callable[[np.ndarray], pa.Table], on: tuple[str, ...], src_index: int) -> str:
    row = rows(np.array([src_index])).select(list(on)).to_pylist()[0]
    return ", ".join(f"{k} = {row[k]!r}" for k in on)


def _read_at(frag: FragmentReader, names: list[str], positions: np.ndarray) -> pa.Table:
    """Columns ``names`` of the rows at sorted unique ``positions``."""
    return frag.read(names, Runs.from_sorted_unique(positions.astype(np.int64)))


def _condition_mask(
    frag: FragmentReader,
    snap: Snapshot,
    rows: Callable[[np.ndarray], pa.Table],
    pos: np.ndarray,
    src: np.ndarray,
    cond: str,
) -> np.ndarray:
    """Which matched pairs satisfy ``cond`` (``source.`` and ``target.`` qualified columns)."""
    from lance_table.filters import compile_filter  # (loads the SQL parser: only when needed)

    names = snap.read_schema.names
    target = _read_at(frag, names, pos)
    source_rows = rows(src)
    both = pa.table(
        {
            "source": pa.StructArray.from_arrays(
                [c.combine_chunks() for c in source_rows.columns], names=source_rows.column_names
            ),
            "target": pa.StructArray.from_arrays([c.combine_chunks() for c in target.columns], names=names),
        }
    )
    expr, _ = compile_filter(cond, both.schema)
    return evaluate_mask(both, expr)


def _by_source_positions(
    frag: FragmentReader, snap: Snapshot, matched: np.ndarray, cond: str | None
) -> np.ndarray:
    """Live rows of ``frag`` matched by no source row (and satisfying ``cond``)."""
    if cond is None:
        candidates = frag.live_positions()
    else:
        spec = make_spec(snap.schema, [], cond, False, None, None, None)
        parts = [
            matching_positions(frag, spec, lo, min(lo + READ_CHUNK_ROWS, frag.physical_rows)).positions()
            for lo in range(0, frag.physical_rows, READ_CHUNK_ROWS)
        ]
        candidates = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return np.setdiff1d(candidates, matched, assume_unique=False)


def full_rows(schema: pa.Schema, present: pa.Table, fill: pa.Table | None) -> pa.RecordBatch:
    """Rows of ``schema``: ``present``'s columns, the rest from ``fill`` (same rows) or nulls.
    A blob v2 column of ``present`` (bytes or a blob struct) becomes the logical blob struct."""
    n = present.num_rows
    cols = []
    for f in schema:
        if f.name in present.column_names:
            col = present.column(f.name).combine_chunks()
            cols.append(blob_column(col, f) if is_blob_v2_arrow(f) else col)
        elif fill is not None:
            cols.append(fill.column(f.name).combine_chunks())
        else:
            cols.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


class MergeOutput:
    """The new fragments: rows are written as they come (updated rows before inserted ones), and
    the stable row ids of the updated rows are kept for the fragments' row id sequences."""

    def __init__(
        self,
        snap: Snapshot,
        data_format: str | None,
        report: Reporter = SILENT,
        *,
        write_tag: str = "",
        targets: Sequence[WriteTarget] = (),
    ) -> None:
        m = snap.manifest
        fmt = data_format or writable_data_format(m, snap.uri)
        self.schema = arrow_schema_from_fields(m.fields, m.schema_metadata)
        self.read_schema = snap.read_schema
        self.writer = FragmentWriter(
            snap.storage,
            self.schema,
            list(m.fields),
            data_format=fmt,
            dictionaries=m.dictionaries,
            write_tag=write_tag,
            progress=report,
            targets=targets,
        )
        self._dicts = dict(m.dictionaries)
        self.ids: list[np.ndarray] = []
        self._queued: list[pa.RecordBatch] = []
        self._rows = 0
        self._bytes = 0
        self.stable = uses_stable_row_ids(m)

    def write(self, batch: pa.RecordBatch, row_ids: np.ndarray | None = None) -> None:
        """Queue ``batch`` (written once :data:`WRITE_BATCH_ROWS` rows are queued: a tiny batch
        per fragment would make tiny pages)."""
        if not batch.num_rows:
            return
        self._queued.append(batch)
        self._rows += batch.num_rows
        self._bytes += batch.nbytes
        if row_ids is not None:
            self.ids.append(row_ids)
        if self._rows >= WRITE_BATCH_ROWS or self._bytes >= WRITE_BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        queued, self._queued, self._rows, self._bytes = self._queued, [], 0, 0
        if len(queued) == 1:
            self.writer.write(queued[0])
        elif queued:
            for batch in pa.Table.from_batches(queued).combine_chunks().to_batches():
                self.writer.write(batch)

    def finish(self) -> list[Fragment]:
        self._flush()
        frags = self.writer.finish()
        if self.writer.dictionaries.keys() != self._dicts.keys() or any(
            not self.writer.dictionaries[k].equals(v) for k, v in self._dicts.items()
        ):
            raise UnsupportedOperationError(
                "merge_insert brings new values to a dictionary-encoded column of this legacy "
                "dataset, which an Update cannot record"
            )
        if not self.ids:
            return frags
        ids = np.concatenate(self.ids).astype(np.uint64)
        out, start = [], 0
        for f in frags:
            have = ids[start : start + f.physical_rows]
            start += have.size
            out.append(replace(f, row_id_meta=row_id_meta(have, None, None)) if have.size else f)
        return out


def _write_updated(
    out: MergeOutput,
    snap: Snapshot,
    frag: FragmentReader,
    rows: Callable[[np.ndarray], pa.Table],
    source_names: Sequence[str],
    pos: np.ndarray,
    src: np.ndarray,
    ids: np.ndarray | None,
) -> None:
    """Write the updated rows: the source rows ``src`` for the target rows ``pos`` of ``frag``, the
    columns the source lacks read from the target (blob v2 columns as their bytes, in batches of
    bounded size, as compaction rewrites them)."""
    missing = [n for n in out.schema.names if n not in source_names]
    fill_schema = pa.schema([out.schema.field(n) for n in missing])
    for lo in range(0, pos.size, WRITE_BATCH_ROWS):  # a slice at a time: bounded copies
        at = slice(lo, lo + WRITE_BATCH_ROWS)
        present = rows(src[at])
        if not missing:
            out.write(full_rows(out.schema, present, None), ids[at] if ids is not None else None)
            continue
        runs = Runs.from_sorted_unique(pos[at].astype(np.int64))
        start = lo
        for batch in with_blob_bytes(snap, frag, frag.read(missing, runs), runs, fill_schema):
            n = batch.num_rows
            full = full_rows(out.schema, present.slice(start - lo, n), pa.Table.from_batches([batch]))
            out.write(full, ids[start : start + n] if ids is not None else None)
            start += n


@dataclass
class FragmentChange:
    """What a merge did to one target fragment: removed (all its rows gone), or given a new
    deletion file (``updated``, written at ``written``), or neither."""

    removed: int | None = None
    updated: Fragment | None = None
    written: str | None = None


def merge_fragment(
    snap: Snapshot,
    spec: MergeSpec,
    frag: FragmentReader,
    pos: np.ndarray,
    src: np.ndarray,
    rows: Callable[[np.ndarray], pa.Table],
    source_names: Sequence[str],
    out: MergeOutput,
    stats: MergeStats,
    *,
    tag: str = "",
) -> FragmentChange:
    """Merge into one target fragment: ``pos`` are its matched positions (sorted) and ``src`` the
    matching source rows' indices, which ``rows`` turns into the source rows (of columns
    ``source_names``). Updated rows go to ``out``; the fragment's deletion file (its name carrying
    ``tag``) is written; ``stats`` counts what changed.

    Raises:
        MergeSourceError: several source rows match one target row (an update or delete of matched
            rows), or a row matched under ``when_matched_fail``.
        FilterError: a condition does not parse.
    """
    all_pos = pos
    if pos.size and spec.matched is not None:
        if spec.matched == FAIL:
            raise MergeSourceError(
                f"merge insert failed: found matching row with key values: "
                f"{_describe_key(rows, spec.on, int(src[0]))}"
            )
        dup = np.flatnonzero(pos[1:] == pos[:-1])
        if dup.size:
            raise MergeSourceError(
                "ambiguous merge inserts are prohibited: multiple source rows match the same "
                f"target row on ({_describe_key(rows, spec.on, int(src[dup[0]]))}); ensure "
                "each target row is matched by at most one source row"
            )
    gone = np.zeros(0, np.int64)
    if pos.size and spec.matched == UPDATE:
        if spec.matched_condition is not None:
            keep = _condition_mask(frag, snap, rows, pos, src, spec.matched_condition)
            pos, src = pos[keep], src[keep]
        if pos.size:
            ids = frag.row_ids[pos] if frag.row_ids is not None and out.stable else None
            _write_updated(out, snap, frag, rows, source_names, pos, src, ids)
            stats.updated += int(pos.size)
            gone = pos
    elif pos.size and spec.matched == DELETE:
        gone = pos
        stats.deleted += int(pos.size)
    if spec.by_source_delete:
        extra = _by_source_positions(frag, snap, all_pos, spec.by_source_condition)
        stats.deleted += int(extra.size)
        gone = np.union1d(gone, extra)
    if not gone.size:
        return FragmentChange()
    merged = union(frag.deleted, gone.astype(np.uint32))
    if merged.size >= frag.physical_rows:
        return FragmentChange(removed=frag.fragment.id)
    df = write_deletions(snap.storage, frag.fragment, merged, snap.version, tag=tag)
    return FragmentChange(updated=replace(frag.fragment, deletion_file=df), written=df.path(frag.fragment.id))


def _rows_to_write(spec: MergeSpec, sources: int, matches: list[tuple[np.ndarray, np.ndarray]]) -> int | None:
    """How many rows a merge writes (updated and inserted), unless a condition decides it."""
    if spec.matched == UPDATE and spec.matched_condition is not None:
        return None
    seen = np.zeros(sources, bool)
    for _, src in matches:
        seen[src] = True
    updated = sum(int(pos.size) for pos, _ in matches) if spec.matched == UPDATE else 0
    return updated + (sources - int(seen.sum()) if spec.insert else 0)


def plan_merge(
    snap: Snapshot, spec: MergeSpec, source: MergeSource, limit: int, report: Reporter = SILENT
) -> tuple[Pending, MergeStats]:
    """The Update a merge_insert of ``source`` into ``snap`` commits (its files written), and its
    statistics. Nothing is left behind when it raises. ``report`` hears of the target rows read
    (phase ``match``) and of the rows written (phase ``write``).

    Raises:
        MergeSourceError: several source rows match one target row (an update or delete of matched
            rows), or a row matched under ``when_matched_fail``.
        FilterError: a condition does not parse.
    """
    frags = snap.fragment_readers()
    stats = MergeStats()
    m = snap.manifest
    bases = plan_bases(m, "append", None, spec.target_bases, spec.target_all_bases, uri=snap.uri)
    out = MergeOutput(snap, spec.data_format, report, targets=bases.open(snap.storage))
    check_blob_fields(snap.manifest.fields, out.writer.data_format, snap.uri)
    written: list[str] = []
    updated_frags, removed = [], []
    matched_src = np.zeros(source.num_rows, bool)
    try:
        matches = find_matches(frags, source, spec.on, limit, report)
        if report.active:
            report.phase("write", rows_total=_rows_to_write(spec, source.num_rows, matches))
        names = source.table.column_names
        for frag, (pos, src) in zip(frags, matches):
            matched_src[src] = True
            change = merge_fragment(snap, spec, frag, pos, src, source.rows, names, out, stats)
            if change.removed is not None:
                removed.append(change.removed)
            if change.updated is not None:
                assert change.written is not None
                written.append(change.written)
                updated_frags.append(change.updated)
        if spec.insert:
            for lo in range(0, source.num_rows, WRITE_BATCH_ROWS):
                keep = ~matched_src[lo : lo + WRITE_BATCH_ROWS]
                if keep.any():
                    rows = filter_rows(source.table.slice(lo, keep.size), pa.array(keep))
                    out.write(full_rows(out.schema, rows, None))
                    stats.inserted += int(keep.sum())
        new = out.finish()
    except BaseException:
        out.writer.abort()
        for path in written:
            with contextlib.suppress(OSError):
                snap.storage.delete(path)
        raise
    op = Update(
        tuple(sorted(removed)),
        tuple(updated_frags),
        tuple(new),
        fields_modified=(),
        fields_for_preserving_frag_bitmap=tuple(f.id for f in snap.manifest.fields),
        update_mode=REWRITE_ROWS,
    )
    files = tuple(written) + tuple(out.writer.paths)
    return Pending(op, snap.version, written=files, elsewhere=tuple(out.writer.elsewhere)), stats
