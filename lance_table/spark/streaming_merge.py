"""The upserting Structured Streaming sink (option ``merge_on``): each micro-batch a merge_insert.

Rows whose key columns match a row of the dataset replace it; the others are inserted; exactly
once as the appending sink (:mod:`lance_table.spark.streaming_sink`): the query id and epoch go into
the merge's transaction properties and a replayed epoch is recognised and not merged again.

The tasks send their rows to the driver in their commit messages and the driver runs the merge
(the merge spills its source to disk past its memory limit): bound the micro-batches with the
source's own limit (``maxRowsPerTrigger``, ``maxFilesPerTrigger``, ...). Several rows of one
micro-batch with the same key fail the merge, as pylance's merge_insert does; deduplicate them in
the query (for example keep the newest per key) before the sink.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from lance_table.errors import CommitConflictError, DatasetNotFoundError
from lance_table.spark.streaming_options import EPOCH_ID_KEY, QUERY_ID_KEY
from lance_table.spark.streaming_sink import _checkpoint_query_id, _spark_query, committed_epoch
from lance_table.spark.write import _plain_types
from lance_table.storage import open_storage

log = logging.getLogger(__name__)

# How many times a micro-batch's merge is planned again after losing a race with another writer.
MERGE_ATTEMPTS = 4


@dataclass
class EpochRows(WriterCommitMessage):
    """One task's rows of a micro-batch, with the query it belongs to."""

    rows: pa.Table
    spark_query_id: str | None


class LanceStreamMergeWriter(DataSourceStreamArrowWriter):
    """Merges each micro-batch into the dataset on the key columns ``on``, exactly once."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None,
        spark_arrow: pa.Schema,
        on: Sequence[str],
        *,
        query_id: str | None,
        dedupe_lookback: int,
        checkpoint: str | None = None,
        commit_message: str | None = None,
    ) -> None:
        missing = [c for c in on if c not in spark_arrow.names]
        if not on or missing:
            raise ValueError(
                f"option 'merge_on' names columns {missing or list(on)} that the stream written to "
                f"{uri} does not have; its columns are {spark_arrow.names}"
            )
        self.uri = uri
        self.storage_options = dict(storage_options) if storage_options else None
        self.schema = _plain_types(spark_arrow)
        self.on = list(on)
        self.query_id = query_id
        self.dedupe_lookback = dedupe_lookback
        self.checkpoint = checkpoint
        self.commit_message = commit_message

    def write(self, iterator: Iterator[pa.RecordBatch]) -> EpochRows:
        spark_query, _ = _spark_query()
        batches = [b.cast(self.schema) for b in iterator if b.num_rows]
        return EpochRows(pa.Table.from_batches(batches, schema=self.schema), spark_query)

    def commit(self, messages: Sequence[EpochRows | None], batchId: int) -> None:  # type: ignore[override]
        """Merge the micro-batch ``batchId`` (one version), unless this query already did.

        Raises:
            ValueError: the query id is unknown (see :class:`LanceStreamWriter`).
            MergeSourceError: several rows of the micro-batch share a key, or its columns do not
                fit the dataset's.
            CommitConflictError: a concurrent commit makes the merge impossible.
        """
        import lance_table as lt

        tables = [m.rows for m in messages if m is not None and m.rows.num_rows]
        if not tables:
            return
        query_id = self.query_id or next(
            (m.spark_query_id for m in messages if m is not None and m.spark_query_id), None
        )
        query_id = query_id or _checkpoint_query_id(self.checkpoint)
        if query_id is None:
            raise ValueError(
                f"the streaming merge into {self.uri} cannot tell its query apart from others: set "
                "the option 'streamingQueryId' (or 'checkpointLocation')"
            )
        storage = open_storage(self.uri, self.storage_options)
        done = committed_epoch(storage, query_id, batchId, self.dedupe_lookback)
        if done is not None:
            log.info("micro-batch %d of query %s was merged before (version %d)", batchId, query_id, done)
            return
        data = pa.concat_tables(tables)
        props = {QUERY_ID_KEY: query_id, EPOCH_ID_KEY: str(batchId)}
        try:
            ds = lt.dataset(self.uri, storage_options=self.storage_options)
        except DatasetNotFoundError:
            lt.write_dataset(
                data,
                self.uri,
                storage_options=self.storage_options,
                commit_message=self.commit_message,
                transaction_properties=props,
            )
            return
        for attempt in range(MERGE_ATTEMPTS):
            builder = ds.merge_insert(self.on).when_matched_update_all().when_not_matched_insert_all()
            txn, _ = builder.execute_uncommitted(data)
            txn.transaction_properties = {**(txn.transaction_properties or {}), **props}
            try:
                lt.LanceDataset.commit(
                    self.uri, txn, storage_options=self.storage_options, commit_message=self.commit_message
                )
                return
            except CommitConflictError as exc:  # a concurrent writer changed matched rows: merge again
                if not exc.retryable or attempt == MERGE_ATTEMPTS - 1:
                    raise
                ds = lt.dataset(self.uri, storage_options=self.storage_options)

    def abort(self, messages: Sequence[EpochRows | None], batchId: int) -> None:  # type: ignore[override]
        """Nothing to undo: the tasks write no files, the merge runs in :meth:`commit`."""
