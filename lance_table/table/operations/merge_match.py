"""Matching a merge_insert's source keys with the target's, fragment by fragment: only the key
columns of the target are read, a few hundred thousand rows at a time in parallel, and only the
matched rows' positions are kept (two integers per matched pair).

One integer key column with unique source values (the common id) is matched without hashing: the
source's keys are sorted once, and a run of target keys in ascending order (as ids are written)
looks up the source keys of its span among them, while any other run looks its keys up in the
sorted source keys (or in a lookup table over their span when they are dense). Other keys use
``pc.index_in`` (unique) or a hash join.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._parallel import map_grouped
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations.merge_source import SOURCE_INDEX, TARGET_POSITION, MergeSource
from lance_table.table.progress import SILENT, Reporter
from lance_table.table.scan import READ_CHUNK_ROWS, in_flight

# Integer keys use a lookup table when their span is at most this many times their number.
DENSE_SPAN_PER_KEY = 16


class _Matcher:
    """Finds the source rows of one key range matching target keys. Nulls never match.

    One integer key column with unique source values (the common id): the source's keys sorted
    once; a run of target keys in order (as ids are written) looks the source keys of its span up
    in it, any other run looks its keys up in them (or, for dense source values, in a lookup table
    over their span: at most :data:`DENSE_SPAN_PER_KEY` entries per key). One key column of another
    type with unique values: ``pc.index_in``; otherwise a hash join."""

    def __init__(self, on: tuple[str, ...], keys: pa.Table) -> None:
        self.on = on
        self.keys = keys
        self.values: pa.Array | None = None
        self.lookup: np.ndarray | None = None
        self.sorted: np.ndarray | None = None
        if len(on) != 1:
            return
        values = keys.column(on[0]).combine_chunks()
        index = keys.column(SOURCE_INDEX).combine_chunks()
        valid = len(values) - values.null_count
        if valid and pa.types.is_integer(values.type) and self._sort(values, index):
            self._dense()
            return
        if pc.count_distinct(values, mode="only_valid").as_py() == valid:
            self.values, self.index = values, index

    def _sort(self, values: pa.Array, index: pa.Array) -> bool:
        """Keep the valid values sorted, with their source rows, if they are unique."""
        if values.null_count:
            present = values.is_valid()
            values, index = values.filter(present), index.filter(present)
        ints, rows = values.to_numpy(), index.to_numpy()
        if not _ascending(ints):
            order = np.argsort(ints, kind="stable")
            ints, rows = ints[order], rows[order]
        if ints.size > 1 and bool(np.any(ints[1:] == ints[:-1])):
            return False  # repeated values: the join finds every pair
        self.sorted, self.sorted_rows = ints, rows
        return True

    def _dense(self) -> None:
        """Build the lookup table if the (sorted, unique) values span a small enough range."""
        ints = self.sorted
        assert ints is not None
        if ints.dtype == np.uint64 and int(ints[-1]) >= 2**62:
            return
        self.low, high = int(ints[0]), int(ints[-1])
        span = high - self.low + 1
        if span > DENSE_SPAN_PER_KEY * ints.size + 4096 or self.low <= -(2**62) or high >= 2**62:
            return
        lookup = np.full(span, -1, np.int64)
        lookup[ints.astype(np.int64) - self.low] = self.sorted_rows
        self.lookup = lookup

    def _in_order(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in ``keys``, source rows) of the matches of keys in ascending order: each
        source key within their span is looked up among them (all of a repeated target key)."""
        s, rows = self.sorted, self.sorted_rows
        assert s is not None
        if not keys.size:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        a = int(np.searchsorted(s, keys[0], "left"))
        b = int(np.searchsorted(s, keys[-1], "right"))
        sub, sub_rows = s[a:b], rows[a:b]
        left = np.searchsorted(keys, sub, "left")
        count = np.searchsorted(keys, sub, "right") - left
        if not count.size or int(count.max()) <= 1:
            hit = count == 1
            return left[hit], sub_rows[hit]
        total = int(count.sum())
        starts = np.repeat(left, count)
        firsts = np.repeat(np.cumsum(count) - count, count)
        pos = starts + (np.arange(total) - firsts)
        order = np.argsort(pos, kind="stable")
        return pos[order], np.repeat(sub_rows, count)[order]

    def _lookup(self, keys: np.ndarray, valid: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(positions in ``keys``, source rows) of the matches of keys in any order."""
        if self.lookup is not None:
            offsets = keys.astype(np.int64) - self.low
            inside = (offsets >= 0) & (offsets < self.lookup.size)
            if valid is not None:
                inside &= valid
            found = np.full(offsets.size, -1, np.int64)
            found[inside] = self.lookup[offsets[inside]]
            pos = np.flatnonzero(found >= 0)
            return pos, found[pos]
        s = self.sorted
        assert s is not None
        at = np.searchsorted(s, keys)
        np.minimum(at, s.size - 1, out=at)
        hit = s[at] == keys
        if valid is not None:
            hit &= valid
        pos = np.flatnonzero(hit)
        return pos, self.sorted_rows[at[pos]]

    def __call__(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """The matches of ``table``'s rows (its key columns): the rows' ordinals in ``table``, in
        ascending order, and the source rows (:data:`SOURCE_INDEX`) they match."""
        if self.sorted is not None:
            col = table.column(self.on[0]).combine_chunks()
            if not col.null_count:
                keys = col.to_numpy()
                return self._in_order(keys) if _ascending(keys) else self._lookup(keys, None)
            keys = pc.fill_null(col, 0).to_numpy()
            return self._lookup(keys, col.is_valid().to_numpy(zero_copy_only=False))
        if self.values is not None:
            found = pc.index_in(table.column(self.on[0]), value_set=self.values, skip_nulls=True)
            hit = pc.is_valid(found)
            ordinals = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
            return ordinals, self.index.take(found.filter(hit)).to_numpy()
        numbered = table.append_column(TARGET_POSITION, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        joined = numbered.join(self.keys, list(self.on), join_type="inner", use_threads=False)
        ordinals, src = (joined.column(c).to_numpy() for c in (TARGET_POSITION, SOURCE_INDEX))
        order = np.lexsort((src, ordinals))
        return ordinals[order], src[order]


def _ascending(values: np.ndarray) -> bool:
    """Whether ``values`` are in ascending order (ties allowed); an empty array is."""
    return values.size < 2 or bool(np.all(values[1:] >= values[:-1]))


def _pieces(frags: list[FragmentReader]) -> list[list[tuple[int, int, int]]]:
    """Consecutive (fragment, first row, end row) pieces in groups of about READ_CHUNK_ROWS rows:
    one match per group, so that tiny fragments do not each pay for one."""
    groups: list[list[tuple[int, int, int]]] = [[]]
    rows = 0
    for k, frag in enumerate(frags):
        for lo in range(0, frag.physical_rows, READ_CHUNK_ROWS):
            hi = min(lo + READ_CHUNK_ROWS, frag.physical_rows)
            if rows and rows + hi - lo > READ_CHUNK_ROWS:
                groups.append([])
                rows = 0
            groups[-1].append((k, lo, hi))
            rows += hi - lo
    return [g for g in groups if g]


def _match_group(
    frags: list[FragmentReader],
    on: tuple[str, ...],
    group: list[tuple[int, int, int]],
    *,
    match: _Matcher,
    report: Reporter = SILENT,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The matches of the rows of ``group``'s pieces: fragment index, position, source index
    (only the key columns are read, and only the matched rows' positions are computed)."""
    parts, pieces = [], []
    for k, lo, hi in group:
        frag = frags[k]
        runs = frag.live_runs(lo, hi)
        if not runs.total:
            continue
        parts.append(frag.read(list(on), runs))
        pieces.append((k, runs))
    report.advance(sum(hi - lo for _, lo, hi in group))
    if not parts:
        return None
    ordinals, src = match(parts[0] if len(parts) == 1 else pa.concat_tables(parts))
    if not ordinals.size:
        return None
    ends = np.cumsum([runs.total for _, runs in pieces])
    bounds = np.searchsorted(ordinals, ends[:-1]).tolist()
    which, pos = [], []
    for (k, runs), part, first in zip(pieces, np.split(ordinals, bounds), [0, *ends[:-1].tolist()]):
        if part.size:
            pos.append(runs.select(part - first))
            which.append(np.full(part.size, k, np.int64))
    return np.concatenate(which), np.concatenate(pos), src.astype(np.int64, copy=False)


def find_matches(
    frags: list[FragmentReader], source: MergeSource, on: tuple[str, ...], limit: int, report: Reporter
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per fragment: (target positions, source indices) of every matched pair, sorted by position.
    ``report`` counts the target rows read (a spilled source may need several passes over them)."""
    groups = _pieces(frags)
    wait = in_flight(frags)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    scanned = sum(f.physical_rows for f in frags)
    report.phase("match", rows_total=None if source.spilled else scanned)
    for keys in source.key_ranges(on, limit):
        match = _Matcher(on, keys)
        parts = map_grouped(
            functools.partial(_match_group, frags, on, match=match, report=report),
            groups,
            [sum(hi - lo for _, lo, hi in g) for g in groups],
            in_flight=wait,
        )
        found.extend(p for p in parts if p is not None)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if not found:
        return [empty for _ in frags]
    which, pos, src = (np.concatenate(c) for c in zip(*found))
    order = np.lexsort((pos, which))
    which, pos, src = which[order], pos[order], src[order]
    bounds = np.searchsorted(which, np.arange(len(frags) + 1))
    return [(pos[a:b], src[a:b]) for a, b in itertools.pairwise(bounds.tolist())]


__all__ = ["DENSE_SPAN_PER_KEY", "find_matches"]
