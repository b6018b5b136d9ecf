"""Adding columns to every fragment of a dataset, as pylance's ``add_columns`` and ``merge`` do:
the new columns are written into one new data file per fragment (existing files are not
rewritten), the new fields get the ids after the highest one in use, and the change commits as a
``Merge`` transaction. All-null columns are metadata only.

The values come from SQL expressions, a batch UDF (:mod:`lance_table.udf`), rows aligned with the
dataset's rows, or a left join on a key column (:mod:`schema_merge`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._parallel import FRAGMENTS, PARTS, ahead_on, groups, map_on
from lance_table.errors import FilterError, SchemaChangeError, UnsupportedFormatError
from lance_table.file.arrow_take import take
from lance_table.file.runs import Runs
from lance_table.format.manifest import Fragment, Manifest
from lance_table.format.operations import Merge
from lance_table.schema import LanceField, fields_from_arrow
from lance_table.table import fragment_batch
from lance_table.table.commit import Pending
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations.write import LEGACY_FORMAT, FragmentWriter, writable_data_format
from lance_table.table.progress import SILENT, Reporter
from lance_table.table.snapshot import Snapshot

# Rows per batch a UDF is called with (pylance's default); SQL expressions go in larger chunks.
DEFAULT_UDF_BATCH_ROWS = 1024
SQL_CHUNK_ROWS = 128 * 1024
ROW_ID = "_rowid"
ROW_ADDR = "_rowaddr"
# Chunks of a fragment computed ahead of the one being written (parallel transforms).
CHUNKS_AHEAD = 1
# One data file per fragment: no size limit rolls it over.
_UNLIMITED = 1 << 62

# (fragment reader, physical offset of the chunk, live positions in it, batch index) -> the new
# columns' values for the live rows
Compute = Callable[[FragmentReader, int, np.ndarray, int], pa.Table]
# (fragments, the positions of each to compute) -> the new columns' values of those rows, one
# fragment after another: a group of small fragments read and computed at once (a fragment of
# one chunk computed alone costs a read and an evaluation of a few hundred microseconds each)
ComputeMany = Callable[[Sequence[FragmentReader], Sequence[np.ndarray]], pa.Table]
# Fragments of one chunk and at most this many rows are computed in groups of at most
# GROUP_ROWS rows (nor more than a chunk's: a UDF's batches hold no more rows than before) and
# GROUP_FRAGMENTS fragments; each still gets a data file of its own.
SMALL_FRAGMENT_ROWS = 4096
GROUP_ROWS = 16 * 1024
GROUP_FRAGMENTS = 256


def next_field_id(manifest: Manifest) -> int:
    """The id the next new field gets: after every id of the schema and of the data files."""
    ids = [f.id for f in manifest.fields]
    ids += [i for frag in manifest.fragments for d in frag.files for i in d.fields]
    return max(ids, default=-1) + 1


def check_new_names(ds: Snapshot, names: Sequence[str]) -> None:
    """Raises SchemaChangeError when a new column's name is taken (or given twice)."""
    taken = set(ds.schema.names)
    seen: set[str] = set()
    for name in names:
        if name in taken or name in seen:
            raise SchemaChangeError(f"Column {name} already exists in the dataset")
        seen.add(name)


def plan_null_columns(ds: Snapshot, schema: pa.Schema) -> Pending:
    """All-null columns ``schema``: a Merge that only changes the schema.

    Raises:
        SchemaChangeError: a name is taken, or a new field is not nullable.
        UnsupportedFormatError: the dataset uses the legacy format (pylance refuses it too).
    """
    if writable_data_format(ds.manifest, ds.uri) == LEGACY_FORMAT:
        raise UnsupportedFormatError("Cannot add all-null columns to legacy dataset version.")
    check_new_names(ds, schema.names)
    for f in schema:
        if not f.nullable:
            raise SchemaChangeError(f"all-null column {f.name!r} must be nullable")
    fields = fields_from_arrow(schema, first_id=next_field_id(ds.manifest))
    m = ds.manifest
    op = Merge(m.fragments, m.fields + tuple(fields), dict(m.schema_metadata), preserves_nullability=True)
    return Pending(op, ds.version)


def write_columns(
    ds: Snapshot,
    schema: pa.Schema,
    compute: Compute,
    chunk_rows: int,
    fragment_ids: Sequence[int] | None = None,
    parallel: bool = True,
    first_id: int | None = None,
    live_only: bool = True,
    fields: Sequence[LanceField] | None = None,
    report: Reporter = SILENT,
    write_tag: str = "",
    compute_many: ComputeMany | None = None,
) -> tuple[list[Fragment], tuple[LanceField, ...], list[str]]:
    """Write the columns ``schema`` into a new data file of each fragment (of ``fragment_ids``, or
    all), ``chunk_rows`` physical rows at a time. ``compute`` gets the live rows and deleted rows
    hold nulls; or, unless ``live_only``, it gets every row (deleted ones too: values computed
    from the data, which a non-nullable column of a legacy file needs). ``compute_many``, when
    given, computes runs of small fragments (of one chunk each) as groups. ``report`` hears of the
    rows and files written (phase ``write``).

    Returns the fragments with their new file, the new fields and the files written (named with
    ``write_tag``). On error the files written so far are deleted.

    Raises:
        SchemaChangeError: ``compute`` returned the wrong number of rows or other columns.
    """
    data_format = writable_data_format(ds.manifest, ds.uri)
    if fields is None:  # (else the fields of ``schema``, with their ids, are given)
        start = next_field_id(ds.manifest) if first_id is None else first_id
        fields = fields_from_arrow(schema, first_id=start)
    fields = list(fields)
    frags = ds.fragment_readers(fragment_ids)
    written: list[str] = []
    # the manifest's counts (each fragment's task opens its files, and checks them, on the pool)
    rows = [f.fragment.physical_rows for f in frags]
    report.phase("write", rows_total=sum(rows), files_total=sum(1 for n in rows if n))

    def file_of(frag: FragmentReader, tables: Iterable[pa.Table]) -> Fragment:
        """The fragment with a new data file of the values ``tables`` (its rows in order)."""
        writer = FragmentWriter(
            ds.storage,
            schema,
            fields,
            max_rows_per_file=_UNLIMITED,
            max_bytes_per_file=_UNLIMITED,
            data_format=data_format,
            dictionaries=ds.manifest.dictionaries,
            write_tag=write_tag,
            progress=report,
        )
        try:
            for values in tables:
                for batch in values.to_batches():
                    writer.write(batch)
            made = writer.finish()
        except BaseException:
            writer.abort()
            raise
        finally:
            written.extend(writer.paths)
        if not made:  # a fragment without rows gets no file
            return frag.fragment
        return replace(frag.fragment, files=frag.fragment.files + made[0].files)

    def positions(frag: FragmentReader, lo: int, hi: int) -> np.ndarray:
        return frag.live_positions(lo, hi) if live_only else np.arange(lo, hi, dtype=np.int64)

    def one(frag: FragmentReader) -> Fragment:
        def chunk(item: tuple[int, int]) -> pa.Table:
            index, lo = item
            hi = min(lo + chunk_rows, frag.physical_rows)
            live = positions(frag, lo, hi)
            if not live.size:
                return _spread(schema.empty_table(), live, hi - lo)
            values = checked(compute(frag, lo, live, index), schema, live.size, frag.fragment.id)
            return _spread(values, live - lo, hi - lo)

        # in parallel, the next chunk is computed while this one is written
        items = enumerate(range(0, frag.physical_rows, chunk_rows))
        return file_of(frag, ahead_on(PARTS, chunk, items, CHUNKS_AHEAD if parallel else 0))

    def many(group: Sequence[FragmentReader]) -> list[Fragment]:
        """Small fragments' values computed at once, then a file written for each."""
        lives = [positions(f, 0, f.physical_rows) for f in group]
        todo = [k for k, live in enumerate(lives) if live.size]
        total = sum(lives[k].size for k in todo)
        values = schema.empty_table()
        if todo:
            assert compute_many is not None
            got = compute_many([group[k] for k in todo], [lives[k] for k in todo])
            values = checked(got, schema, total, group[todo[0]].fragment.id, len(todo))
        out, at = [], 0
        for frag, live in zip(group, lives):
            part = values.slice(at, live.size)
            at += live.size
            out.append(file_of(frag, [_spread(part, live, frag.physical_rows)]))
        return out

    def span(lo: int, hi: int) -> list[Fragment]:
        """The fragments ``frags[lo:hi]``: runs of small ones in groups, the others one by one."""
        out: list[Fragment] = []
        most = min(GROUP_ROWS, chunk_rows)
        i = lo
        while i < hi:
            j, held = i, 0
            while j < hi and _small(rows[j], chunk_rows) and compute_many is not None:
                if j > i and (held + rows[j] > most or j - i >= GROUP_FRAGMENTS):
                    break
                held += rows[j]
                j += 1
            if j - i > 1:
                out.extend(many(frags[i:j]))
            else:
                j = i + 1
                out.append(one(frags[i]))
            i = j
        return out

    try:
        if parallel:
            # Not a map that marks its workers busy (map_grouped): a fragment's task keeps its
            # read-ahead and column decodes on their own pools, so that while one thread holds the
            # GIL others decode, compute and write in numpy, pyarrow and file calls that release
            # it (the last fragments of an uneven share do not run on one thread alone either).
            parts = map_on(FRAGMENTS, lambda s: span(*s), groups(rows))
            out = [frag for part in parts for frag in part]
        else:
            out = span(0, len(frags))
    except BaseException:
        for path in written:
            with contextlib.suppress(OSError):
                ds.storage.delete(path)
        raise
    return out, tuple(fields), written


def _small(rows: int, chunk_rows: int) -> bool:
    """Whether a fragment of ``rows`` rows is computed in a group with its neighbours."""
    return 0 < rows <= min(chunk_rows, SMALL_FRAGMENT_ROWS)


def checked(
    values: pa.Table | pa.RecordBatch, schema: pa.Schema, rows: int, frag_id: int, frags: int = 1
) -> pa.Table:
    """``values`` as one chunk of ``schema`` (cast to it).

    Raises:
        SchemaChangeError: ``values`` has not ``rows`` rows (of the fragment ``frag_id``, or of
            ``frags`` fragments from it), or other columns.
    """
    if isinstance(values, pa.RecordBatch):
        values = pa.Table.from_batches([values])
    if values.num_rows != rows:
        which = f"fragment {frag_id}" if frags == 1 else f"{frags} fragments from fragment {frag_id}"
        raise SchemaChangeError(f"the new columns have {values.num_rows} rows for {rows} rows of {which}")
    if values.schema.names != schema.names:
        raise SchemaChangeError(f"the new columns are {values.schema.names}, expected {schema.names}")
    if values.schema != schema:
        values = values.cast(schema)
    return values.combine_chunks()


def _spread(values: pa.Table, live: np.ndarray, rows: int) -> pa.Table:
    """``values`` (one per live row) placed at the offsets ``live`` of ``rows`` rows; nulls elsewhere."""
    if live.size == rows:
        return values
    if not live.size:
        return pa.Table.from_arrays([pa.nulls(rows, f.type) for f in values.schema], schema=values.schema)
    index = np.zeros(rows, np.int64)
    index[live] = np.arange(live.size)
    mask = np.ones(rows, bool)
    mask[live] = False
    return take(values, pa.array(index, mask=mask))


def merge_pending(
    ds: Snapshot, frags: list[Fragment], fields: Sequence[LanceField], written: list[str]
) -> Pending:
    """The Merge of fragments given new data files and the new fields appended to the schema."""
    m = ds.manifest
    new = {f.id: f for f in frags}
    all_frags = tuple(new.get(f.id, f) for f in m.fragments)
    # pylance records whether every new field is nullable
    nullable = all(f.nullable for f in fields)
    op = Merge(all_frags, m.fields + tuple(fields), dict(m.schema_metadata), preserves_nullability=nullable)
    return Pending(op, ds.version, written=tuple(written))


def _runs(live: np.ndarray) -> Runs:
    whole = live.size and int(live[-1]) - int(live[0]) + 1 == live.size  # (live is sorted, unique)
    return Runs.span(int(live[0]), live.size) if whole else Runs.from_sorted_unique(live)


def _system(frag: FragmentReader, name: str, live: np.ndarray) -> np.ndarray:
    """A system column's values (``_rowid`` or ``_rowaddr``) at the offsets ``live``."""
    if name == ROW_ID and frag.row_ids is not None:
        return np.asarray(frag.row_ids[live], np.uint64)
    return ((frag.fragment.id << 32) + live).astype(np.uint64)


def _with_system(table: pa.Table, names: Sequence[str], values: Callable[[str], np.ndarray]) -> pa.Table:
    for name in names:
        if name not in (ROW_ID, ROW_ADDR):
            continue
        arr = pa.array(values(name))
        # (only system columns asked for: the table starts with the first)
        table = table.append_column(name, arr) if table.num_columns else pa.table({name: arr})
    return table


def read_live(frag: FragmentReader, names: list[str], live: np.ndarray, rows: int | None = None) -> pa.Table:
    """Columns ``names`` (``_rowid``/``_rowaddr`` too) of the live rows ``live`` of a fragment; a
    table of ``rows`` rows without columns stands for no names."""
    data = [n for n in names if n not in (ROW_ID, ROW_ADDR)]
    table = frag.read(data, _runs(live)) if data else pa.table({})
    return _with_system(table, names, lambda name: _system(frag, name, live))


def read_live_many(
    frags: Sequence[FragmentReader], names: list[str], lives: Sequence[np.ndarray]
) -> pa.Table:
    """:func:`read_live` of each fragment (each with rows to read), one after another, the
    fragments whose files allow it read as a batch."""
    data = [n for n in names if n not in (ROW_ID, ROW_ADDR)]
    table = fragment_batch.read(frags, data, [_runs(live) for live in lives]) if data else pa.table({})
    return _with_system(
        table, names, lambda name: np.concatenate([_system(f, name, v) for f, v in zip(frags, lives)])
    )


def null_cast_schema(ds: Snapshot, exprs: Mapping[str, Any]) -> pa.Schema | None:
    """The schema of the new columns when every expression is ``CAST(NULL AS type)`` (pylance then
    only changes the schema, writing no data), else None.

    Raises:
        FilterError: such an expression's type is not supported.
    """
    from sqlglot import exp

    from lance_table.filters.dialect import parse
    from lance_table.filters.values import analyze_value

    if not exprs or not all(isinstance(k, str) and isinstance(v, str) for k, v in exprs.items()):
        return None
    if writable_data_format(ds.manifest, ds.uri) == LEGACY_FORMAT:
        return None
    try:
        trees = [parse(v) for v in exprs.values()]
    except FilterError:
        return None
    if not all(isinstance(t, exp.Cast) and isinstance(t.this, exp.Null) for t in trees):
        return None
    return pa.schema([pa.field(n, analyze_value(v, ds.schema).type) for n, v in exprs.items()])


def sql_compute(ds: Snapshot, exprs: Mapping[str, str]) -> tuple[pa.Schema, Compute, ComputeMany]:
    """The schema of SQL expressions' columns (pylance's result types) and how to compute them
    (of a chunk of a fragment, and of a group of small fragments).

    Raises:
        FilterError: an expression does not compile (an unknown column, say).
        TypeError: a name or expression is not a string.
    """
    from lance_table.filters.values import analyze_value, project

    for k, v in exprs.items():
        if not isinstance(k, str):
            raise TypeError(f"Column names must be a string. Got {type(k)}")
        if not isinstance(v, str):
            raise TypeError(f"Column expressions must be a string. Got {type(v)}")
    check_new_names(ds, list(exprs))
    source = ds.schema
    compiled = {name: analyze_value(sql, source) for name, sql in exprs.items()}
    reads = [n for n in source.names if any(n in c.columns for c in compiled.values())]
    # nullable as pylance (DataFusion) infers it: when a column read is, or the value is NULL
    schema = pa.schema(
        [
            pa.field(
                n,
                c.type,
                pa.types.is_null(c.type)
                or c.null_literal
                or any(source.field(x).nullable for x in c.columns),
            )
            for n, c in compiled.items()
        ]
    )
    names = list(compiled)
    exprs_ = [c.expression for c in compiled.values()]

    def evaluate(table: pa.Table, rows: int) -> pa.Table:
        return project(table if reads else pa.table({"__rows": pa.nulls(rows)}), exprs_, names)

    def compute(frag: FragmentReader, lo: int, live: np.ndarray, index: int) -> pa.Table:
        return evaluate(read_live(frag, reads, live), live.size)

    def compute_many(frags: Sequence[FragmentReader], lives: Sequence[np.ndarray]) -> pa.Table:
        return evaluate(read_live_many(frags, reads, lives), sum(live.size for live in lives))

    return schema, compute, compute_many


def reader_compute(reader: pa.RecordBatchReader) -> tuple[pa.Schema, Compute, Callable[[], None]]:
    """Columns taken in order from ``reader``, row for row with the dataset's live rows, and a
    check that the reader had no rows left over.

    Raises:
        SchemaChangeError: the reader has fewer rows than the dataset (or, from the check, more).
    """
    batches: Iterator[pa.RecordBatch] = iter(reader)
    pending: list[pa.RecordBatch] = []

    def take(n: int) -> pa.Table:
        got, out = 0, []
        while got < n:
            batch = pending.pop(0) if pending else next(batches, None)
            if batch is None:
                raise SchemaChangeError(
                    "Stream ended before producing values for all rows in dataset "
                    "(the new column data has fewer rows than the dataset)"
                )
            if got + batch.num_rows > n:
                pending.insert(0, batch.slice(n - got))
                batch = batch.slice(0, n - got)
            out.append(batch)
            got += batch.num_rows
        return pa.Table.from_batches(out, schema=reader.schema)

    def done() -> None:
        rest = sum(b.num_rows for b in pending) + sum(b.num_rows for b in batches)
        if rest:
            raise SchemaChangeError(
                f"Stream produced more values than expected for dataset ({rest} rows more than the dataset)"
            )

    return reader.schema, lambda frag, lo, live, index: take(live.size), done
