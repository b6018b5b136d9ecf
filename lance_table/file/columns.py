"""The column writers behind :class:`~lance_table.file.writer.LanceFileWriter`.

A :class:`FieldWriter` receives the arrays of one top-level field (or, in 2.0 files, of one field
of the tree) and writes its physical columns as pages through the file's :class:`Sink`: the 2.0
writers here encode with :mod:`v2_0.encode` (one column per field, structs and lists as their own
columns); :class:`StructuralWriter` writes a 2.1/2.2 field as one column per leaf with
:mod:`v2_1.encode`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import IO, Any, Protocol

import numpy as np
import pyarrow as pa

from lance_table._proto import encodings_v2_0_pb2, file2_pb2
from lance_table.errors import SchemaError
from lance_table.file.arrow_take import take
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
from lance_table.file.fields import BLOB_DESCRIPTOR, array_overhead
from lance_table.file.v2_0 import encode as encode20
from lance_table.file.v2_0.layout import is_packed_struct
from lance_table.file.v2_1 import encode as encode21
from lance_table.file.v2_1.packed_var_encode import check_variable_packed, has_variable_child
from lance_table.file.v2_1.values_encode import compression_scheme
from lance_table.schema import FieldNode


class FileOut(Protocol):
    """What the column writers use of the file writer that owns them."""

    version: FileVersion
    page_size_bytes: int
    max_page_bytes: int | None
    _sink: Sink
    _leaf_ids: list[int]

    def _new_column(self, column_encoding: Any) -> ColumnOut: ...

    def _field_writer(self, node: FieldNode) -> Any: ...


class Sink:
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
        if type(data) is bytes:  # (most page buffers: written without looking further)
            if data:
                self.f.write(data)
                self.pos += len(data)
        else:
            for piece in data if isinstance(data, list) else [data]:  # a buffer may come in pieces
                self.write(piece)
        size = self.pos - offset
        pad = -self.pos % PAGE_ALIGNMENT
        if pad:
            self.f.write(_PADDING[pad])
            self.pos += pad
        return offset, size


#: the padding of each length up to an alignment
_PADDING = [PADDING_BYTE * k for k in range(PAGE_ALIGNMENT)]


class ColumnOut:
    """The pages written so far for one physical column."""

    def __init__(self, index: int, column_encoding: Any) -> None:
        self.index = index
        self.meta = file2_pb2.ColumnMetadata()
        if column_encoding is _VALUES_COLUMN_ENCODING:  # (packed once: every column has it)
            self.meta.encoding.CopyFrom(_VALUES_COLUMN_PACKED)
        else:
            pack_encoding(column_encoding, URL_COLUMN_ENCODING, self.meta.encoding)

    def add_page(
        self,
        sink: Sink,
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


def write_tail(
    sink: Sink,
    descriptor: bytes,
    global_buffers: Sequence[bytes],
    columns: Sequence[bytes],
    version: FileVersion,
) -> None:
    """Write what follows a file's pages: the file descriptor (global buffer 0, ``descriptor``),
    the other ``global_buffers`` (each 64-byte aligned), each column's serialized
    ``ColumnMetadata``, the two offset tables and the footer."""
    gbs = [(sink.pos, len(descriptor))]
    sink.write(descriptor)
    for extra in global_buffers:  # pylance wants them 64-byte aligned, as pages
        sink.write(PADDING_BYTE * (-sink.pos % PAGE_ALIGNMENT))
        gbs.append(sink.write_buffer(extra))
    cm_start = sink.pos
    cmo = []
    for blob in columns:
        cmo.append((sink.pos, len(blob)))
        sink.write(blob)
    cmo_start = sink.pos
    sink.write(b"".join(struct.pack("<QQ", p, s) for p, s in cmo))
    gbo_start = sink.pos
    sink.write(b"".join(struct.pack("<QQ", p, s) for p, s in gbs))
    major, minor = version.footer
    sink.write(
        FOOTER_STRUCT.pack(cm_start, cmo_start, gbo_start, len(gbs), len(columns), major, minor) + MAGIC
    )


def values_column_encoding() -> Any:
    """The ``values`` column encoding of every column but a blob one (one shared message: it is
    never changed)."""
    return _VALUES_COLUMN_ENCODING


_VALUES_COLUMN_ENCODING = encodings_v2_0_pb2.ColumnEncoding()
_VALUES_COLUMN_ENCODING.values.SetInParent()
_VALUES_COLUMN_PACKED = file2_pb2.Encoding()
pack_encoding(_VALUES_COLUMN_ENCODING, URL_COLUMN_ENCODING, _VALUES_COLUMN_PACKED)


class FieldWriter:
    """Receives the arrays of one field and writes its column(s)."""

    def append(self, arr: pa.Array) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class LeafWriter(FieldWriter):
    def __init__(self, writer: FileOut, node: FieldNode) -> None:
        self.w = writer
        self.node = node
        self.out = writer._new_column(values_column_encoding())
        self.pending: list[pa.Array] = []
        self.pending_bytes = 0
        # Like pylance, a column that received data (even zero values) gets at least one page.
        self.received: pa.Array | None = None

    def append(self, arr: pa.Array) -> None:
        """Buffer ``arr``; past the page size, write everything buffered, as pylance's 2.0 writer.

        Like pylance's accumulation queue, the buffered arrays (each counted with its in-memory
        overhead, see ``array_overhead``) become one page as soon as they pass the page size,
        however far past it; only an array that passes it alone is split, into even pages of at
        most ``max_page_bytes`` (four times the page size unless given: pylance's 32 MiB at the
        default 8 MiB). A million rows of 16 float32s are two pages, as pylance writes them, not
        eight of 8 MiB: scans touch fewer pages.
        """
        if self.received is None:
            self.received = arr.slice(0, 0)
        if not len(arr):
            return
        self.pending.append(arr)
        self.pending_bytes += arr.nbytes + array_overhead(arr.type)
        if self.pending_bytes <= self.w.page_size_bytes:
            return
        self._flush_pending()

    def _flush_pending(self) -> None:
        """Write the buffered arrays as one page; a single array as even pages of at most
        ``max_page_bytes``."""
        chunks, self.pending, self.pending_bytes = self.pending, [], 0
        if len(chunks) > 1:
            self._flush(chunks)
            return
        arr = chunks[0]
        rows = len(arr)
        parts = min(-(-arr.nbytes // (self.w.max_page_bytes or 4 * self.w.page_size_bytes)), rows)
        step = -(-rows // max(parts, 1))
        for start in range(0, rows, step):
            self._flush([arr.slice(start, step)])

    def finish(self) -> None:
        if self.pending:
            self._flush_pending()
        elif self.received is not None and not self.out.meta.pages:
            self._flush([self.received])

    def _flush(self, chunks: list[pa.Array]) -> None:
        """Encode buffered arrays as one page (without concatenating them where the encoding allows)."""
        bufs = encode20.PageBuffers()
        enc = self.encode(chunks, bufs)
        self.out.add_page(self.w._sink, enc, bufs.items, sum(len(c) for c in chunks))

    def encode(self, chunks: list[pa.Array], bufs: encode20.PageBuffers) -> Any:
        if is_packed_struct(self.node):
            if has_variable_child(self.node.arrow_type):  # pylance packs only fixed widths in 2.0
                check_variable_packed(self.node, v2_2=False)
            return encode20.encode_packed_struct(_concat(chunks), bufs)
        scheme = compression_scheme(self.node.field.metadata)
        return encode20.encode_leaf_chunks(chunks, bufs, scheme)


class BlobWriter(LeafWriter):
    """Blob columns: each value is its own buffer; pages hold (position, size) descriptors."""

    def __init__(self, writer: FileOut, node: FieldNode) -> None:
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


class StructWriter(FieldWriter):
    def __init__(self, writer: FileOut, node: FieldNode) -> None:
        self.w = writer
        self.node = node
        self.out = writer._new_column(values_column_encoding())
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


class ListWriter(FieldWriter):
    def __init__(self, writer: FileOut, node: FieldNode) -> None:
        self.w = writer
        self.node = node
        self.out = writer._new_column(values_column_encoding())
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
            items = take(arr.values, pa.array(_item_positions(offs[:-1], lengths)))
        else:
            valid = np.ones(n, bool)
            items = arr.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
        self.child.append(items)
        self.lengths.append(lengths)
        self.valid.append(valid)
        self.pending_rows += n
        if self.pending_rows * 8 >= _page_budget(self.w):
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


class StructuralWriter(FieldWriter):
    """A top-level field of a 2.1/2.2 file: one column per leaf, each paged on its own."""

    def __init__(self, writer: FileOut, node: FieldNode, plan: encode21.LeafPlan | None = None) -> None:
        """``plan``: :func:`encode21.leaf_plan` of ``node`` for the writer's version, when known."""
        large = writer.version is FileVersion.V2_2
        # while encoding on threads: each leaf's page writes, kept until ``take_deferred``
        self.deferred: list[list[Callable[[], None]]] | None = None
        self.leaves: list[encode21.LeafColumnWriter] = []
        for path, facts in plan if plan is not None else encode21.leaf_plan(node, large):
            out = writer._new_column(values_column_encoding())
            self.leaves.append(
                encode21.LeafColumnWriter(
                    path,
                    self._page_sink(writer, out, len(self.leaves)),
                    writer.page_size_bytes,
                    large,
                    blob_sink=lambda data: writer._sink.write_buffer(data)[0],
                    max_page_bytes=writer.max_page_bytes,
                    facts=facts,
                )
            )
            writer._leaf_ids.append(path[-1].id)

    def _page_sink(self, writer: FileOut, out: ColumnOut, leaf: int) -> encode21.PageSink:
        def add(layout: Any, buffers: list[bytes], rows: int, first_row: int) -> None:
            if self.deferred is not None:  # encoding on threads: written later, in leaf order
                self.deferred[leaf].append(
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
        self.deferred = [[] for _ in self.leaves]

    def take_deferred(self) -> list[Callable[[], None]]:
        """The kept pages' writes, leaf by leaf (whichever leaf's thread finished first: the
        file is the one a serial write makes); pages are written directly again."""
        kept, self.deferred = self.deferred or [], None
        return [write for pages in kept for write in pages]

    def append(self, arr: pa.Array) -> None:
        for leaf in self.leaves:
            leaf.append(arr)

    def finish(self) -> None:
        for leaf in self.leaves:
            leaf.finish()


def _page_budget(writer: FileOut) -> int:
    """The bytes a 2.0 column buffers before they become a page: the page size, or less when
    ``max_page_bytes`` asks for smaller pages (pylance splits 2.0 pages at it)."""
    if writer.max_page_bytes is None:
        return writer.page_size_bytes
    return min(writer.page_size_bytes, writer.max_page_bytes)


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


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
