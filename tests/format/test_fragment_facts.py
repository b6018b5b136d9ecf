"""Fragment facts kept from one manifest to the next agree with a walk of every fragment."""

from __future__ import annotations

from lance_table.format import fragment_facts
from lance_table.format.manifest import DataFile, DeletionFile, Fragment


def _frag(i: int, minor: int = 1, deleted: bool = False) -> Fragment:
    data = DataFile(f"{i}.lance", (0,), (0,), 2, minor, 10)
    gone = DeletionFile("bitmap", 1, i, 1) if deleted else None
    return Fragment(i, (data,), 10, gone)


def test_appended_fragments_extend_the_kept_facts():
    base = tuple(_frag(i) for i in range(5))
    first = fragment_facts.facts(base)
    assert (first.top, first.repeated, first.deletions, first.formats) == (
        4,
        False,
        False,
        frozenset({"2.1"}),
    )
    grown = (*base, _frag(5, minor=2, deleted=True))
    facts = fragment_facts.facts(grown)
    assert (facts.top, facts.repeated, facts.deletions) == (5, False, True)
    assert facts.formats == frozenset({"2.1", "2.2"})
    assert fragment_facts.facts((*grown, _frag(6))).repeated is False
    # an id chosen below the top that repeats one is found, kept ids or not
    assert fragment_facts.facts((*grown, _frag(3))).repeated is True
    assert fragment_facts.facts((*grown, _frag(6), _frag(2))).repeated is True
    assert fragment_facts.facts((*base, _frag(9), _frag(9))).repeated is True
