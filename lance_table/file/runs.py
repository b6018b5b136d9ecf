"""Row selections as sorted runs of consecutive positions.

Every read path (full read, row range, take, batch streaming) is expressed as a :class:`Runs`: a whole
page is one run, a range is one run, a take of random rows is many short runs. Decoders turn runs of
values into runs of bytes, so only the needed bytes are fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from lance_table._parallel import cached_per_instance

T = TypeVar("T")


@dataclass(frozen=True)
class Runs:
    """Disjoint, increasing runs ``[starts[i], starts[i] + lengths[i])`` of non-negative positions.

    The arrays are never changed once the runs exist: their count, total and end are worked out
    once (a scan of many small fragments asks for them dozens of times a fragment).
    """

    starts: np.ndarray
    lengths: np.ndarray

    @staticmethod
    def span(start: int, length: int) -> Runs:
        if length <= 0:
            return EMPTY
        return Runs(np.asarray([start], np.int64), np.asarray([length], np.int64))

    @staticmethod
    def from_sorted_unique(positions: np.ndarray) -> Runs:
        """Runs covering exactly the given sorted, duplicate-free positions."""
        positions = np.asarray(positions, np.int64)
        if positions.size == 0:
            return EMPTY
        brk = np.ones(positions.size, bool)
        brk[1:] = positions[1:] != positions[:-1] + 1
        first = np.flatnonzero(brk)
        lengths = np.diff(np.append(first, positions.size))
        return Runs(positions[first], lengths.astype(np.int64))

    @staticmethod
    def by_owner(owner: np.ndarray, positions: np.ndarray, owners: list[int]) -> list[Runs]:
        """The runs of the positions of each of ``owners``, from positions sorted by owner and
        then position, without duplicates (``owner[i]`` owns ``positions[i]``), all found in one
        pass: a take touching hundreds of small fragments makes their runs at once."""
        positions = np.asarray(positions, np.int64)
        if positions.size == 0:
            return [EMPTY] * len(owners)
        brk = np.ones(positions.size, bool)
        brk[1:] = (positions[1:] != positions[:-1] + 1) | (owner[1:] != owner[:-1])
        first = np.flatnonzero(brk)
        lengths = np.diff(np.append(first, positions.size)).astype(np.int64)
        starts, run_owner = positions[first], owner[first]
        lo = np.searchsorted(run_owner, owners, side="left").tolist()
        hi = np.searchsorted(run_owner, owners, side="right").tolist()
        return [Runs(starts[a:b], lengths[a:b]) if b > a else EMPTY for a, b in zip(lo, hi)]

    @staticmethod
    def normalized(starts: np.ndarray, lengths: np.ndarray) -> Runs:
        """Runs from increasing, possibly empty or touching ``(start, length)`` pairs."""
        keep = lengths > 0
        return _merge(np.asarray(starts[keep], np.int64), np.asarray(lengths[keep], np.int64))

    @cached_per_instance
    def count(self) -> int:
        return len(self.starts)

    @cached_per_instance
    def total(self) -> int:
        return int(self.lengths[0]) if len(self.lengths) == 1 else int(self.lengths.sum())

    @cached_per_instance
    def end(self) -> int:
        return int(self.starts[-1] + self.lengths[-1]) if self.count else 0

    def derived(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, worked out once for these runs and ``key`` and then kept with them (the
        runs never change: the live rows of a fragment, kept for every scan of it, are made
        into the same mask by each)."""
        memo: dict[Hashable, object] = self.__dict__.setdefault("_derived", {})
        if key not in memo:
            memo[key] = make()
        return memo[key]  # type: ignore[return-value]

    def is_span(self, start: int, length: int) -> bool:
        return self.count == 1 and int(self.starts[0]) == start and int(self.lengths[0]) == length

    def clip(self, lo: int, hi: int) -> Runs:
        """The part of these runs inside ``[lo, hi)``, shifted so that ``lo`` becomes 0."""
        if not self.count:
            return self
        i = int(np.searchsorted(self.starts + self.lengths, lo, side="right"))
        j = int(np.searchsorted(self.starts, hi, side="left"))
        if i >= j:
            return EMPTY
        s = np.maximum(self.starts[i:j], lo)
        e = np.minimum(self.starts[i:j] + self.lengths[i:j], hi)
        keep = e > s
        return Runs(s[keep] - lo, (e - s)[keep])

    def scale(self, factor: int) -> Runs:
        """Runs over items when every position owns ``factor`` consecutive items."""
        return Runs(self.starts * factor, self.lengths * factor)

    def shift(self, delta: int) -> Runs:
        return Runs(self.starts + delta, self.lengths)

    def positions(self) -> np.ndarray:
        """Every selected position, in order."""
        if not self.count:
            return np.zeros(0, np.int64)
        if self.count == 1:
            start = int(self.starts[0])
            return np.arange(start, start + int(self.lengths[0]), dtype=np.int64)
        total = self.total
        out = np.ones(total, np.int64)
        out[0] = self.starts[0]
        bounds = np.cumsum(self.lengths)[:-1]
        out[bounds] = self.starts[1:] - (self.starts[:-1] + self.lengths[:-1]) + 1
        return np.cumsum(out)

    def select(self, ordinals: np.ndarray) -> np.ndarray:
        """The positions of the given ordinals (0 = first selected position), without expanding all."""
        ordinals = np.asarray(ordinals, np.int64)
        if self.count == 1:
            return ordinals + int(self.starts[0])
        ends = np.cumsum(self.lengths)
        run = np.searchsorted(ends, ordinals, side="right")
        return self.starts[run] + ordinals - (ends[run] - self.lengths[run])

    def contains(self, positions: np.ndarray) -> np.ndarray:
        """Which of the sorted ``positions`` the runs cover, as bools."""
        if self.count == 1:
            start = int(self.starts[0])
            return (positions >= start) & (positions < start + int(self.lengths[0]))
        run = np.searchsorted(self.starts, positions, side="right") - 1
        inside = run >= 0
        run[~inside] = 0
        inside &= positions < self.starts[run] + self.lengths[run]
        return inside

    def mask(self, lo: int, span: int) -> np.ndarray:
        """Which positions of ``[lo, lo + span)`` the runs cover (they lie inside it), as bools:
        all but the gaps between the runs and before and after them, which are written one
        scatter when they are single positions (rows deleted here and there), else expanded."""
        mask = np.zeros(span, bool)
        if not self.count:
            return mask
        first, end = int(self.starts[0]) - lo, self.end - lo
        mask[first:end] = True
        ends = self.starts + self.lengths
        gap_at = ends[:-1] - lo
        gap_len = self.starts[1:] - ends[:-1]
        if gap_len.size and int(gap_len.max()) <= 1:
            mask[gap_at[gap_len == 1]] = False
        elif gap_len.size:
            total = int(gap_len.sum())
            before = np.zeros(gap_len.size, np.int64)
            np.cumsum(gap_len[:-1], out=before[1:])
            mask[np.arange(total, dtype=np.int64) + np.repeat(gap_at - before, gap_len)] = False
        return mask

    def with_predecessors(self) -> Runs:
        """These runs, each extended one position to the left where possible (merged if they touch).

        Used to read end offsets: a run of rows needs the end of the row before it as its start.
        """
        has_prev = (self.starts > 0).astype(np.int64)
        return _merge(self.starts - has_prev, self.lengths + has_prev)


# Selections of more runs than this, covering at least this share of their span, read the span.
DENSE_MIN_RUNS = 64
DENSE_FRACTION = 0.25
# So do fewer runs covering at least this share of their span when they are shorter than
# LONG_RUN rows on average (a fragment with rows deleted here and there).
DENSE_SHARE = 0.5
LONG_RUN = 1024


def read_as_span(runs: Runs) -> bool:
    """Whether the rows at ``runs`` are best read as the span that covers them, then selected:
    many runs close together, or short runs covering most of their span (the live rows of a
    range with rows deleted here and there); not a few long runs (the rows around a deleted
    range), whose pages decode each run as a span of its own."""
    if runs.count < 2:
        return False
    span = runs.end - int(runs.starts[0])
    if runs.count > DENSE_MIN_RUNS and runs.total >= DENSE_FRACTION * span:
        return True
    return runs.total >= DENSE_SHARE * span and runs.total < LONG_RUN * runs.count


#: a run of rows read from a local file's plain 2.0 pages costs about as much as decoding this many
#: rows more of a span read whole (a range gathered, a few numpy calls): see :func:`many_runs`
SPAN_ROWS_PER_RUN = 16


def many_runs(runs: Runs) -> bool:
    """Whether the rows at ``runs`` of a local 2.0 file (plain pages, whose every run is a range
    of each column's bytes) are best read as the span that covers them, then selected: runs so
    many that their ranges cost more than the span's rows (a filter's tenth of the rows, in
    runs of one or two rows: pylance's 20k-row fragments read in 231 against 404 ms)."""
    if runs.count <= DENSE_MIN_RUNS:
        return False
    return runs.end - int(runs.starts[0]) <= SPAN_ROWS_PER_RUN * runs.count


def _merge(starts: np.ndarray, lengths: np.ndarray) -> Runs:
    if starts.size == 0:
        return EMPTY
    ends = starts + lengths
    new = np.ones(starts.size, bool)
    new[1:] = starts[1:] > ends[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, starts.size - 1)
    return Runs(starts[first], ends[last] - starts[first])


EMPTY = Runs(np.zeros(0, np.int64), np.zeros(0, np.int64))
