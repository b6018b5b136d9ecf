"""Batch UDFs for ``add_columns`` (pylance's ``lance.udf``): :func:`batch_udf` wraps a function of a
``RecordBatch`` that returns the new columns, optionally with a SQLite checkpoint file that keeps
the results of completed batches so that a failed ``add_columns`` resumes where it stopped.

The checkpoint file has pylance's layout (tables ``batches`` and ``fragments``), so either library
can resume the other's run.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa


def _as_batch(result: Any) -> pa.RecordBatch:
    """A UDF's result as a RecordBatch (a pandas DataFrame or a Table is converted)."""
    if isinstance(result, pa.RecordBatch):
        return result
    if isinstance(result, pa.Table):
        batches = result.combine_chunks().to_batches()
        return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=result.schema)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        pd = None
    if pd is not None and isinstance(result, pd.DataFrame):
        return pa.RecordBatch.from_pandas(result)  # (as pylance converts it)
    raise TypeError(
        f"a batch UDF must return a RecordBatch or a pandas DataFrame, not {type(result).__name__}"
    )


class BatchUDFCheckpoint:
    """The SQLite file holding the results of a UDF's completed batches (pylance's layout).

    Each call opens its own connection (the file is shared by threads and processes)."""

    class BatchInfo(NamedTuple):
        fragment_id: int
        batch_index: int

    def __init__(self, path: str | Path) -> None:
        self.path = path
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS batches (fragment_id INT, batch_index INT, result BLOB)")
            conn.execute("CREATE TABLE IF NOT EXISTS fragments (fragment_id INT, data BLOB)")
            conn.commit()

    def cleanup(self) -> None:
        """Remove the checkpoint file (after the column was committed)."""
        os.remove(self.path)

    def get_batch(self, info: BatchInfo) -> pa.RecordBatch | None:
        """The saved result of a batch, or None."""
        with closing(sqlite3.connect(self.path)) as conn:
            row = conn.execute(
                "SELECT result FROM batches WHERE fragment_id = ? AND batch_index = ?",
                (info.fragment_id, info.batch_index),
            ).fetchone()
        return None if row is None else pickle.loads(row[0])

    def insert_batch(self, info: BatchInfo, batch: pa.RecordBatch) -> None:
        """Save the result of a batch."""
        with closing(sqlite3.connect(self.path)) as conn:
            conn.execute(
                "INSERT INTO batches (fragment_id, batch_index, result) VALUES (?, ?, ?)",
                (info.fragment_id, info.batch_index, pickle.dumps(batch)),
            )
            conn.commit()

    def get_fragment(self, fragment_id: int) -> str | None:
        """A fully written fragment saved as JSON, or None."""
        with closing(sqlite3.connect(self.path)) as conn:
            row = conn.execute("SELECT data FROM fragments WHERE fragment_id = ?", (fragment_id,)).fetchone()
        return None if row is None else row[0]

    def insert_fragment(self, fragment_id: int, fragment: str) -> None:
        """Save a fully written fragment as JSON (its batches are no longer needed)."""
        with closing(sqlite3.connect(self.path)) as conn:
            conn.execute("INSERT INTO fragments (fragment_id, data) VALUES (?, ?)", (fragment_id, fragment))
            conn.execute("DELETE FROM batches WHERE fragment_id = ?", (fragment_id,))
            conn.commit()


class BatchUDF:
    """A function of a ``RecordBatch`` returning new columns, for ``add_columns`` (made by
    :func:`batch_udf`). Calling it calls the function as written.

    Example:
        ```python
        @lt.batch_udf(output_schema=pa.schema([pa.field("half", pa.float64())]))
        def half(batch):
            return pa.record_batch([pc.divide(batch["score"], 2.0)], ["half"])

        assert isinstance(half, lt.BatchUDF)
        ds.add_columns(half, read_columns=["score"])
        ```
    """

    def __init__(
        self,
        func: Callable[[pa.RecordBatch], Any],
        output_schema: pa.Schema | None = None,
        checkpoint_file: str | Path | None = None,
    ) -> None:
        self.func = func
        self.output_schema = output_schema
        self.cache: BatchUDFCheckpoint | None = (
            BatchUDFCheckpoint(checkpoint_file) if checkpoint_file is not None else None
        )

    def __call__(self, batch: pa.RecordBatch) -> Any:
        return self.func(batch)

    def _call(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The function's result as a RecordBatch of :attr:`output_schema`.

        Raises:
            ValueError: there is no output schema.
            AssertionError: the result has another schema (as pylance asserts).
        """
        if self.output_schema is None:
            raise ValueError(
                "output_schema must be provided when using a function that returns a RecordBatch"
            )
        result = _as_batch(self.func(batch))
        assert result.schema == self.output_schema, (
            f"Output schema of function does not match the expected schema. "
            f"Expected:\n{self.output_schema}\nGot:\n{result.schema}"
        )
        return result


def batch_udf(
    output_schema: pa.Schema | None = None,
    checkpoint_file: str | Path | None = None,
) -> Callable[[Callable[[pa.RecordBatch], Any]], BatchUDF]:
    """Decorator making a function of a ``RecordBatch`` a :class:`BatchUDF` for ``add_columns``.

    Args:
        output_schema: the schema of what the function returns (else that of its first result).
        checkpoint_file: a SQLite file keeping the results of completed batches: an interrupted
            ``add_columns`` called again with the same file does not recompute them. Removed once
            the columns are committed.

    Example:
        ```python
        @lt.batch_udf(output_schema=pa.schema([pa.field("label", pa.string())]))
        def label(batch):
            return pa.record_batch([pc.utf8_upper(batch["kind"])], ["label"])

        ds.add_columns(label, read_columns=["kind"])  # one new data file per fragment
        ```
    """

    def inner(func: Callable[[pa.RecordBatch], Any]) -> BatchUDF:
        return BatchUDF(func, output_schema, checkpoint_file)

    return inner


add_columns_udf = batch_udf


def _first_batch(data_source: Any, read_columns: list[str] | None) -> pa.RecordBatch:
    """The first batch of ``data_source`` (``_rowid`` / ``_rowaddr`` in ``read_columns`` asked
    for as pylance asks for them)."""
    columns = (
        [c for c in read_columns if c not in ("_rowid", "_rowaddr")] if read_columns is not None else None
    )
    wanted = read_columns or ()
    batches = data_source.to_batches(
        limit=1, columns=columns, with_row_id="_rowid" in wanted, with_row_address="_rowaddr" in wanted
    )
    return next(iter(batches))


def _as_reader(data: Any, schema: pa.Schema | None) -> pa.RecordBatchReader:
    """``data`` as a reader: a reader, a Table or RecordBatch, an Arrow stream, a pandas
    DataFrame, or batches with ``schema``.

    Raises:
        TypeError: it is none of those.
    """
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return data.to_reader() if schema is None else data.cast(schema).to_reader()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data, schema=schema)
    if type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, schema=schema).to_reader()
    if schema is not None and hasattr(data, "__iter__"):
        return pa.RecordBatchReader.from_batches(schema, iter(data))
    raise TypeError(f"Unknown data type {type(data)}")


def normalize_transform(
    udf_like: Any,
    data_source: Any,
    read_columns: list[str] | None = None,
    reader_schema: pa.Schema | None = None,
) -> Any:
    """What ``add_columns`` makes of its ``transforms`` (pylance's ``lance.udf.normalize_transform``):
    a :class:`BatchUDF` (its output schema taken from its result on the first batch of
    ``data_source`` when it has none), a dict of SQL expressions (checked), a plain function
    (wrapped in a :class:`BatchUDF` with the schema of its first result), or data (as a
    ``RecordBatchReader``, cast to ``reader_schema`` when given).

    Raises:
        TypeError: a dict whose keys or values are not strings; a function that fails on the
            first batch; anything else that is not data (as pylance raises).

    Example:
        ```python
        from lance_table.udf import normalize_transform

        print(normalize_transform({"double": "score * 2"}, ds))
        ```
    """
    if isinstance(udf_like, BatchUDF):
        if udf_like.output_schema is None:
            udf_like.output_schema = _as_batch(udf_like(_first_batch(data_source, read_columns))).schema
        return udf_like
    if isinstance(udf_like, dict):
        for k, v in udf_like.items():
            if not isinstance(k, str):
                raise TypeError(f"Column names must be a string. Got {type(k)}")
            if not isinstance(v, str):
                raise TypeError(f"Column expressions must be a string. Got {type(v)}")
        return udf_like
    if callable(udf_like):
        try:
            schema = _as_batch(udf_like(_first_batch(data_source, read_columns))).schema
        except Exception as exc:
            raise TypeError(
                "transforms must be a BatchUDF, dict, map function, or ReaderLike value.  Received "
                f"{type(udf_like)}, which is callable, but gave an error when called with a batch of "
                f"data: {exc}"
            ) from None
        return BatchUDF(udf_like, output_schema=schema)
    try:
        return _as_reader(udf_like, reader_schema)
    except TypeError as exc:
        raise TypeError(
            "transforms must be a BatchUDF, dict, map function, or ReaderLike  value.  Received "
            f"{type(udf_like)}.  Could not coerce to a reader: {exc}"
        ) from None
