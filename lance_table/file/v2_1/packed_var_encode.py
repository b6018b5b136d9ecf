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

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.errors import PackedStructError
from lance_table.file.compression.entries import join_entries, le_table
from lance_table.file.v2_1.layout import is_packed_struct
from lance_table.file.v2_1.value_kinds import bit_values, fixed_bits, flat, fsl_encoding, fsl_levels
from lance_table.file.v2_1.values_encode import PerValue, compression_scheme, per_value
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
    # Each row is cut into entries, one per variable-width child: the fixed-width children
    # before it and its length prefix (the head), then its bytes (the body); a last entry with
    # an empty body holds the fixed-width children after the last variable-width one.
    heads: list[list[np.ndarray]] = [[]]
    bodies: list[tuple[np.ndarray, np.ndarray]] = []
    for i, f in enumerate(arr.type):
        pv = _child_values(arr.field(i), None if nodes is None else nodes[i], f.name, what)
        field = fields.add()
        field.value.CopyFrom(pv.encoding)
        if pv.lengths is None:
            width = int(pv.bits or 0) // 8
            field.bits_per_value = int(pv.bits or 0)
            heads[-1].append(pv.data.reshape(n, width))
            continue
        field.bits_per_length = pv.offset_bits
        lengths = np.asarray(pv.lengths, np.int64)
        heads[-1].append(le_table(lengths, pv.offset_bits // 8))
        bodies.append((pv.data.reshape(-1), lengths))
        heads.append([])
    m = len(heads)
    tables = [np.hstack(h) if h else np.zeros((n, 0), np.uint8) for h in heads]
    width = max(t.shape[1] for t in tables)
    # entries in row order: row r's entry j is at r * m + j
    head_table = np.zeros((n, m, width), np.uint8)
    head_len = np.zeros((n, m), np.int64)
    body_len = np.zeros((n, m), np.int64)
    for j, t in enumerate(tables):
        head_table[:, j, : t.shape[1]] = t
        head_len[:, j] = t.shape[1]
        if j < len(bodies):
            body_len[:, j] = bodies[j][1]
    body = bodies[0][0] if len(bodies) == 1 else _interleave(bodies, body_len)
    pieces = join_entries(head_table.reshape(n * m, width), head_len.reshape(-1), body, body_len.reshape(-1))
    data = np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)
    lengths = head_len.sum(axis=1) + body_len.sum(axis=1)
    bits = 32 if data.size <= _U32_MAX else 64
    return PerValue(enc, data, lengths=lengths, offset_bits=bits)


# Bodies are interleaved a group of rows at a time, so the gather index stays this small (bytes).
_GROUP = 1 << 22


def _interleave(bodies: list[tuple[np.ndarray, np.ndarray]], body_len: np.ndarray) -> np.ndarray:
    """The bodies of several variable-width children in row order: row 0's of each child, then
    row 1's, ... (``body_len``: rows x entries; its last column is empty)."""
    src = np.concatenate([data for data, _ in bodies])
    base = np.cumsum([0] + [data.size for data, _ in bodies[:-1]])
    starts = np.zeros(body_len.shape, np.int64)
    for j, (_, lengths) in enumerate(bodies):
        starts[:, j] = base[j] + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    row_bytes = body_len.sum(axis=1)
    row_end = np.cumsum(row_bytes)
    out = np.empty(int(row_end[-1]) if row_end.size else 0, np.uint8)
    n = body_len.shape[0]
    r0 = 0
    while r0 < n:
        r1 = max(r0 + 1, int(np.searchsorted(row_end, (row_end[r0 - 1] if r0 else 0) + _GROUP)))
        r1 = min(r1, n)
        s, ln = starts[r0:r1].reshape(-1), body_len[r0:r1].reshape(-1)
        at = int(row_end[r0 - 1]) if r0 else 0
        total = int(ln.sum())
        if total:
            shift = np.repeat(s - (np.cumsum(ln) - ln), ln)
            out[at : at + total] = src[np.arange(total, dtype=np.int64) + shift]
        r0 = r1
    return out


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
