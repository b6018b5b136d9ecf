"""Repetition and definition levels of Lance 2.1/2.2 columns, computed from Arrow arrays.

The writer's counterpart of :mod:`repdef`. A column holds one leaf; the path from the top-level field
down to it is walked with numpy, one depth at a time, producing one *entry* per level slot:

* ``rep``: non-zero where a list starts; the number is the outermost list (counted from the
  inside, so a new row gets the highest) that starts at the entry.
* ``codes``: where the entry stops being defined: 0 when it is defined down to the leaf, else
  ``1 + 2 * depth`` for a null at ``depth`` (0 = the top-level field) or ``2 + 2 * depth`` for an
  empty list there. Codes become definition levels only once a page knows which layers hold nulls
  or empty lists (:func:`layer_kinds`, :func:`def_levels`), so pieces of one page can be joined.
* ``visible``: whether the entry owns a value slot (null and empty lists do not).

No per-value Python loop: each depth costs a few vectorized passes over the entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_table.file.arrow_take import filter_rows, take
from lance_table.file.v2_1 import repdef
from lance_table.file.v2_1.batch import spans
from lance_table.schema import FieldNode


def is_list_node(node: FieldNode) -> bool:
    """Whether a field owns a repetition layer (lists, large lists and maps)."""
    return repdef.is_list_like(node.arrow_type)


@dataclass
class Shredded:
    """Levels and visible values of some rows of one leaf column."""

    rows: int
    rep: np.ndarray | None  # uint16 per entry; None when the path has no list
    codes: np.ndarray  # uint8 per entry (see the module docstring)
    visible: np.ndarray | None  # bool per entry; None: every entry is visible
    values: pa.Array  # one per visible entry (those with a non-zero code are nulls)
    nulls: np.ndarray  # bool per depth: some defined entry is null there
    empties: np.ndarray  # bool per depth: some defined entry is an empty list there

    @property
    def entries(self) -> int:
        return int(self.codes.size)

    def nbytes(self) -> int:
        """Approximate memory held (the page budget counts this; a dictionary array counts its
        indices only, as every page stores the whole dictionary anyway). Without lists, as
        pylance counts the arrays it buffers: their values and validity, so a column's pages
        (and the bytes a writer has written) fill at the same rows as pylance's. Computed once: a
        writer asks when the piece comes in and again when it becomes a page."""
        known = self.__dict__.get("_nbytes")
        if known is not None and known[0] is self.values:
            return int(known[1])
        levels = self.codes.size * 3 if self.rep is not None else 0
        values = self.values.indices if pa.types.is_dictionary(self.values.type) else self.values
        size = int(values.nbytes) + levels
        self.__dict__["_nbytes"] = (self.values, size)
        return size

    def nbytes_bound(self) -> int:
        """At least :meth:`nbytes`, found without walking the values: their buffers' whole sizes
        (a slice counts its whole buffers). Fixed-size lists of primitives: the sizes of every
        buffer they list, counted at every place it appears (a buffer their levels share counts
        twice, as ``nbytes`` counts it). Exact for other nested values (packed structs)."""
        known = self.__dict__.get("_nbytes")
        if known is not None and known[0] is self.values:
            return int(known[1])
        values = self.values.indices if pa.types.is_dictionary(self.values.type) else self.values
        levels = self.codes.size * 3 if self.rep is not None else 0
        if _fixed_size_lists(values.type):  # (vectors) every buffer of every level, once each
            return sum(b.size for b in values.buffers() if b is not None) + levels
        if values.type.num_fields:
            return self.nbytes()
        return int(values.get_total_buffer_size()) + levels

    def row_starts(self, max_rep: int) -> np.ndarray:
        """The entry where each row starts."""
        if self.rep is None:
            return np.arange(self.entries, dtype=np.int64)
        return np.flatnonzero(self.rep == max_rep)


def _fixed_size_lists(t: pa.DataType) -> bool:
    """Whether ``t`` is fixed-size lists (nested or not) of fixed-width primitive values: arrays
    whose ``nbytes`` (a slow walk in pyarrow, 20 us for 100 vectors) is at most the sizes of the
    buffers they list, each counted at every place it appears."""
    if not pa.types.is_fixed_size_list(t):
        return False
    while pa.types.is_fixed_size_list(t):
        t = t.value_type
    return pa.types.is_primitive(t)


# Entry positions below this count are kept in 32 bits.
_NARROW_LIMIT = 1 << 31


def _validity(arr: pa.Array) -> np.ndarray | None:
    """Which rows of ``arr`` are valid (None when all are); its bitmap unpacked in one call."""
    if not arr.null_count:
        return None
    bitmap = arr.buffers()[0]
    if bitmap is None:  # nulls without a bitmap (null-type arrays and unions)
        return np.asarray(arr.is_valid(), dtype=bool)
    n, at = len(arr), arr.offset
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8, (at + n + 7) // 8), bitorder="little")
    return bits[at : at + n].view(bool)


def _list_offsets(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.offsets, dtype=np.int64)


def normalize_dictionary(arr: pa.Array) -> pa.Array:
    """A dictionary array whose nulls are all in its indices: null items are dropped from the
    dictionary and the rows that pointed at them become null (what pylance stores)."""
    items = arr.dictionary
    if not items.null_count:
        return arr
    keep = np.asarray(items.is_valid(), dtype=bool)
    new_pos = np.cumsum(keep) - 1
    idx = np.asarray(arr.indices.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    valid = np.asarray(arr.indices.is_valid(), dtype=bool) & keep[idx]
    indices = pa.array(np.where(valid, new_pos[idx], 0), arr.type.index_type, mask=~valid)
    return pa.DictionaryArray.from_arrays(indices, items.filter(pa.array(keep)))


def shred(arr: pa.Array, path: Sequence[FieldNode]) -> Shredded:
    """Levels and visible values of the leaf at the end of ``path`` for the rows of ``arr``.

    ``arr`` is an array of the top-level field ``path[0]``; each following node is a child of the
    one before (a map's child is its entries struct).
    """
    depth = len(path)
    n = len(arr)
    if depth == 1 and not pa.types.is_dictionary(arr.type):
        return _shred_top_leaf(arr)
    t = arr.type
    one_list = depth == 2 and (pa.types.is_list(t) or pa.types.is_large_list(t))
    if one_list and not pa.types.is_dictionary(t.value_type):
        listed = _shred_list_leaf(arr)
        if listed is not None:
            return listed
    list_depths = [i for i in range(depth - 1) if is_list_node(path[i])]
    max_rep = len(list_depths)
    rep = np.full(n, max_rep, np.uint16) if max_rep else None
    codes = np.zeros(n, np.uint8)
    # each entry's position among the items of ``cur``: worked out only when something reads it
    # (a single list over a leaf without nulls needs none)
    pos: np.ndarray | None = None
    pos_from: tuple[np.ndarray, np.ndarray, np.ndarray, int, type] | None = None

    def positions() -> np.ndarray:
        nonlocal pos
        if pos is None:
            pos = np.arange(n, dtype=np.int64) if pos_from is None else _positions(*pos_from)
        return pos

    nulls = np.zeros(depth, bool)
    empties = np.zeros(depth, bool)
    cur = arr
    lists_seen = 0
    # the only list, with no list above it (its entries are the rows): its offsets and which rows
    # it expands (the items of the other rows are hidden)
    top_list: tuple[np.ndarray, np.ndarray] | None = None
    for i, node in enumerate(path):
        if i == depth - 1 and pa.types.is_dictionary(cur.type):
            cur = normalize_dictionary(cur)
        valid = _validity(cur)
        if valid is not None:
            if not lists_seen:  # entries are still the rows: no positions to look through
                bad = np.flatnonzero(~valid & (codes == 0))
            else:
                live = np.flatnonzero(codes == 0)
                bad = np.compress(~valid[positions()[live]], live)  # compress: boolean indexing is slow
            if bad.size:
                codes[bad] = 1 + 2 * i
                nulls[i] = True
        if i == depth - 1:
            break
        if is_list_node(node):
            offsets = _list_offsets(cur)
            if not lists_seen:  # the entries are the rows: no positions to look through
                live_rows = codes == 0
                lengths = np.where(live_rows, np.diff(offsets), 0)
                empty = np.flatnonzero(live_rows & (lengths == 0))
            else:
                live = np.flatnonzero(codes == 0)
                lengths = np.zeros(codes.size, np.int64)
                at = positions()[live]
                lengths[live] = offsets[at + 1] - offsets[at]
                empty = np.compress(lengths[live] == 0, live)
            if empty.size:
                codes[empty] = 2 + 2 * i
                empties[i] = True
            # every entry becomes its items, or one entry if it is null or empty
            expand = lengths > 0
            counts = np.where(expand, lengths, 1)
            firsts = np.zeros(codes.size + 1, np.int64)
            np.cumsum(counts, out=firsts[1:])
            heads = firsts[:-1]
            if not lists_seen:
                start_at = np.where(expand, offsets[:-1], 0)
                if max_rep == 1:
                    top_list = (offsets, expand)
            else:
                start_at = np.where(expand, offsets[np.minimum(positions(), offsets.size - 1)], 0)
            entries = int(firsts[-1])
            wide = max(entries, len(cur.values), int(offsets[-1]) if offsets.size else 0) >= _NARROW_LIMIT
            pos, pos_from = None, (start_at, counts, heads, entries, np.int64 if wide else np.int32)
            assert rep is not None
            inner = np.full(entries, max_rep - lists_seen - 1, np.uint16)
            inner[heads] = rep
            rep = inner
            marked = np.flatnonzero(codes != 0)
            entry_codes = np.zeros(entries, np.uint8)
            entry_codes[heads[marked]] = codes[marked]
            codes = entry_codes
            cur = cur.values
            lists_seen += 1
        else:  # a struct: the child keeps the struct's positions
            child = path[i + 1]
            index = next(k for k, c in enumerate(node.children) if c is child)
            cur = cur.field(index)
    # pylance's reader wants every layer below a null struct to allow nulls (it reads the struct's
    # nulls as nulls of the lists under it), so a null struct makes the layers beneath nullable.
    struct_nulls = [i for i in np.flatnonzero(nulls).tolist() if i not in list_depths and i < depth - 1]
    if struct_nulls:
        nulls[min(struct_nulls) + 1 :] = True
    visible = None
    if list_depths:
        # entries ended deeper than the innermost list (code 1 + 2 * depth or more) hold a slot
        visible = (codes == 0) | (codes >= 3 + 2 * list_depths[-1])
    if top_list is not None:
        # the slots are the items of the rows the list expands, in order: cut, not gathered
        offsets, expand = top_list
        lo, hi = int(offsets[0]), int(offsets[-1])
        values = cur.slice(lo, hi - lo)
        lengths = np.diff(offsets)
        hidden = np.flatnonzero(~expand & (lengths > 0))  # the items of null rows
        if hidden.size:
            keep = np.ones(hi - lo, bool)
            keep[spans(offsets[hidden] - lo, lengths[hidden])] = False
            values = filter_rows(values, pa.array(keep))
        return Shredded(
            n, rep, codes, None if visible is None or visible.all() else visible, values, nulls, empties
        )
    if pos_from is None and visible is None:  # no list: the entries are the leaf's values
        return Shredded(n, rep, codes, None, cur, nulls, empties)
    chosen = np.compress(visible, positions()) if visible is not None else positions()
    if chosen.size == len(cur) and (not chosen.size or _is_identity(chosen)):
        values = cur
    else:
        values = take(cur, pa.array(chosen))
    return Shredded(
        n, rep, codes, None if visible is None or visible.all() else visible, values, nulls, empties
    )


def _shred_top_leaf(arr: pa.Array) -> Shredded:
    """:func:`shred` of a top-level leaf (not a dictionary): the same levels, without the walk
    down a path (a fixed cost every column of a small append pays)."""
    n = len(arr)
    codes = np.zeros(n, np.uint8)
    nulls = np.zeros(1, bool)
    valid = _validity(arr)
    if valid is not None:
        bad = np.flatnonzero(~valid)
        if bad.size:
            codes[bad] = 1
            nulls[0] = True
    return Shredded(n, None, codes, None, arr, nulls, np.zeros(1, bool))


def _shred_list_leaf(arr: pa.Array) -> Shredded | None:
    """:func:`shred` of a top-level list of a leaf (not a dictionary) whose null rows hold no
    items (a list column as a small append brings it): the same levels and values in fewer
    passes, without the walk down a path; None for lists whose null rows hold items (their
    items are hidden: the walk filters them out)."""
    n = len(arr)
    if not n:
        return None
    offsets = _list_offsets(arr)
    lengths = np.diff(offsets)
    valid = _validity(arr)
    expand = lengths > 0
    if valid is not None:
        if bool(np.any(expand & ~valid)):
            return None
        expand &= valid
    counts = np.where(expand, lengths, 1)
    firsts = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=firsts[1:])
    heads = firsts[:-1]
    entries = int(firsts[-1])
    rep = np.zeros(entries, np.uint16)
    rep[heads] = 1
    codes = np.zeros(entries, np.uint8)
    nulls = np.zeros(2, bool)
    empties = np.zeros(2, bool)
    closed = np.flatnonzero(~expand)  # null rows and empty lists: one entry each, no slot
    if closed.size:
        empty = lengths[closed] == 0 if valid is None else valid[closed]
        codes[heads[closed]] = np.where(empty, 2, 1)
        nulls[0] = not bool(empty.all())
        empties[0] = bool(empty.any())
    lo, hi = int(offsets[0]), int(offsets[-1])
    values = arr.values.slice(lo, hi - lo)
    item_valid = _validity(values)
    if item_valid is not None:  # the items are the entries with code 0, in order
        live = np.flatnonzero(codes == 0)
        bad = live[~item_valid]
        if bad.size:
            codes[bad] = 3
            nulls[1] = True
    visible = (codes == 0) | (codes >= 3) if closed.size else None
    return Shredded(n, rep, codes, visible, values, nulls, empties)


def _positions(
    start_at: np.ndarray, counts: np.ndarray, heads: np.ndarray, entries: int, kind: type
) -> np.ndarray:
    """The item position of each of ``entries`` entries: entry ``heads[k]`` is at ``start_at[k]``
    and the ``counts[k]`` entries from it run on by one (a running sum of steps of one that jumps
    at each head; in 32 bits when the positions fit, a running sum of half the bytes)."""
    step: np.ndarray = np.ones(entries, kind)
    if heads.size:
        jump = start_at.copy()
        jump[1:] -= start_at[:-1] + counts[:-1] - 1
        step[heads] = jump
    return np.cumsum(step, dtype=kind)


def _is_identity(positions: np.ndarray) -> bool:
    """Whether ``positions`` is ``0, 1, 2, ...`` (checked without building that range)."""
    return int(positions[0]) == 0 and bool(np.all(np.diff(positions) == 1))


def join(pieces: Sequence[Shredded]) -> Shredded:
    """The rows of several pieces of one column, one after the other."""
    if len(pieces) == 1:
        return pieces[0]
    first = pieces[0]
    rep = None if first.rep is None else np.concatenate([p.rep for p in pieces if p.rep is not None])
    visible = None
    if any(p.visible is not None for p in pieces):
        visible = np.concatenate(
            [np.ones(p.entries, bool) if p.visible is None else p.visible for p in pieces]
        )
    values = pa.concat_arrays([p.values for p in pieces])
    return Shredded(
        sum(p.rows for p in pieces),
        rep,
        np.concatenate([p.codes for p in pieces]),
        visible,
        values,
        np.logical_or.reduce([p.nulls for p in pieces]),
        np.logical_or.reduce([p.empties for p in pieces]),
    )


def layer_kinds(path: Sequence[FieldNode], nulls: np.ndarray, empties: np.ndarray) -> list[int]:
    """The ``RepDefLayer`` of each depth, innermost first.

    A leaf without nesting gets its layer from the page's data, as pylance writes. Below structs
    and lists the layers come from the schema, the same for every page of the column: pylance's
    reader fails on a nested column whose pages disagree on them (a struct nullable in one page
    and not in the next). A field that may be null, or lies below a struct that may be, is
    nullable; every list may be empty.
    """
    key = (tuple(map(id, path)), nulls.tobytes(), empties.tobytes())
    hit = _KINDS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], path)):
        return hit[1]
    kinds = _layer_kinds(path, nulls, empties)
    if len(_KINDS) >= _KINDS_KEPT:
        _KINDS.clear()
    _KINDS[key] = (tuple(path), kinds)  # (the nodes are kept: their ids stay theirs)
    return kinds


#: :func:`layer_kinds` by the ids of the path's nodes (immutable: a schema's tree is built once) and
#: the page's nulls and empties: every page of a stream of small appends asks the same
_KINDS: dict[tuple[tuple[int, ...], bytes, bytes], tuple[tuple[FieldNode, ...], list[int]]] = {}
_KINDS_KEPT = 1024


def _layer_kinds(path: Sequence[FieldNode], nulls: np.ndarray, empties: np.ndarray) -> list[int]:
    if len(path) > 1:
        nulls = nulls.copy()
        empties = empties.copy()
        inherited = False
        for i, node in enumerate(path):
            nulls[i] |= node.field.nullable or inherited
            if i < len(path) - 1 and is_list_node(node):
                empties[i] = True
            elif nulls[i]:
                inherited = True
    kinds = []
    for i in range(len(path) - 1, -1, -1):
        if i < len(path) - 1 and is_list_node(path[i]):
            kind = {
                (False, False): repdef.ALL_VALID_LIST,
                (True, False): repdef.NULLABLE_LIST,
                (False, True): repdef.EMPTYABLE_LIST,
                (True, True): repdef.NULL_AND_EMPTY_LIST,
            }[(bool(nulls[i]), bool(empties[i]))]
        else:
            kind = repdef.NULLABLE_ITEM if nulls[i] else repdef.ALL_VALID_ITEM
        kinds.append(kind)
    return kinds


def def_levels(codes: np.ndarray, kinds: Sequence[int]) -> np.ndarray | None:
    """Definition levels of entries with these ``codes`` under the layers ``kinds`` (innermost
    first); None when no layer can be null or empty."""
    key = tuple(kinds)
    lut = _LUTS.get(key)
    if lut is None:
        if len(_LUTS) >= _KINDS_KEPT:
            _LUTS.clear()
        lut = _LUTS[key] = _def_lut(kinds)
    if lut is _NO_LEVELS:
        return None
    if not codes.any():  # every entry defined down to the leaf (level 0): no gather to do
        return np.zeros(codes.size, lut.dtype)
    return np.take(lut, codes)


_NO_LEVELS = np.zeros(0, np.uint16)
#: the level of each code under some layers (:func:`_def_lut`), by the layers: few ever occur
_LUTS: dict[tuple[int, ...], np.ndarray] = {}


def _def_lut(kinds: Sequence[int]) -> np.ndarray:
    """The definition level of each entry code under the layers ``kinds`` (innermost first), or
    :data:`_NO_LEVELS` when no layer can be null or empty."""
    depth = len(kinds)
    lut = np.zeros(2 * depth + 1, np.uint16)
    base = 0
    for k, kind in enumerate(kinds):
        i = depth - 1 - k  # depth from the top
        if kind in (repdef.NULLABLE_ITEM, repdef.NULLABLE_LIST, repdef.NULL_AND_EMPTY_LIST):
            lut[1 + 2 * i] = base + 1
        if kind == repdef.EMPTYABLE_LIST:
            lut[2 + 2 * i] = base + 1
        if kind == repdef.NULL_AND_EMPTY_LIST:
            lut[2 + 2 * i] = base + 2
        base += {repdef.NULL_AND_EMPTY_LIST: 2, repdef.ALL_VALID_ITEM: 0, repdef.ALL_VALID_LIST: 0}.get(
            kind, 1
        )
    if not base:
        return _NO_LEVELS
    lut.flags.writeable = False  # (shared)
    return lut
