"""The ``pyarrow.dataset.Dataset`` protocol: what DuckDB, Polars and pyarrow call on a dataset

A part of :class:`~lance_table.table.dataset.LanceDataset`, which is a ``pyarrow.dataset.Dataset``
(as pylance's is), so that tools which take a pyarrow dataset take a lance_table one:

* DuckDB's replacement scans and ``duckdb.from_arrow(ds)`` call ``ds.scanner(columns=[...],
  filter=<pyarrow Expression>)``; ``polars.scan_pyarrow_dataset(ds)`` calls
  ``ds.to_batches(columns=..., filter=..., batch_size=...)``. Both are the reads of
  :class:`~lance_table.table.dataset_read._Reading`: the Expression is the scan's filter as it is
  (the scan evaluates pyarrow Expressions with Arrow's kernels, so every Expression pyarrow can
  evaluate is answered exactly as pyarrow answers it). Pushdown: only the columns the filter reads
  are read to decide which rows match, then only the projected columns of the matching rows.
* ``__arrow_c_stream__`` (the Arrow PyCapsule stream interface) streams the rows batch by batch:
  ``pa.table(ds)``, ``pl.DataFrame(ds)``, ``duckdb.from_arrow(ds)``,
  ``pyarrow.dataset.write_dataset(ds, ...)`` take a dataset or a scanner directly.
* ``filter`` returns a :class:`FilteredDataset`, a view whose reads add its condition;
  ``join``, ``join_asof`` and ``sort_by`` read the rows (projected and filtered by a view) into
  memory and run pyarrow's own plans (Acero) on them, returning a
  ``pyarrow.dataset.InMemoryDataset``, as pyarrow's do.

The pyarrow base class is a Cython class holding a C++ dataset that a lance_table dataset does not
have (nor has pylance's): every Python method of it is overridden here or in the dataset, so none
reaches the empty C++ pointer. pyarrow's C++ entry points that take a dataset object directly
(``pyarrow.dataset.Scanner.from_dataset(ds)``, ``ScanNodeOptions(ds)``, and so a lance_table
dataset as the *right* side of a pyarrow dataset's ``join``) dereference that pointer before any
Python code runs, and crash the process, as with pylance's dataset: call ``ds.scanner(...)``, or
pass ``ds.to_table()`` / ``ds.join(...)`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds

from lance_table.errors import UnsupportedOperationError
from lance_table.table.scan import Predicate

if TYPE_CHECKING:
    from lance_table.table.scanner import LanceScanner

#: pyarrow's ``Dataset.join`` defaults.
DEFAULT_JOIN_TYPE = "left outer"


class _ArrowProtocol(pds.Dataset):
    """What every lance_table ``pyarrow.dataset.Dataset`` shares: the stream interface, ``filter``,
    ``join``, ``join_asof``, ``sort_by``, and the pyarrow members that do not apply. Subclasses
    provide ``schema`` and ``scanner``."""

    # Provided by the subclasses (declared for type checkers).
    schema: Any
    scanner: Callable[..., LanceScanner]

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """Every row, streamed batch by batch (the Arrow PyCapsule stream interface)."""
        return self.scanner().__arrow_c_stream__(requested_schema)

    def filter(self, expression: Predicate) -> FilteredDataset:
        """A view of the rows matching ``expression`` (a pyarrow compute Expression, or SQL text),
        as pyarrow's ``Dataset.filter``: its reads add the condition to theirs.

        Raises:
            ScanOptionError: ``expression`` is neither an Expression nor SQL text.
        """
        return FilteredDataset(self, expression)

    def join(
        self,
        right_dataset: Any,
        keys: str | Sequence[str],
        right_keys: str | Sequence[str] | None = None,
        join_type: str = DEFAULT_JOIN_TYPE,
        left_suffix: str | None = None,
        right_suffix: str | None = None,
        coalesce_keys: bool = True,
        use_threads: bool = True,
    ) -> pds.InMemoryDataset:
        """Join with another dataset (lance_table, pylance, pyarrow) or table, as pyarrow's
        ``Dataset.join`` (Acero's hash join of the rows read into memory); returns an
        InMemoryDataset.

        Raises:
            pyarrow.ArrowInvalid: a key is not a column, or the key types differ.
        """
        return _in_memory(self).join(
            _arrow_side(right_dataset),
            keys,
            right_keys=right_keys,
            join_type=join_type,
            left_suffix=left_suffix,
            right_suffix=right_suffix,
            coalesce_keys=coalesce_keys,
            use_threads=use_threads,
        )

    def join_asof(
        self,
        right_dataset: Any,
        on: str,
        by: str | Sequence[str],
        tolerance: int,
        right_on: str | None = None,
        right_by: str | Sequence[str] | None = None,
    ) -> pds.InMemoryDataset:
        """An as-of join (the nearest earlier ``on`` value within ``tolerance``), as pyarrow's
        ``Dataset.join_asof``; returns an InMemoryDataset.

        Raises:
            pyarrow.ArrowInvalid: a key is not a column, or the ``on`` column is not sorted.
        """
        return _in_memory(self).join_asof(
            _arrow_side(right_dataset), on, by, tolerance, right_on=right_on, right_by=right_by
        )

    def sort_by(self, sorting: str | list[tuple[str, str]], **kwargs: Any) -> pds.InMemoryDataset:
        """The rows sorted, as pyarrow's ``Dataset.sort_by`` (``"col"`` or ``[("col", "descending")]``;
        ``kwargs`` as ``pyarrow.compute.SortOptions``); returns an InMemoryDataset.

        Raises:
            pyarrow.ArrowInvalid: a sort key is not a column.
        """
        return _in_memory(self).sort_by(sorting, **kwargs)

    def replace_schema(self, schema: pa.Schema) -> None:
        """Not supported (as in pylance): use ``replace_schema_metadata`` or ``alter_columns``.

        Raises:
            UnsupportedOperationError: always (also a NotImplementedError, as pylance's).
        """
        raise UnsupportedOperationError(
            "replace_schema: a Lance dataset's schema changes through alter_columns, "
            "replace_schema_metadata or replace_field_metadata"
        )

    @property
    def partition_expression(self) -> pc.Expression:
        """Not supported (as in pylance: a Lance dataset has no partitioning).

        Raises:
            UnsupportedOperationError: always (also a NotImplementedError, as pylance's).
        """
        raise UnsupportedOperationError("partition_expression: Lance datasets are not partitioned")

    # pyarrow's private helpers read the C++ dataset; refuse them rather than touch a null pointer.
    def _get_fragments(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError("use get_fragments()")

    def _scanner_options(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError("use scanner()")

    def _scan_options(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError("use scanner()")


class _ArrowDataset(_ArrowProtocol):
    """The dataset's part: pickling through the handle's own state (pyarrow's Cython base pickles
    its C++ dataset, which a lance_table dataset does not have)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.__getstate__()))


def _restore(cls: Any, state: Any) -> Any:
    obj = cls.__new__(cls)
    obj.__setstate__(state)
    return obj


class FilteredDataset(_ArrowProtocol):
    """The rows of a lance_table dataset that match a condition: what ``ds.filter(expr)`` returns, a
    ``pyarrow.dataset.Dataset`` whose reads (``scanner``, ``to_table``, ``to_batches``,
    ``count_rows``, ``head``, ``take``) add the condition to theirs."""

    def __init__(self, dataset: Any, condition: Predicate) -> None:
        """A view of ``dataset`` (a lance_table dataset or view) where ``condition`` holds.

        Raises:
            ScanOptionError: ``condition`` is neither an Expression nor SQL text.
        """
        from lance_table.table.scan_spec import scan_spec

        scan_spec({"filter": condition}, "filter")  # the one check of what a filter is
        self._dataset = dataset
        self._condition = condition

    def __reduce__(self) -> tuple[Any, ...]:
        return (FilteredDataset, (self._dataset, self._condition))

    def __repr__(self) -> str:
        return f"FilteredDataset({self._dataset!r}, filter={self._condition})"

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the dataset."""
        return self._dataset.schema

    @property
    def condition(self) -> Predicate:
        """The condition of this view."""
        return self._condition

    def _and(self, filter: Predicate | None) -> Predicate:
        return self._condition if filter is None else both(self._condition, filter, self.schema)

    def scanner(self, columns: Any = None, filter: Predicate | None = None, **options: Any) -> LanceScanner:
        """The dataset's ``scanner`` with this view's condition added to ``filter``.

        Raises:
            SchemaError, FilterError, ScanOptionError: as the dataset's ``scanner``.
        """
        return self._dataset.scanner(columns=columns, filter=self._and(filter), **options)

    def to_table(self, columns: Any = None, filter: Predicate | None = None, **options: Any) -> pa.Table:
        """The matching rows as one table; options as the dataset's ``to_table``.

        Raises:
            SchemaError, FilterError, ScanOptionError: as the dataset's ``to_table``.
        """
        return self.scanner(columns, filter, **options).to_table()

    def to_batches(
        self, columns: Any = None, filter: Predicate | None = None, **options: Any
    ) -> pa.RecordBatchReader:
        """The matching rows as a RecordBatchReader; options as the dataset's ``to_batches``.

        Raises:
            SchemaError, FilterError, ScanOptionError: as the dataset's ``to_batches``.
        """
        return self.scanner(columns, filter, **options).to_reader()

    def count_rows(self, filter: Predicate | None = None, **options: Any) -> int:
        """The rows matching this view's condition (and ``filter``).

        Raises:
            SchemaError, FilterError, ScanOptionError: as the dataset's ``count_rows``.
        """
        return self._dataset.count_rows(filter=self._and(filter), **options)

    def head(
        self, num_rows: int, columns: Any = None, filter: Predicate | None = None, **options: Any
    ) -> pa.Table:
        """The first ``num_rows`` matching rows.

        Raises:
            SchemaError, FilterError, ScanOptionError: as the dataset's ``head``.
        """
        return self.scanner(columns, filter, limit=num_rows, **options).to_table()

    def take(
        self, indices: Any, columns: Any = None, filter: Predicate | None = None, **options: Any
    ) -> pa.Table:
        """Rows by position among the matching rows, in the order given (pyarrow's ``take`` on a
        filtered dataset): the matching rows' ids are found with a scan that reads only the
        condition's columns, then only those rows are read.

        Raises:
            IndexError: an index is outside ``[0, count_rows())``.
            SchemaError: a column does not exist.
        """
        ids = self.scanner([], filter, with_row_id=True, **options).to_table().column("_rowid")
        positions = pa.array(indices, pa.int64()) if not isinstance(indices, pa.Array) else indices
        if len(positions) and (pc.min(positions).as_py() < 0 or pc.max(positions).as_py() >= len(ids)):
            raise IndexError(f"take: an index is outside [0, {len(ids)}) (the matching rows)")
        base = self._dataset
        while isinstance(base, FilteredDataset):
            base = base._dataset
        return base._take_rows(ids.take(positions), columns)

    def get_fragments(self, filter: Any = None) -> list[Any]:
        """The dataset's fragments (those that may hold matching rows).

        Raises:
            ValueError: ``filter`` is given (as the dataset's ``get_fragments``).
        """
        return self._dataset.get_fragments(filter)


def both(a: Predicate, b: Predicate, schema: pa.Schema) -> Predicate:
    """``a AND b``: SQL text stays SQL text (so the scan still checks page statistics for it); with an
    Expression on either side, both are Expressions over ``schema``.

    Raises:
        FilterError: SQL text that does not compile.
    """
    if isinstance(a, str) and isinstance(b, str):
        return f"({a}) AND ({b})"
    from lance_table.filters import parse_filter
    from lance_table.table.scan import filter_schema

    fschema = filter_schema(schema)
    return parse_filter(a, fschema) & parse_filter(b, fschema)


def _in_memory(dataset: _ArrowProtocol) -> pds.InMemoryDataset:
    """The rows as a pyarrow dataset (in memory, as pyarrow's join and sort results are), so that
    pyarrow's own Acero plans (join, as-of join, sort) run on them as on any pyarrow dataset."""
    return pds.InMemoryDataset(dataset.scanner().to_table())


def _arrow_side(other: Any) -> Any:
    """The other side of a join as pyarrow's join takes it: a pyarrow dataset or table as is; a
    lance_table or pylance dataset (or anything with ``__arrow_c_stream__``) read in full."""
    if isinstance(other, (pa.Table, pds.InMemoryDataset, pds.FileSystemDataset, pds.UnionDataset)):
        return other
    if hasattr(other, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(other).read_all()
    if isinstance(other, pds.Dataset):  # pylance's dataset: no stream interface, but to_table()
        return other.to_table()
    return other


__all__ = ["FilteredDataset", "both"]
