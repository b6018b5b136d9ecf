"""Reading Lance v2 data files: whole, by column, by row range, by row indices, or as a stream."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import pyarrow as pa

from lance_table._parallel import DECODE, PAGE_IO, map_on, runs_inline, settle, workers
from lance_table.errors import CorruptFileError, SchemaError, UnsupportedFormatError
from lance_table.file import page_select, utf8
from lance_table.file.arrow import bool_array
from lance_table.file.arrow_take import filter_rows
from lance_table.file.column_pages import ColumnPages
from lance_table.file.container import (
    TAIL_READ_SIZE,
    FileMetadata,
    FileVersion,
    read_metadata,
)
from lance_table.file.field_shapes import (
    LEAFLESS,
    NESTED,
    empty_structs,
    field_shape,
    leaf_paths,
    row_columns,
    structural_columns,
)
from lance_table.file.mapped_pages import map_pages, scanned
from lance_table.file.page_select import PageRead
from lance_table.file.pageio import PageIO, fetch_ahead
from lance_table.file.reader_small import (
    PARALLEL_MIN_VALUES,
    PROJECTIONS_KEPT,
    SmallReads,
    _gathered,
)
from lance_table.file.reader_v20 import V20Reads
from lance_table.file.rows import decoded, selectable
from lance_table.file.runs import Runs, many_runs, read_as_span
from lance_table.file.v2_0.layout import column_assignment, page_encoding
from lance_table.file.v2_1 import layout as layout21
from lance_table.file.v2_1 import nested_pages, repdef
from lance_table.schema import FieldNode
from lance_table.storage.sources import (
    ByteSource,
    BytesSource,
    LocalFileSource,
    in_memory_if_small,
    open_source,
    read_joined,
)

Job = Callable[[], list[pa.Array]]
Combine = Callable[[list[list[pa.Array]]], list[pa.Array]]


_NO_BYTE_LISTS: frozenset[int] = frozenset()

#: batched-read layouts a reader keeps (:meth:`LanceFileReader.kept_layout`): a five-column take
#: of 50 small files asks each for some 20, so at 16 all 450 were made again at every take
KEPT_LAYOUTS = 64


class LanceFileReader(SmallReads, V20Reads):
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
        decoded(self._source.name, self._open)  # (the net of ``decoding``, without its calls)

    def _open(self) -> None:
        self._meta = meta = read_metadata(self._source)
        self._roots = meta.roots
        self._schema = meta.arrow_schema
        self._structural = meta.version is not FileVersion.V2_0
        n_cols = len(meta.columns)
        if self._structural:  # (the files of a dataset share their fields: made once for them)
            self._col_of, rows, needed = structural_columns(meta)
            self._byte_lists = _NO_BYTE_LISTS
        else:
            self._col_of, rows, needed = self._v20_columns()
        if needed > n_cols:
            raise UnsupportedFormatError(
                f"schema needs {needed} columns but the file has {n_cols}", path=self._source.name
            )
        if not needed and n_cols:
            raise CorruptFileError(
                self._source.name, f"file has {n_cols} columns but its schema has no fields"
            )
        # Columns that hold one value per row: their pages must add up to the file's rows.
        # (checked as each column's metadata is parsed: see ColumnList)
        meta.columns.expect_rows(rows, meta.num_rows)
        self._columns: dict[int, ColumnPages] = {}
        self._projections: dict[tuple[str, ...], tuple[list[FieldNode], pa.Schema]] = {}
        self._shapes: dict[int, int] = {}  # by field id: see field_shape
        self._small_reads: dict[tuple[str, ...] | None, list[tuple[FieldNode, ColumnPages]] | None] = {}
        self._many_layouts: dict[tuple[Any, ...], Any] = {}  # see kept_layout
        # the small buffers reads of parts of pages need first (chunk tables, dictionaries), kept
        # for the next read of the file (a filter or take on a dataset held open): bounded
        self._kept: dict[tuple[int, int], memoryview] = {}
        self._kept_bytes = 0

    def _v20_columns(self) -> tuple[dict[int, int], frozenset[int], int]:
        """A 2.0 file's column of each field, the columns that hold one value per row, and the
        columns its fields need; sets :attr:`_byte_lists` (string fields stored as list<u8>, an
        offsets column then a bytes column: early 2.0 files). The columns depend on the pages."""
        meta = self._meta
        n_cols = len(meta.columns)
        # (a frozenset: the empty one is shared, where a set would be one more object per file
        # for the garbage collector to walk)
        byte_lists: set[int] = set()

        def byte_list(node: FieldNode, index: int) -> bool:
            if index >= n_cols or not meta.columns[index].pages:
                return False
            enc = page_encoding(meta.columns[index].pages[0].encoding, self._source)
            if enc is None:
                enc = ColumnPages(meta, index).encoding(0, self._source)
            if enc.WhichOneof("array_encoding") != "list":
                return False
            byte_lists.add(node.id)
            return True

        col_of = column_assignment(self._roots, byte_list)
        rows = frozenset(row_columns(self._roots, col_of, False))
        self._byte_lists = frozenset(byte_lists) if byte_lists else _NO_BYTE_LISTS
        needed = max(col_of.values(), default=-1) + 1
        if self._byte_lists:
            needed = max(needed, *(col_of[i] + 2 for i in self._byte_lists))
        return col_of, rows, needed

    def kept_layout(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """The layout of a read of this file batched with other small files (see
        :mod:`~lance_table.file.v2_1.small_layouts`), made by ``make`` on the first read of
        ``key`` and kept with the reader: a few selections (:data:`KEPT_LAYOUTS`; all dropped
        when full)."""
        cache = self._many_layouts
        try:
            return cache[key]
        except KeyError:
            pass
        if len(cache) >= KEPT_LAYOUTS:
            cache.clear()
        found = cache[key] = make()
        return found

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

    @property
    def holds_bytes(self) -> bool:
        """Whether the next read is served by the bytes read when the file was opened (no request)."""
        return self._source is not self._stored

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

    def read_joined(self, ranges: Any) -> memoryview:
        """The file's ``(offset, length)`` ranges (in file order) back to back in one buffer."""
        try:
            return read_joined(self._source, ranges)
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
        if read_as_span(runs) or (
            not self._structural and isinstance(self._stored, LocalFileSource) and many_runs(runs)
        ):
            # Many short runs close together (the live rows of a range with deletions): the
            # covering span is read, each page decoded whole and its rows selected as soon as it
            # is decoded; that beats fetching and decoding thousands of tiny ranges.
            # (kept with the runs: a fragment's live runs are kept for every scan of it)
            keep = runs.derived(("mask", lo, span), lambda: bool_array(runs.mask(lo, span)))
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
        if small is not None:  # (each page decoded by _decode_structural, which checks its strings)
            return self._read_small(small, schema, runs, floors, keep)
        touched: list[tuple[ColumnPages, int, PageIO]] = []
        plans = [self._field_jobs(node, runs, touched, floors.get(node.name), keep) for node in nodes]
        flat = [job for jobs, _ in plans for job in jobs]
        self._fetch_selection_buffers(touched)
        view = None
        source = self._source
        if isinstance(source, LocalFileSource) and (keep is not None or (self._structural and scanned(runs))):
            view = map_pages(source, [io for _, _, io in touched], keep is None)
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
        if view is not None:  # (nothing returned may view the map)
            results = [view.owned(r) for r in results]
        arrays = []
        at = 0
        kept = keep.true_count if keep is not None else runs.total
        for node, (jobs, combine) in zip(nodes, plans):
            chunks = combine(results[at : at + len(jobs)])
            at += len(jobs)
            col = pa.chunked_array(chunks, type=node.arrow_type)
            if len(col) != kept:  # a field not selected page by page (nested, blobs): selected now
                assert keep is not None
                col = filter_rows(selectable(pa.table([col], names=["_"])).column(0), keep)
            arrays.append(col)
        # strings are checked by the jobs that decode pages, but for fields with nesting
        table = pa.Table.from_arrays(arrays, schema=schema)
        return utf8.check(table, self.path, [None if self._checked(n) else n.arrow_type for n in nodes])

    def _checked(self, node: FieldNode) -> bool:
        """Whether the jobs that decode a field check its strings (see ``_decode_structural``
        and ``_checking``): :meth:`_field_jobs` made them of its pages."""
        kind = self._shapes.get(node.id)
        if self._structural:
            return kind != NESTED or layout21.is_packed_struct(node)
        return (
            kind != NESTED
            and node.id not in self._byte_lists
            and node.id in self._col_of
            and not self._column(node).is_blob(self._source)
        )

    def _checking(self, job: Job, col: ColumnPages, page: int, io: PageIO, dtype: pa.DataType) -> Job:
        """``job`` (the rows of a 2.0 page), its strings then checked (not those of a dictionary
        page whose dictionary is sound: its rows are the dictionary's)."""
        if not utf8.holds_strings(dtype):
            return job

        def checked() -> list[pa.Array]:
            got = job()
            if not io.strings_checked:
                for arr in got:
                    self._check_strings(arr, col, page, dtype)
            return got

        return checked

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
            self._checking(
                page_select.selecting(functools.partial(self._decode_page, col, p, local, io, t), mask),
                col,
                p,
                io,
                t,
            )
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
        # a leaf's whole pages of one encoding are decoded a group at a time (nested_pages)
        parts = 1 if runs_inline(DECODE) else workers()
        for k, (leaf, path) in enumerate(leaves):
            col = self._column(leaf)
            self._check_length(col, runs)
            pages = list(self._pages(col, runs, prefetch=False))
            layouts = [col.encoding(p, self._source) for p, _, _ in pages]
            for group in nested_pages.plan(pages, layouts, parts):
                if len(group) == 1:
                    p, local, io = pages[group[0]]
                    jobs.append(functools.partial(self._decode_nested, col, p, local, io, path, large))
                else:
                    chosen = [pages[j] for j in group]
                    encodings = [layouts[j] for j in group]
                    jobs.append(
                        functools.partial(self._decode_nested_pages, col, chosen, encodings, path, large)
                    )
                owner.append(k)
            touched.extend((col, p, io) for p, _, io in pages)
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

    def _page_reads(
        self, col: ColumnPages, runs: Runs, keep: pa.BooleanArray | None
    ) -> tuple[list[PageRead], list[pa.BooleanArray | None]]:
        """:func:`page_select.page_reads` of a column without nesting."""
        pages = self._pages(col, runs, prefetch=False)
        # a page's runs read as spans of their own are requests of their own on a remote file:
        # one after another where the page jobs run on this thread (a busy scan's task)
        split = isinstance(self._source, (LocalFileSource, BytesSource)) or not runs_inline(PAGE_IO)
        return page_select.page_reads(
            col, runs, pages, keep, lambda p: self._page_io(col, p, False), split=split
        )


def _flatten(results: list[list[pa.Array]]) -> list[pa.Array]:
    return [chunk for part in results for chunk in part]
