"""The commit protocol: transaction file, then an atomic create of the next manifest, rebase on conflict.

1. Data files (and deletion files) are already written by the caller.
2. The transaction is written to ``_transactions/{read_version}-{uuid}.txn``. Until the commit
   ends, this file tells cleanup that a commit may still land above its read version (see
   :mod:`lance_table.table.operations.cleanup`); it is written again when the commit has run for
   :data:`~lance_table.table.tags.COMMIT_REFRESH_SECONDS`.
3. Only then is the latest version learned, by listing ``_versions`` (never assumed to follow the
   read version: cleanup may have removed versions in between), and the operation is rebased over
   every transaction committed since its read version. If one of them is gone, the commit fails
   with a non-retryable :class:`CommitConflictError` instead of guessing.
4. The next manifest (with the transaction inline) is created with ``put_if_absent``. Exactly one
   racing writer wins a version number; readers never see a partial manifest.
5. A loser lists again, rebases (or raises :class:`CommitConflictError`) and tries the next
   version, with bounded, jittered backoff.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from lance_table.errors import (
    CommitConflictError,
    CommitError,
    CommitStateUnknownError,
    DatasetAlreadyExistsError,
    UnsupportedFormatError,
)
from lance_table.format import paths
from lance_table.format.bases import base_paths
from lance_table.format.manifest import Manifest
from lance_table.format.manifest_file import ManifestFile, encode_manifest_file
from lance_table.format.transaction import (
    COMMIT_MESSAGE_KEY,
    Overwrite,
    ReserveFragments,
    Restore,
    Transaction,
)
from lance_table.storage import Storage
from lance_table.table import latest_known, versions
from lance_table.table.base_storage import base_storage
from lance_table.table.commit.apply import next_manifest
from lance_table.table.commit.conflicts import Pending, rebase
from lance_table.table.operations.auto_cleanup import run_after_commit
from lance_table.table.tags import COMMIT_REFRESH_SECONDS, pinned

DEFAULT_MAX_RETRIES = 20
# pylance's bound on the time a commit takes with its retries: accepted, and left to max_retries here
DEFAULT_COMMIT_TIMEOUT: dt.timedelta = dt.timedelta(minutes=30)
# Seconds; the sleep before retry k is uniform in [0, BACKOFF_BASE * 2**k], capped at MAX_BACKOFF.
BACKOFF_BASE = 0.02
MAX_BACKOFF = 2.0

CommitLock = Callable[[int], AbstractContextManager[object]]


@dataclass(frozen=True)
class CommitOptions:
    """How to commit.

    Attributes:
        max_retries: how many times a commit that lost a race is rebased and retried.
        commit_lock: a callable taking the version number about to be committed and returning a
            context manager held while the manifest is created (as pylance's ``commit_lock``).
            Required on storage without an atomic create, unless ``unsafe_commit`` is set.
        unsafe_commit: commit on storage without an atomic create and without a lock. Concurrent
            writers may then overwrite each other's versions; use only with a single writer.
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    commit_lock: CommitLock | None = None
    unsafe_commit: bool = False


def check_can_commit(options: CommitOptions, storage: Storage) -> None:
    """Raise CommitError before any file is written if committing here would not be safe."""
    if options.commit_lock is None and not storage.atomic_put and not options.unsafe_commit:
        raise CommitError(
            f"{storage.uri} has no atomic create-if-absent; pass commit_lock=... to serialize commits, "
            "or unsafe_commit=True if only one writer ever commits"
        )


def _lock(options: CommitOptions, storage: Storage, version: int) -> AbstractContextManager[object]:
    if options.commit_lock is not None:
        return options.commit_lock(version)
    check_can_commit(options, storage)
    return contextlib.nullcontext()


@dataclass
class _Attempt:
    """A commit in progress: the operation as last rebased, and the transaction file, once written."""

    pending: Pending
    transaction_path: str | None = None

    def files(self) -> list[str]:
        """Every file written for this commit (the operation's and the commit's own)."""
        return [*self.pending.written, *([self.transaction_path] if self.transaction_path else [])]


def commit(
    storage: Storage,
    base: Manifest | None,
    pending: Pending,
    *,
    options: CommitOptions | None = None,
    properties: dict[str, str] | None = None,
    message: str | None = None,
    scheme: str | None = None,
    create_only: bool = False,
    txn_uuid: str | None = None,
    on_latest: bool = False,
) -> Manifest:
    """Commit an operation planned against ``base`` (None for a new dataset); return the new manifest.

    ``properties`` go into the transaction, with ``message`` as its commit message. ``txn_uuid``
    names the transaction (and its file, ``_transactions/*-{txn_uuid}.txn``), random by default: a
    caller that must later tell whether this commit may have landed looks for that file, which a
    failed commit with a known outcome deletes.

    ``on_latest``: the operation applies to whatever version is latest (a Restore), and ``base`` is
    only the version it was planned from. The commit finds the latest itself, in the one listing it
    makes after its transaction file is written (only the newest name is parsed), and records it
    as the read version, as pylance's restore does: no listing beforehand, none of the history read.

    This is the one commit path. When it fails with a known outcome, the files the operation wrote
    (``pending.written``, deletion files written while rebasing, ``pending.elsewhere`` in other base
    paths) and the transaction file are deleted: the dataset is exactly as it was. When the outcome
    is unknown they stay (cleanup removes them later if the version did not land); so do they after
    an interrupt.

    Raises:
        CommitConflictError: a concurrent commit makes this one impossible.
        CommitStateUnknownError: the manifest write failed and the version may or may not exist.
        CommitError: no safe way to commit, or the retries ran out.
        DatasetAlreadyExistsError: ``create_only`` and another writer created the dataset first.
    """
    attempt = _Attempt(pending)
    properties = {**(properties or {}), **({COMMIT_MESSAGE_KEY: message} if message else {})}
    try:
        manifest = _commit(
            storage,
            base,
            attempt,
            options or CommitOptions(),
            properties,
            scheme,
            create_only,
            txn_uuid,
            on_latest,
        )
    except CommitStateUnknownError:
        raise
    except Exception:
        for path in attempt.files():
            with contextlib.suppress(OSError):  # best effort: cleanup removes leftovers later
                storage.delete(path)
        discard_elsewhere(storage, base, attempt.pending)
        raise
    run_after_commit(storage, manifest)  # the dataset's automatic cleanup, when its config asks
    return manifest


def discard_elsewhere(storage: Storage, base: Manifest | None, pending: Pending) -> None:
    """Delete the files ``pending`` wrote in other base paths (best effort), each in its base as
    ``base`` or the operation itself (an Overwrite creating a dataset) registers it. Cleanup never
    removes files outside the dataset's own directory: this is their only way out."""
    if not pending.elsewhere:
        return
    bases = dict(base_paths(base)) if base is not None else {}
    bases.update({b.id: b for b in getattr(pending.operation, "initial_bases", None) or ()})
    for base_id, path in pending.elsewhere:
        with contextlib.suppress(OSError, UnsupportedFormatError):
            base_storage(storage, bases, base_id, path).delete(path)


def _commit(
    storage: Storage,
    base: Manifest | None,
    attempt: _Attempt,
    options: CommitOptions,
    properties: dict[str, str],
    scheme: str | None,
    create_only: bool,
    txn_uuid: str | None,
    on_latest: bool = False,
) -> Manifest:
    check_can_commit(options, storage)
    pending = attempt.pending
    with _pinned_restore(storage, pending) as restored:
        txn = Transaction(
            read_version=pending.read_version, operation=pending.operation, properties=properties
        )
        if txn_uuid is not None:
            txn = replace(txn, uuid=txn_uuid)
        txn_bytes = txn.to_bytes()
        attempt.transaction_path = paths.transaction_path(
            paths.transaction_file_name(txn.read_version, txn.uuid)
        )
        written_at = time.monotonic()
        storage.write_new(attempt.transaction_path, txn_bytes)  # a fresh name, read once committed
        # Never create the version after ``base`` blindly: cleanup may have removed versions between
        # base and the latest, and a manifest created in that hole would be invisible (and deleted
        # by the next cleanup). Learn the latest version, after the transaction file is there for
        # cleanup to see, and rebase over everything since.
        after = base.version if base is not None else 0
        if on_latest and base is not None and not _needs_history(pending):
            newest = versions.latest_entry(storage)
            entries = [newest] if newest.version > after else []
        else:
            entries = versions.list_versions(storage, after=after)
        if create_only and entries:
            raise DatasetAlreadyExistsError(f"a dataset was created at {storage.uri} concurrently")
        if scheme is None:
            scheme = versions.naming_scheme(entries if base is None else versions.list_versions(storage))
        # A restore needs only the rest of the latest version (its number, time, flags and
        # fragment id high-water mark), not its fragments: thousands, after a long history.
        rest_only = on_latest and isinstance(pending.operation, Restore)
        current, attempt.pending = _catch_up(
            storage, base, pending, _listed(storage, after, entries, pending, rest_only=rest_only)
        )
        if on_latest and current is not None:  # the latest found now is the version read
            versions.check_writable(current, storage.uri)
            if pending.read_version != current.version:
                txn = replace(txn, read_version=current.version)
                txn_bytes = txn.to_bytes()
                pending = attempt.pending = replace(attempt.pending, read_version=current.version)
                _rename_transaction(storage, attempt, txn, txn_bytes)
                written_at = time.monotonic()
        else:
            _check_strict(base, current, pending, options)
        for tries in range(options.max_retries + 1):
            if time.monotonic() - written_at >= COMMIT_REFRESH_SECONDS:
                # Slow commit: show cleanup it is alive, then learn the latest version anew.
                written_at = time.monotonic()
                storage.write(attempt.transaction_path, txn_bytes)
                after = current.version if current is not None else 0
                current, attempt.pending = _catch_up(
                    storage, current, attempt.pending, _listed_since(storage, after, attempt.pending)
                )
            if attempt.pending is not pending:  # rebased: the transaction file says what is committed
                pending = attempt.pending
                txn = Transaction(
                    pending.read_version, pending.operation, txn.uuid, properties=txn.properties
                )
                new_bytes = txn.to_bytes()
                if new_bytes != txn_bytes:
                    txn_bytes = new_bytes
                    written_at = time.monotonic()
                    storage.write(attempt.transaction_path, txn_bytes)
            manifest = next_manifest(current, txn, restored)
            data = encode_manifest_file(manifest, txn_bytes)
            path = paths.manifest_path(manifest.version, scheme)
            landed = False
            try:
                with _lock(options, storage, manifest.version):
                    try:
                        storage.put_if_absent(path, data)
                    except FileExistsError:
                        raise
                    except Exception as exc:
                        if not _landed(storage, path, data):
                            raise CommitStateUnknownError(
                                f"writing version {manifest.version} of {storage.uri} failed ({exc!r}); "
                                "the version may or may not exist"
                            ) from exc
                    landed = True
            except FileExistsError:
                if create_only:
                    raise DatasetAlreadyExistsError(
                        f"a dataset was created at {storage.uri} concurrently"
                    ) from None
                if tries == options.max_retries:
                    break
                # Back off first, then learn the latest state and try again at once: knowledge
                # gathered before a sleep would be stale by the time of the attempt.
                time.sleep(random.uniform(0, min(MAX_BACKOFF, BACKOFF_BASE * 2**tries)))
                after = current.version if current is not None else 0
                current, attempt.pending = _catch_up(
                    storage, current, pending, _probed(storage, after, scheme)
                )
                continue
            except Exception:
                if landed:
                    # The version is committed but the commit lock failed as it was released: the
                    # error propagates (as in pylance) and the committed files stay.
                    versions.write_version_hint(storage, manifest.version)
                    attempt.pending = replace(attempt.pending, written=())
                    attempt.transaction_path = None
                raise
            versions.remember_manifest(storage, path, data, manifest, txn_bytes)
            versions.write_version_hint(storage, manifest.version)
            entry = versions.VersionEntry(manifest.version, path, -1, scheme)
            latest_known.remember(storage, entry, manifest)  # (the next append's open)
            return manifest
    raise CommitError(f"gave up committing to {storage.uri} after {options.max_retries} retries")


def _check_strict(
    base: Manifest | None, current: Manifest | None, pending: Pending, options: CommitOptions
) -> None:
    """An operation that applies to the latest version (Overwrite, Restore) is first tried, as
    in pylance, at the version after the one it read: with no retries (``max_retries=0``) it
    fails when another writer took that version.

    Raises:
        CommitConflictError: (retryable) that case.
    """
    if options.max_retries or base is None or current is None or _needs_history(pending):
        return
    if current.version > base.version:
        raise CommitConflictError(
            f"Commit conflict for version {base.version + 1}: another writer committed it, and this "
            f"{pending.operation.name} may not be retried (max_retries=0)",
            retryable=True,
        )


def _landed(storage: Storage, path: str, data: bytes) -> bool:
    """Whether a manifest write that raised did in fact store exactly our bytes."""
    try:
        return storage.read(path) == data
    except Exception:
        return False


def _rename_transaction(storage: Storage, attempt: _Attempt, txn: Transaction, data: bytes) -> None:
    """Write the transaction file again under the name of ``txn``'s read version (which names
    the file, as the manifest records it), then remove the one written before."""
    old = attempt.transaction_path
    attempt.transaction_path = paths.transaction_path(paths.transaction_file_name(txn.read_version, txn.uuid))
    storage.write_new(attempt.transaction_path, data)
    if old is not None and old != attempt.transaction_path:
        with contextlib.suppress(OSError):  # best effort: cleanup removes leftovers later
            storage.delete(old)


def _needs_history(pending: Pending) -> bool:
    """Whether the operation must be rebased over the transactions committed since its read version.

    Overwrite, Restore and ReserveFragments apply to whatever version is latest.
    """
    return not isinstance(pending.operation, (Overwrite, Restore, ReserveFragments))


Newer = Iterator[ManifestFile]


def _listed(
    storage: Storage,
    after: int,
    entries: list[versions.VersionEntry],
    pending: Pending,
    *,
    rest_only: bool = False,
) -> Newer:
    """The versions after ``after`` in a listing; all of them must be there to rebase over them.
    ``rest_only``: the latest version's manifest may come without its fragments (see
    :func:`versions.read_manifest_rest`; only for an operation that applies to the latest version
    and needs none of its fragments).

    Raises:
        CommitConflictError: (retryable) a version in between was cleaned up.
    """
    newer = [e for e in entries if e.version > after]
    if newer and not _needs_history(pending):
        newer = newer[-1:]  # only the latest matters
    else:
        _check_contiguous(storage, after, newer, pending)
    read = (
        versions.read_manifest_rest
        if rest_only and not _needs_history(pending)
        else versions.read_manifest_file
    )
    for entry in newer:
        try:
            yield read(storage, entry)
        except FileNotFoundError:
            raise _history_gone(storage, pending, after, [entry.version]) from None


def _listed_since(storage: Storage, after: int, pending: Pending) -> Newer:
    """The versions after ``after`` in a fresh listing (see :func:`_listed`)."""
    return _listed(storage, after, versions.list_versions(storage, after=after), pending)


def _check_contiguous(
    storage: Storage, after: int, newer: list[versions.VersionEntry], pending: Pending
) -> None:
    present = {e.version for e in newer}
    last = newer[-1].version if newer else after
    missing = [v for v in range(after + 1, last + 1) if v not in present]
    if missing:
        raise _history_gone(storage, pending, after, missing)


def check_rebasable(storage: Storage, pending: Pending) -> None:
    """Fail early, before any file is written, if ``pending`` could not be rebased onto the latest
    version because versions committed since its read version have been cleaned up.

    Raises:
        CommitConflictError: retryable (re-run on the latest version), as :func:`commit` would raise it.
    """
    if _needs_history(pending):
        after = pending.read_version
        _check_contiguous(storage, after, versions.list_versions(storage, after=after), pending)


def _probed(storage: Storage, after: int, scheme: str) -> Newer:
    """The versions after ``after``, found by reading the next names until one is missing.

    One GET per version and no listing (listings of a busy ``_versions`` are the slow part of a
    retry on object stores). There are no holes to stop at early: cleanup keeps every version above
    the read version of a commit in flight.
    """
    version = after + 1
    while True:
        entry = versions.VersionEntry(version, paths.manifest_path(version, scheme), -1, scheme)
        try:
            yield versions.read_manifest_file(storage, entry)
        except FileNotFoundError:
            return
        version += 1


def _catch_up(
    storage: Storage, current: Manifest | None, pending: Pending, newer: Newer
) -> tuple[Manifest | None, Pending]:
    """The latest of the ``newer`` versions, and ``pending`` rebased over their transactions.

    Raises:
        CommitConflictError: not retryable when a transaction to rebase over is gone; or as
            :func:`rebase` decides.
    """
    theirs: list[Transaction] = []
    latest = current
    for mf in newer:
        latest = mf.manifest
        if not _needs_history(pending):
            continue
        txn = versions.read_transaction(storage, mf)
        if txn is None:
            raise CommitConflictError(
                f"version {latest.version} of {storage.uri} has no readable transaction; "
                f"this {pending.operation.name} (read version {pending.read_version}) cannot be rebased "
                "over it: re-run it on the latest version",
                retryable=False,
            )
        theirs.append(txn)
    if latest is None or latest is current:
        return current, pending
    versions.check_writable(latest, storage.uri)
    return latest, rebase(pending, theirs, latest, storage) if theirs else pending


def _history_gone(storage: Storage, pending: Pending, after: int, missing: list[int]) -> CommitConflictError:
    shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
    return CommitConflictError(
        f"versions {shown} of {storage.uri}, committed after version {after} which this "
        f"{pending.operation.name} read, have been cleaned up: their transactions are gone, so it cannot "
        "be rebased over them; re-run it on the latest version",
        retryable=True,  # re-planned on the latest version, the operation needs none of them
    )


@contextlib.contextmanager
def _pinned_restore(storage: Storage, pending: Pending) -> Iterator[Manifest | None]:
    """For a Restore: the restored version's manifest, pinned against cleanup until the commit ends."""
    op = pending.operation
    if not isinstance(op, Restore):
        yield None
        return
    with pinned(storage, op.version):
        yield versions.read_manifest_file(storage, versions.find_entry(storage, op.version)).manifest
