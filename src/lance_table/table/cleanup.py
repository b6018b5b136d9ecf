"""Removing old versions and the files that only they reference."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lance_table.errors import TagError
from lance_table.format import paths
from lance_table.format.manifest import Manifest
from lance_table.table import versions
from lance_table.table.deletion import deletion_path

if TYPE_CHECKING:
    from lance_table.table.dataset import Dataset

DEFAULT_OLDER_THAN = dt.timedelta(days=14)
# Files no manifest references may belong to a writer that has not committed yet.
DEFAULT_GRACE_PERIOD = dt.timedelta(days=7)


@dataclass(frozen=True)
class CleanupStats:
    old_versions: int
    bytes_removed: int
    files_removed: int


def referenced_files(manifest: Manifest) -> set[str]:
    """Paths (relative to the dataset root) a version needs."""
    out = set()
    for frag in manifest.fragments:
        for f in frag.files:
            if f.base_id is None:
                out.add(paths.data_file_path(f.path))
        if frag.deletion_file is not None and frag.deletion_file.base_id is None:
            out.add(deletion_path(frag.id, frag.deletion_file))
    if manifest.transaction_file:
        out.add(paths.transaction_path(manifest.transaction_file))
    return out


def cleanup_old_versions(
    ds: Dataset,
    *,
    older_than: dt.timedelta = DEFAULT_OLDER_THAN,
    grace_period: dt.timedelta = DEFAULT_GRACE_PERIOD,
    delete_unverified: bool = False,
    error_if_tagged_old_versions: bool = True,
) -> CleanupStats:
    """Delete versions older than ``older_than`` (never the latest, never a tagged one) and the data,
    deletion and transaction files that no remaining version references.

    A file that no manifest references at all is deleted only when it is older than
    ``grace_period`` (it may belong to a writer still in flight); ``delete_unverified`` lifts that
    rule. Manifests go first, so no reader ever sees a version whose files are missing.

    Raises:
        TagError: a tagged version is older than the cutoff and ``error_if_tagged_old_versions``.
    """
    storage = ds._storage
    now = time.time()
    cutoff_ns = int((now - older_than.total_seconds()) * 1e9)
    entries = versions.list_versions(storage)
    if not entries:
        return CleanupStats(0, 0, 0)
    latest = entries[-1].version
    tagged = {t.version: name for name, t in ds.tags.list().items()}
    kept_refs: set[str] = set()
    removed_refs: set[str] = set()
    doomed = []
    for entry in entries:
        manifest = versions.read_manifest_file(storage, entry).manifest
        old = manifest.timestamp_ns < cutoff_ns and entry.version != latest
        if old and entry.version in tagged:
            if error_if_tagged_old_versions:
                raise TagError(
                    f"version {entry.version} is older than the cutoff but tagged {tagged[entry.version]!r}; "
                    "delete the tag or pass error_if_tagged_old_versions=False"
                )
            old = False
        refs = referenced_files(manifest)
        if old:
            doomed.append(entry)
            removed_refs |= refs
        else:
            kept_refs |= refs
    for entry in doomed:
        storage.delete(entry.path)
    grace_cutoff = now - (0 if delete_unverified else grace_period.total_seconds())
    removed_bytes = 0
    removed_files = 0
    for directory in (paths.DATA_DIR, paths.DELETIONS_DIR, paths.TRANSACTIONS_DIR):
        for item in storage.list_tree(directory):
            if item.path in kept_refs:
                continue
            verified = item.path in removed_refs
            young = item.modified is None or item.modified > grace_cutoff
            if not verified and young:
                continue
            storage.delete(item.path)
            removed_bytes += item.size
            removed_files += 1
    return CleanupStats(len(doomed), removed_bytes, removed_files)
