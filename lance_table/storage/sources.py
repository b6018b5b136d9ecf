"""Byte sources for the file reader: read many byte ranges of one file in as few requests as possible.

The reader never asks for a whole file. It asks a :class:`ByteSource` for lists of ``(offset, length)``
ranges; the source merges ranges that are close together into one request and hands back each
requested range as a zero-copy slice of the merged read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from itertools import pairwise
from typing import IO, Protocol, runtime_checkable

import numpy as np

from lance_table._buffers import REUSED_BYTES, empty, reusable
from lance_table.errors import CorruptFileError
from lance_table.storage.io_stats import record
from lance_table.storage.ranges import (
    DEFAULT_COALESCE_GAP,
    SMALL_RANGE,
    coalesce,
    gather,
    merge_sorted,
    range_pairs,
)

# Local files: merge only reads that share a few pages of the OS page cache.
LOCAL_COALESCE_GAP = 8 * 1024


@runtime_checkable
class ByteSource(Protocol):
    """What the reader needs from storage: a name, a size and ranged reads.

    Example:
        ```python
        from lance_table.file import ByteSource, BytesSource

        source = BytesSource(b"0123456789", name="digits")
        assert isinstance(source, ByteSource)
        print([bytes(b) for b in source.read_ranges([(0, 2), (8, 2)])])
        ```
    """

    @property
    def name(self) -> str:
        """The path or URI that errors name."""
        ...

    def size(self) -> int:
        """The size in bytes."""
        ...

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes of each ``(offset, length)`` range, in order."""
        ...


def read_spans(
    source: ByteSource, starts: np.ndarray, ends: np.ndarray
) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """Ranges ``[starts, ends)`` of ``source`` (sorted, not overlapping) read as spans: ranges at
    most the source's coalescing gap apart are read together with the bytes between them (which
    the source would fetch anyway), one span after another in one buffer; and where each range
    starts and ends in that buffer. A take of many scattered chunks is so a few reads rather
    than one per chunk, planned here once for local and remote sources alike."""
    if not starts.size:
        return memoryview(b""), starts, ends
    lo, hi, owner = merge_sorted(starts, ends, int(getattr(source, "coalesce_gap", 0)))
    data = read_joined(source, np.stack([lo, hi - lo], axis=1))
    at = np.zeros(lo.size, np.int64)
    np.cumsum((hi - lo)[:-1], out=at[1:])
    shift = (at - lo)[owner]
    return data, starts + shift, ends + shift


DISAGREEING_SIZE = "the manifest and the file disagree about its size"


def size_disagreement(name: str, claimed: int, actual: int) -> CorruptFileError:
    """The error for a file whose size is not the one its manifest (``file_size_bytes``) gives."""
    return CorruptFileError(
        name, f"{DISAGREEING_SIZE}: the manifest gives {claimed} bytes (file_size_bytes), the file {actual}"
    )


class _RangedSource:
    """Shared logic: validate ranges against the size, coalesce, slice."""

    _name: str
    coalesce_gap: int = DEFAULT_COALESCE_GAP
    #: whether each read hands out memory of its own that nothing else holds (a remote read's
    #: buffer; not a file map, not bytes held here): a writable one may be overwritten by the
    #: page that read it (see ``PageIO.take_owned``)
    fresh_reads: bool = False

    @property
    def name(self) -> str:
        """The path or URI that errors name."""
        return self._name

    def size(self) -> int:  # pragma: no cover - overridden
        """The size in bytes."""
        raise NotImplementedError

    def _read(self, offset: int, length: int) -> bytes | memoryview:  # pragma: no cover - overridden
        raise NotImplementedError

    def _read_many(self, reads: list[tuple[int, int]]) -> list[bytes | memoryview]:
        """The merged reads, in order (one after another here; remote sources fetch them at once)."""
        return [self._read(off, length) for off, length in reads]

    def _read_many_into(
        self, reads: list[tuple[int, int]], into: list[memoryview | None]
    ) -> list[bytes | memoryview]:
        """As :meth:`_read_many`; ``into``: for each read, a buffer of its length that a source
        may receive it into (the read is then that very buffer), or None. Here: none is used."""
        return self._read_many(reads)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes of each ``(offset, length)`` range, in order."""
        return self._read_ranges(ranges, None)

    def _read_ranges(
        self, ranges: Sequence[tuple[int, int]], into: Sequence[memoryview | None] | None
    ) -> list[memoryview]:
        """:meth:`read_ranges`; ``into``: for each range, None or a buffer of its length that
        its bytes are put in (the range's view is then that buffer): a merged read of that range
        alone is received straight into it where the source can, others are copied there."""
        size = self.size()
        if len(ranges) == 1:  # most metadata reads: no merging to plan
            off, length = (int(v) for v in ranges[0])
            if off < 0 or length < 0 or off + length > size:
                raise self._outside(off, length)
            dest = None if into is None else into[0]
            if dest is None:
                (data,) = self._read_many([(off, length)])
            else:
                (data,) = self._read_many_into([(off, length)], [dest])
            record(1, len(data))
            return [_placed(self._checked(off, length, data), dest)]
        arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        outside = (arr[:, 0] < 0) | (arr[:, 1] < 0) | (arr[:, 0] + arr[:, 1] > size)
        if bool(outside.any()):
            raise self._outside(*arr[int(np.argmax(outside))].tolist())
        merged, which, inner = coalesce(arr, self.coalesce_gap)
        which_l, inner_l, lengths = which.tolist(), inner.tolist(), arr[:, 1].tolist()
        if into is None:
            got = self._read_many(merged)
        else:
            alone = np.bincount(which, minlength=len(merged)) == 1
            places: list[memoryview | None] = [None] * len(merged)
            for w, dest in zip(which_l, into):
                if dest is not None and alone[w] and len(dest) == merged[w][1]:
                    places[w] = dest  # the merged read is this range: received in its place
            got = self._read_many_into(merged, places)
        record(len(merged), sum(len(data) for data in got))
        blobs = [self._checked(off, n, data) for (off, n), data in zip(merged, got)]
        views = [blobs[w][i : i + n] for w, i, n in zip(which_l, inner_l, lengths)]
        if into is None:
            return views
        return [
            view if dest is None else dest if blobs[w] is dest else _placed(view, dest)
            for view, dest, w in zip(views, into, which_l)
        ]

    def _outside(self, off: int, length: int) -> CorruptFileError:
        return CorruptFileError(
            self._name, f"byte range [{off}, {off + length}) lies outside the file of {self.size()} bytes"
        )

    def _checked(self, off: int, length: int, data: bytes | memoryview) -> memoryview:
        """``data`` read at ``off`` as a view, if it is as long as asked."""
        if len(data) != length:
            raise CorruptFileError(
                self._name, f"short read: wanted {length} bytes, got {len(data)}", offset=off
            )
        return data if isinstance(data, memoryview) else memoryview(data)


class LocalFileSource(_RangedSource):
    """A local file read with ``os.preadv`` (thread-safe, no shared file position).

    The file is open only while a read runs, so that any number of sources (a scan of thousands
    of fragments, a cache of readers) holds no file descriptors between reads.

    Example:
        ```python
        from lance_table.file import LocalFileSource, write_table

        write_table(f"{tmp}/l.lance", table)
        print(LocalFileSource(f"{tmp}/l.lance").size())
        ```
    """

    coalesce_gap = LOCAL_COALESCE_GAP

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._name = os.fspath(path)
        self._size = os.stat(self._name).st_size

    def size(self) -> int:
        """The size in bytes."""
        return self._size

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes of each ``(offset, length)`` range, in order."""
        if not ranges:
            return []
        fd = os.open(self._name, _READ_FLAGS)
        try:
            if len(ranges) == 1:  # (most reads of small files: one call, without the planning)
                off, length = ranges[0]
                if off >= 0 and 0 <= length < _BIG_READ and off + length <= self._size:
                    data = os.pread(fd, length, off)
                    if len(data) == length:
                        record(1, length)
                        return [memoryview(data)]
            return _LocalRead(self._name, self._size, fd).read_ranges(ranges)
        finally:
            os.close(fd)

    def read_joined(self, ranges: Sequence[tuple[int, int]] | np.ndarray) -> memoryview:
        """The bytes of ``ranges``, one after another in one buffer (see :func:`read_joined`).

        Ranges in file order are read straight into that buffer, with one ``preadv`` for each
        run of ranges less than the coalescing gap apart (the gaps land in a scratch buffer).
        """
        arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        if arr.shape[0] < 2 or bool(np.any(arr[1:, 0] < arr[:-1, 0] + arr[:-1, 1])):
            return _joined(self.read_ranges(range_pairs(arr)))  # one range, or ranges out of file order
        starts, lengths = arr[:, 0], arr[:, 1]
        outside = (starts < 0) | (lengths < 0) | (starts + lengths > self._size)
        if bool(outside.any()):
            raise self._outside(*arr[int(np.argmax(outside))].tolist())
        fd = os.open(self._name, _READ_FLAGS)
        try:
            return _LocalRead(self._name, self._size, fd).read_sorted(starts, lengths)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Nothing to release: the file is open only during a read (kept for callers that close)."""


#: how a local file is opened for reading
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)
# Ranges one preadv call reads at most: with a scratch buffer for each gap between them, under
# the 1024 buffers Linux allows a call.
_MAX_IOV = 512
# Reads from this size on go into a fresh numpy buffer: ``os.pread`` builds a bytes object that
# costs twice the time for a read of tens of MiB.
_BIG_READ = 1 << 20


def _read_buffer(n: int) -> np.ndarray:
    """A writable buffer of ``n`` bytes for a local read: one of the buffers
    :func:`~lance_table._buffers.reusable` keeps when it is large, else from Arrow's pool.

    The bytes read often become the memory of the values decoded from them (plain values, the
    values of a 2.0 file), which the caller holds while it works on them: Spark's Python worker
    while it writes a batch to the JVM, a scan's consumer. Arrow's pool hands freed memory back
    to the system within milliseconds, so that after every such pause the next read's buffer was
    mapped afresh and the kernel cleared each of its pages as it was first written (in-process
    Spark task reads of 2M rows in 8 files of 2.0: 8,700 page faults a read, 1,080 with kept
    buffers, and 15-35% less CPU). A kept buffer is handed out again only once nothing views it."""
    return reusable(n) if n >= REUSED_BYTES else empty(n, np.uint8)


class _LocalRead(_RangedSource):
    """One read of a :class:`LocalFileSource`, on a descriptor it opened."""

    coalesce_gap = LOCAL_COALESCE_GAP

    def __init__(self, name: str, size: int, fd: int) -> None:
        self._name = name
        self._size = size
        self._fd = fd

    def size(self) -> int:
        """The size in bytes."""
        return self._size

    def _read_many(self, reads: list[tuple[int, int]]) -> list[bytes | memoryview]:
        """The merged reads, each read into its part of one buffer (no allocation per read)."""
        if len(reads) == 1 and reads[0][1] < _BIG_READ:
            return [self._read(*reads[0])]
        total = sum(n for _, n in reads)
        view = memoryview(_read_buffer(total))  # type: ignore[arg-type]
        out: list[bytes | memoryview] = []
        at = 0
        for off, n in reads:
            part = view[at : at + n]
            at += n
            got = os.preadv(self._fd, [part], off) if n else 0
            out.append(part if got == n else part[: self._fill(part, got, off)])
        return out

    def _fill(self, part: memoryview, done: int, offset: int) -> int:
        """Go on reading into ``part`` after a short read of ``done`` bytes; how many it holds."""
        while 0 < done < len(part):
            got = os.preadv(self._fd, [part[done:]], offset + done)
            if got <= 0:
                break
            done += got
        return max(done, 0)

    def _read(self, offset: int, length: int) -> bytes | memoryview:
        first = os.pread(self._fd, length, offset)  # one call: most reads are small and complete
        if len(first) == length or not first:
            return first
        out = np.empty(length, np.uint8)  # not zero-filled: the kernel writes every byte
        view = memoryview(out)  # type: ignore[arg-type]
        view[: len(first)] = first
        return view[: self._fill(view, len(first), offset)]

    def read_sorted(self, starts: np.ndarray, lengths: np.ndarray) -> memoryview:
        """Ranges in file order, checked to lie in the file, read one after another into one buffer."""
        at = np.zeros(starts.size + 1, np.int64)
        np.cumsum(lengths, out=at[1:])
        gaps = np.zeros(starts.size, np.int64)
        gaps[1:] = starts[1:] - (starts[:-1] + lengths[:-1])
        new_read = gaps > self.coalesce_gap
        new_read[0] = True
        if int(at[-1]) <= SMALL_RANGE * starts.size and not bool(new_read.all()):
            return self._read_gathered(starts, lengths, at)
        view = memoryview(_read_buffer(int(at[-1])))  # type: ignore[arg-type]
        new_read[np.arange(starts.size) % _MAX_IOV == 0] = True  # keep each call under the iovec limit
        scratch = memoryview(bytearray(self.coalesce_gap)) if self.coalesce_gap else memoryview(b"")
        firsts = np.flatnonzero(new_read).tolist()
        bounds = [*firsts, int(starts.size)]
        at_l, starts_l, lengths_l, gaps_l = at.tolist(), starts.tolist(), lengths.tolist(), gaps.tolist()
        record(len(firsts), int(starts[-1] + lengths[-1] - starts[0]) - _skipped(gaps, new_read))
        if len(firsts) == starts.size:  # no two ranges merged (a take's scattered chunks)
            self._read_each(view, at_l, starts_l)
            return view
        for lo, hi in pairwise(bounds):
            if hi - lo == 1:
                bufs = [view[at_l[lo] : at_l[lo + 1]]]
            else:
                bufs = []
                for k in range(lo, hi):
                    if k > lo and gaps_l[k]:
                        bufs.append(scratch[: gaps_l[k]])
                    bufs.append(view[at_l[k] : at_l[k + 1]])
            want = starts_l[hi - 1] + lengths_l[hi - 1] - starts_l[lo]
            if not want:
                continue
            if os.preadv(self._fd, bufs, starts_l[lo]) != want:  # short: read range by range
                for k in range(lo, hi):
                    part = view[at_l[k] : at_l[k + 1]]
                    got = self._checked(starts_l[k], lengths_l[k], self._read(starts_l[k], lengths_l[k]))
                    part[:] = got
        return view

    def _read_gathered(self, starts: np.ndarray, lengths: np.ndarray, at: np.ndarray) -> memoryview:
        """Many small ranges (a take's values): each merged span read whole with one ``preadv``,
        and the ranges' bytes gathered from the spans by one numpy take (no Python per range)."""
        lo, hi, owner = merge_sorted(starts, starts + lengths, self.coalesce_gap)
        span_at = np.zeros(lo.size + 1, np.int64)
        np.cumsum(hi - lo, out=span_at[1:])
        spans = np.empty(int(span_at[-1]), np.uint8)
        record(lo.size, int(span_at[-1]))
        self._read_each(memoryview(spans), span_at.tolist(), lo.tolist())  # type: ignore[arg-type]
        inside = starts - lo[owner] + span_at[owner]  # where each range starts in the spans
        return gather(memoryview(spans), inside, lengths)  # type: ignore[arg-type]

    def _read_each(self, view: memoryview, at: list[int], starts: list[int]) -> None:
        """Range ``k`` (at file offset ``starts[k]``) read into ``view[at[k] : at[k + 1]]``, one
        ``preadv`` each and nothing else per range (a short read is completed range by range)."""
        fd, preadv = self._fd, os.preadv
        for off, a, b in zip(starts, at, at[1:]):
            if b > a and preadv(fd, [view[a:b]], off) != b - a:
                view[a:b] = self._checked(off, b - a, self._read(off, b - a))


def _placed(data: memoryview, dest: memoryview | None) -> memoryview:
    """``dest`` holding ``data`` (a copy unless ``data`` is ``dest`` itself), or ``data`` without
    a ``dest``."""
    if dest is None or data is dest:
        return data if dest is None else dest
    dest[:] = data
    return dest


def _skipped(gaps: np.ndarray, new_read: np.ndarray) -> int:
    """The bytes of the gaps between ranges that are not read (those before each new read)."""
    return int(gaps[new_read].sum())


def _joined(parts: list[memoryview]) -> memoryview:
    return parts[0] if len(parts) == 1 else memoryview(b"".join(parts))


def read_joined(source: ByteSource, ranges: Sequence[tuple[int, int]] | np.ndarray) -> memoryview:
    """The bytes of ``ranges`` of ``source``, one after another in one buffer.

    Sources with a ``read_joined`` method read them straight into that buffer; others have their
    ``read_ranges`` joined.
    """
    if len(ranges) == 0:
        return memoryview(b"")
    direct = getattr(source, "read_joined", None)
    if direct is not None:
        return direct(ranges)
    return _joined(source.read_ranges(range_pairs(ranges) if isinstance(ranges, np.ndarray) else ranges))


class FileObjectSource(_RangedSource):
    """Any seekable binary file object (an fsspec file, ``io.BytesIO``, an open local file).

    Example:
        ```python
        from lance_table.file import FileObjectSource, write_table

        write_table(f"{tmp}/o.lance", table)
        with open(f"{tmp}/o.lance", "rb") as f:
            source = FileObjectSource(f)
            print(source.size(), bytes(source.read_ranges([(0, 4)])[0]))
        ```
    """

    def __init__(self, fobj: IO[bytes], name: str | None = None, size: int | None = None) -> None:
        self._f = fobj
        self._name = name or str(getattr(fobj, "path", None) or getattr(fobj, "name", None) or "<stream>")
        self._lock = threading.Lock()
        if size is None:
            fsize = getattr(fobj, "size", None)
            if isinstance(fsize, int):
                size = fsize
            else:
                with self._lock:
                    pos = fobj.tell()
                    size = fobj.seek(0, os.SEEK_END)
                    fobj.seek(pos)
        self._size = int(size)

    def size(self) -> int:
        """The size in bytes."""
        return self._size

    def _read(self, offset: int, length: int) -> bytes:
        with self._lock:
            self._f.seek(offset)
            return self._f.read(length)


class BytesSource(_RangedSource):
    """An in-memory file.

    Example:
        ```python
        from lance_table.file import BytesSource, write_table
        from lance_table.file.reader import LanceFileReader as FileReader

        write_table(f"{tmp}/b.lance", table)
        with open(f"{tmp}/b.lance", "rb") as f:
            reader = FileReader(BytesSource(f.read(), name="b.lance"))
        ```
    """

    def __init__(self, data: bytes | bytearray | memoryview, name: str = "<memory>") -> None:
        self._data = memoryview(data).cast("B")
        self._name = name

    def size(self) -> int:
        """The size in bytes."""
        return len(self._data)

    @property
    def data(self) -> memoryview:
        """The file's bytes."""
        return self._data

    def _read(self, offset: int, length: int) -> bytes:
        return self._data[offset : offset + length]  # type: ignore[return-value]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes of each ``(offset, length)`` range, in order."""
        size = len(self._data)
        for off, length in ranges:
            if off < 0 or length < 0 or off + length > size:
                raise CorruptFileError(
                    self._name, f"byte range [{off}, {off + length}) lies outside the file of {size} bytes"
                )
        return [self._data[off : off + length] for off, length in ranges]


def in_memory_if_small(source: ByteSource, limit: int) -> ByteSource:
    """``source``, or the whole file read into memory (one request) when it has at most ``limit``
    bytes: the reader of a small file needs its footer region, which is most of the file, and
    then its data, which a remote store would otherwise answer with another request each time."""
    if isinstance(source, BytesSource):
        return source
    size = source.size()
    if not 0 < size <= limit:
        return source
    return BytesSource(source.read_ranges([(0, size)])[0], source.name)


def open_source(source: str | os.PathLike[str] | IO[bytes] | ByteSource | bytes) -> ByteSource:
    """Turn what a caller passed into a :class:`ByteSource`."""
    if isinstance(source, _RangedSource):  # every storage's sources (a protocol check costs more)
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        return BytesSource(source)
    if isinstance(source, (str, os.PathLike)):
        return LocalFileSource(source)
    if isinstance(source, ByteSource):
        return source
    if hasattr(source, "read") and hasattr(source, "seek"):
        return FileObjectSource(source)
    raise TypeError(f"cannot read a Lance file from {type(source).__name__}")
