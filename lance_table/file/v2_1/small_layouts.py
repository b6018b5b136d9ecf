"""Where the pages of a read of some columns of a small 2.1/2.2 file are, and how they decode (a
part of :mod:`small_many`).

:func:`layout` describes a file's read of some columns when every one is a page :mod:`small_many`
decodes in a batch with the same column of other files: a column without nesting stored as one
page of mini-block chunks (values, or indices into a dictionary), a constant page without levels
(:mod:`small_constant`), or a field with structs and lists whose leaves are such pages
(:mod:`small_nested`). Layouts are kept per reader and selection; pages of files that share an
encoding get the same (interned) key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_table._lru import LRU
from lance_table.errors import LanceTableError
from lance_table.file.column_list import buffers_end
from lance_table.file.container import URL_PAGE_LAYOUT, FileVersion, unpack_encoding
from lance_table.file.field_shapes import FLAT, NESTED, field_shape, leaf_paths
from lance_table.file.pageio import buffers_of
from lance_table.file.v2_1 import small_constant, small_nested
from lance_table.file.v2_1.layout import is_packed_struct
from lance_table.file.v2_1.miniblock_small import GENERAL, SmallPage, plan
from lance_table.file.v2_1.values import byte_width, is_binary

if TYPE_CHECKING:
    from lance_table.file.reader import LanceFileReader
    from lance_table.schema import FieldNode

# Untyped errors damaged bytes may raise (the files are then read one by one, which reports them).
ERRORS = (LanceTableError, IndexError, KeyError, OverflowError, ValueError, TypeError, pa.ArrowException)

# interned encoding keys: chunks of files whose keys are the same object decode as one batch
_MAX_KEYS = 4096
_KEYS: LRU[tuple[Any, ...], tuple[Any, ...]] = LRU(_MAX_KEYS)
#: pages of several chunks are batched up to this many rows (a fragment of a few read ranges)
MAX_PAGE_ROWS = 1 << 18
#: bytes between a file's selected pages a batch reads along with them (pages of many chunks)
SPAN_SLACK = 64 * 1024
#: a read of at least this share of a file's rows reads its pages of many chunks whole, in a
#: batch; fewer rows (a take) are picked from their chunks by the file's own reader
DENSE_ROWS = 0.5
#: runs of rows per chunk of pages of strings in a general compression from which a read of them
#: decodes their pages whole in a batch (see :func:`worth_batching`): rows scattered at random in
#: twice as many runs as chunks leave few chunks (one in seven) without one
SPREAD_RUNS = 2
#: a span of pages of many chunks this small is read and decoded whole by any read, even of a few
#: rows: one request brings it as fast as its chunks, and decoding it in a batch costs less than
#: the file's own reader picking the rows from their chunks (a take of a few rows of each of
#: hundreds of small fragments)
SMALL_SPAN_BYTES = 64 * 1024


# (not frozen: a frozen dataclass is 5x slower to make, and one is made per file read;
# never changed after it is made)
@dataclass(slots=True, unsafe_hash=True)
class ColumnLayout:
    """Where one column's page of one file is (relative to the file's span) and how it decodes."""

    meta_at: int  # the page's chunk table (one word)
    data_at: int  # the page's one chunk
    data_size: int
    page: SmallPage
    encoding: Any  # the value compression (a protobuf message)
    key: tuple[Any, ...]  # interned: same object for the same encoding
    chunks: int = 1  # mini-block chunks of the page (its chunk table's words)
    #: a page of dictionary indices: its dictionary's place and size, item count and compression
    dict_at: int = -1
    dict_size: int = 0
    dict_items: int = 0
    dict_encoding: Any = None


# (not frozen: a frozen dataclass is 5x slower to make, and one is made per file read;
# never changed after it is made)
@dataclass(slots=True, unsafe_hash=True)
class FileLayout:
    """A read of some columns of a small file: the byte span holding their pages, and each page."""

    start: int
    length: int
    num_rows: int
    columns: tuple[ColumnLayout | small_nested.NestedLayout | small_constant.ConstantLayout, ...]
    #: the most chunks of a page: a file of pages of one chunk is read whole by any read; one of
    #: pages of many chunks only by a read of most of its rows (see :func:`worth_batching`)
    chunks: int = 1
    #: every page of many chunks holds strings in a general compression (each chunk one block)
    general: bool = False


def layout(reader: LanceFileReader, names: Sequence[str]) -> FileLayout | None:
    """The layout of a read of the file's columns ``names`` when every one is a column without
    nesting stored as one page of one small chunk (see :mod:`miniblock_small`), of values or of
    indices into a dictionary, or strings in a general compression (zstd, LZ4: our own writer's
    strings; see :func:`miniblock_small.plan`), or as a constant page, or a field with nesting
    whose leaves are such pages (see :mod:`small_nested`); else None. Kept per reader and
    selection."""
    return reader.kept_layout(tuple(names), lambda: _layout(reader, names))


def _layout(reader: LanceFileReader, names: Sequence[str]) -> FileLayout | None:
    meta = reader.metadata
    if meta.version is FileVersion.V2_0 or not meta.num_rows:
        return None
    shapes = _shapes(reader._roots, names)
    if shapes is None:
        return None
    large = meta.version is FileVersion.V2_2
    num_rows = meta.num_rows
    columns, col_of = meta.columns, reader._col_of
    found: list[_Column] = []
    keys, stored = [], []
    for node, _, leaf_ids in shapes:
        indices = [col_of.get(i) for i in leaf_ids]
        if None in indices:
            return None
        # a column described by the same bytes as one of a file read before (of these fields and
        # rows) has that one's layout: its metadata is not parsed again
        blobs = [columns.blob(i) for i in indices]  # type: ignore[arg-type]
        keys.append((id(node), large, num_rows, *blobs))
        stored.append((indices, blobs))
    limit = columns.limit
    for (node, shape, _), key, (indices, blobs), hit in zip(shapes, keys, stored, _COLUMNS.get_many(keys)):
        if hit is None and shape == FLAT:
            # a constant of another value (the same field of another append): the layout of the
            # same bytes but for the value
            hit = _like_constant((id(node), large, num_rows, len(blobs[0])), node, blobs[0])
        if hit is None or hit.node is not node:
            hit = _column(reader, node, shape, large, indices)  # type: ignore[arg-type]
            if hit is None:
                return None
            if hit.kept:
                _COLUMNS.put(key, hit, _ENTRY_BYTES + sum(map(len, blobs)))
                if hit.constant is not None:
                    _remember_constant((id(node), large, num_rows, len(blobs[0])), hit, blobs[0])
        elif hit.end > limit:
            return None  # a buffer past the file's data: the file's own reader says so
        found.append(hit)
    if not found:
        return None
    start, end, needed, most, general = -1, 0, 0, 1, True
    for col in found:
        if col.chunks > most:
            most = col.chunks
        if col.chunks > 1 and not col.general:
            general = False
        if col.buffers:
            if start < 0 or col.lo < start:
                start = col.lo
            if col.hi > end:
                end = col.hi
            needed += col.needed
    start = max(start, 0)
    if most > 1 and end - start > 2 * needed + SPAN_SLACK:
        return None  # the pages lie far apart: their span would read much that is not theirs
    pages = tuple(col.at(start) for col in found)
    return FileLayout(start, end - start, num_rows, pages, most, general and most > 1)


class _Column:
    """What a read of one field of a file needs, made from its columns' metadata (see
    :func:`_column`): the pages' buffers (file offsets), the chunks of its page, and its layout
    relative to a file's span from a given start (made once per start). Kept by the bytes of the
    columns' metadata: the files of a living table mostly repeat them."""

    __slots__ = (
        "_at",
        "_make",
        "buffers",
        "chunks",
        "constant",
        "end",
        "general",
        "hi",
        "kept",
        "lo",
        "needed",
        "node",
    )

    def __init__(
        self,
        node: FieldNode,
        buffers: tuple[tuple[int, int], ...],
        chunks: int,
        make: Callable[[int], Any],
        end: int,
        kept: bool,
    ) -> None:
        self.node = node
        self.buffers = buffers
        # where the buffers start and end (file offsets), and their bytes
        self.lo = min((o for o, _ in buffers), default=0)
        self.hi = max((o + s for o, s in buffers), default=0)
        self.needed = sum(s for _, s in buffers)
        self.chunks = chunks
        self._make = make
        self.end = end  # the furthest byte of the columns' buffers (all pages')
        self.kept = kept  # whether it depends on nothing but the columns' metadata
        #: a constant page of an inline value: its layout (the same for any start)
        self.constant: small_constant.ConstantLayout | None = None
        #: a page of strings in a general compression
        self.general = False
        self._at: dict[int, Any] = {}

    def at(self, start: int) -> Any:
        """The layout with its places relative to a file's span from ``start``."""
        found = self._at.get(start)
        if found is None:
            if len(self._at) >= 8:
                self._at.clear()
            found = self._at[start] = self._make(start)
        return found


def _column(
    reader: LanceFileReader, node: FieldNode, shape: int, large: bool, indices: list[int]
) -> _Column | None:
    """The read of field ``node`` (stored in the columns ``indices``) of a file, when a batch
    reads it; else None."""
    meta = reader.metadata
    columns, values, first = meta.columns, meta.column_values, meta.first_buffers
    try:
        if shape == NESTED:
            got = small_nested.layout(reader, node, large, _interned)
            if got is None:
                return None
            nested = got[0]
            made = _Column(node, tuple(got[1]), 1, partial(small_nested.shifted, nested), 0, False)
        else:
            # the column's one page (its description as the file's reader would read it)
            (index,) = indices
            if values[index] != meta.num_rows or len(columns[index].pages) != 1:
                return None
            desc = columns[index].pages[0]
            url, encoding = unpack_encoding(desc.encoding, reader._stored, "")
            if url != URL_PAGE_LAYOUT:
                return None
            buffers = first[index] if first else buffers_of(desc)
            if encoding.WhichOneof("layout") == "constant_layout":
                const = small_constant.layout(encoding, buffers, 1, node.arrow_type, _interned)
                if const is None:
                    return None
                shift: Callable[[int], Any] = partial(small_constant.shifted, const[0])
                made = _Column(node, tuple(const[1]), 1, shift, 0, False)
                if const[0].value:
                    made.constant = const[0]
            else:
                form = _form(encoding, node.arrow_type, large)
                if form is None or len(buffers) != (2 if form[0].dictionary is None else 3):
                    return None
                page, value_enc, interned = form
                chunks, rest = divmod(buffers[0][1], _word(large))
                if rest or not chunks or (chunks > 1 and page.num_items > MAX_PAGE_ROWS):
                    return None
                if page.num_items != meta.num_rows or not 0 < page.num_items <= max(1 << 16, MAX_PAGE_ROWS):
                    return None
                shift = partial(
                    _column_layout, buffers, page=page, value_enc=value_enc, key=interned, chunks=chunks
                )
                made = _Column(node, tuple(buffers), chunks, shift, 0, False)
                made.general = page.kind == GENERAL
        # kept for other files only when the encodings are in the metadata (not in the file)
        pbs = [columns[i] for i in indices]
        made.kept = all(p.encoding.WhichOneof("location") == "direct" for pb in pbs for p in pb.pages)
        made.end = max(map(buffers_end, pbs))
    except ERRORS:
        return None
    return made


def _like_constant(key: tuple[Any, ...], node: FieldNode, blob: bytes) -> _Column | None:
    """The read of a field stored as a constant page of an inline value whose metadata is that
    of a column read before (:data:`_CONSTANTS`) but for the value; else None."""
    kept = _CONSTANTS.get(key)
    if kept is None or kept[0] is not node:
        return None
    found = small_constant.like(kept[1], blob)
    if found is None:
        return None
    made = _Column(node, (), 1, partial(small_constant.shifted, found), kept[2], True)
    made.constant = found
    return made


def _remember_constant(key: tuple[Any, ...], column: _Column, blob: bytes) -> None:
    """Keep a field's read from a constant page of an inline value as the template of others'."""
    template = None if column.constant is None else small_constant.template(blob, column.constant)
    if template is not None:
        _CONSTANTS.put(key, (column.node, template, column.end), _ENTRY_BYTES + len(blob))


def _word(large: bool) -> int:
    """The bytes of one word of a page's chunk table (2.2: 4, 2.1: 2)."""
    return 4 if large else 2


#: what is kept per column besides its metadata's bytes (see :func:`_layout`)
_ENTRY_BYTES = 2048
#: the reads of fields of files (see :class:`_Column`), by the field and its columns' metadata
_COLUMNS: LRU[tuple[Any, ...], _Column] = LRU(_MAX_KEYS, max_bytes=32 << 20)
#: fields stored as constant pages of an inline value (a field that is the same in every row
#: of an append, and changes from one to the next), by the field, row count and metadata size:
#: the field's node, its metadata as a template for the files of other values, and the furthest
#: byte of its buffers
_CONSTANTS: LRU[tuple[Any, ...], tuple[FieldNode, small_constant.Template, int]] = LRU(256, max_bytes=4 << 20)


def _shapes(
    roots: list[FieldNode], names: Sequence[str]
) -> list[tuple[FieldNode, int, tuple[int, ...]]] | None:
    """The fields ``names`` of a file with these top-level fields, each with how a batch reads
    it (``NESTED``: by its leaves; ``FLAT``: as one page) and the ids of the fields stored in its
    columns (its leaves', or its own), or None when one of them is not read
    in a batch (missing, a dictionary type, a struct without leaves or packed). Kept per field
    tree: the files of a dataset share theirs (see ``schema.build_tree``)."""
    key = (tuple(map(id, roots)), tuple(names))
    hit = _SHAPES.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], roots)):
        return hit[1]
    by_name = {n.name: n for n in roots}
    found: list[tuple[FieldNode, int, tuple[int, ...]]] | None = []
    for name in names:
        node = by_name.get(name)
        shape = None if node is None else field_shape(node)
        if node is not None and shape == NESTED and not is_packed_struct(node):
            found.append((node, NESTED, tuple(leaf.id for leaf, _ in leaf_paths(node, []))))  # type: ignore[union-attr]
        elif node is None or shape != FLAT or pa.types.is_dictionary(node.arrow_type):
            found = None
            break
        else:
            found.append((node, FLAT, (node.id,)))  # type: ignore[union-attr]
    _SHAPES.put(key, (tuple(roots), found))  # (the nodes are kept: their ids stay theirs)
    return found


# the batch shapes of selections of fields, by the identity of the file's top-level fields
_SHAPES: LRU[
    tuple[Any, ...], tuple[tuple[FieldNode, ...], list[tuple[FieldNode, int, tuple[int, ...]]] | None]
] = LRU(_MAX_KEYS)


def _form(layout: Any, dtype: pa.DataType, large: bool) -> tuple[SmallPage, Any, tuple[Any, ...]] | None:
    """The page description, value compression and interned encoding key of a column's page
    layout (see :func:`_layout`), or None when a batch does not decode it. Kept per layout
    message: the files of a dataset share theirs (see ``container.unpack_encoding``)."""
    key = (id(layout), dtype, large)
    hit = _FORMS.get(key)
    if hit is not None and hit[0] is layout:
        return hit[1]
    page = plan(layout, large, general=True)
    if page is not None and page.kind == GENERAL and not is_binary(dtype):
        page = None
    if page is None and pa.types.is_fixed_size_list(dtype):
        page = _list_page(layout, dtype, large)
    found: tuple[SmallPage, Any, tuple[Any, ...]] | None = None
    if page is not None:
        enc = layout.mini_block_layout
        value_enc = enc.value_compression
        defs = enc.def_compression.SerializeToString() if enc.HasField("def_compression") else None
        dictionary = enc.dictionary.SerializeToString() if page.dictionary is not None else None
        # (the value buffers per chunk too: run values and lengths in one block or apart share
        # their compression message, and the chunk headers differ)
        ident = (large, value_enc.SerializeToString(), defs, tuple(enc.layers), dictionary, page.buffers)
        found = (page, value_enc, _interned(ident))
    _FORMS.put(key, (layout, found))  # (the layout is kept: its id stays its own)
    return found


# the forms of page layouts, by the layout message's id (see _form)
_FORMS: LRU[tuple[Any, ...], tuple[Any, tuple[SmallPage, Any, tuple[Any, ...]] | None]] = LRU(_MAX_KEYS)


def _interned(ident: tuple[Any, ...]) -> tuple[Any, ...]:
    """One object per encoding key: chunks of files whose keys are the same object decode as one."""
    return _KEYS.setdefault(ident, ident)


def _column_layout(
    buffers: Sequence[tuple[int, int]], start: int, *, page: SmallPage, value_enc: Any, key: Any, chunks: int
) -> ColumnLayout:
    """A page's place relative to its file's span (``start``) and how it decodes."""
    (meta_at, _), (data_at, data_size) = buffers[0], buffers[1]
    mini = page.dictionary
    if mini is None:
        return ColumnLayout(meta_at - start, data_at - start, data_size, page, value_enc, key, chunks)
    dict_at, dict_size = buffers[2]
    return ColumnLayout(
        meta_at - start,
        data_at - start,
        data_size,
        page,
        value_enc,
        key,
        chunks,
        dict_at - start,
        dict_size,
        int(mini.num_dictionary_items),
        mini.dictionary,
    )


def _list_page(encoding: Any, dtype: pa.DataType, large: bool) -> SmallPage | None:
    """The page of a column of fixed-size lists (of lists...) of plain values of ``dtype``'s
    sizes, without validity below the rows (vectors): :func:`batch.values` decodes its chunks
    as values of the whole list's width."""
    items = 1
    while pa.types.is_fixed_size_list(dtype):
        items *= dtype.list_size
        dtype = dtype.value_type
    width = byte_width(dtype)
    if not width or pa.types.is_boolean(dtype) or not items:
        return None
    page = plan(encoding, large, items)
    return page if page is not None and page.bits == items * width * 8 else None


def decode_keys(cols: Sequence[Any]) -> list[Any]:
    """Which pages of one column of many files decode together: those of one encoding key, or,
    pages of FSST strings, of one key but for the symbol table (their chunks are parsed and their
    strings cut out together, then each file's decompressed with its own table)."""
    if any(
        not isinstance(c, ColumnLayout) or c.dict_at >= 0 or c.encoding.WhichOneof("compression") != "fsst"
        for c in cols
    ):
        return [id(c.key) for c in cols]
    # (the key's second part is the value compression: see ``_form``)
    return [(c.key[0], c.encoding.fsst.values.SerializeToString(), *c.key[2:]) for c in cols]


def worth_batching(file: FileLayout, rows: int, runs: int = 0) -> bool:
    """Whether a read of ``rows`` rows of a file with this layout belongs in a batch: a file of
    pages of one chunk (a few hundred rows) always; pages of many chunks, which a batch decodes
    whole, when most of their rows are read or when their span is at most
    :data:`SMALL_SPAN_BYTES`; pages of strings in a general compression when the rows lie in
    :data:`SPREAD_RUNS` times as many ``runs`` as the pages have chunks (a filter's scattered
    rows: most chunks hold one): a read of a few rows decompresses every chunk a row lies in
    whole, and a batch decompresses those of all its files in one call."""
    return (
        file.chunks == 1
        or file.length <= SMALL_SPAN_BYTES
        or rows >= DENSE_ROWS * file.num_rows
        or (file.general and runs >= SPREAD_RUNS * file.chunks)
    )
