"""Decoding legacy pages (PLAIN, VAR_BINARY, DICTIONARY) into Arrow arrays, one batch at a time.

Each field of a batch is decoded by a generator that yields the byte ranges it needs next and is
sent back their bytes: fixed-width values in one round; strings first their positions, then their
bytes; lists first their offsets, then their child. :func:`gather` runs many such generators in
lockstep, so a read asks the byte source once per round for every field and batch together, and the
source coalesces neighbouring ranges.

Legacy pages have no validity: what a null was written as is what is read (0, False, zero bytes, an
empty list); only strings and binaries of nullable fields read a zero-length value as null.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.file import utf8
from lance_table.file.legacy.container import PageTable
from lance_table.file.runs import EMPTY, Runs
from lance_table.schema import FieldNode

Ranges = list[tuple[int, int]]
Gen = Generator[Ranges, list[memoryview], pa.Array]
INT32_MAX = 2**31 - 1
T = TypeVar("T")


@dataclass(frozen=True)
class PageContext:
    """What page decoding needs besides the bytes: the file's name, the page table, where the
    pages must end, and how to get a dictionary field's values."""

    path: str
    table: PageTable
    limit: int  # pages lie in [0, limit)
    dictionary: Callable[[FieldNode], pa.Array]

    def page(self, node: FieldNode, batch: int) -> tuple[int, int]:
        if not self.table.has(node.id):
            raise CorruptFileError(self.path, f"field {node.name!r} (id {node.id}) has no page table row")
        return self.table.cell(node.id, batch)

    def corrupt(self, node: FieldNode, batch: int, problem: str) -> CorruptFileError:
        return CorruptFileError(self.path, f"field {node.name!r} (id {node.id}) batch {batch}: {problem}")


def value_width(t: pa.DataType) -> int | None:
    """Bytes per value of a PLAIN fixed-width type (not bool), or None."""
    if pa.types.is_fixed_size_list(t):
        inner = value_width(t.value_type)
        return None if inner is None else inner * t.list_size
    if pa.types.is_decimal(t):
        return t.byte_width
    if pa.types.is_fixed_size_binary(t):
        return t.byte_width
    if (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_temporal(t)
        or pa.types.is_duration(t)
    ):
        return t.bit_width // 8
    return None


def is_var_binary(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )  # fmt: skip


def gather(gens: Sequence[Gen]) -> Generator[Ranges, list[memoryview], list[pa.Array]]:
    """Run generators in lockstep: each round yields all their requests at once."""
    results: list[pa.Array | None] = [None] * len(gens)
    pending: dict[int, Ranges] = {}
    for i, g in enumerate(gens):
        try:
            pending[i] = next(g)
        except StopIteration as stop:
            results[i] = stop.value
    while pending:
        order = list(pending)
        flat = [r for i in order for r in pending[i]]
        got = yield flat
        at = 0
        for i in order:
            n = len(pending[i])
            try:
                pending[i] = gens[i].send(got[at : at + n])
            except StopIteration as stop:
                del pending[i]
                results[i] = stop.value
            at += n
    return cast(list[pa.Array], results)  # every generator has finished


def drive(gen: Generator[Ranges, list[memoryview], T], read: Callable[[Ranges], list[memoryview]]) -> T:
    """Run a generator to its end, answering its requests with ``read``."""
    try:
        request = next(gen)
        while True:
            request = gen.send(read(request) if request else [])
    except StopIteration as stop:
        return stop.value


def field_gen(ctx: PageContext, node: FieldNode, batch: int, runs: Runs, rows: int | None) -> Gen:
    """Decode the values of ``node`` at ``runs`` (positions inside the batch's page).

    ``rows`` is the batch's row count when the page holds one value per row, None below a list.
    """
    t = node.arrow_type
    if pa.types.is_struct(t):
        kids = yield from gather([field_gen(ctx, c, batch, runs, rows) for c in node.children])
        if not kids:
            return pa.StructArray.from_buffers(t, runs.total, [None], null_count=0)
        return pa.StructArray.from_arrays(kids, fields=list(t))
    if pa.types.is_null(t):
        return pa.nulls(runs.total)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return (yield from _list_gen(ctx, node, batch, runs, rows))
    if pa.types.is_dictionary(t):
        keys = yield from _fixed_gen(ctx, node, batch, runs, rows, t.index_type)
        values = ctx.dictionary(node)
        if len(keys):
            k = keys.to_numpy(zero_copy_only=False)
            if int(k.min()) < 0 or int(k.max()) >= len(values):
                raise ctx.corrupt(node, batch, f"dictionary key outside [0, {len(values)})")
        return pa.DictionaryArray.from_arrays(keys, values)
    if is_var_binary(t):
        return (yield from _var_binary_gen(ctx, node, batch, runs, rows))
    if pa.types.is_boolean(t):
        return (yield from _bool_gen(ctx, node, batch, runs, rows))
    if value_width(t) is not None:
        return (yield from _fixed_gen(ctx, node, batch, runs, rows, t))
    raise UnsupportedFormatError(
        f"field {node.name!r} of type {t} cannot be read from a legacy file", path=ctx.path
    )


def _check_page(
    ctx: PageContext, node: FieldNode, batch: int, page: tuple[int, int], runs: Runs, rows: int | None,
    extra: int, nbytes: int,
) -> None:  # fmt: skip
    """The page holds ``rows + extra`` values (or at least the ones needed) in ``nbytes`` bytes."""
    pos, length = page
    if rows is not None and length != rows + extra:
        raise ctx.corrupt(node, batch, f"page holds {length} values, expected {rows + extra}")
    if runs.end + extra > length:
        raise ctx.corrupt(
            node, batch, f"page holds {length} values, fewer than the {runs.end + extra} needed"
        )
    if pos + nbytes > ctx.limit:
        raise ctx.corrupt(node, batch, f"page [{pos}, {pos + nbytes}) runs past the data end {ctx.limit}")


def _run_ranges(pos: int, runs: Runs, width: int, extra: int = 0) -> Ranges:
    starts = pos + runs.starts * width
    return list(zip(starts.tolist(), ((runs.lengths + extra) * width).tolist()))


def _joined(got: list[memoryview]) -> bytes:
    return got[0].tobytes() if len(got) == 1 else b"".join(got)


def _fixed_gen(
    ctx: PageContext, node: FieldNode, batch: int, runs: Runs, rows: int | None, t: pa.DataType
) -> Gen:
    width = value_width(t)
    if width is None:
        raise UnsupportedFormatError(f"field {node.name!r}: {t} has no fixed width", path=ctx.path)
    if not runs.total:
        return pa.array([], t)
    page = ctx.page(node, batch)
    _check_page(ctx, node, batch, page, runs, rows, 0, page[1] * width)
    got = yield _run_ranges(page[0], runs, width)
    buf = pa.py_buffer(_joined(got))
    n = runs.total
    if pa.types.is_fixed_size_list(t):
        inner = t.value_type
        if value_width(inner) is None or pa.types.is_fixed_size_list(inner):
            raise UnsupportedFormatError(f"field {node.name!r}: {t} is not supported", path=ctx.path)
        child = pa.Array.from_buffers(inner, n * t.list_size, [None, buf])
        return pa.FixedSizeListArray.from_arrays(_checked(ctx, node, batch, child), type=t)
    return _checked(ctx, node, batch, pa.Array.from_buffers(t, n, [None, buf]))


def _checked(ctx: PageContext, node: FieldNode, batch: int, arr: pa.Array) -> pa.Array:
    """``arr``, once decimals are known to fit their precision (other fixed-width values always
    are what their bytes say)."""
    if pa.types.is_decimal(arr.type):
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise ctx.corrupt(node, batch, f"values do not fit {arr.type}: {exc}") from exc
    return arr


def _bool_gen(ctx: PageContext, node: FieldNode, batch: int, runs: Runs, rows: int | None) -> Gen:
    if not runs.total:
        return pa.array([], pa.bool_())
    pos, length = page = ctx.page(node, batch)
    _check_page(ctx, node, batch, page, runs, rows, 0, (length + 7) // 8)
    first = int(runs.starts[0]) // 8
    got = yield [(pos + first, (runs.end + 7) // 8 - first)]
    bits = np.unpackbits(np.frombuffer(got[0], np.uint8), bitorder="little")
    return pa.array(bits[runs.positions() - first * 8].astype(bool), pa.bool_())


def _monotonic_runs(
    ctx: PageContext, node: FieldNode, batch: int, parts: list[np.ndarray], lo: int, hi: int, what: str
) -> None:
    """Each part (one per run) is non-decreasing within [lo, hi], and the parts follow each other."""
    firsts = np.fromiter((p[0] for p in parts), np.int64, len(parts))
    lasts = np.fromiter((p[-1] for p in parts), np.int64, len(parts))
    bad = any(bool(np.any(np.diff(p) < 0)) for p in parts)
    if bad or np.any(firsts[1:] < lasts[:-1]) or int(firsts.min()) < lo or int(lasts.max()) > hi:
        raise ctx.corrupt(node, batch, f"{what} are not increasing within [{lo}, {hi}]")


def _var_binary_gen(ctx: PageContext, node: FieldNode, batch: int, runs: Runs, rows: int | None) -> Gen:
    t = node.arrow_type
    if not runs.total:
        return pa.array([], t)
    pos, length = page = ctx.page(node, batch)
    _check_page(ctx, node, batch, page, runs, rows, 0, (length + 1) * 8)
    got = yield _run_ranges(pos, runs, 8, extra=1)
    parts = [np.frombuffer(g, "<i8").astype(np.int64) for g in got]
    # The value bytes lie before the positions array.
    _monotonic_runs(ctx, node, batch, parts, 0, pos, "value positions")
    spans = [(int(p[0]), int(p[-1] - p[0])) for p in parts]
    data = yield [s for s in spans if s[1]]
    lengths = np.concatenate([np.diff(p) for p in parts])
    return binary_array(t, lengths, b"".join(data), node.field.nullable, ctx.path)


def fixed_pages(t: pa.DataType) -> bool:
    """Whether :func:`fixed_pages_gen` reads a field of type ``t``: plain fixed-width values (not
    decimals, whose values are checked page by page), or fixed-size lists of them."""
    if pa.types.is_fixed_size_list(t):
        inner = t.value_type
        return not pa.types.is_fixed_size_list(inner) and fixed_pages(inner)
    return value_width(t) is not None and not pa.types.is_decimal(t) and not pa.types.is_dictionary(t)


def fixed_pages_gen(
    ctx: PageContext, node: FieldNode, pieces: Sequence[tuple[int, Runs, int]]
) -> Generator[Ranges, list[memoryview], list[pa.Array]]:
    """The values of a top-level field that :func:`fixed_pages` reads, at the runs of many
    batches' pages (``pieces`` as :func:`var_binary_pages_gen`'s): what :func:`_fixed_gen` makes of
    each page, as one array."""
    t = node.arrow_type
    width = value_width(t)
    assert width is not None and fixed_pages(t)
    ranges: Ranges = []
    n = 0
    for batch, runs, rows in pieces:
        if not runs.total:
            continue
        page = ctx.page(node, batch)
        _check_page(ctx, node, batch, page, runs, rows, 0, page[1] * width)
        ranges.extend(_run_ranges(page[0], runs, width))
        n += runs.total
    if not ranges:
        return [pa.array([], t)]
    got = yield ranges
    buf = pa.py_buffer(_joined(got))
    if pa.types.is_fixed_size_list(t):
        child = pa.Array.from_buffers(t.value_type, n * t.list_size, [None, buf])
        return [pa.FixedSizeListArray.from_arrays(child, type=t)]
    return [pa.Array.from_buffers(t, n, [None, buf])]


#: the most value bytes of one array :func:`var_binary_pages_gen` makes (more make several)
PAGES_ARRAY_BYTES = 1 << 30


def var_binary_pages_gen(
    ctx: PageContext, node: FieldNode, pieces: Sequence[tuple[int, Runs, int]]
) -> Generator[Ranges, list[memoryview], list[pa.Array]]:
    """The values of a top-level string or binary field at the runs of many batches' pages
    (``pieces``: the batch, the runs inside its page, its rows): what :func:`_var_binary_gen`
    makes of each page, checked the same way, with the work of all the pages done at once (one
    array of the pages' values, or several of at most about :data:`PAGES_ARRAY_BYTES` each)."""
    t = node.arrow_type
    ranges: Ranges = []
    sizes, below, batches = [], [], []
    for batch, runs, rows in pieces:
        if not runs.total:
            continue
        pos, length = page = ctx.page(node, batch)
        _check_page(ctx, node, batch, page, runs, rows, 0, (length + 1) * 8)
        ranges.extend(_run_ranges(pos, runs, 8, extra=1))
        sizes.append(runs.lengths + 1)
        below.append(np.full(runs.count, pos, np.int64))
        batches.append(np.full(runs.count, batch, np.int64))
    if not ranges:
        return [pa.array([], t)]
    got = yield ranges
    positions = np.frombuffer(_joined(got), "<i8").astype(np.int64)
    size = np.concatenate(sizes).astype(np.int64)
    ends = np.cumsum(size)
    firsts, lasts = positions[ends - size], positions[ends - 1]
    step = np.diff(positions)
    inner = np.ones(step.size, bool)
    inner[ends[:-1] - 1] = False  # (from the last position of a run to the first of the next)
    hi, batch_of = np.concatenate(below), np.concatenate(batches)
    # each run non-decreasing within [0, its page's position]; a page's runs follow each other
    bad = (firsts < 0) | (lasts > hi)
    bad[np.searchsorted(ends, np.flatnonzero(inner & (step < 0)), "right")] = True
    bad[1:] |= (batch_of[1:] == batch_of[:-1]) & (firsts[1:] < lasts[:-1])
    if bad.any():
        k = int(np.argmax(bad))
        raise ctx.corrupt(node, int(batch_of[k]), f"value positions are not increasing within [0, {hi[k]}]")
    lengths = step[inner]
    nbytes = lasts - firsts
    present = np.flatnonzero(nbytes)
    data = yield list(zip(firsts[present].tolist(), nbytes[present].tolist()))
    # runs [a, b) per array: split where the bytes before a run pass another PAGES_ARRAY_BYTES
    group = (np.cumsum(nbytes) - nbytes) // PAGES_ARRAY_BYTES
    cuts = np.flatnonzero(np.diff(group)) + 1
    run_bounds = [0, *cuts.tolist(), int(size.size)]
    value_bounds = np.concatenate([[0], np.cumsum(size - 1)])
    out = []
    for a, b in itertools.pairwise(run_bounds):
        i, j = np.searchsorted(present, [a, b]).tolist()
        part = lengths[int(value_bounds[a]) : int(value_bounds[b])]
        out.append(binary_array(t, part, b"".join(data[i:j]), node.field.nullable, ctx.path))
    return out


def binary_array(t: pa.DataType, lengths: np.ndarray, data: bytes, nullable: bool, path: str) -> pa.Array:
    """A string/binary array from value lengths and concatenated bytes; with ``nullable``, a
    zero-length value is null (as pylance reads legacy files)."""
    n = len(lengths)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    if not large:
        if offsets[-1] > INT32_MAX:
            raise UnsupportedFormatError(f"{offsets[-1]} bytes of {t} do not fit 32-bit offsets", path=path)
        offsets = offsets.astype(np.int32)
    validity = None
    null_count = 0
    if nullable:
        valid = lengths != 0
        null_count = int(n - np.count_nonzero(valid))
        if null_count:
            validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    arr = pa.Array.from_buffers(
        t, n, [validity, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)], null_count
    )
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        problem = utf8.problem_of(arr)  # (all-ASCII values in one pass over their bytes)
        if problem is not None:
            raise CorruptFileError(path, f"string values are not valid UTF-8: {problem}")
    return arr


def _list_gen(ctx: PageContext, node: FieldNode, batch: int, runs: Runs, rows: int | None) -> Gen:
    t = node.arrow_type
    if not runs.total:
        return pa.array([], t)
    width = 8 if pa.types.is_large_list(t) else 4
    pos, length = page = ctx.page(node, batch)
    _check_page(ctx, node, batch, page, runs, rows, 1, length * width)
    got = yield _run_ranges(pos, runs, width, extra=1)
    parts = [np.frombuffer(g, f"<i{width}").astype(np.int64) for g in got]
    child = node.children[0]
    child_rows = ctx.page(child, batch)[1] if not pa.types.is_struct(child.arrow_type) else None
    hi = child_rows if child_rows is not None else INT32_MAX if width == 4 else 2**62
    _monotonic_runs(ctx, node, batch, parts, 0, hi, "list offsets")
    firsts = np.fromiter((p[0] for p in parts), np.int64, len(parts))
    lasts = np.fromiter((p[-1] for p in parts), np.int64, len(parts))
    child_runs = Runs.normalized(firsts, lasts - firsts) if len(parts) else EMPTY
    items = yield from field_gen(ctx, child, batch, child_runs, None)
    lengths = np.concatenate([np.diff(p) for p in parts])
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if len(items) != int(offsets[-1]):
        raise ctx.corrupt(node, batch, f"list items: read {len(items)}, offsets need {int(offsets[-1])}")
    cls = pa.LargeListArray if width == 8 else pa.ListArray
    off = pa.array(offsets, pa.int64() if width == 8 else pa.int32())
    return cls.from_arrays(off, items, type=t)


def dictionary_gen(
    ctx: PageContext, node: FieldNode, offset: int, length: int
) -> Generator[Ranges, list[memoryview], pa.Array]:
    """The values of a dictionary field: ``length`` values at ``offset`` (VAR_BINARY positions for
    strings and binaries, where an empty value reads as null; PLAIN for integers)."""
    t = node.arrow_type.value_type
    if offset < 0 or length < 0:
        raise ctx.corrupt(node, -1, f"dictionary ({offset}, {length}) is negative")
    if is_var_binary(t):
        if offset + (length + 1) * 8 > ctx.limit:
            raise ctx.corrupt(node, -1, f"dictionary of {length} values at {offset} runs past the data")
        got = yield [(offset, (length + 1) * 8)]
        pos = np.frombuffer(got[0], "<i8").astype(np.int64)
        _monotonic_runs(ctx, node, -1, [pos], 0, offset, "dictionary value positions")
        data = yield ([(int(pos[0]), int(pos[-1] - pos[0]))] if pos[-1] > pos[0] else [])
        return binary_array(t, np.diff(pos), b"".join(data), True, ctx.path)
    width = value_width(t)
    if width is None or not pa.types.is_integer(t):
        raise UnsupportedFormatError(f"dictionary values of type {t} are not supported", path=ctx.path)
    if offset + length * width > ctx.limit:
        raise ctx.corrupt(node, -1, f"dictionary of {length} values at {offset} runs past the data")
    if not length:
        return pa.array([], t)
    got = yield [(offset, length * width)]
    return pa.Array.from_buffers(t, length, [None, pa.py_buffer(got[0].tobytes())])
