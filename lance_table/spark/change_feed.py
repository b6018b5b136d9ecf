"""The change data feed on Spark (option ``readChangeFeed``), as Delta Lake's: each row carries the
data columns, then ``_change_type`` (``insert``, ``delete``, ``update_preimage``,
``update_postimage``), ``_commit_version`` and ``_commit_timestamp``.

The changes of a version are planned on the driver by :mod:`lance_table.table.changes` (manifests,
transactions and deletion files only); a task reads a slice of the planned change rows, taking
just those rows. In a stream the offsets are those of the appends-only source
(:mod:`lance_table.spark.streaming_source`), ``{"version": v, "row": r, "changes": true}``, with
``r`` counting the change rows of ``v`` in their planned order (deleted and preimage rows, then
inserted and postimage rows, by fragment id), which depends only on the two manifests: a
micro-batch may end inside a version, and a query restarted from its checkpoint plans the same
rows again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from lance_table.errors import SchemaError
from lance_table.schema import arrow_schema_from_fields
from lance_table.spark.options import merge_storage, task_storage_options
from lance_table.spark.read import MIN_PARTITION_ROWS
from lance_table.spark.streaming_source import LanceStreamReader, Offset
from lance_table.spark.types import cast_batch
from lance_table.storage import open_storage
from lance_table.table.changes import (
    CHANGE_FIELDS,
    ChangePiece,
    ManifestCache,
    VersionChanges,
    all_inserted,
    read_piece,
    version_changes,
)

#: the names of the columns a change row carries after the data columns
CHANGE_COLUMNS = tuple(f.name for f in CHANGE_FIELDS)


@dataclass
class ChangeRange(InputPartition):
    """A task's share of the change rows: rows ``[lo, hi)`` of each of some planned pieces."""

    pieces: tuple[tuple[ChangePiece, int, int], ...]


def change_fields(names: Sequence[str]) -> list[pa.Field]:
    """The change feed's own columns, for a read of a dataset with columns ``names``.

    Raises:
        SchemaError: the dataset has a column of one of their names.
    """
    clash = [c for c in CHANGE_COLUMNS if c in names]
    if clash:
        raise SchemaError(f"the dataset has columns {clash}, which the change feed (readChangeFeed) adds")
    return list(CHANGE_FIELDS)


def ranges(
    planned: VersionChanges, lo: int, hi: int, max_rows: int
) -> Iterator[tuple[ChangePiece, int, int]]:
    """Slices of at most ``max_rows`` rows covering change rows ``[lo, hi)`` of a version."""
    offset = 0
    for piece in planned.pieces:
        a, b = max(lo - offset, 0), min(hi - offset, piece.rows)
        for s in range(a, b, max_rows):
            yield piece, s, min(s + max_rows, b)
        offset += piece.rows


def packed(slices: Sequence[tuple[ChangePiece, int, int]], max_rows: int) -> list[ChangeRange]:
    """Consecutive slices in partitions of at least :data:`MIN_PARTITION_ROWS` rows (when there
    are that many), never more than ``max_rows``."""
    floor = min(MIN_PARTITION_ROWS, max_rows)
    groups: list[list[tuple[ChangePiece, int, int]]] = []
    rows = 0
    for piece in slices:
        n = piece[2] - piece[1]
        if groups and rows + n <= floor:
            groups[-1].append(piece)
            rows += n
            continue
        groups.append([piece])
        rows = n
    return [ChangeRange(tuple(g)) for g in groups]


class _Reading:
    """Reads change slices in the tasks (shared by the stream and the batch reader)."""

    uri: str
    storage_options: dict[str, Any] | None
    data_columns: list[str]
    data_types: pa.Schema
    spark_arrow: pa.Schema
    batch_size: int

    def read_changes(self, partition: ChangeRange) -> Iterator[pa.RecordBatch]:
        storage = open_storage(self.uri, merge_storage(task_storage_options(), self.storage_options))
        for piece, lo, hi in partition.pieces:
            where = f"{self.uri} version {piece.version} fragment {piece.fragment.id}"
            for batch in read_piece(
                storage, piece, self.data_columns, lo, hi, self.batch_size, types=self.data_types
            ):
                yield cast_batch(batch, self.spark_arrow, where)


class ChangeFeedStreamReader(LanceStreamReader, _Reading):
    """The streaming source with ``readChangeFeed``: every version's change rows, not only appends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spark_arrow = self.reader.spark_arrow
        self.batch_size = self.reader.batch_size
        self.data_columns = [c for c in self.reader.columns if c not in CHANGE_COLUMNS]
        schema = arrow_schema_from_fields(self._fields, self.reader.schema_metadata)
        self.data_types = pa.schema([schema.field(c) for c in self.data_columns])
        self._planned: dict[tuple[int, bool], VersionChanges] = {}
        self._cache: ManifestCache | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Tasks get the reader without what the driver remembers of versions."""
        state = dict(self.__dict__)
        state.update(_planned={}, _cache=None, _manifests={}, _added={})
        return state

    # Offsets carry "changes": true. A checkpoint of the appends-only source counts other rows
    # in a version: resuming it with the change feed (or the other way) would skip or repeat rows.

    def initialOffset(self) -> Offset:
        return {**super().initialOffset(), "changes": True}

    def latestOffset(self, start: Offset, limit: Any) -> Offset:
        if not start.get("changes"):
            raise ValueError(
                "the checkpoint of this query was written without readChangeFeed, whose offsets "
                "count other rows: start the change feed with a new checkpoint (and startingVersion)"
            )
        end = super().latestOffset(start, limit)
        return end if end is start else {**end, "changes": True}

    def _changes(self, version: int, snapshot: bool) -> VersionChanges:
        """The planned change rows of ``version`` (all of its rows as inserts for the snapshot).

        Raises:
            VersionNotFoundError: the version or the one before it does not exist.
            SchemaError: the version drops, renames or retypes a column the stream reads.
        """
        key = (version, snapshot)
        if key not in self._planned:
            if self._cache is None:
                self._cache = ManifestCache(self._storage())
            if snapshot:
                planned = all_inserted(self._cache.get(version)[0])
            else:
                planned = version_changes(self._cache, version, self.data_columns)
            self._planned[key] = planned
        return self._planned[key]

    def _size(self, version: int, snapshot: bool) -> int:
        return self._changes(version, snapshot).rows

    def commit(self, end: Offset) -> None:
        """Forget the versions Spark is done with."""
        done = int(end["version"])
        self._planned = {k: v for k, v in self._planned.items() if k[0] >= done}
        if self._cache is not None:
            self._cache.forget_before(done - 1)

    def partitions(self, start: Offset, end: Offset) -> Sequence[ChangeRange]:  # type: ignore[override]
        v0, r0, snapshot = int(start["version"]), int(start["row"]), bool(start.get("snapshot"))
        v1, r1 = int(end["version"]), int(end["row"])
        slices: list[tuple[ChangePiece, int, int]] = []
        for version in range(v0, v1 + 1):
            if version == v1 and r1 == 0:
                break
            planned = self._changes(version, snapshot and version == v0)
            lo = r0 if version == v0 else 0
            hi = r1 if version == v1 else planned.rows
            slices.extend(ranges(planned, lo, hi, self.max_rows_per_partition))
        return packed(slices, self.max_rows_per_partition)

    def read(self, partition: ChangeRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return self.read_changes(partition)


class ChangeFeedReader(DataSourceReader, _Reading):
    """A batch read of the change feed: the change rows of versions ``first`` to ``last``."""

    def __init__(
        self,
        uri: str,
        storage_options: dict[str, Any] | None,
        first: int,
        last: int,
        data_types: pa.Schema,
        spark_arrow: pa.Schema,
        batch_size: int,
        max_rows_per_partition: int,
    ) -> None:
        self.uri = uri
        self.storage_options = storage_options
        self.first, self.last = first, last
        self.data_types = data_types
        self.data_columns = list(data_types.names)
        self.spark_arrow = spark_arrow
        self.batch_size = batch_size
        self.max_rows = max_rows_per_partition

    def partitions(self) -> Sequence[ChangeRange]:
        cache = ManifestCache(open_storage(self.uri, self.storage_options))
        slices: list[tuple[ChangePiece, int, int]] = []
        for version in range(self.first, self.last + 1):
            planned = version_changes(cache, version, self.data_columns)
            cache.forget_before(version)
            slices.extend(ranges(planned, 0, planned.rows, self.max_rows))
        return packed(slices, self.max_rows)

    def read(self, partition: ChangeRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return self.read_changes(partition)
