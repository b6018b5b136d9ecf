"""Streaming writer of legacy Lance data files (format 0.1, whose footer says 0.2).

Rows are cut into row groups ("batches") of ``max_rows_per_group`` rows, whatever the sizes of the
incoming record batches, as pylance's legacy writer does; at most one group is buffered. Each group
is written field by field in schema order, depth first: one page per field and group (lists: the
offsets page, then the child's pages; structs: their children only). ``close()`` then writes the
page table, the page statistics (:mod:`.stats_encode`) and their page table, the dictionary values,
a copy of the schema as a table Manifest, the ``Metadata`` message and the 16-byte footer.

The format stores no validity: nulls become the values the Arrow buffers hold (zeros, as pyarrow
builds them; ``False`` for bools; empty strings, which read back as null), exactly as pylance writes
them. Nulls in fields that are not nullable are refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._lazy import version as library_version
from lance_table._proto import file_pb2, table_pb2
from lance_table.errors import SchemaError
from lance_table.file.legacy.checks import (
    check_dictionary_nulls,
    check_nulls,
    check_storable,
    has_dictionary,
)
from lance_table.file.legacy.container import (
    LEGACY_FOOTER_STRUCT,
    LEGACY_FOOTER_VERSION,
    LEGACY_LENGTH_PREFIX,
    LEGACY_MAGIC,
)
from lance_table.file.legacy.stats_encode import StatisticsCollector, stats_arrays, stats_schema
from lance_table.format.dictionaries import is_prefix
from lance_table.format.manifest import WRITER_LIBRARY
from lance_table.schema import (
    FieldNode,
    LanceField,
    build_tree,
    fields_from_arrow,
    fields_to_pb,
    is_binary_like,
    utf8_metadata,
)

_INT32_MAX = (1 << 31) - 1
_MAX_ID_SPAN = 1 << 20

DEFAULT_MAX_ROWS_PER_GROUP = 1024


@dataclass(frozen=True)
class LegacyWrittenFile:
    """What a finished legacy file holds: enough for a manifest's DataFile entry.

    ``field_ids`` are all the schema's field ids, sorted (parents included); legacy files have no
    column indices. ``major_version``/``minor_version`` are what the DataFile records (0, 2).
    ``dictionaries`` holds, per dictionary field id, the values the file's keys index. pylance reads
    a legacy dataset's dictionary fields with the values stored in the *dataset manifest*, not the
    file's copy, so the manifest must carry these values (they extend the ``dictionaries`` given
    to the writer, never reorder them).
    """

    num_rows: int
    size: int
    field_ids: tuple[int, ...]
    column_indices: tuple[int, ...] = ()
    major_version: int = LEGACY_FOOTER_VERSION[0]
    minor_version: int = LEGACY_FOOTER_VERSION[1]
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict)


class _Out:
    """A binary sink that knows its position."""

    def __init__(self, fobj: IO[bytes]) -> None:
        self.f = fobj
        self.pos = 0

    def write(self, data: Any) -> int:
        """Write ``data``; return the position it starts at."""
        start = self.pos
        n = data.size if isinstance(data, pa.Buffer) else memoryview(data).nbytes
        if n:
            self.f.write(data)
            self.pos += n
        return start


class LegacyFileWriter:
    """Writes one legacy (0.1) Lance data file from a stream of record batches.

    Args:
        dest: a local path or a writable binary file object (not closed by the writer; positions
            in the file count from where the object stands when writing starts, so pass it at 0).
        schema: the Arrow schema of the data.
        fields: the Lance fields to store (the dataset's field ids, when appending to a dataset);
            by default the schema is numbered from 0 in pre-order.
        max_rows_per_group: the rows of one row group (the last group may be shorter).
        writer_version: the ``(library, version)`` recorded in the file's schema copy.
        dictionaries: per dictionary field id, the values the keys must index (the dataset's
            dictionary, when appending); values the data brings that are not among them are
            appended at the end.

    Raises:
        SchemaError: the schema holds a type legacy files cannot store (maps, dictionaries of
            other than integer keys and numeric or binary values), or ``fields`` do not describe it
            (or carry negative or absurdly spread ids).
        ValueError: ``max_rows_per_group`` is not positive.
    """

    def __init__(
        self,
        dest: str | os.PathLike[str] | IO[bytes],
        schema: pa.Schema,
        *,
        fields: Iterable[LanceField] | None = None,
        max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
        writer_version: tuple[str, str] | None = None,
        dictionaries: Mapping[int, pa.Array] | None = None,
    ) -> None:
        if max_rows_per_group <= 0:
            raise ValueError("max_rows_per_group must be positive")
        self.schema = schema
        self.fields = list(fields) if fields is not None else fields_from_arrow(schema)
        if not self.fields:
            raise SchemaError("a legacy Lance file needs at least one field")
        self._roots = build_tree(self.fields)
        if len(self._roots) != len(schema) or any(
            r.name != f.name or r.arrow_type != f.type for r, f in zip(self._roots, schema)
        ):
            raise SchemaError("the Lance fields do not describe the Arrow schema")
        for root in self._roots:
            check_storable(root)
        self._schema_metadata = utf8_metadata(schema.metadata, "schema")
        self.max_rows_per_group = int(max_rows_per_group)
        self.writer_version = writer_version or (WRITER_LIBRARY, library_version())
        ids = [f.id for f in self.fields]
        self._min_id, self._max_id = min(ids), max(ids)
        if self._min_id < 0 or self._max_id - self._min_id >= _MAX_ID_SPAN:
            # The page table has a row per id in between: refuse absurd ids rather than allocate.
            raise SchemaError(f"field ids {self._min_id}..{self._max_id} are out of range for a legacy file")
        self._pages: list[np.ndarray] = []  # per batch: (max_id - min_id + 1, 2) int64
        self._batch_offsets = [0]
        self._stats = StatisticsCollector(self._roots)
        # field id -> the file's dictionary values
        self._dicts: dict[int, pa.Array] = {k: v for k, v in (dictionaries or {}).items()}
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._closed = False
        # Opened last: a schema error above leaves no file behind.
        self._owns_file = isinstance(dest, (str, os.PathLike))
        fobj: IO[bytes] = open(dest, "wb") if isinstance(dest, (str, os.PathLike)) else dest  # noqa: SIM115
        self._out = _Out(fobj)

    @property
    def num_rows(self) -> int:
        """The rows written or buffered so far."""
        return self._batch_offsets[-1] + self._pending_rows

    # -----------------------------------------------------------------------------------------
    # input

    def write_batch(self, data: pa.RecordBatch | pa.Table) -> None:
        """Append the rows of a record batch or table.

        Raises:
            SchemaError: the data's schema differs from the writer's, a dictionary field holds
                nulls (nothing of the data is written), or a field that is not nullable holds nulls
                (nothing of the offending row group is written).
            ValueError: the writer is closed, or the file would pass 2**31 - 1 rows.
        """
        if self._closed:
            raise ValueError("the writer is closed")
        if len(data.schema) != len(self.schema) or any(
            x.name != y.name or x.type != y.type for x, y in zip(data.schema, self.schema)
        ):
            raise SchemaError(f"data schema {data.schema} does not match the file schema {self.schema}")
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            for node, column in zip(self._roots, batch.columns):
                check_dictionary_nulls(node, column)
        group = self.max_rows_per_group
        for batch in batches:
            start = 0
            while start < batch.num_rows:
                take = min(group - self._pending_rows, batch.num_rows - start)
                self._pending.append(batch.slice(start, take))
                self._pending_rows += take
                start += take
                if self._pending_rows == group:
                    self._flush()

    write = write_batch

    def _flush(self) -> None:
        if not self._pending_rows:
            return
        rows = self._pending_rows
        if self._batch_offsets[-1] + rows > _INT32_MAX:
            raise ValueError("a legacy Lance file cannot hold more than 2**31 - 1 rows")
        pieces = self._pending
        self._pending, self._pending_rows = [], 0
        columns = [
            pieces[0].column(i) if len(pieces) == 1 else self._joined(node, [p.column(i) for p in pieces])
            for i, node in enumerate(self._roots)
        ]
        for node, arr in zip(self._roots, columns):
            check_nulls(node, arr)
        self._stats.add_batch(columns)
        table = np.zeros((self._max_id - self._min_id + 1, 2), np.int64)
        self._pages.append(table)
        for node, arr in zip(self._roots, columns):
            self._write_field(node, arr, table)
        self._batch_offsets.append(self._batch_offsets[-1] + rows)

    # -----------------------------------------------------------------------------------------
    # pages

    def _write_field(self, node: FieldNode, arr: pa.Array, table: np.ndarray) -> None:
        t = node.arrow_type
        row = table[node.id - self._min_id]
        if pa.types.is_struct(t):
            for i, child in enumerate(node.children):
                self._write_field(child, arr.field(i), table)
            return  # structs keep (0, 0)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            dtype = np.dtype("<i8" if pa.types.is_large_list(t) else "<i4")
            offs = np.frombuffer(arr.buffers()[1], dtype, len(arr) + 1, arr.offset * dtype.itemsize)
            row[:] = self._out.write((offs - offs[0]).astype(dtype)), len(offs)
            child = arr.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
            self._write_field(node.children[0], child, table)
            return
        if pa.types.is_dictionary(t):
            row[:] = self._out.write(_fixed_bytes(self._dictionary_keys(node.id, arr))), len(arr)
        elif pa.types.is_null(t):
            row[:] = self._out.pos, len(arr)
        else:
            row[:] = self._write_values(arr), len(arr)

    def _write_values(self, arr: pa.Array) -> int:
        """Write a PLAIN or VAR_BINARY page; return its position (VAR_BINARY: of the positions)."""
        t = arr.type
        if is_binary_like(t):
            large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
            dtype = np.dtype("<i8" if large else "<i4")
            offs = np.frombuffer(arr.buffers()[1], dtype, len(arr) + 1, arr.offset * dtype.itemsize)
            start, end = int(offs[0]), int(offs[-1])
            data = arr.buffers()[2]
            first = self._out.write(data.slice(start, end - start) if data is not None else b"")
            positions = offs.astype(np.int64) - start + first
            return self._out.write(positions.astype("<i8"))
        return self._out.write(_fixed_bytes(arr))

    def _joined(self, node: FieldNode, pieces: list[pa.Array]) -> pa.Array:
        """The pieces of one column of a row group as one array."""
        if has_dictionary(node.arrow_type):
            # Key every piece into the file's dictionary (which only grows), then give all of them
            # its final values: pyarrow cannot unify dictionaries that hold a null.
            pieces = [self._rekeyed(node, p) for p in pieces]
            pieces = [self._rekeyed(node, p) for p in pieces]
        return pa.concat_arrays(pieces)

    def _rekeyed(self, node: FieldNode, arr: pa.Array) -> pa.Array:
        """``arr`` with every dictionary array in it keyed into the file's dictionary, so that pieces
        of a row group concatenate without unifying dictionaries (which pyarrow cannot do when a
        dictionary holds a null)."""
        t = node.arrow_type
        if not has_dictionary(t):
            return arr
        mask = arr.is_null() if arr.null_count else None
        if pa.types.is_dictionary(t):
            keys = self._remapped_keys(node.id, arr)
            return pa.DictionaryArray.from_arrays(keys, self._dicts[node.id])
        if pa.types.is_struct(t):
            children = [self._rekeyed(c, arr.field(i)) for i, c in enumerate(node.children)]
            return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
        if pa.types.is_fixed_size_list(t):
            size = t.list_size
            values = arr.values.slice(arr.offset * size, len(arr) * size)
            values = self._rekeyed(node.children[0], values)
            return pa.FixedSizeListArray.from_arrays(values, type=t, mask=mask)
        # lists: offsets index the whole child array
        values = self._rekeyed(node.children[0], arr.values)
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return cls.from_arrays(arr.offsets, values, type=t, mask=mask)

    def _dictionary_keys(self, field_id: int, arr: pa.Array) -> pa.Array:
        """The keys of ``arr`` against the file's dictionary (nulls as key 0, as pylance stores them)."""
        keys = self._remapped_keys(field_id, arr)
        return pc.fill_null(keys, pa.scalar(0, keys.type)) if keys.null_count else keys

    def _remapped_keys(self, field_id: int, arr: pa.Array) -> pa.Array:
        """The keys of ``arr`` against the file's dictionary, which grows by unseen values; null
        keys stay null."""
        known = self._dicts.get(field_id)
        if known is None:
            self._dicts[field_id] = arr.dictionary
            return arr.indices
        if is_prefix(arr.dictionary, known):
            return arr.indices  # the file's dictionary starts with this one
        mapping = pc.index_in(arr.dictionary, value_set=known)
        if mapping.null_count:
            new = pc.unique(arr.dictionary.filter(pc.is_null(mapping)))
            known = pa.concat_arrays([known, new.cast(known.type)])
            self._dicts[field_id] = known
            mapping = pc.index_in(arr.dictionary, value_set=known)
        try:
            return pc.take(mapping, arr.indices).cast(arr.indices.type)
        except pa.ArrowInvalid:
            raise SchemaError(
                f"dictionary field {field_id}: {len(known)} values do not fit keys of type {arr.indices.type}"
            ) from None

    # -----------------------------------------------------------------------------------------
    # finish

    def tell(self) -> int:
        """The bytes written to the file so far (each row group is written once it fills)."""
        return self._out.pos

    def close(self) -> LegacyWrittenFile:
        """Write the last row group, the metadata and the footer.

        Raises:
            ValueError: the writer is already closed.
            SchemaError: the buffered rows hold nulls in a field that is not nullable.
        """
        if self._closed:
            raise ValueError("the writer is already closed")
        self._flush()
        self._closed = True
        out = self._out
        meta = file_pb2.Metadata()
        meta.batch_offsets.extend(self._batch_offsets)
        meta.page_table_position = out.pos
        if self._pages:
            out.write(np.ascontiguousarray(np.stack(self._pages, axis=1), "<i8"))
            self._write_statistics(meta)
        dictionaries = self._write_dictionaries()
        meta.manifest_position = self._write_manifest(dictionaries)
        meta_pos = out.write(LEGACY_LENGTH_PREFIX.pack(meta.ByteSize()))
        out.write(meta.SerializeToString())
        out.write(LEGACY_FOOTER_STRUCT.pack(meta_pos, *LEGACY_FOOTER_VERSION, LEGACY_MAGIC))
        if self._owns_file:
            out.f.close()
        else:
            out.f.flush()
        return LegacyWrittenFile(
            num_rows=self._batch_offsets[-1],
            size=out.pos,
            field_ids=tuple(sorted(f.id for f in self.fields)),
            dictionaries=dict(self._dicts),
        )

    def _write_statistics(self, meta: Any) -> None:
        columns = self._stats.finish()
        if not columns:
            return
        schema = stats_schema(columns)
        table = np.zeros((4 * len(columns), 2), np.int64)
        for k, col in enumerate(columns):
            for j, arr in enumerate(stats_arrays(col)):
                table[4 * k + 1 + j] = self._write_values(arr), len(arr)
        st = meta.statistics
        fields_to_pb(schema, st.schema)
        st.fields.extend(f.id for f in schema)
        st.page_table_position = self._out.write(table.astype("<i8"))

    def _write_dictionaries(self) -> dict[int, tuple[int, int]]:
        placed: dict[int, tuple[int, int]] = {}
        for f in sorted(self.fields, key=lambda f: f.id):
            if f.logical_type.startswith("dict:"):
                values = self._dicts.get(f.id)
                if values is None:  # no rows were written: an empty dictionary
                    node = _find(self._roots, f.id)
                    values = pa.array([], node.arrow_type.value_type)
                placed[f.id] = self._write_values(values), len(values)
        return placed

    def _write_manifest(self, dictionaries: dict[int, tuple[int, int]]) -> int:
        man = table_pb2.Manifest()
        fields_to_pb(self.fields, man.fields)
        for pf in man.fields:
            if pf.id in dictionaries:
                pf.dictionary.offset, pf.dictionary.length = dictionaries[pf.id]
        for k, v in self._schema_metadata.items():
            man.schema_metadata[k] = v
        man.version = 1
        man.writer_version.library, man.writer_version.version = self.writer_version
        man.data_format.file_format = "lance"
        man.data_format.version = "0.1"
        pos = self._out.write(LEGACY_LENGTH_PREFIX.pack(man.ByteSize()))
        self._out.write(man.SerializeToString())
        return pos

    def abort(self) -> None:
        """Stop writing without finishing the file (the caller removes it)."""
        self._closed = True
        self._pending, self._pending_rows = [], 0
        if self._owns_file:
            self._out.f.close()

    def __enter__(self) -> LegacyFileWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            if not self._closed:
                self.close()
        else:
            self.abort()


def write_legacy_table(
    dest: str | os.PathLike[str] | IO[bytes],
    table: pa.Table | pa.RecordBatch,
    *,
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
    fields: Iterable[LanceField] | None = None,
) -> LegacyWrittenFile:
    """Write a whole table into one legacy Lance file.

    Raises:
        SchemaError: see :class:`LegacyFileWriter`.
    """
    writer = LegacyFileWriter(dest, table.schema, fields=fields, max_rows_per_group=max_rows_per_group)
    try:
        writer.write_batch(table)
    except BaseException:
        writer.abort()
        raise
    return writer.close()


# ---------------------------------------------------------------------------------------------
# helpers


def _fixed_bytes(arr: pa.Array) -> Any:
    """The PLAIN bytes of a fixed-width array (fixed-size lists flattened, bools bit-packed)."""
    t = arr.type
    n = len(arr)
    if pa.types.is_boolean(t):
        bits = np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), bool)
        return np.packbits(bits, bitorder="little")
    if pa.types.is_fixed_size_list(t):
        return _fixed_bytes(arr.values.slice(arr.offset * t.list_size, n * t.list_size))
    width = t.byte_width
    buf = arr.buffers()[1]
    if buf is None:
        return b"\x00" * (n * width)
    return buf.slice(arr.offset * width, n * width)


def _find(nodes: Iterable[FieldNode], field_id: int) -> FieldNode:
    for root in nodes:
        for node in root.walk():
            if node.id == field_id:
                return node
    raise KeyError(field_id)  # pragma: no cover - ids come from the same schema


__all__ = [
    "DEFAULT_MAX_ROWS_PER_GROUP",
    "LegacyFileWriter",
    "LegacyWrittenFile",
    "write_legacy_table",
]
