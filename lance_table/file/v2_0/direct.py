"""Whole pages of many local 2.0 files read straight into the columns' values (a part of
:mod:`small_many`'s batches).

A batch of :mod:`small_many` reads each file's span of its columns into one buffer, then gathers
each column's pages out of it: every byte is copied twice. pylance's 2.0 files of 20k rows hold
1.3 MB of vectors (in two pages) and 560 kB of strings each, too large for two of them to share a
batch of joined spans, so they were read file by file. Here each file's span is read with one
``preadv`` whose buffers are, in turn, the values of fixed-width columns (numbers, vectors) and
the bytes of strings, each into its place in the column, and everything else (string end
offsets, dictionaries, bitmaps, the bytes between pages) into one scratch buffer, which is decoded
as :mod:`small_many` decodes the joined spans. Columns in several pages (:class:`Pages`) are
read page after page. Structs and lists are read as the columns of their fields' and items'
pages (lists of strings: their bytes, too, straight into the column) and their lists' end
offsets (into the scratch buffer), and put together as :class:`_Shape` says: the end offsets
of all the files resolved in one numpy pass (pylance's 2.0 files of 20k rows with lists of
strings were read file by file, 1.2-1.6 times pylance's CPU time).

Anything that does not check out (pages that overlap, strings with bytes past their last end, a
file that cannot be read) gives None: the caller reads the batch the usual way, which says what
is wrong and names the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
from lance_table.file.v2_0.small_layout import (
    ERRORS,
    MAX_VAR_BYTES,
    FileLayout,
    Leaf,
    List,
    Node,
    Struct,
    value_bits,
)
from lance_table.file.v2_0.small_many import decoded, end_offsets, int64s_at, leaves_of, list_of, string_array
from lance_table.file.v2_1.byteranges import exclusive_cumsum
from lance_table.storage.scatter import read_into
from lance_table.storage.sources import LocalFileSource

if TYPE_CHECKING:
    from lance_table.file.reader import LanceFileReader

#: the least bytes of a file's span read so: each place costs a ``preadv`` buffer and some Python
#: per file, which a copy of a few hundred bytes per page does not outweigh
MIN_SPAN_BYTES = 64 * 1024

Found = Sequence[tuple["LanceFileReader", FileLayout]]


def applies(found: Found, columns: int) -> bool:
    """Whether the batch's files are read by :func:`read`: local files of at least
    :data:`MIN_SPAN_BYTES` (each column of any shape a batch reads: without nesting, in one page
    or several, structs, lists)."""
    for reader, lay in found:
        if not isinstance(reader._stored, LocalFileSource) or reader.holds_bytes:
            return False
        if lay.length < MIN_SPAN_BYTES:
            return False
    return True


def holds_lists(lay: FileLayout) -> bool:
    """Whether any of a layout's columns is a list or holds one (in a struct)."""

    def has(node: Node) -> bool:
        return isinstance(node, List) or (isinstance(node, Struct) and any(map(has, node.children)))

    return any(map(has, lay.columns))


@dataclass(slots=True)
class _Column:
    """One column's pages of all the files (``files[i]``: the file of ``leaves[i]``) and how they
    are read: ``fixed`` (values into ``out``), ``strings`` (bytes into ``out``) or ``scratch``."""

    leaves: list[Leaf]
    files: np.ndarray
    how: str
    width: int = 0  # fixed: bytes of a row
    out: np.ndarray | None = None
    out_at: np.ndarray | None = None  # where each page's values (bytes) start in ``out``


def read(found: Found, dtypes: Sequence[pa.DataType]) -> list[pa.Array] | None:
    """Every row of each column (of the layouts' selection, as ``dtypes``) of the files, one file
    after another (see the module's note); None when the batch is to be read the usual way."""
    try:
        return _read(found, dtypes)
    except (*ERRORS, OSError):
        return None


@dataclass(slots=True)
class _Shape:
    """How one column of the batch is put together from the columns of pages read (``cols``):
    a ``leaf`` is column ``col``; a ``struct``, its fields; a ``list``, the end offsets of
    column ``col`` (the files' :class:`List` nodes ``lists``) over its items ``kids[0]``."""

    kind: str
    dtype: pa.DataType
    col: int = -1
    kids: tuple[_Shape, ...] = ()
    lists: Sequence[List] = ()


def _shape(
    nodes: Sequence[Node], files: np.ndarray, dtype: pa.DataType, cols: list[_Column]
) -> _Shape | None:
    """The shape of a column stored as ``nodes`` (one per file, of file ``files[i]``), its pages
    added to ``cols``; None when the files do not store it alike."""
    first = nodes[0]
    if isinstance(first, Struct):
        if not pa.types.is_struct(dtype) or not all(
            isinstance(n, Struct) and len(n.children) == dtype.num_fields for n in nodes
        ):
            return None
        kids = []
        for i, field in enumerate(dtype):
            kid = _shape([n.children[i] for n in nodes], files, field.type, cols)  # type: ignore[union-attr]
            if kid is None:
                return None
            kids.append(kid)
        return _Shape("struct", dtype, kids=tuple(kids))
    if isinstance(first, List):
        if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
            return None
        if not all(isinstance(n, List) for n in nodes):
            return None
        lists: list[List] = nodes  # type: ignore[assignment]
        kid = _shape([n.child for n in lists], files, dtype.value_type, cols)
        if kid is None:
            return None
        # the end offsets as pages of their own (read into the scratch buffer)
        ends = [Leaf(("ends", 64, False), n.count, (n.at,), n.adjust, n.items) for n in lists]
        cols.append(_Column(ends, files, "scratch"))
        return _Shape("list", dtype, len(cols) - 1, (kid,), lists)
    leaves, where = leaves_of(nodes, files)
    if not all(isinstance(n, Leaf) for n in leaves):
        return None
    cols.append(_column(leaves, where, dtype))
    return _Shape("leaf", dtype, len(cols) - 1)


def _read(found: Found, dtypes: Sequence[pa.DataType]) -> list[pa.Array] | None:
    n_files = len(found)
    cols: list[_Column] = []
    shapes = []
    for c, dtype in enumerate(dtypes):
        shape = _shape([lay.columns[c] for _, lay in found], np.arange(n_files, dtype=np.int64), dtype, cols)
        if shape is None:
            return None
        shapes.append(shape)
    # the places read straight into the columns: (file, offset, size, column, at in its ``out``)
    places = [_places(col, c) for c, col in enumerate(cols)]
    places = [p for p in places if p[0].size]
    starts = np.fromiter((lay.start for _, lay in found), np.int64, n_files)
    lengths = np.fromiter((lay.length for _, lay in found), np.int64, n_files)
    if places:
        pf, po, ps, pc, pa_ = (np.concatenate([p[i] for p in places]) for i in range(5))
    else:
        pf = po = ps = pc = pa_ = np.zeros(0, np.int64)
    order = np.lexsort((po, pf))
    pf, po, ps, pc, pa_ = pf[order], po[order], ps[order], pc[order], pa_[order]
    same = pf[1:] == pf[:-1]
    if bool(np.any(same & (po[:-1] + ps[:-1] > po[1:]))):
        return None  # places that overlap
    if pf.size and (bool(np.any(po < starts[pf])) or bool(np.any(po + ps > (starts + lengths)[pf]))):
        return None
    # bytes of each file's span before each of its places that are not read into the columns
    direct_in_file = np.bincount(pf, weights=ps, minlength=n_files).astype(np.int64)
    scratch_size = lengths - direct_in_file
    scratch_base = exclusive_cumsum(scratch_size)
    scratch = empty(int(scratch_size.sum()), np.uint8)
    first = np.searchsorted(pf, np.arange(n_files + 1))
    before = np.zeros(pf.size, np.int64)  # direct bytes of the file before each place
    if pf.size:
        cum = exclusive_cumsum(ps)
        before = cum - cum[first[pf]]
    # every other buffer: its place in the scratch buffer (None where it overlaps a direct place)
    for col in cols:
        if col.how != "fixed":
            col.leaves = _moved(col, pf, po, ps, before, first, starts, scratch_base)
    outs = [col.out for col in cols]
    _read_files(found, first, po, ps, pc, pa_, starts, lengths, scratch_base, scratch, outs)
    arrays = [_assembled(shape, cols, scratch) for shape in shapes]
    return None if any(arr is None for arr in arrays) else arrays


def _assembled(shape: _Shape, cols: list[_Column], u8: np.ndarray) -> pa.Array | None:
    """A column of the batch from its pages read (see :class:`_Shape`); None where they do not
    check out."""
    if shape.kind == "struct":
        kids = [_assembled(kid, cols, u8) for kid in shape.kids]
        if any(kid is None for kid in kids):
            return None
        return pa.StructArray.from_arrays(kids, fields=list(shape.dtype))
    col = cols[shape.col]
    if shape.kind == "list":
        child = _assembled(shape.kids[0], cols, u8)
        if child is None:
            return None
        # the files' lists with their end offsets' places in the scratch buffer
        lists = [List(n.count, m.at[0], n.adjust, n.items, n.child) for n, m in zip(shape.lists, col.leaves)]
        return list_of(lists, u8, np.zeros(len(lists), np.int64), shape.dtype, child)
    if col.how == "fixed":
        return _fixed(col, shape.dtype)
    if col.how == "strings":
        return _strings(col, u8, shape.dtype)
    return decoded(col.leaves, u8, np.zeros(len(col.leaves), np.int64), shape.dtype)


def _column(leaves: list[Leaf], files: np.ndarray, dtype: pa.DataType) -> _Column:
    """How a column's pages are read (see :class:`_Column`)."""
    keys = {n.key for n in leaves}
    counts = np.fromiter((n.count for n in leaves), np.int64, len(leaves))
    if len(keys) == 1:
        kind, bits, has = leaves[0].key
        width = 0
        if kind == "fixed" and not has and value_bits(dtype) == bits and not pa.types.is_dictionary(dtype):
            width = bits // 8
        elif (
            kind == "vectors"
            and not has
            and pa.types.is_fixed_size_list(dtype)
            and value_bits(dtype.value_type) == bits
        ):
            width = dtype.list_size * bits // 8
        if width:
            need = counts * width
            out_at = exclusive_cumsum(need)
            return _Column(leaves, files, "fixed", width, empty(int(need.sum()), np.uint8), out_at)
        if kind == "binary" and (
            pa.types.is_string(dtype)
            or pa.types.is_binary(dtype)
            or pa.types.is_large_string(dtype)
            or pa.types.is_large_binary(dtype)
        ):
            size = np.fromiter((n.at[1][1] for n in leaves), np.int64, len(leaves))
            if int(size.sum()) <= MAX_VAR_BYTES:
                out_at = exclusive_cumsum(size)
                return _Column(leaves, files, "strings", 0, empty(int(size.sum()), np.uint8), out_at)
    return _Column(leaves, files, "scratch")


def _places(col: _Column, c: int) -> tuple[np.ndarray, ...]:
    """The places of a column read straight into its ``out``: (file, offset, size, column, at)."""
    n = len(col.leaves)
    if col.how == "scratch" or not n:
        return tuple(np.zeros(0, np.int64) for _ in range(5))
    b = 0 if col.how == "fixed" else 1  # fixed: the values; strings: the bytes (after the ends)
    offset = np.fromiter((leaf.at[b][0] for leaf in col.leaves), np.int64, n)
    size = np.fromiter((leaf.at[b][1] for leaf in col.leaves), np.int64, n)
    if col.how == "fixed":
        need = np.fromiter((leaf.count for leaf in col.leaves), np.int64, n) * col.width
        if bool(np.any(need > size)):
            raise ValueError("a page's values buffer is shorter than its rows")
        size = need
    return col.files, offset, size, np.full(n, c, np.int64), col.out_at  # type: ignore[return-value]


def _moved(
    col: _Column,
    pf: np.ndarray,
    po: np.ndarray,
    ps: np.ndarray,
    before: np.ndarray,
    first: np.ndarray,
    starts: np.ndarray,
    scratch_base: np.ndarray,
) -> list[Leaf]:
    """The column's pages with their buffers (but a string's bytes) placed in the scratch buffer."""
    moved = []
    skip = 1 if col.how == "strings" else -1
    for leaf, k in zip(col.leaves, col.files.tolist()):
        at: list[tuple[int, int]] = []
        lo, hi = int(first[k]), int(first[k + 1])
        for b, (offset, size) in enumerate(leaf.at):
            if b == skip:
                at.append((-1, size))  # (read into ``out``)
                continue
            i = lo + int(np.searchsorted(po[lo:hi], offset, "right")) - 1
            skipped = 0
            if i >= lo:
                if po[i] + ps[i] > offset:
                    raise ValueError("a page's buffer overlaps another's")
                skipped = int(before[i] + ps[i])
            if i + 1 < hi and offset + size > po[i + 1]:
                raise ValueError("a page's buffer overlaps another's")
            at.append((int(scratch_base[k]) + offset - int(starts[k]) - skipped, size))
        moved.append(Leaf(leaf.key, leaf.count, tuple(at), leaf.adjust, leaf.items))
    return moved


def _read_files(
    found: Found,
    first: np.ndarray,
    po: np.ndarray,
    ps: np.ndarray,
    pc: np.ndarray,
    pat: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    scratch_base: np.ndarray,
    scratch: np.ndarray,
    outs: list[np.ndarray | None],
) -> None:
    """Each file's span in one pass: its places into their columns, the rest into ``scratch``."""
    sview = memoryview(scratch)  # type: ignore[arg-type]
    oviews = [None if o is None else memoryview(o) for o in outs]  # type: ignore[arg-type]
    po_l, ps_l, pc_l, pa_l = po.tolist(), ps.tolist(), pc.tolist(), pat.tolist()
    first_l = first.tolist()
    for k, (reader, _) in enumerate(found):
        at, end, s = int(starts[k]), int(starts[k] + lengths[k]), int(scratch_base[k])
        buffers: list[memoryview] = []
        for i in range(first_l[k], first_l[k + 1]):
            gap = po_l[i] - at
            if gap:
                buffers.append(sview[s : s + gap])
                s += gap
            out = oviews[pc_l[i]]
            buffers.append(out[pa_l[i] : pa_l[i] + ps_l[i]])
            at = po_l[i] + ps_l[i]
        if end > at:
            buffers.append(sview[s : s + end - at])
        read_into(reader._stored, [(int(starts[k]), buffers)])  # type: ignore[arg-type]  # (see applies)


def _fixed(col: _Column, dtype: pa.DataType) -> pa.Array:
    total = sum(leaf.count for leaf in col.leaves)
    buf = pa.py_buffer(col.out)
    if pa.types.is_fixed_size_list(dtype):
        values = pa.Array.from_buffers(dtype.value_type, total * dtype.list_size, [None, buf])
        return pa.FixedSizeListArray.from_arrays(values, type=dtype)
    return pa.Array.from_buffers(dtype, total, [None, buf])


def _strings(col: _Column, u8: np.ndarray, dtype: pa.DataType) -> pa.Array | None:
    """The strings of the pages: end offsets from the scratch buffer, bytes read into ``out``
    (each page's bytes exactly up to its last end, else None)."""
    leaves = col.leaves
    n = len(leaves)
    counts = np.fromiter((leaf.count for leaf in leaves), np.int64, n)
    ends_at = np.fromiter((leaf.at[0][0] for leaf in leaves), np.int64, n)
    ends_size = np.fromiter((leaf.at[0][1] for leaf in leaves), np.int64, n)
    data_size = np.fromiter((leaf.at[1][1] for leaf in leaves), np.int64, n)
    if bool(np.any(counts * 8 > ends_size)) or bool(np.any(ends_at < 0)):
        return None
    if n and int((ends_at + counts * 8).max()) > u8.size:
        return None
    raw = int64s_at(u8, ends_at, counts * 8)
    found = end_offsets(leaves, counts, raw)
    if found is None:
        return None
    _, valid, lengths, last = found
    if bool(np.any(last != data_size)):
        return None  # (bytes past a page's last string: read the usual way)
    return string_array(dtype, valid, lengths, pa.py_buffer(col.out))
