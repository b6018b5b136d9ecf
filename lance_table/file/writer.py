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
import struct
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Any, cast

import numpy as np
import pyarrow as pa

from lance_table._parallel import ENCODE, WRITE, map_on, pool
from lance_table._proto import encodings_v2_0_pb2, file2_pb2, file_pb2
from lance_table.errors import SchemaError, UnsupportedFormatError
from lance_table.file.container import (
    FOOTER_STRUCT,
    MAGIC,
    PADDING_BYTE,
    PAGE_ALIGNMENT,
    URL_ARRAY_ENCODING,
    URL_COLUMN_ENCODING,
    URL_PAGE_LAYOUT,
    FileVersion,
    pack_encoding,
)
from lance_table.file.fields import BLOB_DESCRIPTOR, is_blob
from lance_table.file.v2_0 import encode as encode20
from lance_table.file.v2_0.layout import is_packed_struct
from lance_table.file.v2_1 import encode as encode21
from lance_table.file.v2_1.blob_v2 import is_blob_v2
from lance_table.file.v2_1.blob_v2_encode import BlobV2ColumnWriter, SidecarFiles, SidecarOpener, file_fields
from lance_table.schema import FieldNode, LanceField, build_tree, fields_from_arrow, fields_to_pb

DEFAULT_PAGE_SIZE = 8 * 1024 * 1024


@dataclass(frozen=True)
class WrittenFile:
    """What a finished file holds: enough for a manifest's DataFile entry."""

    num_rows: int
    size: int
    version: FileVersion
    field_ids: tuple[int, ...]
    column_indices: tuple[int, ...]


class _Sink:
    """Position-tracking output with 64-byte aligned buffer writes."""

    def __init__(self, fobj: IO[bytes]) -> None:
        self.f = fobj
        self.pos = 0

    def write(self, data: Any) -> None:
        n = data.size if isinstance(data, pa.Buffer) else memoryview(data).nbytes
        if n:
            self.f.write(data)
            self.pos += n

    def write_buffer(self, data: Any) -> tuple[int, int]:
        """Write one page buffer and its padding; return its (offset, size)."""
        offset = self.pos
        for piece in data if isinstance(data, list) else [data]:  # a buffer may come in pieces
            self.write(piece)
        size = self.pos - offset
        pad = -self.pos % PAGE_ALIGNMENT
        if pad:
            self.write(PADDING_BYTE * pad)
        return offset, size


class _ColumnOut:
    """The pages written so far for one physical column."""

    def __init__(self, index: int, column_encoding: Any) -> None:
        self.index = index
        self.meta = file2_pb2.ColumnMetadata()
        pack_encoding(column_encoding, URL_COLUMN_ENCODING, self.meta.encoding)

    def add_page(
        self,
        sink: _Sink,
        enc: Any,
        buffers: list[Any],
        length: int,
        url: str = URL_ARRAY_ENCODING,
        priority: int = 0,
    ) -> None:
        page = self.meta.pages.add()
        for data in buffers:
            off, size = sink.write_buffer(data)
            page.buffer_offsets.append(off)
            page.buffer_sizes.append(size)
        page.length = length
        page.priority = priority
        pack_encoding(enc, url, page.encoding)


def _values_column_encoding() -> Any:
    enc = encodings_v2_0_pb2.ColumnEncoding()
    enc.values.SetInParent()
    return enc


class _FieldWriter:
    """Receives the arrays of one field and writes its column(s)."""

    def append(self, arr: pa.Array) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class _LeafWriter(_FieldWriter):
    def __init__(self, writer: LanceFileWriter, node: FieldNode) -> None:
        self.w = writer
        self.node = node
        self.out = writer._new_column(_values_column_encoding())
        self.pending: list[pa.Array] = []
        self.pending_bytes = 0
        # Like pylance, a column that received data (even zero values) gets at least one page.
        self.received: pa.Array | None = None

    def append(self, arr: pa.Array) -> None:
        if self.received is None:
            self.received = arr.slice(0, 0)
        if not len(arr):
            return
        self.pending.append(arr)
        self.pending_bytes += arr.nbytes
        budget = self.w.page_size_bytes
        while self.pending_bytes >= budget:
            total = sum(len(a) for a in self.pending)
            rows = max(1, int(budget * total / max(self.pending_bytes, 1)))
            if rows >= total:
                self._flush(self.pending)
                self.pending, self.pending_bytes = [], 0
                return
            head, self.pending = _split(self.pending, rows)
            self._flush(head)
            self.pending_bytes = sum(a.nbytes for a in self.pending)

    def finish(self) -> None:
        if self.pending:
            self._flush(self.pending)
            self.pending, self.pending_bytes = [], 0
        elif self.received is not None and not self.out.meta.pages:
            self._flush([self.received])

    def _flush(self, chunks: list[pa.Array]) -> None:
        """Encode buffered arrays as one page (without concatenating them where the encoding allows)."""
        bufs = encode20.PageBuffers()
        enc = self.encode(chunks, bufs)
        self.out.add_page(self.w._sink, enc, bufs.items, sum(len(c) for c in chunks))

    def encode(self, chunks: list[pa.Array], bufs: encode20.PageBuffers) -> Any:
        if is_packed_struct(self.node):
            return encode20.encode_packed_struct(_concat(chunks), bufs)
        return encode20.encode_leaf_chunks(chunks, bufs)


class _BlobWriter(_LeafWriter):
    """Blob columns: each value is its own buffer; pages hold (position, size) descriptors."""

    def __init__(self, writer: LanceFileWriter, node: FieldNode) -> None:
        super().__init__(writer, node)
        enc = encodings_v2_0_pb2.ColumnEncoding()
        enc.blob.inner.values.SetInParent()
        self.out.meta.ClearField("encoding")
        pack_encoding(enc, URL_COLUMN_ENCODING, self.out.meta.encoding)

    def append(self, arr: pa.Array) -> None:
        """Write the blob bytes right away and buffer only their (position, size) descriptors.

        Empty values are ``(0, 0)`` and nulls ``(1, 0)``, as pylance writes them.
        """
        n = len(arr)
        large = pa.types.is_large_binary(arr.type)
        offs = np.frombuffer(
            arr.buffers()[1], np.int64 if large else np.int32, n + 1, arr.offset * (8 if large else 4)
        )
        valid = np.asarray(arr.is_valid())
        sizes = np.where(valid, np.diff(offs), 0).astype(np.uint64)
        positions = np.where(valid, 0, 1).astype(np.uint64)
        data = arr.buffers()[2]
        sink = self.w._sink
        for i in np.flatnonzero(sizes).tolist():
            positions[i], _ = sink.write_buffer(data.slice(int(offs[i]), int(sizes[i])))
        desc = pa.StructArray.from_arrays(
            [pa.array(positions), pa.array(sizes)], fields=list(BLOB_DESCRIPTOR)
        )
        super().append(desc)

    def encode(self, chunks: list[pa.Array], bufs: encode20.PageBuffers) -> Any:
        return encode20.encode_packed_struct(_concat(chunks), bufs)


class _StructWriter(_FieldWriter):
    def __init__(self, writer: LanceFileWriter, node: FieldNode) -> None:
        self.w = writer
        self.node = node
        self.out = writer._new_column(_values_column_encoding())
        self.children = [writer._field_writer(c) for c in node.children]
        self.rows = 0

    def append(self, arr: pa.Array) -> None:
        if arr.null_count:
            raise SchemaError(
                f"struct field {self.node.name!r} has null rows: Lance 2.0 does not store struct validity"
            )
        self.rows += len(arr)
        for i, child in enumerate(self.children):
            child.append(arr.field(i))

    def finish(self) -> None:
        for child in self.children:
            child.finish()
        self.out.add_page(self.w._sink, encode20.struct_header(), [], self.rows)


class _ListWriter(_FieldWriter):
    def __init__(self, writer: LanceFileWriter, node: FieldNode) -> None:
        self.w = writer
        self.node = node
        self.out = writer._new_column(_values_column_encoding())
        self.child = writer._field_writer(node.children[0])
        self.lengths: list[np.ndarray] = []
        self.valid: list[np.ndarray] = []
        self.pending_rows = 0
        self.received = False

    def append(self, arr: pa.Array) -> None:
        n = len(arr)
        self.received = True
        if not n:
            self.child.append(arr.values.slice(0, 0))
            return
        large = pa.types.is_large_list(arr.type)
        offs = np.frombuffer(
            arr.buffers()[1], np.int64 if large else np.int32, n + 1, arr.offset * (8 if large else 4)
        )
        offs = offs.astype(np.int64)
        lengths = np.diff(offs)
        if arr.null_count:
            valid = np.asarray(arr.is_valid())
            lengths = np.where(valid, lengths, 0)
            items = arr.values.take(pa.array(_item_positions(offs[:-1], lengths)))
        else:
            valid = np.ones(n, bool)
            items = arr.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
        self.child.append(items)
        self.lengths.append(lengths)
        self.valid.append(valid)
        self.pending_rows += n
        if self.pending_rows * 8 >= self.w.page_size_bytes:
            self._flush()

    def _flush(self) -> None:
        if not self.pending_rows and (self.out.meta.pages or not self.received):
            return
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        valid = np.concatenate(self.valid) if self.valid else np.zeros(0, bool)
        bufs = encode20.PageBuffers()
        enc = encode20.encode_list_offsets(lengths, valid, bufs)
        self.out.add_page(self.w._sink, enc, bufs.items, lengths.size)
        self.lengths, self.valid, self.pending_rows = [], [], 0

    def finish(self) -> None:
        self._flush()
        self.child.finish()


class _StructuralWriter(_FieldWriter):
    """A top-level field of a 2.1/2.2 file: one column per leaf, each paged on its own."""

    def __init__(self, writer: LanceFileWriter, node: FieldNode) -> None:
        large = writer.version is FileVersion.V2_2
        self.deferred: list[Callable[[], None]] | None = None
        self.leaves = []
        for path in encode21.leaf_paths(node):
            out = writer._new_column(_values_column_encoding())
            self.leaves.append(
                encode21.LeafColumnWriter(
                    path,
                    self._page_sink(writer, out),
                    writer.page_size_bytes,
                    large,
                    blob_sink=lambda data: writer._sink.write_buffer(data)[0],
                )
            )
            writer._leaf_ids.append(path[-1].id)

    def _page_sink(self, writer: LanceFileWriter, out: _ColumnOut) -> encode21.PageSink:
        def add(layout: Any, buffers: list[bytes], rows: int, first_row: int) -> None:
            if self.deferred is not None:  # encoding on threads: written by ``flush``, in order
                self.deferred.append(
                    lambda: out.add_page(writer._sink, layout, buffers, rows, URL_PAGE_LAYOUT, first_row)
                )
            else:
                out.add_page(writer._sink, layout, buffers, rows, URL_PAGE_LAYOUT, first_row)

        return add

    @property
    def writes_blobs(self) -> bool:
        return any(leaf.blob_sink is not None for leaf in self.leaves)

    def defer(self) -> None:
        """Keep the pages encoded from now on until :meth:`flush` (the leaves may then run on
        threads: only ``flush`` touches the file)."""
        self.deferred = []

    def take_deferred(self) -> list[Callable[[], None]]:
        """The kept pages' writes, leaf by leaf; pages are written directly again."""
        pages, self.deferred = self.deferred or [], None
        return pages

    def append(self, arr: pa.Array) -> None:
        for leaf in self.leaves:
            leaf.append(arr)

    def finish(self) -> None:
        for leaf in self.leaves:
            leaf.finish()


def _item_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + lengths[i]`` for every i, concatenated (vectorized)."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    step = np.ones(total, np.int64)
    step[0] = starts[0]
    bounds = np.cumsum(lengths)[:-1]
    step[bounds] = starts[1:] - (starts[:-1] + lengths[:-1]) + 1
    return np.cumsum(step)


def _split(chunks: list[pa.Array], rows: int) -> tuple[list[pa.Array], list[pa.Array]]:
    """The first ``rows`` rows of ``chunks`` and the rest, by slicing (no copies)."""
    head: list[pa.Array] = []
    for i, chunk in enumerate(chunks):
        if rows >= len(chunk):
            head.append(chunk)
            rows -= len(chunk)
            continue
        if rows:
            head.append(chunk.slice(0, rows))
        return head, [chunk.slice(rows), *chunks[i + 1 :]]
    return head, []


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


class LanceFileWriter:
    """Writes one Lance data file (format 2.0, 2.1 or 2.2) from a stream of record batches.

    Args:
        sink: a local path or a writable binary file object (e.g. from ``fsspec.open(..., "wb")``).
            A file object is not closed by the writer.
        schema: the Arrow schema of the data; field and schema metadata are stored.
        version: the file format version: ``"2.0"``, ``"2.1"``, ``"2.2"`` or ``"stable"`` (2.2).
        page_size_bytes: the byte budget after which a column's buffered values become a page.
        fields: Lance fields to store instead of numbering the schema from 0 (dataset field ids).
        blob_sidecars: 2.2 files: opens a sidecar file of this data file by name, for blob v2
            values too large to be inline (see :mod:`v2_1.blob_v2_encode`).

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
    ) -> None:
        self.version = FileVersion.parse(version)
        self._sidecars = SidecarFiles(blob_sidecars)
        if page_size_bytes <= 0:
            raise ValueError("page_size_bytes must be positive")
        self.schema = schema
        self.page_size_bytes = int(page_size_bytes)
        self.fields = list(fields) if fields is not None else fields_from_arrow(schema)
        self._roots = build_tree(self.fields)
        _check_matches(self._roots, schema)
        self._columns: list[_ColumnOut] = []
        self._leaf_ids: list[int] = []
        self._writers = [self._field_writer(root) for root in self._roots]
        # Opened last: a schema error above leaves no file behind.
        self._owns_file = isinstance(sink, (str, os.PathLike))
        fobj: IO[bytes] = open(sink, "wb") if isinstance(sink, (str, os.PathLike)) else sink  # noqa: SIM115
        self._sink = _Sink(fobj)
        self._io: Future[None] | None = None  # the pages of the last batch, being written
        self.num_rows = 0
        self._closed = False

    def _new_column(self, column_encoding: Any) -> _ColumnOut:
        col = _ColumnOut(len(self._columns), column_encoding)
        self._columns.append(col)
        return col

    def _field_writer(self, node: FieldNode) -> _FieldWriter | BlobV2ColumnWriter:
        t = node.arrow_type
        writer: _FieldWriter
        if is_blob_v2(node.field):  # one descriptor column; blobs inline or in sidecars
            if self.version is not FileVersion.V2_2:
                raise UnsupportedFormatError(f"field {node.name!r}: blob v2 columns need format 2.2 files")
            out = self._new_column(_values_column_encoding())
            self._leaf_ids.append(node.id)

            def pages(layout: Any, buffers: list[Any], rows: int, first_row: int) -> None:
                out.add_page(self._sink, layout, buffers, rows, URL_PAGE_LAYOUT, first_row)

            inline = lambda data: self._sink.write_buffer(data)[0]  # noqa: E731
            return BlobV2ColumnWriter(node, pages, inline, self._sidecars, self.page_size_bytes)
        if any(is_blob_v2(n.field) for n in node.walk()):
            raise UnsupportedFormatError(f"field {node.name!r}: blob v2 columns inside it are not written")
        if self.version is not FileVersion.V2_0:
            return _StructuralWriter(self, node)
        if pa.types.is_map(t):
            raise SchemaError(f"field {node.name!r}: maps cannot be stored in Lance 2.0 files")
        if pa.types.is_struct(t) and not is_packed_struct(node):
            writer = _StructWriter(self, node)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            writer = _ListWriter(self, node)
        elif is_blob(node):
            writer = _BlobWriter(self, node)
        else:
            writer = _LeafWriter(self, node)
        return writer

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        """Append the rows of a record batch or table.

        Raises:
            SchemaError: the data's schema differs from the writer's.
        """
        if self._closed:
            raise ValueError("the writer is closed")
        if not _same_types(data.schema, self.schema):
            raise SchemaError(f"data schema {data.schema} does not match the file schema {self.schema}")
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            if not batch.num_rows:
                continue  # pylance skips empty batches as well
            if self._parallel_leaves():
                work = [
                    functools.partial(leaf.append, column)
                    for writer, column in zip(self._writers, batch.columns)
                    for leaf in cast(_StructuralWriter, writer).leaves
                ]
                self._encode_on_threads(work)
            else:
                for writer, column in zip(self._writers, batch.columns):
                    writer.append(column)
            self.num_rows += batch.num_rows

    write_batch = write

    def _parallel_leaves(self) -> bool:
        """Whether the columns are encoded on threads: 2.1/2.2 files of several leaf columns, none
        of them blobs (whose values go to the file as they come)."""
        structural = [w for w in self._writers if isinstance(w, _StructuralWriter)]
        if len(structural) != len(self._writers):
            return False
        return sum(len(w.leaves) for w in structural) > 1 and not any(w.writes_blobs for w in structural)

    def _encode_on_threads(self, work: Sequence[Callable[[], None]]) -> None:
        """Run leaf encoders on the encoding pool; their pages are written afterwards, in column
        order, so the file is the same as a serial write makes."""
        writers = [cast(_StructuralWriter, w) for w in self._writers]
        for w in writers:
            w.defer()
        try:
            map_on(ENCODE, lambda call: call(), work)
        except BaseException:
            for w in writers:
                w.deferred = None
            raise
        writes = [write for w in writers for write in w.take_deferred()]
        # The previous batch's pages are written by now (or their error surfaces here); this
        # batch's are written while the next one is encoded, in column order as before.
        self._drain()
        if writes:
            self._io = pool(WRITE).submit(_run_all, writes)

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
            leaves = [leaf for w in self._writers for leaf in cast(_StructuralWriter, w).leaves]
            self._encode_on_threads([leaf.finish for leaf in leaves])
        else:
            for writer in self._writers:
                writer.finish()
        self._drain()
        self._sidecars.close()
        sink = self._sink
        descriptor = file_pb2.FileDescriptor()
        fields_to_pb(file_fields(self.fields), descriptor.schema.fields)
        for k, v in (self.schema.metadata or {}).items():
            descriptor.schema.metadata[k.decode()] = v
        descriptor.length = self.num_rows
        gb0 = descriptor.SerializeToString()
        gb0_pos = sink.pos
        sink.write(gb0)
        cm_start = sink.pos
        cmo = []
        for col in self._columns:
            blob = col.meta.SerializeToString()
            cmo.append((sink.pos, len(blob)))
            sink.write(blob)
        cmo_start = sink.pos
        sink.write(b"".join(struct.pack("<QQ", p, s) for p, s in cmo))
        gbo_start = sink.pos
        sink.write(struct.pack("<QQ", gb0_pos, len(gb0)))
        major, minor = self.version.footer
        sink.write(
            FOOTER_STRUCT.pack(cm_start, cmo_start, gbo_start, 1, len(self._columns), major, minor) + MAGIC
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


def _run_all(calls: Sequence[Callable[[], None]]) -> None:
    for call in calls:
        call()


def _same_types(a: pa.Schema, b: pa.Schema) -> bool:
    return len(a) == len(b) and all(x.name == y.name and x.type == y.type for x, y in zip(a, b))


def _check_matches(roots: list[FieldNode], schema: pa.Schema) -> None:
    if len(roots) != len(schema) or any(
        r.name != f.name or r.arrow_type != f.type for r, f in zip(roots, schema)
    ):
        raise SchemaError("the Lance fields do not describe the Arrow schema")


def write_table(
    path: str | os.PathLike[str] | IO[bytes],
    table: pa.Table | pa.RecordBatch,
    *,
    version: str = "2.0",
    page_size_bytes: int = DEFAULT_PAGE_SIZE,
) -> WrittenFile:
    """Write a whole table into one Lance file of format ``version``."""
    writer = LanceFileWriter(path, table.schema, version=version, page_size_bytes=page_size_bytes)
    try:
        writer.write(table)
    except BaseException:
        writer.abort()
        raise
    return writer.close()
