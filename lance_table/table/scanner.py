"""pylance's ``LanceScanner``: a scan of one dataset version, built from a :class:`ScanSpec`, and the
reads by position and by row id (``take``, ``_take_rows``, ``sample``) that share its projection.

A scanner never changes: each of its methods runs the scan again. :meth:`LanceScanner.explain_plan`
says in words what the scan reads.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset

from lance_table._numpy import sorted_unique
from lance_table.errors import ScanOptionError, SchemaError, UnsupportedOperationError
from lance_table.file import arrow_take
from lance_table.table import pandas_export
from lance_table.table.fragment import FragmentReader
from lance_table.table.projection import Projection, resolve
from lance_table.table.row_ids import (
    ROW_ADDR,
    ROW_ID,
    ROW_OFFSET,
    SYSTEM_COLUMNS,
    locate_addresses,
    locate_ids,
    offset_bases,
)
from lance_table.table.scan import (
    ScanPlan,
    count_matching,
    make_spec,
    output_schema,
    scan,
    scan_all,
)
from lance_table.table.scan_metrics import collecting, lance_read_line, reported, reported_stream
from lance_table.table.scan_spec import Columns, ScanSpec, scan_spec
from lance_table.table.scan_take import read_positions, take_rows
from lance_table.table.snapshot import Snapshot

# Whether sort keys place their nulls each their own way (pyarrow 25 and later).
PER_KEY_NULLS = int(pa.__version__.split(".")[0]) >= 25
# A whole-table read needs no batches: its ranges may be as large as the scan makes them.
WHOLE_TABLE_BATCH = 1 << 30


class LanceScanner(pyarrow.dataset.Scanner):
    """A scan of one dataset version (pylance's ``LanceScanner``; a ``pyarrow.dataset.Scanner``).

    Build it with ``ds.scanner(...)`` or ``fragment.scanner(...)``.

    Example:
        ```python
        scanner = ds.scanner(columns=["id", "kind"], filter="score > 0.5", batch_size=1024)
        for batch in scanner.to_batches():
            ...
        print(scanner.count_rows(), scanner.explain_plan())
        ```
    """

    def __init__(self, snapshot: Snapshot, spec: ScanSpec) -> None:
        self._snapshot = snapshot
        self._spec = spec

    def __repr__(self) -> str:
        return f"LanceScanner({self._snapshot.uri!r}, version={self._snapshot.version}, {self._spec})"

    @property
    def spec(self) -> ScanSpec:
        """The scan specification."""
        return self._spec

    @cached_property
    def _projection(self) -> Projection:
        return resolve(self._snapshot.read_schema, self._spec)

    @cached_property
    def _plan(self) -> tuple[ScanPlan, pa.Schema]:
        schema = self._snapshot.read_schema
        proj = self._projection
        spec = self._spec
        bases = offset_bases(self._snapshot.manifest) if ROW_OFFSET in proj.system else None
        plan = make_spec(
            schema,
            list(proj.read),
            spec.filter,
            False,
            spec.batch_size,
            spec.offset,
            spec.limit,
            spec.use_stats,
            system=proj.system,
            offset_bases=bases,
        )
        return plan, output_schema(schema, plan)

    def _readers(self) -> list[FragmentReader]:
        return self._snapshot.fragment_readers(self._spec.fragments)

    def _scan_readers(self) -> Sequence[FragmentReader]:
        """The readers a scan reads: made as the scan reaches them when a limit may stop it after
        a few fragments of many (a ``head``), else all of them."""
        if self._spec.limit is not None:
            return self._snapshot.readers_on_demand(self._spec.fragments, lazy=True)
        return self._readers()

    @property
    def projected_schema(self) -> pa.Schema:
        """The schema of the rows the scan returns.

        Raises:
            SchemaError: a column does not exist.
            FilterError: a column expression does not compile.
        """
        return self._projection.schema

    @property
    def dataset_schema(self) -> pa.Schema:
        """The schema of the dataset version scanned."""
        return self._snapshot.read_schema

    def to_table(self) -> pa.Table:
        """Every row of the scan as one table.

        Raises:
            SchemaError: a column does not exist.
            FilterError: the filter or a column expression does not compile.
            ValueError: a fragment is not in this version.
        """
        if self._spec.scan_stats_callback is not None:
            return reported(self._table, self._spec.scan_stats_callback)
        return self._table()

    def _table(self) -> pa.Table:
        if self._spec.order_by:
            return self._ordered()
        plan, out = self._plan
        table = scan_all(self._scan_readers(), replace(plan, batch_size=WHOLE_TABLE_BATCH), out)
        return table if self._projection.passes(out) else self._projection.apply(table)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows in batches of at most ``batch_size`` rows (a ``RecordBatchReader``)."""
        return self.to_reader()

    def to_reader(self) -> pa.RecordBatchReader:
        """The rows as a ``RecordBatchReader`` (streams; DuckDB, Polars and pandas consume it).

        Raises:
            as :meth:`to_table`.
        """
        proj = self._projection
        self._plan  # noqa: B018 - a bad filter or column fails here, not at the first batch
        callback = self._spec.scan_stats_callback
        if callback is None:
            return pa.RecordBatchReader.from_batches(proj.schema, self._batches())
        return pa.RecordBatchReader.from_batches(proj.schema, reported_stream(self._batches, callback))

    def _batches(self) -> Iterator[pa.RecordBatch]:
        plan, out = self._plan
        proj = self._projection
        batches: Iterator[pa.RecordBatch] = scan(self._scan_readers(), plan, out)
        if self._spec.order_by:
            batches = iter(self._ordered().to_batches(max_chunksize=plan.batch_size))
        elif not proj.passes(out):
            batches = (b for t in _tables(batches, proj) for b in t.to_batches())
        if self._spec.strict_batch_size:
            batches = _strict(batches, plan.batch_size)
        return batches

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The rows, streamed batch by batch (the Arrow PyCapsule stream interface: ``pa.table``,
        ``pl.DataFrame``, ``duckdb.from_arrow`` take a scanner directly)."""
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def _ordered(self) -> pa.Table:
        """The matching rows sorted by ``order_by``, then ``offset`` and ``limit``, projected.

        Raises:
            SchemaError: a sort key is not a column.
            UnsupportedOperationError: sort keys disagree on where nulls go, or a key's type
                does not sort.
        """
        spec = self._spec
        proj = self._projection
        schema = self._snapshot.read_schema
        assert spec.order_by
        keys = [name for name, _, _ in spec.order_by]
        for name in keys:
            if name not in schema.names and name not in SYSTEM_COLUMNS:
                raise SchemaError(
                    f"order_by: column {name!r} is not in the dataset; columns are {schema.names}"
                )
        if not PER_KEY_NULLS and len({first for _, _, first in spec.order_by}) > 1:
            raise UnsupportedOperationError(
                "order_by: keys that put nulls first and last at once need pyarrow 25 or later"
            )
        read = [n for n in schema.names if n in proj.read or n in keys]
        system = tuple(n for n in SYSTEM_COLUMNS if n in proj.system or n in keys)
        bases = offset_bases(self._snapshot.manifest) if ROW_OFFSET in system else None
        plan = make_spec(
            schema,
            read,
            spec.filter,
            False,
            WHOLE_TABLE_BATCH,
            None,
            None,
            spec.use_stats,
            system=system,
            offset_bases=bases,
        )
        table = scan_all(self._readers(), plan, output_schema(schema, plan))
        order = [(n, "ascending" if asc else "descending", _nulls(first)) for n, asc, first in spec.order_by]
        try:
            if PER_KEY_NULLS:
                indices = pc.sort_indices(table, sort_keys=order)
            else:
                indices = pc.sort_indices(table, sort_keys=[k[:2] for k in order], null_placement=order[0][2])
            table = arrow_take.take(table, indices)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise UnsupportedOperationError(f"order_by {keys}: {exc}") from None
        return proj.apply(table.slice(spec.offset or 0, spec.limit))

    def scan_batches(self) -> list[pa.RecordBatch]:
        """The batches of :meth:`to_batches`, as a list."""
        return list(self.to_reader())

    def to_pandas(self, *, blob_mode: str = "lazy", **kwargs: Any) -> Any:
        """:meth:`to_table` as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``).

        Raises:
            ValueError: an unknown ``blob_mode``.
            UnsupportedOptionError: blob columns with ``blob_mode`` other than "descriptions".
        """
        return pandas_export.to_pandas(self.projected_schema, self.to_table, blob_mode, **kwargs)

    def head(self, num_rows: int) -> pa.Table:
        """The first ``num_rows`` rows of the scan."""
        limit = num_rows if self._spec.limit is None else min(num_rows, self._spec.limit)
        return LanceScanner(self._snapshot, replace(self._spec, limit=limit)).to_table()

    def count_rows(self) -> int:
        """The rows the scan matches.

        Raises:
            ScanOptionError: the scan has a limit or an offset (as in pylance).
            FilterError: the filter does not compile.
        """
        spec = self._spec
        if spec.limit is not None or spec.offset is not None:
            raise ScanOptionError("count_rows() cannot be used with a limit or offset; apply it to the count")
        if spec.filter is None and spec.fragments is None:
            return self._snapshot.num_rows
        readers = self._readers()
        if spec.filter is None:
            return sum(r.fragment.num_rows for r in readers)
        plan = make_spec(self._snapshot.read_schema, [], spec.filter, False, None, None, None, spec.use_stats)
        return count_matching(readers, plan)

    def take(self, indices: Any) -> pa.Table:
        """Not implemented (as in pylance): use ``Dataset.take``.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(
            "LanceScanner.take is not implemented (as in pylance); use Dataset.take"
        )

    def explain_plan(self, verbose: bool = False) -> str:
        """What the scan reads and returns, in words (``verbose`` adds the fragment ids and the
        conditions used to skip pages).

        Raises:
            as :meth:`to_table`.
        """
        plan, _ = self._plan
        proj = self._projection
        spec = self._spec
        frags = self._readers()
        total = len(self._snapshot.manifest.fragments)
        lines = [f"Projection: {', '.join(proj.schema.names) or '(no columns)'}"]
        if proj.exprs is not None:
            for name, expr in zip(proj.schema.names, proj.exprs):
                lines.append(f"  {name} := {expr}")
        read = ", ".join([*plan.columns, *plan.system]) or "(row count only)"
        lines.append(f"  Scan: {self._snapshot.uri} version {self._snapshot.version}")
        lines.append(f"    fragments: {len(frags)} of {total}, columns read: {read}")
        if spec.filter is not None:
            reads = ", ".join([*plan.filter_columns, *plan.filter_system]) or "no columns"
            lines.append(f"    filter: {spec.filter} (reads {reads}; matching rows are read after it)")
        if spec.offset or spec.limit is not None:
            end = "end" if spec.limit is None else (spec.offset or 0) + spec.limit
            lines.append(f"    rows: {spec.offset or 0}..{end} of the matching rows")
        if spec.order_by:
            keys = ", ".join(f"{n} {'ASC' if asc else 'DESC'}" for n, asc, _ in spec.order_by)
            lines.append(f"    order by: {keys}")
        lines.append(f"    batch_size: {plan.batch_size}{' (strict)' if spec.strict_batch_size else ''}")
        if verbose:
            lines.append(f"    fragment ids: {[f.fragment.id for f in frags]}")
            conds = ", ".join(f"{c.column} {c.op} {c.value!r}" for c in plan.conditions) or "none"
            lines.append(f"    page statistics checked for: {conds} (use_stats={spec.use_stats})")
        return "\n".join([*lines, f"  {self._lance_read(_needed(frags, spec))}"])

    def _lance_read(self, num_fragments: int, *args: Any) -> str:
        """The scan as pylance's ``LanceRead`` line (``args``: metrics, rows, seconds)."""
        plan, _ = self._plan
        names = self._snapshot.read_schema.names
        wanted = {*plan.columns, *plan.filter_columns}
        system = (*plan.system, *plan.filter_system)
        predicate = None if self._spec.filter is None else str(self._spec.filter)
        read = [n for n in names if n in wanted]
        return lance_read_line(self._snapshot.uri, read, num_fragments, system, predicate, *args)

    def analyze_plan(self, count_rows: bool = False) -> str:
        """:meth:`explain_plan`, run: the rows the scan returned (or counted), its time, and in
        pylance's ``LanceRead`` line its counts (``output_rows``, ``fragments_scanned``,
        ``ranges_scanned``, ``rows_scanned`` before the filter, and the storage layer's
        ``bytes_read``, ``iops`` and ``requests``: see ``lance_table.storage.io_stats``).

        Raises:
            as :meth:`to_table` (or :meth:`count_rows`).
        """
        frags = _needed(self._readers(), self._spec)
        with collecting() as metrics:
            start = time.perf_counter()
            rows = self.count_rows() if count_rows else self.to_table().num_rows
            took = time.perf_counter() - start
        described = self.explain_plan(True).rsplit("\n", 1)[0]  # its LanceRead line, with the counts
        return "\n".join(
            [
                described,
                f"  {self._lance_read(frags, metrics, rows, took)}",
                f"  Output: {rows} rows in {took * 1000:.1f} ms",
            ]
        )

    @staticmethod
    def from_dataset(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError("LanceScanner.from_dataset: use Dataset.scanner")

    @staticmethod
    def from_fragment(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError("LanceScanner.from_fragment: use LanceFragment.scanner")

    @staticmethod
    def from_batches(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError("LanceScanner.from_batches is not implemented")


def _needed(frags: Sequence[FragmentReader], spec: ScanSpec) -> int:
    """How many of ``frags`` the scan reads: without a filter or an order, a limit stops it at the
    fragment that holds its last row."""
    if spec.limit is None or spec.filter is not None or spec.order_by:
        return len(frags)
    rows = np.cumsum([f.fragment.num_rows for f in frags])
    return min(len(frags), int(np.searchsorted(rows, (spec.offset or 0) + spec.limit)) + 1)


def _nulls(first: bool) -> str:
    return "at_start" if first else "at_end"


def _tables(batches: Iterator[pa.RecordBatch], proj: Projection) -> Iterator[pa.Table]:
    for batch in batches:
        yield proj.apply(pa.Table.from_batches([batch]))


def _strict(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` in batches of exactly ``size`` rows (the last may be smaller)."""
    held: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        held.append(batch)
        rows += batch.num_rows
        if rows >= size:
            table = pa.Table.from_batches(held).combine_chunks()
            cut = rows - rows % size
            yield from table.slice(0, cut).to_batches(max_chunksize=size)
            held = table.slice(cut).to_batches()
            rows -= cut
    if rows:
        yield from pa.Table.from_batches(held).combine_chunks().to_batches(max_chunksize=size)


def _as_int_array(values: Any, dtype: type) -> np.ndarray:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_numpy()
    return np.asarray(values, dtype=dtype).reshape(-1)


def _positions_plan(snapshot: Snapshot, proj: Projection) -> tuple[ScanPlan, pa.Schema]:
    schema = snapshot.read_schema
    bases = offset_bases(snapshot.manifest) if ROW_OFFSET in proj.system else None
    plan = make_spec(
        schema, list(proj.read), None, False, None, None, None, system=proj.system, offset_bases=bases
    )
    return plan, output_schema(schema, plan)


def take(
    snapshot: Snapshot, indices: Any, spec: ScanSpec, fragments: Sequence[int] | None = None
) -> pa.Table:
    """Rows by position among the live rows (of ``fragments`` alone, when given), in the order of
    ``indices``, with ``spec``'s projection.

    Raises:
        IndexError: an index is negative or not below the number of rows.
        SchemaError, FilterError: as :func:`resolve`.
    """
    idx = _as_int_array(indices, np.int64)
    proj = resolve(snapshot.read_schema, spec, nested="pruned")
    plan, out = _positions_plan(snapshot, proj)
    return proj.apply(take_rows(snapshot.readers_on_demand(fragments, lazy=True), plan, out, idx))


def take_columns(snapshot: Snapshot, indices: Any, columns: Columns, method: str = "take") -> pa.Table:
    """:func:`take` with pylance's handling of a column list naming a column twice: a data column
    once, a system column (``_rowid``, ``_rowaddr``) as often as named.

    Raises:
        as :func:`take`.
    """
    if not isinstance(columns, (list, tuple)) or len(set(columns)) == len(columns):
        return take(snapshot, indices, scan_spec({"columns": columns}, method))
    unique = list(dict.fromkeys(columns))
    table = take(snapshot, indices, scan_spec({"columns": unique}, method))
    names = [c for i, c in enumerate(columns) if c in (ROW_ID, ROW_ADDR) or c not in columns[:i]]
    return pa.Table.from_arrays([table.column(n) for n in names], names=names)


def take_by_ids(snapshot: Snapshot, row_ids: Any, spec: ScanSpec) -> pa.Table:
    """Rows by row id (the stable ids of a dataset with stable row ids, else addresses), in the
    order of ``row_ids``; ids of deleted rows (and unknown stable ids) are left out, as in pylance.

    Raises:
        IndexError: an address names no fragment of this version or an offset past its rows.
        SchemaError, FilterError: as :func:`resolve`.
    """
    ids = _as_int_array(row_ids, np.uint64)
    proj = resolve(snapshot.read_schema, spec, nested="pruned")
    plan, out = _positions_plan(snapshot, proj)
    frags = snapshot.fragment_readers()
    stable = bool(frags) and frags[0].row_ids is not None
    if stable:
        live = []
        for f in frags:
            positions = f.live_positions()
            assert f.row_ids is not None
            live.append((f.row_ids[positions], positions))
        which, offsets = locate_ids(live, ids)
    else:
        which, offsets = locate_addresses([f.fragment for f in frags], ids)
        if (which < 0).any():
            bad = int(ids[np.flatnonzero(which < 0)[0]])
            raise IndexError(f"row id {bad} (fragment {bad >> 32}, offset {bad & 0xFFFFFFFF}) names no row")
        keep = np.ones(ids.size, bool)
        for k in sorted_unique(which).tolist():
            if frags[k].deleted.size:
                at = which == k
                keep[at] = ~np.isin(offsets[at], frags[k].deleted)
        which, offsets = np.where(keep, which, -1), np.where(keep, offsets, -1)
    found = which >= 0
    return proj.apply(read_positions(frags, plan, out, which[found], offsets[found]))


def slice_spec(start: int, end: int, columns: Any) -> ScanSpec:
    """The scan of rows ``[start, end)`` (pylance's ``slice``).

    Raises:
        ScanOptionError: ``start`` is negative or ``end`` is below ``start``.
    """
    if start < 0:
        raise ScanOptionError(f"start must be non-negative, got {start}")
    if end < start:
        raise ScanOptionError(f"end ({end}) must be >= start ({start})")
    return scan_spec({"columns": columns, "offset": start, "limit": end - start}, "slice")


def sample(snapshot: Snapshot, num_rows: int, spec: ScanSpec, randomize_order: bool = True) -> pa.Table:
    """``num_rows`` distinct rows chosen at random (in random order, or in dataset order).

    Raises:
        ValueError: ``num_rows`` is negative or more than the rows of the version.
    """
    indices = random.sample(range(snapshot.num_rows), num_rows)
    if not randomize_order:
        indices.sort()
    return take(snapshot, indices, spec)
