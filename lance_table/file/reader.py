"""Reading Lance v2 data files: whole, by column, by row range, by row indices, or as a stream."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any

import numpy as np
import pyarrow as pa

from lance_table._parallel import DECODE, PAGE_IO, io_threads, map_on, runs_inline, settle
from lance_table.errors import CorruptFileError, LanceTableError, SchemaError, UnsupportedFormatError
from lance_table.file import page_select
from lance_table.file.arrow import bool_array, build_binary, concat_chunks
from lance_table.file.column_pages import ColumnPages
from lance_table.file.container import (
    TAIL_READ_SIZE,
    FileMetadata,
    FileVersion,
    read_metadata,
)
from lance_table.file.field_shapes import (
    FLAT,
    LEAFLESS,
    NESTED,
    empty_structs,
    field_shape,
    leaf_paths,
    row_columns,
)
from lance_table.file.fields import BLOB_DESCRIPTOR
from lance_table.file.gathered import GatheredSource
from lance_table.file.page_select import PageRead
from lance_table.file.pageio import PageIO, fetch_ahead, fetch_buffers
from lance_table.file.rows import RowReader, decoded, decoding, selectable
from lance_table.file.runs import Runs, read_as_span
from lance_table.file.v2_0 import decode as decode20
from lance_table.file.v2_0 import nested as nested20
from lance_table.file.v2_0.layout import column_assignment, is_packed_struct
from lance_table.file.v2_1 import decode as decode21
from lance_table.file.v2_1 import layout as layout21
from lance_table.file.v2_1 import miniblock_small, repdef
from lance_table.schema import FieldNode
from lance_table.storage.sources import (
    ByteSource,
    BytesSource,
    LocalFileSource,
    in_memory_if_small,
    open_source,
)

Job = Callable[[], list[pa.Array]]
Combine = Callable[[list[list[pa.Array]]], list[pa.Array]]

# Reads of at least this many values (rows x columns) decode their pages on a thread pool.
PARALLEL_MIN_VALUES = 256 * 1024
# Pages read whole whose buffers add up to at most this many bytes are fetched in one request.
SMALL_READ_BYTES = 1024 * 1024
#: bytes of selection buffers a reader keeps for its next reads (see ``_fetch_selection_buffers``)
KEPT_BYTES = 64 * 1024
# The most column selections a reader keeps resolved (their fields and schema).
PROJECTIONS_KEPT = 16


def _gathered(touched: list[tuple[ColumnPages, int, PageIO]], jobs: int) -> GatheredSource | None:
    """A :class:`GatheredSource` for ``jobs`` jobs on the :data:`PAGE_IO` pool that the pages of
    ``touched`` read through from now on; None where those jobs would run one after another."""
    if jobs < 2 or runs_inline(PAGE_IO):
        return None
    gathered = GatheredSource(touched[0][2].source, min(jobs, io_threads()))
    for _, _, io in touched:
        io.source = gathered
    return gathered


class LanceFileReader(RowReader):
    """Reads one Lance data file (format 2.0).

    Only the bytes a request needs are fetched: the footer region when opening, then the pages of
    the projected columns, and within pages only the byte ranges of the selected rows. A file no
    larger than the footer region read first is read whole when opened, and those bytes serve the
    first read too (see :attr:`held_bytes`); later reads go to the file again, so that a file
    deleted meanwhile is found missing, as it is for any other file.

    Args:
        source: a local path, a seekable binary file object (e.g. from ``fsspec.open``), the file's
            bytes, or a :class:`~lance_table.storage.sources.ByteSource`.

    Raises:
        CorruptFileError: the file is damaged or not a Lance file.
        UnsupportedFormatError: the file uses a format version or encoding this reader lacks.
    """

    def __init__(self, source: str | os.PathLike[str] | IO[bytes] | ByteSource | bytes) -> None:
        self._stored = open_source(source)
        self._source = in_memory_if_small(self._stored, TAIL_READ_SIZE)
        #: the bytes of the file read whole when opened (a small file's, else none), kept until
        #: the first read has used them
        self.held_bytes = self._source.size() if self._source is not self._stored else 0
        with decoding(self._source.name):
            self._open()

    def _open(self) -> None:
        self._meta = read_metadata(self._source)
        self._roots = self._meta.roots
        self._schema = self._meta.arrow_schema
        self._structural = self._meta.version is not FileVersion.V2_0
        n_cols = len(self._meta.columns)
        # String fields stored as list<u8> (offsets column, then a bytes column): early 2.0 files.
        self._byte_lists: set[int] = set()

        def byte_list(node: FieldNode, index: int) -> bool:
            if index >= n_cols or not self._meta.columns[index].pages:
                return False
            enc = ColumnPages(self._meta, index).encoding(0, self._source)
            if enc.WhichOneof("array_encoding") != "list":
                return False
            self._byte_lists.add(node.id)
            return True

        self._col_of = (
            layout21.leaf_columns(self._roots)
            if self._structural
            else column_assignment(self._roots, byte_list)
        )
        needed = max(self._col_of.values(), default=-1) + 1
        if self._byte_lists:
            needed = max(needed, *(self._col_of[i] + 2 for i in self._byte_lists))
        if needed > n_cols:
            raise UnsupportedFormatError(
                f"schema needs {needed} columns but the file has {n_cols}", path=self._source.name
            )
        if not needed and n_cols:
            raise CorruptFileError(
                self._source.name, f"file has {n_cols} columns but its schema has no fields"
            )
        # Columns that hold one value per row: their pages must add up to the file's rows.
        for index in sorted(row_columns(self._roots, self._col_of, self._structural)):
            values = self._meta.column_values[index]
            if values != self.num_rows:
                raise CorruptFileError(
                    self._source.name, f"column {index} has {values} values for {self.num_rows} rows"
                )
        self._columns: dict[int, ColumnPages] = {}
        self._projections: dict[tuple[str, ...], tuple[list[FieldNode], pa.Schema]] = {}
        self._shapes: dict[int, int] = {}  # by field id: see field_shape
        self._small_reads: dict[tuple[str, ...] | None, list[tuple[FieldNode, ColumnPages]] | None] = {}
        self._many_layouts: dict[tuple[Any, ...], Any] = {}  # see small_many.layout
        # the small buffers reads of parts of pages need first (chunk tables, dictionaries), kept
        # for the next read of the file (a filter or take on a dataset held open): bounded
        self._kept: dict[tuple[int, int], memoryview] = {}
        self._kept_bytes = 0

    # -- metadata -------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._source.name

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema, with field and schema metadata."""
        return self._schema

    @property
    def num_rows(self) -> int:
        return self._meta.num_rows

    @property
    def version(self) -> str:
        """The file format version, e.g. ``"2.0"``."""
        return self._meta.version.value

    @property
    def metadata(self) -> FileMetadata:
        return self._meta

    # -- reads ----------------------------------------------------------------------------------

    def read_span(self, start: int, length: int) -> memoryview:
        """The file's bytes ``[start, start + length)`` in one request (the bytes read when
        opening serve this if they are the first read, as for any read).

        Raises:
            CorruptFileError: the range lies outside the file.
            FileNotFoundError: the file no longer exists.
        """
        try:
            return self._source.read_ranges([(start, length)])[0]
        finally:
            self._source = self._stored

    # -- internals ------------------------------------------------------------------------------

    def _project(self, columns: Sequence[str] | None) -> tuple[list[FieldNode], pa.Schema]:
        if columns is None:
            return self._roots, self._schema
        if isinstance(columns, str):
            raise TypeError("columns must be a list of names, not a string")
        key = tuple(columns)
        found = self._projections.get(key)
        if found is None:
            if len(self._projections) >= PROJECTIONS_KEPT:
                self._projections.clear()
            found = self._projections[key] = self._projected(columns)
        return found

    def _projected(self, columns: Sequence[str]) -> tuple[list[FieldNode], pa.Schema]:
        by_name = {n.name: n for n in self._roots}
        nodes = []
        for name in columns:
            if name not in by_name:
                raise SchemaError(f"column {name!r} is not in {self.path}; columns are {list(by_name)}")
            nodes.append(by_name[name])
        fields = [self._schema.field(self._schema.get_field_index(n.name)) for n in nodes]
        return nodes, pa.schema(fields, metadata=self._schema.metadata)

    def _read(
        self, runs: Runs, columns: Sequence[str] | None, floors: Mapping[str, int] | None = None
    ) -> pa.Table:
        try:
            return decoded(self._source.name, self._read_selected, runs, columns, floors or {})
        finally:
            self._source = self._stored  # the bytes read when opening serve the first read only

    def _read_selected(
        self, runs: Runs, columns: Sequence[str] | None, floors: Mapping[str, int]
    ) -> pa.Table:
        lo = int(runs.starts[0]) if runs.count else 0
        span = runs.end - lo
        if read_as_span(runs):
            # Many short runs close together (the live rows of a range with deletions): the
            # covering span is read, each page decoded whole and its rows selected as soon as it
            # is decoded; that beats fetching and decoding thousands of tiny ranges.
            keep = bool_array(runs.mask(lo, span))
            return self._read_runs(Runs.span(lo, span), columns, floors, keep)
        return self._read_runs(runs, columns, floors)

    def _read_runs(
        self,
        runs: Runs,
        columns: Sequence[str] | None,
        floors: Mapping[str, int],
        keep: pa.BooleanArray | None = None,
    ) -> pa.Table:
        """The rows at ``runs``; with ``keep`` (``runs`` is then one span), only the rows of the
        span that it marks: each page's kept rows are selected by the job that decodes the page
        (a page with none is not read), other fields' once they are read."""
        nodes, schema = self._project(columns)
        small = self._small_columns(columns, nodes, runs)
        if small is not None:
            return self._read_small(small, schema, runs, floors, keep)
        touched: list[tuple[ColumnPages, int, PageIO]] = []
        plans = [self._field_jobs(node, runs, touched, floors.get(node.name), keep) for node in nodes]
        flat = [job for jobs, _ in plans for job in jobs]
        self._fetch_selection_buffers(touched)
        remote = not isinstance(self._source, (LocalFileSource, BytesSource))
        in_part = remote and len(flat) > 1 and any(not io.whole_page for _, _, io in touched)
        # every job a page's: their first reads (the pages read whole included) go out together
        gathered = _gathered(touched, len(flat)) if in_part and len(flat) == len(touched) else None
        ahead = fetch_ahead([io for _, _, io in touched]) if remote and gathered is None else []
        try:
            if in_part:
                # pages read in part (a take, a filter's rows) of a remote file: their chunk
                # tables are in hand, and each page's job then asks for its byte ranges; all the
                # pages ask at once (bounded by the pool's threads) instead of one after another,
                # in one coalesced request when every job is a page's
                run: Callable[[Job], list[pa.Array]] = lambda job: job()  # noqa: E731
                results = map_on(PAGE_IO, gathered.job(run) if gathered else run, flat)
            elif len(flat) > 1 and runs.total * len(nodes) >= PARALLEL_MIN_VALUES:
                results = map_on(DECODE, lambda job: job(), flat)
            else:
                results = [job() for job in flat]
        finally:
            settle(ahead)
        arrays = []
        at = 0
        kept = keep.true_count if keep is not None else runs.total
        for node, (jobs, combine) in zip(nodes, plans):
            chunks = combine(results[at : at + len(jobs)])
            at += len(jobs)
            col = pa.chunked_array(chunks, type=node.arrow_type)
            if len(col) != kept:  # a field not selected page by page (nested, blobs): selected now
                assert keep is not None
                col = selectable(pa.table([col], names=["_"])).column(0).filter(keep)
            arrays.append(col)
        return pa.Table.from_arrays(arrays, schema=schema)

    def _field_jobs(
        self,
        node: FieldNode,
        runs: Runs,
        touched: list[tuple[ColumnPages, int, PageIO]],
        floor: int | None = None,
        keep: pa.BooleanArray | None = None,
    ) -> tuple[list[Job], Combine]:
        """Independent pieces of work that read a field (one per page of each of its columns), and
        how their results make the field's chunks; the 2.1/2.2 pages to read are added to
        ``touched``. ``floor``: see :meth:`read_runs`; ``keep``: see :meth:`_read_runs` (the
        pages of a field without nesting select their rows)."""
        t = node.arrow_type
        kind = self._shapes.get(node.id)
        if kind is None:
            kind = self._shapes[node.id] = field_shape(node)
        if kind == LEAFLESS:  # nothing stored: every row is an (all-valid) empty struct, as pylance has it
            return [lambda: [empty_structs(t, runs.total)]], _flatten
        nested = kind == NESTED
        if self._structural:
            if nested and not layout21.is_packed_struct(node):
                return self._nested_jobs(node, runs, touched)
            floor = floor if floor is not None and pa.types.is_integer(t) else None
            return self._structural_jobs(node, runs, touched, floor, keep), _flatten
        if nested or not runs.total or node.id in self._byte_lists:
            return [lambda: self._read_field(node, runs)], _flatten
        col = self._column(node)
        if col.is_blob(self._source):
            return [lambda: self._read_field(node, runs)], _flatten
        self._check_length(col, runs)
        pages, masks = self._page_reads(col, runs, keep)
        touched.extend((col, p, io) for p, _, io in pages)
        jobs: list[Job] = [
            page_select.selecting(functools.partial(self._decode_page, col, p, local, io, t), mask)
            for (p, local, io), mask in zip(pages, masks)
        ]
        return jobs, _flatten

    def _structural_jobs(
        self,
        node: FieldNode,
        runs: Runs,
        touched: list[tuple[ColumnPages, int, PageIO]],
        floor: int | None,
        keep: pa.BooleanArray | None = None,
    ) -> list[Job]:
        """Pages of a 2.1/2.2 column without nesting: each decoded, then the selected rows taken
        (and of those, the ones ``keep`` marks: see :meth:`_read_runs`)."""
        if not runs.total:
            return []
        col = self._column(node)
        self._check_length(col, runs)
        large = self._meta.version is FileVersion.V2_2
        pages, masks = self._page_reads(col, runs, keep)
        touched.extend((col, p, io) for p, _, io in pages)
        return [
            functools.partial(self._decode_structural, col, p, local, io, node.arrow_type, large, floor, mask)
            for (p, local, io), mask in zip(pages, masks)
        ]

    def _nested_jobs(
        self, node: FieldNode, runs: Runs, touched: list[tuple[ColumnPages, int, PageIO]]
    ) -> tuple[list[Job], Combine]:
        """A 2.1/2.2 field with lists or structs: the pages of each of its leaf columns, decoded to
        the leaf's path; the paths of all leaves then merge into the field."""
        if not runs.total:
            return [], _flatten
        large = self._meta.version is FileVersion.V2_2
        jobs: list[Job] = []
        owner: list[int] = []
        leaves = list(leaf_paths(node, [node.to_arrow_field()]))
        for k, (leaf, path) in enumerate(leaves):
            col = self._column(leaf)
            self._check_length(col, runs)
            for p, local, io in self._pages(col, runs, prefetch=False):
                jobs.append(functools.partial(self._decode_nested, col, p, local, io, path, large))
                owner.append(k)
                touched.append((col, p, io))
        field = node.to_arrow_field()

        def combine(results: list[list[pa.Array]]) -> list[pa.Array]:
            parts: list[list[pa.Array]] = [[] for _ in leaves]
            for k, got in zip(owner, results):
                parts[k].extend(got)
            try:
                joined = [pa.concat_arrays(p) if len(p) > 1 else p[0] for p in parts]
                return [repdef.merge(field, joined)]
            except repdef.LevelError as exc:
                raise CorruptFileError(self.path, f"field {node.name!r}: {exc}") from exc

        return jobs, combine

    def _small_columns(
        self, columns: Sequence[str] | None, nodes: list[FieldNode], runs: Runs
    ) -> list[tuple[FieldNode, ColumnPages]] | None:
        """The fields of a read of a 2.1/2.2 file that :meth:`_read_small` takes, with their
        columns: fields without nesting, each one page the small-page decoder describes, and a
        read too small to decode on threads; else None (kept per column selection)."""
        if not self._structural or not runs.total or runs.total * len(nodes) >= PARALLEL_MIN_VALUES:
            return None
        key = None if columns is None else tuple(columns)
        if key in self._small_reads:
            found = self._small_reads[key]
        else:
            if len(self._small_reads) >= PROJECTIONS_KEPT:
                self._small_reads.clear()
            found = self._small_reads[key] = self._small_plan(nodes)
        if found is not None and any(runs.end > col.num_values for _, col in found):
            return None  # the general path says what is wrong
        return found

    def _small_plan(self, nodes: list[FieldNode]) -> list[tuple[FieldNode, ColumnPages]] | None:
        large = self._meta.version is FileVersion.V2_2
        plan = []
        for node in nodes:
            if field_shape(node) != FLAT or node.id not in self._col_of:
                return None
            col = self._column(node)
            try:
                if len(col.page_starts) != 2 or col.small_page(0, self._source, large) is None:
                    return None
            except LanceTableError:  # a damaged description: the general path says so, in its order
                return None
            plan.append((node, col))
        return plan

    def _read_small(
        self,
        small: list[tuple[FieldNode, ColumnPages]],
        schema: pa.Schema,
        runs: Runs,
        floors: Mapping[str, int],
        keep: pa.BooleanArray | None = None,
    ) -> pa.Table:
        """:meth:`_read_runs` of one-page columns of small pages (see :meth:`_small_columns`), with
        the fewest calls: their chunk tables in one request, each page decoded on this thread (or,
        for pages of a remote file read in part, the pages' rows asked for at once)."""
        large = self._meta.version is FileVersion.V2_2
        word = 4 if large else 2  # the chunk table of a page of one chunk is one word
        touched = []
        for _, col in small:
            # a page of one chunk is read whole, whatever rows are asked for
            buffers = col.buffers(0)
            whole = runs.is_span(0, col.num_values) or (len(buffers) > 1 and buffers[0][1] == word)
            io = PageIO(
                self._source,
                col.pb.pages[0],
                col.pb,
                self._meta.global_buffers,
                f"column {col.index} page 0",
                whole_page=whole,
                buffers=buffers,
            )
            touched.append((col, 0, io))
        self._fetch_selection_buffers(touched)

        def column(k: int) -> pa.ChunkedArray:
            (node, col), (_, _, io) = small[k], touched[k]
            t = node.arrow_type
            floor = floors.get(node.name) if floors and pa.types.is_integer(t) else None
            (got,) = self._decode_structural(col, 0, runs, io, t, large, floor, keep)
            return pa.chunked_array([got], type=t)

        remote = not isinstance(self._source, (LocalFileSource, BytesSource))
        if remote and sum(not io.whole_page for _, _, io in touched) > 1:
            gathered = _gathered(touched, len(small))  # the columns' first ranges in one request
            arrays = map_on(PAGE_IO, gathered.job(column) if gathered else column, range(len(small)))
        else:
            arrays = [column(k) for k in range(len(small))]
        return pa.Table.from_arrays(arrays, schema=schema)

    def _fetch_selection_buffers(self, touched: list[tuple[ColumnPages, int, PageIO]]) -> None:
        """The small buffers the pages read in part need first (chunk tables, dictionaries,
        repetition indexes), all read in one request rather than one per page; with them, every
        buffer of the pages read whole when those are small in all (a file of a few rows).
        Larger pages read whole fetch all their buffers at once when decoded."""
        if not self._structural:  # a 2.0 page read in part has no such buffers
            touched = [(col, p, io) for col, p, io in touched if io.whole_page]
        partial = [(col, p, io) for col, p, io in touched if not io.whole_page]
        wanted = [
            (io, index)
            for col, p, io in partial
            for index in decode21.selection_buffers(col.encoding(p, self._source), io)
        ]
        kept = self._kept
        for io, index in wanted:  # read by an earlier read of this file: in hand
            key = io.locate(index)
            if key in kept:
                io._whole[key] = kept[key]
        whole = [(io, k) for _, _, io in touched if io.whole_page for k in range(len(io.buffers))]
        small = whole if sum(io.buffers[k][1] for io, k in whole) <= SMALL_READ_BYTES else []
        if partial and not isinstance(self._source, (LocalFileSource, BytesSource)):
            # on a remote store, the pages read in part come with the rest when all are small (a
            # take from a small file: one request, not one per column after its chunk table)
            every = [(io, k) for _, _, io in touched for k in range(len(io.buffers))]
            if sum(io.buffers[k][1] for io, k in every) <= SMALL_READ_BYTES:
                small = every
        if not small and not wanted:
            return
        fetch_buffers(wanted + small)
        for io, index in wanted:
            key = io.locate(index)
            if key not in kept and self._kept_bytes + key[1] <= KEPT_BYTES:
                kept[key] = io._whole[key]
                self._kept_bytes += key[1]

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
        them, ``runs`` then one span), only the rows it marks."""
        try:
            small = col.small_page(page, self._source, large)
            if small is not None:
                got = miniblock_small.decode(small, io, dtype, runs, floor)
                if got is not None:
                    return [got if keep is None else got.filter(keep)]
            enc = col.encoding(page, self._source)
            return [decode21.decode_page(enc, io, dtype, large, runs, floor, keep)]
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

    def _column(self, node: FieldNode) -> ColumnPages:
        index = self._col_of.get(node.id)
        if index is None:
            raise CorruptFileError(self.path, f"field {node.name!r} (id {node.id}) has no column in the file")
        col = self._columns.get(index)
        if col is None:
            col = self._columns[index] = ColumnPages(self._meta, index)
        return col

    def _page_reads(
        self, col: ColumnPages, runs: Runs, keep: pa.BooleanArray | None
    ) -> tuple[list[PageRead], list[pa.BooleanArray | None]]:
        """:func:`page_select.page_reads` of a column without nesting."""
        pages = self._pages(col, runs, prefetch=False)
        return page_select.page_reads(col, runs, pages, keep, lambda p: self._page_io(col, p, False))

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

    def _read_field(self, node: FieldNode, runs: Runs) -> list[pa.Array]:
        t = node.arrow_type
        if not runs.total:
            return []
        if pa.types.is_struct(t) and not is_packed_struct(node):
            kids = [concat_chunks(self._read_field(c, runs), c.arrow_type) for c in node.children]
            return [pa.StructArray.from_arrays(kids, fields=list(t))]
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return [self._read_list(node, runs)]
        if pa.types.is_map(t):
            raise UnsupportedFormatError("maps cannot be stored in Lance 2.0 files", path=self.path)
        if node.id in self._byte_lists:
            return [self._read_byte_list(node, runs)]
        col = self._column(node)
        self._check_length(col, runs)
        if col.is_blob(self._source):
            return [self._read_blobs(col, runs, t)]
        return [
            decode20.decode(col.encoding(p, self._source), io, local, t)
            for p, local, io in self._pages(col, runs)
        ]

    def _check_length(self, col: ColumnPages, runs: Runs) -> None:
        if runs.end > col.num_values:
            raise CorruptFileError(
                self.path, f"column {col.index} has {col.num_values} values, fewer than the {runs.end} needed"
            )

    def _list_layout(self, col: ColumnPages, runs: Runs) -> tuple[np.ndarray, np.ndarray, Runs]:
        self._check_length(col, runs)
        bases = np.cumsum(
            [0] + [int(col.encoding(p, self._source).list.num_items) for p in range(len(col.pb.pages))]
        )
        return nested20.list_layout(
            (col.encoding(p, self._source).list, local, io, int(bases[p]))
            for p, local, io in self._pages(col, runs)
        )

    def _read_byte_list(self, node: FieldNode, runs: Runs) -> pa.Array:
        """A string/binary field stored as list<u8>: its offsets column, then a column of bytes."""
        col = self._column(node)
        valid, lengths, item_runs = self._list_layout(col, runs)
        index = col.index + 1
        items = self._columns.get(index) or self._columns.setdefault(index, ColumnPages(self._meta, index))
        self._check_length(items, item_runs)
        parts = [
            np.asarray(decode20.decode(items.encoding(p, self._source), io, local, pa.uint8()))
            for p, local, io in self._pages(items, item_runs)
        ]
        data = pa.py_buffer(np.concatenate(parts).tobytes() if parts else b"")
        io = PageIO(self._source, col.pb.pages[0], col.pb, self._meta.global_buffers, f"column {col.index}")
        return build_binary(node.arrow_type, valid, lengths, data, 0, io)

    def _read_list(self, node: FieldNode, runs: Runs) -> pa.Array:
        col = self._column(node)
        valid, lengths, item_runs = self._list_layout(col, runs)
        child = node.children[0]
        items = concat_chunks(self._read_field(child, item_runs), child.arrow_type)
        return nested20.list_array(node.arrow_type, valid, lengths, items, node.name, self.path)

    def _read_blobs(self, col: ColumnPages, runs: Runs, dtype: pa.DataType) -> pa.Array:
        descriptors = [
            decode20.decode(col.encoding(p, self._source), io, local, BLOB_DESCRIPTOR)
            for p, local, io in self._pages(col, runs)
        ]
        io = PageIO(self._source, col.pb.pages[0], col.pb, self._meta.global_buffers, f"column {col.index}")
        return nested20.blob_array(concat_chunks(descriptors, BLOB_DESCRIPTOR), self._source, dtype, io)


def _flatten(results: list[list[pa.Array]]) -> list[pa.Array]:
    return [chunk for part in results for chunk in part]
