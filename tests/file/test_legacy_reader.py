"""Legacy (0.1) data files written by pylance read back exactly as pylance reads them."""

from __future__ import annotations

import datetime
import decimal
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_table.errors import CorruptFileError, LanceTableError, SchemaError, UnsupportedFormatError
from lance_table.file.legacy import LegacyFileReader
from lance_table.file.legacy.container import LEGACY_FOOTER_SIZE, LEGACY_FOOTER_STRUCT
from lance_table.file.runs import Runs
from lance_table.storage.sources import BytesSource

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

N = 23  # rows; batches of 4 give 6 batches (the last one short)


def _all_types(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    null = rng.random(n) < 0.3

    def arr(values: list, t: pa.DataType) -> pa.Array:
        return pa.array([None if null[i] else v for i, v in enumerate(values)], t)

    ints = [int(x) for x in rng.integers(-100, 100, n)]
    cols = {}
    for name in ("int8", "int16", "int32", "int64"):
        cols[name] = arr(ints, getattr(pa, name)())
    for name in ("uint8", "uint16", "uint32", "uint64"):
        cols[name] = arr([abs(x) for x in ints], getattr(pa, name)())
    floats = [float(x) for x in rng.normal(size=n)]
    floats[1], floats[2], floats[3] = float("nan"), -0.0, float("inf")
    cols["float16"] = pa.array(np.asarray(floats, np.float16), pa.float16(), mask=null)
    cols["float32"] = arr(floats, pa.float32())
    cols["float64"] = arr(floats, pa.float64())
    cols["bool"] = arr([x > 0 for x in ints], pa.bool_())
    words = ["", "a", "héllo", "x" * 70, "zz"]
    strs = [words[i % len(words)] for i in range(n)]
    cols["string"] = arr(strs, pa.string())
    cols["large_string"] = arr(strs, pa.large_string())
    cols["binary"] = arr([s.encode() for s in strs], pa.binary())
    cols["large_binary"] = arr([s.encode() for s in strs], pa.large_binary())
    cols["date32"] = arr([datetime.date(2020, 1, 1 + i % 28) for i in range(n)], pa.date32())
    cols["date64"] = arr([86400000 * i for i in range(n)], pa.date64())
    cols["time32"] = arr([1000 * i for i in range(n)], pa.time32("ms"))
    cols["time64"] = arr([1000 * i for i in range(n)], pa.time64("us"))
    cols["ts"] = arr([10**15 + i for i in range(n)], pa.timestamp("us", "UTC"))
    cols["ts_naive"] = arr(list(range(n)), pa.timestamp("ns"))
    cols["duration"] = arr(list(range(n)), pa.duration("ms"))
    cols["dec128"] = arr([decimal.Decimal(i) / 4 for i in range(n)], pa.decimal128(7, 2))
    cols["dec256"] = arr([decimal.Decimal(-i) / 4 for i in range(n)], pa.decimal256(40, 2))
    cols["fsb"] = arr([bytes([i, i, i]) for i in range(n)], pa.binary(3))
    cols["fsl"] = arr([[float(i)] * 4 for i in range(n)], pa.list_(pa.float32(), 4))
    cols["list"] = arr([list(range(i % 4)) for i in range(n)], pa.list_(pa.int32()))
    cols["large_list"] = arr([[i] * (i % 3) for i in range(n)], pa.large_list(pa.int64()))
    cols["list_str"] = arr([["a", None, ""][: i % 4] for i in range(n)], pa.list_(pa.string()))
    st = pa.struct([("a", pa.int64()), ("b", pa.string())])
    cols["struct"] = arr([{"a": i if i % 5 else None, "b": strs[i]} for i in range(n)], st)
    ls = pa.list_(pa.struct([("x", pa.int32())]))
    cols["list_struct"] = arr([[{"x": i}, {"x": None}][: i % 3] for i in range(n)], ls)
    cols["dict"] = arr((["p", "q", "r"] * n)[:n], pa.string()).dictionary_encode()
    cols["all_null"] = pa.array([None] * n, pa.int32())
    cols["null"] = pa.nulls(n)
    schema = pa.schema(
        [pa.field(k, v.type, metadata={"k": k} if k == "int8" else None) for k, v in cols.items()]
        + [pa.field("req_str", pa.string(), nullable=False)],
        metadata={"owner": "tests"},
    )
    return pa.Table.from_arrays([*cols.values(), pa.array(strs, pa.string())], schema=schema)


def _write(tmp_path: Path, table: pa.Table, group: int = 4, name: str = "ds") -> tuple[str, Path]:
    uri = str(tmp_path / name)
    lance.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_group=group)
    (data,) = sorted((tmp_path / name / "data").glob("*.lance"))
    return uri, data


def assert_same(ours: pa.Table, theirs: pa.Table) -> None:
    """Equal schemas (with metadata) and contents; floats compared bit for bit (NaN, -0.0)."""
    assert ours.schema.equals(theirs.schema, check_metadata=True), (ours.schema, theirs.schema)
    assert ours.num_rows == theirs.num_rows
    for name in theirs.column_names:
        a, b = ours[name].combine_chunks(), theirs[name].combine_chunks()
        if pa.types.is_floating(a.type):
            assert a.null_count == b.null_count == 0
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), name
        else:
            assert a.equals(b), (name, a.to_pylist()[:6], b.to_pylist()[:6])


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("legacy")
    uri, path = _write(tmp, _all_types(N))
    return path, lance.dataset(uri).to_table()


def test_read_all_every_type(typed):
    path, theirs = typed
    reader = LegacyFileReader(path)
    assert reader.num_rows == N and reader.version == "0.1"
    assert reader.metadata.num_batches == 6
    ours = reader.read_all()
    assert_same(ours, theirs)
    # What pylance reads for nulls: stand-in values, except strings (null) and lists ([]).
    assert ours["all_null"].to_pylist() == [0] * N
    assert ours["struct"].null_count == 0
    assert ours["req_str"].to_pylist()[0] == ""  # non-nullable: "" stays ""
    assert ours["string"].to_pylist()[0] is None  # nullable: "" reads as null
    assert ours.schema.field("int8").metadata == {b"k": b"int8"}
    assert ours.schema.metadata == {b"owner": b"tests"}


@pytest.mark.parametrize("start, stop", [(0, 1), (3, 9), (4, 8), (5, 6), (20, 23), (22, 100), (7, 7)])
def test_read_range(typed, start, stop):
    path, theirs = typed
    ours = LegacyFileReader(path).read_range(start, stop)
    assert_same(ours, theirs.slice(start, max(min(stop, N) - start, 0)))


@pytest.mark.parametrize(
    "indices", [[0], [22, 0, 5, 5, 13], list(range(N))[::-1], [4, 5, 6, 7, 8], list(range(0, N, 2))]
)
def test_take(typed, indices):
    path, theirs = typed
    reader = LegacyFileReader(path)
    assert_same(reader.take(indices), theirs.take(indices))
    cols = ["list_struct", "string", "dict"]
    assert_same(reader.take(indices, columns=cols), theirs.select(cols).take(indices))


def test_take_bad_index(typed):
    with pytest.raises(IndexError):
        LegacyFileReader(typed[0]).take([N])


def test_iter_batches_and_runs(typed):
    path, theirs = typed
    reader = LegacyFileReader(path)
    batches = list(reader.iter_batches(batch_size=5))
    assert [b.num_rows for b in batches] == [5, 5, 5, 5, 3]
    assert_same(pa.Table.from_batches(batches), theirs)
    runs = Runs(np.array([1, 6, 15]), np.array([2, 5, 8]))
    assert_same(reader.read_runs(runs), theirs.take(runs.positions()))


def test_projection(typed):
    path, theirs = typed
    reader = LegacyFileReader(path)
    cols = ["struct", "float64"]
    assert_same(reader.read_all(columns=cols), theirs.select(cols))
    with pytest.raises(SchemaError):
        reader.read_all(columns=["nope"])


def test_caller_fields_and_no_schema(typed):
    path, theirs = typed
    roots = LegacyFileReader(path).metadata.roots
    assert_same(LegacyFileReader(path, roots).read_all(), theirs)


def test_many_batches_dense_take(tmp_path):
    n = 5000
    rng = np.random.default_rng(1)
    t = pa.table(
        {
            "i": pa.array(rng.integers(0, 1000, n)),
            "s": pa.array([f"v{i}" * (i % 4) for i in range(n)]),
            "l": pa.array([[i] * (i % 3) for i in range(n)], pa.list_(pa.int32())),
        }
    )
    uri, path = _write(tmp_path, t, group=1024)
    theirs = lance.dataset(uri).to_table()
    reader = LegacyFileReader(path)
    assert reader.metadata.num_batches == 5
    assert_same(reader.read_all(), theirs)
    idx = np.sort(rng.choice(n, 2000, replace=False))
    assert_same(reader.take(idx), theirs.take(idx))
    idx = rng.integers(0, n, 100)
    assert_same(reader.take(idx), theirs.take(idx))


class CountingSource(BytesSource):
    def __init__(self, data: bytes) -> None:
        super().__init__(data, name="counted.lance")
        self.bytes_read = 0

    def read_ranges(self, ranges):
        self.bytes_read += sum(length for _, length in ranges)
        return super().read_ranges(ranges)


def test_projection_reads_few_bytes(tmp_path):
    n = 20_000
    t = pa.table(
        {f"c{k}": pa.array(np.arange(n) * k) for k in range(8)} | {"s": pa.array([f"s{i}" for i in range(n)])}
    )
    _, path = _write(tmp_path, t, group=1024)
    data = path.read_bytes()
    src = CountingSource(data)
    reader = LegacyFileReader(src)
    opened = src.bytes_read
    col = reader.read_all(columns=["c3"])
    assert col["c3"].to_numpy().tolist() == (np.arange(n) * 3).tolist()
    assert src.bytes_read - opened <= n * 8 + 1024
    before = src.bytes_read
    got = reader.read_range(15_000, 15_010, columns=["s"])
    assert got["s"].to_pylist() == [f"s{i}" for i in range(15_000, 15_010)]
    assert src.bytes_read - before < 500
    assert opened < len(data) // 4


def test_dictionary_without_schema_copy_needs_values(typed):
    path, theirs = typed
    data = path.read_bytes()
    # Zero manifest_position in Metadata: rewrite Metadata without it.
    from lance_table._proto import file_pb2

    meta_pos = struct.unpack_from("<q", data, len(data) - LEGACY_FOOTER_SIZE)[0]
    (length,) = struct.unpack_from("<I", data, meta_pos)
    md = file_pb2.Metadata()
    md.ParseFromString(data[meta_pos + 4 : meta_pos + 4 + length])
    md.manifest_position = 0
    blob = md.SerializeToString()
    new = (
        data[:meta_pos]
        + struct.pack("<I", len(blob))
        + blob
        + LEGACY_FOOTER_STRUCT.pack(meta_pos, 0, 2, b"LANC")
    )
    with pytest.raises(UnsupportedFormatError, match="no schema"):
        LegacyFileReader(new)
    roots = LegacyFileReader(path).metadata.roots
    reader = LegacyFileReader(new, roots)
    others = [c for c in theirs.column_names if c != "dict"]
    assert_same(reader.read_all(columns=others), theirs.select(others).replace_schema_metadata(None))
    with pytest.raises(UnsupportedFormatError, match="dictionary"):
        reader.read_all(columns=["dict"])
    values = theirs["dict"].chunk(0).dictionary
    did = next(r.id for r in roots if r.name == "dict")
    got = LegacyFileReader(new, roots, dictionaries={did: values}).read_all(columns=["dict"])
    assert got["dict"].to_pylist() == theirs["dict"].to_pylist()


# -- damaged files ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("small")
    t = pa.table({"i": pa.array(range(10)), "s": pa.array([f"v{i}" for i in range(10)]),
                  "l": pa.array([[i] * (i % 3) for i in range(10)], pa.list_(pa.int32()))})  # fmt: skip
    _, path = _write(tmp, t)
    return path.read_bytes()


def _open_and_read(data: bytes, name: str = "bad.lance") -> None:
    reader = LegacyFileReader(BytesSource(data, name=name))
    reader.read_all()
    if reader.num_rows > 9:
        reader.take([9, 0])
    reader.statistics()


@pytest.mark.parametrize("cut", [1, 4, 15, 16, 40, 200])
def test_truncated(small, cut):
    with pytest.raises(CorruptFileError) as info:
        _open_and_read(small[:-cut])
    assert "bad.lance" in str(info.value)


def test_bad_magic_and_version(small):
    with pytest.raises(CorruptFileError, match="magic"):
        _open_and_read(small[:-4] + b"NOPE")
    footer = bytearray(small[-LEGACY_FOOTER_SIZE:])
    footer[10:12] = struct.pack("<h", 3)
    with pytest.raises(UnsupportedFormatError):
        _open_and_read(small[:-LEGACY_FOOTER_SIZE] + bytes(footer))


def test_huge_metadata_length(small):
    meta_pos = struct.unpack_from("<q", small, len(small) - LEGACY_FOOTER_SIZE)[0]
    data = bytearray(small)
    data[meta_pos : meta_pos + 4] = struct.pack("<I", 2**32 - 1)
    with pytest.raises(CorruptFileError, match=r"bad\.lance"):
        _open_and_read(bytes(data))


def test_every_tail_byte_flipped(small):
    """Any single damaged byte in the metadata, schema copy or page tables: a typed error or a read."""
    meta_pos = struct.unpack_from("<q", small, len(small) - LEGACY_FOOTER_SIZE)[0]
    start = max(0, meta_pos - 600)
    for at in range(start, len(small)):
        for flip in (0xFF, 0x80):
            data = bytearray(small)
            data[at] ^= flip
            try:
                _open_and_read(bytes(data))
            except LanceTableError as exc:
                assert "bad.lance" in str(exc) or isinstance(exc, (UnsupportedFormatError, SchemaError))


def test_page_table_damage(small):
    reader = LegacyFileReader(small)
    pt = reader.metadata.file.page_table_position
    for cell, value in [(0, -5), (0, len(small)), (1, 999), (1, 2**40)]:
        data = bytearray(small)
        data[pt + 8 * cell : pt + 8 * cell + 8] = struct.pack("<q", value)
        with pytest.raises(CorruptFileError, match=r"bad\.lance"):
            _open_and_read(bytes(data))
