"""Blob v2 columns of format 2.2 files: the descriptor struct a data file stores for each blob.

A blob v2 field is, in the dataset schema, a struct (``data: large_binary, uri: string`` and
optionally ``position, size``) tagged with the Arrow extension name ``lance.blob.v2``. The data
file does not store that struct: it stores one *descriptor* per row, a packed struct of
``kind: u8, position: u64, size: u64, blob_id: u32, blob_uri: string`` (all non-null; a null blob
is a null descriptor). The kind says where the bytes are (:class:`BlobKind`). pylance 14 writes the
descriptor's child fields into the file's schema without ids (id -1, parent -1), right after the
struct: :func:`attach_descriptor_fields` makes them the struct's children again.

See ``docs/blob_v2.md`` for the verified layout.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa

from lance_table._lru import LRU
from lance_table.file.fields import BLOB_KEY, PACKED_KEY
from lance_table.schema import FieldNode, LanceField, build_tree

EXTENSION_KEY = "ARROW:extension:name"
EXTENSION_NAME = b"lance.blob.v2"

# The descriptor a data file stores per row, as pylance 14 returns it from scans.
DESCRIPTOR_FIELDS = (
    ("kind", pa.uint8(), "uint8"),
    ("position", pa.uint64(), "uint64"),
    ("size", pa.uint64(), "uint64"),
    ("blob_id", pa.uint32(), "uint32"),
    ("blob_uri", pa.utf8(), "string"),
)
DESCRIPTOR = pa.struct([pa.field(name, t, nullable=False) for name, t, _ in DESCRIPTOR_FIELDS])
# The field metadata of a descriptor column (in data files and in pylance's scan results).
DESCRIPTOR_METADATA = {BLOB_KEY: b"true", PACKED_KEY: b"true"}
# The ids the descriptor's children get in lance_table's field trees (files store none). Negative,
# so that they never meet a real field id.
_CHILD_ID_BASE = -1000


class BlobKind(enum.IntEnum):
    """Where a blob v2 value's bytes are."""

    #: in the data file itself, at ``position`` (an absolute file offset), ``size`` bytes
    INLINE = 0
    #: in the shared sidecar ``<data file stem>/<blob_id>.blob``, at ``position``
    PACKED = 1
    #: alone in the sidecar ``<data file stem>/<blob_id>.blob`` (``position`` 0, the whole file)
    DEDICATED = 2
    #: at ``blob_uri``, outside the dataset: the whole object, or ``size`` bytes at ``position``
    EXTERNAL = 3
    #: ``size`` bytes at ``position`` of ``blob_uri``, a path relative to the dataset's root
    MANAGED = 4
    #: ``size`` bytes at ``position`` of ``blob_uri``, relative to the registered base ``blob_id``
    MANAGED_BASE = 5


def is_blob_v2(field: LanceField) -> bool:
    """Whether a dataset schema field is a blob v2 column (its extension name says so)."""
    return field.metadata.get(EXTENSION_KEY) == EXTENSION_NAME


def blob_v2_below(node: FieldNode) -> bool:
    """Whether a blob v2 column lies at or below ``node`` (remembered by the node's identity: a
    schema's tree is built once, and every file of a stream of appends asks of the same nodes)."""
    hit = _BELOW.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    below = any(is_blob_v2(n.field) for n in node.walk())
    _BELOW.put(id(node), (node, below))  # (the node is kept: its id stays its own)
    return below


_BELOW: LRU[int, tuple[FieldNode, bool]] = LRU(256)


def blob_file_name(blob_id: int) -> str:
    """The file name of a packed or dedicated sidecar: the id's 32 bits reversed, in binary
    (e.g. 1 -> ``1000...0.blob``, 2 -> ``0100...0.blob``), as pylance 14 names them."""
    if not 0 <= blob_id < 1 << 32:
        raise ValueError(f"blob id {blob_id} is not a 32-bit unsigned integer")
    return f"{blob_id:032b}"[::-1] + ".blob"


def _is_descriptor_struct(field: LanceField) -> bool:
    return field.logical_type == "struct" and field.metadata.get(BLOB_KEY) is not None


def attach_descriptor_fields(fields: Sequence[LanceField]) -> list[LanceField]:
    """A file schema with the id-less descriptor children put back under their struct.

    pylance 14 writes a blob v2 descriptor struct followed by its five children with id -1 and
    parent -1. Each such run of id -1 top-level fields right after a blob struct becomes that
    struct's children, with fresh negative ids. Any other field list is returned unchanged.
    """
    out: list[LanceField] = []
    anchor: LanceField | None = None
    next_id = _CHILD_ID_BASE
    changed = False
    for f in fields:
        if f.id == -1 and f.parent_id == -1 and anchor is not None:
            out.append(replace(f, id=next_id, parent_id=anchor.id))
            next_id -= 1
            changed = True
            continue
        anchor = f if _is_descriptor_struct(f) else None
        out.append(f)
    return out if changed else list(fields)


def descriptor_problem(fields: Sequence[LanceField]) -> str | None:
    """What is wrong with the blob v2 descriptor structs of a file schema (after
    :func:`attach_descriptor_fields`), or None: each must have exactly the five descriptor
    children, with their names and types in order. A damaged name would otherwise make the
    descriptor unreadable as one."""
    expected = [(name, logical) for name, _, logical in DESCRIPTOR_FIELDS]
    for struct in fields:
        if not _is_descriptor_struct(struct):
            continue
        children = [(f.name, f.logical_type) for f in fields if f.parent_id == struct.id != f.id]
        if children != expected:
            got = ", ".join(f"{n}: {t}" for n, t in children) or "none"
            want = ", ".join(f"{n}: {t}" for n, t in expected)
            name = f"blob column {struct.name!r} (field {struct.id})"
            return f"{name} has descriptor fields ({got}), not ({want})"
    return None


def descriptor_node(node: FieldNode) -> FieldNode:
    """The node a blob v2 field reads as: the descriptor struct, with the field's name, id and
    nullability and the descriptor's metadata (pylance drops the extension name)."""
    struct = replace(node.field, parent_id=-1, logical_type="struct", metadata=dict(DESCRIPTOR_METADATA))
    children = [
        LanceField(_CHILD_ID_BASE - k, node.id, name, logical, nullable=False)
        for k, (name, _, logical) in enumerate(DESCRIPTOR_FIELDS)
    ]
    (tree,) = build_tree([struct, *children])
    return tree


def read_node(node: FieldNode) -> FieldNode:
    """``node`` as a scan returns it: blob v2 fields (at any depth) become descriptor structs."""
    if is_blob_v2(node.field):
        return descriptor_node(node)
    if not node.children:
        return node
    kids = tuple(read_node(c) for c in node.children)
    if all(k is c for k, c in zip(kids, node.children)):
        return node
    return FieldNode(node.field, _retyped(node.arrow_type, kids), kids)


def _retyped(t: pa.DataType, kids: Sequence[FieldNode]) -> pa.DataType:
    """A nested type with its children's types replaced."""
    fields = [k.to_arrow_field() for k in kids]
    if pa.types.is_struct(t):
        return pa.struct(fields)
    if pa.types.is_large_list(t):
        return pa.large_list(fields[0])
    if pa.types.is_fixed_size_list(t):
        return pa.list_(fields[0], t.list_size)
    if pa.types.is_list(t):
        return pa.list_(fields[0])
    if pa.types.is_map(t):
        return pa.map_(fields[0].type.field(0), fields[0].type.field(1))
    return t


def has_blob_v2(fields: Sequence[LanceField]) -> bool:
    """Whether any field of a schema is a blob v2 column."""
    return any(is_blob_v2(f) for f in fields)
