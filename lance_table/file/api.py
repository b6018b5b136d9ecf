"""pylance's file API (``lance.file``): :class:`LanceFileReader` and :class:`LanceFileWriter` over a
path or URI, with pylance's names, arguments, defaults and return values.

The codec classes underneath (:class:`lance_table.file.reader.LanceFileReader`,
:class:`lance_table.file.writer.LanceFileWriter`) read and write file objects and byte sources;
these open the file through the storage layer (local paths, ``file://``, ``memory://``, ``s3://``,
with ``storage_options``) and convert extension types as pylance's file API does: written in their
stored form (``arrow.json`` as JSONB), read back as their registered extension types, JSON as its
stored ``lance.json`` bytes.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import (
    LanceFileNotFoundError,
    RowRangeError,
    SchemaError,
    UnsupportedFormatError,
    UnsupportedOperationError,
)
from lance_table.extensions import storage_schema, to_storage, user_table
from lance_table.file.column_pages import ColumnPages
from lance_table.file.container import FOOTER_STRUCT
from lance_table.file.encoding_text import rust_debug
from lance_table.file.reader import LanceFileReader as _CodecReader
from lance_table.file.results import (
    LanceBufferDescriptor,
    LanceColumnMetadata,
    LanceColumnStatistics,
    LanceFileMetadata,
    LanceFileStatistics,
    LancePageMetadata,
    ReaderResults,
    buffers_of,
)
from lance_table.file.writer import DEFAULT_PAGE_SIZE
from lance_table.file.writer import LanceFileWriter as _CodecWriter
from lance_table.storage import StagedFile, Storage, open_storage

#: the file format a writer writes when no ``version`` is given (pylance 14's "stable")
DEFAULT_VERSION = "2.2"
DEFAULT_BATCH_SIZE = 1024
# Rows decoded per read of the codec while a read streams its batches.
READ_CHUNK_ROWS = 64 * 1024
# The names pylance's ``version=`` takes, and the format each means.
VERSIONS = {"stable": "2.2", "2.0": "2.0", "0.3": "2.0", "2.1": "2.1", "2.2": "2.2"}


def stable_version() -> str:
    """The file format version "stable" means, which writers use by default (pylance's
    ``lance.file.stable_version()``).

    Example:
        ```python
        from lance_table.file import stable_version

        print(stable_version())  # "2.2", as pylance 14
        ```
    """
    return VERSIONS["stable"]


def _split(path: str | os.PathLike[str]) -> tuple[str, str]:
    """(directory URI, file name) of a file path or URI."""
    text = os.fspath(path)
    if "://" in text:
        head, _, name = text.rstrip("/").rpartition("/")
        if "://" not in head:  # "s3://file" has no directory part
            head += "/"
        return head, name
    text = os.path.abspath(text)
    return os.path.dirname(text), os.path.basename(text)


def _open(
    path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None, namespace_client: Any
) -> tuple[Storage, str]:
    if namespace_client is not None:
        raise UnsupportedOperationError("namespace_client (credential vending) is not supported")
    where, name = _split(path)
    if not name:
        raise ValueError(f"{os.fspath(path)!r} names no file")
    return open_storage(where, storage_options), name


# -- reading -------------------------------------------------------------------------------------


class LanceFileReader:
    """Reads one Lance data file (formats 2.0, 2.1, 2.2), as pylance's ``lance.file.LanceFileReader``.

    Args:
        path: a local path or a URI (``file://``, ``memory://``, ``s3://``, ...).
        storage_options: options of the store (see :func:`lance_table.storage.open_storage`).
        columns: the columns every read returns (all by default).
        namespace_client: pylance's credential vending; not supported (an error if given).
        table_id: with ``namespace_client``; not supported (an error if given).

    Raises:
        LanceFileNotFoundError: there is no file at ``path`` (also a FileNotFoundError and a
            ValueError, which pylance raises).
        CorruptFileError: the file is not a Lance file or is damaged.
        UnsupportedFormatError: a format version or encoding this reader lacks.
        UnsupportedOperationError: ``namespace_client`` is given.

    Example:
        ```python
        from lance_table.file import LanceFileReader, LanceFileWriter

        with LanceFileWriter(f"{tmp}/read.lance") as writer:
            writer.write_batch(table)
        reader = LanceFileReader(f"{tmp}/read.lance", columns=["id"])
        print(reader.num_rows(), reader.read_all().to_table(), reader.take_rows([0, 2]).to_table())
        ```
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        storage_options: Mapping[str, Any] | None = None,
        columns: Sequence[str] | None = None,
        *,
        namespace_client: Any = None,
        table_id: Sequence[str] | None = None,
    ) -> None:
        storage, name = _open(path, storage_options, namespace_client)
        try:
            source = storage.source(name)
            self._reader = _CodecReader(source)
        except FileNotFoundError:
            raise LanceFileNotFoundError(f"{os.fspath(path)}: no such Lance file") from None
        self._source = source
        self._columns = list(columns) if columns is not None else None
        self._stored = self._reader._project(self._columns)[1]

    def _results(self, row_chunks: Iterator[pa.Table], batch_size: int) -> ReaderResults:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, not {batch_size}")
        first = user_table(self._stored.empty_table(), self._stored, json=False)
        schema = first.schema

        def batches() -> Iterator[pa.RecordBatch]:
            for table in row_chunks:
                table = user_table(table, self._stored, schema, json=False)
                yield from table.combine_chunks().to_batches(max_chunksize=batch_size)

        return ReaderResults(pa.RecordBatchReader.from_batches(schema, batches()))

    def _range_chunks(self, start: int, stop: int, batch_size: int) -> Iterator[pa.Table]:
        step = max(batch_size, READ_CHUNK_ROWS // batch_size * batch_size)
        for lo in range(start, stop, step):
            yield self._reader.read_range(lo, min(lo + step, stop), self._columns)

    def read_all(self, *, batch_size: int = DEFAULT_BATCH_SIZE, batch_readahead: int = 16) -> ReaderResults:
        """Every row, in batches of ``batch_size`` rows (``batch_readahead`` is accepted for
        pylance compatibility: reads are made as the batches are consumed).

        Raises:
            ValueError: ``batch_size`` is not positive.
        """
        return self._results(self._range_chunks(0, self.num_rows(), batch_size), batch_size)

    def read_range(
        self, start: int, num_rows: int, *, batch_size: int = DEFAULT_BATCH_SIZE, batch_readahead: int = 16
    ) -> ReaderResults:
        """``num_rows`` rows from row ``start``.

        Raises:
            RowRangeError: the range is not inside the file (also a ValueError, as in pylance).
        """
        if start < 0 or num_rows < 0 or start + num_rows > self.num_rows():
            raise RowRangeError(
                f"cannot read rows {start}..{start + num_rows} of a file of {self.num_rows()} rows"
            )
        return self._results(self._range_chunks(start, start + num_rows, batch_size), batch_size)

    def take_rows(
        self,
        indices: Sequence[int] | np.ndarray | pa.Array,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_readahead: int = 16,
    ) -> ReaderResults:
        """The rows at ``indices`` (ascending, as pylance requires).

        Raises:
            ValueError: the indices are not in ascending order.
            RowRangeError: an index is past the file's rows (also a ValueError).
        """
        idx = np.asarray(indices.to_numpy() if isinstance(indices, pa.Array) else indices, dtype=np.int64)
        if idx.size > 1 and bool(np.any(idx[1:] < idx[:-1])):
            i = int(np.argmax(idx[1:] < idx[:-1]))
            raise ValueError(
                f"Indices must be sorted in ascending order for file API, got {idx[i]} > {idx[i + 1]}"
            )
        if idx.size and (int(idx[0]) < 0 or int(idx[-1]) >= self.num_rows()):
            raise RowRangeError(f"cannot take row {int(idx[-1])} of a file of {self.num_rows()} rows")

        def chunks() -> Iterator[pa.Table]:
            for lo in range(0, idx.size, READ_CHUNK_ROWS):
                yield self._reader.take(idx[lo : lo + READ_CHUNK_ROWS], self._columns)

        return self._results(chunks(), batch_size)

    def metadata(self) -> LanceFileMetadata:
        """What the file's footer region says: schema, rows, byte counts, buffers and pages."""
        meta = self._reader.metadata
        footer = self._source.read_ranges([(meta.size - FOOTER_STRUCT.size - 4, FOOTER_STRUCT.size)])[0]
        cm_start, cmo_start, _, _, n_cols, major, minor = FOOTER_STRUCT.unpack(bytes(footer))
        columns = []
        for i, pb in enumerate(meta.columns):
            pages = ColumnPages(meta, i) if pb.pages else None
            page_meta = [
                LancePageMetadata(
                    buffers_of(p.buffer_offsets, p.buffer_sizes),
                    rust_debug(pages.encoding(j, self._source)) if pages else "",
                )
                for j, p in enumerate(pb.pages)
            ]
            columns.append(LanceColumnMetadata(buffers_of(pb.buffer_offsets, pb.buffer_sizes), page_meta))
        global_bytes = sum(s for _, s in meta.global_buffers)
        column_bytes = cmo_start + 16 * n_cols - cm_start
        tail = 16 * len(meta.global_buffers) + FOOTER_STRUCT.size + 4
        return LanceFileMetadata(
            schema=user_table(self._reader.schema.empty_table(), self._reader.schema, json=False).schema,
            num_rows=meta.num_rows,
            num_data_bytes=meta.size - tail - column_bytes - global_bytes,
            num_column_metadata_bytes=column_bytes,
            num_global_buffer_bytes=global_bytes,
            global_buffers=[LanceBufferDescriptor(p, s) for p, s in meta.global_buffers],
            columns=columns,
            major_version=major,
            minor_version=minor,
        )

    def file_statistics(self) -> LanceFileStatistics:
        """Per column: its pages and the bytes their buffers take."""
        return LanceFileStatistics(
            [
                LanceColumnStatistics(len(pb.pages), int(sum(sum(p.buffer_sizes) for p in pb.pages)))
                for pb in self._reader.metadata.columns
            ]
        )

    def read_global_buffer(self, index: int) -> bytes:
        """The bytes of global buffer ``index`` (0 is the file descriptor).

        Raises:
            IndexError: there is no such buffer.
        """
        buffers = self._reader.metadata.global_buffers
        if not 0 <= index < len(buffers):
            raise IndexError(f"the file has {len(buffers)} global buffers, not {index + 1}")
        return bytes(self._source.read_ranges([buffers[index]])[0])

    def num_rows(self) -> int:
        """The number of rows in the file."""
        return self._reader.num_rows


# -- writing -------------------------------------------------------------------------------------


def _resolve_version(version: str | None) -> str:
    if version is None:
        return DEFAULT_VERSION
    name = str(version).lower()
    if name in ("legacy", "0.1"):
        raise UnsupportedFormatError("legacy (v1) Lance files are written only as parts of a dataset")
    try:
        return VERSIONS[name]
    except KeyError:
        raise UnsupportedFormatError(
            f"Lance file format version {version!r} is not written by lance_table; use one of "
            f"{', '.join(VERSIONS)}"
        ) from None


#: pylance's default ``max_page_bytes``
MAX_PAGE_BYTES = 32 << 20


def _discard(staged: StagedFile) -> None:
    staged.discard()


class LanceFileWriter:
    """Writes one Lance data file, as pylance's ``lance.file.LanceFileWriter``.

    Nothing appears at ``path`` until :meth:`close`: the file is written under a temporary name
    (an object store's multipart upload) and published whole. A writer dropped without ``close``,
    or left by an exception in a ``with`` block, leaves nothing at ``path`` (pylance finishes the
    file in the latter case; a file holding the rows written before an error is not kept here).

    Args:
        path: a local path or a URI.
        schema: the data's schema; without one, the first batch's.
        data_cache_bytes: bytes buffered for column data before pages are written, divided
            evenly among the top-level columns (default: 8 MiB per column, as pylance).
        version: the file format: ``"2.0"``, ``"2.1"``, ``"2.2"`` or ``"stable"`` (the default, 2.2).
        storage_options: options of the store.
        max_page_bytes: 2.0 files: the most bytes a page holds (a larger array is split across
            pages). 2.1/2.2 files are not split by it, as pylance splits their large pages when
            reading, not when writing.
        namespace_client: not supported (an error if given).
        table_id: not supported (an error if given).
        **kwargs: other pylance options; any given raises an error naming it.

    Raises:
        UnsupportedFormatError: a version lance_table does not write (``legacy``, ``next``).
        UnsupportedOperationError: an option lance_table does not implement is given.
        SchemaError: the schema holds a type Lance cannot store.
        ValueError: ``data_cache_bytes`` or ``max_page_bytes`` is not positive.

    Example:
        ```python
        from lance_table.file import LanceFileWriter

        with LanceFileWriter(f"{tmp}/data.lance") as writer:  # schema from the first batch; format 2.2
            writer.write_batch(table)
        ```
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: pa.Schema | None = None,
        *,
        data_cache_bytes: int | None = None,
        version: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        namespace_client: Any = None,
        table_id: Sequence[str] | None = None,
        max_page_bytes: int | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            raise UnsupportedOperationError(f"LanceFileWriter options not supported: {sorted(kwargs)}")
        if data_cache_bytes is not None and data_cache_bytes <= 0:
            raise ValueError("data_cache_bytes must be positive")
        if max_page_bytes is not None and max_page_bytes <= 0:
            raise ValueError("max_page_bytes must be positive")
        self._version = _resolve_version(version)
        self._storage, self._name = _open(path, storage_options, namespace_client)
        self._path = os.fspath(path)
        self._cache_bytes = data_cache_bytes
        self._max_page_bytes = max_page_bytes
        self._metadata: dict[bytes, bytes] = {}
        self._global_buffers: list[bytes] = []
        self._writer: _CodecWriter | None = None
        self._staged: StagedFile | None = None
        self._finalizer: weakref.finalize | None = None
        self._schema: pa.Schema | None = None
        self.closed = False
        # write_batch, the metadata calls and close may come from several threads (as pylance's
        # writer allows): one at a time, so that a batch's columns are never interleaved
        self._lock = threading.Lock()
        #: the file's size in bytes, once closed
        self.size_bytes: int | None = None
        if schema is not None:
            self._start(schema)

    def _start(self, schema: pa.Schema) -> _CodecWriter:
        stored = storage_schema(schema)
        per_column = (self._cache_bytes // max(len(stored), 1)) if self._cache_bytes else DEFAULT_PAGE_SIZE
        staged = self._storage.open_staged(self._name)
        try:
            writer = _CodecWriter(
                staged.stream,
                stored,
                version=self._version,
                page_size_bytes=max(per_column, 1),
                # 2.0 pages of one array are split at pylance's 32 MiB, whatever the buffer size
                max_page_bytes=(self._max_page_bytes or MAX_PAGE_BYTES) if self._version == "2.0" else None,
            )
        except BaseException:
            staged.discard()
            raise
        self._schema = schema
        self._staged = staged
        self._writer = writer
        # dropped without close(): the staged file goes, nothing appears at the path
        self._finalizer = weakref.finalize(self, _discard, staged)
        return writer

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append the rows of a record batch or a table.

        Raises:
            ValueError: the writer is closed.
            SchemaError: the data's columns or types differ from the file's (also a ValueError).
        """
        with self._lock:
            if self.closed:
                raise ValueError("the writer is closed")
            writer = self._writer or self._start(batch.schema)
            stored = writer.schema
            if batch.schema != self._schema and storage_schema(batch.schema) != stored:
                missing = [n for n in stored.names if n not in batch.schema.names]
                raise SchemaError(
                    f"cannot write a batch of schema {batch.schema} to a file of schema {self._schema}"
                    + (f" (missing columns {missing})" if missing else "")
                )
            cols = [
                to_storage(c if isinstance(c, pa.Array) else c.combine_chunks(), f, f.name)
                for c, f in zip(batch.columns, stored)
            ]
            try:
                writer.write(pa.Table.from_arrays(cols, schema=stored))
            except BaseException:
                self._abort()
                raise

    def add_schema_metadata(self, key: str, value: str) -> None:
        """Add a key/value pair to the schema metadata the file stores (before :meth:`close`).

        Raises:
            ValueError: the writer is closed.
        """
        with self._lock:
            if self.closed:
                raise ValueError("the writer is closed")
            self._metadata[key.encode()] = value.encode()

    def add_global_buffer(self, data: bytes) -> int:
        """Store ``data`` as a global buffer of the file; returns its index (1, 2, ...).

        Raises:
            ValueError: the writer is closed.
        """
        with self._lock:
            if self.closed:
                raise ValueError("the writer is closed")
            self._global_buffers.append(bytes(data))
            return len(self._global_buffers)

    def close(self) -> int | None:
        """Write the footer and publish the file; returns the rows written (None if already closed).

        Raises:
            ValueError: no schema was given and no batch was written (no file is made).
        """
        with self._lock:
            return self._close()

    def _close(self) -> int | None:
        if self.closed:
            return None
        self.closed = True
        if self._writer is None:
            raise ValueError(
                f"{self._path}: Schema is unknown and file cannot be created (no schema, no data written)"
            )
        writer, staged = self._writer, self._staged
        assert staged is not None
        try:
            if self._metadata:
                writer.schema = writer.schema.with_metadata(
                    {**(writer.schema.metadata or {}), **self._metadata}
                )
            writer.global_buffers.extend(self._global_buffers)
            written = writer.close()
            staged.publish()
        except BaseException:
            self._abort()
            raise
        if self._finalizer is not None:
            self._finalizer.detach()
        self.size_bytes = written.size
        return written.num_rows

    def _abort(self) -> None:
        self.closed = True
        if self._writer is not None:
            self._writer.abort()
        if self._finalizer is not None and self._finalizer.alive:
            self._finalizer()

    def __enter__(self) -> LanceFileWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self._abort()
