"""Lance schemas: the flattened field list stored in files and manifests, and its Arrow equivalent.

Lance stores a schema as a pre-order list of fields. Every field has an id, the id of its parent
(-1 at the top level) and a *logical type* string such as ``int64``, ``timestamp:us:UTC`` or
``fixed_size_list:float:16``. Structs, lists and maps have child fields; fixed-size lists and
dictionaries are leaves whose inner type is spelled out in the logical type string.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from lance_table._lru import LRU
from lance_table._parallel import cached_per_instance
from lance_table.errors import SchemaError
from lance_table.extensions import is_json_field, storage_field, user_field, user_schema
from lance_table.logical_types import json_to_schema, leaf_type_from_logical, logical_type_of, schema_to_json

# The legacy ``lance.file.Encoding`` enum, still written for every field.
ENCODING_NONE = 0
ENCODING_PLAIN = 1
ENCODING_VAR_BINARY = 2
ENCODING_DICTIONARY = 3


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

    The trees of the last few field lists are remembered by the identity of their fields (which
    are immutable): a write resolves its dataset's schema several times, and a stream of appends
    reads the same manifest's fields again and again.

    Raises:
        SchemaError: a parent id is unknown, ids repeat, or a logical type is invalid.
    """
    fields = list(fields)
    key = tuple(map(id, fields))
    hit = _TREES.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], fields)):
        return list(hit[1])
    nodes = _build_tree(fields)
    _TREES.put(key, (tuple(fields), tuple(nodes)))  # (the fields are kept: their ids stay theirs)
    return nodes


# trees by the ids of their fields (see :func:`build_tree`), the least recently used dropped first
_TREES_KEPT = 64
_TREES: LRU[tuple[int, ...], tuple[tuple[LanceField, ...], tuple[FieldNode, ...]]] = LRU(_TREES_KEPT)


def _build_tree(fields: list[LanceField]) -> list[FieldNode]:
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
        below = children.get(f.id)
        if below is None:  # a leaf (most fields): no children to make or to compare
            return _node(f, _resolve(f, []), ())
        kids = [make(c, depth + 1) for c in below]
        if len(kids) > 1:
            _check_unique_names(kids, f.name)
        return _node(f, _resolve(f, kids), tuple(kids))

    try:
        nodes = [make(r, 0) for r in roots]
    finally:
        # a closure that calls itself and its cell refer to each other: emptied, no cycle is left
        # to the garbage collector
        make = None  # type: ignore[assignment]
    if len(nodes) > 1:
        _check_unique_names(nodes, None)
    if reached != len(fields):
        raise SchemaError(f"{len(fields) - reached} schema fields are not reachable from a top-level field")
    return nodes


_new = object.__new__


def _node(f: LanceField, arrow_type: pa.DataType, children: tuple[FieldNode, ...]) -> FieldNode:
    """``FieldNode(f, arrow_type, children)``, its attributes set at once: a frozen dataclass's
    ``__init__`` sets each through ``object.__setattr__``, a cost every field of every schema a
    version's open resolves pays (as :func:`fields_from_pb` makes its fields)."""
    node = _new(FieldNode)
    node.__dict__.update(field=f, arrow_type=arrow_type, children=children)
    return node


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
    """Lance fields from a repeated ``lance.file.Field`` protobuf container.

    (Positional arguments, and an empty metadata map not copied through the protobuf map's
    Mapping methods: every open of a version converts its schema.)"""
    out = []
    for pf in pb_fields:
        f = _new(LanceField)  # (see _node)
        f.__dict__.update(
            id=pf.id,
            parent_id=pf.parent_id,
            name=pf.name,
            logical_type=pf.logical_type,
            nullable=pf.nullable,
            metadata=dict(pf.metadata) if len(pf.metadata) else {},
            encoding=pf.encoding,
        )
        out.append(f)
    return out


def with_ids(fields: Iterable[LanceField], first_id: int) -> list[LanceField]:
    """Renumber fields consecutively from ``first_id``, keeping parent links intact."""
    fields = list(fields)
    mapping = {f.id: first_id + i for i, f in enumerate(fields)}
    return [
        replace(f, id=mapping[f.id], parent_id=mapping.get(f.parent_id, -1) if f.parent_id != -1 else -1)
        for f in fields
    ]


# ---------------------------------------------------------------------------------------------
# pylance's ``lance.schema``: LanceSchema, its fields, and the schema's JSON form
# (``schema_to_json`` and ``json_to_schema``, from :mod:`lance_table.logical_types`)

__all__ = ["LanceSchema", "LanceSchemaField", "json_to_schema", "schema_to_json"]

_ENCODING_NAMES = {
    ENCODING_PLAIN: "Some(Plain)",
    ENCODING_VAR_BINARY: "Some(VarBinary)",
    ENCODING_DICTIONARY: "Some(Dictionary)",
}
_PRIMARY_KEY = "lance-schema:unenforced-primary-key"
_PRIMARY_KEY_POSITION = "lance-schema:unenforced-primary-key:position"


class LanceSchemaField:
    """One field of a :class:`LanceSchema` (pylance's ``lance.schema`` ``LanceField``): its name,
    id, metadata and children."""

    def __init__(self, field: LanceField, children: Sequence[LanceSchemaField], arrow: pa.Field) -> None:
        self._field = field
        self._children = list(children)
        self._arrow = arrow

    def name(self) -> str:
        return self._field.name

    def id(self) -> int:
        return self._field.id

    def children(self) -> list[LanceSchemaField]:
        return list(self._children)

    @property
    def metadata(self) -> dict[str, str]:
        """The field metadata (values as text, as pylance gives them)."""
        return {k: v.decode("utf-8", "replace") for k, v in self._field.metadata.items()}

    def to_arrow(self) -> pa.Field:
        """The field as an Arrow field (extension types as readers see them)."""
        return self._arrow

    def is_unenforced_primary_key(self) -> bool:
        return self.metadata.get(_PRIMARY_KEY, "").lower() in ("true", "1", "yes")

    def unenforced_primary_key_position(self) -> int | None:
        position = self.metadata.get(_PRIMARY_KEY_POSITION)
        return int(position) if position is not None and position.isdigit() else None

    def is_unenforced_clustering_key(self) -> bool:
        return False

    def unenforced_clustering_key_position(self) -> int | None:
        return None

    def __repr__(self) -> str:
        f = self._field
        md = ", ".join(f"{k!r}: {v!r}".replace("'", '"') for k, v in sorted(self.metadata.items()))
        kids = ", ".join(repr(c) for c in self._children)
        encoding = _ENCODING_NAMES.get(f.encoding, "None")
        return (
            f'Field {{ name: "{f.name}", id: {f.id}, parent_id: {f.parent_id}, '
            f'logical_type: LogicalType("{f.logical_type}"), metadata: {{{md}}}, encoding: {encoding}, '
            f"nullable: {str(f.nullable).lower()}, children: [{kids}] }}"
        )


class LanceSchema:
    """A schema with Lance field ids (pylance's ``lance.schema.LanceSchema``).

    Raises:
        SchemaError: the fields do not form a schema (on construction).

    Example:
        ```python
        schema = ds.lance_schema
        print(schema.field("id"), schema.to_pyarrow())
        ```
    """

    def __init__(self, fields: Sequence[LanceField], metadata: Mapping[str, bytes] | None = None) -> None:
        self._fields = tuple(fields)
        self._metadata = dict(metadata or {})
        build_tree(self._fields)  # checks the field list

    @staticmethod
    def from_pyarrow(schema: pa.Schema) -> LanceSchema:
        """Field ids given in pre-order from 0, as pylance gives them.

        Raises:
            SchemaError: a type has no Lance equivalent.
        """
        return LanceSchema(
            fields_from_arrow(schema), {k.decode(): v for k, v in (schema.metadata or {}).items()}
        )

    def to_pyarrow(self) -> pa.Schema:
        """The Arrow schema, extension types as readers see them (JSON as its stored bytes, as
        pylance gives it here)."""
        return user_schema(arrow_schema_from_fields(self._fields, self._metadata), json=False)

    def fields(self) -> list[LanceSchemaField]:
        """The top-level fields, with their Lance field ids and children."""

        def node(n: FieldNode, arrow: pa.Field) -> LanceSchemaField:
            kids = _child_fields(arrow.type)
            return LanceSchemaField(n.field, [node(c, a) for c, a in zip(n.children, kids)], arrow)

        return [node(n, a) for n, a in zip(build_tree(self._fields), self.to_pyarrow())]

    def field(self, name: str) -> LanceSchemaField | None:
        """The top-level field of that name, or None."""
        return next((f for f in self.fields() if f.name() == name), None)

    def field_case_insensitive(self, name: str) -> LanceSchemaField | None:
        """The top-level field of that name in any case, or None."""
        return next((f for f in self.fields() if f.name().lower() == name.lower()), None)

    def unenforced_primary_key(self) -> list[LanceSchemaField]:
        """The fields marked as the (unenforced) primary key, in key order."""
        found = [f for root in self.fields() for f in _walk(root) if f.is_unenforced_primary_key()]
        return sorted(
            found,
            key=lambda f: (
                f.unenforced_primary_key_position() is None,
                f.unenforced_primary_key_position() or 0,
            ),
        )

    def unenforced_clustering_key(self) -> list[LanceSchemaField]:
        """The clustering key fields (none: lance_table does not record one)."""
        return []

    @property
    def lance_fields(self) -> tuple[LanceField, ...]:
        """The flattened field list, as the manifest stores it."""
        return self._fields

    @property
    def metadata(self) -> dict[str, bytes]:
        """The schema's metadata."""
        return dict(self._metadata)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LanceSchema)
            and self._fields == other._fields
            and self._metadata == other._metadata
        )

    def __hash__(self) -> int:
        return hash(self._fields)

    def __repr__(self) -> str:
        md = ", ".join(f'"{k}": "{v.decode("utf-8", "replace")}"' for k, v in sorted(self._metadata.items()))
        return f"Schema {{ fields: [{', '.join(repr(f) for f in self.fields())}], metadata: {{{md}}} }}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (LanceSchema, (self._fields, self._metadata))


def _walk(f: LanceSchemaField) -> Iterator[LanceSchemaField]:
    yield f
    for c in f.children():
        yield from _walk(c)
