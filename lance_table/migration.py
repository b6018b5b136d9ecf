"""Whether a dataset's manifest lacks what old Lance writers left out (pylance's
``lance.lance.manifest_needs_migration``).

Old writers recorded no writer version, no row counts per fragment or deletion file, and index
fragment bitmaps that versions before 0.8.15 could get wrong. Any commit brings such a manifest up
to date; this check says whether one is due.
"""

from __future__ import annotations

import re
from typing import Any

from lance_table.format.manifest import Manifest
from lance_table.table.indices import decode_section

__all__ = ["manifest_needs_migration"]

_BITMAP_FIX = (0, 8, 15)  # pylance recomputes index fragment bitmaps written by older Lance


def manifest_needs_migration(dataset: Any) -> bool:
    """Whether the latest manifest of ``dataset`` needs a migration, as pylance decides it.

    True when the manifest records no writer version, a fragment no row count, a deletion file no
    count of deleted rows, or an index no fragment bitmap (or one written by Lance before 0.8.15).

    Args:
        dataset: a :class:`~lance_table.LanceDataset`.

    Raises:
        TypeError: ``dataset`` is not a dataset handle.
        DatasetNotFoundError: the dataset no longer exists.

    Example:
        ```python
        from lance_table.migration import manifest_needs_migration

        if manifest_needs_migration(ds):
            ds.delete("false")  # any commit brings the manifest up to date
        ```
    """
    snapshot = getattr(dataset, "_snapshot", None)
    if snapshot is None or not hasattr(snapshot, "checkout"):
        raise TypeError(f"manifest_needs_migration() takes a dataset, not {type(dataset).__name__}")
    return needs_migration(snapshot.checkout().manifest)


def needs_migration(manifest: Manifest) -> bool:
    """:func:`manifest_needs_migration` of one manifest."""
    no_writer = not manifest.writer_library and not manifest.writer_version
    if no_writer:
        return True
    for frag in manifest.fragments:
        if frag.physical_rows == 0:  # 0 is "not recorded"
            return True
        if frag.deletion_file is not None and frag.deletion_file.num_deleted_rows == 0:
            return True
    old_lance = manifest.writer_library == "lance" and _older_than_fix(manifest.writer_version)
    return any(not idx.fragment_bitmap or old_lance for idx in decode_section(manifest.index_section))


def _older_than_fix(version: str) -> bool:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if match is None:
        return True  # pylance treats a version it cannot read as old
    return tuple(int(x) for x in match.groups()) < _BITMAP_FIX
