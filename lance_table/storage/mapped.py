"""A local file read through a memory map, for scans and for reads that keep only some of the rows
they decode.

A scan of a fragment with rows deleted here and there decodes each page and copies its kept rows
out. Read with ``preadv``, every byte is copied twice: from the OS page cache into a buffer, then
the kept rows out of it. Read through a map of the file, the kept rows are copied once, straight
from the page cache, which costs about what the plain read of a clean page costs.

A scan of whole pages gains too: a page is decoded straight from the page cache, without first
being copied into a buffer. What the read returns must not view the map (a view would keep the
whole map, and every page of it read, alive): :meth:`MappedFileSource.owned` copies the arrays that
do (plain values, whose arrays view the bytes they were read as).

The map is made for one read and unmapped once nothing views it: the rows copied out of it do not.
Lance data files are never changed in place, so the mapped bytes stay valid while they are read.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError
from lance_table.storage.io_stats import record
from lance_table.storage.sources import LocalFileSource


class MappedFileSource:
    """The bytes of a local file, served as views of one read-only memory map of it."""

    def __init__(self, name: str, view: memoryview) -> None:
        self._name = name
        self._view = view

    @property
    def name(self) -> str:
        """The path that errors name."""
        return self._name

    def size(self) -> int:
        """The size in bytes."""
        return len(self._view)

    def array(self) -> np.ndarray:
        """The whole file as a read-only array of bytes viewing the map (which stays mapped until
        nothing views it). Reads out of it are not counted (see :func:`io_stats.record`): the
        caller counts what it copies."""
        return np.frombuffer(self._view, np.uint8)

    def _outside(self, off: int, length: int) -> CorruptFileError:
        return CorruptFileError(
            self._name, f"byte range [{off}, {off + length}) lies outside the file of {self.size()} bytes"
        )

    def owned(self, arrays: list[pa.Array]) -> list[pa.Array]:
        """``arrays``, each that views the map (a buffer of it, of a child or of a dictionary
        lies in the map) replaced by a copy; the others as they are."""
        start = np.frombuffer(self._view, np.uint8).ctypes.data if len(self._view) else 0
        end = start + len(self._view)
        return [_copied(a) if _views(a, start, end) else a for a in arrays]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes of each ``(offset, length)`` range, in order (views of the map).

        Raises:
            CorruptFileError: a range lies outside the file.
        """
        size = len(self._view)
        out = []
        for off, length in ranges:
            off, length = int(off), int(length)
            if off < 0 or length < 0 or off + length > size:
                raise self._outside(off, length)
            out.append(self._view[off : off + length])
        record(len(out), sum(len(v) for v in out))
        return out

    def read_joined(self, ranges: Sequence[tuple[int, int]] | np.ndarray) -> memoryview:
        """The bytes of ``ranges``, one after another: a view of the map for one range, else a copy.

        Raises:
            CorruptFileError: a range lies outside the file.
        """
        arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        parts = self.read_ranges(list(zip(arr[:, 0].tolist(), arr[:, 1].tolist())))
        if len(parts) == 1:
            return parts[0]
        return memoryview(b"".join(parts))


def _views(arr: pa.Array, start: int, end: int) -> bool:
    """Whether a buffer of ``arr``, of its children or of a dictionary in it lies in
    ``[start, end)``."""
    if any(b is not None and b.size and start <= b.address < end for b in arr.buffers()):
        return True
    return any(_views(d, start, end) for d in _dictionaries(arr))


def _dictionaries(arr: pa.Array) -> list[pa.Array]:
    """The dictionaries of ``arr`` and of its children (``buffers()`` leaves them out)."""
    if isinstance(arr, pa.ExtensionArray):
        return _dictionaries(arr.storage)
    if isinstance(arr, pa.DictionaryArray):
        return [arr.dictionary]
    t = arr.type
    if pa.types.is_struct(t):
        return [d for i in range(t.num_fields) for d in _dictionaries(arr.field(i))]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _dictionaries(arr.values)
    if pa.types.is_map(t):
        return _dictionaries(arr.keys) + _dictionaries(arr.items)
    return []


def _copied(arr: pa.Array) -> pa.Array:
    """A copy of ``arr`` in memory of its own: every buffer, its dictionaries' too (an IPC round
    trip; ``concat_arrays`` would keep a dictionary as it is)."""
    sink = pa.BufferOutputStream()
    batch = pa.record_batch([arr], names=["_"])
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return pa.ipc.open_stream(sink.getvalue()).read_next_batch().column(0)


def mapped(source: LocalFileSource) -> MappedFileSource | None:
    """``source``'s file mapped for reading, or None where it cannot be (an empty file, a file
    system without maps, a file of another size than when the source was opened)."""
    size = source.size()
    if not size:
        return None
    try:
        fd = os.open(source.name, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except OSError:
        return None
    try:
        data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if len(data) != size:
        data.close()
        return None
    return MappedFileSource(source.name, memoryview(data))


__all__ = ["MappedFileSource", "mapped"]
