"""One blob as a lazy, seekable, read-only binary file (pylance's ``BlobFile``), over a function
reading ranges of the file that holds it (see :mod:`lance_table.table.blobs`)."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

from lance_table.blob_values import DEFAULT_BLOB_BUFFER_SIZE
from lance_table.errors import BlobValueError, InputTypeError

# Reads ``length`` bytes at an absolute offset of the blob's file.
ReadAt = Callable[[int, int], bytes]


class BlobFile(io.RawIOBase):
    """One blob as a read-only, seekable binary file (like pylance's ``BlobFile``).

    Reads fetch only the bytes asked for; ``read_range`` / ``read_ranges`` do not move the cursor.

    Example:
        ```python
        blobs = pa.table(
            {"id": [1, 2], "image": pa.array([b"PNG...", b"GIF89a..."], pa.large_binary())},
            schema=pa.schema([
                pa.field("id", pa.int64()),
                pa.field("image", pa.large_binary(), metadata={"lance-encoding:blob": "true"}),
            ]),
        )
        images = lt.write_dataset(blobs, f"{tmp}/images")
        with images.take_blobs("image", indices=[1])[0] as f:  # a lazy, seekable file
            print(f.read(3))
        ```
    """

    def __init__(
        self,
        read_at: ReadAt,
        start: int,
        size: int,
        name: str,
        *,
        buffer_size: int = DEFAULT_BLOB_BUFFER_SIZE,
    ) -> None:
        super().__init__()
        # pylance's sequential read-ahead; lance_table reads what is asked, so only checked
        self.buffer_size = check_buffer_size(buffer_size)
        self._read_at = read_at
        self._start = start
        self._size = size
        self._pos = 0
        self.name = name

    def __repr__(self) -> str:
        return f"<BlobFile size={self._size}>"

    def size(self) -> int:
        """The blob's size in bytes."""
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence ({whence})")
        pos = base + offset
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def readinto(self, b: Any) -> int:
        """Read into the writable buffer ``b`` from the cursor; the number of bytes read (0 at the
        end).

        Raises:
            TypeError: ``b`` is read-only.
            ValueError: the file is closed.
        """
        view = memoryview(b).cast("B")
        if view.readonly:
            raise TypeError(
                f"readinto() argument must be read-write bytes-like object, not {type(b).__name__}"
            )
        self._check_open()
        n = max(0, min(len(view), self._size - self._pos))
        if n:
            view[:n] = self._read_at(self._start + self._pos, n)
            self._pos += n
        return n

    def read1(self, size: int = -1) -> bytes:
        """At most ``size`` bytes from the cursor with one read (pylance's ``read1``; a negative
        ``size`` reads up to ``io.DEFAULT_BUFFER_SIZE``).

        Raises:
            ValueError: the file is closed.
        """
        self._check_open()
        if size is None or size < 0:
            size = io.DEFAULT_BUFFER_SIZE
        return self.read(size) or b""

    def readinto1(self, buffer: Any) -> int:
        """:meth:`readinto` with one read, as pylance's ``readinto1``.

        Raises:
            TypeError: ``buffer`` is read-only.
            ValueError: the file is closed.
        """
        return self.readinto(buffer)

    def detach(self) -> None:
        """A blob file has no raw stream to hand out (as pylance's ``detach``).

        Raises:
            io.UnsupportedOperation: always.
        """
        raise io.UnsupportedOperation("detach")

    def readall(self) -> bytes:
        self._check_open()
        n = max(0, self._size - self._pos)
        data = self._read_at(self._start + self._pos, n) if n else b""
        self._pos += n
        return bytes(data)

    def read_range(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of the blob, without moving the cursor.

        Raises:
            ValueError: the range is negative or extends past the blob.
        """
        return self.read_ranges([(offset, length)])[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Several ``(offset, length)`` ranges of the blob, without moving the cursor.

        Raises:
            ValueError: a range is negative or extends past the blob.
        """
        self._check_open()
        out = []
        for offset, length in ranges:
            if offset < 0 or length < 0 or offset + length > self._size:
                raise ValueError(f"range ({offset}, {length}) is outside a blob of {self._size} bytes")
            out.append(bytes(self._read_at(self._start + offset, length)) if length else b"")
        return out

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed blob file")


def check_buffer_size(buffer_size: int) -> int:
    """``buffer_size`` (pylance's read-ahead of a blob file) if it is a non-negative int.

    Raises:
        InputTypeError: not an int (a TypeError, as pylance raises).
        BlobValueError: negative (a ValueError).
    """
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
        raise InputTypeError(f"buffer_size must be an int, got {type(buffer_size).__name__}")
    if buffer_size < 0:
        raise BlobValueError("buffer_size must be non-negative")
    return buffer_size


def memory_blob(value: bytes, name: str) -> BlobFile:
    def read_at(offset: int, length: int) -> bytes:
        return value[offset : offset + length]

    return BlobFile(read_at, 0, len(value), name)
