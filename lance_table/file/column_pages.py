"""The physical columns of a Lance v2 data file as its reader sees them: each column's pages, the
first row of each page, and what is parsed from the page descriptions (encodings, buffer
positions, small-page plans), parsed once per reader and kept for its later reads."""

from __future__ import annotations

from typing import Any

import numpy as np

from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.file.container import (
    URL_ARRAY_ENCODING,
    URL_PAGE_LAYOUT,
    FileMetadata,
    FileVersion,
    unpack_encoding,
)
from lance_table.file.pageio import buffers_of
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import miniblock_small
from lance_table.storage.sources import ByteSource


class ColumnPages:
    """One physical column: its pages, the first row of each page and parsed page encodings."""

    def __init__(self, meta: FileMetadata, index: int) -> None:
        self.index = index
        # 2.0 pages are ArrayEncodings; 2.1+ pages are PageLayouts. A mismatch means a damaged file.
        self.page_url = URL_ARRAY_ENCODING if meta.version is FileVersion.V2_0 else URL_PAGE_LAYOUT
        self.pb = meta.columns[index]
        pages = self.pb.pages
        if len(pages) == 1:  # most columns of small files
            self.page_starts = np.array((0, pages[0].length), np.int64)
        else:
            lengths = np.fromiter((p.length for p in pages), np.int64, len(pages))
            self.page_starts = np.zeros(len(lengths) + 1, np.int64)
            np.cumsum(lengths, out=self.page_starts[1:])
        self.num_values = int(self.page_starts[-1])
        self._buffers: dict[int, tuple[tuple[int, int], ...]] = {}
        self._encodings: dict[int, Any] = {}
        self._small: dict[int, miniblock_small.SmallPage | None] = {}
        self._column_encoding: Any = None

    def pages_for(self, runs: Runs) -> range:
        if not runs.count:
            return range(0)
        if len(self.page_starts) == 2:  # one page (the caller checked the runs against its length)
            return range(1)
        first = int(np.searchsorted(self.page_starts, runs.starts[0], side="right")) - 1
        last = int(np.searchsorted(self.page_starts, runs.end - 1, side="right")) - 1
        return range(max(first, 0), min(last, len(self.pb.pages) - 1) + 1)

    def encoding(self, page: int, source: ByteSource) -> Any:
        enc = self._encodings.get(page)
        if enc is None:
            what = f"column {self.index} page {page}"
            url, enc = unpack_encoding(self.pb.pages[page].encoding, source, what)
            if enc is None:
                raise UnsupportedFormatError(f"{what} has no encoding", path=source.name)
            if url != self.page_url:
                raise CorruptFileError(source.name, f"{what} is encoded as {url}, not {self.page_url}")
            self._encodings[page] = enc
        return enc

    def buffers(self, page: int) -> tuple[tuple[int, int], ...]:
        """A page's buffers as ``(file offset, size)`` pairs (read from its description once)."""
        found = self._buffers.get(page)
        if found is None:
            found = self._buffers[page] = buffers_of(self.pb.pages[page])
        return found

    def small_page(self, page: int, source: ByteSource, large: bool) -> miniblock_small.SmallPage | None:
        """The description of a 2.1/2.2 page that :mod:`miniblock_small` decodes, or None."""
        try:
            return self._small[page]
        except KeyError:
            found = self._small[page] = miniblock_small.plan(self.encoding(page, source), large)
            return found

    def column_encoding(self, source: ByteSource) -> Any:
        if self._column_encoding is None:
            _, self._column_encoding = unpack_encoding(self.pb.encoding, source, f"column {self.index}")
        return self._column_encoding

    def is_blob(self, source: ByteSource) -> bool:
        """Whether a 2.0 column stores blobs (its column encoding says so)."""
        enc = self.column_encoding(source)
        return enc is not None and enc.WhichOneof("column_encoding") == "blob"
