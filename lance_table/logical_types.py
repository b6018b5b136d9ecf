"""Lance logical type strings (``int64``, ``timestamp:us:UTC``, ``fixed_size_list:float:16``,
``fixed_size_list:lance.bfloat16:8``) and the Arrow types they stand for."""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa

from lance_table.errors import SchemaError
from lance_table.extensions import extension_metadata

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


@functools.lru_cache(maxsize=1024)
def leaf_type_from_logical(lt: str) -> pa.DataType:
    """The Arrow type of a logical type string that needs no child fields (remembered: Arrow
    types are immutable, and building a fixed-size list type costs more than a schema's other
    fields together; every write resolves its schema several times).

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
# the JSON form of an Arrow schema (pylance's ``schema_to_json`` / ``json_to_schema``)


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """The schema as pylance's JSON-compatible dict: fields with their logical types, nested
    types with their ``fields`` (and ``length``), extension types as their storage and metadata.

    Raises:
        SchemaError: a type has no Lance equivalent (a map, say); also a ValueError.

    Example:
        ```python
        as_json = lt.schema_to_json(ds.schema)
        assert lt.json_to_schema(as_json) == ds.schema
        ```
    """
    out: dict[str, Any] = {"fields": [_field_json(f) for f in schema]}
    if schema.metadata:
        out["metadata"] = {k.decode(): v.decode() for k, v in schema.metadata.items()}
    return out


def _field_json(f: pa.Field) -> dict[str, Any]:
    t, md = f.type, dict(f.metadata or {})
    if isinstance(t, pa.BaseExtensionType):
        name, params = extension_metadata(t)
        md.update({b"ARROW:extension:name": name, b"ARROW:extension:metadata": params})
        t = t.storage_type
    out: dict[str, Any] = {"name": f.name, "type": _type_json(t), "nullable": f.nullable}
    if md:
        out["metadata"] = {k.decode(): v.decode() for k, v in md.items()}
    return out


def _type_json(t: pa.DataType) -> dict[str, Any]:
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_field_json(t.field(i)) for i in range(t.num_fields)]}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {
            "type": "list" if pa.types.is_list(t) else "large_list",
            "fields": [_field_json(t.value_field)],
        }
    if pa.types.is_fixed_size_list(t):
        return {"type": "fixed_size_list", "fields": [_field_json(t.value_field)], "length": t.list_size}
    if pa.types.is_fixed_size_binary(t):
        return {"type": "fixed_size_binary", "length": t.byte_width}
    if pa.types.is_map(t):
        raise SchemaError(f"Failed to convert schema to json: unsupported type {t}")
    return {"type": logical_type_of(t)}


def json_to_schema(schema_json: dict[str, Any]) -> pa.Schema:
    """The Arrow schema of pylance's JSON form (extension types rebuilt as pyarrow rebuilds them).

    Raises:
        SchemaError: the JSON is not such a schema (also a ValueError).

    Example:
        ```python
        schema = lt.json_to_schema({"fields": [{"name": "id", "type": {"type": "int64"}, "nullable": True}]})
        ```
    """
    try:
        fields = [_field_of(f) for f in schema_json["fields"]]
        metadata = schema_json.get("metadata") or None
        schema = pa.schema(fields, metadata=metadata)
        return pa.ipc.read_schema(pa.py_buffer(schema.serialize()))  # extension types rebuilt
    except (KeyError, TypeError, AttributeError, pa.ArrowException) as exc:
        raise SchemaError(f"Failed to convert json to schema: {exc!r}, json={schema_json}") from exc


def _field_of(d: dict[str, Any]) -> pa.Field:
    spec = d["type"]
    kind = spec["type"]
    kids = [_field_of(c) for c in spec.get("fields") or []]
    if kind == "struct":
        t = pa.struct(kids)
    elif kind in ("list", "large_list"):
        t = (pa.list_ if kind == "list" else pa.large_list)(kids[0])
    elif kind == "fixed_size_list":
        t = pa.list_(kids[0], int(spec["length"]))
    elif kind == "fixed_size_binary":
        t = pa.binary(int(spec["length"]))
    else:
        t = leaf_type_from_logical(kind)
    return pa.field(d["name"], t, bool(d.get("nullable", True)), metadata=d.get("metadata") or None)
