"""Streaming writer of Lance data files (formats 2.0, 2.1 and 2.2).

Record batches go in; each physical column buffers its values until they pass a byte budget and then
writes them as one page. The 2.0 columns are written here with the encoders of :mod:`v2_0.encode`;
2.1/2.2 files have one column per leaf, written by :mod:`v2_1.encode`. Page buffers start at
multiples of 64 bytes and are padded with 0x48. The schema (global buffer 0), the column metadata,
the offset tables and the 40-byte footer follow at ``close()``.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Any, cast

import pyarrow as pa

from lance_table._lru import LRU
from lance_table._parallel import ENCODE, WRITE, pool, run_shared, workers
from lance_table._proto import file_pb2
from lance_table.errors import SchemaError, UnsupportedFormatError
from lance_table.file.columns import (
    BlobWriter,
    ColumnOut,
    FieldWriter,
    LeafWriter,
    ListWriter,
    Sink,
    StructuralWriter,
    StructWriter,
    values_column_encoding,
    write_tail,
)
from lance_table.file.container import (
    URL_PAGE_LAYOUT,
    FileVersion,
)
from lance_table.file.fields import is_blob
from lance_table.file.v2_0.layout import is_packed_struct
from lance_table.file.v2_1.blob_v2 import blob_v2_below, is_blob_v2
from lance_table.file.v2_1.blob_v2_encode import (
    BlobV2ColumnWriter,
    ExternalRefs,
    SidecarFiles,
    SidecarOpener,
    file_fields,
)
from lance_table.file.v2_1.encode import LeafColumnWriter
from lance_table.file.writer_schema import check_matches, leaf_plans, same_types
from lance_table.schema import FieldNode, LanceField, build_tree, fields_from_arrow, fields_to_pb

DEFAULT_PAGE_SIZE = 8 * 1024 * 1024
# 2.1/2.2: a batch of fewer bytes that completes no page is shredded on the calling thread, and
# so are the last pages of a file buffering fewer bytes at close. Work this small is mostly
# per-call Python that holds the GIL (no pool of any size runs it in parallel), and handing each
# column to the pool cost more than encoding it: 100 rows of five columns took 2.8 ms on threads,
# 1.6 ms inline; an append of 10k rows of the benchmark table (1.2 MB) 6.3 ms of CPU and 5.8 ms
# of wall on threads, 4.8 ms of both inline (2 idle cores). At 30k rows (3.6 MB) threads gain
# wall time again (7.5 against 8.5 ms, the same CPU). That is on 2 cores: with more, the pool runs
# more columns at once and pays off sooner, so the bound shrinks with the encoding workers (see
# :func:`_inline_bytes`), to no less than :data:`MIN_INLINE_ENCODE_BYTES`.
INLINE_ENCODE_BYTES = 2 << 20
MIN_INLINE_ENCODE_BYTES = 64 << 10
# Encoding work of at least this many bytes is left to the pool's threads while the calling
# thread waits. Large pages encoded on the main thread come from glibc's main heap, which hands
# freed memory back at once: a write of 1M rows of the benchmark table in one file took twice the
# page faults (3,400 against 1,600) and 1.16x the CPU with the calling thread encoding a share.
HELP_ENCODE_BYTES = 16 << 20


@dataclass(frozen=True)
class WrittenFile:
    """What a finished file holds: enough for a manifest's DataFile entry.

    Example:
        ```python
        from lance_table.file import write_table

        written = write_table(f"{tmp}/w.lance", table)
        print(written.num_rows, written.size, written.version)
        ```
    """

    num_rows: int
    size: int
    version: FileVersion
    field_ids: tuple[int, ...]
    column_indices: tuple[int, ...]


class LanceFileWriter:
    """Writes one Lance data file (format 2.0, 2.1 or 2.2) from a stream of record batches.

    Args:
        sink: a local path or a writable binary file object (e.g. from ``fsspec.open(..., "wb")``).
            A file object is not closed by the writer.
        schema: the Arrow schema of the data; field and schema metadata are stored.
        version: the file format version: ``"2.0"``, ``"2.1"``, ``"2.2"`` or ``"stable"`` (2.2).
        page_size_bytes: the byte budget after which a column's buffered values become a page.
        max_page_bytes: the most a page holds (four times ``page_size_bytes`` if not given,
            which keeps a page's buffers under glibc's 32 MiB mmap threshold). 2.1/2.2 files:
            an array past the budget is written as one page up to this size, as pylance writes
            each incoming batch as a page: reads then touch few pages. 2.0 files: a column's
            buffered arrays become one page once past ``page_size_bytes``; an array past it
            alone is split into even pages of at most this size, as pylance splits it.
        fields: Lance fields to store instead of numbering the schema from 0 (dataset field ids).
        blob_sidecars: 2.2 files: opens a sidecar file of this data file by name, for blob v2
            values too large to be inline (see :mod:`v2_1.blob_v2_encode`).
        blob_externals: 2.2 files: how blob v2 values that are external URIs are stored (base
            path id and relative URI); None refuses them.

    Raises:
        SchemaError: the schema holds a type Lance 2.0 cannot store (maps, for example).
        UnsupportedFormatError: ``version`` is unknown, or the schema holds a type this writer does
            not write in 2.1/2.2 files (dictionaries of booleans, blobs inside lists, for example).
    """

    def __init__(
        self,
        sink: str | os.PathLike[str] | IO[bytes],
        schema: pa.Schema,
        *,
        version: str = "2.0",
        page_size_bytes: int = DEFAULT_PAGE_SIZE,
        fields: Iterable[LanceField] | None = None,
        blob_sidecars: SidecarOpener | None = None,
        max_page_bytes: int | None = None,
        blob_externals: ExternalRefs | None = None,
    ) -> None:
        self.version = FileVersion.parse(version)
        self._externals = blob_externals
        self._sidecars = SidecarFiles(blob_sidecars)
        if page_size_bytes <= 0 or (max_page_bytes is not None and max_page_bytes <= 0):
            raise ValueError("page_size_bytes and max_page_bytes must be positive")
        self.schema = schema
        self.page_size_bytes = int(page_size_bytes)
        self.max_page_bytes = None if max_page_bytes is None else int(max_page_bytes)
        self.fields = list(fields) if fields is not None else fields_from_arrow(schema)
        self._roots = build_tree(self.fields)
        self._columns: list[ColumnOut] = []
        self._leaf_ids: list[int] = []
        plans = leaf_plans(self._roots, schema, self.version)
        if plans is not None:  # (2.1/2.2 without blob v2 columns: what _field_writer makes)
            self._writers: list[FieldWriter | BlobV2ColumnWriter] = [
                StructuralWriter(self, r, plan) for r, plan in zip(self._roots, plans)
            ]
        else:
            check_matches(self._roots, schema)
            self._writers = [self._field_writer(root) for root in self._roots]
        structural = [w for w in self._writers if isinstance(w, StructuralWriter)]
        self._leaf_writers = [leaf for w in structural for leaf in w.leaves]
        self._parallel = (
            len(structural) == len(self._writers)
            and len(self._leaf_writers) > 1
            and not any(w.writes_blobs for w in structural)
        )
        # whether every leaf is a top-level column (not a dictionary): adding rows that fill no
        # page then only wraps them (see :meth:`_small`)
        self._flat = all(
            len(leaf.path) == 1 and not pa.types.is_dictionary(leaf.path[0].arrow_type)
            for leaf in self._leaf_writers
        )
        # Opened last: a schema error above leaves no file behind.
        self._owns_file = isinstance(sink, (str, os.PathLike))
        fobj: IO[bytes] = open(sink, "wb") if isinstance(sink, (str, os.PathLike)) else sink  # noqa: SIM115
        self._sink = Sink(fobj)
        self._io: Future[None] | None = None  # the pages of the last batch, being written
        self.num_rows = 0
        self._closed = False
        #: global buffers written after the file descriptor (buffer 0), as indices 1, 2, ...
        self.global_buffers: list[bytes] = []

    def _new_column(self, column_encoding: Any) -> ColumnOut:
        col = ColumnOut(len(self._columns), column_encoding)
        self._columns.append(col)
        return col

    def _field_writer(self, node: FieldNode) -> FieldWriter | BlobV2ColumnWriter:
        t = node.arrow_type
        writer: FieldWriter
        if is_blob_v2(node.field):  # one descriptor column; blobs inline or in sidecars
            if self.version is not FileVersion.V2_2:
                raise UnsupportedFormatError(f"field {node.name!r}: blob v2 columns need format 2.2 files")
            out = self._new_column(values_column_encoding())
            self._leaf_ids.append(node.id)

            def pages(layout: Any, buffers: list[Any], rows: int, first_row: int) -> None:
                out.add_page(self._sink, layout, buffers, rows, URL_PAGE_LAYOUT, first_row)

            inline = lambda data: self._sink.write_buffer(data)[0]  # noqa: E731
            return BlobV2ColumnWriter(
                node, pages, inline, self._sidecars, self.page_size_bytes, self._externals
            )
        if blob_v2_below(node):
            raise UnsupportedFormatError(f"field {node.name!r}: blob v2 columns inside it are not written")
        if self.version is not FileVersion.V2_0:
            return StructuralWriter(self, node)
        if pa.types.is_map(t):
            raise SchemaError(f"field {node.name!r}: maps cannot be stored in Lance 2.0 files")
        if pa.types.is_struct(t) and not is_packed_struct(node):
            writer = StructWriter(self, node)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            writer = ListWriter(self, node)
        elif is_blob(node):
            writer = BlobWriter(self, node)
        else:
            writer = LeafWriter(self, node)
        return writer

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        """Append the rows of a record batch or table.

        Raises:
            SchemaError: the data's schema differs from the writer's.
        """
        if self._closed:
            raise ValueError("the writer is closed")
        if not same_types(data.schema, self.schema):
            raise SchemaError(f"data schema {data.schema} does not match the file schema {self.schema}")
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            if not batch.num_rows:
                continue  # pylance skips empty batches as well
            if self._parallel_leaves():
                work = [
                    functools.partial(leaf.append, column)
                    for writer, column in zip(self._writers, batch.columns)
                    for leaf in cast(StructuralWriter, writer).leaves
                ]
                threads = not self._small(_size(batch))
                weights = [
                    column.nbytes if threads else 0
                    for writer, column in zip(self._writers, batch.columns)
                    for _ in cast(StructuralWriter, writer).leaves
                ]
                self._encode_on_threads(work, weights, threads=threads)
            else:
                for writer, column in zip(self._writers, batch.columns):
                    writer.append(column)
            self.num_rows += batch.num_rows

    write_batch = write

    def write_many(self, batches: Sequence[pa.RecordBatch]) -> None:
        """:meth:`write` of each batch in turn, and the same file: where no page can fill among
        them (2.1/2.2 files), each column takes their rows as one piece, shredded once (a
        compaction of many small fragments writes a batch per fragment).

        Raises:
            SchemaError: a batch's schema differs from the writer's.
        """
        batches = [b for b in batches if b.num_rows]
        if self._closed:
            raise ValueError("the writer is closed")
        for batch in batches:
            if not same_types(batch.schema, self.schema):
                raise SchemaError(f"data schema {batch.schema} does not match the file schema {self.schema}")
        if len(batches) < 2 or not self._parallel_leaves():
            for batch in batches:
                self.write(batch)
            return
        columns = [[b.column(i) for b in batches] for i in range(len(self._writers))]
        leaves = [
            (leaf, arrays)
            for writer, arrays in zip(self._writers, columns)
            for leaf in cast(StructuralWriter, writer).leaves
        ]
        groups = [leaf.group(arrays) for leaf, arrays in leaves]
        if any(g is None for g in groups):  # some page may fill among them: one by one, exactly
            for batch in batches:
                self.write(batch)
            return
        for (leaf, arrays), grouped in zip(leaves, groups):
            assert grouped is not None
            leaf.append_group(arrays, grouped)
        self.num_rows += sum(b.num_rows for b in batches)

    def _parallel_leaves(self) -> bool:
        """Whether the columns are encoded on threads: 2.1/2.2 files of several leaf columns, none
        of them blobs (whose values go to the file as they come). Known once the writers are made."""
        return self._parallel

    def _leaves(self) -> list[LeafColumnWriter]:
        return self._leaf_writers

    def _small(self, incoming: int) -> bool:
        """Whether adding a batch of ``incoming`` bytes is too little work to hand to threads: no
        leaf's buffer reaches its page budget, and the batch has fewer than :func:`_inline_bytes`
        or every leaf is a top-level column (whose rows are then only wrapped, at a cost that
        does not grow with them: a file of 20k rows of the benchmark table, 2.4 MB, handed its
        five columns to the pool for nothing but that)."""
        limit = _inline_bytes()
        if incoming >= limit and not (self._flat and limit):
            return False
        leaves = self._leaves()
        if all(leaf.pending_bytes + incoming < leaf.budget for leaf in leaves):
            return True
        # (a leaf may count its pieces by a bound: slices of large arrays count their whole buffers)
        return all(leaf.exact_pending_bytes() + incoming < leaf.budget for leaf in leaves)

    def _encode_on_threads(
        self,
        work: Sequence[Callable[[], None]],
        weights: Sequence[int],
        *,
        threads: bool = True,
        last: bool = False,
    ) -> None:
        """Run leaf encoders on the encoding pool's threads, each taking the next column not yet
        taken (see :func:`run_shared`; ``weights``: each call's bytes), or on this thread alone
        without ``threads``. Their pages
        are written afterwards, in column order, so the file is the same as a serial write makes.
        The pages are written on the writing pool while the next batch is encoded, or here when
        this is the ``last`` call or the work is small."""
        writers = [cast(StructuralWriter, w) for w in self._writers]
        for w in writers:
            w.defer()
        try:
            if threads:  # (the calling thread takes a share of small work only: see HELP_ENCODE_BYTES)
                run_shared(ENCODE, work, weights, helping=sum(weights) < HELP_ENCODE_BYTES)
            else:
                _run_all(work)
        except BaseException:
            for w in writers:
                w.deferred = None
            raise
        writes = [write for w in writers for write in w.take_deferred()]
        # The previous batch's pages are written by now (or their error surfaces here); this
        # batch's are written while the next one is encoded, in column order as before.
        self._drain()
        if writes:
            if threads and not last:
                self._io = pool(WRITE).submit(_run_all, writes)
            else:
                _run_all(writes)

    def tell(self) -> int:
        """The bytes written to the file so far: pages are written once they fill (or at
        :meth:`close`), so this stays 0 until a column has a page's worth of data."""
        self._drain()
        return self._sink.pos

    def _drain(self) -> None:
        """Wait for the pages being written in the background; raise what their writing raised."""
        io, self._io = self._io, None
        if io is not None:
            io.result()

    def close(self) -> WrittenFile:
        """Flush the remaining pages and write the metadata and footer."""
        if self._closed:
            raise ValueError("the writer is already closed")
        self._closed = True
        if self._parallel_leaves():
            leaves = self._leaves()
            limit = _inline_bytes()
            small = sum(leaf.pending_bytes for leaf in leaves) < limit or (
                sum(leaf.exact_pending_bytes() for leaf in leaves) < limit
            )
            weights = [leaf.pending_bytes for leaf in leaves]
            self._encode_on_threads([leaf.finish for leaf in leaves], weights, threads=not small, last=True)
        else:
            for writer in self._writers:
                writer.finish()
        self._drain()
        self._release_writers()
        self._sidecars.close()
        sink = self._sink
        descriptor = file_pb2.FileDescriptor()
        descriptor.MergeFromString(_schema_descriptor(self.fields, self.schema))
        descriptor.length = self.num_rows
        write_tail(
            sink,
            descriptor.SerializeToString(),
            self.global_buffers,
            [col.meta.SerializeToString() for col in self._columns],
            self.version,
        )
        if self._owns_file:
            sink.f.close()
        else:
            sink.f.flush()
        ids = tuple(f.id for f in self.fields) if self.version is FileVersion.V2_0 else tuple(self._leaf_ids)
        return WrittenFile(
            num_rows=self.num_rows,
            size=sink.pos,
            version=self.version,
            field_ids=ids,
            column_indices=tuple(range(len(ids))),
        )

    def _release_writers(self) -> None:
        """Drop the column writers once every page is written: their page sinks refer back to
        this writer, and the cycle would otherwise wait for the garbage collector (whose full
        passes over a process's objects a stream of small appends would pay for)."""
        for writer in self._writers:
            if isinstance(writer, StructuralWriter):
                writer.leaves = []  # (each leaf's sink refers to its StructuralWriter)
        self._writers, self._leaf_writers = [], []

    def abort(self) -> None:
        """Stop writing without finishing the file (the caller removes it)."""
        self._closed = True
        with contextlib.suppress(Exception):
            self._drain()  # nothing may write to the file once it is closed
        self._sidecars.abort()
        if self._owns_file:
            self._sink.f.close()

    def __enter__(self) -> LanceFileWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            if not self._closed:
                self.close()
        else:
            self.abort()


def _schema_descriptor(fields: list[LanceField], schema: pa.Schema) -> bytes:
    """The file descriptor (global buffer 0) of a file of ``fields`` without its row count,
    serialized: the schema the file stores and ``schema``'s metadata.

    Remembered by the identity of the fields (immutable) and the metadata, so that the files of a
    stream of small appends of one schema do not build the same message again."""
    metadata = tuple((schema.metadata or {}).items())
    key = (tuple(map(id, fields)), metadata)
    hit = _DESCRIPTORS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], fields)):
        return hit[1]
    descriptor = file_pb2.FileDescriptor()
    fields_to_pb(file_fields(fields), descriptor.schema.fields)
    for k, v in metadata:
        descriptor.schema.metadata[k.decode()] = v
    data = descriptor.SerializeToString()
    _DESCRIPTORS.put(key, (tuple(fields), data))  # (the fields are kept: their ids stay theirs)
    return data


# descriptors by the ids of their fields and the schema metadata (see :func:`_schema_descriptor`)
_DESCRIPTORS: LRU[
    tuple[tuple[int, ...], tuple[tuple[bytes, bytes], ...]], tuple[tuple[LanceField, ...], bytes]
] = LRU(64)


def _size(batch: pa.RecordBatch) -> int:
    """The bytes of a batch as :meth:`LanceFileWriter._small` weighs them: its buffers' whole size
    when that is small already (an upper bound, known at once), else the bytes its rows reference
    (``nbytes``, which walks every buffer: a fixed cost a small append would pay in full)."""
    whole = batch.get_total_buffer_size()
    return whole if whole < _inline_bytes() else batch.nbytes


def _inline_bytes() -> int:
    """The bytes of work below which encoding stays on the calling thread: the bound measured on
    2 cores, shrunk in proportion on more (16 encoding workers: an eighth of it)."""
    if INLINE_ENCODE_BYTES <= MIN_INLINE_ENCODE_BYTES:
        return INLINE_ENCODE_BYTES  # (tests set it to 0 to force the pools)
    return max(MIN_INLINE_ENCODE_BYTES, INLINE_ENCODE_BYTES * 2 // max(workers(), 2))


def _run_all(calls: Sequence[Callable[[], None]]) -> None:
    for call in calls:
        call()


def write_table(
    path: str | os.PathLike[str] | IO[bytes],
    table: pa.Table | pa.RecordBatch,
    *,
    version: str = "2.0",
    page_size_bytes: int = DEFAULT_PAGE_SIZE,
) -> WrittenFile:
    """Write a whole table into one Lance file of format ``version``.

    Example:
        ```python
        from lance_table.file import write_table
        from lance_table.file.reader import LanceFileReader as FileReader

        written = write_table(f"{tmp}/t.lance", table, version="2.1")
        assert FileReader(f"{tmp}/t.lance").read_all().num_rows == written.num_rows
        ```
    """
    writer = LanceFileWriter(path, table.schema, version=version, page_size_bytes=page_size_bytes)
    try:
        writer.write(table)
    except BaseException:
        writer.abort()
        raise
    return writer.close()
