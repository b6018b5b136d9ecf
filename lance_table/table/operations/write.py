"""Writes: plan them against the version they build on, stream rows into new fragments (one data
file each, rolled over at size limits), and say what to commit. ``write_dataset`` and the Spark
writer both go through here.

The plan of a write (its schema, fields and data format) is made by
:mod:`lance_table.table.operations.write_plan`, whose names are importable from here too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import IO, Any

import pyarrow as pa

from lance_table._lru import LRU
from lance_table._parallel import CLOSE, pool
from lance_table.extensions import storage_schema
from lance_table.file.container import FileVersion
from lance_table.file.legacy import LegacyFileWriter, LegacyWrittenFile
from lance_table.file.legacy.writer import DEFAULT_MAX_ROWS_PER_GROUP
from lance_table.file.v2_0.layout import column_assignment
from lance_table.file.v2_1.blob_v2_encode import ExternalRefs
from lance_table.file.writer import LanceFileWriter
from lance_table.format import paths
from lance_table.format.manifest import DEFAULT_DATA_FORMAT, DataFile, Fragment
from lance_table.schema import LanceField, build_tree
from lance_table.storage import Storage
from lance_table.table.operations.inputs import conform
from lance_table.table.operations.write_bases import WriteTarget, remove_written
from lance_table.table.operations.write_plan import (
    DATA_STORAGE_VERSIONS,
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    LEGACY_FORMAT,
    WRITABLE_FORMATS,
    WriteMode,
    WritePlan,
    check_blob_fields,
    plan_write,
    prepare_write,
    resolve_data_storage_version,
    writable_data_format,
)
from lance_table.table.progress import SILENT, Progress, Reporter

# The rows of a legacy file's row group (pylance's ``max_rows_per_group`` default).
LEGACY_GROUP_ROWS = DEFAULT_MAX_ROWS_PER_GROUP

#: what ``write_dataset``'s ``progress=`` takes (see :mod:`lance_table.table.progress`)
ProgressCallback = Progress


class FragmentWriter:
    """Writes batches into new data files, one fragment per file, and remembers what it wrote.

    If anything fails, :meth:`abort` deletes every file written so far. ``before_file`` runs before
    each new file is created; an exception from it stops the write (the caller then aborts).
    ``progress`` hears of the rows of each batch written and of each file begun and finished.
    ``targets`` (multi-base datasets): new data files rotate over them, one file each, and record
    the target's base id; :attr:`paths` lists the files in the dataset's own ``data/``,
    :attr:`elsewhere` those in other bases. ``blob_externals``: how blob v2 values that are
    external URIs are stored (None refuses them; see ``LanceFileWriter``).

    Legacy files: ``dictionaries`` are the dataset's dictionary values by field id; every file's keys
    index them, extended by the values the rows bring, and :attr:`dictionaries` holds the values the
    last file indexes (which the commit must record in the manifest).
    """

    def __init__(
        self,
        storage: Storage,
        schema: pa.Schema,
        fields: list[LanceField],
        *,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
        progress: Reporter = SILENT,
        write_tag: str = "",
        before_file: Callable[[], None] | None = None,
        data_format: str = DEFAULT_DATA_FORMAT[1],
        dictionaries: Mapping[int, pa.Array] | None = None,
        targets: Sequence[WriteTarget] = (),
        blob_externals: ExternalRefs | None = None,
    ) -> None:
        if max_rows_per_file <= 0 or max_bytes_per_file <= 0:
            raise ValueError("max_rows_per_file and max_bytes_per_file must be positive")
        self.storage = storage
        self.schema = storage_schema(schema)  # (a dataset's schema as readers see it is taken too)
        self.fields = fields
        self.max_rows = max_rows_per_file
        self.max_bytes = max_bytes_per_file
        self.progress = progress
        self.write_tag = write_tag
        self.before_file = before_file
        self.data_format = data_format
        self._legacy = data_format == LEGACY_FORMAT
        self.dictionaries: dict[int, pa.Array] = dict(dictionaries or {})
        self._file_version = (0, 2) if self._legacy else FileVersion.parse(data_format).manifest_version
        self._file_fields = tuple(f.id for f in fields)
        self._column_indices: tuple[int, ...] = ()  # (2.0 files list every field's column)
        if data_format == "2.0":
            self._column_indices = _columns_20(fields)
        self.fragments: list[Fragment] = []
        self.paths: list[str] = []
        # files written in other bases (``targets``; new files rotate over them), by base id
        self.targets = tuple(targets)
        self.blob_externals = blob_externals
        self.elsewhere: list[tuple[int, str]] = []
        self._target: WriteTarget | None = None
        self._files = 0
        self._writer: LanceFileWriter | LegacyFileWriter | None = None
        self._background = not self._legacy and not progress.ordered
        self._stream: Any = None
        self._name = ""
        self._rows = 0
        self._bytes = 0
        # batches given to the file whose bytes are not counted in ``_bytes`` yet (see ``_given``)
        self._uncounted: list[pa.RecordBatch] = []
        self._uncounted_bound = 0
        self._closing: Future[Fragment] | None = None

    def _open(self) -> LanceFileWriter | LegacyFileWriter:
        if self.before_file is not None:
            self.before_file()
        self._name = paths.new_data_file_name(self.write_tag)
        self._stream = self._create(self._name, first=True)
        self.progress.file_started(self._name, *self._file_version)
        stem = self._name[: -len(paths.DATA_FILE_SUFFIX)]
        if self._legacy:
            self._writer = LegacyFileWriter(
                self._stream, self.schema, fields=self.fields, dictionaries=self.dictionaries
            )
        else:
            self._writer = LanceFileWriter(
                self._stream,
                self.schema,
                fields=self.fields,
                version=self.data_format,
                blob_sidecars=lambda name: self._open_sidecar(f"{stem}/{name}"),
                blob_externals=self.blob_externals,
            )
        self._rows = 0
        self._bytes = 0
        self._uncounted, self._uncounted_bound = [], 0
        return self._writer

    def _give(self, piece: pa.RecordBatch) -> None:
        """Count the bytes of ``piece`` (its ``nbytes``, which walks every buffer of every column:
        a fixed cost a small append would pay in full) among those given to the file, or keep it
        uncounted while even its buffers' whole size (a bound, known at once) leaves the file below
        ``max_bytes``: no decision can then depend on the exact count."""
        bound = piece.get_total_buffer_size()
        total = self._uncounted_bound + bound
        if total <= _UNCOUNTED_BYTES and self._bytes + total < self.max_bytes:
            self._uncounted.append(piece)
            self._uncounted_bound = total
            return
        self._given()
        self._bytes += piece.nbytes

    def _given(self) -> int:
        """The bytes given to the file being written (``nbytes`` of its batches), counted in full."""
        if self._uncounted:
            self._bytes += sum(p.nbytes for p in self._uncounted)
            self._uncounted, self._uncounted_bound = [], 0
        return self._bytes

    def _open_sidecar(self, name: str) -> IO[bytes]:
        """A blob sidecar of the data file being written (removed by :meth:`abort` too)."""
        return self._create(name)

    def _create(self, name: str, first: bool = False) -> IO[bytes]:
        """Create file ``name`` of a data file (``first``: the data file itself, which picks the
        next target base) in the dataset's ``data/``, or in the target base."""
        if first:
            self._target = self.targets[self._files % len(self.targets)] if self.targets else None
            self._files += 1
        if self._target is None or self._target.base_id is None:
            path = paths.data_file_path(name)
            self.paths.append(path)
            return self.storage.open_writer(path)
        path = self._target.path(name)
        self.elsewhere.append((self._target.base_id, path))
        return self._target.storage.open_writer(path)

    def _finish_file(self, background: bool = False) -> None:
        """Close the file being written; with ``background``, on a thread while the next file is
        written (not for legacy files: the next one needs this one's dictionaries; nor when the
        progress hooks must see each file complete before the next begins). At most one
        file closes in the background at a time, which bounds the memory its pages hold."""
        if self._writer is None:
            return
        self._wait_closing()  # (on its error this file is still open, for abort to remove)
        writer, stream, name = self._writer, self._stream, self._name
        base_id = self._target.base_id if self._target is not None else None
        self._writer = None
        self._stream = None
        if background and self._background:
            self._closing = pool(CLOSE).submit(self._close_file, writer, stream, name, base_id)
        else:
            self.fragments.append(self._close_file(writer, stream, name, base_id))

    def _wait_closing(self) -> None:
        """Wait for the file closing in the background; raise what closing it raised."""
        closing, self._closing = self._closing, None
        if closing is not None:
            self.fragments.append(closing.result())

    def _close_file(
        self, writer: LanceFileWriter | LegacyFileWriter, stream: Any, name: str, base_id: int | None = None
    ) -> Fragment:
        try:
            written = writer.close()
            stream.close()
        except BaseException:
            writer.abort()
            with contextlib.suppress(Exception):
                stream.close()
            raise
        if isinstance(written, LegacyWrittenFile):
            self.dictionaries.update(written.dictionaries)
        fragment = Fragment(
            id=0,
            files=(
                DataFile(
                    path=name,
                    # 2.0 files list every field with its column; 2.1+ files only the leaves;
                    # legacy files every field, without columns
                    fields=self._file_fields if self.data_format == "2.0" else written.field_ids,
                    column_indices=(
                        self._column_indices if self.data_format == "2.0" else written.column_indices
                    ),
                    file_major_version=self._file_version[0],
                    file_minor_version=self._file_version[1],
                    file_size_bytes=written.size,
                    base_id=base_id,
                ),
            ),
            physical_rows=written.num_rows,
        )
        self.progress.file_written(fragment)
        return fragment

    def write(self, batch: pa.RecordBatch) -> None:
        """Append ``batch`` to the files, as pylance's writer does: a batch is cut only where a file
        reaches ``max_rows_per_file``; after each part, the file ends once the bytes its writer has
        written reach ``max_bytes_per_file``. Writers write a column's page once it fills (8 MiB),
        so a file can hold far more than ``max_bytes_per_file`` (legacy files: each row group is
        written as it fills, and the bytes are checked after each)."""
        if batch.schema != self.schema:  # rows as read (extension types): as the files store them
            batch = conform(batch, self.schema)
        offset = 0
        while offset < batch.num_rows:
            writer = self._writer or self._open()
            rows = min(self.max_rows - self._rows, batch.num_rows - offset)
            if self._legacy:  # pylance cuts legacy writes into row groups, checking each
                rows = min(rows, LEGACY_GROUP_ROWS)
            piece = batch.slice(offset, rows)
            # whole batches (up to a file's rows), as pylance's writers get them: where its pages
            # end depends on the batches (a column's page holds whole batches, a large one split)
            writer.write(piece)
            self._rows += piece.num_rows
            self._give(piece)
            offset += piece.num_rows
            self.progress.advance(piece.num_rows)
            # (what a writer has written is at most about what it was given: ask only then; while
            # batches are uncounted, the bytes given surely stay below the limit)
            full = self._bytes >= self.max_bytes and writer.tell() >= self.max_bytes
            if self._rows >= self.max_rows or full:
                self._finish_file(background=True)

    def write_many(self, batches: Sequence[pa.RecordBatch]) -> None:
        """:meth:`write` of each batch in turn, with the same files: where no file can end among
        them (2.1/2.2 files), their rows go to the file writer as one group (see
        ``LanceFileWriter.write_many``)."""
        batches = [b if b.schema == self.schema else conform(b, self.schema) for b in batches]
        batches = [b for b in batches if b.num_rows]  # (write skips them: no rows, no check)
        rows = sum(b.num_rows for b in batches)
        group = len(batches) > 1 and not self._legacy and self.data_format != "2.0"
        if group:
            # no file ends among them: written one by one, a file ends where its rows reach the
            # limit or the bytes given to it reach theirs (and its writer's bytes too)
            sizes = [b.nbytes for b in batches]
            done = (self._rows, self._given()) if self._writer is not None else (0, 0)
            group = done[0] + rows < self.max_rows and done[1] + sum(sizes) < self.max_bytes
        if not group:
            for batch in batches:
                self.write(batch)
            return
        writer = self._writer or self._open()
        assert isinstance(writer, LanceFileWriter)
        writer.write_many(batches)
        self._rows += rows
        self._bytes += sum(sizes)
        for batch in batches:
            self.progress.advance(batch.num_rows)

    def finish(self) -> list[Fragment]:
        self._finish_file()
        self._wait_closing()
        return self.fragments

    def abort(self) -> None:
        with contextlib.suppress(BaseException):
            self._wait_closing()  # nothing may write to the files once they are removed
        if self._writer is not None:
            self._writer.abort()
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.close()
        for path in self.paths:
            with contextlib.suppress(OSError):
                self.storage.delete(path)
        remove_written(self.targets, self.elsewhere)
        self._writer = None


def _columns_20(fields: list[LanceField]) -> tuple[int, ...]:
    """The column of each field in a 2.0 file of ``fields`` (-1: none), remembered by the
    identity of the fields (immutable): the files of one schema written one after another (a
    column added to many small fragments) do not work them out again."""
    key = tuple(map(id, fields))
    hit = _COLUMNS_20.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], fields)):
        return hit[1]
    cols = column_assignment(build_tree(fields))
    out = tuple(cols.get(f.id, -1) for f in fields)
    _COLUMNS_20.put(key, (tuple(fields), out))  # (the fields are kept: their ids stay theirs)
    return out


#: 2.0 column indices by the identities of their fields (see :func:`_columns_20`)
_COLUMNS_20: LRU[tuple[int, ...], tuple[tuple[LanceField, ...], tuple[int, ...]]] = LRU(64)

#: the most bytes (by their buffers' whole sizes) of batches a file keeps uncounted (see
#: ``FragmentWriter._give``): small appends' batches, held until the file ends or they are counted
_UNCOUNTED_BYTES = 1 << 20


def write_fragments(
    storage: Storage,
    reader: pa.RecordBatchReader,
    schema: pa.Schema,
    fields: list[LanceField],
    **options: Any,
) -> tuple[list[Fragment], list[str], dict[int, pa.Array]]:
    """Stream every batch of ``reader`` into new fragments; return them, the files written and the
    dictionary values the files index (legacy files; see :class:`FragmentWriter`). Files written
    in other base paths are not listed: see :func:`write_placed_fragments`.

    On any error the files written so far are deleted and the error is raised.
    """
    frags, written, dictionaries, _ = write_placed_fragments(storage, reader, schema, fields, **options)
    return frags, written, dictionaries


def write_placed_fragments(
    storage: Storage,
    reader: pa.RecordBatchReader,
    schema: pa.Schema,
    fields: list[LanceField],
    **options: Any,
) -> tuple[list[Fragment], list[str], dict[int, pa.Array], list[tuple[int, str]]]:
    """:func:`write_fragments`, also returning the files written in other base paths (base id,
    path there), which a failed commit must delete too (``Pending.elsewhere``).

    On any error the files written so far are deleted and the error is raised.
    """
    writer = FragmentWriter(storage, schema, fields, **options)
    try:
        for batch in reader:
            if batch.num_rows:
                writer.write(conform(batch, writer.schema))
        return writer.finish(), writer.paths, writer.dictionaries, writer.elsewhere
    except BaseException:
        writer.abort()
        raise


__all__ = [
    "DATA_STORAGE_VERSIONS",
    "DEFAULT_MAX_BYTES_PER_FILE",
    "DEFAULT_MAX_ROWS_PER_FILE",
    "LEGACY_FORMAT",
    "LEGACY_GROUP_ROWS",
    "WRITABLE_FORMATS",
    "FragmentWriter",
    "ProgressCallback",
    "WriteMode",
    "WritePlan",
    "check_blob_fields",
    "plan_write",
    "prepare_write",
    "resolve_data_storage_version",
    "writable_data_format",
    "write_fragments",
    "write_placed_fragments",
]
