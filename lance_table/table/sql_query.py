"""pylance's ``LanceDataset.sql(...)``: one SQL ``SELECT`` over the dataset, parsed with sqlglot in
Lance's dialect and run as a scan.

What runs: ``SELECT`` of ``*``, columns and expressions (``AS`` names), ``DISTINCT``, the
aggregates ``count``, ``sum``, ``min``, ``max`` and ``avg`` (with ``GROUP BY`` columns), ``FROM``
the dataset under its table name (``dataset`` unless ``table_name`` says otherwise; qualified
``dataset.col`` names too), ``WHERE`` (any filter the scanner takes), ``ORDER BY`` (columns, output
names or expressions; ``ASC``/``DESC``, ``NULLS FIRST``/``LAST``, DataFusion's default of nulls last
ascending and first descending), ``LIMIT`` and ``OFFSET``. Anything else (joins, subqueries,
``HAVING``, window functions, ``UNION``, other statements) raises
:class:`~lance_table.errors.UnsupportedOperationError` naming it; a query that does not parse, or
names another table or a missing column, raises :class:`~lance_table.errors.FilterError` (also a
``ValueError``, pylance's error), whose message starts with pylance's ``Invalid user input:``.

Columns of expressions without a name are named by their SQL text (DataFusion names them by its
own rendering, e.g. ``dataset.id + Int64(1)``: give them names with ``AS`` to have the same names
in both libraries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import FilterError, UnsupportedOperationError, UnsupportedOptionError
from lance_table.file.arrow_take import take
from lance_table.table.scan_spec import scan_spec

if TYPE_CHECKING:
    from sqlglot import exp

    from lance_table.table.snapshot import Snapshot

DEFAULT_TABLE = "dataset"
#: pylance's ``blob_handling`` values; lance_table returns what its scans return (the default).
BLOB_HANDLING_DEFAULT = "blobs_descriptions"
_AGGREGATES = {"count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "mean"}
_HIDDEN = "__lance_table_sql_"


class SqlQuery:
    """An SQL query ready to run (pylance's ``SqlQuery``; made by :meth:`SqlQueryBuilder.build`).

    Example:
        ```python
        query = ds.sql("SELECT id, upper(kind) AS k FROM dataset WHERE id < 3").build()
        print(pa.Table.from_batches(query.to_batch_records()))
        ```
    """

    def __init__(self, run: Any) -> None:
        self._run = run

    def to_batch_records(self) -> list[pa.RecordBatch]:
        """The result, read now, as a list of record batches.

        Raises:
            FilterError: an expression does not compile against the dataset.
        """
        return self._run().to_batches()

    def to_stream_reader(self) -> pa.RecordBatchReader:
        """The result as a ``RecordBatchReader``.

        Raises:
            FilterError: an expression does not compile against the dataset.
        """
        table = self._run()
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())


class SqlQueryBuilder:
    """The options of one SQL query over a dataset (pylance's ``SqlQueryBuilder``, returned by
    ``ds.sql(...)``); :meth:`build` makes the query.

    Example:
        ```python
        rows = ds.sql("SELECT * FROM events WHERE kind = 'click'").table_name("events").build()
        print(rows.to_stream_reader().read_all().num_rows)
        ```
    """

    def __init__(self, snapshot: Snapshot, sql: str) -> None:
        self._snapshot = snapshot
        self._sql = sql
        self._table = DEFAULT_TABLE
        self._system: dict[str, bool] = {"_rowid": False, "_rowaddr": False}
        self._batch_size: int | None = None

    def table_name(self, table_name: str) -> SqlQueryBuilder:
        """The name the query's ``FROM`` uses for the dataset (``dataset`` by default)."""
        self._table = str(table_name)
        return self

    def with_row_id(self, with_row_id: bool = True) -> SqlQueryBuilder:
        """Add ``_rowid`` to what ``*`` selects (last, as pylance)."""
        self._system["_rowid"] = bool(with_row_id)
        return self

    def with_row_addr(self, with_row_addr: bool = True) -> SqlQueryBuilder:
        """Add ``_rowaddr`` to what ``*`` selects."""
        self._system["_rowaddr"] = bool(with_row_addr)
        return self

    def batch_size(self, batch_size: int) -> SqlQueryBuilder:
        """The most rows in one batch of the result."""
        self._batch_size = int(batch_size)
        return self

    def batch_size_bytes(self, batch_size_bytes: int) -> SqlQueryBuilder:
        """Accepted, without effect: a tuning knob of pylance's engine (the rows are the same)."""
        return self

    def blob_handling(self, blob_handling: str) -> SqlQueryBuilder:
        """Only the default (``"blobs_descriptions"``): blob columns come back as scans return them.

        Raises:
            UnsupportedOptionError: another value.
        """
        if blob_handling != BLOB_HANDLING_DEFAULT:
            raise UnsupportedOptionError(
                "sql(...).blob_handling",
                "blob_handling",
                f"only {BLOB_HANDLING_DEFAULT!r} is, not {blob_handling!r}",
            )
        return self

    def build(self) -> SqlQuery:
        """The query, checked (it runs when its results are asked for).

        Raises:
            FilterError: the SQL does not parse, has no ``FROM`` or names another table.
            UnsupportedOperationError: a construct lance_table does not run (named).
        """
        plan = _Plan(self._snapshot, self._sql, self._table, self._system, self._batch_size)
        return SqlQuery(plan.run)


class _Plan:
    """The parsed query, as a scan and what follows it (aggregation, distinct, order, slice)."""

    def __init__(
        self, snapshot: Snapshot, sql: str, table: str, system: dict[str, bool], batch: int | None
    ) -> None:
        from sqlglot import exp

        from lance_table.filters.dialect import parse

        self.snapshot = snapshot
        self.batch = batch
        tree = parse(sql, statement=True)
        if not isinstance(tree, exp.Select):
            raise UnsupportedOperationError(f"sql(): only SELECT runs here, not {tree.key.upper()}")
        _refuse_constructs(tree)
        source = tree.args.get("from_") or tree.args.get("from")
        if source is None:
            raise FilterError(f"sql(): the query names no table; select FROM {table}")
        names = {table}
        if not isinstance(source.this, exp.Table) or source.this.name != table:
            raise FilterError(f"sql(): table {source.this.sql()!r} not found; the dataset is {table!r}")
        if source.this.alias:
            names.add(source.this.alias)
        tree = _unqualified(tree, names)
        self.where = _text(tree.args["where"].this) if tree.args.get("where") else None
        self.outputs: list[tuple[str, exp.Expr]] = []
        star = [n for n in snapshot.read_schema.names] + [n for n, on in system.items() if on]
        for item in tree.expressions:
            if isinstance(item, exp.Star):
                self.outputs += [(n, exp.column(n)) for n in star]
            elif isinstance(item, exp.Alias):
                self.outputs.append((item.alias, item.this))
            elif isinstance(item, exp.Column):
                self.outputs.append((item.name, item))
            else:
                self.outputs.append((_text(item), item))
        self.group = [g for g in (tree.args["group"].expressions if tree.args.get("group") else [])]
        self.aggregate = bool(self.group) or any(
            item.find(exp.AggFunc) is not None for _, item in self.outputs
        )
        self.distinct = tree.args.get("distinct") is not None
        self.order = list(tree.args["order"].expressions) if tree.args.get("order") else []
        for key in self.order:  # ORDER BY 2: the second output column
            if isinstance(key.this, exp.Literal) and key.this.is_int:
                at = int(key.this.this)
                if not 1 <= at <= len(self.outputs):
                    raise FilterError(f"sql(): ORDER BY {at}: the query selects {len(self.outputs)} columns")
                key.set("this", exp.column(self.outputs[at - 1][0]))
        self.limit = _count(tree.args.get("limit"), "LIMIT")
        self.offset = _count(tree.args.get("offset"), "OFFSET")

    def run(self) -> pa.Table:
        table = self._aggregated() if self.aggregate else self._projected()
        if self.distinct:
            names = table.column_names
            table = table.group_by(names, use_threads=False).aggregate([]).select(names)
        table = self._ordered(table)
        if not self.order and not self.aggregate and not self.distinct:
            return _batched(table, self.batch)  # offset and limit were the scan's
        table = table.slice(self.offset or 0, self.limit)
        return _batched(table, self.batch)

    def _scan(self, columns: dict[str, str], pushdown: bool) -> pa.Table:
        from lance_table.table.scanner import LanceScanner

        options: dict[str, Any] = {"columns": columns, "filter": self.where}
        if pushdown:
            options.update(limit=self.limit, offset=self.offset)
        return LanceScanner(self.snapshot, scan_spec(options, "sql")).to_table()

    def _projected(self) -> pa.Table:
        columns = {name: _text(e) for name, e in self.outputs}
        names = list(columns)
        if len(set(names)) != len(names):
            raise FilterError(f"sql(): the query selects the same name twice: {names}")
        hidden = self._sort_keys(columns)
        pushdown = not self.order and not self.distinct
        table = self._scan({**columns, **hidden}, pushdown)
        return table

    def _sort_keys(self, columns: dict[str, str]) -> dict[str, str]:
        """Hidden columns for the ORDER BY keys that are not output names (added to ``columns``'
        scan, dropped after sorting)."""
        from sqlglot import exp

        out = {}
        for i, key in enumerate(self.order):
            if isinstance(key.this, exp.Column) and key.this.name in columns:
                continue
            out[f"{_HIDDEN}{i}"] = _text(key.this)
        return out

    def _aggregated(self) -> pa.Table:
        from sqlglot import exp

        keys = []
        for g in self.group:
            if not isinstance(g, exp.Column):
                raise UnsupportedOperationError(f"sql(): GROUP BY {_text(g)}: only columns are grouped")
            keys.append(g.name)
        inputs: dict[str, str] = {k: k for k in keys}
        aggs: list[tuple[str, str, str]] = []  # (input column, function, output name)
        for name, item in self.outputs:
            if isinstance(item, exp.Column) and item.name in keys:
                continue
            if not isinstance(item, exp.AggFunc) or item.key not in _AGGREGATES:
                raise UnsupportedOperationError(
                    f"sql(): {_text(item)} with GROUP BY or aggregates: only grouped columns and "
                    f"{', '.join(_AGGREGATES)} of a column or expression run here"
                )
            arg = item.this
            if isinstance(arg, exp.Star) or (item.key == "count" and arg is None):
                inputs[f"{_HIDDEN}{len(aggs)}"] = "1"
                aggs.append((f"{_HIDDEN}{len(aggs)}", "count_all", name))
            else:
                inputs[f"{_HIDDEN}{len(aggs)}"] = _text(arg)
                aggs.append((f"{_HIDDEN}{len(aggs)}", _AGGREGATES[item.key], name))
        table = self._scan(inputs, pushdown=False)
        specs: list[Any] = [([], "count_all") if fn == "count_all" else (col, fn) for col, fn, _ in aggs]
        grouped = table.group_by(keys, use_threads=False).aggregate(specs)
        results = {}
        for col, fn, name in aggs:
            results[name] = grouped.column("count_all" if fn == "count_all" else f"{col}_{fn}")
        columns = [grouped.column(n) if n in keys else results[n] for n, _ in self.outputs]
        counted = {name for _, fn, name in aggs if fn in ("count", "count_all")}
        fields = [pa.field(n, c.type, nullable=n not in counted) for (n, _), c in zip(self.outputs, columns)]
        table = pa.Table.from_arrays(columns, schema=pa.schema(fields))  # counts are never null
        for key in self.order:
            if not (isinstance(key.this, exp.Column) and key.this.name in table.column_names):
                raise UnsupportedOperationError(
                    f"sql(): ORDER BY {_text(key.this)} after aggregation: order by an output name"
                )
        return table

    def _ordered(self, table: pa.Table) -> pa.Table:
        if not self.order:
            return table
        from sqlglot import exp

        from lance_table.table.scanner import PER_KEY_NULLS

        sort: list[tuple[str, str, str]] = []
        for i, key in enumerate(self.order):
            name = key.this.name if isinstance(key.this, exp.Column) else ""
            column = name if name in table.column_names else f"{_HIDDEN}{i}"
            desc = bool(key.args.get("desc"))
            nulls_first = bool(key.args.get("nulls_first"))  # (the dialect's default: DataFusion's)
            order = "descending" if desc else "ascending"
            sort.append((column, order, "at_start" if nulls_first else "at_end"))
        if PER_KEY_NULLS:
            indices = pc.sort_indices(table, sort_keys=sort)
        else:
            indices = pc.sort_indices(table, sort_keys=[k[:2] for k in sort], null_placement=sort[0][2])
        table = take(table, indices)
        return table.drop_columns([n for n in table.column_names if n.startswith(_HIDDEN)])


_REFUSED = {
    "joins": "JOIN",
    "having": "HAVING",
    "qualify": "QUALIFY",
    "windows": "WINDOW",
    "laterals": "LATERAL",
    "pivots": "PIVOT",
    "with": "WITH",
    "with_": "WITH",
    "into": "SELECT INTO",
}


def _refuse_constructs(tree: exp.Select) -> None:
    """Raises: UnsupportedOperationError: a construct that does not run here, named."""
    from sqlglot import exp

    for arg, construct in _REFUSED.items():
        if tree.args.get(arg):
            raise UnsupportedOperationError(f"sql(): {construct} is not supported by lance_table")
    for node in tree.walk():
        if isinstance(node, exp.Window):
            raise UnsupportedOperationError(f"sql(): window functions ({_text(node)}) are not supported")
        if isinstance(node, (exp.Subquery, exp.Select)) and node is not tree:
            raise UnsupportedOperationError("sql(): subqueries are not supported by lance_table")


def _unqualified(tree: exp.Select, names: set[str]) -> exp.Select:
    """``tree`` with ``dataset.col`` (or the alias's) read as ``col``.

    Raises:
        FilterError: a column qualified by another table's name.
    """
    from sqlglot import exp

    def strip(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table:
            if node.table not in names:
                raise FilterError(f"sql(): {node.sql()!r} names table {node.table!r}, not in the query")
            return exp.Column(this=node.this)
        return node

    out = tree.transform(strip)
    assert isinstance(out, exp.Select)
    return out


def _text(node: exp.Expr) -> str:
    """An expression as the SQL text the scanner's filters and projections take."""
    from lance_table.filters.dialect import to_text

    return to_text(node)


def _count(node: Any, what: str) -> int | None:
    """A LIMIT or OFFSET value.

    Raises:
        UnsupportedOperationError: not a non-negative integer literal.
    """
    if node is None:
        return None
    value = node.args.get("expression")
    try:
        number = int(value.this) if value is not None and value.is_int else -1
    except (AttributeError, ValueError):
        number = -1
    if number < 0:
        raise UnsupportedOperationError(f"sql(): {what} takes a non-negative integer, got {node.sql()!r}")
    return number


def _batched(table: pa.Table, size: int | None) -> pa.Table:
    if size is None:
        return table
    return pa.Table.from_batches(table.to_batches(max_chunksize=size), schema=table.schema)


def sql(snapshot: Snapshot, text: str) -> SqlQueryBuilder:
    """The builder of an SQL query over ``snapshot``.

    Raises:
        TypeError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"sql() takes the query as a string, not {type(text).__name__}")
    return SqlQueryBuilder(snapshot, text)


__all__ = ["DEFAULT_TABLE", "SqlQuery", "SqlQueryBuilder", "sql"]
