"""The version this process last committed to a dataset, for the open of its next append.

An append opens the latest version, writes its data files, then commits: the commit lists
``_versions`` anew once its transaction file is written (see :mod:`lance_table.table.commit.protocol`)
and rebases over every version it finds above the one the append read. A stream of appends from
one process would list the directory twice per append: once to open, once to commit. Where the
store can tell cheaply that nothing changed (a ``stat`` of a local ``_versions`` directory and of
the manifest, see :meth:`Storage.change_token`), the open takes the version this process committed
last instead, and only the commit lists.

An equal token may miss a change made within the same tick of the file system's clock as this
process's last change (times are that coarse): the open then reads a version that was the latest a
moment earlier, as if it had run a moment earlier, which any open may be. The commit's own listing
finds what is newer and rebases over it, exactly as over a version committed while the append
wrote its files; a version cleaned up in between changes the directory (a later tick), so it is
never assumed present. Only appends open this way: a reader wants the version current when it
opens, and an overwrite or a creation does not read the version at all.
"""

from __future__ import annotations

from collections.abc import Hashable

from lance_table._lru import LRU
from lance_table.format import paths
from lance_table.format.manifest import Manifest
from lance_table.storage import Storage
from lance_table.table.version_names import VersionEntry

#: datasets whose last committed version is kept (the least recently committed go first)
KNOWN_DATASETS = 16

# storage cache key -> (token of ``_versions``, token of the manifest, its entry, the manifest)
_KNOWN: LRU[str, tuple[Hashable, Hashable, VersionEntry, Manifest]] = LRU(KNOWN_DATASETS)


def remember(storage: Storage, entry: VersionEntry, manifest: Manifest) -> None:
    """Keep ``manifest``, just committed by this process at ``entry``, as the dataset's latest for
    as long as neither ``_versions`` nor the manifest changes. Call it after the commit's last
    change to ``_versions`` (the version hint included)."""
    folder = storage.change_token(paths.VERSIONS_DIR)
    if folder is None:
        _KNOWN.pop(storage.cache_key)
        return
    file = storage.change_token(entry.path)
    if file is None:
        _KNOWN.pop(storage.cache_key)
        return
    _KNOWN.put(storage.cache_key, (folder, file, entry, manifest))


def latest(storage: Storage) -> tuple[VersionEntry, Manifest] | None:
    """The version this process committed last to the dataset and its manifest, when
    ``_versions`` and that manifest are as the commit left them; else None (list the versions)."""
    hit = _KNOWN.get(storage.cache_key)
    if hit is None:
        return None
    folder, file, entry, manifest = hit
    if storage.change_token(paths.VERSIONS_DIR) != folder or storage.change_token(entry.path) != file:
        _KNOWN.pop(storage.cache_key)
        return None
    return entry, manifest


__all__ = ["latest", "remember"]
