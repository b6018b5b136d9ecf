"""Writes: plan them against the version they build on, stream rows into new fragments (one data
file each, rolled over at size limits), and say what to commit. ``write_dataset`` and the Spark
writer both go through here."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import IO, Any, Literal

import pyarrow as pa

from lance_table._parallel import CLOSE, pool
from lance_table.errors import (
    AppendSchemaError,
    DatasetAlreadyExistsError,
    SchemaError,
    UnsupportedFormatError,
)
from lance_table.extensions import storage_schema
from lance_table.file.container import FileVersion
from lance_table.file.legacy import LegacyFileWriter, LegacyWrittenFile
from lance_table.file.legacy.writer import DEFAULT_MAX_ROWS_PER_GROUP
from lance_table.file.v2_0.layout import column_assignment
from lance_table.file.v2_1.blob_v2 import is_blob_v2
from lance_table.file.v2_1.blob_v2_encode import ExternalRefs
from lance_table.file.writer import LanceFileWriter
from lance_table.format import paths
from lance_table.format.manifest import (
    DEFAULT_DATA_FORMAT,
    DataFile,
    Fragment,
    Manifest,
    corrected_data_format,
)
from lance_table.format.transaction import Append, Operation, Overwrite
from lance_table.schema import (
    FieldNode,
    LanceField,
    arrow_schema_from_fields,
    build_tree,
    fields_from_arrow,
)
from lance_table.storage import Storage
from lance_table.table import blob_write, versions
from lance_table.table.commit import Pending
from lance_table.table.operations.inputs import coerce_reader, conform, missing_fields, project_present
from lance_table.table.operations.write_bases import WriteTarget, remove_written
from lance_table.table.progress import SILENT, Progress, Reporter
from lance_table.table.snapshot import BLOB_V2_FORMATS

DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024**3
# Batches are re-chunked to at most this many rows before they reach a legacy or 2.0 file writer.
# 2.1/2.2 writers get whole batches (up to a file's rows): each batch past the page budget becomes
# one page, as pylance writes them.
WRITE_CHUNK_ROWS = 128 * 1024
# The rows of a legacy file's row group (pylance's ``max_rows_per_group`` default).
LEGACY_GROUP_ROWS = DEFAULT_MAX_ROWS_PER_GROUP

#: what ``write_dataset``'s ``progress=`` takes (see :mod:`lance_table.table.progress`)
ProgressCallback = Progress
WriteMode = Literal["create", "append", "overwrite"]
# Data file formats lance_table writes into datasets.
WRITABLE_FORMATS = ("0.1", "2.0", "2.1", "2.2")
LEGACY_FORMAT = "0.1"


@dataclass(frozen=True)
class WritePlan:
    """How rows are written on top of version ``read_version`` (0: a new dataset).

    Small and picklable: a distributed write sends it to every task.

    Attributes:
        append: whether the rows are appended to the existing version (else they replace it).
        schema: the Arrow schema rows are written with (the dataset's, for an append).
        fields: the Lance fields (with their ids) of that schema.
        data_format: the data file format version, taken from the dataset.
        dictionaries: legacy datasets: the dictionary values of the version appended to, by field
            id (new files' keys index them, extended by values the rows bring).
    """

    read_version: int
    append: bool
    schema: pa.Schema
    fields: tuple[LanceField, ...]
    data_format: str
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict, compare=False)

    def operation(
        self, fragments: Sequence[Fragment], dictionaries: Mapping[int, pa.Array] | None = None
    ) -> Operation:
        """What committing ``fragments`` means: an Append to the base, or an Overwrite.
        ``dictionaries`` are the dictionary values the fragments' legacy files index."""
        dicts = dict(dictionaries or {})
        if self.append:
            return Append(tuple(fragments), dictionaries=dicts)
        md = {k.decode(): v for k, v in (self.schema.metadata or {}).items()}
        return Overwrite(tuple(fragments), self.fields, md, data_format=self.data_format, dictionaries=dicts)

    def pending(
        self,
        fragments: Sequence[Fragment],
        written: Sequence[str],
        dictionaries: Mapping[int, pa.Array] | None = None,
        elsewhere: Sequence[tuple[int, str]] = (),
    ) -> Pending:
        """What to commit for ``fragments``, whose ``written`` files (and ``elsewhere``, in other
        base paths) the commit removes if it fails (``dictionaries``: what
        :attr:`FragmentWriter.dictionaries` ended with)."""
        op = self.operation(fragments, dictionaries)
        return Pending(op, self.read_version, written=tuple(written), elsewhere=tuple(elsewhere))


# What pylance's ``data_storage_version`` accepts, and the format each name means (pylance 14).
DATA_STORAGE_VERSIONS = {
    "legacy": "0.1",
    "0.1": "0.1",
    "2.0": "2.0",
    "2.1": "2.1",
    "2.2": "2.2",
    "stable": "2.2",
    "next": "2.3",
}


def resolve_data_storage_version(name: str) -> str:
    """The data file format a ``data_storage_version`` name means (``"stable"`` is 2.2, as in pylance).

    Raises:
        ValueError: a name pylance does not accept either.
    """
    try:
        return DATA_STORAGE_VERSIONS[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"unknown data_storage_version {name!r}; use one of {', '.join(DATA_STORAGE_VERSIONS)}"
        ) from None


def writable_data_format(base: Manifest | None, uri: str, requested: str | None = None) -> str:
    """The format new data files use: ``requested`` (a ``data_storage_version`` name) for a new
    dataset or one being replaced, else the dataset's own; the default for a new dataset.

    Raises:
        ValueError: ``requested`` is not a name pylance accepts.
        UnsupportedFormatError: the version needs writer features, or data files of a format,
            lance_table does not write.
    """
    if base is not None:
        versions.check_writable(base, uri)
    if requested is not None:
        data_format = resolve_data_storage_version(requested)
    elif base is not None:
        fixed = corrected_data_format(base, uri)  # the files' format where pylance 0.16 recorded 0.1
        data_format = fixed[1] if fixed else base.data_storage_version or DEFAULT_DATA_FORMAT[1]
    else:
        data_format = DEFAULT_DATA_FORMAT[1]
    if data_format not in WRITABLE_FORMATS:
        whose = f"{uri} stores data files in" if requested is None else "writing data files in"
        raise UnsupportedFormatError(
            f"{whose} Lance format {data_format}; lance_table writes only format "
            f"{', '.join(WRITABLE_FORMATS)} and never mixes formats in one dataset"
        )
    return data_format


def check_blob_fields(fields: Sequence[LanceField], data_format: str, uri: str) -> None:
    """Refuse blob columns lance_table cannot write: blob v2 columns (``lance.blob.v2``
    extension) inside other fields, or in a dataset whose data files are not format 2.2.

    Raises:
        UnsupportedFormatError: such a field is among ``fields``.
    """
    for f in fields:
        if is_blob_v2(f) and data_format not in BLOB_V2_FORMATS:
            raise UnsupportedFormatError(
                f"{uri}: field {f.name!r} is a blob v2 column, which needs format 2.2 data files, "
                f"not {data_format}"
            )
    blob_write.check_fields(fields, uri)


def plan_write(
    base: Manifest | None,
    mode: WriteMode,
    data_schema: pa.Schema,
    uri: str,
    data_storage_version: str | None = None,
) -> WritePlan:
    """Plan a write of rows of ``data_schema`` on top of ``base`` (the latest version, or None).

    The data file format is the dataset's own for an append (a requested one is ignored there, as
    pylance does), and ``data_storage_version`` (default: the library's) for a new dataset or an
    overwrite that asks for one.

    Raises:
        ValueError: an unknown mode.
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        UnsupportedFormatError: the dataset needs features or a data format lance_table cannot write.
        SchemaError: the schema cannot be stored.
    """
    if mode not in ("create", "append", "overwrite"):
        raise ValueError(f"mode must be 'create', 'append' or 'overwrite', not {mode!r}")
    if base is not None and mode == "create":
        raise DatasetAlreadyExistsError(
            f"a dataset already exists at {uri}; use mode='append' or 'overwrite'"
        )
    if base is not None and mode == "append":
        data_format = writable_data_format(base, uri)  # an append keeps the dataset's format
        check_blob_fields(base.fields, data_format, uri)
        return _append_plan(base, data_format, data_schema, uri)
    data_format = writable_data_format(base, uri, data_storage_version)
    data_schema = blob_write.logical_schema(data_schema, data_format)  # 2.2 blobs: blob v2 structs
    data_schema = storage_schema(data_schema)  # extension types as Lance stores them
    fields = tuple(fields_from_arrow(data_schema))
    build_tree(fields)
    check_blob_fields(fields, data_format, uri)
    return WritePlan(base.version if base is not None else 0, False, data_schema, fields, data_format)


def prepare_write(
    base: Manifest | None,
    mode: WriteMode,
    data: Any,
    schema: pa.Schema | None,
    uri: str,
    data_storage_version: str | None = None,
) -> tuple[WritePlan, pa.RecordBatchReader]:
    """The one way from what a user passes to a write to the batches the files store: the data as
    a reader (:func:`~lance_table.table.operations.inputs.coerce_reader`, cast to ``schema``), the
    plan, and the reader's batches conformed to the plan's schema.

    Raises:
        InputTypeError: the data is of no kind a write takes.
        SchemaError: the data does not match the dataset (append) or cannot be stored.
        (and what :func:`plan_write` raises)
    """
    reader = coerce_reader(data, schema)
    plan = plan_write(base, mode, reader.schema, uri, data_storage_version)
    target = plan.schema

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield conform(batch, target)

    return plan, pa.RecordBatchReader.from_batches(target, batches())


def _append_plan(base: Manifest, data_format: str, data_schema: pa.Schema, uri: str) -> WritePlan:
    """An append of rows of ``data_schema``: the dataset's schema, less the nullable fields the data
    lacks (pylance leaves them out of the new files: they read as nulls).

    Raises:
        SchemaError: the data lacks a non-nullable field, or has one the dataset does not, or lacks
            any field of a legacy dataset (whose files hold every field and cannot store nulls of
            most types; pylance refuses such appends too).
    """
    schema = arrow_schema_from_fields(base.fields, base.schema_metadata)
    data_names = set(data_schema.names)
    extra = [n for n in data_schema.names if n not in schema.names]
    missing = missing_fields(data_schema, schema)
    if extra or missing:
        raise AppendSchemaError(
            f"Append with different schema: fields did not match, missing={missing}, "
            f"unexpected={extra} ({uri})"
        )
    fields = base.fields
    if data_names != set(schema.names) or project_present(schema, data_schema) != schema:
        if data_format == LEGACY_FORMAT:
            raise SchemaError(
                f"{uri}: the data lacks fields of this legacy dataset, whose data files must hold "
                f"every field: {[n for n in schema.names if n not in data_names] or 'struct fields'}"
            )
        schema = project_present(schema, data_schema)
        fields = tuple(_present_fields(build_tree(base.fields), list(schema)))
    return WritePlan(base.version, True, schema, fields, data_format, dict(base.dictionaries))


def _present_fields(nodes: Sequence[FieldNode], present: Sequence[pa.Field]) -> Iterator[LanceField]:
    """The Lance fields of ``nodes`` that ``present`` (Arrow fields, struct children projected)
    names, with their ids, in pre-order."""
    by_name = {f.name: f for f in present}
    for node in nodes:
        f = by_name.get(node.name)
        if f is None:
            continue
        if node.field.logical_type == "struct" and pa.types.is_struct(f.type):
            yield node.field
            yield from _present_fields(node.children, list(f.type))
        else:
            yield from (n.field for n in node.walk())


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
            cols = column_assignment(build_tree(fields))
            self._column_indices = tuple(cols.get(f.id, -1) for f in fields)
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
        return self._writer

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
            for chunk in _chunks(piece, WRITE_CHUNK_ROWS if self.data_format == "2.0" else None):
                writer.write(chunk)
            self._rows += piece.num_rows
            self._bytes += piece.nbytes
            offset += piece.num_rows
            self.progress.advance(piece.num_rows)
            # (what a writer has written is at most about what it was given: ask only then)
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
            done = (self._rows, self._bytes) if self._writer is not None else (0, 0)
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


def _chunks(batch: pa.RecordBatch, rows: int | None) -> Iterator[pa.RecordBatch]:
    if rows is None or batch.num_rows <= rows:
        yield batch
        return
    for start in range(0, batch.num_rows, rows):
        yield batch.slice(start, rows)
