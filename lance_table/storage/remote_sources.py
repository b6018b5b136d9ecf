"""Byte sources of files on fsspec filesystems: ranges fetched with ``cat_ranges`` (s3fs and the
rest), with pyarrow's S3 client (:mod:`.arrow_s3`) or as plain signed GETs (:mod:`.s3_direct`); a
large merged read is fetched in parts at once. The storages that hand them out are in
:mod:`.remote`."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from concurrent.futures import wait
from typing import Any

import numpy as np

from lance_table._buffers import empty, reusable
from lance_table._parallel import ARROW_READS, pool
from lance_table.errors import CorruptFileError
from lance_table.storage import s3_direct
from lance_table.storage.arrow_s3 import ArrowFile, ArrowS3
from lance_table.storage.failures import typed_failures
from lance_table.storage.ranges import apart, gather, places_in, range_pairs, spans_of
from lance_table.storage.s3_direct import DirectReadFailed, DirectS3
from lance_table.storage.sources import _RangedSource, size_disagreement

#: a merged read of more bytes than this is fetched as that many equal parts at once, as pylance's
#: client does (a 19 MiB page: two requests of 9.6 MiB): one request's transfer would otherwise be
#: the whole scan's critical path
SPLIT_READ_BYTES = 16 * 1024 * 1024
#: the bytes of one read's GETs that one thread receives (see :meth:`DirectS3.get_ranges`); a
#: larger read's are received by several threads at once, as each receive over TLS also
#: decrypts (some GB/s a core)
BYTES_PER_RECEIVER = 64 * 1024 * 1024


def split_reads(reads: list[tuple[int, int]], limit: int) -> tuple[list[tuple[int, int]], list[int]]:
    """``reads`` with each one longer than ``limit`` cut into the fewest equal parts of at most
    ``limit`` bytes; returns the parts in order and how many parts each read became."""
    parts: list[tuple[int, int]] = []
    counts: list[int] = []
    for off, length in reads:
        k = -(-length // limit) if length > limit > 0 else 1
        cuts = [off + length * i // k for i in range(k + 1)]
        parts.extend((a, b - a) for a, b in itertools.pairwise(cuts))
        counts.append(k)
    return parts, counts


class _FsspecSource(_RangedSource):
    """A ByteSource over one fsspec file, fetching coalesced ranges with ``cat_ranges``.

    A size given by the caller (a manifest's ``file_size_bytes``) saves a request for it. When a
    read fails or comes back short, the file's real size is looked up: if it is not the given one,
    the error says that the manifest and the file disagree about the size.

    Each read is a buffer of its own (see ``_RangedSource.fresh_reads``).
    """

    fresh_reads = True

    def __init__(self, fs: Any, path: str, size: int | None, name: str) -> None:
        self._fs = fs
        self._path = path
        self._name = name
        self._size = size
        self._claimed = size

    def _disagreement(self) -> CorruptFileError | None:
        """The size error, if the file's real size is not the claimed one."""
        if self._claimed is None:
            return None
        try:
            actual = int(self._fs.size(self._path))
        except OSError:
            return None
        return size_disagreement(self._name, self._claimed, actual) if actual != self._claimed else None

    def _checked(self, off: int, length: int, data: bytes | memoryview) -> memoryview:
        if len(data) != length:
            wrong = self._disagreement()
            if wrong is not None:
                raise wrong
        return super()._checked(off, length, data)

    def _read_many(self, reads: list[tuple[int, int]]) -> list[bytes | memoryview]:
        return self._fetched(reads, None)

    def _read_many_into(
        self, reads: list[tuple[int, int]], into: list[memoryview | None]
    ) -> list[bytes | memoryview]:
        return self._fetched(reads, into)

    @typed_failures
    def _fetched(
        self, reads: list[tuple[int, int]], into: list[memoryview | None] | None
    ) -> list[bytes | memoryview]:
        """:meth:`_fetch`, with the size of the file checked where a read fails."""
        try:
            return self._fetch(reads, into)
        except FileNotFoundError:
            raise
        except OSError as exc:  # S3 answers a range past the end with 416 "range not satisfiable"
            wrong = self._disagreement()
            if wrong is not None:
                raise wrong from exc
            raise

    @typed_failures
    def size(self) -> int:
        if self._size is None:
            self._size = int(self._fs.size(self._path))
        return self._size

    def _read(self, offset: int, length: int) -> bytes:
        if length == 0:
            return b""
        return bytes(self._fs.cat_file(self._path, start=offset, end=offset + length))

    def read_ranges_into(
        self, ranges: Sequence[tuple[int, int]], into: Sequence[memoryview | None]
    ) -> list[memoryview]:
        """The bytes of each ``(offset, length)`` range, in order; ``into``: for each range, None
        or a buffer of its length that the range's bytes are put in (the range's view is then
        that buffer), received straight into it where the range is a request of its own."""
        return self._read_ranges(ranges, into)

    def read_joined(self, ranges: Sequence[tuple[int, int]] | np.ndarray) -> memoryview:
        """The bytes of ``ranges``, one after another in one buffer (see
        :func:`~lance_table.storage.sources.read_joined`), each range that is a request of its
        own received straight into its place there (a take's spans of a page: no copy to join
        them); ranges that share requests (a take's values, a few bytes each) are read as the
        spans that hold them (:func:`~lance_table.storage.ranges.spans_of`), received so, and
        gathered from there by numpy."""
        arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        if arr.shape[0] < 2 or bool(np.any(arr[:, 1] < 0)):
            got = self.read_ranges(range_pairs(arr))  # (a negative length: the error of read_ranges)
            return got[0] if len(got) == 1 else _joined(got)
        if not apart(arr, self.coalesce_gap):
            spans, inside = spans_of(arr, self.coalesce_gap)
            return gather(self.read_joined(spans), inside, arr[:, 1])
        pairs = range_pairs(arr)
        out, places = places_in(arr[:, 1].tolist())
        self._read_ranges(pairs, list(places))
        return out

    def _fetch(
        self, reads: list[tuple[int, int]], into: list[memoryview | None] | None = None
    ) -> list[bytes | memoryview]:
        """All merged reads in one ``cat_ranges`` call: async backends (s3fs) fetch them
        concurrently; a read longer than :data:`SPLIT_READ_BYTES` is fetched in parts
        (``into``: see :meth:`_RangedSource._read_many_into`; not used here)."""
        wanted = [(off, length) for off, length in reads if length]  # S3 refuses empty ranges
        parts, counts = split_reads(wanted, SPLIT_READ_BYTES)
        if len(parts) < 2:
            return [self._read(off, length) for off, length in reads]
        starts = [off for off, _ in parts]
        ends = [off + length for off, length in parts]
        got = iter(self._fs.cat_ranges([self._path] * len(parts), starts, ends, on_error="raise"))
        whole = iter([next(got) if k == 1 else _joined([next(got) for _ in range(k)]) for k in counts])
        return [next(whole) if length else b"" for _, length in reads]


class _ArrowS3Source(_FsspecSource):
    """A data file on S3 whose byte ranges pyarrow's S3 client reads (see :mod:`.arrow_s3`).

    pyarrow opens a file with a HEAD request: the first read of a source (the footer when a
    reader opens the file, or the whole of a small file) goes through s3fs, which needs none, and
    only the reads after it through pyarrow; a file read once costs no request more than with
    s3fs, one read again (a dataset handle's next scan) one HEAD in the reader's life. Size checks
    on failure, and reads in a forked child, go through s3fs.
    """

    def __init__(self, fs: Any, arrow: ArrowS3, path: str, size: int | None, name: str) -> None:
        super().__init__(fs, path, size, name)
        self._arrow = arrow
        self._file = ArrowFile(arrow, path, name)
        self._first = True

    def _through_arrow(self) -> bool:
        if self._first:
            self._first = False  # two threads may both send their first read through s3fs
            return False
        return self._arrow.usable()

    def _opened(self) -> None:
        """Open the file (its one HEAD request); a size other than the manifest's is an error."""
        actual = self._file.size()
        if self._claimed is not None and actual != self._claimed:
            raise size_disagreement(self._name, self._claimed, actual)

    def _read_many(self, reads: list[tuple[int, int]]) -> list[bytes | memoryview]:
        if not self._through_arrow():
            return super()._read_many(reads)
        return self._arrow_reads(reads)

    def _read_many_into(
        self, reads: list[tuple[int, int]], into: list[memoryview | None]
    ) -> list[bytes | memoryview]:
        return self._read_many(reads)  # (pyarrow's reads come in buffers of their own)

    @typed_failures
    def _arrow_reads(self, reads: list[tuple[int, int]]) -> list[bytes | memoryview]:
        wanted = [(off, length) for off, length in reads if length]
        if not wanted:
            return [b"" for _ in reads]
        self._opened()
        parts, counts = split_reads(wanted, SPLIT_READ_BYTES)
        got = iter(self._read_parts(parts))
        whole = iter([next(got) if k == 1 else _joined([next(got) for _ in range(k)]) for k in counts])
        return [next(whole) if length else b"" for _, length in reads]

    def _read_parts(self, parts: list[tuple[int, int]]) -> list[bytes | memoryview]:
        """The parts, all in flight at once: pyarrow's file sends one request per call, so each
        but the first goes to the :data:`ARROW_READS` pool (always, even from a task of a map
        that runs its own maps inline: these calls only wait on the store)."""
        if len(parts) == 1:
            return [self._file.read_at(*parts[0])]
        ahead = [pool(ARROW_READS).submit(self._file.read_at, *part) for part in parts[1:]]
        try:
            first = self._file.read_at(*parts[0])
            return [first, *(f.result() for f in ahead)]
        finally:
            for f in ahead:
                f.cancel()
            wait(ahead)


class _DirectS3Source(_FsspecSource):
    """A data file on S3 whose byte ranges are plain signed GETs (see :mod:`.s3_direct`): no
    request pipeline of botocore's, no event loop to hand each read to. A read the direct client
    cannot make goes through s3fs; so do size checks on failure."""

    def __init__(self, fs: Any, direct: DirectS3, path: str, size: int | None, name: str) -> None:
        super().__init__(fs, path, size, name)
        self._direct = direct
        self._bucket, _, self._key = path.partition("/")

    def _fetch(
        self, reads: list[tuple[int, int]], places: list[memoryview | None] | None = None
    ) -> list[bytes | memoryview]:
        """The reads as signed GETs (``places``: see :meth:`_RangedSource._read_many_into`)."""
        if not self._direct.usable:
            return super()._fetch(reads)
        if len(reads) == 1 and 0 < reads[0][1] <= SPLIT_READ_BYTES:  # most reads: one GET
            try:
                if places is None or places[0] is None:
                    return [self._get(*reads[0])]
                return self._direct.get_ranges(self._bucket, self._key, reads, self._name, places)
            except DirectReadFailed:
                return super()._fetch(reads)
        given = [None] * len(reads) if places is None else places
        wanted = [(off, length) for off, length in reads if length]  # S3 refuses empty ranges
        wanted_places = [place for (_, length), place in zip(reads, given) if length]
        parts, counts = split_reads(wanted, SPLIT_READ_BYTES)
        # a read in parts: each part is received straight into its place in the read's buffer
        # (the caller's where given)
        into: list[memoryview | None] = []
        buffers: list[memoryview | None] = []
        at = 0
        for (off, length), k, place in zip(wanted, counts, wanted_places):
            if k == 1:
                into.append(place)
                buffers.append(None)
            else:
                whole = memoryview(reusable(length)) if place is None else place  # type: ignore[arg-type]
                buffers.append(whole)
                into.extend(whole[p - off : p - off + n] for p, n in parts[at : at + k])
            at += k
        try:
            got = iter(zip(self._read_parts(parts, into), into))
        except DirectReadFailed:
            return super()._fetch(reads)
        whole_reads: list[bytes | memoryview] = []
        for k, buffer in zip(counts, buffers):
            if buffer is None:
                whole_reads.append(next(got)[0])
                continue
            filled, short = 0, False  # the bytes received of the read, up to a part cut short
            for data, place in itertools.islice(got, k):
                assert place is not None
                if short:
                    continue
                if data is not place:  # (an answer that was not received in place)
                    place[: len(data)] = data
                filled += len(data)
                # a part cut short (the object ends before the size read): the read ends there, so
                # that the short read is reported as for a read of one GET (a CorruptFileError)
                short = len(data) != len(place)
            whole_reads.append(buffer[:filled] if short else buffer)
        done = iter(whole_reads)
        return [next(done) if length else b"" for _, length in reads]

    def _get(self, off: int, length: int) -> bytes | memoryview:
        return self._direct.get_range(self._bucket, self._key, off, off + length, self._name)

    def _read_parts(
        self, parts: list[tuple[int, int]], into: list[memoryview | None]
    ) -> list[bytes | memoryview]:
        """The parts, all in flight at once, sent and received by this thread (no pool: see
        :meth:`DirectS3.get_ranges`), each into its buffer in ``into`` where one is given; a
        read of more than :data:`BYTES_PER_RECEIVER` bytes by this thread and by threads of the
        :data:`ARROW_READS` pool, each receiving that many."""
        if len(parts) < 2:
            return [self._get(*part) for part in parts]
        lengths = [n for _, n in parts]
        # (never more groups than requests in flight: each group has one at least)
        groups = receiver_groups(
            lengths, max(BYTES_PER_RECEIVER, -(-sum(lengths) // s3_direct.MAX_IN_FLIGHT))
        )

        def fetch(lo: int, hi: int) -> list[bytes | memoryview]:
            return self._direct.get_ranges(
                self._bucket, self._key, parts[lo:hi], self._name, into[lo:hi], len(groups)
            )

        if len(groups) == 1:
            return fetch(*groups[0])
        ahead = [pool(ARROW_READS).submit(fetch, lo, hi) for lo, hi in groups[1:]]
        try:
            first = fetch(*groups[0])
            return [*first, *(got for f in ahead for got in f.result())]
        finally:
            for f in ahead:
                f.cancel()
            wait(ahead)


def receiver_groups(lengths: list[int], limit: int) -> list[tuple[int, int]]:
    """Consecutive parts ``[lo, hi)`` of a read, of about ``limit`` bytes each (the last of a
    group is the one that reaches it): one thread receives each group's parts."""
    groups: list[tuple[int, int]] = []
    lo, total = 0, 0
    for i, n in enumerate(lengths):
        total += n
        if total >= limit:
            groups.append((lo, i + 1))
            lo, total = i + 1, 0
    if lo < len(lengths):
        groups.append((lo, len(lengths)))
    return groups


def _joined(parts: Sequence[bytes | memoryview]) -> memoryview:
    """The parts of one read end to end, in memory of Arrow's pool (see ``DirectS3.get_range``)."""
    out = memoryview(empty(sum(len(p) for p in parts), np.uint8))  # type: ignore[arg-type]
    at = 0
    for part in parts:
        out[at : at + len(part)] = part
        at += len(part)
    return out
