"""Compaction as pylance does it: plan bins of small fragments, reserve fragment ids, then Rewrite.

The bins are planned in :mod:`~lance_table.table.operations.compaction_bins`; each is rewritten by
:mod:`~lance_table.table.operations.compaction_rewrite`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

from lance_table._parallel import FRAGMENTS, ahead_on, map_fragments
from lance_table.errors import BinaryCopyError
from lance_table.file.concat import DEFAULT_READ_BATCH_BYTES
from lance_table.format.manifest import Fragment
from lance_table.format.transaction import ReserveFragments, Rewrite, RewriteGroup
from lance_table.table import indices, scan
from lance_table.table.commit import Pending, check_can_commit, check_rebasable
from lance_table.table.commit.row_ids import carried_row_ids, uses_stable_row_ids
from lance_table.table.frag_reuse import MovedGroup, load_versions, next_frag_reuse_index
from lance_table.table.operations.compaction_bins import _Bin, plan
from lance_table.table.operations.compaction_copy import COMPACTION_MODES, copy_bin, copy_plan
from lance_table.table.operations.compaction_rewrite import _rewrite_bin
from lance_table.table.operations.write import (
    DEFAULT_MAX_BYTES_PER_FILE,
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
    #: pylance's compaction mode: "reencode", or binary copy where possible ("try_binary_copy") or
    #: for every bin ("force_binary_copy")
    mode: str = "reencode"
    #: the most bytes a binary copy reads of a file at once
    read_batch_bytes: int = DEFAULT_READ_BATCH_BYTES
    #: a file written by binary copy ends after the input that takes it to this many rows
    target_rows: int = DEFAULT_TARGET_ROWS


def job_for(
    ds: Snapshot,
    bins: list[_Bin],
    max_bytes_per_file: int | None,
    *,
    committing: bool = True,
    batch_size: int | None = None,
    compaction_mode: str | None = None,
    binary_copy_read_batch_bytes: int | None = None,
    target_rows_per_fragment: int | None = None,
) -> CompactionJob:
    """The job that rewrites ``bins`` of ``ds``, after the checks every compaction makes; with
    ``committing=False`` (a task that only rewrites, committed elsewhere) without the commit's own
    checks and warnings.

    Raises:
        as :func:`compact_files`.
    """
    mode = compaction_mode or "reencode"
    if mode not in COMPACTION_MODES:
        raise ValueError(f"compaction_mode must be one of {COMPACTION_MODES}, not {compaction_mode!r}")
    read_batch = binary_copy_read_batch_bytes or DEFAULT_READ_BATCH_BYTES
    if read_batch < 1:
        raise ValueError(f"binary_copy_read_batch_bytes must be positive, got {read_batch}")
    data_format = writable_data_format(ds.manifest, ds.uri)
    check_blob_fields(ds.manifest.fields, data_format, ds.uri)
    stable = uses_stable_row_ids(ds.manifest)
    limit = max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE
    # a file ends after the batch that takes it past the byte limit, as in pylance
    batch_rows = batch_size or (default_batch_size() if max_bytes_per_file else None)
    target = target_rows_per_fragment or DEFAULT_TARGET_ROWS
    if not committing:
        return CompactionJob(
            ds, bins, data_format, limit, stable, False, batch_rows, mode, read_batch, target
        )
    index_list = indices.decode_section(ds.manifest.index_section)
    # pylance 14 records the moves of indexed rows only, and none on datasets with stable row ids
    user_indices = {pos for pos, idx in enumerate(index_list) if not indices.is_system_index(idx)}
    record_moves = not stable and any(user_indices.intersection(b.indices) for b in bins)
    if stable:
        _warn_uncovered(index_list, bins)
    # The rewrite commits after a ReserveFragments version: refuse before either if it cannot land.
    check_rebasable(ds.storage, Pending(Rewrite(()), ds.version))
    return CompactionJob(
        ds, bins, data_format, limit, stable, record_moves, batch_rows, mode, read_batch, target
    )


def plan_compaction(
    ds: Snapshot,
    *,
    target_rows_per_fragment: int | None = DEFAULT_TARGET_ROWS,
    materialize_deletions: bool | None = DEFAULT_MATERIALIZE_DELETIONS,
    materialize_deletions_threshold: float | None = DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD,
    max_bytes_per_file: int | None = None,
    batch_size: int | None = None,
    compaction_mode: str | None = None,
    binary_copy_read_batch_bytes: int | None = None,
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
    return job_for(
        ds,
        bins,
        max_bytes_per_file,
        batch_size=batch_size,
        compaction_mode=compaction_mode,
        binary_copy_read_batch_bytes=binary_copy_read_batch_bytes,
        target_rows_per_fragment=target_rows_per_fragment,
    )


def rewrite(
    job: CompactionJob,
    bin_: _Bin,
    report: Reporter = SILENT,
    write_tag: str = "",
    threads: int | None = None,
) -> tuple[list[Fragment], list[str]]:
    """Rewrite one bin: its new fragments (ids not yet assigned; with stable row ids, carrying the
    rows' ids) and every file written (sidecars too; data files named with ``write_tag``). A
    failure deletes what it wrote. ``report`` hears of the rows and files written; ``threads``
    bounds the pieces read ahead of the writer."""
    new, files = _copy_or_rewrite(job, bin_, report, write_tag, threads)
    if job.stable:  # the rewritten rows keep their ids (and versions)
        try:
            new = carried_row_ids([(f.fragment, f.live_positions()) for f in bin_.fragments], new)
        except BaseException:
            for path in files:
                job.ds.storage.delete(path)
            raise
    return new, files


def _copy_or_rewrite(
    job: CompactionJob, bin_: _Bin, report: Reporter, write_tag: str, threads: int | None
) -> tuple[list[Fragment], list[str]]:
    """The bin copied page by page where the job's mode asks for it and the bin allows it (see
    :mod:`~lance_table.table.operations.compaction_copy`), else re-encoded."""
    if job.mode != "reencode":
        scan.open_all(bin_.fragments)  # the footers, read in parallel
        plans = copy_plan(job.ds, bin_, job.target_rows, job.max_bytes)
        if not isinstance(plans, str):
            return copy_bin(job.ds, bin_, plans, job.read_batch_bytes, report, write_tag)
        if job.mode == "force_binary_copy":
            raise BinaryCopyError(f"{job.ds.uri}: binary copy is not supported: {plans}")
    return _rewrite_bin(
        job.ds,
        bin_,
        job.max_bytes,
        job.data_format,
        report,
        write_tag,
        job.batch_rows,
        threads,
        job.target_rows,
    )


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
    compaction_mode: str | None = None,
    binary_copy_read_batch_bytes: int | None = None,
) -> tuple[Snapshot, CompactionMetrics]:
    """Rewrite small fragments into fragments of about ``target_rows_per_fragment`` rows, dropping
    deleted rows; commits ``ReserveFragments`` and then ``Rewrite`` (two versions), as pylance does.
    Returns the new version and what changed, or ``ds`` itself and zero metrics when there is
    nothing to compact. An option given as None takes its default (as in pylance).

    At most ``num_threads`` bins are rewritten at once (default: as many as the fragment pool has
    threads), each reading at most that many pieces ahead of its writer, as pylance bounds its
    compaction tasks. ``max_rows_per_group`` is accepted for pylance compatibility. The rows are
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

    ``compaction_mode`` (pylance's): ``"reencode"`` (None, the default) decodes and writes the
    rows anew; ``"try_binary_copy"`` concatenates a bin's data files page by page where it can
    (see :mod:`~lance_table.table.operations.compaction_copy`: no deletion files, the same schema
    and file version, no blob columns) and re-encodes the other bins; ``"force_binary_copy"``
    fails where it cannot. A binary copy reads at most ``binary_copy_read_batch_bytes`` of a file
    at once (16 MiB by default).

    Raises:
        ValueError: ``num_threads`` is below 1 (pylance refuses a negative one, and waits forever
            on 0), or ``compaction_mode`` is not one of pylance's modes.
        BinaryCopyError: ``compaction_mode="force_binary_copy"`` and a bin cannot be copied.
        UnsupportedFormatError: a data format lance_table does not write, or blob v2 columns it
            does not write (nested ones, external blobs).
        CorruptFileError: the dataset's fragment reuse index does not parse.
        CorruptFileError, DataFileNotFoundError: a blob v2 descriptor names bytes that are not there.
        CommitConflictError: a concurrent delete or compaction touched the same fragments, or
            versions committed since ``ds`` are gone.
        InputTypeError: ``progress`` is of no kind taken.
    """
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"num_threads must be positive, got {num_threads}")
    report = reporter("compact", progress)
    job = plan_compaction(
        ds,
        target_rows_per_fragment=target_rows_per_fragment,
        materialize_deletions=materialize_deletions,
        materialize_deletions_threshold=materialize_deletions_threshold,
        max_bytes_per_file=max_bytes_per_file,
        batch_size=batch_size,
        compaction_mode=compaction_mode,
        binary_copy_read_batch_bytes=binary_copy_read_batch_bytes,
    )
    if job is None:
        return ds, CompactionMetrics()
    # Bins are independent: rewrite them in parallel, then fail (and clean up) if any failed.
    with report:
        report.phase("rewrite", rows_total=sum(sum(b.live_rows) for b in job.bins))
        task = lambda bin_: _try(lambda: rewrite(job, bin_, report, threads=num_threads))  # noqa: E731
        if num_threads is None:
            results = map_fragments(task, job.bins)
        else:  # at most num_threads bins at once, as in pylance
            results = list(ahead_on(FRAGMENTS, task, job.bins, num_threads - 1))
    written = [frags for (frags, _), _ in results]
    files = tuple(path for (_, written_paths), _ in results for path in written_paths)  # with sidecars
    for _, error in results:
        if error is not None:
            for path in files:
                ds.storage.delete(path)
            raise error
    return commit_compaction(job, written, files)
