"""Packed structs with variable-width children in 2.2 files: ``variable_packed_struct`` values.

A packed struct (``lance-encoding:packed``) one of whose children is variable-width (a string or
binary of either offset width, or a struct holding one) is stored as pylance 14 stores it: in
full-zip pages, one value per row, the row's children back to back. A fixed-width child is its
bytes; a variable-width child is a length prefix (as wide as the child's offsets) and its bytes.
Each child is compressed on its own, as a full-zip column of it would be (:func:`values_encode.per_value`:
plain, FSST or per-value zstd for binary children, their own ``lance-encoding:compression``
honoured); a struct child is packed the same way, recursively, with 32-bit lengths. Null rows of
the struct store nothing (the page's definition levels say so).

What pylance refuses is refused here too (:class:`errors.PackedStructError`): such a struct in a
file of format 2.0 or 2.1, children of other kinds (booleans, lists, dictionaries, nulls, a struct
child without a variable-width field), and a null inside a child of a valid row (pylance stores
no child validity: a null row must be a null of the struct itself).

One difference: pylance also refuses nulls of a child under a null row of the struct, which both
pylance's reader and ours hand out for every null row, so pylance cannot write back a table it
read. Nothing of a null row is stored, so those nulls are taken here: the file is the one pylance
writes for the same rows with any values there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.errors import PackedStructError
from lance_table.file.compression.entries import le_table
from lance_table.file.v2_1.fullzip_values import per_value
from lance_table.file.v2_1.layout import is_packed_struct
from lance_table.file.v2_1.value_kinds import bit_values, fixed_bits, flat, fsl_encoding, fsl_levels
from lance_table.file.v2_1.values_encode import PerValue, compression_scheme
from lance_table.schema import FieldNode, is_binary_like

# Rows of more bytes than this take 64-bit row lengths (pylance's switch).
_U32_MAX = (1 << 32) - 1


def has_variable_child(t: pa.DataType) -> bool:
    """Whether the struct type ``t`` has a variable-width child (at any struct depth)."""
    if is_binary_like(t):
        return True
    return pa.types.is_struct(t) and any(has_variable_child(f.type) for f in t)


def is_variable_packed(node: FieldNode) -> bool:
    """Whether ``node`` is a packed struct (2.1/2.2 rule) with a variable-width child."""
    return is_packed_struct(node) and has_variable_child(node.arrow_type)


def _check_child(child: FieldNode, what: str) -> None:
    t = child.arrow_type
    if is_binary_like(t):
        return
    if pa.types.is_struct(t):
        if not has_variable_child(t):
            raise PackedStructError(
                f"{what}: its struct child {child.name!r} has no variable-width field "
                "(pylance packs a struct child only beside variable-width ones when it holds one)"
            )
        for grandchild in child.children:
            _check_child(grandchild, what)
        return
    bits = fixed_bits(t)
    leaf = t
    while pa.types.is_fixed_size_list(leaf):
        leaf = leaf.value_type
    if bits is None or bits % 8 or pa.types.is_struct(leaf) or is_binary_like(leaf):
        raise PackedStructError(
            f"{what}: child {child.name!r} of type {t} cannot be packed beside variable-width "
            "children (byte-aligned fixed-width values, strings, binary and structs of them can)"
        )


def check_variable_packed(node: FieldNode, v2_2: bool) -> None:
    """Raise unless pylance 14 would store the packed struct ``node`` (which has a
    variable-width child) in a file of this version.

    Raises:
        PackedStructError: the file is not format 2.2 (or later), or a child is of a kind that
            cannot be packed (see the module docstring).
    """
    what = f"packed struct field {node.name!r} ({node.arrow_type})"
    if not v2_2:
        raise PackedStructError(
            f"{what}: packed structs with variable-width children need Lance file format 2.2 "
            "(pylance packs only fixed-width children before it)"
        )
    for child in node.children:
        _check_child(child, what)


def _no_nulls(arr: pa.StructArray, live: np.ndarray | None, path: str, what: str) -> None:
    """Raise for a null child value in a ``live`` row (valid all the way up; None: all are).
    Nulls under a null row are hidden (nothing of that row is stored): Arrow readers, pylance's
    and ours, hand them out there, so a table read back is written again."""
    if arr.null_count:
        own = np.asarray(arr.is_valid(), dtype=bool)
        live = own if live is None else live & own
    for i, f in enumerate(arr.type):
        child = arr.field(i)
        if child.null_count:
            bad = ~np.asarray(child.is_valid(), dtype=bool)
            if live is not None:
                bad &= live
            if bad.any():
                raise PackedStructError(
                    f"{what}: child {path}{f.name!r} is null in row {int(np.flatnonzero(bad)[0])}; pylance "
                    "stores no nulls inside a packed struct with variable-width children "
                    "(make the struct row null instead)"
                )
        if pa.types.is_struct(f.type):
            _no_nulls(child, live, f"{path}{f.name!r}.", what)


def _fixed_bools(values: pa.Array) -> PerValue | None:
    """Fixed-size lists of booleans filling whole bytes, without null items: each row its bits
    (pylance's per-value form); None for other values (pylance cannot write null items there)."""
    levels, leaf_arr = fsl_levels(values)
    n = len(values)
    per = levels[-1][0] if levels else 1
    if not pa.types.is_boolean(leaf_arr.type) or per % 8 or any(v is not None for _, v in levels):
        return None
    table = np.packbits(bit_values(leaf_arr).reshape(n, per), axis=1, bitorder="little")
    return PerValue(fsl_encoding(levels, flat(1)), table.reshape(-1), bits=table.shape[1] * 8)


def _child_values(child: pa.Array, node: FieldNode | None, name: str, what: str) -> PerValue:
    if pa.types.is_struct(child.type):
        return pack_rows(child, None if node is None else node.children, what)
    pv = per_value(child, what, None if node is None else compression_scheme(node.field.metadata))
    if pv is None:
        pv = _fixed_bools(child)
    if pv is None:  # booleans with null items (pylance fails on them)
        raise PackedStructError(
            f"{what}: child {name!r} of type {child.type} has null items, which cannot be packed"
        )
    return pv


def pack_rows(
    arr: pa.StructArray, nodes: Sequence[FieldNode] | None = None, what: str = "packed struct"
) -> PerValue:
    """The rows of ``arr`` (no nulls inside a valid row), each its children back to back, as
    full-zip values with their ``variable_packed_struct`` encoding; ``nodes`` (the children's
    fields) give each child's ``lance-encoding:compression`` (None: none set).

    Raises:
        PackedStructError: a fixed-size boolean list child has null items.
    """
    n = len(arr)
    enc = pb.CompressiveEncoding()
    fields = enc.variable_packed_struct.fields
    # The row's pieces in order: runs of fixed-width bytes (fixed-width children and length
    # prefixes, side by side in one table) and variable-width bodies; Arrow joins them row by row.
    pieces: list[pa.Array] = []
    run: list[np.ndarray] = []
    for i, f in enumerate(arr.type):
        pv = _child_values(arr.field(i), None if nodes is None else nodes[i], f.name, what)
        field = fields.add()
        field.value.CopyFrom(pv.encoding)
        if pv.lengths is None:
            field.bits_per_value = int(pv.bits or 0)
            run.append(pv.data.reshape(n, int(pv.bits or 0) // 8))
            continue
        field.bits_per_length = pv.offset_bits
        lengths = np.asarray(pv.lengths, np.int64)
        run.append(le_table(lengths, pv.offset_bits // 8))
        pieces.append(_fixed_piece(run, n))
        pieces.append(_variable_piece(pv.data.reshape(-1), lengths))
        run = []
    if run:
        pieces.append(_fixed_piece(run, n))
    rows = pieces[0]
    if len(pieces) > 1:
        rows = pc.binary_join_element_wise(*pieces, pa.scalar(b"", pa.large_binary()))
    offsets = np.frombuffer(rows.buffers()[1], np.int64, n + 1, rows.offset * 8)
    data = np.frombuffer(rows.buffers()[2], np.uint8, int(offsets[-1] - offsets[0]), int(offsets[0]))
    bits = 32 if data.size <= _U32_MAX else 64
    return PerValue(enc, data, lengths=np.diff(offsets), offset_bits=bits)


def _fixed_piece(tables: list[np.ndarray], n: int) -> pa.Array:
    """Fixed-width tables side by side, as one large_binary value a row."""
    table = np.ascontiguousarray(np.hstack(tables) if len(tables) > 1 else tables[0])
    width = table.shape[1]
    fixed = pa.Array.from_buffers(pa.binary(width), n, [None, pa.py_buffer(table)])
    return fixed.cast(pa.large_binary())


def _variable_piece(data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    return pa.Array.from_buffers(pa.large_binary(), lengths.size, buffers)


def encode_variable_packed(values: pa.Array, node: FieldNode) -> PerValue:
    """The full-zip values of a page of the packed struct ``node``: one per element of
    ``values`` (the page's visible struct values; null ones are dropped by the page).

    Raises:
        PackedStructError: a child holds a null (pylance refuses those).
    """
    what = f"packed struct field {node.name!r}"
    if isinstance(values, pa.ExtensionArray):
        values = values.storage
    _no_nulls(values, None, "", what)
    return pack_rows(values, node.children, what)
