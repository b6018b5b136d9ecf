"""The string, binary and fixed-width fields of a legacy file's many pages, decoded for all the
pages at once, read what pylance reads: every row, runs across pages, takes, empty values (null
where nullable), several arrays where the bytes pass the limit of one; damaged positions in any
page are an error naming the file and the batch."""

from __future__ import annotations

import decimal
import struct

import numpy as np
import pyarrow as pa
import pytest

from lance_table.errors import CorruptFileError
from lance_table.file.legacy import LegacyFileReader
from lance_table.file.legacy import decode as legacy_decode
from lance_table.file.runs import Runs
from lance_table.storage.sources import BytesSource

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

N = 3000


def _table() -> pa.Table:
    words = ["", "a", "héllo", "x" * 70, "zz", None]
    strs = [words[i % 6] if i % 13 else f"row-{i}" for i in range(N)]
    return pa.table(
        {
            "id": pa.array(np.arange(N, dtype=np.int64)),
            "s": pa.array(strs, pa.string()),
            "ls": pa.array(strs, pa.large_string()),
            "b": pa.array([None if s is None else s.encode() for s in strs], pa.binary()),
            "req": pa.array([s or "" for s in strs], pa.string()),
            "x": pa.array(np.arange(N) / 7.0, pa.float32()),
            "ts": pa.array(np.arange(N) * 1000, pa.timestamp("us")),
            "fsb": pa.array([bytes([i % 256]) * 3 for i in range(N)], pa.binary(3)),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(N * 4, dtype=np.int16)), 4),
            "dec": pa.array([decimal.Decimal(i % 1000) / 4 for i in range(N)], pa.decimal128(7, 2)),
            "flag": pa.array(np.arange(N) % 3 == 0),
        },
        schema=pa.schema(
            [
                pa.field("id", pa.int64()),
                pa.field("s", pa.string()),
                pa.field("ls", pa.large_string()),
                pa.field("b", pa.binary()),
                pa.field("req", pa.string(), nullable=False),
                pa.field("x", pa.float32()),
                pa.field("ts", pa.timestamp("us")),
                pa.field("fsb", pa.binary(3)),
                pa.field("vec", pa.list_(pa.int16(), 4)),
                pa.field("dec", pa.decimal128(7, 2)),
                pa.field("flag", pa.bool_()),
            ]
        ),
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("legacy_strings")
    uri = str(tmp / "ds")
    lance.write_dataset(_table(), uri, data_storage_version="legacy", max_rows_per_group=100)
    (path,) = sorted((tmp / "ds" / "data").glob("*.lance"))
    return path, lance.dataset(uri).to_table()


def _same(ours: pa.Table, theirs: pa.Table) -> None:
    assert ours.schema.equals(theirs.schema)
    for name in theirs.column_names:
        assert ours[name].combine_chunks().equals(theirs[name].combine_chunks()), name


def test_every_row_runs_and_takes_read_as_pylance_reads(written):
    path, theirs = written
    reader = LegacyFileReader(path)
    assert reader.metadata.num_batches == N // 100
    _same(reader.read_all(), theirs)
    whole = reader.read_all()
    for name in ("s", "ls", "b", "req", "id", "x", "ts", "fsb", "vec"):  # one array for all pages
        assert whole[name].num_chunks == 1, name
    assert whole["dec"].num_chunks == whole["flag"].num_chunks == N // 100  # page by page
    _same(reader.read_range(150, 2750), theirs.slice(150, 2600))
    runs = Runs(np.array([5, 95, 120, 1999, 2990], np.int64), np.array([3, 10, 400, 2, 10], np.int64))
    _same(reader.read_runs(runs), theirs.take(pa.array(runs.positions())))
    rng = np.random.default_rng(5)
    for idx in (np.sort(rng.choice(N, 300, replace=False)), rng.integers(0, N, 50)):
        _same(reader.take(idx), theirs.take(idx))
    assert reader.read_all(columns=["s"])["s"].to_pylist()[6] is None  # nullable "" is null
    assert reader.read_all(columns=["req"])["req"].to_pylist()[6] == ""


def test_values_past_the_limit_of_one_array_make_several(written, monkeypatch):
    path, theirs = written
    monkeypatch.setattr(legacy_decode, "PAGES_ARRAY_BYTES", 500)
    got = LegacyFileReader(path).read_all()
    assert got["s"].num_chunks > 5
    _same(got, theirs)
    runs = Runs(np.array([0, 777, 2500], np.int64), np.array([300, 1000, 12], np.int64))
    _same(LegacyFileReader(path).read_runs(runs), theirs.take(pa.array(runs.positions())))


@pytest.mark.parametrize("batch", [0, 7, 29])
@pytest.mark.parametrize("how", ["decreasing", "negative", "past the page"])
def test_damaged_positions_of_any_page(written, batch, how):
    path, _ = written
    reader = LegacyFileReader(path)
    node = next(n for n in reader.metadata.roots if n.name == "s")
    pos, length = reader._ctx.page(node, batch)
    data = bytearray(path.read_bytes())
    at = pos + 8 * (length // 2)
    (value,) = struct.unpack_from("<q", data, at)
    bad = {"decreasing": value - 10**6, "negative": -5, "past the page": pos + 10**6}[how]
    if how == "past the page":
        at = pos + 8 * length  # the last position: the end of the page's values
    struct.pack_into("<q", data, at, bad)
    damaged = LegacyFileReader(BytesSource(bytes(data), name="damaged.lance"))
    with pytest.raises(CorruptFileError, match=rf"damaged\.lance.*batch {batch}: value positions"):
        damaged.read_all(columns=["s"])
