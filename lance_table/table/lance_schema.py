"""pylance's ``LanceSchema``: an Arrow schema with the Lance field ids, as ``Merge`` and ``Project``
take it (a Project renames, drops or reorders columns by field id).

pylance's own ``LanceSchema`` objects are accepted wherever ours is: they are read through their
pickled form (the ``lance.file.Field`` protobufs of their fields).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_table._proto import file_pb2
from lance_table.schema import (
    LanceField,
    arrow_schema_from_fields,
    build_tree,
    fields_from_arrow,
    fields_from_pb,
)


class LanceSchemaField:
    """One field of a :class:`LanceSchema` (pylance's ``LanceField``), with its children."""

    def __init__(self, field: LanceField, children: Sequence[LanceSchemaField]) -> None:
        self._field = field
        self._children = list(children)

    def name(self) -> str:
        return self._field.name

    def id(self) -> int:
        return self._field.id

    def children(self) -> list[LanceSchemaField]:
        return list(self._children)

    def __repr__(self) -> str:
        return f"LanceField(name={self.name()!r}, id={self.id()})"


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
        """The schema as a pyarrow schema."""
        return arrow_schema_from_fields(self._fields, self._metadata)

    def fields(self) -> list[LanceSchemaField]:
        """The top-level fields, with their Lance field ids and children."""

        def node(n: Any) -> LanceSchemaField:
            return LanceSchemaField(n.field, [node(c) for c in n.children])

        return [node(n) for n in build_tree(self._fields)]

    def field(self, name: str) -> LanceSchemaField | None:
        """The top-level field of that name, or None."""
        return next((f for f in self.fields() if f.name() == name), None)

    def field_case_insensitive(self, name: str) -> LanceSchemaField | None:
        """The top-level field of that name in any case, or None."""
        return next((f for f in self.fields() if f.name().lower() == name.lower()), None)

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
        return f"LanceSchema({self.to_pyarrow()})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (LanceSchema, (self._fields, self._metadata))


def as_lance_schema(value: Any) -> LanceSchema | None:
    """``value`` as a :class:`LanceSchema` when it is ours or pylance's; None otherwise.

    Raises:
        SchemaError: pylance's schema holds fields lance_table cannot read.
    """
    if isinstance(value, LanceSchema):
        return value
    if type(value).__name__ == "LanceSchema" and hasattr(value, "__reduce__"):
        try:
            _, (metadata_json, *protos) = value.__reduce__()
        except (TypeError, ValueError):
            return None
        pbs = [file_pb2.Field.FromString(p) for p in protos]
        metadata = {
            k: v.encode() if isinstance(v, str) else bytes(v) for k, v in json.loads(metadata_json).items()
        }
        return LanceSchema(fields_from_pb(pbs), metadata)
    return None
