"""What writes take as data, appends that leave out nullable columns, and Arrow extension types:
the same call on lance_table and on pylance (the oracle), results compared in full, both ways."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pds
import pytest
from conftest import make_rows
from helpers import assert_tables_equal

import lance_table as lt
from lance_table import jsonb
from lance_table.table.operations.inputs import coerce_reader

lance = pytest.importorskip("lance")
lance_arrow = pytest.importorskip("lance.arrow")  # registers lance.bfloat16, as any pylance user has it

pytestmark = pytest.mark.interop

BASE = make_rows(0, 50).select(["id", "x", "s", "tags"])
SCHEMA32 = pa.schema(
    [("id", pa.int32()), ("x", pa.float32()), ("s", pa.string()), ("tags", BASE["tags"].type)]
)


class _Stream:
    """An object that speaks only the Arrow C stream protocol."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.table.__arrow_c_stream__(requested_schema)


def _pandas(index: Any) -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame({"a": [1, 2, 3], "b": ["x", None, "z"]}, index=index)


def _kinds(tmp_path: Any) -> dict[str, tuple[Any, pa.Schema | None]]:
    """Inputs by kind: a factory (each library gets its own copy of a stream) and ``schema=``."""
    pd = pytest.importorskip("pandas")
    src = tmp_path / "src"
    lance.write_dataset(BASE, src)
    return {
        "table": (lambda: BASE, None),
        "batch": (lambda: BASE.combine_chunks().to_batches()[0], None),
        "reader": (lambda: pa.RecordBatchReader.from_batches(BASE.schema, BASE.to_batches(7)), None),
        "iterable_cast": (lambda: iter(BASE.to_batches(9)), SCHEMA32),
        "list_of_batches": (lambda: BASE.to_batches(9), BASE.schema),
        "pyarrow_dataset": (lambda: pds.dataset(BASE), None),
        "pyarrow_scanner": (lambda: pds.dataset(BASE).scanner(columns=["id", "s"]), None),
        "dict": (lambda: {"a": [1, 2], "b": ["x", None]}, None),
        "dict_schema": (lambda: {"a": [1, 2]}, pa.schema([("a", pa.int16())])),
        "rows": (lambda: [{"a": 1, "b": "x"}, {"a": 2}], None),
        "rows_schema": (
            lambda: [{"a": 1, "b": "x"}],
            pa.schema([("b", pa.large_string()), ("a", pa.int8())]),
        ),
        "pandas_range": (lambda: _pandas(None), None),
        "pandas_named_index": (lambda: _pandas(pd.Index([10, 20, 30], name="key")), None),
        "pandas_unnamed_index": (lambda: _pandas([5, 7, 9]), None),
        "pandas_multiindex": (
            lambda: _pandas(pd.MultiIndex.from_tuples([(1, "a"), (2, "b"), (3, "c")], names=["i", "j"])),
            None,
        ),
        "pylance_dataset": (lambda: lance.dataset(src), None),
        "pylance_scanner": (lambda: lance.dataset(src).scanner(columns=["s", "id"], filter="id > 10"), None),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "table",
        "batch",
        "reader",
        "iterable_cast",
        "list_of_batches",
        "pyarrow_dataset",
        "pyarrow_scanner",
        "dict",
        "dict_schema",
        "rows",
        "rows_schema",
        "pandas_range",
        "pandas_named_index",
        "pandas_unnamed_index",
        "pandas_multiindex",
        "pylance_dataset",
        "pylance_scanner",
    ],
)
def test_each_input_kind_writes_what_pylance_writes(tmp_path, kind):
    make, schema = _kinds(tmp_path)[kind]
    ours = lt.write_dataset(make(), tmp_path / "ours", schema=schema)
    theirs = lance.write_dataset(make(), tmp_path / "theirs", schema=schema)
    expected = theirs.to_table()
    # schema metadata (pandas') included: pylance keeps it, so do we
    assert_tables_equal(lt.dataset(tmp_path / "ours").to_table(), expected)
    assert ours.schema == theirs.schema and ours.schema.metadata == theirs.schema.metadata
    assert_tables_equal(lance.dataset(tmp_path / "ours").to_table(), expected)


def test_pandas_named_index_is_a_column_with_pandas_metadata(tmp_path):
    pd = pytest.importorskip("pandas")
    df = _pandas(pd.Index([10, 20, 30], name="key"))
    ds = lt.write_dataset(df, tmp_path / "ds")
    assert ds.schema.names == ["a", "b", "key"]
    assert b"pandas" in ds.schema.metadata
    back = lance.dataset(tmp_path / "ds").to_table().to_pandas()
    assert back.index.name == "key" and back.index.tolist() == [10, 20, 30]


def test_lance_table_dataset_and_its_stream_objects_are_inputs(tmp_path):
    src = lt.write_dataset(BASE, tmp_path / "src")
    copy = lt.write_dataset(src, tmp_path / "copy")
    assert_tables_equal(copy.to_table(), BASE)
    scanned = lt.write_dataset(src.scanner(columns=["s", "id"], filter="id > 10"), tmp_path / "scanned")
    theirs = lance.write_dataset(
        lance.dataset(tmp_path / "src").scanner(columns=["s", "id"], filter="id > 10"), tmp_path / "t"
    )
    assert_tables_equal(scanned.to_table(), theirs.to_table())
    streamed = lt.write_dataset(_Stream(BASE), tmp_path / "stream")  # pylance refuses this one
    assert_tables_equal(streamed.to_table(), BASE)
    with pytest.raises(TypeError):
        lance.write_dataset(_Stream(BASE), tmp_path / "theirs")


def test_polars_frames(tmp_path):
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None]})
    ours = lt.write_dataset(df, tmp_path / "ours")
    theirs = lance.write_dataset(df, tmp_path / "theirs")
    assert_tables_equal(ours.to_table(), theirs.to_table())
    lazy = pl.concat([df] * 4).lazy().filter(pl.col("a") > 1)
    ds = lt.write_dataset(lazy, tmp_path / "lazy")
    assert_tables_equal(ds.to_table(), lazy.collect().to_arrow())


def test_streams_are_read_as_the_write_consumes_them():
    pulled: list[int] = []

    def gen():
        for i, b in enumerate(BASE.to_batches(10)):
            pulled.append(i)
            yield b

    reader = coerce_reader(gen(), BASE.schema)
    assert pulled == []  # nothing read before the write asks
    next(iter(reader))
    assert pulled == [0]


def test_unsupported_inputs_are_type_errors(tmp_path):
    for bad in (5, object(), "text", None):
        with pytest.raises(lt.InputTypeError) as info:
            lt.write_dataset(bad, tmp_path / "ds")
        assert isinstance(info.value, TypeError)
    with pytest.raises(TypeError, match="int"):
        lt.write_dataset([1, 2], tmp_path / "ds", schema=pa.schema([("a", pa.int64())]))
    with pytest.raises(TypeError):  # pylance: the same mistake, the same builtin
        lance.write_dataset(5, tmp_path / "theirs")
    assert not (tmp_path / "ds").exists()


def test_an_iterable_that_cannot_be_cast_to_schema_is_a_value_error(tmp_path):
    with pytest.raises(lt.SchemaError) as info:
        lt.write_dataset(iter(BASE.to_batches()), tmp_path / "ds", schema=pa.schema([("nope", pa.int64())]))
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="schema"):
        lt.write_dataset(iter([]), tmp_path / "ds")


# -- appends that leave out nullable columns ------------------------------------------------------

STRUCTS = pa.table({"a": [1], "s": pa.array([{"x": 1, "y": "q"}])})
APPENDS = {
    "missing_column": (BASE, BASE.select(["id", "x", "tags"]).slice(0, 5)),
    "only_one_column": (BASE, BASE.select(["s"]).slice(0, 5)),
    "reordered_and_missing": (BASE, BASE.select(["tags", "id"]).slice(0, 5)),
    "missing_struct_field": (STRUCTS, pa.table({"a": [2], "s": pa.array([{"x": 5}])})),
    "missing_struct": (STRUCTS, pa.table({"a": [2]})),
}


def _data_file_fields(ds: Any) -> list[list[int]]:
    """The fields each data file holds (pylance keeps the data's column order in a file; the set
    is what reads depend on)."""
    return [sorted(f.fields) for frag in ds.get_fragments() for f in frag.metadata.files]


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("case", sorted(APPENDS))
def test_append_lacking_nullable_columns_matches_pylance(tmp_path, case, version):
    base, more = APPENDS[case]
    lt.write_dataset(base, tmp_path / "ours", data_storage_version=version)
    lance.write_dataset(base, tmp_path / "theirs", data_storage_version=version)
    lt.write_dataset(more, tmp_path / "ours", mode="append")
    lance.write_dataset(more, tmp_path / "theirs", mode="append")
    expected = lance.dataset(tmp_path / "theirs").to_table()
    assert_tables_equal(lance.dataset(tmp_path / "ours").to_table(), expected)
    assert_tables_equal(lt.dataset(tmp_path / "ours").to_table(), expected)
    # the new files hold only the columns the data had, as pylance's do
    assert _data_file_fields(lance.dataset(tmp_path / "ours")) == _data_file_fields(
        lance.dataset(tmp_path / "theirs")
    )
    # and pylance appending to ours (and the reverse) reads the same everywhere
    lance.write_dataset(more, tmp_path / "ours", mode="append")
    lt.write_dataset(more, tmp_path / "theirs", mode="append")
    assert_tables_equal(
        lt.dataset(tmp_path / "ours").to_table(), lance.dataset(tmp_path / "theirs").to_table()
    )


def test_legacy_append_lacking_columns_fails_like_pylance(tmp_path):
    for name, lib in (("ours", lt), ("theirs", lance)):
        lib.write_dataset(BASE, tmp_path / name, data_storage_version="legacy")
    with pytest.raises(lt.SchemaError, match="legacy"):
        lt.write_dataset(BASE.select(["id"]), tmp_path / "ours", mode="append")
    with pytest.raises(OSError):
        lance.write_dataset(BASE.select(["id"]), tmp_path / "theirs", mode="append")
    assert lt.dataset(tmp_path / "ours").version == 1


def test_append_lacking_a_non_nullable_column_or_with_an_extra_one_fails_like_pylance(tmp_path):
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    base = pa.table({"a": [1], "b": ["x"]}, schema=schema)
    for name, lib in (("ours", lt), ("theirs", lance)):
        lib.write_dataset(base, tmp_path / name)
    for bad in (pa.table({"b": ["y"]}), pa.table({"a": [2], "zz": [1]})):
        with pytest.raises(lt.SchemaError):
            lt.write_dataset(bad, tmp_path / "ours", mode="append")
        with pytest.raises(OSError):
            lance.write_dataset(bad, tmp_path / "theirs", mode="append")
    assert lt.dataset(tmp_path / "ours").version == 1
    assert_tables_equal(lt.dataset(tmp_path / "ours").to_table(), base)


# -- extension types ----------------------------------------------------------------------------

JSON_TEXTS = [
    '{"b":1,"a":[1,2.5,-3,null,true,false,"s"]}',
    None,
    '  { "k" : [ 1 , "x" ] , "é" : {} }  ',
    "0",
    "-129",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "1e15",
    "1e16",
    "1.5e-5",
    "1e-6",
    "-0.0",
    "12.340",
    '"a\\"b\\\\c\\n\\t\\u0001\\u00e9/\\ud83d\\ude00"',
    "[[],{}]",
    "1e400",
]


def _extension_table() -> pa.Table:
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(36, dtype=np.float32).reshape(9, 2, 2))
    bf16 = lance_arrow.bfloat16_array([1.5, None, 3.25, -2.0, 0.0, 1.0, 2.0, 3.0, 4.0])
    uuids = pa.array([uuid.UUID(int=i).bytes if i % 4 else None for i in range(9)], pa.uuid())
    js = pa.array(JSON_TEXTS[:9], pa.json_())
    nested = pa.StructArray.from_arrays([js, tensors], names=["j", "t"])
    return pa.table(
        {
            "j": js,
            "t": tensors,
            "bf": bf16,
            "u": uuids,
            "s": nested,
            "l": pa.ListArray.from_arrays(pa.array([0, 2, 2, 4, 4, 5, 6, 7, 8, 9]), bf16),
        }
    )


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_extension_types_round_trip_both_ways(tmp_path, version):
    table = _extension_table()
    lt.write_dataset(table, tmp_path / "ours", data_storage_version=version)
    lance.write_dataset(table, tmp_path / "theirs", data_storage_version=version)
    theirs_read = lance.dataset(tmp_path / "theirs").to_table()
    for got in (
        lance.dataset(tmp_path / "ours").to_table(),
        lt.dataset(tmp_path / "theirs").to_table(),
        lt.dataset(tmp_path / "ours").to_table(),
    ):
        assert got.schema == theirs_read.schema
        assert got.equals(theirs_read)
    assert lt.dataset(tmp_path / "ours").schema == lance.dataset(tmp_path / "theirs").schema
    ours_fields = lt.dataset(tmp_path / "ours").manifest.fields
    theirs_fields = lt.dataset(tmp_path / "theirs").manifest.fields
    assert [(f.name, f.logical_type, dict(f.metadata)) for f in ours_fields] == [
        (f.name, f.logical_type, dict(f.metadata)) for f in theirs_fields
    ]
    # appends and compaction keep them
    lt.write_dataset(table.slice(2, 3), tmp_path / "theirs", mode="append")
    expected = pa.concat_tables([theirs_read, lance.dataset(tmp_path / "theirs").to_table().slice(9)])
    assert lance.dataset(tmp_path / "theirs").to_table().slice(9).equals(theirs_read.slice(2, 3))
    assert lt.dataset(tmp_path / "theirs").to_table().equals(expected)


def test_json_bytes_are_pylances(tmp_path):
    """Every JSON value is stored as the JSONB bytes pylance stores, and reads back as its text."""
    table = pa.table({"j": pa.array(JSON_TEXTS, pa.json_())})
    lance.write_dataset(table, tmp_path / "theirs")
    lt.write_dataset(table, tmp_path / "ours")
    texts = lance.dataset(tmp_path / "theirs").to_table()["j"]
    assert lt.dataset(tmp_path / "ours").to_table()["j"].equals(texts)
    assert lance.dataset(tmp_path / "ours").to_table()["j"].equals(texts)
    stored = lt.dataset(tmp_path / "theirs")._snapshot.fragment_readers()[0]
    from lance_table.file.runs import Runs

    raw = stored._reader(stored.fragment.files[0]).read_runs(Runs.span(0, len(JSON_TEXTS)), ["j"])["j"]
    for text, data in zip(JSON_TEXTS, raw.to_pylist()):
        assert (data is None) == (text is None)
        if text is not None:
            assert jsonb.encode(text) == data, text


def test_invalid_json_is_a_value_error(tmp_path):
    bad = pa.table({"j": pa.array(['{"a":1,"a":2}'], pa.json_())})
    with pytest.raises(lt.SchemaError, match="row 0") as info:
        lt.write_dataset(bad, tmp_path / "ds")
    assert isinstance(info.value, ValueError)
    with pytest.raises(OSError, match="duplicate"):
        lance.write_dataset(bad, tmp_path / "theirs")


def test_copies_between_datasets_keep_extension_types(tmp_path):
    table = _extension_table()
    src = lt.write_dataset(table, tmp_path / "src")
    shutil.rmtree(tmp_path / "copy", ignore_errors=True)
    copy = lt.write_dataset(src, tmp_path / "copy")
    assert copy.to_table().equals(lance.dataset(tmp_path / "src").to_table())


def test_write_fragments_takes_the_same_inputs(tmp_path):
    pd = pytest.importorskip("pandas")
    uri = tmp_path / "ds"
    lt.write_dataset(pa.table({"a": [0], "b": ["w"]}), uri)
    ds = lt.dataset(uri)
    metas = []
    for data in (pd.DataFrame({"a": [1], "b": ["x"]}), [{"a": 2, "b": "y"}], {"a": [3]}):
        metas += lt.fragment.write_fragments(data, uri)
    with pytest.raises(TypeError):
        lt.fragment.write_fragments(42, uri)
    lt.LanceDataset.commit(uri, lt.LanceOperation.Append(metas), read_version=ds.version)
    got = lance.dataset(uri).to_table().sort_by("a")
    assert got.to_pylist() == [
        {"a": 0, "b": "w"},
        {"a": 1, "b": "x"},
        {"a": 2, "b": "y"},
        {"a": 3, "b": None},
    ]


def test_extension_columns_survive_deletes_compaction_filters_and_takes(tmp_path):
    n = 20
    table = pa.table(
        {
            "id": pa.array(range(n)),
            "j": pa.array([f'{{"k":{i}}}' for i in range(n)], pa.json_()),
            "t": pa.FixedShapeTensorArray.from_numpy_ndarray(
                np.arange(n * 4, dtype=np.float32).reshape(n, 2, 2)
            ),
            "bf": lance_arrow.bfloat16_array([float(i) for i in range(n)]),
        }
    )
    uri = tmp_path / "ds"
    lt.write_dataset(table, uri, max_rows_per_file=5)
    lt.dataset(uri).delete("id % 3 = 0")
    lt.dataset(uri).compact_files()
    kept = table.filter(pa.array([i % 3 != 0 for i in range(n)]))
    assert len(lt.dataset(uri).get_fragments()) == 1
    assert lance.dataset(uri).to_table().equals(kept)
    assert lt.dataset(uri).to_table().equals(kept)
    assert lt.dataset(uri).to_table(filter="id > 15").equals(kept.filter(pa.compute.greater(kept["id"], 15)))
    assert lt.dataset(uri).take([0, 2]).equals(kept.take([0, 2]))


def test_unregistered_extension_types_read_and_write_as_pyarrow_leaves_them(tmp_path):
    """Without pylance imported, nobody registered ``lance.bfloat16``: it reads as lance_table's
    own bfloat16 type (``lance_table.arrow``), and written back it is the same column for pylance."""
    import subprocess
    import sys
    import textwrap

    lance.write_dataset(pa.table({"bf": lance_arrow.bfloat16_array([1.5, None])}), tmp_path / "src")
    code = textwrap.dedent(
        f"""
        import sys
        import lance_table as lt
        t = lt.dataset({str(tmp_path / "src")!r}).to_table()
        f = t.schema.field("bf")
        assert type(f.type).__module__ == "lance_table.arrow", f.type
        assert f.type.extension_name == "lance.bfloat16" and f.type.storage_type.equals(
            __import__("pyarrow").binary(2)
        ), f.type
        assert [str(v) for v in t.column("bf").chunk(0)] == ["1.5", "None"]
        lt.write_dataset(t, {str(tmp_path / "copy")!r})
        assert "lance" not in sys.modules
        """
    )
    root = str(Path(__file__).resolve().parents[2])  # this work tree's lance_table
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert lance.dataset(tmp_path / "copy").to_table().equals(lance.dataset(tmp_path / "src").to_table())


def test_nulls_in_a_non_nullable_column_of_the_same_schema_are_refused(tmp_path):
    """Batches whose schema is the dataset's (kept as they are) are still checked for nulls in
    the fields that may hold none, whichever schema was conformed to last."""
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    other = pa.schema([pa.field("b", pa.string(), nullable=False), pa.field("c", pa.int64())])
    uri, elsewhere = tmp_path / "t", tmp_path / "u"
    lt.write_dataset(pa.table({"a": [1], "b": ["x"]}, schema=schema), uri)
    lt.write_dataset(pa.table({"b": ["x"], "c": [None]}, schema=other), elsewhere)
    for target, bad in (
        (uri, pa.table({"a": [2, None], "b": ["y", None]}, schema=schema)),
        (elsewhere, pa.table({"b": ["y", None], "c": [1, 2]}, schema=other)),
        (uri, pa.table({"a": [None], "b": ["z"]}, schema=schema)),
    ):
        with pytest.raises(lt.SchemaError, match="is not nullable"):
            lt.write_dataset(bad, target, mode="append")
    lt.write_dataset(pa.table({"a": [3], "b": [None]}, schema=schema), uri, mode="append")
    assert lt.dataset(uri).to_table().to_pydict() == {"a": [1, 3], "b": ["x", None]}
    assert lt.dataset(elsewhere).version == 1
