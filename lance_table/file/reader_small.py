"""Reads of 2.1/2.2 files with the fewest calls: small reads of one-page columns, and the small
buffers (chunk tables, dictionaries, repetition indexes) that reads of parts of pages fetch at once
(part of :class:`~lance_table.file.reader.LanceFileReader`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from lance_table._parallel import PAGE_IO, io_threads, map_on, runs_inline
from lance_table.errors import LanceTableError
from lance_table.file.column_pages import ColumnPages
from lance_table.file.container import (
    FileVersion,
)
from lance_table.file.field_shapes import (
    FLAT,
    field_shape,
)
from lance_table.file.gathered import GatheredSource
from lance_table.file.pageio import PageIO, fetch_buffers
from lance_table.file.reader_core import ReaderCore
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import decode as decode21
from lance_table.schema import FieldNode
from lance_table.storage.sources import (
    BytesSource,
    LocalFileSource,
)

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


class SmallReads(ReaderCore):
    """Small reads of 2.1/2.2 files and the fetching of selection buffers."""

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
            io._owned.discard(key)  # (kept for later reads: never overwritten)
            if key not in kept and self._kept_bytes + key[1] <= KEPT_BYTES:
                kept[key] = io._whole[key]
                self._kept_bytes += key[1]
