"""Column and page writing for Lance 2.1/2.2 files.

One column per leaf (:func:`layout.leaf_columns`). Each leaf's writer shreds the incoming arrays of
its top-level field into levels and values (:mod:`levels`), buffers them and, once they pass the
page budget, writes pages of whole rows. Each page picks its layout from its data:

* constant: no valid value at all (nulls, null or empty lists); levels are stored raw when they say
  more than "every leaf is null" (the layout pylance writes for such pages), and ``struct<>``;
* mini-block (:mod:`miniblock_encode`): values narrower than 256 bytes, pylance's threshold, and
  wider binary values that are few distinct ones (a dictionary) or, in 2.2, a few hundred bytes
  each (zstd chunks; see :func:`fullzip_values.wide_values`);
* full-zip (:mod:`fullzip_encode`): other wide values, and narrow ones whose levels cannot fit a
  chunk;
* Arrow dictionary arrays: mini-block indices (the key type's width) with the page's whole
  dictionary, as pylance stores them;
* blob (:mod:`blob_encode`): descriptors of values written outside the pages;
* full-zip ``variable_packed_struct`` values for packed structs with variable-width children
  (:mod:`packed_var_encode`, 2.2 only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from lance_table._lru import LRU
from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.errors import PackedStructError, UnsupportedFormatError
from lance_table.file.fields import array_overhead, is_blob
from lance_table.file.v2_1 import tiny_page
from lance_table.file.v2_1.blob_encode import BlobSink, encode_blob_page, write_blobs
from lance_table.file.v2_1.constant_encode import constant_page
from lance_table.file.v2_1.fullzip_encode import encode_full_zip
from lance_table.file.v2_1.fullzip_values import per_value, wide_values
from lance_table.file.v2_1.layout import is_packed_struct
from lance_table.file.v2_1.levels import Shredded, def_levels, is_list_node, join, layer_kinds, shred
from lance_table.file.v2_1.miniblock_encode import ChunkTooLarge, encode_mini_block
from lance_table.file.v2_1.packed_var_encode import (
    check_variable_packed,
    encode_variable_packed,
    is_variable_packed,
)
from lance_table.file.v2_1.values_encode import (
    arrow_dictionary_values,
    compress_values,
    compression_scheme,
    fixed_bits,
    widest_value,
)
from lance_table.schema import FieldNode, is_binary_like

# Values of FULL_ZIP_BYTES or more go full-zip (pylance's MINIBLOCK_MAX_BYTE_LENGTH_PER_VALUE).
FULL_ZIP_BYTES = tiny_page.FULL_ZIP_BYTES


# Without a ``max_page_bytes``, a page holds at most this many times the page budget: 32 MiB
# for the default budget. Fewer pages make a take cheaper (each page touched has a fixed cost);
# past 32 MiB, glibc maps every buffer afresh, and faulting its pages in costs more than that.
PAGE_GROWTH = 4

# (layout, buffers, rows, first row)
PageSink = Callable[[Any, list[Any], int, int], None]


def _is_empty_struct(node: FieldNode) -> bool:
    return pa.types.is_struct(node.arrow_type) and not node.children


def check_leaf(node: FieldNode, v2_2: bool = True) -> None:
    """Raise for a leaf whose type this writer cannot store in a 2.1 (``v2_2`` false) or 2.2 file.

    Raises:
        UnsupportedFormatError: dictionaries of booleans or nested values, blobs of type binary
            (pylance wants large_binary), fixed-size lists of
            variable-width items, packed structs of non-byte-aligned fields, and the like.
        PackedStructError: a packed struct with variable-width children that pylance does not
            write either (see :mod:`packed_var_encode`).
    """
    t = node.arrow_type
    what = f"field {node.name!r} of type {t}"
    if is_blob(node):
        if not pa.types.is_large_binary(t):  # as pylance, whose reader wants 64-bit offsets here
            raise UnsupportedFormatError(f"{what}: blob columns must be large_binary to be written")
        return
    if pa.types.is_dictionary(t):
        bits = fixed_bits(t.value_type)
        if is_binary_like(t.value_type) or (
            bits is not None and not bits % 8 and not pa.types.is_fixed_size_list(t.value_type)
        ):
            return
        raise UnsupportedFormatError(f"{what}: dictionaries of {t.value_type} values are not written")
    if _is_empty_struct(node) or pa.types.is_null(t):  # constant pages
        return
    if is_variable_packed(node):
        check_variable_packed(node, v2_2)
        return
    if is_packed_struct(node):
        for child in t:
            bits = fixed_bits(child.type)
            if bits is None or bits % 8 or pa.types.is_fixed_size_list(child.type):
                raise PackedStructError(f"{what}: packed struct fields must be fixed-width bytes")
        return
    if is_binary_like(t):
        return
    bits = fixed_bits(t)
    if bits is None or (bits % 8 and bits != 1 and not pa.types.is_fixed_size_list(t)):
        raise UnsupportedFormatError(f"{what}: this type is not written in Lance 2.1/2.2 files")


def leaf_paths(node: FieldNode, above: tuple[FieldNode, ...] = ()) -> list[tuple[FieldNode, ...]]:
    """The path (top-level field first) of each leaf column below ``node``, in column order."""
    path = (*above, node)
    if not node.children or is_packed_struct(node):
        return [path]
    out = []
    for child in node.children:
        out.extend(leaf_paths(child, path))
    return out


def _constant(
    kinds: list[int], rep: np.ndarray | None, defs: np.ndarray | None, simple: bool
) -> tuple[Any, list[Any]]:
    layout = pb.PageLayout()
    layout.constant_layout.layers.extend(kinds)
    if simple:
        return layout, []
    rep_bytes = rep.astype("<u2").tobytes() if rep is not None else b""
    def_bytes = defs.astype("<u2").tobytes() if defs is not None else b""
    return layout, [rep_bytes, def_bytes]


def encode_page(
    piece: Shredded, path: Sequence[FieldNode], large: bool, facts: LeafFacts | None = None
) -> tuple[Any, list[Any]]:
    """The layout and buffers of one page holding the rows of ``piece``; ``facts`` are the
    leaf's (:func:`leaf_facts`) when the caller has them.

    Raises:
        UnsupportedFormatError: the page cannot be stored (see :func:`check_leaf`).
    """
    leaf = path[-1]
    if facts is None:
        facts = leaf_facts(tuple(path), large)
    what = facts.what
    kinds = layer_kinds(path, piece.nulls, piece.empties)
    defs = def_levels(piece.codes, kinds)
    rep = piece.rep
    max_rep = facts.max_rep
    if facts.blob:  # the values are descriptors already (see LeafColumnWriter.append)
        return encode_blob_page(piece, kinds, defs, large)
    if facts.empty_struct:
        if rep is not None or bool(piece.codes.any()):
            raise UnsupportedFormatError(f"{what}: struct<> with null rows or inside a list is not written")
        return _constant(kinds, None, None, True)
    n = len(piece.values)
    if defs is None:
        valid = n
    else:
        vis_defs = defs if piece.visible is None else defs[piece.visible]
        valid = int(np.count_nonzero(vis_defs == 0))
    if not valid:
        leaf_null = 1 + 2 * (len(path) - 1)
        # pylance's reader takes pages without level buffers only for leaves without nesting
        simple = len(path) == 1 and bool(np.all(piece.codes == leaf_null))
        return _constant(kinds, rep, defs, simple)
    if large and rep is None and defs is None and facts.scheme is None and not facts.variable_packed:
        constant = constant_page(piece.values, kinds)  # one value in every row, as pylance 2.2 writes it
        if constant is not None:
            return constant
    if facts.scheme is None and not facts.variable_packed:
        tiny = tiny_page.page(piece.values, defs, kinds, large, rep, max_rep)  # a small append's page
        if tiny is not None:
            return tiny
    if facts.variable_packed:  # full-zip, one packed row per value, like pylance
        return encode_full_zip(
            encode_variable_packed(piece.values, leaf), rep, defs, piece.visible, kinds, max_rep
        )
    if pa.types.is_dictionary(piece.values.type):  # always mini-block, like pylance
        indices = arrow_dictionary_values(piece.values, what, large)
        try:
            return encode_mini_block(indices, n, rep, defs, piece.visible, kinds, max_rep, large)
        except ChunkTooLarge as exc:
            raise UnsupportedFormatError(f"{what}: {exc}") from exc
    scheme = facts.scheme
    values = None
    if not is_binary_like(piece.values.type) or widest_value(piece.values) < FULL_ZIP_BYTES:
        values = compress_values(piece.values, what, scheme, large)
        mini = values.max_value_bytes < FULL_ZIP_BYTES
    else:  # wide binary values: full-zip, unless a dictionary or zstd chunks pay
        values = wide_values(piece.values, scheme, large)
        mini = values is not None
    if mini and values is not None:
        try:
            return encode_mini_block(values, n, rep, defs, piece.visible, kinds, max_rep, large)
        except ChunkTooLarge:
            pass
    pv = per_value(piece.values, what, scheme)
    if pv is None:  # bit-packed items have no per-value form (binary values always have one)
        if values is None:
            values = compress_values(piece.values, what, scheme, large)
        try:
            return encode_mini_block(values, n, rep, defs, piece.visible, kinds, max_rep, large)
        except ChunkTooLarge as exc:
            raise UnsupportedFormatError(f"{what}: {exc}") from exc
    return encode_full_zip(pv, rep, defs, piece.visible, kinds, max_rep)


def _split(piece: Shredded, rows_per_page: int, max_rep: int) -> list[Shredded]:
    """``piece`` cut into pieces of ``rows_per_page`` rows (the last may be shorter)."""
    if piece.rows <= rows_per_page:
        return [piece]
    starts = piece.row_starts(max_rep)
    before = None
    if piece.visible is not None:
        before = np.zeros(piece.entries + 1, np.int64)
        np.cumsum(piece.visible, out=before[1:])
    out = []
    for r0 in range(0, piece.rows, rows_per_page):
        r1 = min(r0 + rows_per_page, piece.rows)
        e0 = int(starts[r0])
        e1 = int(starts[r1]) if r1 < piece.rows else piece.entries
        v0, v1 = (e0, e1) if before is None else (int(before[e0]), int(before[e1]))
        out.append(
            Shredded(
                r1 - r0,
                None if piece.rep is None else piece.rep[e0:e1],
                piece.codes[e0:e1],
                None if piece.visible is None else piece.visible[e0:e1],
                piece.values.slice(v0, v1 - v0),
                piece.nulls,
                piece.empties,
            )
        )
    return out


def _join_pages(pieces: list[Shredded]) -> list[Shredded]:
    """``pieces`` as one piece, or one each when their dictionaries together overflow the key
    type (each page stores its own dictionary, so they need not share one)."""
    try:
        return [join(pieces)]
    except (pa.ArrowInvalid, pa.ArrowCapacityError, pa.ArrowNotImplementedError):
        if not pa.types.is_dictionary(pieces[0].values.type):
            raise
        return list(pieces)


#: bytes a cut between two arrays may add to the pieces' values, per buffer of a leaf's path (a
#: validity byte, an offset of 8 bytes): see :meth:`LeafColumnWriter.group`
_CUT_SLACK = 64


class LeafFacts(NamedTuple):
    """What the writer knows of a leaf column from its schema alone."""

    max_rep: int  # the lists above it
    blob: bool  # a blob column (values written outside the pages)
    overhead: int  # the page budget each incoming array takes beyond its bytes
    what: str  # how errors name it
    empty_struct: bool  # ``struct<>``
    variable_packed: bool  # a packed struct of variable-width children
    scheme: str | None  # its ``lance-encoding:compression``


def leaf_facts(path: tuple[FieldNode, ...], large: bool) -> LeafFacts:
    """The :class:`LeafFacts` of the leaf at the end of ``path``, once :func:`check_leaf` passed it
    for a 2.2 (``large``) or 2.1 file.

    Remembered by the identity of the path's nodes (immutable; a schema's tree is built once, see
    :func:`lance_table.schema.build_tree`), so that every file of a stream of small appends does
    not check and look over the same leaves again.

    Raises:
        UnsupportedFormatError, PackedStructError: as :func:`check_leaf`.
    """
    key = (tuple(map(id, path)), large)
    hit = _LEAVES.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], path)):
        return hit[1]
    leaf = path[-1]
    check_leaf(leaf, large)
    facts = LeafFacts(
        max_rep=sum(1 for node in path[:-1] if is_list_node(node)),
        blob=is_blob(leaf),
        overhead=array_overhead(leaf.arrow_type),
        what=f"field {leaf.name!r}",
        empty_struct=_is_empty_struct(leaf),
        variable_packed=is_variable_packed(leaf),
        scheme=compression_scheme(leaf.field.metadata),
    )
    _LEAVES.put(key, (path, facts))  # (the nodes are kept: their ids stay theirs)
    return facts


# checked leaves by the ids of their paths' nodes and the file version (see :func:`leaf_facts`)
_LEAVES: LRU[tuple[tuple[int, ...], bool], tuple[tuple[FieldNode, ...], LeafFacts]] = LRU(256)


#: the path and facts of each leaf column below a top-level field (see :func:`leaf_plan`)
LeafPlan = tuple[tuple[tuple[FieldNode, ...], LeafFacts], ...]


def leaf_plan(node: FieldNode, large: bool) -> LeafPlan:
    """The path and :class:`LeafFacts` of each leaf column below the top-level ``node``, in column
    order: what every file of the field's schema starts from, found once per schema tree (remembered
    by the node's identity, as :func:`leaf_facts`).

    Raises:
        UnsupportedFormatError, PackedStructError: as :func:`check_leaf`.
    """
    key = (id(node), large)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]
    plan = tuple((path, leaf_facts(path, large)) for path in map(tuple, leaf_paths(node)))
    _PLANS.put(key, (node, plan))  # (the node is kept: its id stays its own)
    return plan


_PLANS: LRU[tuple[int, bool], tuple[FieldNode, LeafPlan]] = LRU(64)


class LeafColumnWriter:
    """Buffers the shredded rows of one leaf column and writes them as pages.

    ``blob_sink`` writes the values of a blob column (each its own buffer, outside the pages) and
    returns where; blob columns need it.

    Raises:
        UnsupportedFormatError: the leaf cannot be stored (see :func:`check_leaf`), or it is a
            blob column without a ``blob_sink`` or inside a list.
    """

    def __init__(
        self,
        path: tuple[FieldNode, ...],
        sink: PageSink,
        page_size_bytes: int,
        large: bool,
        blob_sink: BlobSink | None = None,
        max_page_bytes: int | None = None,
        facts: LeafFacts | None = None,
    ) -> None:
        self.facts = facts if facts is not None else leaf_facts(path, large)
        self.max_rep, blob, self.overhead = self.facts.max_rep, self.facts.blob, self.facts.overhead
        self.path = path
        self.sink = sink
        self.budget = page_size_bytes
        self.max_page_bytes = max_page_bytes or page_size_bytes * PAGE_GROWTH
        self.large = large
        self.blob_sink = None
        if blob:
            if self.max_rep or blob_sink is None:
                where = "inside a list" if self.max_rep else "without a place for the blobs"
                raise UnsupportedFormatError(f"field {path[-1].name!r}: blob columns {where} are not written")
            self.blob_sink = blob_sink
        self.pending: list[Shredded] = []
        self.pending_bytes = 0
        self.rows_written = 0
        # the arrays of pending pieces that were appended as a group (see :meth:`group`), by
        # position in ``pending``; ``pending_bytes`` then holds a bound, not the exact count
        self.grouped: dict[int, list[pa.Array]] = {}
        # whether ``pending_bytes`` counts some appended pieces by their cheap bound
        # (:meth:`Shredded.nbytes_bound`), made exact where a decision depends on it
        self.bounded = False

    def group(self, arrays: Sequence[pa.Array]) -> tuple[Shredded, int] | None:
        """The rows of ``arrays`` shredded as one piece, and a bound of the bytes their pieces
        would add to the page budget one by one, when appending them one by one surely fills no
        page (the pending bytes stay within the budget); else None. Nothing changes until
        :meth:`append_group` takes the result.

        A piece's bytes are its values' and levels' (:meth:`Shredded.nbytes`): those of the
        group's one piece, plus, per array, its budget overhead and what cutting the values at
        its ends may add (a validity byte and an offset per buffer: at most 8 bytes each).
        Dictionary and blob columns are never grouped."""
        if self.blob_sink is not None or pa.types.is_dictionary(self.path[-1].arrow_type):
            return None
        piece = shred(pa.concat_arrays(arrays), self.path)
        slack = self.overhead + _CUT_SLACK * (len(self.path) + 1)
        bound = piece.nbytes() + len(arrays) * slack
        if self.pending_bytes + bound > self.budget:
            self._exact()
            if self.pending_bytes + bound > self.budget:
                return None
        return piece, bound

    def append_group(self, arrays: Sequence[pa.Array], grouped: tuple[Shredded, int]) -> None:
        """Add the rows of ``arrays`` as :meth:`group` found them: the same pending rows (and, at
        the end, the same pages) as appending them one by one."""
        piece, bound = grouped
        self.grouped[len(self.pending)] = list(arrays)
        self.pending.append(piece)
        self.pending_bytes += bound

    def _settle(self) -> None:
        """Pending groups as the pieces of their arrays one by one, with their exact bytes (the
        pages that fill next then fill where appending one by one fills them)."""
        pending: list[Shredded] = []
        for k, piece in enumerate(self.pending):
            arrays = self.grouped.get(k)
            pending.extend([piece] if arrays is None else [shred(a, self.path) for a in arrays])
        self.pending, self.grouped, self.bounded = pending, {}, False
        self.pending_bytes = sum(p.nbytes() + self.overhead for p in pending)

    def exact_pending_bytes(self) -> int:
        """``pending_bytes``, counted exactly where it held bounds (see :meth:`_exact`)."""
        self._exact()
        return self.pending_bytes

    def _exact(self) -> None:
        """``pending_bytes`` as the exact count of the pieces appended one by one, where it held
        their bounds (pending groups keep theirs: :meth:`_settle` counts them)."""
        if self.bounded and not self.grouped:
            self.pending_bytes = sum(p.nbytes() + self.overhead for p in self.pending)
            self.bounded = False

    def append(self, arr: pa.Array) -> None:
        """Add the rows of ``arr`` (an array of the top-level field)."""
        if not len(arr):
            return
        if self.grouped:
            self._settle()
        piece = shred(arr, self.path)
        if self.blob_sink is not None:
            piece = write_blobs(piece, self.blob_sink)
        self.pending.append(piece)
        # a bound first (the exact count walks the array's buffers: a fixed cost every column
        # of a small append would pay); exact only when the bound passes the budget
        self.pending_bytes += piece.nbytes_bound() + self.overhead
        self.bounded = True
        if self.pending_bytes > self.budget:
            self._exact()
            if self.pending_bytes > self.budget:
                self._flush()

    def _flush(self) -> None:
        """Write everything buffered: one page, or even pages of at most ``max_page_bytes``.

        A page holds whole incoming arrays, so an array past the budget is one page as pylance
        writes it (a take or a filter then works on few pages), while small arrays gather until
        they pass the budget."""
        wholes = _join_pages(self.pending)
        self.pending, self.pending_bytes, self.grouped, self.bounded = [], 0, {}, False
        for whole in wholes:
            size = whole.nbytes_bound()  # one part when even the bound fits
            parts = -(-(size if size <= self.max_page_bytes else whole.nbytes()) // self.max_page_bytes)
            for part in _split(whole, -(-whole.rows // max(parts, 1)), self.max_rep):
                self._write(part)

    def _write(self, piece: Shredded) -> None:
        layout, buffers = encode_page(piece, self.path, self.large, self.facts)
        self.sink(layout, buffers, piece.rows, self.rows_written)
        self.rows_written += piece.rows

    def finish(self) -> None:
        """Write what is still buffered."""
        if self.pending:
            self._flush()
