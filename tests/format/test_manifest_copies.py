"""The fixed costs a commit no longer pays: :meth:`Manifest.evolve` copies a manifest's values
without its ``__init__``, a manifest's schema is serialized once per fields tuple, and
``storage_schema`` is worked out once per schema object. Each gives what the slow path gives,
and none serves a schema or manifest that changed (a dataset rewritten by pylance between
lance_table's commits)."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table import extensions
from lance_table._proto import table_pb2
from lance_table.format import manifest as manifest_mod
from lance_table.format.manifest import DataFile, Fragment, Manifest
from lance_table.format.manifest_file import decode_manifest_file, encode_manifest_file
from lance_table.schema import fields_from_arrow, fields_to_pb
from lance_table.table.session import clear_caches


def _fragment(i: int, rows: int = 10) -> Fragment:
    return Fragment(id=i, files=(DataFile(f"f{i}.lance", (0,), (0,), 2, 2, 100 + i),), physical_rows=rows)


def _manifest(n: int = 3) -> Manifest:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.struct([("a", pa.string())]))])
    return Manifest(
        fields=tuple(fields_from_arrow(schema)),
        fragments=tuple(_fragment(i) for i in range(n)),
        version=4,
        schema_metadata={"k": b"v"},
        max_fragment_id=n - 1,
        config={"c": "1"},
    )


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"version": 9, "tag": "x"},
        {"fragments": (_fragment(7),), "max_fragment_id": 7},
        {"config": {}, "dictionaries": {}, "index_section": b"abc", "data_format": ("lance", "2.0")},
        {"fields": (), "schema_metadata": {}},
    ],
)
def test_evolve_gives_what_replace_gives(changes: dict) -> None:
    m = _manifest()
    got = m.evolve(**changes)
    want = replace(m, **changes)
    assert got == want
    assert encode_manifest_file(got, b"t") == encode_manifest_file(want, b"t")
    assert got is not m and m == _manifest()  # the original is unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):  # still frozen
        got.version = 1  # type: ignore[misc]


def test_evolve_refuses_unknown_fields_and_drops_what_was_cached() -> None:
    m = _manifest()
    with pytest.raises(TypeError):
        m.evolve(no_such_field=1)
    assert m.data_formats == {"2.2"}  # (cached in the instance)
    v21 = Fragment(id=9, files=(DataFile("g.lance", (0,), (0,), 2, 1, 5),), physical_rows=1)
    changed = m.evolve(fragments=(v21,))
    assert changed.data_formats == {"2.1"}  # worked out again, not copied


def test_evolve_of_a_decoded_manifest_keeps_its_fragments_unconverted(tmp_path) -> None:
    m = _manifest(5)
    data = encode_manifest_file(m, b"t")
    decoded = decode_manifest_file(data, "x.manifest").manifest
    assert decoded.fragment_source is not None
    copy = decoded.evolve(version=12)
    assert copy.fragment_source is decoded.fragment_source
    assert copy.fragments == m.fragments and copy.version == 12
    assert encode_manifest_file(copy, b"t") == encode_manifest_file(replace(m, version=12), b"t")


def _slow_fields(fields) -> bytes:
    pb = table_pb2.Manifest()
    fields_to_pb(fields, pb.fields)
    return pb.SerializeToString()


def test_kept_schema_bytes_are_those_built_field_by_field() -> None:
    clear_caches()
    m = _manifest()
    first = m.to_pb(10, None).SerializeToString()
    again = m.to_pb(10, None).SerializeToString()  # (from the kept bytes)
    assert first == again
    assert manifest_mod._fields_pb_bytes(m.fields) == _slow_fields(m.fields)
    # the manifest's other values and the fields' dictionary positions still apply
    pb = m.to_pb(10, 3, {0: (5, 6)})
    assert pb.fields[0].dictionary.offset == 5 and pb.fields[0].dictionary.length == 6
    assert list(pb.fields) and pb.index_section == 3 and pb.transaction_section == 10
    assert manifest_mod._fields_pb_bytes(m.fields) == _slow_fields(m.fields)  # (not changed by it)


def test_schema_bytes_follow_the_fields_tuple_not_its_contents() -> None:
    clear_caches()
    m = _manifest()
    manifest_mod._fields_pb_bytes(m.fields)
    other = tuple(fields_from_arrow(pa.schema([pa.field("z", pa.float32())])))
    assert manifest_mod._fields_pb_bytes(other) == _slow_fields(other)
    as_list = list(m.fields)  # a list may change: never kept
    assert manifest_mod._fields_pb_bytes(as_list) == _slow_fields(as_list)  # type: ignore[arg-type]
    as_list.pop()
    assert manifest_mod._fields_pb_bytes(as_list) == _slow_fields(as_list)  # type: ignore[arg-type]


def test_storage_schema_is_kept_per_schema_object() -> None:
    import lance_table.arrow  # noqa: F401  (registers the bfloat16 extension type)
    from lance_table.arrow import BFloat16Type

    plain = pa.schema([pa.field("a", pa.int64())])
    assert extensions.storage_schema(plain) is plain
    assert extensions.storage_schema(plain) is plain
    ext = pa.schema([pa.field("b", BFloat16Type()), pa.field("c", pa.list_(pa.string()))])
    first = extensions.storage_schema(ext)
    extensions._STORAGE_SCHEMAS.clear()
    fresh = extensions.storage_schema(ext)
    assert first.equals(fresh, check_metadata=True)
    assert extensions.storage_schema(ext) is fresh
    assert not isinstance(first.field("b").type, pa.BaseExtensionType)
    assert first.field("b").metadata  # (the extension, recorded as Lance stores it)


def test_appends_after_pylance_rewrote_the_dataset_use_its_new_schema(tmp_path) -> None:
    """lance_table appends (its schema bytes and storage schema kept), pylance overwrites the
    dataset with another schema, lance_table appends again: the manifest holds the new schema,
    and both libraries read every row."""
    import lance

    clear_caches()
    uri = str(tmp_path / "ds")
    one = lambda i: pa.table({"id": np.arange(i * 5, i * 5 + 5), "s": [f"r{i}"] * 5})  # noqa: E731
    two = lambda i: pa.table({"k": pa.array([f"k{i}"] * 3), "x": np.full(3, i * 0.5)})  # noqa: E731
    lt.write_dataset(one(0), uri, data_storage_version="2.2")
    for i in range(1, 4):
        lt.write_dataset(one(i), uri, mode="append")
    lance.write_dataset(two(0), uri, mode="overwrite", data_storage_version="2.2")
    for i in range(1, 3):
        lt.write_dataset(two(i), uri, mode="append")
    want = pa.concat_tables([two(i) for i in range(3)])
    assert lt.dataset(uri).to_table() == want
    assert lance.dataset(uri).to_table() == want
    assert lance.dataset(uri).schema == want.schema
    lance.write_dataset(one(9), uri, mode="overwrite")
    lt.write_dataset(one(10), uri, mode="append")
    back = pa.concat_tables([one(9), one(10)])
    assert lance.dataset(uri).to_table() == back
    assert lt.dataset(uri).to_table() == back
