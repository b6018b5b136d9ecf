"""What the parts of :class:`~lance_table.file.reader.LanceFileReader` share: the opened file's
metadata, its columns, the readers of their pages and the decoding of one page."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError
from lance_table.file import utf8
from lance_table.file.arrow_take import filter_rows
from lance_table.file.column_pages import ColumnPages
from lance_table.file.container import (
    FileMetadata,
    FileVersion,
)
from lance_table.file.pageio import PageIO
from lance_table.file.rows import RowReader, decoded
from lance_table.file.runs import Runs
from lance_table.file.v2_0 import decode as decode20
from lance_table.file.v2_1 import decode as decode21
from lance_table.file.v2_1 import interval_rows, miniblock_small, nested_pages, nested_rows
from lance_table.schema import FieldNode
from lance_table.storage.sources import (
    ByteSource,
)


class ReaderCore(RowReader):
    """The state of an opened Lance v2 data file (set by
    :meth:`~lance_table.file.reader.LanceFileReader._open`) and the page-level reads every read path
    uses."""

    _stored: ByteSource
    _source: ByteSource
    _meta: FileMetadata
    _structural: bool
    _col_of: dict[int, int]
    _byte_lists: frozenset[int]
    _columns: dict[int, ColumnPages]
    _small_reads: dict[tuple[str, ...] | None, list[tuple[FieldNode, ColumnPages]] | None]
    _kept: dict[tuple[int, int], memoryview]
    _kept_bytes: int

    def _check_strings(self, arr: pa.Array, col: ColumnPages, page: int, dtype: pa.DataType) -> None:
        """Check that the strings of rows of a page are valid UTF-8.

        Raises:
            CorruptFileError: they are not (naming the file, the field and the page).
        """
        problem = utf8.problem_of(arr, dtype)
        if problem is not None:
            name = self._field_name(col.index)
            what = f"column {name!r} (page {page}) holds strings that are not valid UTF-8"
            raise CorruptFileError(self.path, f"{what} ({problem}, of the rows read)")

    def _field_name(self, index: int) -> str:
        """The name of the field stored in column ``index`` (its index when none is)."""
        found = [n.name for r in self._meta.roots for n in r.walk() if self._col_of.get(n.id) == index]
        return found[0] if found else str(index)

    def _column(self, node: FieldNode) -> ColumnPages:
        index = self._col_of.get(node.id)
        if index is None:
            raise CorruptFileError(
                self._source.name, f"field {node.name!r} (id {node.id}) has no column in the file"
            )
        col = self._columns.get(index)
        if col is None:
            col = self._columns[index] = ColumnPages(self._meta, index)
        return col

    def _check_length(self, col: ColumnPages, runs: Runs) -> None:
        if runs.end > col.num_values:
            raise CorruptFileError(
                self._source.name,
                f"column {col.index} has {col.num_values} values, fewer than the {runs.end} needed",
            )

    def _page_io(self, col: ColumnPages, p: int, whole: bool) -> PageIO:
        """A reader of page ``p``'s buffers (``whole``: the page is decoded whole)."""
        return PageIO(
            self._source,
            col.pb.pages[p],
            col.pb,
            self._meta.global_buffers,
            f"column {col.index} page {p}",
            whole_page=whole,
            buffers=col.buffers(p),
        )

    def _pages(
        self, col: ColumnPages, runs: Runs, prefetch: bool = True
    ) -> Iterator[tuple[int, Runs, PageIO]]:
        """(page number, runs inside that page, page IO) for each page the runs touch.

        With ``prefetch``, a page needed whole has all its buffers fetched in one request right away;
        otherwise that happens when the page is decoded (possibly on another thread).
        """
        single = len(col.page_starts) == 2
        for p in col.pages_for(runs):
            lo, hi = int(col.page_starts[p]), int(col.page_starts[p + 1])
            local = runs if single and runs.end <= hi else runs.clip(lo, hi)
            if not local.count:
                continue
            io = self._page_io(col, p, local.is_span(0, hi - lo))
            if prefetch and io.whole_page:
                io.prefetch()
            yield p, local, io

    def rows_in_interval(
        self, column: str, runs: Runs, ranges: Sequence[tuple[int, int]]
    ) -> np.ndarray | None:
        """The rows among ``runs`` (sorted, not empty, inside the file) whose value of the integer
        column ``column`` lies in one of ``ranges`` (sorted, disjoint, closed intervals in the
        column's type; a null never does), sorted; read off the packed values without decoding them to Arrow
        (:mod:`interval_rows`). None when a page of the rows is not of a kind read that way (the
        caller then reads the column).

        Raises:
            SchemaError: the file has no such column.
            CorruptFileError: a page is damaged.
        """
        if not self._structural:
            return None
        try:
            return decoded(self._source.name, self._interval_rows, column, runs, ranges)
        finally:
            self._source = self._stored  # (as after a read: see ``LanceFileReader._read``)

    def _interval_rows(self, column: str, runs: Runs, ranges: Sequence[tuple[int, int]]) -> np.ndarray | None:
        (node,), _ = self._project([column])
        t = node.arrow_type
        if not pa.types.is_integer(t) or node.children:
            return None
        col = self._column(node)
        self._check_length(col, runs)
        large = self._meta.version is FileVersion.V2_2
        pages = list(self._pages(col, runs, prefetch=False))
        if not all(interval_rows.handles(col.encoding(p, self._source)) for p, _, _ in pages):
            return None
        signed = pa.types.is_signed_integer(t)
        found = []
        for p, local, io in pages:
            try:
                layout = col.encoding(p, self._source)
                got = interval_rows.page_rows(layout, io, large, local, signed, ranges)
            finally:
                io.release()
            found.append(got + int(col.page_starts[p]))
        if not found:
            return np.zeros(0, np.int64)
        return np.concatenate(found) if len(found) > 1 else found[0]

    def _decode_structural(
        self,
        col: ColumnPages,
        page: int,
        runs: Runs,
        io: PageIO,
        dtype: pa.DataType,
        large: bool,
        floor: int | None = None,
        keep: pa.BooleanArray | None = None,
    ) -> list[pa.Array]:
        """The rows ``runs`` of a page of a column without nesting; with ``keep`` (a mask over
        them, ``runs`` then one span), only the rows it marks. Its strings are checked here, on
        the decoding thread (see :mod:`~lance_table.file.utf8`; a dictionary page's, by its
        dictionary)."""
        try:
            small = col.small_page(page, self._source, large)
            got = None if small is None else miniblock_small.decode(small, io, dtype, runs, floor)
            if got is not None:
                got = got if keep is None else filter_rows(got, keep)
            else:
                got = decode21.decode_page(
                    col.encoding(page, self._source), io, dtype, large, runs, floor, keep
                )
            if not io.strings_checked and utf8.holds_strings(dtype):
                self._check_strings(got, col, page, dtype)
            return [got]
        finally:
            io.release()

    def _decode_nested(
        self, col: ColumnPages, page: int, runs: Runs, io: PageIO, path: list[pa.Field], large: bool
    ) -> list[pa.Array]:
        try:
            return [decode21.decode_nested_page(col.encoding(page, self._source), io, path, large, runs)]
        finally:
            io.release()

    def _decode_page(
        self, col: ColumnPages, page: int, runs: Runs, io: PageIO, dtype: pa.DataType
    ) -> list[pa.Array]:
        try:
            return [decode20.decode(col.encoding(page, self._source), io, runs, dtype)]
        finally:
            io.release()

    def _decode_nested_pages(
        self,
        col: ColumnPages,
        pages: Sequence[tuple[int, Runs, PageIO]],
        layouts: Sequence[Any],
        path: list[pa.Field],
        large: bool,
    ) -> list[pa.Array]:
        """Whole pages of a leaf of one encoding of their levels (``layouts``), or the rows of a take
        from pages of one encoding, decoded in one pass (:mod:`nested_pages`, :mod:`nested_rows`),
        or one by one where that does not check out."""
        ios = [io for _, _, io in pages]
        whole = all(local.is_span(0, int(io.page.length)) for _, local, io in pages)
        try:
            got = (
                nested_pages.decode(layouts, ios, path, large)
                if whole
                else nested_rows.decode(layouts, pages, path, large)
            )
        finally:
            for io in ios:
                io.release()
        if got is not None:
            return [got]
        return [arr for p, local, io in pages for arr in self._decode_nested(col, p, local, io, path, large)]
