"""pylance's ``lance.schema`` at lance_table's ``lance_table.schema``: ``LanceSchema`` and its fields
(names, ids, metadata, Arrow fields, printed form) and the JSON form of Arrow schemas, compared
with pylance on the same dataset and schemas."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.schema import LanceSchema, json_to_schema, schema_to_json

pytestmark = pytest.mark.interop

_SCHEMA = pa.schema(
    [
        pa.field("x", pa.int64(), False, metadata={"a": "b"}),
        pa.field("s", pa.struct([("a", pa.int64()), ("b", pa.string())])),
        pa.field("y", pa.list_(pa.float64())),
        pa.field("t", pa.timestamp("us", "UTC")),
        pa.field("d", pa.dictionary(pa.int32(), pa.string())),
        pa.field("f", pa.list_(pa.float32(), 4)),
        pa.field("l", pa.list_(pa.struct([("a", pa.int8())]))),
        pa.field("ll", pa.large_list(pa.int8())),
        pa.field("j", pa.json_()),
        pa.field("u", pa.uuid()),
        pa.field("fb", pa.binary(4)),
        pa.field("dec", pa.decimal128(10, 2)),
    ],
    metadata={"k": "v"},
)


def test_lance_schema_matches_pylances(tmp_path: Path) -> None:
    data = pa.table({"x": range(2), "s": [{"a": 1, "b": "h"}, None], "y": [[1.0], []]})
    lance.write_dataset(data, tmp_path)
    lance.dataset(tmp_path).update_field_metadata(
        {"x": {"type": "numeric"}}
    )  # (one key: pylance prints a hash map)
    ours, theirs = lt.dataset(tmp_path).lance_schema, lance.dataset(tmp_path).lance_schema
    assert isinstance(ours, LanceSchema)
    # pylance prints fields lance_table does not model (dictionary, key positions), all None here
    assert repr(ours) == re.sub(r", (dictionary|unenforced_\w+_key_position): None", "", repr(theirs))
    assert repr(ours).startswith("Schema {")

    def walk(fields):
        for f in fields:
            yield f
            yield from walk(f.children())

    rows = [
        (f.name(), f.id(), f.metadata, f.to_arrow(), f.is_unenforced_primary_key())
        for f in walk(ours.fields())
    ]
    assert rows == [
        (f.name(), f.id(), f.metadata, f.to_arrow(), f.is_unenforced_primary_key())
        for f in walk(theirs.fields())
    ]
    assert ours.to_pyarrow() == theirs.to_pyarrow()
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert LanceSchema.from_pyarrow(data.schema).to_pyarrow() == data.schema
    assert ours.field("s").children()[1].name() == "b" and ours.field("nope") is None
    assert ours.unenforced_primary_key() == [] and theirs.unenforced_primary_key() == []


def test_schema_json_is_pylances() -> None:
    assert schema_to_json(_SCHEMA) == lance.schema_to_json(_SCHEMA)
    assert lt.schema_to_json is schema_to_json
    js = lance.schema_to_json(_SCHEMA)
    assert json_to_schema(js) == lance.json_to_schema(js) == _SCHEMA
    with pytest.raises(ValueError):
        schema_to_json(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int8()))]))
    for bad in ({"fields": [{"name": "x", "type": {"type": "nope"}}]}, {"fields": [{"name": "x"}]}, {}):
        with pytest.raises(ValueError):
            json_to_schema(bad)
