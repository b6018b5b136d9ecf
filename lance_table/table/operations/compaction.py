"""Compaction as pylance does it: plan bins of small fragments, reserve fragment ids, then Rewrite."""

from __future__ import annotations

import itertools
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pyarrow as pa

from lance_table._parallel import FRAGMENTS, ahead_on, map_fragments, workers
from lance_table.errors import UnsupportedFormatError
from lance_table.file.runs import Runs
from lance_table.format.manifest import Fragment
from lance_table.format.transaction import ReserveFragments, Rewrite, RewriteGroup
from lance_table.table import blob_write, fragment_batch, indices, scan
from lance_table.table.blob_write import is_blob_v2_arrow
from lance_table.table.commit import Pending, check_can_commit, check_rebasable
from lance_table.table.commit.row_ids import carried_row_ids, uses_stable_row_ids
from lance_table.table.frag_reuse import MovedGroup, load_versions, next_frag_reuse_index
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations.write import (
    DEFAULT_MAX_BYTES_PER_FILE,
    FragmentWriter,
    check_blob_fields,
    writable_data_format,
)
from lance_table.table.progress import SILENT, Progress, Reporter, reporter
from lance_table.table.scan_spec import default_batch_size
from lance_table.table.snapshot import Snapshot

DEFAULT_TARGET_ROWS = 1024 * 1024
DEFAULT_MAX_ROWS_PER_GROUP = 1024
DEFAULT_MATERIALIZE_DELETIONS = True
DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD = 0.1
COPY_CHUNK_ROWS = 128 * 1024


@dataclass(frozen=True)
class CompactionMetrics:
    """What a compaction did, with pylance's attribute names (``lance.optimize.CompactionMetrics``).

    Attributes:
        fragments_removed: fragments rewritten away.
        fragments_added: fragments written in their place.
        files_removed: data and deletion files no longer referenced by the new version.
        files_added: data files written.

    Example:
        ```python
        metrics = ds.optimize.compact_files(target_rows_per_fragment=1_000_000)
        print(metrics.fragments_removed, metrics.fragments_added, metrics.files_removed, metrics.files_added)
        ```
    """

    fragments_removed: int = 0
    fragments_added: int = 0
    files_removed: int = 0
    files_added: int = 0


def _files_of(frag: Fragment) -> int:
    return len(frag.files) + (frag.deletion_file is not None)


@dataclass
class _Bin:
    fragments: list[FragmentReader] = field(default_factory=list)
    compact_itself: list[bool] = field(default_factory=list)
    indices: tuple[int, ...] = ()  # the indices covering the bin's fragments (all the same)

    @property
    def live_rows(self) -> list[int]:
        return [f.fragment.num_rows for f in self.fragments]

    def is_noop(self) -> bool:
        return not self.fragments or (len(self.fragments) == 1 and not self.compact_itself[0])

    def split(self, target: int) -> list[_Bin]:
        """Split into bins of at least ``target`` rows; the remainder joins the last bin."""
        out = []
        rest = self
        while True:
            counts = rest.live_rows
            n = 0
            rows = 0
            while rows < target and n < len(counts):
                rows += counts[n]
                n += 1
            if sum(counts[n:]) >= target:
                out.append(_Bin(rest.fragments[:n], rest.compact_itself[:n], self.indices))
                rest = _Bin(rest.fragments[n:], rest.compact_itself[n:], self.indices)
            else:
                out.append(rest)
                return out


def plan(
    frags: list[FragmentReader],
    target_rows: int,
    materialize_deletions: bool,
    threshold: float,
    coverage: Callable[[int], tuple[int, ...]] = lambda _: (),
) -> list[_Bin]:
    """Group adjacent fragments to rewrite, the way pylance's planner does; ``coverage`` gives the
    indices covering a fragment id, and fragments covered by different indices never share a bin."""
    bins: list[_Bin] = []
    current: _Bin | None = None
    for frag in frags:
        f = frag.fragment
        deleted_share = f.num_deleted / f.physical_rows if f.physical_rows else 0.0
        if materialize_deletions and deleted_share > threshold:
            candidacy: bool | None = True  # compact itself
        elif f.physical_rows < target_rows:
            candidacy = False  # compact with neighbours
        else:
            candidacy = None
        if candidacy is None:
            if current is not None:
                bins.append(current)
                current = None
            continue
        covered = coverage(f.id)
        if current is not None and current.indices != covered:
            bins.append(current)
            current = None
        if current is None:
            current = _Bin(indices=covered)
        current.fragments.append(frag)
        current.compact_itself.append(candidacy)
    if current is not None:
        bins.append(current)
    return [b for bin_ in bins if not bin_.is_noop() for b in bin_.split(target_rows)]


def _rewrite_bin(
    ds: Snapshot,
    bin_: _Bin,
    max_bytes: int,
    data_format: str,
    report: Reporter = SILENT,
    write_tag: str = "",
    batch_rows: int | None = None,
) -> tuple[list[Fragment], list[str]]:
    # Like pylance, each bin becomes one fragment (unless it passes the byte limit).
    writer = FragmentWriter(
        ds.storage,
        ds.schema,
        list(ds.manifest.fields),
        max_rows_per_file=2**62,
        max_bytes_per_file=max_bytes,
        data_format=data_format,
        dictionaries=ds.manifest.dictionaries,
        write_tag=write_tag,
        progress=report,
    )
    # the rows read, in order, by fragment id: written in pylance's batches (see _rebatch)
    segments: deque[tuple[int, pa.Table]] = deque()
    try:
        # the footers the plan of pieces checks row counts against, read in parallel up front
        scan.open_all(bin_.fragments)
        names = ds.schema.names
        if any(is_blob_v2_arrow(f) for f in ds.schema):
            for frag in bin_.fragments:
                for lo in range(0, frag.physical_rows, COPY_CHUNK_ROWS):
                    runs: Runs = frag.live_runs(lo, min(lo + COPY_CHUNK_ROWS, frag.physical_rows))
                    if runs.total:
                        table = frag.read(names, runs)
                        # blob v2 columns read as descriptors: their bytes are written anew
                        blobs = blob_write.with_blob_bytes(ds, frag, table, runs, ds.schema)
                        segments.extend((frag.fragment.id, pa.Table.from_batches([b])) for b in blobs)
                        for batch in _rebatch(segments, batch_rows):
                            writer.write(batch)
        else:
            # Pieces of about COPY_CHUNK_ROWS rows (many small fragments read as one batch) are
            # read on the workers, a few ahead of the writer: memory stays bounded by the depth.
            def read(piece: list[tuple[FragmentReader, int, int]]) -> list[tuple[int, pa.Table]]:
                runs = [f.live_runs(lo, hi) for f, lo, hi in piece]
                table = fragment_batch.read([f for f, _, _ in piece], names, runs)
                starts = [0, *itertools.accumulate(r.total for r in runs)]
                return [
                    (f.fragment.id, table.slice(a, b - a))
                    for (f, _, _), a, b in zip(piece, starts, starts[1:])
                ]

            # The batches of a piece go to the writer together: each column shreds their rows
            # at once where no page or file can end among them (the same files).
            for read_segments in ahead_on(FRAGMENTS, read, _pieces(bin_.fragments), workers()):
                segments.extend(read_segments)
                writer.write_many(list(_rebatch(segments, batch_rows)))
        writer.write_many(list(_rebatch(segments, batch_rows, final=True)))
        fragments = writer.finish()
        for fid, values in writer.dictionaries.items():
            known = ds.manifest.dictionaries.get(fid)
            if known is not None and len(values) != len(known):
                # A Rewrite cannot change the manifest's dictionary: the rows hold values it lacks.
                raise UnsupportedFormatError(
                    f"{ds.uri}: data files hold values of dictionary field {fid} that the manifest's "
                    "dictionary lacks; compaction cannot rewrite them"
                )
        return fragments, writer.paths
    except BaseException:
        writer.abort()
        raise


def _warn_uncovered(index_list: list[indices.IndexMetadata], bins: list[_Bin]) -> None:
    """Warn, naming them, of the indices that stop covering the fragments a compaction of a dataset
    with stable row ids rewrites (pylance would rewrite their files)."""
    touched = {pos for b in bins for pos in b.indices}
    names = sorted({index_list[pos].name for pos in touched if not indices.keyed_by_row_id(index_list[pos])})
    names = [n for n in names if n not in indices.SYSTEM_INDEX_NAMES]
    if names:
        warnings.warn(
            f"compaction leaves the rewritten rows out of index(es) {', '.join(names)} (lance_table "
            "does not rewrite index files): queries scan those rows until the index is optimized",
            stacklevel=3,
        )


def _rebatch(
    segments: deque[tuple[int, pa.Table]], batch_rows: int | None, final: bool = False
) -> Iterator[pa.RecordBatch]:
    """Take rows off the front of ``segments`` (fragment id, live rows read, in order) as the
    batches pylance's compaction scan gives its writer, which checks the bytes written after each:
    ``batch_rows`` live rows at a time, counted from each fragment's first row (a fragment's last
    batch may be shorter). Rows that may still join a batch stay queued unless ``final``; with
    ``batch_rows`` None, every row goes, in batches of at most a segment."""
    while segments:
        fid = segments[0][0]
        k = next((i for i, (other, _) in enumerate(segments) if other != fid), len(segments))
        queued = sum(segments[i][1].num_rows for i in range(k))
        if k == len(segments) and not final and batch_rows is not None and queued < batch_rows:
            return  # the fragment's rows may continue in a segment not yet read
        if batch_rows is None:
            for _ in range(k):
                table = segments.popleft()[1]
                if table.num_rows:
                    yield from table.combine_chunks().to_batches()
            continue
        take = min(batch_rows, queued)
        parts, got = [], 0
        while got < take:
            _, table = segments.popleft()
            need = take - got
            if table.num_rows > need:
                segments.appendleft((fid, table.slice(need)))
                table = table.slice(0, need)
            parts.append(table)
            got += table.num_rows
        while segments and segments[0][0] == fid and not segments[0][1].num_rows:
            segments.popleft()
        if take:
            yield from pa.concat_tables(parts).combine_chunks().to_batches(max_chunksize=take)


def _pieces(frags: list[FragmentReader]) -> Iterator[list[tuple[FragmentReader, int, int]]]:
    """The fragments' rows in order, as lists of ranges ``(fragment, lo, hi)`` of about
    :data:`COPY_CHUNK_ROWS` rows in all (a large fragment in several, small ones together)."""
    piece: list[tuple[FragmentReader, int, int]] = []
    rows = 0
    for frag in frags:
        n = frag.physical_rows
        for lo in range(0, n, COPY_CHUNK_ROWS):
            hi = min(lo + COPY_CHUNK_ROWS, n)
            if piece and rows + hi - lo > COPY_CHUNK_ROWS:
                yield piece
                piece, rows = [], 0
            piece.append((frag, lo, hi))
            rows += hi - lo
    if piece:
        yield piece


def _try(
    fn: Callable[[], tuple[list[Fragment], list[str]]],
) -> tuple[tuple[list[Fragment], list[str]], BaseException | None]:
    try:
        return fn(), None
    except Exception as exc:
        return ([], []), exc


@dataclass
class CompactionJob:
    """A planned compaction of one version: its bins (each rewritten into new fragments on its own,
    in any process) and what the rewrite and the commit need to know."""

    ds: Snapshot
    bins: list[_Bin]
    data_format: str
    max_bytes: int
    stable: bool  # rows keep their ids: the rewrite carries them
    record_moves: bool  # moves of indexed rows go into the fragment reuse index
    # rows of each batch written, after which the byte limit is checked (pylance's batch_size;
    # None: the pieces as read, when no byte limit was given)
    batch_rows: int | None = None


def job_for(
    ds: Snapshot,
    bins: list[_Bin],
    max_bytes_per_file: int | None,
    *,
    committing: bool = True,
    batch_size: int | None = None,
) -> CompactionJob:
    """The job that rewrites ``bins`` of ``ds``, after the checks every compaction makes; with
    ``committing=False`` (a task that only rewrites, committed elsewhere) without the commit's own
    checks and warnings.

    Raises:
        as :func:`compact_files`.
    """
    data_format = writable_data_format(ds.manifest, ds.uri)
    check_blob_fields(ds.manifest.fields, data_format, ds.uri)
    stable = uses_stable_row_ids(ds.manifest)
    limit = max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE
    # a file ends after the batch that takes it past the byte limit, as in pylance
    batch_rows = batch_size or (default_batch_size() if max_bytes_per_file else None)
    if not committing:
        return CompactionJob(ds, bins, data_format, limit, stable, False, batch_rows)
    index_list = indices.decode_section(ds.manifest.index_section)
    # pylance 14 records the moves of indexed rows only, and none on datasets with stable row ids
    user_indices = {pos for pos, idx in enumerate(index_list) if not indices.is_system_index(idx)}
    record_moves = not stable and any(user_indices.intersection(b.indices) for b in bins)
    if stable:
        _warn_uncovered(index_list, bins)
    # The rewrite commits after a ReserveFragments version: refuse before either if it cannot land.
    check_rebasable(ds.storage, Pending(Rewrite(()), ds.version))
    return CompactionJob(ds, bins, data_format, limit, stable, record_moves, batch_rows)


def plan_compaction(
    ds: Snapshot,
    *,
    target_rows_per_fragment: int | None = DEFAULT_TARGET_ROWS,
    materialize_deletions: bool | None = DEFAULT_MATERIALIZE_DELETIONS,
    materialize_deletions_threshold: float | None = DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD,
    max_bytes_per_file: int | None = None,
    batch_size: int | None = None,
) -> CompactionJob | None:
    """The compaction of ``ds`` as pylance plans it, or None when there is nothing to compact. An
    option given as None takes its default (as in pylance).

    Raises:
        as :func:`compact_files`.
    """
    if target_rows_per_fragment is None:
        target_rows_per_fragment = DEFAULT_TARGET_ROWS
    if materialize_deletions is None:
        materialize_deletions = DEFAULT_MATERIALIZE_DELETIONS
    if materialize_deletions_threshold is None:
        materialize_deletions_threshold = DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD
    if target_rows_per_fragment <= 0:
        raise ValueError("target_rows_per_fragment must be positive")
    writable_data_format(ds.manifest, ds.uri)
    check_can_commit(ds.commit_options, ds.storage)
    if materialize_deletions and materialize_deletions_threshold >= 1.0:
        materialize_deletions = False
    index_list = indices.decode_section(ds.manifest.index_section)
    bins = plan(
        ds.fragment_readers(),
        target_rows_per_fragment,
        materialize_deletions,
        materialize_deletions_threshold,
        indices.coverage(index_list, lambda idx: load_versions(ds.storage, idx)),
    )
    if not bins:
        return None
    return job_for(ds, bins, max_bytes_per_file, batch_size=batch_size)


def rewrite(
    job: CompactionJob, bin_: _Bin, report: Reporter = SILENT, write_tag: str = ""
) -> tuple[list[Fragment], list[str]]:
    """Rewrite one bin: its new fragments (ids not yet assigned; with stable row ids, carrying the
    rows' ids) and every file written (sidecars too; data files named with ``write_tag``). A
    failure deletes what it wrote. ``report`` hears of the rows and files written."""
    new, files = _rewrite_bin(job.ds, bin_, job.max_bytes, job.data_format, report, write_tag, job.batch_rows)
    if job.stable:  # the rewritten rows keep their ids (and versions)
        try:
            new = carried_row_ids([(f.fragment, f.live_positions()) for f in bin_.fragments], new)
        except BaseException:
            for path in files:
                job.ds.storage.delete(path)
            raise
    return new, files


def rewrite_fragments(
    job: CompactionJob, ds: Snapshot, fragment_ids: list[int], write_tag: str = ""
) -> tuple[list[Fragment], list[str]]:
    """:func:`rewrite` of the bin of fragments ``fragment_ids`` of ``ds``: the version ``job``
    planned on, opened anew (in another process, where the job's own readers are not)."""
    here = replace(job, ds=ds, bins=[])
    return rewrite(here, _Bin(ds.fragment_readers(fragment_ids)), write_tag=write_tag)


def commit_compaction(
    job: CompactionJob, written: list[list[Fragment]], files: tuple[str, ...]
) -> tuple[Snapshot, CompactionMetrics]:
    """Commit the rewritten bins (``written[i]`` replaces ``job.bins[i]``): ``ReserveFragments``,
    then ``Rewrite``, as pylance does. A failure deletes ``files``.

    Raises:
        CommitConflictError: a concurrent delete or compaction touched the same fragments.
    """
    ds = job.ds
    total = sum(len(w) for w in written)
    # A failed reservation deletes the new files; so does a failed rewrite (through its pending).
    reserved = ds.commit(Pending(ReserveFragments(total), ds.version, written=files)).manifest
    assert reserved.max_fragment_id is not None
    next_id = reserved.max_fragment_id - total + 1
    groups = []
    for bin_, new in zip(job.bins, written, strict=True):
        with_ids = []
        for frag in new:
            with_ids.append(replace(frag, id=next_id))
            next_id += 1
        groups.append(RewriteGroup(tuple(f.fragment for f in bin_.fragments), tuple(with_ids)))
    reuse, extends = None, b""
    if job.record_moves:
        moved = [
            MovedGroup([(f.fragment, f.live_positions()) for f in bin_.fragments], group.new_fragments)
            for bin_, group in zip(job.bins, groups, strict=True)
        ]
        try:
            reuse, extends, details = next_frag_reuse_index(ds.storage, reserved, moved, job.stable)
        except BaseException:
            for path in files:
                ds.storage.delete(path)
            raise
        files += tuple(details)
    done = ds.commit(
        Pending(
            Rewrite(tuple(groups), frag_reuse_index=reuse, frag_reuse_extends=extends),
            ds.version,
            written=files,
        )
    )
    metrics = CompactionMetrics(
        fragments_removed=sum(len(g.old_fragments) for g in groups),
        fragments_added=total,
        files_removed=sum(_files_of(f) for g in groups for f in g.old_fragments),
        files_added=sum(_files_of(f) for g in groups for f in g.new_fragments),
    )
    return done, metrics


def compact_files(
    ds: Snapshot,
    *,
    target_rows_per_fragment: int | None = DEFAULT_TARGET_ROWS,
    max_rows_per_group: int | None = DEFAULT_MAX_ROWS_PER_GROUP,
    materialize_deletions: bool | None = DEFAULT_MATERIALIZE_DELETIONS,
    materialize_deletions_threshold: float | None = DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD,
    max_bytes_per_file: int | None = None,
    num_threads: int | None = None,
    batch_size: int | None = None,
    progress: Progress = None,
) -> tuple[Snapshot, CompactionMetrics]:
    """Rewrite small fragments into fragments of about ``target_rows_per_fragment`` rows, dropping
    deleted rows; commits ``ReserveFragments`` and then ``Rewrite`` (two versions), as pylance does.
    Returns the new version and what changed, or ``ds`` itself and zero metrics when there is
    nothing to compact. An option given as None takes its default (as in pylance).

    ``max_rows_per_group`` and ``num_threads`` are accepted for pylance compatibility. The rows are
    written in batches of ``batch_size`` rows (the scan's default when a ``max_bytes_per_file`` is
    given), and a new file ends after the batch that takes it past ``max_bytes_per_file`` bytes
    written, as in pylance.
    ``progress`` (see :mod:`lance_table.table.progress`) follows the rewrite: the rows of the
    fragments rewritten (their total known), and the files written.

    Indices (lance_table does not rewrite index files) stay valid as with pylance's deferred
    index remapping: fragments covered by different indices are never merged; with stable row
    ids the indices still hold the moved rows' ids and their fragment bitmaps move to the new
    fragments (bitmap and vector indices, which pylance 14 keeps as they are), while the indices
    pylance would rewrite (BTREE and the others) stop covering the rewritten fragments, with a
    warning naming them: their rows are scanned, never wrongly indexed. With row addresses, a
    compaction that moves indexed rows records the old-to-new addresses in pylance's fragment
    reuse index (``__lance_frag_reuse``), through which pylance's indices keep answering, exactly
    as pylance's ``defer_index_remap=True`` does (so pylance's ``defer_index_remap`` option
    changes nothing here). pylance without deferral would rewrite the index files instead; the
    answers are the same.

    Raises:
        UnsupportedFormatError: a data format lance_table does not write, or blob v2 columns it
            does not write (nested ones, external blobs).
        CorruptFileError: the dataset's fragment reuse index does not parse.
        CorruptFileError, DataFileNotFoundError: a blob v2 descriptor names bytes that are not there.
        CommitConflictError: a concurrent delete or compaction touched the same fragments, or
            versions committed since ``ds`` are gone.
        InputTypeError: ``progress`` is of no kind taken.
    """
    report = reporter("compact", progress)
    job = plan_compaction(
        ds,
        target_rows_per_fragment=target_rows_per_fragment,
        materialize_deletions=materialize_deletions,
        materialize_deletions_threshold=materialize_deletions_threshold,
        max_bytes_per_file=max_bytes_per_file,
        batch_size=batch_size,
    )
    if job is None:
        return ds, CompactionMetrics()
    # Bins are independent: rewrite them in parallel, then fail (and clean up) if any failed.
    with report:
        report.phase("rewrite", rows_total=sum(sum(b.live_rows) for b in job.bins))
        results = map_fragments(lambda bin_: _try(lambda: rewrite(job, bin_, report)), job.bins)
    written = [frags for (frags, _), _ in results]
    files = tuple(path for (_, written_paths), _ in results for path in written_paths)  # with sidecars
    for _, error in results:
        if error is not None:
            for path in files:
                ds.storage.delete(path)
            raise error
    return commit_compaction(job, written, files)
