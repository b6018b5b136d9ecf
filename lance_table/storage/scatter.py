"""Reads of a local file's bytes scattered into given buffers: a page's chunks read with their
headers into a scratch buffer and their values straight into the column's values, with no copy in
between (see ``file.v2_1.direct_flat``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from lance_table.errors import CorruptFileError
from lance_table.storage.io_stats import record
from lance_table.storage.sources import LocalFileSource

#: buffers one ``preadv`` call fills at most (Linux allows 1024)
MAX_BUFFERS = 1024


def read_into(source: LocalFileSource, reads: Sequence[tuple[int, Sequence[memoryview]]]) -> None:
    """For each ``(offset, buffers)``, the file's bytes from ``offset`` on, filling the (writable)
    buffers one after another, with one ``preadv`` per :data:`MAX_BUFFERS` of them.

    Raises:
        CorruptFileError: a read reaches past the end of the file, or comes back short (naming it).
    """
    fd = os.open(source.name, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        for offset, buffers in reads:
            want = sum(map(len, buffers))
            if offset < 0 or offset + want > source.size():
                raise CorruptFileError(
                    source.name,
                    f"byte range [{offset}, {offset + want}) lies outside the file of {source.size()} bytes",
                )
            at = offset
            for lo in range(0, len(buffers), MAX_BUFFERS):
                part = buffers[lo : lo + MAX_BUFFERS]
                size = sum(map(len, part))
                got = os.preadv(fd, part, at) if size else 0
                if got != size:  # (a regular file reads short only at its end: it shrank)
                    problem = f"short read: wanted {size} bytes, got {got}"
                    raise CorruptFileError(source.name, problem, offset=at)
                at += size
            record(1, want)
    finally:
        os.close(fd)
