"""Lance schemas: the flattened field list stored in files and manifests, and its Arrow equivalent.

Lance stores a schema as a pre-order list of fields. Every field has an id, the id of its parent
(-1 at the top level) and a *logical type* string such as ``int64``, ``timestamp:us:UTC`` or
``fixed_size_list:float:16``. Structs, lists and maps have child fields; fixed-size lists and
dictionaries are leaves whose inner type is spelled out in the logical type string.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from lance_table._parallel import cached_per_instance
from lance_table.errors import SchemaError
from lance_table.extensions import is_json_field, storage_field, user_field

# The legacy ``lance.file.Encoding`` enum, still written for every field.
ENCODING_NONE = 0
ENCODING_PLAIN = 1
ENCODING_VAR_BINARY = 2
ENCODING_DICTIONARY = 3
# the extension whose fixed-size lists pylance names by it (``fixed_size_list:lance.bfloat16:N``)
BFLOAT16_NAME = b"lance.bfloat16"

_SIMPLE: dict[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "uint8": pa.uint8(),
    "int16": pa.int16(),
    "uint16": pa.uint16(),
    "int32": pa.int32(),
    "uint32": pa.uint32(),
    "int64": pa.int64(),
    "uint64": pa.uint64(),
    "halffloat": pa.float16(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "large_string": pa.large_string(),
    "large_binary": pa.large_binary(),
    "json": pa.large_binary(),
    "date32:day": pa.date32(),
    "date64:ms": pa.date64(),
}
_SIMPLE_NAMES: dict[pa.DataType, str] = {t: n for n, t in _SIMPLE.items() if n != "json"}


@dataclass(frozen=True)
class LanceField:
    """One entry of a Lance schema (``lance.file.Field``), without its children."""

    id: int
    parent_id: int
    name: str
    logical_type: str
    nullable: bool = True
    metadata: Mapping[str, bytes] = field(default_factory=dict)
    encoding: int = ENCODING_NONE


@dataclass(frozen=True)
class FieldNode:
    """A Lance field with its children attached and its Arrow type resolved."""

    field: LanceField
    arrow_type: pa.DataType
    children: tuple[FieldNode, ...] = ()

    @property
    def id(self) -> int:
        return self.field.id

    @property
    def name(self) -> str:
        return self.field.name

    def to_arrow_field(self) -> pa.Field:
        """The Arrow field (a field of the null type is nullable, as Arrow requires, whatever a
        damaged schema says)."""
        return self.arrow_field

    @cached_per_instance
    def arrow_field(self) -> pa.Field:
        """:meth:`to_arrow_field`, built once (Arrow fields are immutable)."""
        md = dict(self.field.metadata) or None
        nullable = self.field.nullable or pa.types.is_null(self.arrow_type)
        return pa.field(self.field.name, self.arrow_type, nullable, metadata=md)

    @cached_per_instance
    def reader_field(self) -> pa.Field:
        """:meth:`to_arrow_field` as readers see it: extension types rebuilt, JSON as text
        (:func:`lance_table.extensions.user_field`; the same object when there are none)."""
        return user_field(self.arrow_field)

    @cached_per_instance
    def ids(self) -> frozenset[int]:
        """The ids of this field and of every field below it."""
        return frozenset(n.id for n in self.walk())

    def walk(self) -> Iterator[FieldNode]:
        """This node and all its descendants, in pre-order."""
        yield self
        for child in self.children:
            yield from child.walk()


# ---------------------------------------------------------------------------------------------
# logical type strings


def logical_type_of(t: pa.DataType) -> str:
    """The Lance logical type string for an Arrow type.

    Raises:
        SchemaError: the type has no Lance equivalent.
    """
    simple = _SIMPLE_NAMES.get(t)
    if simple is not None:
        return simple
    if pa.types.is_timestamp(t):
        return f"timestamp:{t.unit}:{t.tz if t.tz is not None else '-'}"
    if pa.types.is_time32(t):
        return f"time32:{t.unit}"
    if pa.types.is_time64(t):
        return f"time64:{t.unit}"
    if pa.types.is_duration(t):
        return f"duration:{t.unit}"
    if pa.types.is_decimal128(t):
        return f"decimal:128:{t.precision}:{t.scale}"
    if pa.types.is_decimal256(t):
        return f"decimal:256:{t.precision}:{t.scale}"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed_size_binary:{t.byte_width}"
    if pa.types.is_fixed_size_list(t):
        if (t.value_field.metadata or {}).get(b"ARROW:extension:name") == BFLOAT16_NAME:
            return f"fixed_size_list:lance.bfloat16:{t.list_size}"  # (as pylance names it)
        return f"fixed_size_list:{logical_type_of(t.value_type)}:{t.list_size}"
    if pa.types.is_dictionary(t):
        return f"dict:{logical_type_of(t.value_type)}:{logical_type_of(t.index_type)}:false"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_list(t):
        return "list.struct" if pa.types.is_struct(t.value_type) else "list"
    if pa.types.is_large_list(t):
        return "large_list.struct" if pa.types.is_struct(t.value_type) else "large_list"
    if pa.types.is_map(t):
        return "map"
    raise SchemaError(f"Arrow type {t} has no Lance equivalent")


def _time_unit(unit: str, lt: str) -> str:
    if unit not in ("s", "ms", "us", "ns"):
        raise SchemaError(f"bad time unit in logical type {lt!r}")
    return unit


def leaf_type_from_logical(lt: str) -> pa.DataType:
    """The Arrow type of a logical type string that needs no child fields.

    Raises:
        SchemaError: the string is not a known leaf logical type.
    """
    simple = _SIMPLE.get(lt)
    if simple is not None:
        return simple
    parts = lt.split(":")
    head = parts[0]
    try:
        if head == "timestamp" and len(parts) >= 3:
            tz = ":".join(parts[2:])
            return pa.timestamp(_time_unit(parts[1], lt), None if tz == "-" else tz)
        if head == "time32" and len(parts) == 2:
            return pa.time32(_time_unit(parts[1], lt))
        if head == "time64" and len(parts) == 2:
            return pa.time64(_time_unit(parts[1], lt))
        if head == "duration" and len(parts) == 2:
            return pa.duration(_time_unit(parts[1], lt))
        if head == "decimal" and len(parts) == 4:
            ctor = {"128": pa.decimal128, "256": pa.decimal256}[parts[1]]
            return ctor(int(parts[2]), int(parts[3]))
        if head == "fixed_size_binary" and len(parts) == 2:
            return pa.binary(int(parts[1]))
        if head == "fixed_size_list" and parts[1:-1] == ["lance.bfloat16"]:
            # bfloat16 values: 2 bytes each, the extension named on the item (as pylance reads it)
            md = {b"ARROW:extension:name": BFLOAT16_NAME, b"ARROW:extension:metadata": b""}
            return pa.list_(pa.field("item", pa.binary(2), True, metadata=md), int(parts[-1]))
        if head == "fixed_size_list" and len(parts) >= 3:
            inner = leaf_type_from_logical(":".join(parts[1:-1]))
            return pa.list_(pa.field("item", inner, True), int(parts[-1]))
        if head == "dict" and len(parts) == 4:
            return pa.dictionary(leaf_type_from_logical(parts[2]), leaf_type_from_logical(parts[1]))
    except (KeyError, ValueError, TypeError, OverflowError, pa.ArrowException) as exc:
        raise SchemaError(f"invalid logical type {lt!r}: {exc}") from exc
    raise SchemaError(f"unknown logical type {lt!r}")


# ---------------------------------------------------------------------------------------------
# Arrow -> Lance


def is_binary_like(t: pa.DataType) -> bool:
    """Whether values of the type are variable-width bytes: string, binary and their large forms."""
    return bool(
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    )


def _legacy_encoding(t: pa.DataType) -> int:
    if pa.types.is_dictionary(t):
        return ENCODING_DICTIONARY
    if is_binary_like(t):
        return ENCODING_VAR_BINARY
    if pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_null(t):
        return ENCODING_NONE
    return ENCODING_PLAIN


def _child_fields(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [t.value_field]
    if pa.types.is_map(t):
        entries = pa.struct([t.key_field, t.item_field])
        return [pa.field("entries", entries, False)]
    return []


def fields_from_arrow(schema: pa.Schema | Iterable[pa.Field], *, first_id: int = 0) -> list[LanceField]:
    """Flatten an Arrow schema into Lance fields, assigning ids in pre-order from ``first_id``.

    Raises:
        SchemaError: a type has no Lance equivalent.
    """
    out: list[LanceField] = []
    if isinstance(schema, pa.Schema):
        utf8_metadata(schema.metadata, "schema")

    def visit(f: pa.Field, parent: int) -> None:
        fid = first_id + len(out)
        f = storage_field(f)  # extension types: their storage, named in the metadata
        md = utf8_metadata(f.metadata, f"field {f.name!r}")
        out.append(
            LanceField(
                id=fid,
                parent_id=parent,
                name=f.name,
                logical_type="json" if is_json_field(f) else logical_type_of(f.type),
                nullable=f.nullable,
                metadata=md,
                encoding=_legacy_encoding(f.type),
            )
        )
        for child in _child_fields(f.type):
            visit(child, fid)

    for f in schema:
        visit(f, -1)
    return out


def utf8_metadata(metadata: Mapping[bytes, bytes] | None, what: str) -> dict[str, bytes]:
    """Arrow metadata as Lance stores it (str keys, bytes values), refusing what is not UTF-8.

    Lance (and pylance) require keys and values of schema and field metadata to be UTF-8 text.

    Raises:
        SchemaError: a key or a value is not valid UTF-8.
    """
    out: dict[str, bytes] = {}
    for k, v in (metadata or {}).items():
        try:
            key = k.decode("utf-8")
            v.decode("utf-8")
        except UnicodeDecodeError:
            raise SchemaError(
                f"{what} metadata {k!r}: {v[:40]!r} is not valid UTF-8, which Lance requires; "
                "encode binary metadata as text (e.g. base64)"
            ) from None
        out[key] = v
    return out


# ---------------------------------------------------------------------------------------------
# Lance -> Arrow


def _resolve(f: LanceField, kids: list[FieldNode]) -> pa.DataType:
    lt = f.logical_type
    if lt == "struct":
        return pa.struct([k.to_arrow_field() for k in kids])
    if lt in ("list", "list.struct", "large_list", "large_list.struct"):
        if len(kids) != 1:
            raise SchemaError(f"list field {f.name!r} must have exactly one child, has {len(kids)}")
        ctor = pa.large_list if lt.startswith("large") else pa.list_
        return ctor(kids[0].to_arrow_field())
    if lt == "map":
        if len(kids) != 1 or len(kids[0].children) != 2:
            raise SchemaError(f"map field {f.name!r} must have one entries child with key and value")
        key, item = kids[0].children
        return pa.map_(key.to_arrow_field(), item.to_arrow_field())
    if kids:
        raise SchemaError(f"field {f.name!r} of type {lt!r} cannot have children")
    return leaf_type_from_logical(lt)


def build_tree(fields: Iterable[LanceField]) -> list[FieldNode]:
    """Attach children to parents and resolve Arrow types; returns the top-level nodes in order.

    Raises:
        SchemaError: a parent id is unknown, ids repeat, or a logical type is invalid.
    """
    fields = list(fields)
    children: dict[int, list[LanceField]] = {}
    ids: set[int] = set()
    roots: list[LanceField] = []
    for f in fields:
        if f.id in ids:
            raise SchemaError(f"field id {f.id} appears twice in the schema")
        ids.add(f.id)
        if f.parent_id == -1:
            roots.append(f)
        else:
            children.setdefault(f.parent_id, []).append(f)
    for parent in children:
        if parent not in ids:
            raise SchemaError(f"field parent id {parent} does not exist in the schema")

    reached = 0

    def make(f: LanceField, depth: int) -> FieldNode:
        nonlocal reached
        reached += 1
        if depth > 64:
            raise SchemaError("schema nesting is deeper than 64 levels")
        kids = [make(c, depth + 1) for c in children.get(f.id, [])]
        _check_unique_names(kids, f.name)
        return FieldNode(f, _resolve(f, kids), tuple(kids))

    nodes = [make(r, 0) for r in roots]
    _check_unique_names(nodes, None)
    if reached != len(fields):
        raise SchemaError(f"{len(fields) - reached} schema fields are not reachable from a top-level field")
    return nodes


def _check_unique_names(nodes: list[FieldNode], parent: str | None) -> None:
    names = {n.name for n in nodes}
    if len(names) != len(nodes):
        where = f"of field {parent!r}" if parent is not None else "at the top level"
        raise SchemaError(f"field names repeat {where}")


def arrow_schema_from_fields(
    fields: Iterable[LanceField], metadata: Mapping[str, bytes] | None = None
) -> pa.Schema:
    """The Arrow schema of a Lance field list.

    Raises:
        SchemaError: the field list is malformed.
    """
    return pa.schema([n.to_arrow_field() for n in build_tree(fields)], metadata=dict(metadata or {}) or None)


# ---------------------------------------------------------------------------------------------
# protobuf edge


def fields_to_pb(fields: Iterable[LanceField], target: Any) -> None:
    """Append fields to a repeated ``lance.file.Field`` protobuf container."""
    for f in fields:
        pf = target.add()
        pf.name = f.name
        pf.id = f.id
        pf.parent_id = f.parent_id
        pf.logical_type = f.logical_type
        pf.nullable = f.nullable
        pf.encoding = f.encoding
        for k, v in f.metadata.items():
            pf.metadata[k] = v


def fields_from_pb(pb_fields: Iterable[Any]) -> list[LanceField]:
    """Lance fields from a repeated ``lance.file.Field`` protobuf container."""
    return [
        LanceField(
            id=pf.id,
            parent_id=pf.parent_id,
            name=pf.name,
            logical_type=pf.logical_type,
            nullable=pf.nullable,
            metadata=dict(pf.metadata),
            encoding=pf.encoding,
        )
        for pf in pb_fields
    ]


def with_ids(fields: Iterable[LanceField], first_id: int) -> list[LanceField]:
    """Renumber fields consecutively from ``first_id``, keeping parent links intact."""
    fields = list(fields)
    mapping = {f.id: first_id + i for i, f in enumerate(fields)}
    return [
        replace(f, id=mapping[f.id], parent_id=mapping.get(f.parent_id, -1) if f.parent_id != -1 else -1)
        for f in fields
    ]
