"""A 2.1/2.2 writer's column plan (the leaf plans of its top-level fields, checked against the
Arrow schema) is found once per schema object and field tree: a file written from the kept plan
is byte for byte the one written without it, a schema error is raised every time (a failed check
is never kept), another schema or version never gets the plan of one before, and blob v2 schemas
keep the writer's own path."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from lance_table.errors import SchemaError, UnsupportedFormatError
from lance_table.file import writer_schema
from lance_table.file.writer import LanceFileWriter
from lance_table.schema import fields_from_arrow
from tests.helpers import file_bytes, pylance_file_table, varied_table

_write = file_bytes
_read = pylance_file_table


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_files_from_a_kept_plan_are_those_written_without_it(version: str, tmp_path) -> None:
    table = varied_table(300, seed=3, wide=True)
    fields = fields_from_arrow(table.schema)
    writer_schema.PLANS.clear()
    first = _write(table, version, fields)  # (plans it)
    assert len(writer_schema.PLANS) == 1
    kept = _write(table, version, fields)  # (from the kept plan)
    writer_schema.PLANS.clear()
    assert kept == first == _write(table, version, fields)
    assert _read(kept, tmp_path).equals(table)


def test_another_schema_or_version_is_planned_for_itself(tmp_path) -> None:
    a = pa.table({"x": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", None]})
    b = pa.table({"x": pa.array([[1], [], [2, 3]], pa.list_(pa.int64())), "s": [1.5, 2.5, None]})
    for table in (a, b, a, b):
        assert _read(_write(table), tmp_path).equals(table)
        assert _read(_write(table, "2.1"), tmp_path).equals(table)
    # the same field ids over another Arrow schema: refused every time, never planned
    wrong = pa.table({"x": pa.array(["1", "2", "3"]), "s": ["a", "b", None]})
    fields = fields_from_arrow(a.schema)
    _write(a, fields=fields)
    for _ in range(2):
        with pytest.raises(SchemaError):
            LanceFileWriter(io.BytesIO(), wrong.schema, version="2.2", fields=fields)


def test_unwritable_leaves_are_refused_every_time() -> None:
    bad = pa.table({"x": pa.array([True, False, True]).dictionary_encode()})
    for _ in range(2):
        with pytest.raises(UnsupportedFormatError, match="dictionaries of bool"):
            _write(bad)


def test_blob_v2_schemas_keep_the_writers_own_path() -> None:
    """A blob v2 column is written by the writer's own path (never planned), and refused in 2.1
    files every time."""
    blob = pa.struct([pa.field("data", pa.large_binary()), pa.field("uri", pa.utf8())])
    field = pa.field("b", blob, metadata={"ARROW:extension:name": "lance.blob.v2"})
    schema = pa.schema([pa.field("id", pa.int64()), field])
    data = pa.StructArray.from_arrays(
        [pa.array([b"abc", None, b""], pa.large_binary()), pa.nulls(3, pa.utf8())],
        fields=list(blob),
        mask=pa.array([False, True, False]),
    )
    table = pa.table({"id": np.arange(3), "b": data}, schema=schema)
    writer_schema.PLANS.clear()
    for _ in range(2):
        first = _write(table)
        with pytest.raises(UnsupportedFormatError, match=r"2\.2"):
            _write(table, "2.1")
    assert not writer_schema.PLANS  # (nothing planned for it)
    assert first == _write(table)


def test_schemas_of_the_same_types_are_found_so_with_or_without_the_shortcut() -> None:
    """``same_types`` answers as the walk over the fields does: equal schemas at once, and
    schemas that differ only in nullability or metadata are still of the same types."""

    def walk(a: pa.Schema, b: pa.Schema) -> bool:
        return len(a) == len(b) and all(x.name == y.name and x.type == y.type for x, y in zip(a, b))

    base = pa.schema([pa.field("a", pa.int64()), pa.field("t", pa.list_(pa.string()))])
    cases = [
        base,
        base.with_metadata({"k": "v"}),
        pa.schema([pa.field("a", pa.int64(), nullable=False), base.field("t")]),
        pa.schema([pa.field("a", pa.int64(), metadata={"m": "1"}), base.field("t")]),
        pa.schema([pa.field("a", pa.int32()), base.field("t")]),
        pa.schema([pa.field("b", pa.int64()), base.field("t")]),
        pa.schema([pa.field("a", pa.int64())]),
        pa.schema([base.field("t"), pa.field("a", pa.int64())]),
    ]
    for other in cases:
        assert writer_schema.same_types(base, other) == walk(base, other)
        assert writer_schema.same_types(other, base) == walk(other, base)
    assert writer_schema.same_types(base, cases[2]) and not writer_schema.same_types(base, cases[4])
