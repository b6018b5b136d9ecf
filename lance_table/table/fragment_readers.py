"""Readers of a version's fragments made when first asked for: a read that touches a few of
thousands of fragments (a take) pays for those few, not for a reader of every fragment."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, overload

import numpy as np

from lance_table.format.fragment_source import FragmentSource
from lance_table.format.manifest import Fragment
from lance_table.table.fragment import FragmentReader

T = TypeVar("T")


class MadeOnFirstUse(Sequence[T]):
    """A sequence of ``length`` items, item ``k`` made by ``make(k)`` when first asked for and kept."""

    def __init__(self, length: int, make: Callable[[int], T]) -> None:
        self._length = length
        self._make_item = make
        self._made: dict[int, T] = {}

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, k: int) -> T: ...

    @overload
    def __getitem__(self, k: slice) -> list[T]: ...

    def __getitem__(self, k: int | slice) -> T | list[T]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self._length))]
        if k < 0:
            k += self._length
        if not 0 <= k < self._length:
            raise IndexError(k)
        item = self._made.get(k)
        if item is None:
            item = self._made[k] = self._make_item(k)
        return item

    def __iter__(self) -> Iterator[T]:
        return (self[k] for k in range(self._length))


class FragmentReaders(MadeOnFirstUse[FragmentReader]):
    """The readers of ``fragments`` (in that order), each made by ``make`` on first use and kept."""

    def __init__(self, fragments: Sequence[Fragment], make: Callable[[Fragment], FragmentReader]) -> None:
        super().__init__(len(fragments), lambda k: make(fragments[k]))
        self.fragments = fragments

    def live_counts(self) -> np.ndarray:
        """The rows of each fragment that are not deleted (from the manifest: no reader is made)."""
        if isinstance(self.fragments, LazyFragments):
            return self.fragments.live_counts()
        return np.fromiter((f.num_rows for f in self.fragments), np.int64, len(self.fragments))


class LazyFragments(MadeOnFirstUse[Fragment]):
    """The fragments of a manifest whose fragments are not converted yet: each is converted when
    first asked for, and the rows of all that are not deleted are known without them (a take over
    thousands of fragments converts the few it touches)."""

    def __init__(self, source: FragmentSource) -> None:
        self._live = source.live_rows
        super().__init__(len(self._live), source.fragment)

    def live_counts(self) -> np.ndarray:
        """The rows of each fragment that are not deleted."""
        return np.array(self._live, np.int64)
