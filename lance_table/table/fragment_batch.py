"""Reading the rows of many small fragments at once.

A living table is thousands of fragments of a few hundred rows each. Read one by one, each costs
a few hundred microseconds of Python around a few microseconds of decoding. Here the fragments
whose data is one 2.1/2.2 file of one page per column (see :mod:`small_many`; a page of many
chunks when most of its rows are read; structs and lists as their leaves' pages of one chunk)
are read as one batch: a request per file, then each column of all the files decoded in one
numpy pass and the selected rows taken in one call. Other
fragments (and any batch whose bytes do not check out, so that the error names the file) are
read one by one, as :meth:`FragmentReader.read` does.

A batch holds at most :data:`BATCH_BYTES` of files. Where the files are too large for two of
them to share a batch of every column read, but some columns are small (ids and floats beside
vectors, in fragments of some ten thousand rows), the small columns are batched across the files
by themselves and the large ones are read file by file, and the columns are put side by side
(see :func:`~lance_table.table.fragment_plans.column_groups`). Where a batch of every column would
hold only a few files (vectors beside ids in fragments of a few thousand rows), the narrow columns
are batched by themselves across many more files, the wide ones by themselves
(:func:`~lance_table.table.fragment_plans.narrow_groups`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from lance_table.extensions import user_table
from lance_table.file import utf8
from lance_table.file.arrow import bool_array
from lance_table.file.arrow_take import filter_rows, take
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs, many_runs
from lance_table.file.v2_0 import direct as direct20
from lance_table.file.v2_0 import small_many as small_many20
from lance_table.file.v2_1 import direct_flat, small_layouts, small_many, small_take
from lance_table.file.v2_1.byteranges import spans
from lance_table.file.v2_1.value_kinds import fixed_bits
from lance_table.schema import FieldNode
from lance_table.table import fragment_reads
from lance_table.table.fragment import FragmentReader
from lance_table.table.fragment_plans import Plan, batchable, plans
from lance_table.table.fragment_plans import column_groups as _column_groups
from lance_table.table.fragment_plans import narrow_groups as _narrow_groups
from lance_table.table.fragment_reads import FEW_ROWS_SHARE

# A batch keeping at least this share of its rows selects them with a filter, not a take.
DENSE_SHARE = 0.25


#: the most bytes of files one batch reads (a larger file is read on its own): a batch holds its
#: files' bytes, joined in one more buffer, and the decoded values of all of them, joined again,
#: while it decodes them; a file this large decodes for milliseconds, and the fixed cost of a read
#: of its own (some hundred microseconds) is what a batch saves. At 8 MiB, a projection of the FSST
#: strings of pylance's 100k-row fragments peaked at 229-241 MiB (pylance 204-215), at 1 MiB at
#: 200-209 MiB, in no more CPU time.
BATCH_BYTES = 1 << 20


#: the most bytes of files one batch of pages read straight into their values reads (see
#: :mod:`direct_flat`): it holds nothing but the values it returns, and a file's page of 20k
#: vectors (1.3 MB) read in a batch of its own cost 0.4 ms more than the read itself
DIRECT_BATCH_BYTES = 32 << 20

#: the most bytes of 2.0 files one such batch reads when a column holds lists: it also holds their
#: end offsets and the arrays that resolve them (some 17 bytes a list or string of a list, beside
#: the 8 stored). A scan of pylance's 20k-row files of lists of strings and of ints (1M rows)
#: peaked at 234 MiB with batches of 8 MiB (pylance 253), at 268 MiB with 32 MiB, in the same
#: CPU time; with 4 MiB, 221 MiB in 10-25% more
LIST_BATCH_BYTES = 8 << 20


def _direct(plan: Plan | None, run: Runs, columns: int) -> bool:
    """Whether a batch reads the rows ``run`` of a file with this plan straight into the columns'
    values (every row of pages :func:`direct_flat.applies` to; of a 2.0 file, most of its rows,
    or rows in runs so many that its reader would read their span whole, see :mod:`direct20`)."""
    if plan is not None and isinstance(plan[1], small_many20.FileLayout):
        most = DENSE_SHARE * plan[1].num_rows
        spread = many_runs(run) and run.end - int(run.starts[0]) >= most
        return (run.total >= most or spread) and direct20.applies([plan], columns)  # type: ignore[list-item]
    return (
        plan is not None
        and isinstance(plan[1], small_layouts.FileLayout)
        and run.is_span(0, plan[1].num_rows)
        and direct_flat.applies([plan], columns)  # type: ignore[list-item]
    )


def _limit(plan: Plan | None) -> int:
    """The most bytes of files of a batch read straight into the columns' values, from its first
    file's plan."""
    if plan is not None and isinstance(plan[1], small_many20.FileLayout) and direct20.holds_lists(plan[1]):
        return LIST_BATCH_BYTES
    return DIRECT_BATCH_BYTES


def _version(plan: Plan | None) -> type | None:
    """The kind of a plan's layout: a batch reads files of one format version (2.0, or 2.1/2.2)."""
    return None if plan is None else type(plan[1])


def _alone(plan: Plan | None, nodes: Sequence[FieldNode], run: Runs) -> bool:
    """Whether a 2.1/2.2 file that shares no batch (too large to, or read whole as the last of a
    run of files) is decoded as a batch of its own all the same: decoding its whole pages at once
    costs less than its reader's decoding page by page (a 20k-row page of 16-float vectors: 1.5 ms
    against 2.1; of 62-bit floats: 0.6 against 2 ms). Only columns of fixed width, whose values
    take no more memory than their bytes (a batch holds the file's bytes while it decodes them;
    strings may grow several times over). A 2.0 file's own reader is as fast."""
    return (
        plan is not None
        and isinstance(plan[1], small_layouts.FileLayout)
        and (plan[1].length > BATCH_BYTES // 2 or run.is_span(0, plan[1].num_rows))
        and all(fixed_bits(n.arrow_type) is not None for n in nodes)
    )


def read(
    frags: Sequence[FragmentReader],
    names: list[str],
    runs: Sequence[Runs],
    floors: Mapping[str, int] | None = None,
    found: Sequence[Plan | None] | None = None,
    take: bool = False,
) -> pa.Table:
    """Columns ``names`` of the rows ``runs[k]`` of each fragment ``frags[k]``, one fragment after
    another (as :meth:`FragmentReader.read` of each, concatenated); ``found``: :func:`plans`
    for these fragments and columns, when the caller has them.

    Raises:
        IndexError: runs reach past a fragment's rows.
        CorruptFileError, DataFileNotFoundError: see :meth:`FragmentReader.read`.
    """
    roots = frags[0].roots if frags else {}
    schema = pa.schema([roots[n].to_arrow_field() for n in names])
    # as readers see the columns (JSON as text, extension types), as FragmentReader.read gives them
    user = pa.schema([roots[n].reader_field for n in names])
    nodes = [roots[n] for n in names]
    rows = [r.total for r in runs]
    if take and len(frags) > 1 and sum(rows) <= FEW_ROWS_SHARE * sum(f.physical_rows for f in frags):
        # a few rows of 2.0 files: just their bytes
        _check_rows(frags, runs)
        table = fragment_reads.few_rows_v20(frags, names, schema, runs)
        if table is not None:
            return user_table(table, schema, user)
    if found is None:
        found = plans(frags, names)
    spread = [r.count for r in runs]
    ok = [batchable(p, r, c) for p, r, c in zip(found, rows, spread)]
    direct = [o and _direct(p, r, len(names)) for o, p, r in zip(ok, found, runs)]
    groups = None
    if len(names) > 1 and len(frags) > 1 and not all(direct):
        groups = _column_groups(frags, names, rows, found, ok, spread, BATCH_BYTES)
    if groups is None and len(names) > 1 and len(frags) > 1 and not all(direct) and 2 * sum(ok) >= len(ok):
        groups = _narrow_groups(frags, names, found, BATCH_BYTES)
    if groups is None and len(names) > 1 and len(frags) > 1 and not all(ok):
        groups = _chunk_groups(frags, names, rows, ok)
    if groups is not None:
        # each group of columns read on its own (the small ones batched across the files),
        # the same rows in the same order: the columns are put side by side
        parts = [read(frags, group, runs, floors, group_plans, take) for group, group_plans in groups]
        columns = {name: part.column(name) for part in parts for name in part.column_names}
        return pa.Table.from_arrays([columns[name] for name in names], schema=user)
    pieces = []
    sparse: list[list[Plan] | None] | None = None  # (made when first needed)
    i, n = 0, len(frags)
    while i < n:
        j = i
        kind = _version(found[i])
        limit, held = _limit(found[i]) if direct[i] else BATCH_BYTES, 0
        while j < n and ok[j] and _version(found[j]) is kind:
            if j > i and direct[i] is not direct[j]:
                break
            held += found[j][1].length  # type: ignore[index]  # (batchable: not None)
            if j > i and held > limit:
                break
            j += 1
        if j - i > 1 or (j > i and (_alone(found[i], nodes, runs[i]) or direct[i])):
            batch = [p for p in found[i:j] if p is not None]
            table = _read_batch(frags[i:j], batch, names, schema, runs[i:j], floors)
            pieces.append(user_table(table, schema, user))
        else:
            if sparse is None and not ok[i]:
                sparse = _sparse(frags, names, rows, ok)
            m = _chunk_run(sparse, rows, i) if sparse is not None else i
            if m - i > 1:  # few rows of many files' pages of many chunks: their chunks read together
                table = _read_chunks(frags[i:m], sparse[i:m], names, schema, runs[i:m], floors)  # type: ignore[index, arg-type]
                pieces.append(user_table(table, schema, user))
                j = m
            else:
                j = max(j, i + 1)
                pieces.extend(f.read(names, r, floors) for f, r in zip(frags[i:j], runs[i:j]) if r.total)
        i = j
    if not pieces:
        return user.empty_table()
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)


#: the most bytes of chunks (estimated: see :func:`small_take.estimate`) one batch of
#: :func:`_read_chunks` reads
CHUNK_BATCH_BYTES = 8 << 20


def _sparse(
    frags: Sequence[FragmentReader], names: list[str], rows: Sequence[int], ok: Sequence[bool]
) -> list[list[Plan] | None]:
    """For each fragment not read in a batch of whole pages, each column's plan when its few
    rows are read with other files' by :func:`_read_chunks` (every column a page of mini-block
    chunks of a 2.1/2.2 file, strings in a general compression too); else None."""
    own = [plans(frags, [name]) for name in names]
    found: list[list[Plan] | None] = []
    for k in range(len(frags)):
        each = [p[k] for p in own]
        if (
            ok[k] or not rows[k] or any(not _chunked(p) or p[0] is not each[0][0] for p in each)  # type: ignore[index]
        ):
            found.append(None)
        else:
            found.append(each)  # type: ignore[arg-type]
    return found


def _chunk_groups(
    frags: Sequence[FragmentReader], names: list[str], rows: Sequence[int], ok: Sequence[bool]
) -> list[tuple[list[str], list[Plan | None]]] | None:
    """The columns ``names`` as two groups, each read on its own, when the fragments not read in
    batches of whole pages have some columns that :func:`_read_chunks` reads and some it does
    not (nested fields, constant pages): those columns, then the others. (The groups' plans
    are those of batches of whole pages.)"""
    wanted = [k for k in range(len(frags)) if not ok[k] and rows[k]]
    if len(wanted) < 2:
        return None
    own = {name: plans(frags, [name]) for name in names}
    some = [n for n in names if all(_chunked(own[n][k]) for k in wanted)]
    if not some or len(some) == len(names):
        return None
    rest = [n for n in names if n not in some]
    return [(some, plans(frags, some)), (rest, plans(frags, rest))]


def _chunked(plan: Plan | None) -> bool:
    """Whether a plan of one column is one :func:`_read_chunks` reads."""
    return (
        plan is not None
        and isinstance(plan[1], small_layouts.FileLayout)
        and small_take.columns_of([plan[1]]) is not None
    )


def _chunk_run(sparse: Sequence[list[Plan] | None], rows: Sequence[int], i: int) -> int:
    """Where the run of fragments from ``i`` that :func:`_read_chunks` reads in one batch ends."""
    m, held = i, 0
    while m < len(sparse) and (each := sparse[m]) is not None:
        held += small_take.estimate([p[1] for p in each], rows[m])  # type: ignore[misc]
        if m > i and held > CHUNK_BATCH_BYTES:
            break
        m += 1
    return m


def _check_rows(frags: Sequence[FragmentReader], runs: Sequence[Runs]) -> None:
    """Raises IndexError when rows past the end of their fragment are asked for."""
    for frag, r in zip(frags, runs):
        if r.end > frag.physical_rows:
            raise IndexError(f"rows up to {r.end} requested from a fragment of {frag.physical_rows} rows")


def _read_chunks(
    frags: Sequence[FragmentReader],
    found: Sequence[list[Plan]],
    names: list[str],
    schema: pa.Schema,
    runs: Sequence[Runs],
    floors: Mapping[str, int] | None,
) -> pa.Table:
    """The rows ``runs`` of the fragments, each column a page of mini-block chunks (``found``:
    each fragment's plan of each column): the chunks they need of all the files read and decoded
    together (see :mod:`small_take`)."""
    _check_rows(frags, runs)
    readers = [each[0][0] for each in found]
    layouts = [[each[c][1] for each in found] for c in range(len(names))]
    roots = frags[0].roots
    io = PageIO(readers[0]._stored, None, None, (), "chunks of many files")
    arrays = small_take.read(
        layouts,  # type: ignore[arg-type]
        [r.positions() for r in runs],
        [roots[name].arrow_type for name in names],
        fragment_reads.fetch(frags, readers),
        io,
        fragment_reads.maps(readers),
    )
    if arrays is None or any(
        (arr.null_count and not roots[name].field.nullable) or utf8.problem_of(arr, arr.type) is not None
        for arr, name in zip(arrays, names)
    ):
        # read one by one: the fragment at fault says what is wrong
        return pa.concat_tables([f.read(names, r, floors) for f, r in zip(frags, runs)])
    return pa.Table.from_arrays(arrays, schema=schema)


def _read_batch(
    frags: Sequence[FragmentReader],
    found: list[Plan],
    names: list[str],
    schema: pa.Schema,
    runs: Sequence[Runs],
    floors: Mapping[str, int] | None,
) -> pa.Table:
    _check_rows(frags, runs)
    layouts = [lay for _, lay in found]
    io = PageIO(found[0][0]._stored, None, None, (), "small pages of many files")
    roots = frags[0].roots
    counts = [lay.num_rows for lay in layouts]
    whole = all(r.is_span(0, k) for r, k in zip(runs, counts))
    if whole and isinstance(layouts[0], small_layouts.FileLayout) and direct_flat.applies(found, len(names)):  # type: ignore[arg-type]
        # pages of flat values of local files: read straight into the columns' values
        direct = [direct_flat.read(found, c, roots[name].arrow_type, io) for c, name in enumerate(names)]  # type: ignore[arg-type]
        if all(arr is not None for arr in direct):
            return pa.Table.from_arrays(direct, schema=schema)
    pick = mask = keep = None
    if not whole:
        row_base = np.zeros(len(counts), np.int64)
        np.cumsum(counts[:-1], out=row_base[1:])
        starts = np.concatenate([r.starts + b for r, b in zip(runs, row_base.tolist())])
        lengths = np.concatenate([r.lengths for r in runs])
        selected = Runs(starts, lengths)
        pick = spans(starts, lengths)
        rows = sum(counts)
        if selected.total >= DENSE_SHARE * rows:
            # most rows (the live rows of fragments with deletions): a column of flat values gives
            # just those, copied once from its chunks; the others are filtered once decoded
            mask = selected.mask(0, rows)
            keep = bool_array(mask)
    read20 = None  # (2.0 files: read straight into the columns' values, the rows then selected)
    if (
        isinstance(layouts[0], small_many20.FileLayout) and direct20.applies(found, len(names))  # type: ignore[arg-type]
    ):
        read20 = direct20.read(found, [roots[name].arrow_type for name in names])  # type: ignore[arg-type]
    if read20 is None:
        data, bases = fragment_reads.joined_spans(frags, found)
    arrays = []
    for c, name in enumerate(names):
        node = roots[name]
        t = node.arrow_type
        floor = floors.get(name) if floors and pa.types.is_integer(t) else None
        if read20 is not None:
            arr = read20[c]
        elif isinstance(layouts[0], small_many20.FileLayout):
            arr = small_many20.decode(layouts, data, bases, c, t)  # type: ignore[arg-type]
        else:
            # (dictionary strings: only the rows kept are looked up)
            arr = small_many.decode(layouts, data, bases, c, t, io, floor, pick, mask)  # type: ignore[arg-type]
        if arr is None or (arr.null_count and not node.field.nullable) or utf8.problem_of(arr, t) is not None:
            # read one by one: the fragment at fault says what is wrong
            return pa.concat_tables([f.read(names, r, floors) for f, r in zip(frags, runs)])
        if pick is not None and len(arr) != pick.size:  # (else: already the rows kept)
            # a few rows: a take; most rows: a filter
            arr = take(arr, pa.array(pick)) if keep is None else filter_rows(arr, keep)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)
