"""Datasets pylance writes with its default format (2.2) and with 2.1: read version by version."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

import lance_table as lt

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop


def _rows(start: int, n: int) -> pa.Table:
    rng = np.random.default_rng(start)
    ids = np.arange(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array(rng.random(n)),
            "cat": pa.array(np.array(["red", "green", "blue"], dtype=object)[ids % 3]),
            "s": pa.array([f"text-{i}" if i % 11 else None for i in ids.tolist()]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8).astype(np.float32)), 8),
            "tags": pa.array(
                [[f"t{j}" for j in range(i % 4)] if i % 13 else None for i in ids.tolist()],
                pa.list_(pa.string()),
            ),
            "meta": pa.array(
                [{"k": i % 5, "w": [i, i + 1] if i % 2 else []} if i % 17 else None for i in ids.tolist()],
                pa.struct([("k", pa.int32()), ("w", pa.list_(pa.int64()))]),
            ),
        }
    )


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_every_version_of_a_pylance_dataset(tmp_path, version):
    uri = str(tmp_path / "ds")
    expected = {}
    current = _rows(0, 30_000)
    ds = lance.write_dataset(current, uri, data_storage_version=version, max_rows_per_file=12_000)
    expected[ds.version] = current
    more = _rows(30_000, 5_000)
    ds = lance.write_dataset(more, uri, mode="append")
    expected[ds.version] = current = pa.concat_tables([current, more])
    ds.delete("id % 7 = 0")
    ds = lance.dataset(uri)
    expected[ds.version] = current = current.filter(pa.array(current["id"].to_numpy() % 7 != 0))
    ds.optimize.compact_files(target_rows_per_fragment=100_000)
    ds = lance.dataset(uri)
    for v in range(max(expected) + 1, ds.version + 1):
        expected[v] = current
    ds.add_columns({"y": "x * 2", "id_text": "CAST(id AS STRING)"})  # new data files per fragment
    ds = lance.dataset(uri)
    assert all(len(f.data_files()) == 2 for f in ds.get_fragments())
    current = current.append_column("y", pc.multiply(current["x"], 2))
    expected[ds.version] = current = current.append_column("id_text", pc.cast(current["id"], pa.string()))
    ds.drop_columns(["cat", "v"])
    ds = lance.dataset(uri)
    expected[ds.version] = current = current.drop_columns(["cat", "v"])
    more = _rows(90_000, 3000).drop_columns(["cat", "v"])
    more = more.append_column("y", pc.multiply(more["x"], 2))
    more = more.append_column("id_text", pc.cast(more["id"], pa.string()))
    ds = lance.write_dataset(more, uri, mode="append")
    expected[ds.version] = current = pa.concat_tables([current, more])
    for v, table in expected.items():
        ours = lt.dataset(uri, version=v)
        assert ours.data_storage_version == version
        assert_tables_equal(ours.to_table(), table, check_metadata=False)
        assert ours.count_rows() == table.num_rows
    latest = lt.dataset(uri)
    got = latest.to_table(columns=["id", "tags"], filter="id_text LIKE '1%' AND x < 0.5")
    mask = pc.and_(pc.starts_with(current["id_text"], "1"), pc.less(current["x"], 0.5))
    assert_tables_equal(got, current.filter(mask).select(["id", "tags"]), check_metadata=False)
    # selective filters take the path that reads only matching rows, broad ones read and mask
    for share in (0.005, 0.05, 0.15, 0.3):
        got = latest.to_table(filter=f"x < {share}")
        theirs = lance.dataset(uri).to_table(filter=f"x < {share}")
        assert_tables_equal(got, theirs, check_metadata=False)
        assert_tables_equal(got, current.filter(pc.less(current["x"], share)), check_metadata=False)
    idx = [0, 100, 5, 5, current.num_rows - 1]
    assert_tables_equal(latest.take(idx), current.take(pa.array(idx)), check_metadata=False)
    assert sum(b.num_rows for b in latest.to_batches(batch_size=1000)) == current.num_rows


def test_we_delete_from_a_2_2_dataset_and_pylance_reads_it(tmp_path):
    uri = str(tmp_path / "ds")
    table = _rows(0, 20_000)
    lance.write_dataset(table, uri, max_rows_per_file=8000)
    ds = lt.dataset(uri)
    ds.delete("id >= 100 AND id < 6000")
    expected = table.filter(
        pc.invert(pc.and_(pc.greater_equal(table["id"], 100), pc.less(table["id"], 6000)))
    )
    assert_tables_equal(ds.to_table(), expected, check_metadata=False)
    assert_tables_equal(lance.dataset(uri).to_table(), expected, check_metadata=False)
    lance.write_dataset(_rows(50_000, 10), uri, mode="append")  # pylance keeps writing on top
    assert lt.dataset(uri).count_rows() == expected.num_rows + 10


def test_a_written_batch_becomes_one_page_as_pylance_writes_it(tmp_path):
    """A table handed over whole reaches the file writer whole (not cut into small batches), so
    that each column of a file is one page where pylance writes one (reads then touch few pages)."""
    from lance_table.file.container import read_metadata
    from lance_table.storage.sources import LocalFileSource

    rng = np.random.default_rng(3)
    n = 200_000  # the vectors are 12.8 MB: past the 8 MiB page budget
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16).astype(np.float32)), 16),
        }
    )
    lt.write_dataset(table, str(tmp_path / "ours"), data_storage_version="2.2")
    lance.write_dataset(table, str(tmp_path / "theirs"), data_storage_version="2.2")
    for side in ("ours", "theirs"):
        (path,) = (tmp_path / side / "data").glob("*.lance")
        meta = read_metadata(LocalFileSource(str(path)))
        assert [[int(p.length) for p in col.pages] for col in meta.columns] == [[n], [n]], side
    assert_tables_equal(lance.dataset(str(tmp_path / "ours")).to_table(), table)
    assert_tables_equal(lt.dataset(str(tmp_path / "theirs")).to_table(), table)
