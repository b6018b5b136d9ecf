"""The source of a merge_insert: any input a write takes, read once as a stream, checked against
the dataset's schema and kept for the plan's passes (and retries) -- in memory while it fits the
memory limit, else spilled to a temporary Arrow IPC file read back through a memory map.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from lance_table.errors import MergeSourceError
from lance_table.file.arrow_take import take
from lance_table.table.blob_write import is_blob_v2_arrow
from lance_table.table.operations.inputs import coerce_reader

# Rows of the source kept in memory up to this many bytes; past it the source spills to disk.
DEFAULT_MEMORY_LIMIT = 256 * 1024**2
# Column name of the source row index added to key tables (and of target positions).
SOURCE_INDEX = "__merge_source_row"
TARGET_POSITION = "__merge_target_row"


class MergeSource:
    """The source rows, kept for repeated reads (a context manager: leaving it removes the spill).

    Attributes:
        table: every source row, in the order read (over a memory-mapped file when spilled).
        spilled: whether the rows are on disk.
    """

    def __init__(self, table: pa.Table, spill_dir: str | None) -> None:
        self.table = table
        self._spill_dir = spill_dir

    @property
    def spilled(self) -> bool:
        return self._spill_dir is not None

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def close(self) -> None:
        self.table = self.table.schema.empty_table()
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            self._spill_dir = None

    def __enter__(self) -> MergeSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def key_ranges(self, on: Sequence[str], limit: int) -> Iterator[pa.Table]:
        """The source's keys with their row index (:data:`SOURCE_INDEX`), in contiguous ranges of
        rows whose keys take at most about ``limit`` bytes each (one range when they all fit)."""
        keys = self.table.select(list(on))
        n = keys.num_rows
        per_row = max(1.0, keys.nbytes / max(n, 1) + 8)
        step = max(1, int(limit / per_row))
        for lo in range(0, max(n, 1), step):
            part = keys.slice(lo, step)
            if not part.num_rows:
                return
            index = pa.array(np.arange(lo, lo + part.num_rows, dtype=np.int64))
            yield part.combine_chunks().append_column(SOURCE_INDEX, index)

    def rows(self, indices: np.ndarray) -> pa.Table:
        """The source rows at ``indices``, in that order."""
        return take(self.table, pa.array(indices, pa.int64()))


def _blob_input(t: pa.DataType) -> bool:
    """Whether a source column of type ``t`` can fill a blob v2 column."""
    if isinstance(t, pa.ExtensionType):
        t = t.storage_type
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_struct(t)


def check_source_schema(source: pa.Schema, target: pa.Schema, on: Sequence[str], uri: str) -> None:
    """The source's columns must be dataset columns of the same types, and hold every key.

    Raises:
        MergeSourceError: a column the dataset does not have, a type that differs, a key missing.
    """
    extra = [n for n in source.names if n not in target.names]
    missing_keys = [k for k in on if k not in source.names]
    if extra or missing_keys:
        raise MergeSourceError(
            f"{uri}: the merge_insert source's fields do not match the dataset's: "
            f"unexpected={extra}, missing join keys={missing_keys}"
        )
    for f in source:
        stored = target.field(f.name)
        want = stored.type
        if is_blob_v2_arrow(stored) and _blob_input(f.type):
            continue  # blob bytes, a blob struct or pylance's blob array: written as the column's blobs
        if f.type != want:
            raise MergeSourceError(
                f"{uri}: the merge_insert source's column `{f.name}` should have type {want} "
                f"but type was {f.type}"
            )


def read_source(
    data: Any, schema: pa.Schema | None, target: pa.Schema, on: Sequence[str], uri: str, limit: int
) -> MergeSource:
    """Read ``data`` (any input a write takes) once, checking it against ``target``; keep it in
    memory up to ``limit`` bytes, then in a temporary Arrow IPC file.

    Raises:
        InputTypeError: the data is of no kind a write takes.
        MergeSourceError: the data's columns do not fit the dataset (see :func:`check_source_schema`).
    """
    reader = coerce_reader(data, schema)
    check_source_schema(reader.schema, target, on, uri)
    held: list[pa.RecordBatch] = []
    size = 0
    spill_dir: str | None = None
    writer: ipc.RecordBatchFileWriter | None = None
    try:
        for batch in reader:
            if writer is not None:
                writer.write_batch(batch)
                continue
            held.append(batch)
            size += batch.nbytes
            if size > limit:
                spill_dir = tempfile.mkdtemp(prefix="lance_table_merge_")
                writer = ipc.new_file(os.path.join(spill_dir, "source.arrow"), reader.schema)
                for b in held:
                    writer.write_batch(b)
                held = []
        if writer is None:
            return MergeSource(pa.Table.from_batches(held, reader.schema), None)
        writer.close()
        writer = None
        assert spill_dir is not None
        mapped = pa.memory_map(os.path.join(spill_dir, "source.arrow"))
        return MergeSource(ipc.open_file(mapped).read_all(), spill_dir)
    except BaseException:
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
        if spill_dir is not None:
            shutil.rmtree(spill_dir, ignore_errors=True)
        raise
