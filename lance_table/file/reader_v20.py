"""The reads of fields of Lance 2.0 files that are not decoded page by page on threads: structs,
lists, strings stored as lists of bytes, and blobs (part of
:class:`~lance_table.file.reader.LanceFileReader`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file.arrow import build_binary, concat_chunks
from lance_table.file.column_pages import ColumnPages
from lance_table.file.fields import BLOB_DESCRIPTOR
from lance_table.file.pageio import PageIO
from lance_table.file.reader_core import ReaderCore
from lance_table.file.runs import Runs
from lance_table.file.v2_0 import decode as decode20
from lance_table.file.v2_0 import nested as nested20
from lance_table.file.v2_0.layout import is_packed_struct
from lance_table.schema import FieldNode


class V20Reads(ReaderCore):
    """Reads of whole fields of a 2.0 file, recursively through structs and lists."""

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
            raise UnsupportedFormatError("maps cannot be stored in Lance 2.0 files", path=self._source.name)
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
        return nested20.list_array(node.arrow_type, valid, lengths, items, node.name, self._source.name)

    def _read_blobs(self, col: ColumnPages, runs: Runs, dtype: pa.DataType) -> pa.Array:
        descriptors = [
            decode20.decode(col.encoding(p, self._source), io, local, BLOB_DESCRIPTOR)
            for p, local, io in self._pages(col, runs)
        ]
        io = PageIO(self._source, col.pb.pages[0], col.pb, self._meta.global_buffers, f"column {col.index}")
        return nested20.blob_array(concat_chunks(descriptors, BLOB_DESCRIPTOR), self._source, dtype, io)
