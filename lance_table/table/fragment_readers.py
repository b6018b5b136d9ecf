"""Readers of a version's fragments made when first asked for: a read that touches a few of
thousands of fragments (a take) pays for those few, not for a reader of every fragment."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import overload

import numpy as np

from lance_table.format.fragment_source import FragmentSource
from lance_table.format.manifest import Fragment
from lance_table.table.fragment import FragmentReader


class FragmentReaders(Sequence[FragmentReader]):
    """The readers of ``fragments`` (in that order), each made by ``make`` on first use and kept."""

    def __init__(self, fragments: Sequence[Fragment], make: Callable[[Fragment], FragmentReader]) -> None:
        self.fragments = fragments
        self._make = make
        self._made: dict[int, FragmentReader] = {}

    def __len__(self) -> int:
        return len(self.fragments)

    @overload
    def __getitem__(self, k: int) -> FragmentReader: ...

    @overload
    def __getitem__(self, k: slice) -> list[FragmentReader]: ...

    def __getitem__(self, k: int | slice) -> FragmentReader | list[FragmentReader]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        reader = self._made.get(k)
        if reader is None:
            reader = self._made[k] = self._make(self.fragments[k])  # IndexError past the end
        return reader

    def __iter__(self) -> Iterator[FragmentReader]:
        return (self[k] for k in range(len(self)))

    def live_counts(self) -> np.ndarray:
        """The rows of each fragment that are not deleted (from the manifest: no reader is made)."""
        if isinstance(self.fragments, LazyFragments):
            return self.fragments.live_counts()
        return np.fromiter((f.num_rows for f in self.fragments), np.int64, len(self.fragments))


class LazyFragments(Sequence[Fragment]):
    """The fragments of a manifest whose fragments are not converted yet and have no deletion
    files: each is converted when first asked for, and the rows of all are known without them (a
    take over thousands of fragments converts the few it touches)."""

    def __init__(self, source: FragmentSource) -> None:
        assert source.live_rows is not None
        self._source = source
        self._live = source.live_rows
        self._made: dict[int, Fragment] = {}

    def __len__(self) -> int:
        return len(self._live)

    @overload
    def __getitem__(self, k: int) -> Fragment: ...

    @overload
    def __getitem__(self, k: slice) -> list[Fragment]: ...

    def __getitem__(self, k: int | slice) -> Fragment | list[Fragment]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        frag = self._made.get(k)
        if frag is None:
            frag = self._made[k] = self._source.fragment(k)
        return frag

    def live_counts(self) -> np.ndarray:
        """The rows of each fragment (none has deleted rows)."""
        return np.array(self._live, np.int64)
