"""Where the pages of a small 2.0 file's columns are and how they decode (see :mod:`small_many`).

Each column of one page is described once per file and selection: a :class:`Leaf` per page of
values (its buffers' places in the file and what decodes them, read from the page's encoding once
for all files that store the same encoding bytes), :class:`Pages` of a column without nesting
stored in several pages (pylance's 2.0 writer splits a 20k-row file's vectors in two), a
:class:`Struct` of its fields' columns, a :class:`List` of its offsets' page and its items'
column. :func:`layout` returns None for a file of other pages (a list's offsets or items in
several pages, compressed buffers, packed structs, blobs...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_table._lru import LRU
from lance_table.errors import LanceTableError
from lance_table.file.container import FileVersion, unpack_encoding
from lance_table.file.fields import BLOB_KEY, meta
from lance_table.file.pageio import buffers_of
from lance_table.file.v2_0.layout import is_packed_struct, page_encoding
from lance_table.schema import FieldNode

if TYPE_CHECKING:
    from lance_table.file.reader import LanceFileReader

#: untyped errors damaged bytes may raise (the files are then read one by one, which reports them).
ERRORS = (LanceTableError, IndexError, KeyError, OverflowError, ValueError, TypeError, pa.ArrowException)
#: rows of a file's page above which it is read on its own
MAX_ROWS = 1 << 16
#: string bytes of one column of a batch above which the files are read one by one
MAX_VAR_BYTES = 2**31 - 1
#: pages of one column above which a file is read on its own
MAX_PAGES = 64
INDEX_TYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
# whether a column encoding stores blobs, by its bytes
_BLOBS: LRU[bytes, bool] = LRU(4096)
# how pages of an encoding's bytes decode as an Arrow type (see :func:`_leaf`; in a 1-tuple, as
# that is None for pages a batch does not decode)
_SHAPES: LRU[tuple[bytes, str], tuple[Any]] = LRU(4096)


@dataclass(slots=True)
class Leaf:
    """One page of a column without nesting: ``key`` says how it decodes (pages of one key decode
    together), ``at`` where its buffers are in the file (never changed once made)."""

    key: tuple[Any, ...]  # (kind, bits, has validity); kinds: fixed, bool, binary, dict, vectors, nulls
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


@dataclass(slots=True)
class Pages:
    """A column without nesting stored in several pages (each a :class:`Leaf`), in row order."""

    pages: tuple[Leaf, ...]

    @property
    def count(self) -> int:
        """The values of all the pages."""
        return sum(p.count for p in self.pages)


Node = Leaf | Pages | Struct | List


@dataclass(frozen=True, slots=True)
class Shape:
    """How pages of one encoding decode: a :class:`Leaf` without its place (``at``: which of its
    page's buffers hold what)."""

    key: tuple[Any, ...]
    at: tuple[int, ...]
    adjust: int = 0
    items: int = 0


# (not frozen: a frozen dataclass is 5x slower to make, and one is made per file read;
# never changed after it is made)
@dataclass(slots=True, unsafe_hash=True)
class FileLayout:
    """A read of some columns of a small 2.0 file: the byte span of their pages, and each column."""

    start: int
    length: int
    num_rows: int
    columns: tuple[Node, ...]
    chunks: int = 1  # (pages of one chunk: any read of the file belongs in a batch)


def layout(reader: LanceFileReader, names: Sequence[str]) -> FileLayout | None:
    """The layout of a read of the 2.0 file's columns ``names`` when each is stored as one page
    of uncompressed values, strings or dictionary-encoded strings (in structs and lists or not;
    a column without nesting in several such pages too); else None. Kept per reader and selection."""

    def make() -> FileLayout | None:
        try:
            return _layout(reader, names)
        except ERRORS:
            return None

    return reader.kept_layout(("v2.0", *names), make)


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
    if not col.pages or _is_blob(col.encoding, reader):
        return None
    is_list = pa.types.is_list(t) or pa.types.is_large_list(t)
    if len(col.pages) > 1:
        if is_list or len(col.pages) > MAX_PAGES:
            return None
        leaves = [_page(reader, node, t, p, buffers_of(p)) for p in col.pages]
        if any(leaf is None for leaf in leaves):
            return None
        return Pages(tuple(leaves))  # type: ignore[arg-type]
    page = col.pages[0]
    first = reader.metadata.first_buffers
    buffers = first[index] if first else buffers_of(page)
    if not is_list:
        return _page(reader, node, t, page, buffers)
    enc = page_encoding(page.encoding, reader._stored)
    if enc is None:
        return None
    if enc.WhichOneof("array_encoding") != "list":
        return None
    lst = enc.list
    ends = _flat(_no_nulls(lst.offsets), 64)
    child = _node(reader, node.children[0])
    if ends is None or child is None or _paged(child):  # (a list's items: in one page)
        return None
    adjust = int(lst.null_offset_adjustment)
    return List(int(page.length), buffers[ends], adjust, int(lst.num_items), child)


def _paged(node: Node) -> bool:
    """Whether a column (a field of a struct) is stored in several pages."""
    return isinstance(node, Pages) or (isinstance(node, Struct) and any(map(_paged, node.children)))


def _page(
    reader: LanceFileReader, node: FieldNode, t: pa.DataType, page: Any, buffers: tuple[tuple[int, int], ...]
) -> Leaf | None:
    """One page of a column without nesting as a :class:`Leaf` (None: not one a batch decodes)."""
    enc = page_encoding(page.encoding, reader._stored)
    if enc is None:
        return None
    key = (page.encoding.direct.encoding, node.field.logical_type)
    kept = _SHAPES.get(key)
    if kept is None:
        kept = (_leaf(enc, t),)
        _SHAPES.put(key, kept)
    shape = kept[0]
    if shape is None:
        return None
    return Leaf(shape.key, int(page.length), tuple(buffers[i] for i in shape.at), shape.adjust, shape.items)


def _is_blob(enc: Any, reader: LanceFileReader) -> bool:
    """Whether a column's encoding stores blobs (read once for all files of the same bytes)."""
    if enc.WhichOneof("location") != "direct":
        return enc.WhichOneof("location") not in (None, "none")  # (read one by one)
    raw = enc.direct.encoding
    found = _BLOBS.get(raw)
    if found is None:
        _, parsed = unpack_encoding(enc, reader._stored, "a column")
        found = parsed is not None and parsed.WhichOneof("column_encoding") == "blob"
        _BLOBS.put(raw, found)
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


def value_bits(t: pa.DataType) -> int | None:
    """The bits of a value of ``t`` when they are a whole machine word (8 to 64), else None."""
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
        if indices.WhichOneof("array_encoding") != "flat" or indices.flat.bits_per_value not in INDEX_TYPES:
            return None
        bits = int(indices.flat.bits_per_value)
        idx = _flat(indices, bits)
        got = None if d.items.WhichOneof("array_encoding") != "binary" else _binary(d.items.binary)
        if idx is None or got is None:
            return None
        return Shape(("dict", bits, False), (idx, *got[0]), adjust=got[1], items=int(d.num_dictionary_items))
    if pa.types.is_fixed_size_list(t):  # (vectors) of fixed-width values without nulls of their own
        fsl = enc.fixed_size_list
        width = value_bits(t.value_type)
        if kind != "fixed_size_list" or fsl.dimension != t.list_size or width is None:
            return None
        if pa.types.is_decimal(t.value_type) or pa.types.is_dictionary(t.value_type):
            return None
        at = _flat(_no_nulls(fsl.items), width)
        return None if at is None else Shape(("vectors", width, has), (*validity, at))
    width = value_bits(t)
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
    if isinstance(node, Pages):
        return [p for leaf in node.pages for p in leaf.at]
    if isinstance(node, Struct):
        return [p for c in node.children for p in _places(c)]
    if isinstance(node, List):
        return [node.at, *_places(node.child)]
    return list(node.at)
