"""Detached commits (pylance's ``commit(..., detached=True)``): a version outside the version line.

A detached version gets a random number with the top bit set
(:data:`~lance_table.format.paths.DETACHED_VERSION_MASK`) and its manifest is named
``_versions/d{version}.manifest``. Listing the history skips those names, so a detached version is
never the latest, never in ``versions()``, and the version hint is not touched. It is opened by its
number (``checkout_version``), and further detached commits may build on it.

Nothing is rebased: the operation applies to the version it read. Cleanup neither removes detached
manifests nor keeps the files only they reference (as in pylance): a detached version lives as long
as the files it needs are also needed by the version line, or are younger than cleanup's cutoff.
Only datasets with V2 manifest names take detached commits, and only existing ones.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import replace

from lance_table.errors import CommitError, CommitStateUnknownError, DetachedCommitError
from lance_table.format import paths
from lance_table.format.manifest import Manifest
from lance_table.format.manifest_file import encode_manifest_file
from lance_table.format.transaction import COMMIT_MESSAGE_KEY, Restore, Transaction
from lance_table.storage import Storage
from lance_table.table import versions
from lance_table.table.commit.apply import next_manifest
from lance_table.table.commit.conflicts import Pending
from lance_table.table.commit.protocol import CommitOptions, check_can_commit, discard_elsewhere


def new_detached_version() -> int:
    """A random detached version number: 64 random bits with the top one set."""
    return secrets.randbits(64) | paths.DETACHED_VERSION_MASK


def check_detachable(base: Manifest | None, scheme: str | None, uri: str) -> None:
    """Refuse a detached commit the dataset cannot take, before anything is written.

    Raises:
        DetachedCommitError: no dataset yet (detached commits cannot create one), or the dataset
            names its manifests with the V1 scheme.
    """
    if base is None:
        raise DetachedCommitError(f"detached commits cannot create a dataset: there is none at {uri}")
    if scheme != paths.ManifestNaming.V2:
        raise DetachedCommitError(
            f"detached commits cannot be used with v1 manifest paths ({uri}); migrate the dataset "
            "with migrate_manifest_paths_v2()"
        )


def check_attachable(read_version: int | None, uri: str) -> None:
    """Refuse an attached commit on top of a detached version.

    Raises:
        DetachedCommitError: ``read_version`` is a detached version.
    """
    if read_version is not None and paths.is_detached_version(read_version):
        raise DetachedCommitError(
            f"read version {read_version} of {uri} is a detached version: commits on top of it must "
            "be detached too (detached=True)"
        )


def commit_detached(
    storage: Storage,
    base: Manifest,
    pending: Pending,
    *,
    options: CommitOptions | None = None,
    properties: dict[str, str] | None = None,
    message: str | None = None,
    txn_uuid: str | None = None,
) -> Manifest:
    """Commit ``pending`` on top of ``base`` as a new detached version; return its manifest.

    The transaction file is written as for any commit; the manifest is created with an atomic
    create at a fresh random number (another one is drawn in the unlikely case it is taken). On
    failure, the files the operation and the commit wrote are deleted.

    Raises:
        CommitError: no safe way to commit, or no free number after the retries.
        VersionNotFoundError: a Restore's version does not exist.
    """
    options = options or CommitOptions()
    check_can_commit(options, storage)
    properties = {**(properties or {}), **({COMMIT_MESSAGE_KEY: message} if message else {})}
    txn = Transaction(read_version=pending.read_version, operation=pending.operation, properties=properties)
    if txn_uuid is not None:
        txn = replace(txn, uuid=txn_uuid)
    txn_path = paths.transaction_path(paths.transaction_file_name(txn.read_version, txn.uuid))
    written = [*pending.written]
    try:
        restored = None
        if isinstance(pending.operation, Restore):
            entry = versions.find_entry(storage, pending.operation.version)
            restored = versions.read_manifest_file(storage, entry).manifest
        txn_bytes = txn.to_bytes()
        storage.write_new(txn_path, txn_bytes)
        written.append(txn_path)
        built = next_manifest(base, txn, restored)
        for _ in range(max(options.max_retries, 1)):
            manifest = replace(built, version=new_detached_version())
            data = encode_manifest_file(manifest, txn_bytes)
            path = paths.manifest_path(manifest.version)
            try:
                storage.put_if_absent(path, data)
            except FileExistsError:
                continue  # that number is taken: draw another
            except Exception as exc:
                if not _landed(storage, path, data):
                    raise CommitStateUnknownError(
                        f"writing detached version {manifest.version} of {storage.uri} failed ({exc!r}); "
                        "the version may or may not exist"
                    ) from exc
            versions.remember_manifest(storage, path, data, manifest, txn_bytes)
            return manifest
        raise CommitError(f"no free detached version number in {options.max_retries} tries at {storage.uri}")
    except CommitStateUnknownError:
        raise  # the files stay: the version may exist
    except Exception:
        for file in written:
            with contextlib.suppress(OSError):  # best effort: cleanup removes leftovers later
                storage.delete(file)
        discard_elsewhere(storage, base, pending)
        raise


def _landed(storage: Storage, path: str, data: bytes) -> bool:
    """Whether a manifest write that raised did in fact store exactly our bytes."""
    try:
        return storage.read(path) == data
    except Exception:
        return False
