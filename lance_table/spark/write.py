"""Writing: every task streams its batches into new fragments; the driver commits them in one version.

The writer object is built on the driver and pickled separately to every task and to
``commit()``/``abort()``, so nothing set in a task reaches the driver except the commit messages.

Spark calls ``abort()`` as soon as the job has failed, without waiting for the tasks still running
(a cancelled task's Python worker often finishes its write anyway). So ``abort()`` first leaves a
marker, then deletes the write's files; a task checks the marker before each new file and once
its files are complete, and deletes its own files if the write was aborted. A task's files exist
before its last check, and the marker before abort's listing, so each file is deleted by one side
or the other. Only a worker killed before its last check, with a file created just as abort was
listing, can still leave one behind; cleanup removes it after the grace period.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from lance_table.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    VersionGoneError,
    VersionNotFoundError,
    WriteAbortedError,
)
from lance_table.format import paths
from lance_table.format.manifest import Fragment
from lance_table.schema import LanceField
from lance_table.spark.options import merge_storage, task_storage_options
from lance_table.spark.types import cast_batch
from lance_table.spark.worker import settle_worker
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.commit import CommitOptions, commit
from lance_table.table.operations.cleanup_references import referenced_files
from lance_table.table.operations.legacy_dicts import WrittenPart, merge_written_parts
from lance_table.table.operations.write import (
    DEFAULT_MAX_ROWS_PER_FILE,
    LEGACY_FORMAT,
    FragmentWriter,
    WriteMode,
    plan_write,
)

log = logging.getLogger(__name__)


@dataclass
class FragmentsWritten(WriterCommitMessage):
    """What one task wrote: its partition, attempt, the new fragments and their files."""

    write_id: str
    partition: int
    attempt: int
    fragments: tuple[Fragment, ...]
    files: tuple[str, ...]
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict)  # legacy datasets


def _task_identity() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:  # pragma: no cover - only outside Spark
        return 0, 0
    return ctx.partitionId(), ctx.attemptNumber()


class LanceTableWriter(DataSourceArrowWriter):
    """Append or overwrite as one atomic commit, with rebase on concurrent commits."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None,
        spark_arrow: pa.Schema,
        overwrite: bool,
        *,
        max_rows_per_file: int | None = None,
        commit_message: str | None = None,
        data_storage_version: str | None = None,
    ) -> None:
        self.uri = uri
        self.storage_options = dict(storage_options) if storage_options else None
        self.overwrite = overwrite
        self.max_rows_per_file = max_rows_per_file or DEFAULT_MAX_ROWS_PER_FILE
        self.commit_message = commit_message
        self.write_id = uuid.uuid4().hex[: paths.WRITE_TAG_LENGTH]
        # Names the commit's transaction file: abort() finds it when the commit may have landed.
        self.txn_uuid = str(uuid.uuid4())
        # Stored in the commit's transaction (the streaming sink records its query and epoch here).
        self.transaction_properties: dict[str, str] = {}
        storage = self._storage()
        entries = versions.list_versions(storage)
        self.scheme = versions.naming_scheme(entries)
        base = versions.read_manifest_file(storage, entries[-1]).manifest if entries else None
        # Planned once, on the driver, by the same code as write_dataset (schema, fields, format).
        mode: WriteMode = "overwrite" if overwrite else "append"
        self.plan = plan_write(base, mode, _plain_types(spark_arrow), uri, data_storage_version)
        self.read_version = self.plan.read_version
        self.schema = self.plan.schema
        self.fields: tuple[LanceField, ...] = self.plan.fields

    def _storage(self) -> Storage:
        return open_storage(self.uri, self.storage_options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FragmentsWritten:
        settle_worker()
        partition, attempt = _task_identity()
        # the task's session conf (spark.lance_table.*) under the options the driver planned with
        storage = open_storage(self.uri, merge_storage(task_storage_options(), self.storage_options))
        marker = paths.aborted_write_path(self.write_id)

        def check_not_aborted() -> None:
            if storage.exists(marker):
                raise WriteAbortedError(
                    f"the write to {self.uri} was aborted (partition {partition}, attempt {attempt})"
                )

        writer = FragmentWriter(
            storage,
            self.schema,
            list(self.fields),
            max_rows_per_file=self.max_rows_per_file,
            write_tag=self.write_id,
            before_file=check_not_aborted,
            data_format=self.plan.data_format,
            dictionaries=self.plan.dictionaries,
        )
        where = f"writing to {self.uri}"
        try:
            # (2.0 and legacy files cut a write into chunks of their own: no join pays there)
            joins = self.plan.data_format not in ("2.0", LEGACY_FORMAT)
            for batch in coalesced(iterator) if joins else iterator:
                if not batch.num_rows:
                    continue
                writer.write(cast_batch(batch, self.schema, where))
            fragments = writer.finish()
            if writer.paths:
                check_not_aborted()  # the files are complete: either abort's listing sees them or this does
        except BaseException:
            writer.abort()  # this attempt's files go; a retry writes its own
            raise
        return FragmentsWritten(
            self.write_id, partition, attempt, tuple(fragments), tuple(writer.paths), writer.dictionaries
        )

    def commit(self, messages: Sequence[FragmentsWritten | None]) -> None:  # type: ignore[override]
        """Commit every task's fragments as one Append (or Overwrite) version.

        Raises only when nothing was committed (Spark then calls :meth:`abort`).
        """
        settle_worker()
        storage = self._storage()
        chosen: dict[int, FragmentsWritten] = {}
        for msg in messages:
            if msg is None:
                continue
            if msg.partition in chosen:  # a second successful attempt of one partition: keep one
                _delete(storage, msg.files)
                continue
            chosen[msg.partition] = msg
        parts = [chosen[p] for p in sorted(chosen)]
        fragments = tuple(f for part in parts for f in part.fragments)
        files = tuple(f for part in parts for f in part.files)
        dictionaries: Mapping[int, pa.Array] = {}
        replaced: tuple[str, ...] = ()
        if any(part.dictionaries for part in parts):
            # Legacy dictionary columns: the tasks extended the dataset's dictionary each in its
            # own way; files whose keys disagree with the joined dictionary are rewritten.
            merged = merge_written_parts(
                storage,
                self.schema,
                self.fields,
                self.plan.dictionaries,
                [WrittenPart(part.fragments, part.files, part.dictionaries) for part in parts],
                write_tag=self.write_id,
            )
            fragments, files, replaced = merged.fragments, merged.files, merged.replaced
            dictionaries = merged.dictionaries
        base = None
        if self.plan.append:
            try:
                base = versions.read_manifest_file(
                    storage, versions.find_entry(storage, self.read_version)
                ).manifest
            except VersionNotFoundError:
                raise CommitConflictError(
                    f"version {self.read_version} of {self.uri}, which this write planned against, has "
                    "been cleaned up; re-run the write against the latest version",
                    retryable=True,
                ) from None
        entries = versions.list_versions(storage)
        commit(
            storage,
            base,
            self.plan.pending(fragments, files, dictionaries),
            options=CommitOptions(),
            properties=self.transaction_properties,
            message=self.commit_message,
            scheme=versions.naming_scheme(entries) if entries else self.scheme,
            txn_uuid=self.txn_uuid,
        )
        # Nothing after this point may raise: the version exists, and abort() would delete its files.
        _delete(storage, replaced)

    def abort(self, messages: Sequence[FragmentsWritten | None]) -> None:  # type: ignore[override]
        """Delete the files of this write that no version references, unless its commit may have
        landed.

        Files of tasks that failed or were cancelled (no message) are found by the write's tag in
        their names. The abort marker goes first, so that tasks still running clean up after
        themselves (see the module docstring). When the commit's transaction file exists, the commit
        landed or its outcome is unknown (a timeout): nothing is deleted, and cleanup removes the
        files after the grace period if no version took them. When the versions cannot be read,
        nothing is deleted either.
        """
        storage = self._storage()
        try:
            storage.write(paths.aborted_write_path(self.write_id), b"")
        except Exception:
            log.warning("could not mark the write to %s as aborted", self.uri, exc_info=True)
        files = {f for msg in messages if msg is not None for f in msg.files}
        for entry in storage.list_dir(paths.DATA_DIR, stat=False):
            if paths.has_write_tag(entry.name, self.write_id):
                files.add(entry.path)
        if not files:
            return
        try:
            keep = self._referenced(storage)
        except Exception:
            log.warning(
                "the write to %s was aborted, but its commit may have landed or the versions could not "
                "be read: its files stay (cleanup removes them after the grace period if no version "
                "references them)",
                self.uri,
                exc_info=True,
            )
            return
        _delete(storage, [f for f in files if f not in keep])

    def _referenced(self, storage: Storage) -> set[str]:
        """Every file any version references.

        Raises:
            CommitStateUnknownError: this write's commit may have landed (its transaction file exists).
        """
        suffix = f"-{self.txn_uuid}{paths.TRANSACTION_SUFFIX}"
        if any(e.name.endswith(suffix) for e in storage.list_dir(paths.TRANSACTIONS_DIR, stat=False)):
            raise CommitStateUnknownError(f"the commit of this write to {self.uri} may have landed")
        keep: set[str] = set()
        for entry in versions.list_versions(storage):
            try:
                keep |= referenced_files(versions.read_manifest_file(storage, entry).manifest)
            except VersionGoneError:
                continue  # cleaned up since the listing: its files may go
        return keep


#: Spark's Arrow batches (``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000 rows by default)
#: are joined up to this many rows before they are encoded: the 2.1/2.2 encoders pay a cost per
#: batch in every column
COALESCE_ROWS = 128 * 1024
#: ... or up to this many bytes (their buffers' size), which bounds the memory a join holds
COALESCE_BYTES = 32 << 20


def coalesced(
    batches: Iterable[pa.RecordBatch], rows: int = COALESCE_ROWS, max_bytes: int = COALESCE_BYTES
) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` (all of one schema) in order, consecutive batches joined into one
    of at least ``rows`` rows or ``max_bytes`` bytes (the last one smaller); a batch that reaches
    either bound alone passes as it is. Batches without rows are left out."""
    pending: list[pa.RecordBatch] = []
    count = size = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        count += batch.num_rows
        size += batch.get_total_buffer_size()
        if count >= rows or size >= max_bytes:
            yield _joined(pending)
            pending, count, size = [], 0, 0
    if pending:
        yield _joined(pending)


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def _delete(storage: Storage, files: Sequence[str]) -> None:
    for path in files:
        with contextlib.suppress(OSError):
            storage.delete(path)


def _plain_types(schema: pa.Schema) -> pa.Schema:
    """Spark's Arrow schema with large string/binary/list types made regular (as pylance writes them)."""

    def plain(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(t.value_field.with_type(plain(t.value_type)))
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(plain(f.type)) for f in t])
        return t

    return pa.schema([f.with_type(plain(f.type)) for f in schema], metadata=schema.metadata)
