"""Fields with structs and lists of many small 2.1/2.2 files decoded in one numpy pass.

A living table of JSON-like records holds thousands of files of a few hundred rows whose struct
and list fields are stored as leaf columns, each one page of one mini-block chunk carrying
repetition and definition levels. Read file by file, each leaf page costs a few hundred Python
calls. Here (a part of :mod:`small_many`) the leaf pages of all files that share an encoding are
read as the chunks of one page: the chunk headers with a few numpy gathers, the levels and values
of all chunks at once (see :mod:`batch`), and the levels of all files unravelled and assembled in
one call (see :mod:`repdef`). The levels of a page of one chunk describe whole rows, so the
levels of many such pages, one after another, are those of their rows one after another; each
file's levels are checked to start a row and to describe its rows and values before they join.

:func:`layout` says where a field's leaf pages are; :func:`decode` returns None where anything
does not check out, and the caller then reads the files one by one, which says what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_table._lru import LRU
from lance_table.file.arrow import with_validity
from lance_table.file.compression import bitpacking
from lance_table.file.field_shapes import leaf_paths
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import batch, batch_runs, inline_blocks, repdef, small_constant
from lance_table.file.v2_1.chunk_headers import header_fields, le
from lance_table.file.v2_1.values import Fixed, Var, to_arrow
from lance_table.schema import FieldNode

if TYPE_CHECKING:
    from lance_table.file.reader import LanceFileReader

#: values one chunk may hold (see miniblock.MAX_CHUNK_VALUES)
MAX_CHUNK_VALUES = 1 << 16
#: variable-width bytes of one leaf of a batch above which the files are read one by one
MAX_VAR_BYTES = 2**31 - 1


# (not frozen: a frozen dataclass is 5x slower to make, and one is made per file read;
# never changed after it is made)
@dataclass(slots=True, unsafe_hash=True)
class LeafLayout:
    """One leaf column's page of one file: its chunk table word and its one chunk (relative to
    the file's span), its value count and its encoding (a ``MiniBlockLayout``)."""

    meta_at: int
    data_at: int
    data_size: int
    items: int
    mini: Any
    large: bool
    #: a page of dictionary indices: its dictionary's place and size, item count and compression
    dict_at: int = -1
    dict_size: int = 0
    dict_items: int = 0
    dict_encoding: Any = None


# (not frozen: a frozen dataclass is 5x slower to make, and one is made per file read;
# never changed after it is made)
@dataclass(slots=True, unsafe_hash=True)
class NestedLayout:
    """A field with nesting of one file: the pages of its leaves, each leaf's path of fields
    (top-level field first) and the field itself."""

    leaves: tuple[LeafLayout | small_constant.ConstantLayout, ...]
    paths: tuple[tuple[pa.Field, ...], ...]
    field: pa.Field
    key: tuple[Any, ...]  # interned: the same object for the same encodings of every leaf


def layout(
    reader: LanceFileReader,
    node: FieldNode,
    large: bool,
    intern: Callable[[tuple[Any, ...]], tuple[Any, ...]],
) -> tuple[NestedLayout, list[tuple[int, int]]] | None:
    """Where the leaf pages of the file's field ``node`` are (file offsets) and the byte ranges
    a read of them needs, when every leaf is one page of one mini-block chunk of one value
    buffer (of values, or of indices into a dictionary); else None. ``intern`` gives one object
    per key."""
    meta = reader.metadata
    leaves: list[LeafLayout | small_constant.ConstantLayout] = []
    paths: list[tuple[pa.Field, ...]] = []
    keys: list[tuple[Any, ...]] = []
    ranges: list[tuple[int, int]] = []
    field, leaf_list = _leaves(node)
    for leaf, path in leaf_list:
        dtype = leaf.arrow_type
        if leaf.children or pa.types.is_dictionary(dtype) or len(path) < 2:
            return None  # a packed struct, dictionary values: read the general way
        col = reader._column(leaf)
        if len(col.page_starts) != 2 or col.num_values != meta.num_rows:
            return None
        enc = col.encoding(0, reader._stored)
        if enc.WhichOneof("layout") == "constant_layout":  # one value or nulls, no levels: no lists
            const = small_constant.layout(enc, col.buffers(0), len(path), dtype, intern)
            if const is None:
                return None
            leaves.append(const[0])
            keys.append(const[0].key)
            paths.append(tuple(path))
            ranges.extend(const[1])
            continue
        if enc.WhichOneof("layout") != "mini_block_layout":
            return None
        mini = enc.mini_block_layout
        buffers = col.buffers(0)
        depth = int(mini.repetition_index_depth)
        has_dict = mini.HasField("dictionary")
        rle_apart = int(mini.num_buffers) == 2 and mini.value_compression.WhichOneof("compression") == "rle"
        if (
            not (int(mini.num_buffers) == 1 or rle_apart)
            or len(buffers) != 2 + has_dict + (depth > 0)
            or len(mini.layers) != len(path)
            or not 0 <= int(mini.num_items) <= MAX_CHUNK_VALUES
            or buffers[0][1] != (4 if large else 2)  # one chunk
        ):
            return None
        keys.append(_leaf_key(enc, large, dtype, has_dict, intern))
        (meta_at, _), (data_at, data_size) = buffers[0], buffers[1]
        page = LeafLayout(meta_at, data_at, data_size, int(mini.num_items), mini, large)
        if has_dict:
            page = replace(
                page,
                dict_at=buffers[2][0],
                dict_size=buffers[2][1],
                dict_items=int(mini.num_dictionary_items),
                dict_encoding=mini.dictionary,
            )
        leaves.append(page)
        paths.append(tuple(path))
        ranges.extend(buffers[: 2 + has_dict])
    if not leaves:
        return None
    key = intern(("nested", str(node.arrow_type), *keys))
    return NestedLayout(tuple(leaves), tuple(paths), field, key), ranges


def _leaves(node: FieldNode) -> tuple[pa.Field, list[tuple[FieldNode, list[pa.Field]]]]:
    """The field's Arrow field and its leaves with their paths of fields (top-level field
    first); kept per field: the files of a dataset share their field trees."""
    hit = _LEAVES.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1], hit[2]
    field = node.to_arrow_field()
    found = list(leaf_paths(node, [field]))
    _LEAVES.put(id(node), (node, field, found))  # (the node is kept: its id stays its own)
    return field, found


def _leaf_key(
    layout: Any,
    large: bool,
    dtype: pa.DataType,
    has_dict: bool,
    intern: Callable[[tuple[Any, ...]], tuple[Any, ...]],
) -> tuple[Any, ...]:
    """The interned encoding key of a leaf's page ``layout`` (of mini-block chunks); kept per
    layout message (the files of a dataset share theirs, see ``container.unpack_encoding``)."""
    at = (id(layout), large, dtype)
    hit = _LEAF_KEYS.get(at)
    if hit is not None and hit[0] is layout:
        return intern(hit[1])
    mini = layout.mini_block_layout
    rep = mini.rep_compression.SerializeToString() if mini.HasField("rep_compression") else None
    defs = mini.def_compression.SerializeToString() if mini.HasField("def_compression") else None
    values = mini.value_compression.SerializeToString()
    dictionary = mini.dictionary.SerializeToString() if has_dict else None
    buffers_per_chunk = int(mini.num_buffers)  # (the chunk header's size words: see _leaf)
    key = (large, rep, defs, values, dictionary, tuple(mini.layers), str(dtype), buffers_per_chunk)
    _LEAF_KEYS.put(at, (layout, key))  # (the message is kept: its id stays its own)
    return intern(key)


#: the Arrow field and leaves of fields with nesting, by the node's id (see :func:`_leaves`)
_LEAVES: LRU[int, tuple[FieldNode, pa.Field, list[tuple[FieldNode, list[pa.Field]]]]] = LRU(1024)
#: the encoding keys of leaves' page layouts, by the message's id (see :func:`_leaf_key`)
_LEAF_KEYS: LRU[tuple[Any, ...], tuple[Any, tuple[Any, ...]]] = LRU(4096)


def shifted(found: NestedLayout, start: int) -> NestedLayout:
    """The layout with its places relative to a file's span from ``start``."""
    leaves = tuple(
        small_constant.shifted(leaf, start)
        if isinstance(leaf, small_constant.ConstantLayout)
        else replace(
            leaf,
            meta_at=leaf.meta_at - start,
            data_at=leaf.data_at - start,
            dict_at=leaf.dict_at - start if leaf.dict_at >= 0 else -1,
        )
        for leaf in found.leaves
    )
    return replace(found, leaves=leaves)


#: the values of dictionary indices of many files (see :func:`small_dicts.looked_up`): the
#: indices, the files' leaf layouts, their value counts, the bytes, where each file starts, the
#: type, the validity of the value slots and the messages' page
LookUp = Callable[
    [Fixed | Var, list[Any], np.ndarray, memoryview, np.ndarray, pa.DataType, "np.ndarray | None", PageIO],
    "pa.Array | None",
]


def decode(
    cols: Sequence[NestedLayout],
    rows: np.ndarray,
    data: memoryview,
    bases: np.ndarray,
    io: PageIO,
    looked_up: LookUp,
) -> pa.Array | None:
    """Every row of the field of ``cols`` (one per file, all of one key; ``rows`` per file), one
    file after another, from the files' bytes ``data`` (file ``k`` from ``bases[k]``); None when
    anything does not check out. ``looked_up`` turns dictionary indices into values.

    Raises:
        LanceTableError, LevelError, ArrowException, ...: damaged bytes (the caller catches them
            and reads the files one by one).
    """
    first = cols[0]
    u8 = np.frombuffer(data, np.uint8)
    parts = []
    for k, path in enumerate(first.paths):
        pages: list[Any] = [c.leaves[k] for c in cols]
        if isinstance(pages[0], small_constant.ConstantLayout):
            arr = _constant_leaf(pages, rows, data, bases, path, io)
        else:
            arr = _leaf(pages, rows, u8, data, bases, path, io, looked_up)
        if arr is None:
            return None
        parts.append(arr)
    return repdef.merge(first.field, parts)


def _leaf(
    leaves: list[LeafLayout],
    rows: np.ndarray,
    u8: np.ndarray,
    data: memoryview,
    bases: np.ndarray,
    path: Sequence[pa.Field],
    io: PageIO,
    looked_up: LookUp,
) -> pa.Array | None:
    """The path array of one leaf, from its page of one chunk in every file (the checks of
    :func:`miniblock.chunk_table` and :func:`miniblock.read_chunks`, for all chunks at once,
    and that each file's levels hold whole rows: its rows and its values)."""
    mini = leaves[0].mini
    large = leaves[0].large
    count = len(leaves)
    meta_at = bases + np.fromiter((f.meta_at for f in leaves), np.int64, count)
    chunk_at = bases + np.fromiter((f.data_at for f in leaves), np.int64, count)
    data_size = np.fromiter((f.data_size for f in leaves), np.int64, count)
    items = np.fromiter((f.items for f in leaves), np.int64, count)
    word = 4 if large else 2
    if int((chunk_at + data_size).max()) > u8.size or int((meta_at + word).max()) > u8.size:
        return None
    chunk_bytes = ((le(u8, meta_at, word) >> 4) + 1) * 8
    has_rep, has_def = mini.HasField("rep_compression"), mini.HasField("def_compression")
    size_len = 4 if large else 2
    n_buffers = int(mini.num_buffers)  # 2: run values and run lengths apart
    head = 2 + 2 * has_rep + 2 * has_def + size_len * n_buffers
    if bool(np.any(chunk_bytes > data_size)) or bool(np.any(chunk_bytes < head)) or n_buffers not in (1, 2):
        return None
    n_levels, rep_size, def_size, sizes = header_fields(u8, chunk_at, has_rep, has_def, n_buffers, size_len)
    size = sizes[0]
    second = sizes[1] if n_buffers == 2 else None
    cursor = np.full(count, (head + 7) & ~7, np.int64)
    rep_at = def_at = chunk_at + cursor
    if rep_size is not None:
        cursor = cursor + ((rep_size + 7) & ~7)
        def_at = chunk_at + cursor
    if def_size is not None:
        cursor = cursor + ((def_size + 7) & ~7)
    value_at = chunk_at + cursor
    if second is not None:
        cursor = cursor + ((size + 7) & ~7)
        if bool(np.any(cursor + second > chunk_bytes)):
            return None
    elif bool(np.any(cursor + size > chunk_bytes)):
        return None
    rep = defs = None
    if rep_size is not None:
        rep = _levels(mini.rep_compression, data, rep_at, rep_size, n_levels, io)
        if rep is None:
            return None
    if def_size is not None:
        defs = _levels(mini.def_compression, data, def_at, def_size, n_levels, io)
        if defs is None:
            return None
    layers = list(mini.layers)
    if not repdef.whole_rows(rep, defs, layers, n_levels, rows, items):
        return None
    if not _fits(mini.value_compression, data, value_at, size, items, io):
        return None
    if second is None:
        values = batch.values(mini.value_compression, data, value_at, size, items, io)
    else:
        rle = mini.value_compression.rle
        values = batch_runs.values(
            batch_runs.chunk_runs(rle, data, value_at, size, chunk_at + cursor, second, items, io)
        )
    if not isinstance(values, (Fixed, Var)) or (isinstance(values, Var) and len(values.data) > MAX_VAR_BYTES):
        return None
    total = int(items.sum())
    dtype = path[-1].type
    if leaves[0].dict_at >= 0:
        # the value slots' validity: only null slots may hold any index
        limit = repdef.visible_limit(layers)
        valid = None if defs is None else np.compress(defs <= limit, defs) == 0
        got = looked_up(values, leaves, items, data, bases, dtype, valid, io)
        if got is None:
            return None
        arr = got
    else:
        arr = to_arrow(values, dtype, total, io)
    if len(arr) != total:
        return None
    levels = repdef.unravel(rep, defs, layers, total)
    if levels[0].length != int(rows.sum()):
        return None
    return repdef.assemble(path, levels, arr, with_validity)


def _constant_leaf(
    pages: list[Any],
    rows: np.ndarray,
    data: memoryview,
    bases: np.ndarray,
    path: Sequence[pa.Field],
    io: PageIO,
) -> pa.Array | None:
    """The path array of a leaf stored as constant pages without levels (structs of all-valid
    rows above it)."""
    values = small_constant.decode(pages, rows, data, bases, path[-1].type, io)
    if values is None:
        return None
    total = int(rows.sum())
    levels = repdef.unravel(None, None, list(pages[0].layers), total)
    return repdef.assemble(path, levels, values, with_validity)


def _levels(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> np.ndarray | None:
    """Repetition or definition levels of many chunks in a form :mod:`batch` decodes at once
    (plain, bitpacked, run-length or inline-bitpacked 16-bit values), else None."""
    got = batch.levels(enc, data, at, sizes, counts, io)
    if got is not None:
        return got
    if enc.WhichOneof("compression") != "inline_bitpacking" or not _fits(enc, data, at, sizes, counts, io):
        return None
    values = batch.values(enc, data, at, sizes, counts, io)
    if not isinstance(values, Fixed) or values.bits not in bitpacking.DTYPES:
        return None
    total = int(counts.sum())
    out = np.frombuffer(values.data, bitpacking.DTYPES[values.bits])
    return out[:total].astype(np.uint16) if out.size >= total else None


def _fits(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> bool:
    """Whether the blocks of inline-bitpacked chunks end within their buffers (``sizes`` bytes
    from ``at``), as the general decoder, given each buffer alone, requires; True for other
    compressions (their decoders check their sizes)."""
    if enc.WhichOneof("compression") != "inline_bitpacking":
        return True
    t = int(enc.inline_bitpacking.uncompressed_bits_per_value)
    found = inline_blocks.walk(t, data, at, counts, io)
    if found is None:
        return False
    has = found.n_blocks > 0
    last = (found.first_block + found.n_blocks - 1)[has]
    ends = (found.data_at[last] + found.width[last] * (bitpacking.BLOCK // t)) * (t // 8)
    return not bool(np.any(ends > (at + sizes)[has]))
