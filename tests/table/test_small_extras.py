"""pylance's small helpers: ``lance.util`` time helpers, ``udf.normalize_transform``,
``DataFile.create``, ``serialize_row_addrs``, ``RowIdSequence``, ``remap_row_addrs``,
``storage_options_accessor`` and ``new_file_session``, each compared with pylance's."""

from __future__ import annotations

import datetime as dt
import pickle
import sys

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.fragment import DataFile, RowIdSequence
from lance_table.udf import BatchUDF, normalize_transform
from lance_table.util import sanitize_ts, td_to_micros

lance = pytest.importorskip("lance")
pylance_udf = pytest.importorskip("lance.udf")
pylance_util = pytest.importorskip("lance.util")

pylance_dataset_module = sys.modules["lance.dataset"]


def test_time_helpers_as_pylance() -> None:
    for td in (dt.timedelta(seconds=1.5), dt.timedelta(microseconds=-3), dt.timedelta(days=2)):
        assert td_to_micros(td) == pylance_util.td_to_micros(td)
    for ts in ("2024-01-02 03:04:05", dt.datetime(2020, 1, 1)):
        assert sanitize_ts(ts) == pylance_util.sanitize_ts(ts)
    with pytest.raises(TypeError):
        sanitize_ts(3)


def test_normalize_transform_as_pylance(tmp_path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"a": [1, 2, 3]}), uri)
    ours, theirs = lt.dataset(uri), lance.dataset(uri)

    def double(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch([pa.compute.multiply(batch["a"], 2)], ["b"])

    assert normalize_transform({"b": "a * 2"}, ours) == pylance_udf.normalize_transform(
        {"b": "a * 2"}, theirs
    )
    got, want = normalize_transform(double, ours), pylance_udf.normalize_transform(double, theirs)
    assert isinstance(got, BatchUDF) and got.output_schema == want.output_schema
    udf = BatchUDF(double)
    assert normalize_transform(udf, ours, read_columns=["a", "_rowid"]).output_schema == want.output_schema
    reader = normalize_transform(pa.table({"b": [1]}), ours)
    assert isinstance(reader, pa.RecordBatchReader) and reader.read_all().num_rows == 1
    for bad in ({"b": 1}, {1: "a"}, lambda batch: 1 / 0, 42):
        with pytest.raises(TypeError):
            normalize_transform(bad, ours)


def test_data_file_create_as_pylance(tmp_path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"a": [1, 2], "b": ["x", "y"], "s": pa.array([{"p": 1, "q": 2}] * 2)}), uri)
    for i, (columns, version) in enumerate(
        [(["b"], "2.0"), (["s", "a"], "2.1"), (["s"], "2.0"), (["s", "b"], "2.2")]
    ):
        table = lt.dataset(uri).to_table(columns=columns)
        with lt.file.LanceFileWriter(f"{uri}/data/x{i}.lance", table.schema, version=version) as writer:
            writer.write_batch(table)
        ours = DataFile.create(lt.dataset(uri), f"x{i}.lance")
        assert repr(ours) == repr(lance.fragment.DataFile.create(lance.dataset(uri), f"x{i}.lance"))
    with lt.file.LanceFileWriter(f"{uri}/data/bad.lance", pa.schema([("zz", pa.int64())])) as writer:
        writer.write_batch(pa.table({"zz": [1]}))
    for path in ("bad.lance", "missing.lance"):
        with pytest.raises(ValueError):
            DataFile.create(lt.dataset(uri), path)


def test_row_addrs_and_row_id_sequences_as_pylance() -> None:
    rng = np.random.default_rng(0)
    for addrs in (
        [0, 2, 4],
        [],
        [1 << 32 | 5, 3],
        list(range(5000)),
        rng.integers(0, 1 << 40, 2000).tolist(),
    ):
        assert lt.serialize_row_addrs(addrs) == pylance_dataset_module.serialize_row_addrs(addrs)
    for ids in (range(5, 10), [7, 12], [3, 1, 2], pa.array([9, 4], pa.uint64()), []):
        ours = RowIdSequence(ids)
        theirs = lance.fragment.RowIdSequence.from_inline_metadata(
            lance.fragment.RowIdMeta.from_json(ours.to_inline_metadata().json())
        )
        assert (
            list(ours) == list(theirs)
            and len(ours) == len(theirs)
            and ours.to_pyarrow().equals(theirs.to_pyarrow())
        )
        back = lt.fragment.RowIdMeta.from_json(lance.fragment.RowIdSequence(ids).to_inline_metadata().json())
        assert RowIdSequence.from_inline_metadata(back) == pickle.loads(pickle.dumps(ours))
    with pytest.raises(ValueError):
        RowIdSequence([1, 1])
    with pytest.raises(OverflowError):
        RowIdSequence([-1])


def test_remap_row_addrs_as_pylance(tmp_path) -> None:
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(pa.table({"id": list(range(40))}), uri, max_rows_per_file=10)
    assert lt.dataset(uri).remap_row_addrs([1]) is None  # no fragment reuse index
    ds.create_scalar_index("id", "BTREE")
    ds.delete("id % 7 = 0")
    ds.optimize.compact_files(target_rows_per_fragment=25, defer_index_remap=True)
    addrs = pa.array([(f << 32) | o for f in range(4) for o in range(10)] + [99 << 32 | 1, None], pa.uint64())
    assert lt.dataset(uri).remap_row_addrs(addrs).equals(lance.dataset(uri).remap_row_addrs(addrs))


def test_storage_options_accessor_and_file_session(tmp_path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"a": [1]}), uri)
    assert lt.dataset(uri).storage_options_accessor is None
    accessor = lt.dataset(uri, storage_options={"foo": "bar"}).storage_options_accessor
    assert accessor.get_storage_options()["foo"] == "bar" and accessor.has_provider() is False
    assert accessor.accessor_id().startswith("static_options_") and accessor.refresh_offset_secs() == 60
    session = lt.dataset(uri).new_file_session()
    with session.open_writer("data/extra.lance") as writer:
        writer.write_batch(pa.table({"x": [1, 2]}))
    assert lance.file.LanceFileReader(f"{uri}/data/extra.lance").read_all().to_table().num_rows == 2
