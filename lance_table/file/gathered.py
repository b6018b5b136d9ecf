"""The first byte-range reads of the page jobs of one read of a remote file, sent together.

A take or a filter's rows from a remote file runs one job per page read in part, all at once;
each job asks for the byte ranges of its rows. Sent as they come, the ranges of neighbouring
columns are separate requests, although they often lie a few bytes apart in the file. Here each
job's first read waits until every other started job has asked for its first ranges (or finished,
or a short safety wait ran out), and one of them reads all the asks in one coalesced call: ranges
of several columns close together become one request, as pylance's I/O scheduler merges them.
Later reads of a job go straight to the file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from lance_table.storage.ranges import apart, gather, places_in, range_pairs, spans_of
from lance_table.storage.sources import ByteSource, read_joined

R = TypeVar("R")

#: the longest a first read waits for the other jobs' (a safety net: they normally all ask sooner)
MAX_WAIT_S = 0.05


class _Ask:
    __slots__ = ("error", "joined", "ranges", "result")

    def __init__(self, ranges: Sequence[tuple[int, int]], joined: bool) -> None:
        self.ranges = list(ranges)
        self.joined = joined  # the ranges are wanted one after another in one buffer
        self.result: list[memoryview] | None = None  # (joined: that buffer alone)
        self.error: BaseException | None = None


class GatheredSource:
    """A :class:`ByteSource` over ``source`` whose jobs' first reads are sent together.

    ``jobs``: how many jobs will run at once (each wrapped with :meth:`job`); a job started
    beyond them reads on its own. Give the jobs' pages this source."""

    def __init__(self, source: ByteSource, jobs: int) -> None:
        self.source = source
        self.coalesce_gap = int(getattr(source, "coalesce_gap", 0))
        self._cv = threading.Condition()
        self._slots = jobs
        self._unasked = jobs  # jobs that have made no read yet and have not finished
        self._asks: list[_Ask] = []
        self._local = threading.local()

    @property
    def name(self) -> str:
        """The path or URI that errors name."""
        return self.source.name

    def size(self) -> int:
        """The size in bytes."""
        return self.source.size()

    def job(self, fn: Callable[[Any], R]) -> Callable[[Any], R]:
        """``fn`` counted as one of the jobs whose first reads go together."""

        def run(arg: Any) -> R:
            with self._cv:
                counted = self._slots > 0
                self._slots -= 1
            self._local.first = counted
            try:
                return fn(arg)
            finally:
                if self._local.first:
                    with self._cv:
                        self._unasked -= 1
                        self._cv.notify_all()
                self._local.first = False

        return run

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes of each ``(offset, length)`` range, in order."""
        if not getattr(self._local, "first", False):
            return self.source.read_ranges(ranges)
        return self._gathered(_Ask(ranges, False))

    def read_joined(self, ranges: Sequence[tuple[int, int]] | np.ndarray) -> memoryview:
        """The bytes of ``ranges``, one after another in one buffer (see :func:`read_joined`):
        where the source can, each range read by a request of its own is received straight into
        its place there."""
        if not getattr(self._local, "first", False):
            return read_joined(self.source, ranges)
        arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        if arr.shape[0] > 1 and not bool(np.any(arr[:, 1] < 0)) and not apart(arr, self.coalesce_gap):
            # many small ranges (a take's values): the spans that hold them, each received in
            # its place, and the ranges gathered from there by numpy
            spans, inside = spans_of(arr, self.coalesce_gap)
            got = self._gathered(_Ask(range_pairs(spans), True))[0]
            return gather(got, inside, arr[:, 1])
        return self._gathered(_Ask(range_pairs(arr), True))[0]

    def _gathered(self, ask: _Ask) -> list[memoryview]:
        """The result of this job's first read, ``ask``, read with the other jobs' first reads."""
        self._local.first = False
        deadline = time.monotonic() + MAX_WAIT_S
        with self._cv:
            self._unasked -= 1
            self._asks.append(ask)
            self._cv.notify_all()
            while True:
                if ask.result is not None:
                    return ask.result
                if ask.error is not None:
                    raise ask.error
                left = deadline - time.monotonic()
                if ask in self._asks and (self._unasked <= 0 or left <= 0):
                    batch, self._asks = self._asks, []
                    break
                self._cv.wait(max(left, 0.001) if ask in self._asks else None)
        self._send(batch)
        if ask.error is not None:
            raise ask.error
        assert ask.result is not None
        return ask.result

    def _send(self, batch: list[_Ask]) -> None:
        """Read every ask of ``batch`` in one call and hand each its ranges."""
        try:
            ranges = [r for ask in batch for r in ask.ranges]
            joined = {
                id(ask): places_in([n for _, n in ask.ranges])
                for ask in batch
                if ask.joined and len(ask.ranges) > 1
            }
            into_reader = getattr(self.source, "read_ranges_into", None)
            if joined and into_reader is not None:
                places: list[memoryview | None] = []
                for ask in batch:
                    found = joined.get(id(ask))
                    places.extend(found[1] if found is not None else [None] * len(ask.ranges))
                got = into_reader(ranges, places)
            else:
                got = self.source.read_ranges(ranges)
            at = 0
            for ask in batch:
                mine = got[at : at + len(ask.ranges)]
                at += len(ask.ranges)
                found = joined.get(id(ask))
                if found is not None and into_reader is None:
                    for place, data in zip(found[1], mine):
                        place[:] = data
                if ask.joined:
                    ask.result = [found[0] if found is not None else (mine[0] if mine else memoryview(b""))]
                else:
                    ask.result = mine
        except BaseException as exc:
            for ask in batch:
                ask.error = exc
        with self._cv:
            self._cv.notify_all()
