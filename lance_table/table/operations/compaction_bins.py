"""The bins of a compaction: runs of adjacent small fragments (or fragments with many deleted
rows) rewritten together, planned the way pylance's compaction planner groups them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lance_table.table.fragment import FragmentReader


@dataclass
class _Bin:
    fragments: list[FragmentReader] = field(default_factory=list)
    compact_itself: list[bool] = field(default_factory=list)
    indices: tuple[int, ...] = ()  # the indices covering the bin's fragments (all the same)

    @property
    def live_rows(self) -> list[int]:
        return [f.fragment.num_rows for f in self.fragments]

    def is_noop(self) -> bool:
        return not self.fragments or (len(self.fragments) == 1 and not self.compact_itself[0])

    def split(self, target: int) -> list[_Bin]:
        """Split into bins of at least ``target`` rows; the remainder joins the last bin."""
        out = []
        rest = self
        while True:
            counts = rest.live_rows
            n = 0
            rows = 0
            while rows < target and n < len(counts):
                rows += counts[n]
                n += 1
            if sum(counts[n:]) >= target:
                out.append(_Bin(rest.fragments[:n], rest.compact_itself[:n], self.indices))
                rest = _Bin(rest.fragments[n:], rest.compact_itself[n:], self.indices)
            else:
                out.append(rest)
                return out


def plan(
    frags: list[FragmentReader],
    target_rows: int,
    materialize_deletions: bool,
    threshold: float,
    coverage: Callable[[int], tuple[int, ...]] = lambda _: (),
) -> list[_Bin]:
    """Group adjacent fragments to rewrite, the way pylance's planner does; ``coverage`` gives the
    indices covering a fragment id, and fragments covered by different indices never share a bin."""
    bins: list[_Bin] = []
    current: _Bin | None = None
    for frag in frags:
        f = frag.fragment
        deleted_share = f.num_deleted / f.physical_rows if f.physical_rows else 0.0
        if materialize_deletions and deleted_share > threshold:
            candidacy: bool | None = True  # compact itself
        elif f.physical_rows < target_rows:
            candidacy = False  # compact with neighbours
        else:
            candidacy = None
        if candidacy is None:
            if current is not None:
                bins.append(current)
                current = None
            continue
        covered = coverage(f.id)
        if current is not None and current.indices != covered:
            bins.append(current)
            current = None
        if current is None:
            current = _Bin(indices=covered)
        current.fragments.append(frag)
        current.compact_itself.append(candidacy)
    if current is not None:
        bins.append(current)
    return [b for bin_ in bins if not bin_.is_noop() for b in bin_.split(target_rows)]
