"""pylance is the oracle for datasets: every state one side writes, the other opens identically,
version by version, and keeps writing on top."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import make_rows
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.format.manifest import DELETION_ARROW, DELETION_BITMAP

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop


def _drop(table: pa.Table, mask: pa.ChunkedArray | pa.Array) -> pa.Table:
    return table.filter(pc.invert(pc.fill_null(mask, False)))


def _compare_all_versions(uri: str, expected: dict[int, pa.Table]) -> None:
    for version, table in expected.items():
        ours = lt.dataset(uri, version=version).to_table()
        theirs = lance.dataset(uri, version=version).to_table()
        assert_tables_equal(ours, table, check_metadata=False)
        assert_tables_equal(theirs, table, check_metadata=False)


@pytest.fixture(scope="module")
def ours_history(tmp_path_factory):
    """Every operation, written by lance_table, with the expected table at each version."""
    uri = str(tmp_path_factory.mktemp("ours") / "ds")
    expected: dict[int, pa.Table] = {}
    base = make_rows(0, 15_000)
    ds = lt.write_dataset(base, uri, max_rows_per_file=6000, commit_message="create")
    expected[ds.version] = base
    current = base
    for k in (1, 2):  # two appends
        more = make_rows(15_000 * k, 2000)
        ds = lt.write_dataset(more, uri, mode="append")
        current = pa.concat_tables([current, more])
        expected[ds.version] = current
    ds.delete("id % 97 = 3")  # sparse: .arrow files
    current = _drop(current, pc.equal(pc.modulo(current["id"], 97), 3))
    expected[ds.version] = current
    ds.delete("id >= 6000 AND id < 11500")  # dense in fragment 1: .bin
    current = _drop(current, pc.and_(pc.greater_equal(current["id"], 6000), pc.less(current["id"], 11500)))
    expected[ds.version] = current
    ds.delete("id >= 30000")  # the whole second append: fragment dropped
    current = _drop(current, pc.greater_equal(current["id"], 30000))
    expected[ds.version] = current
    ds.tags.create("before-compaction", ds.version)
    ds.compact_files(target_rows_per_fragment=10_000)
    expected[ds.version - 1] = current  # ReserveFragments keeps the data
    expected[ds.version] = current
    replacement = make_rows(100_000, 3000)
    ds = lt.write_dataset(replacement, uri, mode="overwrite")
    expected[ds.version] = replacement
    ds = lt.dataset(uri, version="before-compaction")
    ds.restore()
    expected[ds.version] = expected[lt.dataset(uri, version="before-compaction").version]
    return uri, expected


def test_pylance_reads_every_version_we_wrote(ours_history):
    uri, expected = ours_history
    _compare_all_versions(uri, expected)


def test_our_history_uses_both_deletion_file_kinds_and_drops_fragments(ours_history):
    uri, expected = ours_history
    versions = {v["version"]: v for v in lt.dataset(uri).versions()}
    assert versions[1]["commit_message"] == "create"
    kinds = set()
    for v in expected:
        for frag in lt.dataset(uri, version=v).manifest.fragments:
            if frag.deletion_file:
                kinds.add(frag.deletion_file.kind)
    assert kinds == {DELETION_ARROW, DELETION_BITMAP}
    ops = [v["operation"] for v in lt.dataset(uri).versions()]
    assert ops == [
        "overwrite",
        "append",
        "append",
        "delete",
        "delete",
        "delete",
        "reserve_fragments",
        "rewrite",
        "overwrite",
        "restore",
    ]
    after_whole_delete = lt.dataset(uri, version=6)
    assert len(after_whole_delete.get_fragments()) == len(lt.dataset(uri, version=5).get_fragments()) - 1
    compacted = lt.dataset(uri, version=8)
    assert all(f.deletion_file() is None for f in compacted.get_fragments())


def test_pylance_sees_our_tags_and_metadata(ours_history):
    uri, _ = ours_history
    theirs = lance.dataset(uri)
    assert theirs.tags.list()["before-compaction"]["version"] == 6
    assert lance.dataset(uri, version="before-compaction").version == 6
    assert theirs.data_storage_version == "2.2"  # the default, as pylance's


def test_pylance_appends_and_deletes_on_top_of_ours(ours_history, tmp_path):
    import shutil

    src, expected = ours_history
    uri = str(tmp_path / "copy")
    shutil.copytree(src, uri)
    current = expected[max(expected)]
    more = make_rows(500_000, 1000)
    lance.write_dataset(more, uri, mode="append")
    current = pa.concat_tables([current, more])
    lance.dataset(uri).delete("id % 2 = 0")
    current = _drop(current, pc.equal(pc.modulo(current["id"], 2), 0))
    assert_tables_equal(lt.dataset(uri).to_table(), current, check_metadata=False)
    # and we keep writing on top of pylance's commits
    ds = lt.write_dataset(make_rows(600_000, 10), uri, mode="append")
    ds.delete("id = 600003")
    current = pa.concat_tables([current, make_rows(600_000, 10)])
    current = _drop(current, pc.equal(current["id"], 600003))
    assert_tables_equal(lance.dataset(uri).to_table(), current, check_metadata=False)
    assert_tables_equal(ds.to_table(), current, check_metadata=False)


@pytest.fixture(scope="module")
def theirs_history(tmp_path_factory):
    """The same kinds of operations, written by pylance with data_storage_version='2.0'."""
    uri = str(tmp_path_factory.mktemp("theirs") / "ds")
    expected: dict[int, pa.Table] = {}
    base = make_rows(0, 15_000)
    ds = lance.write_dataset(base, uri, data_storage_version="2.0", max_rows_per_file=6000)
    expected[ds.version] = current = base
    more = make_rows(15_000, 2000)
    ds = lance.write_dataset(more, uri, mode="append")
    expected[ds.version] = current = pa.concat_tables([current, more])
    ds.delete("id % 97 = 3")
    ds = lance.dataset(uri)
    expected[ds.version] = current = _drop(current, pc.equal(pc.modulo(current["id"], 97), 3))
    ds.delete("id >= 6000 AND id < 11500")
    ds = lance.dataset(uri)
    expected[ds.version] = current = _drop(
        current, pc.and_(pc.greater_equal(current["id"], 6000), pc.less(current["id"], 11500))
    )
    ds.delete("id >= 15000")
    ds = lance.dataset(uri)
    expected[ds.version] = current = _drop(current, pc.greater_equal(current["id"], 15000))
    ds.tags.create("t1", ds.version)
    ds.optimize.compact_files(target_rows_per_fragment=10_000)
    ds = lance.dataset(uri)
    for v in range(max(expected) + 1, ds.version + 1):
        expected[v] = current
    replacement = make_rows(100_000, 3000)
    ds = lance.write_dataset(replacement, uri, mode="overwrite")
    expected[ds.version] = replacement
    lance.dataset(uri, version="t1").restore()
    ds = lance.dataset(uri)
    expected[ds.version] = expected[lance.dataset(uri, version="t1").version]
    return uri, expected


def test_we_read_every_version_pylance_wrote(theirs_history):
    uri, expected = theirs_history
    _compare_all_versions(uri, expected)
    kinds = {
        f.deletion_file.kind
        for v in expected
        for f in lt.dataset(uri, version=v).manifest.fragments
        if f.deletion_file is not None
    }
    assert kinds == {DELETION_ARROW, DELETION_BITMAP}
    assert lt.dataset(uri, version="t1").version == lance.dataset(uri, version="t1").version


def test_we_write_on_top_of_pylance(theirs_history, tmp_path):
    import shutil

    src, expected = theirs_history
    uri = str(tmp_path / "copy")
    shutil.copytree(src, uri)
    current = expected[max(expected)]
    more = make_rows(700_000, 500)
    ds = lt.write_dataset(more, uri, mode="append")
    current = pa.concat_tables([current, more])
    ds.delete("id % 5 = 1")
    current = _drop(current, pc.equal(pc.modulo(current["id"], 5), 1))
    ds.compact_files(target_rows_per_fragment=100_000)
    assert len(ds.get_fragments()) == 1
    for table in (ds.to_table(), lance.dataset(uri).to_table()):
        assert_tables_equal(table, current, check_metadata=False)
    lance.dataset(uri).delete("id < 100")
    current = _drop(current, pc.less(current["id"], 100))
    assert_tables_equal(lt.dataset(uri).to_table(), current, check_metadata=False)


def test_time_travel_by_timestamp_matches_versions(ours_history):
    uri, _expected = ours_history
    for info in lt.dataset(uri).versions():
        ds = lt.dataset(uri, asof=info["timestamp"])
        assert ds.version == info["version"]
    first = lt.dataset(uri).versions()[0]["timestamp"]
    import datetime as dt

    with pytest.raises(lt.VersionNotFoundError):
        lt.dataset(uri, asof=first - dt.timedelta(seconds=1))
    aware = first.replace(tzinfo=dt.timezone.utc)
    assert lt.dataset(uri, asof=aware).version == 1
    assert np.all(np.diff([v["timestamp"].timestamp() for v in lt.dataset(uri).versions()]) > 0)
