"""What a commit checks about all the fragments of a manifest, at a cost that does not grow with
them when the fragments are those of a recent manifest plus a few (an append).

A commit asks of every fragment of the next version: its data formats, whether any has a deletion
file or row ids, and whether any fragment id repeats. Walking thousands of fragments in Python for
each small append would make appends slower as the table grows; instead the answers for a recent
fragment tuple are kept, and a tuple that starts with that very tuple (compared element by element
in C, identical objects at once) only adds its new fragments' answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lance_table._lru import LRU


class Fragment(Protocol):
    """What the facts read of a manifest fragment (:class:`lance_table.format.manifest.Fragment`,
    which imports this module)."""

    @property
    def id(self) -> int: ...

    @property
    def formats(self) -> frozenset[str]: ...

    @property
    def deletion_file(self) -> Any: ...

    @property
    def row_id_meta(self) -> Any: ...


#: fragment tuples whose facts are kept (the latest manifests of the datasets in use)
FACTS_CACHE_SIZE = 8


@dataclass(frozen=True)
class FragmentFacts:
    """Facts about a tuple of fragments."""

    formats: frozenset[str]  # the data formats of their files
    deletions: bool  # some fragment has a deletion file
    row_ids: bool  # some fragment carries row id sequences
    ids: frozenset[int] | None  # their ids (None: not kept, as all new ids were above the top)
    repeated: bool  # some id repeats
    top: int  # the largest id (-1 for none)


# by the tuple's id (the tuple is kept with its facts: its id is not reused while kept)
_KEPT: LRU[int, tuple[tuple[Fragment, ...], FragmentFacts]] = LRU(FACTS_CACHE_SIZE)


def facts(fragments: tuple[Fragment, ...]) -> FragmentFacts:
    """The facts of ``fragments`` (see the module docstring for how they are kept)."""
    hit = _KEPT.get(id(fragments))
    candidates = reversed(_KEPT.values())
    if hit is not None and hit[0] is fragments:
        return hit[1]
    found = None
    for kept, kept_facts in candidates:
        n = len(kept)
        if n and n <= len(fragments) and fragments[:n] == kept:
            found = _extend(kept_facts, fragments[n:])
            if found is not None:
                break
    if found is None:
        found = _first(fragments)
    _KEPT.put(id(fragments), (fragments, found))
    return found


def keep(fragments: tuple[Fragment, ...], known: FragmentFacts) -> None:
    """Remember ``known`` as the facts of ``fragments`` (found another way: see
    :mod:`lance_table.format.fragment_source`), for :func:`facts` of it and of its extensions."""
    _KEPT.put(id(fragments), (fragments, known))


def extended(base: FragmentFacts, more: Sequence[Fragment]) -> FragmentFacts | None:
    """The facts of fragments whose facts are ``base`` followed by ``more``; None when they need
    ``base``'s ids, which were not kept."""
    return _extend(base, more)


def _first(fragments: Sequence[Fragment]) -> FragmentFacts:
    ids = [f.id for f in fragments]
    unique = frozenset(ids)
    return FragmentFacts(
        frozenset().union(*(f.formats for f in fragments)),
        any(f.deletion_file for f in fragments),
        any(f.row_id_meta for f in fragments),
        unique,
        len(unique) != len(ids),
        max(ids, default=-1),
    )


def _extend(base: FragmentFacts, more: Sequence[Fragment]) -> FragmentFacts | None:
    """``base`` with fragments ``more`` added; None when that needs ``base``'s ids, not kept."""
    new = _first(more)
    assert new.ids is not None
    if not new.ids:
        clash, ids = False, base.ids
    elif min(new.ids) > base.top:  # ids above every other (as assigned): no repeats
        clash, ids = False, None
    elif base.ids is None:
        return None
    else:
        clash, ids = not base.ids.isdisjoint(new.ids), base.ids | new.ids
    return FragmentFacts(
        base.formats | new.formats,
        base.deletions or new.deletions,
        base.row_ids or new.row_ids,
        ids,
        base.repeated or new.repeated or clash,
        max(base.top, new.top),
    )
