"""Access to the buffers of one page: whole, decompressed, or only the byte runs a selection needs."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._parallel import IO, cached_per_instance, start_on
from lance_table.errors import CorruptFileError
from lance_table.file.compression import general
from lance_table.file.runs import Runs
from lance_table.storage.sources import ByteSource, read_joined

#: After decoding pages of at least this many bytes, together, since it last did, a thread asks
#: Arrow's allocator to give back what it freed: it keeps freed blocks per thread for a while, so
#: the scratch of the big pages of a whole-table read would otherwise add up beside the table
#: being built. Not after every page: memory given back is faulted in again by the next read (a
#: projection of one 2.4 MB page paid 187 page faults and about 1.2 ms of its 5.2 ms for it), and
#: a thread's scratch is reused by its next pages up to about this many bytes.
RELEASE_BYTES = 4 << 20
#: pages of fewer bytes than this are not counted (their scratch is reused as it is freed)
COUNTED_PAGE_BYTES = 1 << 20
_DECODED = threading.local()  # .held: the bytes of the pages a thread decoded since it gave back

BUFFER_PAGE = 0
BUFFER_COLUMN = 1
BUFFER_FILE = 2


class PageIO:
    """The buffers of one page (and its column's and the file's global buffers)."""

    def __init__(
        self,
        source: ByteSource,
        page: Any,
        column: Any,
        global_buffers: tuple[tuple[int, int], ...],
        what: str,
        *,
        whole_page: bool = False,
        buffers: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        self.whole_page = whole_page
        self.source = source
        #: only some of the rows decoded from the page are kept (see ``page_select.page_reads``)
        self.filtered = False
        self.page = page
        self.column = column
        self.global_buffers = global_buffers
        self.what = what
        #: whether the decoder checked the strings it returns (a dictionary page: its dictionary)
        self.strings_checked = False
        if buffers is not None:
            self.__dict__["buffers"] = buffers  # else read from the page when first asked
        self._whole: dict[tuple[int, int], memoryview] = {}
        #: the buffers in ``_whole`` read by this page alone into memory of their own, which its
        #: decoder may overwrite (see :meth:`take_owned`)
        self._owned: set[tuple[int, int]] = set()
        self._inflated: dict[tuple[int, int], memoryview] = {}
        #: the page's buffers being fetched on another thread (see :meth:`fetch_ahead`)
        self._fetching: Future[None] | None = None

    @property
    def path(self) -> str:
        return self.source.name

    @cached_per_instance
    def buffers(self) -> tuple[tuple[int, int], ...]:
        """The page's buffers as ``(file offset, size)`` pairs (given by the caller, who may keep
        them from page to page, or read from the page's description when first asked)."""
        return buffers_of(self.page)

    def corrupt(self, problem: str) -> CorruptFileError:
        return CorruptFileError(self.source.name, f"{self.what}: {problem}")

    def locate(self, index: int, kind: int = BUFFER_PAGE) -> tuple[int, int]:
        """File offset and size of a buffer."""
        if kind == BUFFER_PAGE:
            if index >= len(self.buffers):
                raise self.corrupt(f"buffer {index} does not exist (the page has {len(self.buffers)})")
            return self.buffers[index]
        if kind == BUFFER_COLUMN:
            offsets, sizes = self.column.buffer_offsets, self.column.buffer_sizes
        elif kind == BUFFER_FILE:
            pairs = self.global_buffers
            if index >= len(pairs):
                raise self.corrupt(f"global buffer {index} does not exist")
            return pairs[index]
        else:
            raise self.corrupt(f"unknown buffer type {kind}")
        if index >= len(offsets):
            raise self.corrupt(f"buffer {index} does not exist (the page has {len(offsets)})")
        return int(offsets[index]), int(sizes[index])

    def max_items(self) -> int:
        """The most dictionary items the page can hold: one per value (and a null item), or more
        only when they are stored, at one bit each at least."""
        stored = sum(size for _, size in self.buffers)
        return max(int(self.page.length) + 1, 8 * stored)

    def prefetch(self) -> None:
        """Fetch every page buffer in one coalesced request (used when the whole page is needed)."""
        fetch_buffers([(self, k) for k in range(len(self.buffers))])

    def fetch_ahead(self, fetching: Future[None]) -> None:
        """Say that :meth:`prefetch` runs on another thread (``fetching``): reads of the page's
        buffers wait for it (and see its error) instead of sending their own requests."""
        self._fetching = fetching

    def _fetched(self) -> None:
        fetching = self._fetching
        if fetching is not None:
            self._fetching = None
            if not fetching.cancelled():
                fetching.result()

    def release(self) -> None:
        """Drop the buffers read (and inflated) so far, once the page is decoded: a whole-table
        read then holds the raw bytes of the pages being decoded, not of every page of its range.
        Decoded arrays that still view them keep them alive themselves."""
        if not self._whole:
            self._inflated.clear()
            return
        held = sum(len(data) for data in self._whole.values())
        self._whole.clear()
        self._owned.clear()
        self._inflated.clear()
        if held >= COUNTED_PAGE_BYTES:
            held += getattr(_DECODED, "held", 0)
            if held >= RELEASE_BYTES:
                pa.default_memory_pool().release_unused()
                held = 0
            _DECODED.held = held

    def whole(self, index: int, kind: int = BUFFER_PAGE) -> memoryview:
        self._fetched()
        buffers = self.buffers
        key = buffers[index] if kind == BUFFER_PAGE and index < len(buffers) else self.locate(index, kind)
        data = self._whole.get(key)
        if data is None and self.whole_page and not self._whole and kind == BUFFER_PAGE:
            self.prefetch()  # every buffer of a page needed whole, in one request
            data = self._whole.get(key)
        if data is None:
            data = self.source.read_ranges([key])[0]
            self._whole[key] = data
            if getattr(self.source, "fresh_reads", False):
                self._owned.add(key)
        return data

    def take_owned(self, data: bytes | memoryview, index: int = 1) -> bool:
        """Whether the decoder may overwrite ``data``, the buffer ``index`` of the page as
        :meth:`whole` gave it: this page read it into memory that nothing else holds (a remote
        source's fresh buffer: not a file map, not bytes kept by the reader) and it overlaps no
        other buffer of the page. If so, the page forgets it (a later :meth:`whole` reads it
        again), and the decoder may keep its memory for the values it decodes (e.g. the values
        of a page's chunks joined where they lie: :func:`~lance_table.file.v2_1.byteranges.join_in_place`)."""
        if index >= len(self.buffers):
            return False
        key = self.buffers[index]
        if key not in self._owned or self._whole.get(key) is not data:
            return False
        if isinstance(data, memoryview) and data.readonly:
            return False
        off, size = key
        if any(o < off + size and off < o + n for k, (o, n) in enumerate(self.buffers) if k != index and n):
            return False
        self._owned.discard(key)
        del self._whole[key]
        return True

    def byte_runs(self, index: int, runs: Runs, kind: int = BUFFER_PAGE) -> bytes | memoryview:
        """The bytes of ``runs`` (byte positions inside the buffer), concatenated."""
        offset, size = self.locate(index, kind)
        if runs.count and runs.end > size:
            raise self.corrupt(f"needs bytes up to {runs.end} of a buffer of {size} bytes")
        if not runs.count:
            return b""
        self._fetched()
        if self.whole_page and not self._whole:
            self.prefetch()
        cached = self._whole.get((offset, size))
        if cached is not None or runs.is_span(0, size):
            data = cached if cached is not None else self.whole(index, kind)
            if runs.count == 1:
                s = int(runs.starts[0])
                return data[s : s + int(runs.lengths[0])]
            return b"".join(data[s : s + n] for s, n in zip(runs.starts.tolist(), runs.lengths.tolist()))
        return read_joined(self.source, np.stack([runs.starts + offset, runs.lengths], axis=1))

    def decompressed(
        self, index: int, scheme: str, expected: int | None, kind: int = BUFFER_PAGE
    ) -> memoryview:
        """A whole buffer after general-purpose decompression (``zstd`` or ``lz4``)."""
        key = self.locate(index, kind)
        hit = self._inflated.get(key)
        if hit is None:
            hit = general.decompress(self.whole(index, kind), scheme, expected, self)
            self._inflated[key] = hit
        return hit


def buffers_of(page: Any) -> tuple[tuple[int, int], ...]:
    """A page's buffers (from its protobuf description) as ``(file offset, size)`` pairs."""
    return tuple(zip(page.buffer_offsets[:], page.buffer_sizes[:]))  # (slices: one list each, at once)


#: Buffers this close together (and at most :data:`SPAN_MAX_RANGES` of them) are read as the one
#: range that spans them, sliced here: less than either kind of source leaves between the ranges it
#: merges into one read, so no more bytes are read than the source would read.
SPAN_GAP = 4096
SPAN_MAX_RANGES = 64


def fetch_ahead(pages: list[PageIO]) -> list[Future[None]]:
    """Start fetching, on the I/O pool, every one of ``pages`` (of a remote file) read whole whose
    buffers are not in hand: all at once (at most the pool's threads in flight), while the pages
    that came in are decoded; the decoding workers would otherwise each wait for one page's
    request after another. Returns the fetches, for the caller to :func:`settle`."""
    wanted = [io for io in pages if io.whole_page and not io._whole and io._fetching is None and io.buffers]
    started = start_on(IO, [io.prefetch for io in wanted])
    for io, fetching in zip(wanted, started):
        io.fetch_ahead(fetching)
    return started


def fetch_buffers(wanted: list[tuple[PageIO, int]]) -> None:
    """Read the buffers ``(page, index)`` of pages of one source in one coalesced request, so that
    each page then finds them in hand (a take reads a few small buffers of many pages)."""
    keys = [(io, io.locate(index)) for io, index in wanted]
    keys = [(io, key) for io, key in keys if key not in io._whole]
    if not keys:
        return
    ranges = sorted({key for _, key in keys})
    source = keys[0][0].source
    got = _spanned(source, ranges) if len(ranges) <= SPAN_MAX_RANGES else None
    if got is None:
        got = dict(zip(ranges, source.read_ranges(ranges)))
    # (buffers that overlap one another share memory: none of them is a page's own)
    fresh = getattr(source, "fresh_reads", False) and all(a + n <= b for (a, n), (b, _) in pairwise(ranges))
    for io, key in keys:
        io._whole[key] = got[key]
        if fresh:
            io._owned.add(key)


def _spanned(source: ByteSource, ranges: list[tuple[int, int]]) -> dict[tuple[int, int], memoryview] | None:
    """The sorted ``ranges`` read as the one range that spans them, when no gap between them is
    wider than :data:`SPAN_GAP` (a small file's pages, one after another); else None."""
    end = ranges[0][0]
    for offset, size in ranges:
        if offset - end > SPAN_GAP or offset < 0 or size < 0:
            return None
        end = max(end, offset + size)
    start = ranges[0][0]
    (data,) = source.read_ranges([(start, end - start)])
    return {(offset, size): data[offset - start : offset - start + size] for offset, size in ranges}


def bits_runs(where: PageIO, index: int, runs: Runs, kind: int = BUFFER_PAGE) -> np.ndarray:
    """The selected bits of an LSB-first bitmap buffer, as a bool array."""
    if not runs.count:
        return np.zeros(0, bool)
    first_byte = runs.starts // 8
    last_byte = (runs.starts + runs.lengths + 7) // 8
    seg_len = last_byte - first_byte
    # Neighbouring runs may share a byte; each run still gets its own copy of it.
    data = where.byte_runs(index, Runs(first_byte, seg_len), kind)
    bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
    seg_bit_start = np.concatenate([[0], np.cumsum(seg_len)[:-1]]) * 8
    if runs.count == 1:
        s = int(runs.starts[0] % 8)
        return bits[s : s + int(runs.lengths[0])].astype(bool)
    sel = Runs(seg_bit_start + runs.starts % 8, runs.lengths).positions()
    return bits[sel].astype(bool)
