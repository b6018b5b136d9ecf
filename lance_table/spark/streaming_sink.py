"""The Structured Streaming sink: each non-empty micro-batch becomes one version, exactly once.

The tasks write fragments as the batch writer's tasks do (:class:`LanceTableWriter`); the driver
commits them as one Append (an Overwrite in complete mode), with the query id and the epoch (Spark's
batch id) in the transaction properties under the JVM connector's keys. A micro-batch that Spark
replays after a failure (the sink committed, the checkpoint did not) finds its epoch, or a later
one, among the recent versions of the same query: the replay is not committed again and its files
are deleted. The JVM connector's sink recognises these epochs and this sink recognises its.

Spark builds the sink's writer on the driver for the tasks and, separately, for each ``commit()``
and ``abort()``; only the tasks know Spark's query id (from their local properties), so their
commit messages carry it to the driver.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from lance_table.errors import DatasetNotFoundError, VersionGoneError, VersionNotFoundError
from lance_table.format import paths
from lance_table.spark.streaming_options import EPOCH_ID_KEY, QUERY_ID_KEY
from lance_table.spark.write import FragmentsWritten, LanceTableWriter, _delete
from lance_table.storage import Storage
from lance_table.table import versions

log = logging.getLogger(__name__)

# Local properties Spark gives every task of a streaming query (the run id is not among them).
_SPARK_QUERY_ID = "sql.streaming.queryId"
_SPARK_BATCH_ID = "streaming.sql.batchId"


@dataclass
class EpochPart(WriterCommitMessage):
    """One task's fragments of a micro-batch, with the query it belongs to."""

    part: FragmentsWritten
    spark_query_id: str | None


def _spark_query() -> tuple[str | None, str | None]:
    """Spark's query id and batch id of the running task (None outside a streaming task)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:  # pragma: no cover - only outside Spark
        return None, None
    return ctx.getLocalProperty(_SPARK_QUERY_ID), ctx.getLocalProperty(_SPARK_BATCH_ID)


def _write_tag(query_id: str | None, nonce: str, batch_id: str | None) -> str:
    """The tag in the names of one micro-batch's data files, shared by its tasks: one per epoch and
    writer (Spark builds the tasks' writer anew for each run of a query), so that a replay never
    meets the abort marker of an earlier attempt."""
    if query_id is None or batch_id is None:
        return uuid.uuid4().hex[: paths.WRITE_TAG_LENGTH]
    key = f"{query_id}/{nonce}/{batch_id}".encode()
    return hashlib.sha256(key).hexdigest()[: paths.WRITE_TAG_LENGTH]


def committed_epoch(storage: Storage, query_id: str, epoch: int, lookback: int) -> int | None:
    """The version among the ``lookback`` newest that a commit of ``query_id`` at epoch ``epoch``
    or later made, or None.

    The search stops at the newest commit of the query: a query's epochs grow with its versions, so
    when that one is older than ``epoch`` no earlier one can be. A version cleaned up meanwhile, or
    one without a transaction, is passed over.
    """
    try:
        entries = versions.list_versions(storage)
    except DatasetNotFoundError:
        return None
    for entry in reversed(entries[-lookback:]):
        try:
            txn = versions.read_transaction(storage, versions.read_manifest_file(storage, entry))
        except (VersionGoneError, VersionNotFoundError):
            continue
        if txn is None or txn.properties.get(QUERY_ID_KEY) != query_id:
            continue
        try:
            committed = int(txn.properties.get(EPOCH_ID_KEY, ""))
        except ValueError:
            continue
        return entry.version if committed >= epoch else None
    return None


class LanceStreamWriter(DataSourceStreamArrowWriter):
    """Appends (or, in complete mode, overwrites) each micro-batch as one version, exactly once."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None,
        spark_arrow: pa.Schema,
        overwrite: bool,
        *,
        query_id: str | None,
        dedupe_lookback: int,
        checkpoint: str | None = None,
        max_rows_per_file: int | None = None,
        commit_message: str | None = None,
        data_storage_version: str | None = None,
    ) -> None:
        self.uri = uri
        self.overwrite = overwrite
        self.query_id = query_id
        self.dedupe_lookback = dedupe_lookback
        self.checkpoint = checkpoint
        self.nonce = uuid.uuid4().hex
        # Planned against the latest version each time Spark builds the writer (for every commit).
        self.batch = LanceTableWriter(
            uri,
            storage_options,
            spark_arrow,
            overwrite,
            max_rows_per_file=max_rows_per_file,
            commit_message=commit_message,
            data_storage_version=data_storage_version,
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> EpochPart:
        spark_query, batch = _spark_query()
        self.batch.write_id = _write_tag(spark_query, self.nonce, batch)
        return EpochPart(self.batch.write(iterator), spark_query)

    def _query_id(self, messages: Sequence[EpochPart | None]) -> str | None:
        if self.query_id is not None:
            return self.query_id
        for msg in messages:
            if msg is not None and msg.spark_query_id:
                return msg.spark_query_id
        return _checkpoint_query_id(self.checkpoint)

    def commit(self, messages: Sequence[EpochPart | None], batchId: int) -> None:  # type: ignore[override]
        """Commit the micro-batch ``batchId`` as one version, unless this query already did.

        An empty micro-batch commits nothing in append mode; in complete mode it empties the table.

        Raises:
            ValueError: the query id is unknown (no ``streamingQueryId`` option, no task reported
                Spark's, no readable checkpoint) for a micro-batch that must commit.
            CommitConflictError: a concurrent commit makes this one impossible.
        """
        parts = [m.part for m in messages if m is not None]
        storage = self.batch._storage()
        rows = sum(f.physical_rows for p in parts for f in p.fragments)
        if not rows and not self.overwrite:
            return
        query_id = self._query_id(messages)
        if query_id is None:
            _delete(storage, [f for p in parts for f in p.files])
            raise ValueError(
                f"the streaming write to {self.uri} cannot tell its query apart from others: set the "
                "option 'streamingQueryId' (or 'checkpointLocation')"
            )
        done = committed_epoch(storage, query_id, batchId, self.dedupe_lookback)
        if done is not None:
            log.info(
                "micro-batch %d of query %s was committed before (version %d of %s): not again",
                batchId,
                query_id,
                done,
                self.uri,
            )
            _delete(storage, [f for p in parts for f in p.files])
            return
        self.batch.transaction_properties = {QUERY_ID_KEY: query_id, EPOCH_ID_KEY: str(batchId)}
        self.batch.commit(parts)

    def abort(self, messages: Sequence[EpochPart | None], batchId: int) -> None:  # type: ignore[override]
        """Delete the files of the failed micro-batch that no version references (see
        :meth:`LanceTableWriter.abort`); files of tasks that reported nothing are found by their tag
        when any task of the micro-batch reported, else cleanup removes them after its grace period.
        """
        parts = [m.part for m in messages if m is not None]
        if parts:
            self.batch.write_id = parts[0].write_id
        else:
            log.warning(
                "micro-batch %d of the streaming write to %s failed before any task reported: files "
                "it wrote stay until cleanup",
                batchId,
                self.uri,
            )
        if parts:
            self.batch.abort(parts)


def _checkpoint_query_id(checkpoint: str | None) -> str | None:
    """Spark's query id from a checkpoint's ``metadata`` file (a JSON object with ``id``)."""
    if not checkpoint:
        return None
    import json

    import fsspec

    try:
        with fsspec.open(f"{checkpoint.rstrip('/')}/metadata", "r") as f:
            first = f.readline()
        value = json.loads(first).get("id")
    except (OSError, ValueError):
        return None
    return str(value) if value else None
