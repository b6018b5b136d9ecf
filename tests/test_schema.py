"""Lance field lists and Arrow schemas, both ways."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_table.errors import SchemaError
from lance_table.schema import arrow_schema_from_fields, build_tree, fields_from_arrow

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("s", pa.string(), metadata={b"k": b"v"}),
        pa.field("l", pa.list_(pa.int32())),
        pa.field("st", pa.struct([pa.field("a", pa.float32()), pa.field("b", pa.large_binary())])),
        pa.field("v", pa.list_(pa.float32(), 4)),
        pa.field("t", pa.timestamp("us", tz="UTC")),
        pa.field("d", pa.decimal128(10, 3)),
        pa.field("dict", pa.dictionary(pa.int32(), pa.string())),
    ],
    metadata={b"owner": b"me"},
)


def test_arrow_schemas_round_trip_through_lance_fields():
    fields = fields_from_arrow(SCHEMA)
    assert [f.id for f in fields] == list(range(len(fields)))
    back = arrow_schema_from_fields(fields, {k.decode(): v for k, v in SCHEMA.metadata.items()})
    assert back.equals(SCHEMA, check_metadata=True)


def test_the_tree_has_the_top_level_fields_in_order():
    roots = build_tree(fields_from_arrow(SCHEMA))
    assert [r.name for r in roots] == SCHEMA.names
    assert [c.name for c in roots[3].children] == ["a", "b"]


def test_fields_that_reach_no_top_level_field_are_refused():
    fields = fields_from_arrow(SCHEMA)
    orphan = fields[3].__class__(**{**fields[3].__dict__, "parent_id": 999})
    with pytest.raises(SchemaError):
        build_tree([*fields[:3], orphan, *fields[4:]])


@pytest.mark.parametrize("where", ["schema", "field"])
def test_metadata_must_be_utf8(where):
    bad = {b"k": b"\xff"}
    schema = pa.schema([pa.field("a", pa.int32(), metadata=bad if where == "field" else None)])
    if where == "schema":
        schema = schema.with_metadata(bad)
    with pytest.raises(SchemaError, match="UTF-8"):
        fields_from_arrow(schema)


def test_fields_round_trip_through_protobuf_with_and_without_metadata():
    from lance_table._proto import table_pb2
    from lance_table.schema import fields_from_pb, fields_to_pb

    fields = fields_from_arrow(SCHEMA)
    pb = table_pb2.Manifest()
    fields_to_pb(fields, pb.fields)
    back = fields_from_pb(pb.fields)
    assert back == fields
    assert back[1].metadata == {"k": b"v"} and back[0].metadata == {}
    back[0].metadata["x"] = b"y"  # each field owns its metadata
    assert back[2].metadata == {}


@pytest.mark.parametrize("where", ["top", "struct", "list"])
def test_repeated_names_are_refused_at_any_level(where):
    if where == "top":
        fields = fields_from_arrow(pa.schema([pa.field("a", pa.int32()), pa.field("b", pa.int32())]))
        fields[1] = fields[1].__class__(**{**fields[1].__dict__, "name": "a"})
    else:
        inner = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.int32())])
        fields = fields_from_arrow(pa.schema([pa.field("s", inner)]))
        fields[2] = fields[2].__class__(**{**fields[2].__dict__, "name": "x"})
        if where == "list":  # one child under a list: never a repeat
            fields = fields_from_arrow(pa.schema([pa.field("l", pa.list_(pa.int32()))]))
            assert [n.name for n in build_tree(fields)] == ["l"]
            return
    with pytest.raises(SchemaError, match="repeat"):
        build_tree(fields)
