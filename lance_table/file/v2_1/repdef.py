"""Repetition and definition levels of Lance 2.1/2.2 columns, turned back into Arrow structure.

A 2.1/2.2 column holds one leaf field. Every struct and list on the path from the top-level field
down to the leaf is a *layer*; the page lists them innermost first (``layers``). Each level entry
has a repetition level (non-zero where a list starts; the number says how many layers of lists,
counted from the inside, start there) and a definition level (0 when everything is valid, else
the number of the innermost layer that is null or empty, where a layer owns 0, 1 or 2 numbers:
null, then empty). Null and empty lists have no item below them: they are *invisible* entries
that carry levels but no value.

:func:`unravel` peels the layers from the inside out, all in numpy, and returns per layer the
validity and, for lists, the offsets. :func:`assemble` builds the Arrow array of the leaf's path
from them, and :func:`merge` joins the paths of several leaves of one field into that field.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty

ALL_VALID_ITEM = 1
ALL_VALID_LIST = 2
NULLABLE_ITEM = 3
NULLABLE_LIST = 4
EMPTYABLE_LIST = 5
NULL_AND_EMPTY_LIST = 6

_DEF_NUMBERS = {
    ALL_VALID_ITEM: 0,
    ALL_VALID_LIST: 0,
    NULLABLE_ITEM: 1,
    NULLABLE_LIST: 1,
    EMPTYABLE_LIST: 1,
    NULL_AND_EMPTY_LIST: 2,
}
LISTS = frozenset({ALL_VALID_LIST, NULLABLE_LIST, EMPTYABLE_LIST, NULL_AND_EMPTY_LIST})


class LevelError(ValueError):
    """Levels that contradict their layers (the caller turns this into a CorruptFileError)."""


@dataclass
class Layer:
    """One decoded layer: ``length`` entries, their validity (None: all valid) and list offsets."""

    length: int
    validity: np.ndarray | None
    offsets: np.ndarray | None = None


def check_layers(layers: Sequence[int]) -> None:
    """Raise :class:`LevelError` for an unknown layer kind."""
    for kind in layers:
        if kind not in _DEF_NUMBERS:
            raise LevelError(f"unknown rep/def layer kind {kind}")


def visible_limit(layers: Sequence[int]) -> int:
    """Definition levels up to this one belong to visible items (they have a value)."""
    total = 0
    for kind in layers:
        if kind in LISTS:
            return total
        total += _DEF_NUMBERS[kind]
    return total


def max_def(layers: Sequence[int]) -> int:
    """The largest definition level the layers allow."""
    return sum(_DEF_NUMBERS[kind] for kind in layers)


def max_rep(layers: Sequence[int]) -> int:
    """The repetition level that starts a new row."""
    return sum(1 for kind in layers if kind in LISTS)


def _rep_of_level(layers: Sequence[int]) -> np.ndarray:
    """For each definition level, how many lists must be peeled before that level is visible."""
    out = [0]
    lists = 0
    for kind in layers:
        if kind in LISTS:
            lists += 1
        out.extend([lists] * _DEF_NUMBERS[kind])
    return np.array(out, np.int64)


def unravel(
    rep: np.ndarray | None, defs: np.ndarray | None, layers: Sequence[int], num_items: int
) -> list[Layer]:
    """Validity and offsets of every layer, outermost first.

    Args:
        rep: repetition levels (None when no layer is a list).
        defs: definition levels (None when nothing is null or empty).
        layers: the page's layer kinds, innermost first.
        num_items: the number of visible items (values) when there are no levels at all.
    """
    check_layers(layers)
    if not layers:
        raise LevelError("a page without rep/def layers")
    n = len(rep) if rep is not None else len(defs) if defs is not None else num_items
    if rep is not None and defs is not None and len(rep) != len(defs):
        raise LevelError(f"{len(rep)} repetition levels but {len(defs)} definition levels")
    rep_of = _rep_of_level(layers)
    if defs is not None and defs.size and int(defs.max()) >= rep_of.size:
        raise LevelError(f"definition level {int(defs.max())} is past the {rep_of.size - 1} levels")
    # levels stay narrow (uint16): every pass below is a scan of them
    r = rep.astype(np.uint16, copy=False) if rep is not None else None
    d = defs.astype(np.uint16, copy=False) if defs is not None else None
    out: list[Layer] = []
    def_base = 0  # definition levels owned by the layers peeled so far
    peeled = 0  # lists peeled so far
    for i, kind in enumerate(layers):
        if kind not in LISTS:
            # rep_of never decreases, so the levels visible here are those up to a bound
            bound = int(np.flatnonzero(rep_of <= peeled)[-1])
            # all visible when the bound is the top level (the levels were checked to lie below
            # it), which copies nothing; else compress, not d[mask] (slower)
            visible = d
            length = n
            if d is not None and bound < rep_of.size - 1:
                length = int(np.count_nonzero(d <= bound))
                # without nulls here only the count of the visible levels is needed
                nulls = kind == NULLABLE_ITEM and length != int(np.count_nonzero(d <= def_base))
                visible = np.compress(d <= bound, d) if nulls else None
            validity = None
            if kind == NULLABLE_ITEM:
                if visible is not None:
                    validity = visible <= def_base
                def_base += 1
            out.append(Layer(length, validity))
            continue
        if r is None:
            raise LevelError("a list layer without repetition levels")
        layer, r, d, n = _peel_list(r, d, kind, def_base, layers[i + 1 :])
        def_base += _DEF_NUMBERS[kind]
        peeled += 1
        out.append(layer)
    out.reverse()
    return out


def _peel_list(
    r: np.ndarray, d: np.ndarray | None, kind: int, def_base: int, above: Sequence[int]
) -> tuple[Layer, np.ndarray | None, np.ndarray | None, int]:
    """Offsets and validity of one list layer; the levels of the layer above it (no repetition
    levels when no list is above)."""
    null_level, empty_level = {
        ALL_VALID_LIST: (0, 0),
        NULLABLE_LIST: (def_base + 1, 0),
        EMPTYABLE_LIST: (0, def_base + 1),
        NULL_AND_EMPTY_LIST: (def_base + 1, def_base + 2),
    }[kind]
    # levels up to def_base belong to the items (a null first item still starts a row)
    upper_null = max(null_level, empty_level, def_base)
    # struct layers right above this list: their nulls show up here as null lists
    masked_to = upper_null
    for kind_above in above:
        if kind_above in LISTS:
            break
        masked_to += _DEF_NUMBERS[kind_above]
    start_at = np.flatnonzero(r != 0)  # on booleans: several times faster than on integers
    if d is None:
        where = start_at
        total = r.size
        validity = None
        up_d = None
    else:
        # everything below is worked out per row start, not per level
        up_d = np.take(d, start_at)
        keep = up_d <= masked_to
        # row starts that hold no item (null or empty lists, nulls above them)
        hidden = up_d > def_base
        n_hidden = int(np.count_nonzero(hidden))
        total = r.size - n_hidden
        all_kept = bool(keep.all())
        where = start_at if all_kept else start_at[keep]
        ds = up_d if all_kept else up_d[keep]
        null = ds > upper_null
        if null_level:
            null |= ds == null_level
        validity = ~null if null.any() else None
    # 32-bit offsets for the levels of fewer than 2^31 entries (what a list array takes as is)
    # (from Arrow's pool, as the list array's offsets: no fresh pages to fault in)
    offsets = empty(where.size + 1, np.int32 if r.size < 1 << 31 else np.int64)
    if d is None or not n_hidden:
        offsets[:-1] = where
    else:
        # an entry's offset is its position less the hidden entries before it
        before = _count_before(hidden)
        np.subtract(where, before if all_kept else before[keep], out=offsets[:-1], casting="unsafe")
    offsets[-1] = total
    layer = Layer(where.size, validity, offsets)
    if not any(kind_above in LISTS for kind_above in above):
        return layer, None, up_d, int(start_at.size)
    up_r = np.take(r, start_at)
    up_r -= 1
    return layer, up_r, up_d, int(start_at.size)


def _count_before(mask: np.ndarray) -> np.ndarray:
    """Per entry of a boolean mask: how many entries before it are set, as runs of equal counts
    between the set entries (several times faster than numpy's running sum of booleans)."""
    dtype = np.int32 if mask.size < 1 << 31 else np.int64
    at = np.flatnonzero(mask)
    if not at.size:
        return np.zeros(mask.size, dtype)
    # the count rises by one after each set entry: run m holds the entries after the m-th
    runs = np.empty(at.size + 1, np.int64)
    runs[0] = at[0] + 1
    runs[1:-1] = np.diff(at)
    runs[-1] = mask.size - 1 - at[-1]
    return np.repeat(np.arange(at.size + 1, dtype=dtype), runs)


# -- building Arrow arrays ---------------------------------------------------------------------


def _mask(validity: np.ndarray | None) -> pa.Array | None:
    return None if validity is None else pa.array(~validity)


def is_list_like(t: pa.DataType) -> bool:
    """Lists, large lists and maps: the types that own a repetition layer."""
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t)


def _entries(t: pa.DataType) -> pa.Field:
    """The item field of a list or map type (a map's item is its entries struct)."""
    if pa.types.is_map(t):
        return pa.field("entries", pa.struct([t.key_field, t.item_field]), nullable=False)
    return t.value_field


def _make_list(t: pa.DataType, offsets: np.ndarray, items: pa.Array, validity: np.ndarray | None) -> pa.Array:
    item_field = _entries(t).with_type(items.type)
    if pa.types.is_large_list(t):
        return pa.LargeListArray.from_arrays(
            pa.array(offsets, pa.int64()), items, type=pa.large_list(item_field), mask=_mask(validity)
        )
    if offsets.size and int(offsets[-1]) > np.iinfo(np.int32).max:
        raise LevelError("a list column holds more than 2^31 items in one read; use large_list")
    return pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32, copy=False)), items, type=pa.list_(item_field), mask=_mask(validity)
    )


def assemble(
    path: Sequence[pa.Field],
    levels: Sequence[Layer],
    values: pa.Array,
    with_validity: Callable[[pa.Array, np.ndarray], pa.Array],
) -> pa.Array:
    """The Arrow array of a leaf's path: ``path[0]`` is the top-level field, ``path[-1]`` the leaf.

    Structs on the path get only the child on the path and maps come out as lists of entries;
    :func:`merge` joins the paths of sibling leaves into the field's real type.
    """
    if len(path) != len(levels):
        raise LevelError(f"{len(levels)} rep/def layers for a field nested {len(path)} deep")
    leaf = levels[-1]
    if len(values) != leaf.length:
        raise LevelError(f"{len(values)} values for {leaf.length} items")
    arr = with_validity(values, leaf.validity) if leaf.validity is not None else values
    for k in range(len(path) - 2, -1, -1):
        field, layer, child = path[k], levels[k], path[k + 1]
        t = field.type
        if is_list_like(t):
            if layer.offsets is None:
                raise LevelError(f"list field {field.name!r} stored without repetition levels")
            if int(layer.offsets[-1]) != len(arr):
                raise LevelError(
                    f"list offsets of {field.name!r} end at {int(layer.offsets[-1])}, not {len(arr)}"
                )
            arr = _make_list(t, layer.offsets, arr, layer.validity)
        elif pa.types.is_struct(t):
            if layer.offsets is not None or layer.length != len(arr):
                raise LevelError(f"struct field {field.name!r} does not match its child's levels")
            arr = pa.StructArray.from_arrays(
                [arr], fields=[child.with_type(arr.type)], mask=_mask(layer.validity)
            )
        else:
            raise LevelError(f"field {field.name!r} of type {t} cannot hold other fields")
    return arr


def _validity_of(arr: pa.Array) -> np.ndarray | None:
    if not arr.null_count:
        return None
    return np.asarray(arr.is_valid())


def merge(field: pa.Field, parts: Sequence[pa.Array]) -> pa.Array:
    """Join the path arrays of a field's leaves (same rows, each holding some leaves) into one."""
    t = field.type
    if len(parts) == 1 and parts[0].type.equals(t):
        return parts[0]
    first = parts[0]
    if pa.types.is_struct(t):
        kids = []
        for child in t:
            sub = [p.field(child.name) for p in parts if p.type.get_field_index(child.name) >= 0]
            if not sub:
                raise LevelError(f"struct field {field.name!r} has no column for child {child.name!r}")
            kids.append(merge(child, sub))
        return pa.StructArray.from_arrays(kids, fields=list(t), mask=_mask(_validity_of(first)))
    if is_list_like(t):
        offsets = np.asarray(first.offsets, np.int64)
        base = int(offsets[0]) if offsets.size else 0
        items = []
        for p in parts:
            o = np.asarray(p.offsets, np.int64)
            if o.size != offsets.size or not np.array_equal(o - o[0], offsets - base):
                raise LevelError(f"the columns of list field {field.name!r} disagree on its lists")
            items.append(p.values.slice(int(o[0]), int(o[-1]) - int(o[0])))
        merged = merge(_entries(t), items)
        validity = _validity_of(first)
        if pa.types.is_map(t):
            return pa.MapArray.from_arrays(
                pa.array(offsets - base, pa.int32()),
                merged.field(0),
                merged.field(1),
                type=t,
                mask=_mask(validity),
            )
        return _make_list(t, offsets - base, merged, validity).cast(t)
    if len(parts) != 1:
        raise LevelError(f"field {field.name!r} has {len(parts)} columns")
    return first if first.type.equals(t) else first.cast(t)


def whole_rows(
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    layers: list[int],
    n_levels: np.ndarray,
    rows: np.ndarray,
    items: np.ndarray,
) -> bool:
    """Whether each part's levels (``n_levels`` of them, one part after another: the pages of
    many files, or of one column) describe its ``rows`` rows and ``items`` values: joined, they
    then describe the rows of all parts."""
    if rep is None:
        # no lists: a level per row, each with a value slot
        if not np.array_equal(items, rows):
            return False
        return defs is None or (defs.size == int(rows.sum()) and np.array_equal(n_levels, rows))
    total = int(n_levels.sum())
    if rep.size != total or (defs is not None and defs.size != total) or bool(np.any(n_levels <= 0)):
        return False
    starts = np.zeros(n_levels.size, np.int64)
    np.cumsum(n_levels[:-1], out=starts[1:])
    row_start = rep == max_rep(layers)
    if not bool(row_start[starts].all()):
        return False
    if not np.array_equal(_set_per_part(row_start, starts), rows):
        return False
    if defs is None:
        return bool(np.array_equal(n_levels, items))
    shown = defs <= visible_limit(layers)
    return bool(np.array_equal(_set_per_part(shown, starts), items))


#: parts up to which :func:`_set_per_part` counts part by part
_COUNT_PARTS = 64


def _set_per_part(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The set entries of a boolean mask in each part (parts from ``starts``, back to back):
    a few parts counted one by one (a SIMD count each, over ten times faster than numpy's
    ``add.reduceat`` on booleans), many (the files of a history) in one ``reduceat``."""
    if starts.size > _COUNT_PARTS:
        return np.add.reduceat(mask, starts)
    bounds = [*starts.tolist(), mask.size]
    return np.array([np.count_nonzero(mask[a:b]) for a, b in itertools.pairwise(bounds)], np.int64)
