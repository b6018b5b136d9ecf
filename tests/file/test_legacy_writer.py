"""Writing legacy (0.1) Lance files, with pylance as the oracle.

For every type the legacy format stores, the file we write is compared byte for byte with the one
pylance writes from the same rows (same row groups, same page table, statistics, dictionary values,
schema copy and footer). Our files are also committed into pylance datasets and read back in full,
and a filtered scan shows that pylance prunes row groups with our statistics.
"""

from __future__ import annotations

import decimal
import io
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

from lance_table._proto import file_pb2
from lance_table.errors import SchemaError
from lance_table.file.legacy.writer import LegacyFileWriter, LegacyWrittenFile, write_legacy_table
from lance_table.schema import ENCODING_PLAIN, ENCODING_VAR_BINARY, LanceField

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

PYLANCE_WRITER = ("lance", "14.0.2")


def type_columns() -> dict[str, pa.Array]:
    """Ten rows of every type section 12 lists, with nulls (and all-null columns)."""
    dec = [decimal.Decimal("1.25"), None, decimal.Decimal("-3.00")] + [decimal.Decimal(i) for i in range(7)]
    ints = [1, None, 3, 4, 5, 6, 7, 8, 9, 10]
    floats = [1.5, None, -0.0, float("nan"), 1, 2, 3, float("inf"), 5, 6]
    return {
        "i8": pa.array([1, -2, None, 4, 5, 6, 7, 8, 9, -128], pa.int8()),
        "i16": pa.array(ints, pa.int16()),
        "i32": pa.array(ints, pa.int32()),
        "u8": pa.array([1, 2, None, 255, 5, 6, 7, 8, 9, 0], pa.uint8()),
        "u16": pa.array(ints, pa.uint16()),
        "u32": pa.array(ints, pa.uint32()),
        "u64": pa.array([1, 2, None, 2**64 - 1, 5, 6, 7, 8, 9, 10], pa.uint64()),
        "f16": pa.array(floats, pa.float32()).cast(pa.float16()),
        "f32": pa.array(floats, pa.float32()),
        "f64": pa.array([float("-inf"), 1, 2, float("nan"), 9, 0.0, None, None, None, None]),
        "b": pa.array([True, None, False, True, True, True, None, None, None, None]),
        "s": pa.array(["a", None, "", "bb", "e" * 70, "ff", "g", "h", "a" + "é" * 40, None]),
        "ls": pa.array(["a", None, "", "bb", "c", "d", "e", "f", "g", "h"], pa.large_string()),
        "bin": pa.array([b"\x00", None, b"", b"\xff" * 70, b"a", b"b", None, None, None, None]),
        "lbin": pa.array([b"\x00", None, b"", b"q", b"a", b"b", None, None, None, None], pa.large_binary()),
        "d32": pa.array(ints, pa.date32()),
        "d64": pa.array(ints, pa.date64()),
        "ts": pa.array(ints, pa.timestamp("us", "UTC")),
        "t32": pa.array(ints, pa.time32("ms")),
        "t64": pa.array(ints, pa.time64("ns")),
        "dur": pa.array(ints, pa.duration("s")),
        "dec": pa.array(dec, pa.decimal128(7, 2)),
        "dec256": pa.array(dec, pa.decimal256(40, 2)),
        "fsb": pa.array([b"abc", None, b"xyz"] + [b"ddd"] * 7, pa.binary(3)),
        "fsl": pa.array(
            [[1, 2, 3, 4], None, [1, None, 3, 4]] + [[5, 6, 7, 8]] * 7, pa.list_(pa.float32(), 4)
        ),
        "lst": pa.array([[1, 2], None, [], [3]] + [[4, None]] * 6, pa.list_(pa.int32())),
        "llst": pa.array([[1, 2], None, [], [3]] + [[4]] * 6, pa.large_list(pa.int64())),
        "st": pa.array(
            [{"a": 1, "b": "x"}, None, {"a": None, "b": None}] + [{"a": i, "b": "y"} for i in range(7)]
        ),
        "lst_st": pa.array(
            [[{"x": 1}], None, [], [{"x": None}]] + [[{"x": 4}]] * 6, pa.list_(pa.struct([("x", pa.int32())]))
        ),
        "dict": pa.array(["p", "q", "q", "r", "p", "q", "r", "p", "q", "r"]).dictionary_encode(),
        "dict_num": pa.array([15, 25, 25, 15, 15, 25, 15, 15, 25, 15]).dictionary_encode(),
        "nulls": pa.nulls(10),
        "allnull_i": pa.nulls(10, pa.int32()),
        "allnull_s": pa.nulls(10, pa.string()),
        "allnull_f": pa.nulls(10, pa.float64()),
        "allnull_b": pa.nulls(10, pa.bool_()),
        "allnull_dec": pa.nulls(10, pa.decimal128(7, 2)),
    }


def _pylance_file(tmp_path: Path, table: pa.Table, group: int, chunk: int | None) -> bytes:
    """The data file pylance's legacy writer makes of ``table`` (fed in chunks of ``chunk`` rows)."""
    uri = tmp_path / "pylance"
    data: Any = table
    if chunk:
        data = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=chunk))
    lance.write_dataset(data, uri, data_storage_version="legacy", max_rows_per_group=group)
    (path,) = (uri / "data").glob("*.lance")
    return path.read_bytes()


def _our_file(table: pa.Table, group: int, chunk: int | None, **kw: Any) -> tuple[bytes, LegacyWrittenFile]:
    out = io.BytesIO()
    w = LegacyFileWriter(out, table.schema, max_rows_per_group=group, writer_version=PYLANCE_WRITER, **kw)
    for batch in table.to_batches(max_chunksize=chunk) if chunk else [table]:
        w.write_batch(batch)
    res = w.close()
    return out.getvalue(), res


def _assert_same_bytes(ours: bytes, theirs: bytes) -> None:
    if ours != theirs:
        n = min(len(ours), len(theirs))
        first = next((i for i in range(n) if ours[i] != theirs[i]), n)
        pytest.fail(f"files differ ({len(ours)} vs {len(theirs)} bytes), first at byte {first}")


def _metadata(data: bytes) -> Any:
    pos, major, minor = struct.unpack_from("<qhh", data, len(data) - 16)
    assert (major, minor, data[-4:]) == (0, 2, b"LANC")
    (n,) = struct.unpack_from("<I", data, pos)
    meta = file_pb2.Metadata()
    meta.ParseFromString(data[pos + 4 : pos + 4 + n])
    return meta


def _commit_ours(
    uri: Path,
    table: pa.Table,
    group: int = 4,
    chunk: int | None = None,
    *,
    seed: pa.Table | None = None,
    **kw: Any,
) -> Any:
    """A pylance legacy dataset of ``seed`` (default: ``table``) written by pylance, with our file
    of ``table`` appended as the last fragment."""
    seed = table if seed is None else seed
    ds = lance.write_dataset(seed, uri, data_storage_version="legacy", max_rows_per_group=group)
    (uri / "data").mkdir(exist_ok=True)
    w = LegacyFileWriter(uri / "data" / "ours.lance", table.schema, max_rows_per_group=group, **kw)
    for batch in table.to_batches(max_chunksize=chunk) if chunk else [table]:
        w.write_batch(batch)
    res = w.close()
    data_file = lance.fragment.DataFile("ours.lance", list(res.field_ids), [], 0, 2, res.size)
    frag = lance.fragment.FragmentMetadata(id=0, files=[data_file], physical_rows=res.num_rows)
    return lance.LanceDataset.commit(uri, lance.LanceOperation.Append([frag]), read_version=ds.version)


def _assert_same_table(actual: pa.Table, expected: pa.Table) -> None:
    """Full equality, with NaN equal to NaN and -0.0 told from 0.0 in float columns."""
    floats = [n for n in expected.column_names if pa.types.is_floating(expected.schema.field(n).type)]
    for name in floats:
        a, e = actual[name].combine_chunks(), expected[name].combine_chunks()
        assert a.type == e.type and a.null_count == e.null_count, name
        av, ev = a.to_numpy(zero_copy_only=False), e.to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(av, ev, err_msg=name)
        np.testing.assert_array_equal(np.signbit(av), np.signbit(ev), err_msg=name)
    assert_tables_equal(actual.drop_columns(floats), expected.drop_columns(floats))


def _fragment_tables(ds: Any) -> tuple[pa.Table, pa.Table]:
    """(pylance's fragment, our fragment) as pylance reads them."""
    theirs, ours = ds.get_fragments()
    assert ours.metadata.files[0].path == "ours.lance"
    return theirs.to_table(), ours.to_table()


# ---------------------------------------------------------------------------------------------
# byte-identical to pylance


@pytest.mark.parametrize("name", list(type_columns()))
def test_each_type_is_byte_identical_to_pylance(tmp_path: Path, name: str) -> None:
    col = type_columns()[name]
    table = pa.table({"id": pa.array(range(len(col)), pa.int64()), name: col})
    ours, res = _our_file(table, 4, None)
    _assert_same_bytes(ours, _pylance_file(tmp_path, table, 4, None))
    assert res.num_rows == 10 and res.size == len(ours)


@pytest.mark.parametrize(("group", "chunk"), [(4, None), (4, 3), (3, 7), (1024, 1), (1, 4)])
def test_all_types_byte_identical_whatever_the_input_batches(
    tmp_path: Path, group: int, chunk: int | None
) -> None:
    table = pa.table(type_columns())
    ours, res = _our_file(table, group, chunk)
    theirs = _pylance_file(tmp_path, table, group, chunk)
    _assert_same_bytes(ours, theirs)
    offsets = list(_metadata(ours).batch_offsets)
    assert offsets == [*range(0, 10, group), 10]
    assert res.field_ids == tuple(range(len(res.field_ids)))


def test_many_row_groups_byte_identical(tmp_path: Path) -> None:
    n = 30_000
    rng = np.random.default_rng(7)
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "f": pa.array(rng.random(n)),
            "s": pa.array([f"value-{i % 977}" for i in range(n)]),
        }
    )
    ours, _ = _our_file(table, 1024, 5000)
    _assert_same_bytes(ours, _pylance_file(tmp_path, table, 1024, 5000))
    assert len(_metadata(ours).batch_offsets) - 1 == 30


def test_non_nullable_fields_and_metadata_byte_identical(tmp_path: Path) -> None:
    st = pa.struct([pa.field("a", pa.int64(), False), pa.field("inner", pa.struct([("z", pa.float64())]))])
    schema = pa.schema(
        [
            pa.field("id", pa.int32(), nullable=False),
            pa.field("s", pa.string(), nullable=False, metadata={"k": "v"}),
            pa.field("st", st, nullable=False),
        ],
        metadata={"m": "1"},
    )
    table = pa.table(
        {
            "id": pa.array(range(10), pa.int32()),
            "s": pa.array(["", "x"] * 5),
            "st": pa.array([{"a": i, "inner": {"z": i / 2}} for i in range(10)], st),
        },
        schema=schema,
    )
    ours, _ = _our_file(table, 4, None)
    _assert_same_bytes(ours, _pylance_file(tmp_path, table, 4, None))


def test_append_with_dataset_field_ids_byte_identical(tmp_path: Path) -> None:
    """A dataset whose column 1 was dropped: files carry ids 0 and 2, the page table a hole."""
    uri = tmp_path / "ds"
    table = pa.table({"a": pa.array(range(5)), "b": pa.array(range(5)), "c": pa.array(["x"] * 5)})
    ds = lance.write_dataset(table, uri, data_storage_version="legacy")
    ds.drop_columns(["b"])
    before = set((uri / "data").glob("*.lance"))
    more = pa.table({"a": pa.array(range(5, 9)), "c": pa.array(["y"] * 4)})
    lance.write_dataset(more, uri, mode="append")
    (theirs,) = set((uri / "data").glob("*.lance")) - before
    fields = [
        LanceField(0, -1, "a", "int64", True, encoding=ENCODING_PLAIN),
        LanceField(2, -1, "c", "string", True, encoding=ENCODING_VAR_BINARY),
    ]
    ours, res = _our_file(more, 1024, None, fields=fields)
    _assert_same_bytes(ours, theirs.read_bytes())
    assert res.field_ids == (0, 2)


# ---------------------------------------------------------------------------------------------
# pylance reads our files


@pytest.mark.parametrize(("group", "chunk"), [(4, None), (3, 7)])
def test_pylance_reads_our_file_as_its_own(tmp_path: Path, group: int, chunk: int | None) -> None:
    table = pa.table(type_columns())
    theirs, ours = _fragment_tables(_commit_ours(tmp_path / "ds", table, group, chunk))
    _assert_same_table(ours, theirs)
    # The legacy stand-ins for nulls, as pylance reads them back.
    assert ours["i32"][1].as_py() == 0
    assert ours["b"][1].as_py() is False
    assert ours["s"].to_pylist()[:3] == ["a", None, None]
    assert ours["lst"][1].as_py() == []
    assert ours["st"][1].as_py() == {"a": 0, "b": None}
    # Columns without nulls come back unchanged.
    assert ours["ls"].to_pylist()[3:] == table["ls"].to_pylist()[3:]
    assert ours["fsl"][0].as_py() == [1, 2, 3, 4]


def test_filtered_scan_uses_our_statistics(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    table = pa.table({"id": pa.array(range(20), pa.int64()), "s": pa.array([f"{i:02d}" for i in range(20)])})
    ours = _commit_ours(uri, table, group=4).get_fragments()[1]
    assert ours.to_table(filter="id < 10").equals(table.slice(0, 10))
    assert ours.to_table(filter="s >= '13'").equals(table.slice(13))
    # Control: claim that row group 0 holds ids 100..200; pylance then skips its rows, so the
    # statistics are really used by the scan.
    path = uri / "data" / "ours.lance"
    data = bytearray(path.read_bytes())
    table_pos = _metadata(bytes(data)).statistics.page_table_position
    (min_pos,) = struct.unpack_from("<q", data, table_pos + 2 * 16)  # id 2 = min_value of field 0
    (max_pos,) = struct.unpack_from("<q", data, table_pos + 3 * 16)
    struct.pack_into("<q", data, min_pos, 100)
    struct.pack_into("<q", data, max_pos, 200)
    path.write_bytes(bytes(data))
    ours = lance.dataset(uri).get_fragments()[1]
    assert ours.to_table(filter="id < 10")["id"].to_pylist() == [4, 5, 6, 7, 8, 9]


def test_dictionaries_that_differ_between_row_groups(tmp_path: Path) -> None:
    """Keys are written against the dataset's dictionary, which pylance reads them with."""
    dataset_dict = pa.array(["a", "b", "c"])
    seed = pa.table({"d": pa.DictionaryArray.from_arrays(pa.array([0, 1, 2], pa.int32()), dataset_dict)})
    d1 = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1, 0], pa.int32()), pa.array(["b", "a"]))
    d2 = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 1], pa.int32()), pa.array(["c", "a", "b"]))
    table = pa.Table.from_batches([pa.record_batch({"d": d1}), pa.record_batch({"d": d2})])
    ds = _commit_ours(tmp_path / "ds", table, seed=seed, dictionaries={0: dataset_dict})
    got = ds.get_fragments()[1].to_table()["d"]
    assert got.cast(pa.string()).to_pylist() == ["b", "a", "a", "b", "c", "a", "b", "a"]


def test_dictionary_growth_is_reported() -> None:
    w = LegacyFileWriter(io.BytesIO(), pa.schema([("d", pa.dictionary(pa.int8(), pa.string()))]))
    w.write_batch(
        pa.table({"d": pa.array(["x", "y"]).dictionary_encode().cast(pa.dictionary(pa.int8(), pa.string()))})
    )
    w.write_batch(
        pa.table({"d": pa.array(["z", "x"]).dictionary_encode().cast(pa.dictionary(pa.int8(), pa.string()))})
    )
    assert w.close().dictionaries[0].to_pylist() == ["x", "y", "z"]


def test_zero_rows(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    table = pa.table({"a": pa.array([], pa.int64()), "s": pa.array([], pa.string())})
    ds = _commit_ours(uri, table)  # pylance accepts the commit (and keeps no empty fragment)
    assert ds.to_table().num_rows == 0
    assert list(_metadata((uri / "data" / "ours.lance").read_bytes()).batch_offsets) == [0]


# ---------------------------------------------------------------------------------------------
# errors and API


def _non_nullable_cases() -> list[pa.Table]:
    top = pa.table({"a": pa.array([1, None])}, schema=pa.schema([pa.field("a", pa.int64(), False)]))
    child = pa.StructArray.from_arrays(
        [pa.array([None], pa.int32())], fields=[pa.field("x", pa.int32(), False)]
    )
    items = pa.ListArray.from_arrays(
        pa.array([0, 2], pa.int32()),
        pa.array([1, None], pa.int32()),
        type=pa.list_(pa.field("item", pa.int32(), False)),
    )
    return [top, pa.table({"s": child}), pa.table({"l": items})]


@pytest.mark.parametrize("case", range(3))
def test_nulls_in_non_nullable_fields_are_refused(case: int) -> None:
    table = _non_nullable_cases()[case]
    w = LegacyFileWriter(io.BytesIO(), table.schema)
    with pytest.raises(ValueError, match="not nullable"):
        w.write_batch(table)
        w.close()


def test_pylance_refuses_them_too(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array([1, None])}, schema=pa.schema([pa.field("a", pa.int64(), False)]))
    with pytest.raises(Exception, match="non-null"):
        lance.write_dataset(table, tmp_path / "x", data_storage_version="legacy")


def test_bad_schemas_and_misuse(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="legacy"):
        LegacyFileWriter(io.BytesIO(), pa.schema([("m", pa.map_(pa.string(), pa.int32()))]))
    with pytest.raises(SchemaError, match="dictionaries"):
        LegacyFileWriter(io.BytesIO(), pa.schema([("d", pa.dictionary(pa.int32(), pa.bool_()))]))
    far = [LanceField(0, -1, "a", "int32"), LanceField(1 << 30, -1, "b", "int32")]
    with pytest.raises(SchemaError, match="out of range"):
        LegacyFileWriter(io.BytesIO(), pa.schema([("a", pa.int32()), ("b", pa.int32())]), fields=far)
    with pytest.raises(ValueError, match="positive"):
        LegacyFileWriter(io.BytesIO(), pa.schema([("a", pa.int32())]), max_rows_per_group=0)
    w = LegacyFileWriter(io.BytesIO(), pa.schema([("a", pa.int32())]))
    with pytest.raises(SchemaError, match="does not match"):
        w.write_batch(pa.table({"a": pa.array([1], pa.int64())}))
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write_batch(pa.table({"a": pa.array([1], pa.int32())}))
    with pytest.raises(ValueError, match="closed"):
        w.close()


def test_path_destination_and_abort(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array(range(5))})
    res = write_legacy_table(tmp_path / "f.lance", table, max_rows_per_group=2)
    assert res.size == (tmp_path / "f.lance").stat().st_size
    assert (res.num_rows, res.major_version, res.minor_version, res.column_indices) == (5, 0, 2, ())
    with LegacyFileWriter(tmp_path / "h.lance", table.schema) as w:
        w.write_batch(table)
    assert list(_metadata((tmp_path / "h.lance").read_bytes()).batch_offsets) == [0, 5]
    with pytest.raises(RuntimeError), LegacyFileWriter(tmp_path / "g.lance", table.schema) as w:
        w.write_batch(table)
        raise RuntimeError("stop")
    assert (tmp_path / "g.lance").stat().st_size == 0  # the group was still buffered: nothing written
