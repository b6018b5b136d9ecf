"""What a listing of ``_versions`` says: the versions its manifest names stand for and their
naming scheme, worked out in bulk and remembered for the last listing of each dataset.

After thousands of commits a listing holds thousands of names, and opening the latest version or
committing needs only the newest of them (or the few above a version). V2 names (pylance's
default: ``u64::MAX - version``, zero-padded to 20 digits) sort newest first, so the newest is
the smallest name: a ``min`` in C, with no name parsed. V1 names are shorter than V2 names, so
a pass over the names' lengths (in C as well) finds any, and a mix of both schemes. Only a
listing that needs every version (or holds V1 names) parses every name.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from lance_table._lru import LRU
from lance_table.format import paths

#: the last listing of each dataset (by storage cache key), with what was worked out from it
MEMO_SIZE = 64
_MEMO: LRU[str, Listing] = LRU(MEMO_SIZE)


@dataclass(frozen=True)
class VersionEntry:
    """A manifest file found in ``_versions``."""

    version: int
    path: str
    size: int
    scheme: str


class MixedSchemesError(Exception):
    """The listing mixes V1 and V2 manifest names (the caller names the directory)."""


class Listing:
    """The names of one listing of ``_versions`` and what they say (computed when first asked,
    then kept: the listing never changes)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self._only_v2: bool | None = None
        self._latest: VersionEntry | None = None
        self._all: list[VersionEntry] | None = None

    def only_v2(self) -> bool:
        """Whether no manifest name is a V1 name (every manifest, if any, has a V2 name)."""
        if self._only_v2 is None:
            # a V1 name ("{version}.manifest", the version in at most 19 digits) is not as long
            # as a V2 name: only the few names of other lengths (the hint file's, mostly) are
            # looked at (see :func:`_not_v2_long`)
            self._only_v2 = not any(map(paths.is_v1_name, _not_v2_long(self.names)))
        return self._only_v2

    def latest(self) -> VersionEntry | None:
        """The newest version, None without any manifest.

        Raises:
            MixedSchemesError: both naming schemes are present.
        """
        if self._latest is None:
            if self.only_v2():
                name = _smallest_v2(self.names)
                self._latest = _v2_entry(name) if name is not None else None
            else:
                entries = self.entries()
                self._latest = entries[-1] if entries else None
        return self._latest

    def after(self, version: int) -> list[VersionEntry]:
        """The versions above ``version``, oldest first.

        Raises:
            MixedSchemesError: both naming schemes are present.
        """
        if self._all is None and self.only_v2():
            latest = self.latest()  # (kept: a commit asks of the listing its open made)
            if latest is None or latest.version <= version:
                return []
            cut = paths.manifest_name(version, paths.ManifestNaming.V2)
            newer = sorted(filter(cut.__gt__, self.names), reverse=True)  # (picked in C)
            return [_v2_entry(n) for n in newer if paths.is_v2_name(n)]
        entries = self.entries()
        return [e for e in entries if e.version > version]

    def entries(self) -> list[VersionEntry]:
        """Every version, oldest first (a new list).

        Raises:
            MixedSchemesError: both naming schemes are present.
        """
        if self._all is None:
            found = []
            for name in self.names:
                parsed = paths.parse_manifest_name(name)
                if parsed is not None:
                    found.append(VersionEntry(parsed[0], f"{paths.VERSIONS_DIR}/{name}", -1, parsed[1]))
            if len({e.scheme for e in found}) > 1:
                raise MixedSchemesError()
            found.sort(key=lambda e: e.version)
            self._all = found
        return list(self._all)


def listing(names: list[str], dataset_key: str) -> Listing:
    """The :class:`Listing` of ``names`` (a listing of ``_versions`` of the dataset whose storage
    has ``dataset_key``): the one remembered when the dataset's last listing had the very same
    names, so that an unchanged directory is worked out once."""
    key = tuple(names)
    hit = _MEMO.get(dataset_key)
    if hit is not None and hit.names == key:
        return hit
    made = Listing(key)
    _MEMO.put(dataset_key, made)
    return made


def clear() -> None:
    """Forget every remembered listing."""
    _MEMO.clear()


#: listings at least this long are measured in numpy (shorter ones name by name, in C)
BULK_NAMES = 256


def _not_v2_long(names: tuple[str, ...]) -> Iterable[str]:
    """The names whose length is not a V2 manifest name's: every V1 name is among them.

    A long listing is joined and its names' lengths read off the positions of the separators
    in numpy (a name holds no ``/``), in UTF-8 bytes: a name not in ASCII is measured so, and is
    no manifest name of either scheme whether picked or not. At 5,000 names this takes a third
    of the time of taking each name's length.
    """
    if len(names) < BULK_NAMES:
        return itertools.compress(names, map(paths.V2_NAME_LENGTH.__ne__, map(len, names)))
    joined = np.frombuffer("/".join(names).encode("utf-8", "surrogateescape"), np.uint8)
    bounds = np.flatnonzero(joined == _SLASH)
    lengths = np.diff(bounds, prepend=-1, append=len(joined)) - 1
    return [names[i] for i in np.flatnonzero(lengths != paths.V2_NAME_LENGTH).tolist()]


_SLASH = ord("/")


def _smallest_v2(names: tuple[str, ...]) -> str | None:
    """The smallest V2 manifest name (the newest version's), None if there is none."""
    if not names:
        return None
    smallest = min(names)
    if paths.is_v2_name(smallest):
        return smallest
    # something else sorts first (a temporary file, say): look among the names of V2's length
    same_length = list(itertools.compress(names, map(paths.V2_NAME_LENGTH.__eq__, map(len, names))))
    if same_length:
        smallest = min(same_length)
        if paths.is_v2_name(smallest):
            return smallest
    return min(filter(paths.is_v2_name, same_length), default=None)


def _v2_entry(name: str) -> VersionEntry:
    return VersionEntry(
        paths.U64_MAX - int(name[:20]), f"{paths.VERSIONS_DIR}/{name}", -1, paths.ManifestNaming.V2
    )


__all__ = ["Listing", "MixedSchemesError", "VersionEntry", "clear", "listing"]
