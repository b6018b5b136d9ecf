"""What every file reader offers on top of "read these row runs": whole files, ranges, take, batch
streams; and the pieces readers share (the decoding error net, take indices, tables Arrow can take
from across chunks)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError, LanceTableError
from lance_table.file.arrow_take import take
from lance_table.file.runs import Runs
from lance_table.schema import FieldNode

DEFAULT_BATCH_SIZE = 64 * 1024

T = TypeVar("T")

# Untyped errors that damaged bytes can raise while decoding (see ``decoding``).
_DECODE_ERRORS = (IndexError, KeyError, OverflowError, ValueError)


@contextlib.contextmanager
def decoding(path: str) -> Iterator[None]:
    """Last-resort net around opening and decoding: an untyped error raised by the data is
    reported as a :class:`CorruptFileError` naming the file. The real checks are bounds checks
    where each structure is parsed; this only keeps a missed one from escaping untyped.
    (:func:`decoded` is the same net around one call, for the reads of many small files.)"""
    try:
        yield
    except LanceTableError:
        raise
    except _DECODE_ERRORS as exc:
        raise _untyped(path, exc) from exc


def decoded(path: str, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` inside the net of :func:`decoding`, without a context manager's calls."""
    try:
        return fn(*args)
    except LanceTableError:
        raise
    except _DECODE_ERRORS as exc:
        raise _untyped(path, exc) from exc


def _untyped(path: str, exc: Exception) -> CorruptFileError:
    return CorruptFileError(path, f"{type(exc).__name__} while decoding: {exc}")


def as_indices(indices: Sequence[int] | np.ndarray | pa.Array) -> np.ndarray:
    """Take indices as int64.

    Raises:
        ValueError: an Arrow array of indices holds nulls.
        TypeError: the indices are not integers.
    """
    if isinstance(indices, (pa.Array, pa.ChunkedArray)):
        if indices.null_count:
            raise ValueError("take indices must not contain nulls")
        indices = indices.to_numpy()
    arr = np.asarray(indices)
    if arr.size == 0:
        return np.zeros(0, np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"take indices must be integers, got {arr.dtype}")
    return arr.astype(np.int64).reshape(-1)


def selectable(table: pa.Table) -> pa.Table:
    """``table`` with null items removed from dictionaries, so Arrow can take/filter across chunks."""
    for i, field in enumerate(table.schema):
        col = table.column(i)
        dicts = pa.types.is_dictionary(field.type) and col.num_chunks > 1
        if dicts and any(c.dictionary.null_count for c in col.chunks):
            fixed = pa.chunked_array([drop_null_items(c) for c in col.chunks], type=field.type)
            table = table.set_column(i, field, fixed)
    return table


def drop_null_items(arr: pa.DictionaryArray) -> pa.DictionaryArray:
    """``arr`` without the null items of its dictionary (rows pointing at them become null)."""
    keep = np.asarray(arr.dictionary.is_valid())
    if keep.all():
        return arr
    new_pos = np.cumsum(keep) - 1
    idx = arr.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    valid = np.asarray(arr.indices.is_valid()) & keep[idx]
    indices = pa.array(new_pos[idx], arr.type.index_type, mask=~valid)
    return pa.DictionaryArray.from_arrays(indices, arr.dictionary.filter(pa.array(keep)))


class RowReader:
    """The row-level reads of a file reader, built on the two methods each format implements:
    ``_read(runs, columns)`` (the rows at sorted, disjoint position runs) and ``_project(columns)``
    (the selected fields and their schema). Subclasses provide ``num_rows`` and ``path``.

    Every read raises ``SchemaError`` for a column the file lacks and ``CorruptFileError`` for
    damaged pages.
    """

    @property
    def num_rows(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def path(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def _read(
        self, runs: Runs, columns: Sequence[str] | None, floors: Mapping[str, int] | None = None
    ) -> pa.Table:  # pragma: no cover - interface
        raise NotImplementedError

    def _project(
        self, columns: Sequence[str] | None
    ) -> tuple[list[FieldNode], pa.Schema]:  # pragma: no cover
        raise NotImplementedError

    def read_all(self, columns: Sequence[str] | None = None) -> pa.Table:
        """Every row of the selected columns (all columns by default)."""
        return self._read(Runs.span(0, self.num_rows), columns)

    def read_range(self, start: int, stop: int, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows ``start`` (inclusive) to ``stop`` (exclusive); clipped to the file like a slice."""
        start, stop, _ = slice(start, stop).indices(self.num_rows)
        return self._read(Runs.span(start, max(stop - start, 0)), columns)

    def take(
        self, indices: Sequence[int] | np.ndarray | pa.Array, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows at ``indices``, in the given order; indices may repeat and need not be sorted.

        Raises:
            IndexError: an index is negative or not smaller than :attr:`num_rows`.
        """
        idx = as_indices(indices)
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= self.num_rows):
            bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
            raise IndexError(f"row index {bad} is out of range for {self.num_rows} rows in {self.path}")
        unique, inverse = np.unique(idx, return_inverse=True)
        table = self._read(Runs.from_sorted_unique(unique), columns)
        if unique.size == idx.size and np.array_equal(unique, idx):
            return table
        return take(selectable(table), pa.array(inverse.reshape(-1)))

    def read_runs(
        self, runs: Runs, columns: Sequence[str] | None = None, *, floors: Mapping[str, int] | None = None
    ) -> pa.Table:
        """The rows covered by ``runs`` (sorted, disjoint position runs), in order.

        ``floors`` (column -> a positive integer) tells that the caller only asks whether the
        values of those integer columns reach their floor (a filter such as ``id >= 1000``): values
        below it may be read as 0, where the file can tell so without decoding them.

        Raises:
            IndexError: the runs reach past the end of the file.
        """
        if runs.count and (int(runs.starts[0]) < 0 or runs.end > self.num_rows):
            raise IndexError(f"rows up to {runs.end} requested from {self.path} with {self.num_rows} rows")
        return self._read(runs, columns, floors)

    def iter_batches(
        self,
        batch_size: int = DEFAULT_BATCH_SIZE,
        columns: Sequence[str] | None = None,
        *,
        start: int = 0,
        stop: int | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Stream rows ``[start, stop)`` as record batches of at most ``batch_size`` rows.

        Raises:
            ValueError: ``batch_size`` is not positive.
        """
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        start, stop, _ = slice(start, stop).indices(self.num_rows)
        for lo in range(start, stop, batch_size):
            table = self._read(Runs.span(lo, min(batch_size, stop - lo)), columns)
            yield from table.combine_chunks().to_batches(max_chunksize=batch_size)

    def to_reader(
        self, batch_size: int = DEFAULT_BATCH_SIZE, columns: Sequence[str] | None = None
    ) -> pa.RecordBatchReader:
        """A :class:`pyarrow.RecordBatchReader` over the whole file."""
        schema = self._project(columns)[1]
        return pa.RecordBatchReader.from_batches(schema, self.iter_batches(batch_size, columns))
