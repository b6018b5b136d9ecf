"""Removing old versions and the files that only they reference.

Cleanup runs beside writers, restores and tag writers that it cannot stop, so it works in phases:

1. Read the tags (a damaged tag file stops cleanup before anything is deleted), the pins and every
   manifest; decide which versions go: older than the cutoff, not the latest, not tagged or pinned,
   not a version a branch was created from (a branch reads its files: see
   :mod:`lance_table.table.branch_refs`; a damaged branch file stops cleanup too).
   Then list the commits in flight (see below) and keep every version above their read versions.
2. Delete those manifests, so no reader can open a version whose files are about to go.
3. Look again: a tag or pin that now names a deleted version brings its manifest back (its bytes
   are still in hand), then versions committed since phase 1 add their files to the kept set (in
   that order: a restore unpins only once its version has landed). Phases 2 and 3 run batch by
   batch: the manifests of a long history are gigabytes, so only a bounded amount of their bytes
   is held from phase 1 on (:data:`HELD_BYTES`); the others are read again in the batch that
   deletes them, and each batch looks again once it is deleted (a tag writer whose check found
   the manifest before its deletion wrote its tag before it too).
4. Delete the data, deletion, transaction and index files that no kept version references.

A restore pins the version it reads before reading it, and tag writers check the version after
writing the tag (see :mod:`lance_table.table.tags`): an operation that phase 3 does not see found
the manifest already gone and failed cleanly, so every interleaving leaves the latest version and
every tagged version readable.

Commits in flight: a writer that learned the latest version N creates ``N+1`` if it is absent. Were a
cleanup to delete ``N+1`` (committed meanwhile by another writer, and no longer the latest) before that
create, the writer would land in the hole below the latest version and its commit would vanish. Every
commit writes its transaction file (named after its read version ``r``) before it learns the latest
version, and rewrites it when it has run for :data:`COMMIT_REFRESH_SECONDS`; a version it could land on
was committed after that, so a cleanup that sees such a version also sees the transaction file, which no
manifest references yet. Cleanup keeps every version above ``r`` of each such file younger than
:data:`IN_FLIGHT_SECONDS` (and keeps those files, unless ``delete_unverified`` says that no writer
runs), so a commit in flight always finds the
versions it has to rebase over and never a hole to land in.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from lance_table._parallel import METADATA, map_on
from lance_table.errors import TagError
from lance_table.format import paths
from lance_table.storage import Entry, Storage
from lance_table.table import branch_refs, versions
from lance_table.table.operations.cleanup_references import (
    _read_each,
    _read_one,
    _Removed,
    _Union,
    _Version,
)
from lance_table.table.operations.cleanup_results import (
    CleanupCandidateFile,
    CleanupExplanation,
    CleanupReferencedBranch,
    CleanupStats,
)
from lance_table.table.progress import SILENT, Progress, reporter
from lance_table.table.tags import IN_FLIGHT_SECONDS, PIN_STALE_SECONDS, Tags, pinned_versions, tags_in

DEFAULT_OLDER_THAN = dt.timedelta(days=14)
# Files no manifest references may belong to a writer that has not committed yet.
DEFAULT_GRACE_PERIOD = dt.timedelta(days=7)
# Marks a temporary file of an interrupted write (``put_if_absent`` and ``write`` on local disk).
_TEMP_MARK = ".tmp-"


_KINDS = {
    paths.DATA_DIR: "data",
    paths.DELETIONS_DIR: "deletion",
    paths.TRANSACTIONS_DIR: "transaction",
    paths.INDICES_DIR: "index",
}


T = TypeVar("T")

#: files removed in one :meth:`Storage.delete_many` call (an object store's limit per request)
DELETE_BATCH = 1000


def _batches(items: list[T]) -> Iterator[list[T]]:
    """``items`` in lists of at most :data:`DELETE_BATCH`."""
    for start in range(0, len(items), DELETE_BATCH):
        yield items[start : start + DELETE_BATCH]


def _tagged(storage: Storage) -> dict[int, str]:
    """Versions of the branch ``storage`` holds (main or one in ``tree/``) that tags name, with a
    tag name for messages (tags live at the root, each naming a version of one branch).

    Raises:
        CorruptFileError: a tag file is damaged (nothing may be deleted while it is unreadable).
    """
    root, me = branch_refs.locate(storage)
    out = {t.version: name for name, t in Tags(root).list().items() if t.branch == me}
    if me is not None:  # tags an older lance_table wrote in the branch's own directory count too
        out.update({t.version: name for name, t in tags_in(storage).items()})
    return out


def _kept_by_refs(storage: Storage) -> dict[int, str]:
    """Versions that tags name and versions that branches were created from (a branch reads
    their files), with a ref name for messages.

    Raises:
        CorruptFileError: a tag or branch file is damaged (nothing may be deleted then).
    """
    return {**branch_refs.referenced_versions(storage), **_tagged(storage)}


def cleanup_old_versions(
    storage: Storage,
    *,
    older_than: dt.timedelta | None = None,
    retain_versions: int | None = None,
    only_versions: Iterable[int] | None = None,
    grace_period: dt.timedelta = DEFAULT_GRACE_PERIOD,
    delete_unverified: bool = False,
    error_if_tagged_old_versions: bool = True,
    dry_run: bool = False,
    candidates: list[CleanupCandidateFile] | None = None,
    progress: Progress = None,
    referenced_branches: list[CleanupReferencedBranch] | None = None,
) -> CleanupStats:
    """Delete versions older than ``older_than`` and not among the ``retain_versions`` newest (both
    as pylance; neither given: older than :data:`DEFAULT_OLDER_THAN`), only those of
    ``only_versions`` if given, never the latest, never a tagged one, never one a branch was
    created from (as pylance, silently: the branch reads its files); then the data, deletion and
    transaction files that no remaining version references. ``dry_run`` decides and counts the
    same, and removes nothing. ``candidates``, if given, receives every file removed (or that
    would be), manifests included; ``referenced_branches``, the branches that keep a version
    this cleanup would otherwise remove.

    A file that no manifest references at all is deleted only when it is older than
    ``grace_period`` (it may belong to a writer still in flight); ``delete_unverified`` lifts that
    rule. Temporary files that killed writers left behind go once older than the grace period.

    ``progress`` (see :mod:`lance_table.table.progress`) follows the deletions: phase
    ``versions`` (manifests) and phase ``files`` (the other files), with their totals; a dry run
    reports nothing.

    Raises:
        ValueError: ``retain_versions`` is not positive.
        TagError: a tagged version is older than the cutoff and ``error_if_tagged_old_versions``.
        CorruptFileError: a tag or branch file is damaged; nothing is deleted.
        InputTypeError: ``progress`` is of no kind taken.
    """
    report = SILENT if dry_run else reporter("cleanup", progress)
    if retain_versions is not None and retain_versions <= 0:
        raise ValueError(f"retain_versions must be positive, not {retain_versions}")
    if older_than is None and retain_versions is None and only_versions is None:
        older_than = DEFAULT_OLDER_THAN
    only = None if only_versions is None else set(only_versions)
    now = time.time()
    cutoff_ns = None if older_than is None else int((now - older_than.total_seconds()) * 1e9)
    grace_cutoff = now - (0 if delete_unverified else grace_period.total_seconds())
    entries = versions.list_versions(storage)
    if not entries:
        return CleanupStats()
    latest = entries[-1].version
    retained = {e.version for e in entries[-retain_versions:]} if retain_versions else set()
    tagged = _tagged(storage)
    storage_branches = branch_refs.branches_referencing(storage)
    branched = {v: n for n, v in storage_branches.items()}  # kept silently, as pylance keeps them
    pinned = pinned_versions(storage)
    landed: set[str] = set()  # transaction files of the versions read
    doomed: dict[int, _Version] = {}
    kept_refs = _Union()  # what the kept versions reference, added as each is read
    removed_refs = _Removed(storage)  # what the doomed versions reference, likewise
    held = 0  # bytes of doomed manifests held (the rest are read again just before they go)
    for found in _read_each(storage, entries):
        entry, summary = found.entry, found.summary
        if summary.transaction_file:
            landed.add(paths.transaction_path(summary.transaction_file))
        old = (
            (cutoff_ns is None or summary.timestamp_ns < cutoff_ns)
            and entry.version not in retained
            and (only is None or entry.version in only)
            and entry.version != latest
        )
        if old and entry.version in tagged and error_if_tagged_old_versions:
            raise TagError(
                f"version {entry.version} is older than the cutoff but tagged {tagged[entry.version]!r}; "
                "delete the tag or pass error_if_tagged_old_versions=False"
            )
        if old and referenced_branches is not None:
            referenced_branches += [
                CleanupReferencedBranch(name, entry.version, False)
                for name, v in sorted(storage_branches.items())
                if v == entry.version
            ]
        if entry.version in tagged or entry.version in pinned or entry.version in branched:
            old = False
        if old:
            removed_refs.add(found, entry.version - 1 in doomed)
            if held + found.size <= HELD_BYTES:
                held += found.size
            else:
                found.data = None
            doomed[entry.version] = found
        else:
            kept_refs.add(found.manifest(storage))
    transactions = storage.list_dir(paths.TRANSACTIONS_DIR)
    floor = _in_flight_floor(transactions, landed, now)
    for version in [v for v in doomed if floor is not None and v > floor]:
        _keep(storage, doomed.pop(version), kept_refs)
    doomed_list = list(doomed.values())
    if not dry_run:
        report.phase("versions", files_total=len(doomed_list), bytes_total=sum(f.size for f in doomed_list))
        for manifests in _manifest_batches(doomed_list):
            _hold(storage, manifests)
            storage.delete_many([found.entry.path for found in manifests])
            report.advance(files=len(manifests), nbytes=sum(found.size for found in manifests))
            # Phase 3 for this batch: what was tagged or pinned while we decided comes back. Tags
            # and pins first: a restore unpins only after its version landed, so a pin gone by
            # now means that version is in the listing that follows the last batch.
            _look_again(storage, manifests, doomed, kept_refs, put_back=True)
            for found in manifests:
                found.data = None
    else:
        _look_again(storage, doomed_list, doomed, kept_refs, put_back=False)
    # Then the versions committed since phase 1.
    for entry in versions.list_versions(storage, after=latest):
        try:
            kept_refs.add(versions.read_manifest_file(storage, entry).manifest)
        except FileNotFoundError:  # committed and already cleaned up by another cleanup
            continue
    kept_paths, removed_paths = kept_refs.paths, removed_refs.paths

    root = storage.uri.rstrip("/")
    removed_bytes = sum(found.size for found in doomed.values())
    for found in doomed.values():
        if candidates is not None:
            candidates.append(
                CleanupCandidateFile(f"{root}/{found.entry.path}", "manifest", False, found.size)
            )
    removed_files = dict.fromkeys(_KINDS, 0)
    # Keep the transaction files of commits in flight, so that later cleanups see them too (unless
    # the caller says no writer runs: ``delete_unverified``).
    in_flight = {
        item.path
        for item in transactions
        if not delete_unverified and _in_flight(item, landed, now) is not None
    }
    doomed_files: list[Entry] = []
    for directory in _KINDS:
        listed = transactions if directory == paths.TRANSACTIONS_DIR else storage.list_tree(directory)
        for item in listed:
            owner = _owner(item.path)
            if item.path in kept_paths or owner in kept_paths or owner in in_flight:
                continue
            verified = item.path in removed_paths or owner in removed_paths
            young = item.modified is None or item.modified > grace_cutoff
            if not verified and young:
                continue
            doomed_files.append(item)
            removed_bytes += item.size
            removed_files[directory] += 1
            if candidates is not None:
                candidates.append(
                    CleanupCandidateFile(f"{root}/{item.path}", _KINDS[directory], not verified, item.size)
                )
    if not dry_run:
        leftovers = _leftovers(storage, now, grace_cutoff)
        removed_bytes += sum(item.size for item in leftovers)
        doomed_files += leftovers
        with report:
            report.phase(
                "files", files_total=len(doomed_files), bytes_total=sum(i.size for i in doomed_files)
            )
            for batch in _batches(doomed_files):
                storage.delete_many([item.path for item in batch])
                report.advance(files=len(batch), nbytes=sum(item.size for item in batch))
    return CleanupStats(
        bytes_removed=removed_bytes,
        old_versions=len(doomed),
        data_files_removed=removed_files[paths.DATA_DIR],
        transaction_files_removed=removed_files[paths.TRANSACTIONS_DIR],
        deletion_files_removed=removed_files[paths.DELETIONS_DIR],
        index_files_removed=removed_files[paths.INDICES_DIR],
    )


#: bytes of doomed manifests cleanup holds from its first reading of the history to their
#: deletion (a cleanup puts back a manifest tagged or pinned meanwhile); beyond them, a manifest
#: is read again in the batch that deletes it, so a history of gigabytes of manifests costs a
#: bounded amount of memory
HELD_BYTES = 64 << 20


def _manifest_batches(doomed: list[_Version]) -> Iterator[list[_Version]]:
    """``doomed`` in batches of at most :data:`DELETE_BATCH` files, whose bytes not held add up
    to at most :data:`HELD_BYTES` (a batch holds at least one)."""
    batch: list[_Version] = []
    reread = 0
    for found in doomed:
        extra = found.size if found.data is None else 0
        if batch and (len(batch) == DELETE_BATCH or reread + extra > HELD_BYTES):
            yield batch
            batch, reread = [], 0
        batch.append(found)
        reread += extra
    if batch:
        yield batch


def _hold(storage: Storage, manifests: list[_Version]) -> None:
    """Read again the bytes of the ``manifests`` not held (one that is gone, removed by another
    cleanup, stays without: there is nothing to put back)."""
    missing = [found for found in manifests if found.data is None]
    if not missing:
        return
    for found, again in zip(missing, _read_each_or_none(storage, [found.entry for found in missing])):
        if again is not None:
            found.data = again.data


def _read_each_or_none(storage: Storage, entries: list[versions.VersionEntry]) -> list[_Version | None]:
    """Each entry's manifest file (None where it is gone)."""
    if storage.read_parallelism > 0 and len(entries) > 1:
        return map_on(METADATA, lambda entry: _read_one(storage, entry), entries)
    return [_read_one(storage, entry) for entry in entries]


def _keep(storage: Storage, found: _Version, kept_refs: _Union) -> None:
    """Keep a version after all: what it references is kept (nothing when it is gone)."""
    with contextlib.suppress(FileNotFoundError):
        kept_refs.add(found.manifest(storage))


def _look_again(
    storage: Storage,
    manifests: list[_Version],
    doomed: dict[int, _Version],
    kept_refs: _Union,
    *,
    put_back: bool,
) -> None:
    """Keep those of the ``manifests`` (doomed) that a tag or pin names now, putting their deleted
    files back with their bytes (``put_back``).

    Raises:
        CorruptFileError: a tag or branch file is damaged.
    """
    names = {found.entry.version for found in manifests}
    for version in (_kept_by_refs(storage).keys() | pinned_versions(storage)) & names:
        found = doomed.pop(version)
        if put_back and found.data is not None:
            with contextlib.suppress(FileExistsError):
                storage.put_if_absent(found.entry.path, found.data)
        _keep(storage, found, kept_refs)


def _in_flight(item: Entry, landed: set[str], now: float) -> int | None:
    """The read version of a commit in flight whose transaction file ``item`` is, or None."""
    if item.path in landed:
        return None
    read_version = paths.parse_transaction_name(item.name)
    if read_version is None:
        return None
    if item.modified is not None and now - item.modified >= IN_FLIGHT_SECONDS:
        return None  # its writer died long ago (a live one rewrites the file sooner)
    return read_version


def _in_flight_floor(transactions: list[Entry], landed: set[str], now: float) -> int | None:
    """The lowest read version of the commits in flight: versions above it must stay."""
    reads = [r for item in transactions if (r := _in_flight(item, landed, now)) is not None]
    return min(reads) if reads else None


def _owner(path: str) -> str:
    """The file whose life decides ``path``'s: a blob sidecar (``data/<stem>/<id>.blob``) lives
    and dies with its data file ``data/<stem>.lance``; an index's file with its directory
    ``_indices/<uuid>``; any other file with itself. (A data file a
    manifest names at a nested path, ``data/sub/x.lance``, is kept by its own name.)"""
    indices = paths.INDICES_DIR + "/"
    if path.startswith(indices):  # an index's files live and die with its directory
        return indices + path[len(indices) :].partition("/")[0]
    prefix = paths.DATA_DIR.rstrip("/") + "/"
    if path.startswith(prefix):
        stem, sep, _ = path[len(prefix) :].partition("/")
        if sep:
            return paths.data_file_path(stem + ".lance")
    return path


def _leftovers(storage: Storage, now: float, grace_cutoff: float) -> list[Entry]:
    """Temporary files of killed writers (older than the grace period) and pins of dead operations."""
    out = [
        item
        for directory in (paths.VERSIONS_DIR, paths.TAGS_DIR)
        for item in storage.list_dir(directory)
        if _TEMP_MARK in item.name and item.modified is not None and item.modified <= grace_cutoff
    ]
    out += [
        item
        for item in storage.list_dir(paths.PINS_DIR)
        if item.modified is not None and now - item.modified > PIN_STALE_SECONDS
    ]
    return out


def explain_cleanup(
    storage: Storage,
    read_version: int,
    *,
    include_files: bool = False,
    max_files: int = 1000,
    **policy: Any,
) -> CleanupExplanation:
    """What :func:`cleanup_old_versions` with ``policy`` would remove, removing nothing; the
    candidate files are listed (up to ``max_files``) when ``include_files``.

    Raises:
        ValueError: ``max_files`` is not positive, or see :func:`cleanup_old_versions`.
    """
    if max_files <= 0:
        raise ValueError("max_files must be positive")
    found: list[CleanupCandidateFile] = []
    referenced: list[CleanupReferencedBranch] = []
    stats = cleanup_old_versions(
        storage, dry_run=True, candidates=found, referenced_branches=referenced, **policy
    )
    shown = found[:max_files] if include_files else []
    return CleanupExplanation(
        read_version=read_version,
        stats=stats,
        candidate_files=shown,
        candidate_files_truncated=include_files and len(found) > max_files,
        candidate_file_limit=max_files,
        referenced_branches=sorted(referenced, key=lambda b: (b.name, b.referenced_version)),
        warnings=[],
    )
