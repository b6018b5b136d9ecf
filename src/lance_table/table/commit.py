"""The commit protocol: transaction file, then an atomic create of the next manifest, rebase on conflict.

1. Data files (and deletion files) are already written by the caller.
2. The transaction is written to ``_transactions/{read_version}-{uuid}.txn``.
3. The next manifest (with the transaction inline) is created with ``put_if_absent``. Exactly one
   racing writer wins a version number; readers never see a partial manifest.
4. A loser loads the transactions committed since its read version, rebases (or raises
   :class:`CommitConflictError`) and tries the next version, with bounded, jittered backoff.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

from lance_table.errors import CommitConflictError, CommitError, DatasetAlreadyExistsError
from lance_table.format import paths
from lance_table.format.manifest import Manifest, encode_manifest_file
from lance_table.format.transaction import Restore, Transaction
from lance_table.storage import Storage
from lance_table.table import versions
from lance_table.table.apply import next_manifest
from lance_table.table.conflicts import Pending, rebase

DEFAULT_MAX_RETRIES = 20
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


def _newer_transactions(
    storage: Storage, after: int, scheme: str
) -> Iterator[tuple[Manifest, Transaction | None]]:
    """Versions after ``after``, found by reading the next manifest names until one is missing.

    Versions are contiguous, so probing by name costs one GET per new version and no listing
    (listings of a busy ``_versions`` directory are the slow part of a retry on object stores).
    """
    version = after + 1
    while True:
        entry = versions.VersionEntry(version, paths.manifest_path(version, scheme), -1, scheme)
        try:
            mf = versions.read_manifest_file(storage, entry)
        except FileNotFoundError:
            return
        yield mf.manifest, versions.read_transaction(storage, mf)
        version += 1


def commit(
    storage: Storage,
    base: Manifest | None,
    pending: Pending,
    *,
    options: CommitOptions | None = None,
    properties: dict[str, str] | None = None,
    scheme: str | None = None,
    create_only: bool = False,
) -> Manifest:
    """Commit an operation planned against ``base`` (None for a new dataset); return the new manifest.

    Raises:
        CommitConflictError: a concurrent commit makes this one impossible.
        CommitError: no safe way to commit, or the retries ran out.
        DatasetAlreadyExistsError: ``create_only`` and another writer created the dataset first.
    """
    options = options or CommitOptions()
    check_can_commit(options, storage)
    if scheme is None:
        scheme = versions.naming_scheme(versions.list_versions(storage))
    txn = Transaction(
        read_version=pending.read_version, operation=pending.operation, properties=properties or {}
    )
    txn_bytes = txn.to_bytes()
    txn_name = paths.transaction_file_name(txn.read_version, txn.uuid)
    storage.write(paths.transaction_path(txn_name), txn_bytes)
    restored = _restored(storage, pending)
    current = base
    for attempt in range(options.max_retries + 1):
        manifest = next_manifest(current, txn, restored)
        data = encode_manifest_file(manifest, txn_bytes)
        path = paths.manifest_path(manifest.version, scheme)
        try:
            with _lock(options, storage, manifest.version):
                storage.put_if_absent(path, data)
        except FileExistsError:
            if create_only:
                raise DatasetAlreadyExistsError(
                    f"a dataset was created at {storage.uri} concurrently"
                ) from None
            if attempt == options.max_retries:
                break
            # Back off first, then learn the latest state and try again at once: knowledge
            # gathered before a sleep would be stale by the time of the attempt.
            time.sleep(random.uniform(0, min(MAX_BACKOFF, BACKOFF_BASE * 2**attempt)))
            current, pending = _rebase_onto_latest(storage, current, pending, scheme)
            txn = Transaction(pending.read_version, pending.operation, txn.uuid, properties=txn.properties)
            new_bytes = txn.to_bytes()
            if new_bytes != txn_bytes:
                txn_bytes = new_bytes
                storage.write(paths.transaction_path(txn_name), txn_bytes)
            continue
        except Exception as exc:
            if not _landed(storage, path, data):
                raise CommitError(
                    f"writing version {manifest.version} of {storage.uri} failed ({exc!r}); "
                    "the version may or may not exist",
                    maybe_committed=True,
                ) from exc
        versions.write_version_hint(storage, manifest.version)
        return manifest
    raise CommitError(f"gave up committing to {storage.uri} after {options.max_retries} retries")


def _landed(storage: Storage, path: str, data: bytes) -> bool:
    """Whether a manifest write that raised did in fact store exactly our bytes."""
    try:
        return storage.read(path) == data
    except Exception:
        return False


def _rebase_onto_latest(
    storage: Storage, current: Manifest | None, pending: Pending, scheme: str
) -> tuple[Manifest | None, Pending]:
    after = current.version if current is not None else 0
    theirs: list[Transaction] = []
    latest = current
    for manifest, txn in _newer_transactions(storage, after, scheme):
        latest = manifest
        if txn is None:
            raise CommitConflictError(
                f"version {manifest.version} of {storage.uri} has no readable transaction; cannot rebase",
                retryable=True,
            )
        theirs.append(txn)
    if latest is None:
        # the create-if-absent failed but nothing is there (an interrupted concurrent write): retry
        return None, pending
    versions.check_writable(latest, storage.uri)
    return latest, rebase(pending, theirs, latest, storage)


def _restored(storage: Storage, pending: Pending) -> Manifest | None:
    op = pending.operation
    if not isinstance(op, Restore):
        return None
    return versions.read_manifest_file(storage, versions.find_entry(storage, op.version)).manifest
