"""The Structured Streaming source: the rows each new version of a dataset appends.

An offset names a version and a row position in what that version added: ``{"version": v,
"row": r}`` means every row of the versions before ``v`` has been read, and the first ``r`` rows
that ``v`` added (its new fragments in id order, counted by physical rows). The first offset of a
query without ``startingVersion`` also carries ``"snapshot": true``: its version then stands for
the whole table as of the query's start, which is read first (as Delta Lake's source does).

What a version added is found by comparing its fragments with the previous version's: an append
leaves every earlier fragment as it was and adds new ones. A version that changes or removes
earlier fragments (a delete, update, merge_insert, compaction, overwrite, restore, new columns)
stops the query with an error naming the version and its operation, unless ``skipChangeCommits``
is set: then such versions are passed over. With ``readChangeFeed`` the source yields each
version's change rows instead (:mod:`lance_table.spark.change_feed`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from lance_table.errors import UnsupportedOperationError
from lance_table.format.manifest import Fragment, Manifest
from lance_table.schema import LanceField
from lance_table.spark.read import FragmentRange, LanceTableReader
from lance_table.spark.streaming_options import StreamOptions
from lance_table.storage import Storage, open_storage
from lance_table.table import versions

Offset = dict[str, Any]


class LanceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches over versions on the driver; reads fragment row ranges in the tasks."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None,
        start_version: int,
        fields: Sequence[LanceField],
        schema_metadata: Mapping[str, bytes],
        columns: list[str],
        spark_arrow: pa.Schema,
        batch_size: int,
        max_rows_per_partition: int,
        stream: StreamOptions,
        *,
        dictionaries: Mapping[int, pa.Array] | None = None,
    ) -> None:
        self.uri = uri
        self.storage_options = dict(storage_options) if storage_options else None
        self.start_version = start_version
        self.stream = stream
        self.max_rows_per_partition = max_rows_per_partition
        self.reader = LanceTableReader(
            uri,
            storage_options,
            fields,
            schema_metadata,
            (),
            columns,
            spark_arrow,
            None,
            batch_size,
            max_rows_per_partition,
            dictionaries=dictionaries,
        )
        self._fields = tuple(fields)
        self._manifests: dict[int, Manifest] = {}
        self._added: dict[tuple[int, bool], tuple[Fragment, ...]] = {}
        self._target: int | None = None  # the last version a Trigger.AvailableNow query reads

    def _storage(self) -> Storage:
        return open_storage(self.uri, self.storage_options)

    # -- offsets ---------------------------------------------------------------------------------

    def initialOffset(self) -> Offset:
        start = self.stream.starting_version
        if start is None:
            return {"version": self.start_version, "row": 0, "snapshot": True}
        if start == -1:  # "latest": only what later versions append
            return {"version": self.start_version + 1, "row": 0}
        return {"version": start, "row": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.stream.max_rows_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._newest()

    def _newest(self) -> int:
        entries = versions.list_versions(self._storage())
        return entries[-1].version if entries else 0

    def latestOffset(self, start: Offset, limit: ReadLimit) -> Offset:
        if start.get("changes") and type(self) is LanceStreamReader:
            raise ValueError(
                "the checkpoint of this query was written with readChangeFeed, whose offsets count "
                "change rows: set readChangeFeed=true, or start with a new checkpoint"
            )
        newest = self._newest() if self._target is None else self._target
        version, row, snapshot = int(start["version"]), int(start["row"]), bool(start.get("snapshot"))
        if version > newest:
            return start
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if budget is None:
            return {"version": newest + 1, "row": 0}
        while version <= newest and budget > 0:
            left = self._size(version, snapshot) - row
            if left > budget:
                row += budget
                break
            budget -= left
            version, row, snapshot = version + 1, 0, False
        end: Offset = {"version": version, "row": row}
        if snapshot:
            end["snapshot"] = True
        return start if _key(end) == _key(start) else end

    def commit(self, end: Offset) -> None:
        """Forget what the versions Spark is done with added (it never plans them again)."""
        done = int(end["version"])
        self._added = {k: v for k, v in self._added.items() if k[0] >= done}
        self._manifests = {v: m for v, m in self._manifests.items() if v >= done - 1}

    def reportLatestOffset(self) -> Offset | None:
        return {"version": self._newest() + 1, "row": 0}

    # -- planning and reading --------------------------------------------------------------------

    def partitions(self, start: Offset, end: Offset) -> Sequence[FragmentRange]:
        v0, r0, snapshot = int(start["version"]), int(start["row"]), bool(start.get("snapshot"))
        v1, r1 = int(end["version"]), int(end["row"])
        out: list[FragmentRange] = []
        for version in range(v0, v1 + 1):
            if version == v1 and r1 == 0:
                break
            added = self._added_by(version, snapshot and version == v0)
            lo = r0 if version == v0 else 0
            hi = r1 if version == v1 else _rows(added)
            out.extend(self._ranges(added, lo, hi))
        return out

    def _ranges(self, added: Sequence[Fragment], lo: int, hi: int) -> Iterator[FragmentRange]:
        """Row ranges of at most ``max_rows_per_partition`` covering rows ``[lo, hi)`` of ``added``."""
        offset = 0
        for frag in added:
            a, b = max(lo - offset, 0), min(hi - offset, frag.physical_rows)
            for s in range(a, b, self.max_rows_per_partition):
                yield FragmentRange(frag, s, min(s + self.max_rows_per_partition, b))
            offset += frag.physical_rows

    def read(self, partition: FragmentRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return self.reader.read(partition)

    # -- what a version added --------------------------------------------------------------------

    def _size(self, version: int, snapshot: bool) -> int:
        """How many rows ``version`` contributes to the stream (offsets count these)."""
        return _rows(self._added_by(version, snapshot))

    def _manifest(self, version: int) -> Manifest:
        if version not in self._manifests:
            storage = self._storage()
            entry = versions.find_entry(storage, version)
            self._manifests[version] = versions.read_manifest_file(storage, entry).manifest
        return self._manifests[version]

    def _added_by(self, version: int, snapshot: bool) -> tuple[Fragment, ...]:
        """The fragments ``version`` added, in id order (all of its fragments for a snapshot).

        Raises:
            UnsupportedOperationError: the version changed earlier rows or the schema, and
                ``skipChangeCommits`` is not set.
            VersionNotFoundError: the version does not exist (cleaned up, or not yet written).
        """
        key = (version, snapshot)
        if key not in self._added:
            cur = self._manifest(version)
            if snapshot or version == 1:
                added: tuple[Fragment, ...] = tuple(cur.fragments)
            else:
                added = self._appended(version, cur)
            self._added[key] = tuple(sorted(added, key=lambda f: f.id))
        return self._added[key]

    def _appended(self, version: int, cur: Manifest) -> tuple[Fragment, ...]:
        prev = self._manifest(version - 1)
        before = {f.id: f for f in prev.fragments}
        now = {f.id: f for f in cur.fragments}
        if tuple(prev.fields) == tuple(cur.fields) and all(now.get(i) == f for i, f in before.items()):
            return tuple(f for i, f in now.items() if i not in before)
        if self.stream.skip_change_commits:
            return ()
        raise UnsupportedOperationError(
            f"version {version} of {self.uri} ({self._operation(version)}) changes rows or the schema "
            "that earlier versions wrote; the lance_table streaming source reads appended rows only. "
            "Set the option skipChangeCommits=true to pass over such versions, readChangeFeed=true to "
            "read the change rows of every version, or restart the query with a new checkpoint and "
            "startingVersion after it"
        )

    def _operation(self, version: int) -> str:
        storage = self._storage()
        try:
            mf = versions.read_manifest_file(storage, versions.find_entry(storage, version))
            txn = versions.read_transaction(storage, mf)
        except Exception:  # only for the message
            return "an unknown operation"
        return "an unknown operation" if txn is None else f"operation {type(txn.operation).__name__}"


def _rows(fragments: Sequence[Fragment]) -> int:
    return sum(f.physical_rows for f in fragments)


def _key(offset: Offset) -> tuple[int, int, bool]:
    return int(offset["version"]), int(offset["row"]), bool(offset.get("snapshot"))
