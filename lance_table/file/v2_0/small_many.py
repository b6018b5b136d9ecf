"""One column of many small 2.0 files decoded in one numpy pass.

A 2.0 table of many small appends holds thousands of files of a few hundred rows, each column
one page. Read file by file, each page costs a few dozen Python calls around a few hundred bytes
of values. Here the files' bytes are joined into one buffer (see :func:`small_many.joined` of
2.1), each page's encoding is read once per file into a :class:`Leaf` (where its buffers are and
what they hold), and the pages of all files are decoded together: flat values and bitmaps
(validity, booleans) as one gather, strings through their end offsets, dictionaries of strings
as their items joined and their indices moved onto the join; structs field by field and lists
through their offsets. Pages of files whose encodings differ (a dictionary in one file, plain
strings in another) are decoded in groups and put back in file order.

:func:`layout` returns None for a file it cannot batch (several pages, compressed buffers,
packed structs, blobs...); :func:`decode` returns None when any bytes do not check out, and the
caller then reads the files one by one, which also says what is wrong with a damaged one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_table.errors import LanceTableError
from lance_table.file.arrow import with_validity
from lance_table.file.container import FileVersion, unpack_encoding
from lance_table.file.fields import BLOB_KEY, meta
from lance_table.file.pageio import buffers_of
from lance_table.file.v2_0.layout import is_packed_struct, page_encoding
from lance_table.file.v2_1.byteranges import exclusive_cumsum, gather, spans
from lance_table.schema import FieldNode

if TYPE_CHECKING:
    from lance_table.file.reader import LanceFileReader

# Untyped errors damaged bytes may raise (the files are then read one by one, which reports them).
_ERRORS = (LanceTableError, IndexError, KeyError, OverflowError, ValueError, TypeError, pa.ArrowException)
#: rows of a file's page above which it is read on its own
MAX_ROWS = 1 << 16
#: string bytes of one column of a batch above which the files are read one by one
MAX_VAR_BYTES = 2**31 - 1
_INDEX_TYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
# whether a column encoding stores blobs, by its bytes
_BLOBS: dict[bytes, bool] = {}
# how pages of an encoding's bytes decode as an Arrow type (see :func:`_leaf`)
_SHAPES: dict[tuple[bytes, str], Any] = {}
_UNSEEN = object()
_MAX_PARSED = 4096


@dataclass(slots=True)
class Leaf:
    """One page of a column without nesting: ``key`` says how it decodes (pages of one key decode
    together), ``at`` where its buffers are in the file (never changed once made)."""

    key: tuple[Any, ...]  # (kind, bits, has validity); kinds: fixed, bool, binary, dict, nulls
    count: int  # values of the page
    at: tuple[tuple[int, int], ...]  # (validity), values / (ends, bytes) / (indices, ends, bytes)
    adjust: int = 0  # the null adjustment of string end offsets
    items: int = 0  # dictionary items


@dataclass(slots=True)
class Struct:
    """A struct's fields (a 2.0 struct stores no validity of its own)."""

    children: tuple[Node, ...]


@dataclass(slots=True)
class List:
    """A list's end offsets (nulls raised by ``adjust``) and its items."""

    count: int
    at: tuple[int, int]
    adjust: int
    items: int
    child: Node


Node = Leaf | Struct | List


@dataclass(frozen=True, slots=True)
class Shape:
    """How pages of one encoding decode: a :class:`Leaf` without its place (``at``: which of its
    page's buffers hold what)."""

    key: tuple[Any, ...]
    at: tuple[int, ...]
    adjust: int = 0
    items: int = 0


@dataclass(frozen=True, slots=True)
class FileLayout:
    """A read of some columns of a small 2.0 file: the byte span of their pages, and each column."""

    start: int
    length: int
    num_rows: int
    columns: tuple[Node, ...]
    chunks: int = 1  # (pages of one chunk: any read of the file belongs in a batch)


def layout(reader: LanceFileReader, names: Sequence[str]) -> FileLayout | None:
    """The layout of a read of the 2.0 file's columns ``names`` when each is stored as one page
    of uncompressed values, strings or dictionary-encoded strings (in structs and lists or not);
    else None. Kept per reader and selection."""
    key = ("v2.0", *names)
    cache = reader._many_layouts
    try:
        return cache[key]
    except KeyError:
        pass
    if len(cache) >= 16:
        cache.clear()
    try:
        found = _layout(reader, names)
    except _ERRORS:
        found = None
    cache[key] = found
    return found


def _layout(reader: LanceFileReader, names: Sequence[str]) -> FileLayout | None:
    meta = reader.metadata
    if meta.version is not FileVersion.V2_0 or not 0 < meta.num_rows <= MAX_ROWS:
        return None
    by_name = {n.name: n for n in reader._roots}
    cols = []
    for name in names:
        node = by_name.get(name)
        got = None if node is None else _node(reader, node)
        if got is None or not _holds(got, meta.num_rows):
            return None
        cols.append(got)
    places = [p for c in cols for p in _places(c)]
    if not places:
        return None
    start = min(o for o, _ in places)
    end = max(o + s for o, s in places)
    return FileLayout(start, end - start, meta.num_rows, tuple(cols))


def _node(reader: LanceFileReader, node: FieldNode) -> Node | None:
    t = node.arrow_type
    if pa.types.is_struct(t):
        if is_packed_struct(node):
            return None
        kids = [_node(reader, c) for c in node.children]
        return None if any(k is None for k in kids) else Struct(tuple(kids))  # type: ignore[arg-type]
    if node.id in reader._byte_lists:
        return None
    index = reader._col_of.get(node.id)
    if index is None or meta(node, BLOB_KEY) is not None:
        return None
    col = reader.metadata.columns[index]
    if len(col.pages) != 1 or _is_blob(col.encoding, reader):
        return None
    page = col.pages[0]
    enc = page_encoding(page.encoding, reader._stored)
    if enc is None:
        return None
    buffers = buffers_of(page)
    count = int(page.length)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        if enc.WhichOneof("array_encoding") != "list":
            return None
        lst = enc.list
        ends = _flat(_no_nulls(lst.offsets), 64)
        child = _node(reader, node.children[0])
        if ends is None or child is None:
            return None
        adjust = int(lst.null_offset_adjustment)
        return List(count, buffers[ends], adjust, int(lst.num_items), child)
    key = (page.encoding.direct.encoding, node.field.logical_type)
    shape = _SHAPES.get(key, _UNSEEN)
    if shape is _UNSEEN:
        shape = _leaf(enc, t)
        if len(_SHAPES) >= _MAX_PARSED:
            _SHAPES.clear()
        _SHAPES[key] = shape
    if shape is None:
        return None
    return Leaf(shape.key, count, tuple(buffers[i] for i in shape.at), shape.adjust, shape.items)


def _is_blob(enc: Any, reader: LanceFileReader) -> bool:
    """Whether a column's encoding stores blobs (read once for all files of the same bytes)."""
    if enc.WhichOneof("location") != "direct":
        return enc.WhichOneof("location") not in (None, "none")  # (read one by one)
    raw = enc.direct.encoding
    found = _BLOBS.get(raw)
    if found is None:
        _, parsed = unpack_encoding(enc, reader._stored, "a column")
        found = parsed is not None and parsed.WhichOneof("column_encoding") == "blob"
        if len(_BLOBS) >= _MAX_PARSED:
            _BLOBS.clear()
        _BLOBS[raw] = found
    return found


def _no_nulls(enc: Any) -> Any:
    if (
        enc.WhichOneof("array_encoding") == "nullable"
        and enc.nullable.WhichOneof("nullability") == "no_nulls"
    ):
        return enc.nullable.no_nulls.values
    return enc


def _flat(enc: Any, bits: int) -> int | None:
    """Which of its page's buffers an uncompressed flat buffer of ``bits`` per value is."""
    if enc.WhichOneof("array_encoding") != "flat":
        return None
    flat = enc.flat
    if flat.HasField("compression") and flat.compression.scheme not in ("", "none"):
        return None
    if flat.bits_per_value != bits or flat.buffer.buffer_type != 0:
        return None
    return int(flat.buffer.buffer_index)


def _width(t: pa.DataType) -> int | None:
    try:
        bits = t.bit_width
    except ValueError:
        return None
    return bits if bits in (8, 16, 32, 64) else None


def _leaf(enc: Any, t: pa.DataType) -> Shape | None:
    """How a page of ``enc`` decodes as ``t`` (the same for all files of the same encoding bytes),
    or None."""
    kind = enc.WhichOneof("array_encoding")
    validity: tuple[int, ...] = ()
    if kind == "nullable":
        which = enc.nullable.WhichOneof("nullability")
        if which == "all_nulls":
            return Shape(("nulls", 0, False), ())
        if which == "no_nulls":
            enc = enc.nullable.no_nulls.values
        elif which == "some_nulls":
            bitmap = _flat(enc.nullable.some_nulls.validity, 1)
            if bitmap is None:
                return None
            validity = (bitmap,)
            enc = enc.nullable.some_nulls.values
        else:
            return None
        kind = enc.WhichOneof("array_encoding")
    has = bool(validity)
    if pa.types.is_boolean(t):
        at = _flat(enc, 1)
        return None if at is None else Shape(("bool", 1, has), (*validity, at))
    if (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    ):
        if has:
            return None
        if kind == "binary":
            got = _binary(enc.binary)
            return None if got is None else Shape(("binary", 0, False), got[0], adjust=got[1])
        if kind != "dictionary":
            return None
        d = enc.dictionary
        indices = _no_nulls(d.indices)
        if indices.WhichOneof("array_encoding") != "flat" or indices.flat.bits_per_value not in _INDEX_TYPES:
            return None
        bits = int(indices.flat.bits_per_value)
        idx = _flat(indices, bits)
        got = None if d.items.WhichOneof("array_encoding") != "binary" else _binary(d.items.binary)
        if idx is None or got is None:
            return None
        return Shape(("dict", bits, False), (idx, *got[0]), adjust=got[1], items=int(d.num_dictionary_items))
    width = _width(t)
    if width is None or pa.types.is_dictionary(t) or pa.types.is_decimal(t):
        return None
    at = _flat(enc, width)
    return None if at is None else Shape(("fixed", width, has), (*validity, at))


def _binary(enc: Any) -> tuple[tuple[int, int], int] | None:
    ends = _flat(_no_nulls(enc.indices), 64)
    data = _flat(_no_nulls(enc.bytes), 8)
    if ends is None or data is None:
        return None
    return (ends, data), int(enc.null_adjustment)


def _holds(node: Node, rows: int) -> bool:
    """Whether a column (each field of a struct) holds a value for each of the file's ``rows``
    (else the file is read on its own, which says what is wrong)."""
    if isinstance(node, Struct):
        return all(_holds(c, rows) for c in node.children)
    return node.count == rows


def _places(node: Node) -> list[tuple[int, int]]:
    if isinstance(node, Struct):
        return [p for c in node.children for p in _places(c)]
    if isinstance(node, List):
        return [node.at, *_places(node.child)]
    return list(node.at)


def decode(
    layouts: Sequence[FileLayout], data: memoryview, bases: np.ndarray, column: int, dtype: pa.DataType
) -> pa.Array | None:
    """Every row of column ``column`` (of the layouts' selection) of the files, one file after
    another, from their bytes ``data`` (the file of ``layouts[k]`` from ``bases[k]``); None when
    the files must be read one by one."""
    try:
        u8 = np.frombuffer(data, np.uint8)
        # the pages' places are the file's: each file's bytes in ``data`` start at its span's start
        origins = bases - np.fromiter((f.start for f in layouts), np.int64, len(layouts))
        return _decoded([f.columns[column] for f in layouts], u8, origins, dtype)
    except _ERRORS:
        return None


def _decoded(nodes: list[Any], u8: np.ndarray, bases: np.ndarray, dtype: pa.DataType) -> pa.Array | None:
    first = nodes[0]
    if isinstance(first, Struct):
        if not pa.types.is_struct(dtype) or not all(isinstance(n, Struct) for n in nodes):
            return None
        kids = []
        for i, field in enumerate(dtype):
            got = _decoded([n.children[i] for n in nodes], u8, bases, field.type)
            if got is None:
                return None
            kids.append(got)
        return pa.StructArray.from_arrays(kids, fields=list(dtype))
    if isinstance(first, List):
        return _list(nodes, u8, bases, dtype)
    if not all(isinstance(n, Leaf) for n in nodes):
        return None
    key = first.key
    if all(n.key == key for n in nodes):
        return _leaves(nodes, u8, bases, dtype)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for k, n in enumerate(nodes):
        groups.setdefault(n.key, []).append(k)
    counts = np.fromiter((n.count for n in nodes), np.int64, len(nodes))
    starts = exclusive_cumsum(counts)
    parts, order = [], []
    for members in groups.values():
        sel = np.asarray(members, np.int64)
        got = _leaves([nodes[k] for k in members], u8, bases[sel], dtype)
        if got is None:
            return None
        parts.append(got)
        order.append(spans(starts[sel], counts[sel]))
    where = np.empty(int(counts.sum()), np.int64)
    where[np.concatenate(order)] = np.arange(where.size)
    return pa.concat_arrays(parts).take(pa.array(where))


def _buffers(
    nodes: Sequence[Any], u8: np.ndarray, bases: np.ndarray, b: int
) -> tuple[np.ndarray, np.ndarray]:
    """Where buffer ``b`` of each page is in the joined bytes, and its size (checked to lie there)."""
    at = bases + np.fromiter((n.at[b][0] for n in nodes), np.int64, len(nodes))
    size = np.fromiter((n.at[b][1] for n in nodes), np.int64, len(nodes))
    if bool(np.any(at < 0)) or int((at + size).max()) > u8.size:
        raise IndexError("a page's buffer lies outside its file's span")
    return at, size


def _bits(u8: np.ndarray, at: np.ndarray, size: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The first ``counts`` bits (least significant first) of the bitmaps at ``at``, joined."""
    if bool(np.any((counts + 7) // 8 > size)):
        raise IndexError("a bitmap is shorter than its page")
    nbytes = (counts + 7) // 8
    raw = np.frombuffer(gather(u8.data, at, nbytes), np.uint8)
    bits = np.unpackbits(raw, bitorder="little")
    return bits[spans(exclusive_cumsum(nbytes) * 8, counts)].astype(bool)


def _leaves(nodes: list[Leaf], u8: np.ndarray, bases: np.ndarray, dtype: pa.DataType) -> pa.Array | None:
    kind, bits, has = nodes[0].key
    counts = np.fromiter((n.count for n in nodes), np.int64, len(nodes))
    total = int(counts.sum())
    if kind == "nulls":
        return pa.nulls(total, dtype)
    valid = None
    if has:
        valid = _bits(u8, *_buffers(nodes, u8, bases, 0), counts)
    b = 1 if has else 0
    if kind == "bool":
        values = _bits(u8, *_buffers(nodes, u8, bases, b), counts)
        arr = pa.Array.from_buffers(
            dtype, total, [None, pa.py_buffer(np.packbits(values, bitorder="little"))]
        )
    elif kind == "fixed":
        if _width(dtype) != bits:
            return None
        at, size = _buffers(nodes, u8, bases, b)
        width = counts * (bits // 8)
        if bool(np.any(width > size)):
            return None
        arr = pa.Array.from_buffers(dtype, total, [None, pa.py_buffer(gather(u8.data, at, width))])
    elif kind == "binary":
        got = _strings(nodes, u8, bases, 0, counts, dtype)
        if got is None:
            return None
        arr = got
    else:  # a dictionary of strings: index 0 is null, i is item i - 1
        items = np.fromiter((n.items for n in nodes), np.int64, len(nodes))
        dictionary = _strings(nodes, u8, bases, 1, items, dtype)
        at, size = _buffers(nodes, u8, bases, 0)
        width = counts * (bits // 8)
        if dictionary is None or bool(np.any(width > size)):
            return None
        idx = np.frombuffer(gather(u8.data, at, width), _INDEX_TYPES[bits]).astype(np.int64)
        if idx.size and bool(np.any(idx > np.repeat(items, counts))):
            return None
        null = idx == 0
        idx += np.repeat(exclusive_cumsum(items), counts) - 1
        arr = dictionary.take(pa.array(idx, mask=null if null.any() else None))
    if len(arr) != total:
        return None
    return arr if valid is None else with_validity(arr, valid)


def _strings(
    nodes: list[Leaf], u8: np.ndarray, bases: np.ndarray, b: int, counts: np.ndarray, dtype: pa.DataType
) -> pa.Array | None:
    """The strings of the pages' end offsets (buffer ``b``) and bytes (buffer ``b + 1``), ``counts``
    of each page (the checks of the one-file decoder: ends that do not decrease, within the bytes)."""
    ends_at, ends_size = _buffers(nodes, u8, bases, b)
    data_at, data_size = _buffers(nodes, u8, bases, b + 1)
    if bool(np.any(counts * 8 > ends_size)):
        return None
    raw = np.frombuffer(gather(u8.data, ends_at, counts * 8), np.uint64).astype(np.int64)
    if bool(np.any(raw < 0)):
        return None
    adjust = np.repeat(np.fromiter((n.adjust for n in nodes), np.int64, len(nodes)), counts)
    valid = (raw < adjust) | (adjust == 0)
    ends = np.where(valid, raw, raw - adjust)
    first = exclusive_cumsum(counts)
    prev = np.empty_like(ends)
    if ends.size:
        prev[1:] = ends[:-1]
    has = counts > 0
    prev[first[has]] = 0
    lengths = ends - prev
    if lengths.size and int(lengths.min()) < 0:
        return None
    last = np.zeros(len(nodes), np.int64)
    last[has] = ends[first[has] + counts[has] - 1]
    if bool(np.any(last > data_size)) or int(last.sum()) > MAX_VAR_BYTES:
        return None
    data = pa.py_buffer(gather(u8.data, data_at, last))
    offsets = np.zeros(ends.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    nulls = int(ends.size - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    off = pa.py_buffer(offsets if large else offsets.astype(np.int32))
    return pa.Array.from_buffers(dtype, ends.size, [bitmap, off, data], null_count=nulls)


def _list(nodes: list[Any], u8: np.ndarray, bases: np.ndarray, dtype: pa.DataType) -> pa.Array | None:
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)) or not all(
        isinstance(n, List) for n in nodes
    ):
        return None
    counts = np.fromiter((n.count for n in nodes), np.int64, len(nodes))
    at = bases + np.fromiter((n.at[0] for n in nodes), np.int64, len(nodes))
    size = np.fromiter((n.at[1] for n in nodes), np.int64, len(nodes))
    if bool(np.any(at < 0)) or int((at + size).max()) > u8.size or bool(np.any(counts * 8 > size)):
        return None
    raw = np.frombuffer(gather(u8.data, at, counts * 8), np.uint64).astype(np.int64)
    adjust = np.repeat(np.fromiter((n.adjust for n in nodes), np.int64, len(nodes)), counts)
    valid = (raw < adjust) | (adjust == 0)
    ends = np.where(valid, raw, raw - adjust)
    first = exclusive_cumsum(counts)
    prev = np.empty_like(ends)
    if ends.size:
        prev[1:] = ends[:-1]
    has = counts > 0
    prev[first[has]] = 0
    lengths = ends - prev
    if lengths.size and int(lengths.min()) < 0:
        return None
    items = np.fromiter((n.items for n in nodes), np.int64, len(nodes))
    last = np.zeros(len(nodes), np.int64)
    last[has] = ends[first[has] + counts[has] - 1]
    if bool(np.any(last > items)):
        return None
    child_counts = np.fromiter((_count(n.child) for n in nodes), np.int64, len(nodes))
    if bool(np.any(child_counts != items)) or bool(np.any(last != items)):
        return None  # items past the last list: read one by one
    child = _decoded([n.child for n in nodes], u8, bases, dtype.value_type)
    if child is None or len(child) != int(items.sum()):
        return None
    large = pa.types.is_large_list(dtype)
    offsets = np.zeros(ends.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not large and offsets[-1] >= 2**31:
        return None
    mask = pa.array(~valid) if not valid.all() else None
    cls = pa.LargeListArray if large else pa.ListArray
    off = pa.array(offsets if large else offsets.astype(np.int32))
    return cls.from_arrays(off, child, type=dtype, mask=mask)


def _count(node: Node) -> int:
    """The values of a (list's item) field's page; a struct's, its first field's."""
    if isinstance(node, Struct):
        return _count(node.children[0]) if node.children else -1
    return node.count
