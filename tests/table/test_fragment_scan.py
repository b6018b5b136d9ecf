"""``LanceFragment``'s read API and ``delete`` as pylance code calls them (what Ray, lance-ray and
Daft split reads and distributed deletes by), compared with pylance (the oracle) on copies of the
same dataset; fragment metadata from ``delete`` is committed by both libraries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lance
import lance.fragment
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.fragment import FragmentMetadata
from lance_table.table.scanner import LanceScanner

pytestmark = pytest.mark.interop


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"n{i}" if i % 6 else None for i in ids],
            "s": pa.array([{"x": i * 10} for i in ids]),
        }
    )


def _make(root: Path, stable: bool = False) -> tuple[Path, Path]:
    theirs = root / "theirs"
    lance.write_dataset(_rows(0, 30), theirs, max_rows_per_file=10, enable_stable_row_ids=stable)
    lance.dataset(theirs).delete("id % 4 = 2")
    shutil.copytree(theirs, root / "ours")
    return theirs, root / "ours"


def _live(table: pa.Table) -> pa.Table:
    """The rows ``_make`` leaves (it deletes ``id % 4 = 2``)."""
    return table.filter(pc.not_equal(pc.bit_wise_and(table["id"], 3), 2))


@pytest.fixture(scope="module", params=[False, True], ids=["addresses", "stable row ids"])
def pair(request, tmp_path_factory: pytest.TempPathFactory) -> tuple[lance.LanceDataset, lt.Dataset]:
    theirs, ours = _make(tmp_path_factory.mktemp("frag"), request.param)
    return lance.dataset(theirs), lt.dataset(ours)


READS = {
    "all": {},
    "columns": {"columns": ["name", "id"]},
    "system columns": {"columns": ["id", "_rowid", "_rowaddr", "_rowoffset"]},
    "flags": {"columns": ["id"], "with_row_id": True, "with_row_address": True},
    "filter": {"columns": ["id", "s.x"], "filter": "id > 12 AND name IS NOT NULL"},
    "filter on _rowid": {"columns": ["id"], "filter": "_rowid > 12"},
    "expressions": {"columns": {"twice": "id * 2", "n": "lower(name)"}},
    "limit offset": {"columns": ["id"], "limit": 3, "offset": 2},
}


@pytest.mark.parametrize("kwargs", READS.values(), ids=READS.keys())
def test_fragment_reads_as_pylance(pair, kwargs) -> None:
    theirs, ours = pair
    for tf, of in zip(theirs.get_fragments(), ours.get_fragments()):
        expected = tf.to_table(**kwargs)
        assert_tables_equal(of.to_table(**kwargs), expected)
        assert_tables_equal(of.scanner(**kwargs).to_table(), tf.scanner(**kwargs).to_table())
        batches = list(of.to_batches(batch_size=2, **kwargs))
        assert all(b.num_rows <= 2 for b in batches)
        assert_tables_equal(pa.Table.from_batches(batches, schema=expected.schema), expected)


def test_fragment_facts_as_pylance(pair) -> None:
    theirs, ours = pair
    for tf, of in zip(theirs.get_fragments(), ours.get_fragments()):
        assert of.fragment_id == tf.fragment_id
        assert (of.physical_rows, of.num_deletions) == (tf.physical_rows, tf.num_deletions)
        for flt in (None, "id > 14", pc.field("id") < 5):
            assert of.count_rows(flt) == tf.count_rows(flt)
        assert [d.path for d in of.data_files()] == [d.path for d in tf.data_files()]
        assert of.deletion_file() == tf.deletion_file()
        assert of.schema == tf.schema
        assert of.metadata.to_json() == tf.metadata.to_json()
        assert_tables_equal(of.head(2), tf.head(2))
        assert isinstance(of.scanner(), LanceScanner)
        live = tf.count_rows()
        idx = [0, 1, live - 1]  # pylance takes increasing offsets only
        for columns in (None, ["id"], ["name", "id"], ["s.x"]):
            assert_tables_equal(of.take(idx, columns=columns), tf.take(idx, columns=columns))
        with pytest.raises(IndexError):
            of.take([live])


def test_fragment_delete_committed_by_pylance(tmp_path: Path) -> None:
    theirs_uri, ours_uri = _make(tmp_path)
    theirs, ours = lance.dataset(theirs_uri), lt.dataset(ours_uri)
    version = ours.version
    mine = ours.get_fragment(1).delete("id >= 15 AND id < 18")
    expected = theirs.get_fragment(1).delete("id >= 15 AND id < 18")
    assert isinstance(mine, FragmentMetadata) and mine.id == 1
    assert mine.num_deletions == expected.num_deletions == 6  # 10, 14 and 18 were deleted before
    assert mine.physical_rows == expected.physical_rows
    assert lt.dataset(ours_uri).version == version  # nothing committed
    gone = ours.get_fragment(2).delete("id >= 0")
    assert gone is None and theirs.get_fragment(2).delete("id >= 0") is None
    # the driver is pylance: our metadata crosses as JSON
    meta = lance.fragment.FragmentMetadata.from_json(json.dumps(mine.to_json()))
    op = lance.LanceOperation.Delete([meta], [2], "id >= 15 AND id < 18 OR fragment 2")
    lance.LanceDataset.commit(str(ours_uri), op, read_version=version)
    want = _live(_rows(0, 20)).filter((pc.field("id") < 15) | (pc.field("id") >= 18))
    assert_tables_equal(lance.dataset(ours_uri).to_table(), want)
    assert_tables_equal(lt.dataset(ours_uri).to_table(), want)


def test_fragment_delete_committed_by_lance_table(tmp_path: Path) -> None:
    _, uri = _make(tmp_path)
    ds = lt.dataset(uri)
    version = ds.version
    updated = [m for m in (f.delete("id = 0 OR id = 29") for f in ds.get_fragments()) if m is not None]
    unchanged = ds.get_fragment(1).delete("id > 1000")
    assert unchanged is not None and unchanged.to_json() == ds.get_fragment(1).metadata.to_json()
    op = lt.LanceOperation.Delete(updated, [], "id = 0 OR id = 29")
    lt.LanceDataset.commit(str(uri), op, read_version=version)
    want = _live(_rows(1, 28))
    assert_tables_equal(lt.dataset(uri).to_table(), want)
    assert_tables_equal(lance.dataset(uri).to_table(), want)


def test_fragment_delete_keeps_stable_row_ids(tmp_path: Path) -> None:
    """Deletion metadata of a dataset with stable row ids, committed by pylance."""
    _, uri = _make(tmp_path, stable=True)
    ds = lt.dataset(uri)
    metas = [ds.get_fragment(i).delete("id = 0 OR id = 29") for i in (0, 2)]
    assert all(m is not None and m.row_id_meta is not None for m in metas)
    theirs = [lance.fragment.FragmentMetadata.from_json(json.dumps(m.to_json())) for m in metas if m]
    lance.LanceDataset.commit(
        str(uri), lance.LanceOperation.Delete(theirs, [], "id = 0 OR id = 29"), read_version=ds.version
    )
    cols = ["id", "_rowid", "_rowaddr", "_rowoffset"]
    assert_tables_equal(lt.dataset(uri).to_table(columns=cols), lance.dataset(uri).to_table(columns=cols))
    assert lt.dataset(uri).count_rows() == 30 - 7 - 2


def test_fragment_scanner_options(pair) -> None:
    _, ours = pair
    frag = ours.get_fragments()[0]
    with pytest.raises(lt.UnsupportedOperationError, match="nearest"):
        frag.scanner(nearest={"column": "id", "q": [1.0], "k": 1})
    with pytest.raises(TypeError, match="unexpected keyword"):
        frag.to_table(bogus=1)
    got = frag.to_table(columns=["id"], batch_readahead=4, io_buffer_size=1 << 20)
    assert got.num_rows == frag.count_rows()
