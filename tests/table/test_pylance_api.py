"""pylance's dataset API on lance_table: the same calls on both libraries, on copies of the same data,
give the same results (handles that move with their writes, return values, names, signatures,
pickling, versions, tags, stats, cleanup, errors)."""

from __future__ import annotations

import datetime as dt
import inspect
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.table.maintenance import LanceStats
from lance_table.table.tags import Tags

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "s": [f"r{i}" for i in range(n)]})


@pytest.fixture
def pair(tmp_path: Path) -> tuple[str, str]:
    """The same dataset twice (10 fragments of 3 rows, pylance-written), one per library."""
    theirs = str(tmp_path / "theirs")
    lance.write_dataset(_rows(30), theirs, max_rows_per_file=3)
    ours = str(tmp_path / "ours")
    shutil.copytree(theirs, ours)
    return ours, theirs


def _both(pair: tuple[str, str], call: Any) -> tuple[Any, Any, Any, Any]:
    ours, theirs = lt.dataset(pair[0]), lance.dataset(pair[1])
    return call(ours), call(theirs), ours, theirs


def test_delete_moves_the_handle_and_returns_pylances_dict(pair):
    mine, yours, ours, theirs = _both(pair, lambda ds: ds.delete("id < 4 OR id = 17"))
    assert mine == yours == {"num_deleted_rows": 5}
    assert ours.version == theirs.version == 2 and ours.count_rows() == theirs.count_rows() == 25
    mine, yours = ours.delete("id < 4"), theirs.delete("id < 4")  # nothing matches: still a version
    assert mine == yours == {"num_deleted_rows": 0} and ours.version == theirs.version == 3
    assert ours.to_table() == theirs.to_table()


def test_compaction_moves_the_handle_and_returns_pylances_metrics(pair):
    for ds in (lt.dataset(pair[0]), lance.dataset(pair[1])):
        ds.delete("id < 2")
    mine, yours, ours, theirs = _both(pair, lambda ds: ds.optimize.compact_files(target_rows_per_fragment=12))
    fields = ("fragments_removed", "fragments_added", "files_removed", "files_added")
    assert [getattr(mine, f) for f in fields] == [getattr(yours, f) for f in fields]
    assert ours.version == theirs.version and len(ours.get_fragments()) == len(theirs.get_fragments())
    assert ours.to_table() == theirs.to_table()
    again = ours.optimize.compact_files(target_rows_per_fragment=12)
    assert (again.fragments_removed, ours.version) == (0, theirs.version)
    assert isinstance(mine, lt.optimize.CompactionMetrics)


@pytest.mark.parametrize("threads", [1, 2])
def test_compaction_with_num_threads_as_pylance(pair, threads):
    """num_threads bounds the bins rewritten at once (and the pieces read ahead): the same
    fragments and rows as pylance's; below 1 it is refused (pylance refuses a negative count)."""
    mine, yours, ours, theirs = _both(
        pair, lambda ds: ds.optimize.compact_files(target_rows_per_fragment=9, num_threads=threads)
    )
    assert (mine.fragments_removed, mine.fragments_added) == (yours.fragments_removed, yours.fragments_added)
    # pylance commits the bins of parallel rewrites in the order they finish: compare as sets
    ours_rows = sorted(f.count_rows() for f in ours.get_fragments())
    assert ours_rows == sorted(f.count_rows() for f in theirs.get_fragments())
    assert ours.to_table() == _rows(30) == lance.dataset(pair[0]).to_table()  # ours keep the order
    assert theirs.to_table().sort_by("id") == _rows(30)
    with pytest.raises(OverflowError):
        theirs.optimize.compact_files(num_threads=-1)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="num_threads"):
            ours.optimize.compact_files(num_threads=bad)


def test_compaction_reads_ahead_by_bytes():
    from lance_table.table.operations.compaction_rewrite import READ_AHEAD_BYTES, read_ahead

    assert read_ahead(READ_AHEAD_BYTES // 4, 16) == 4  # many cores do not multiply the memory
    assert read_ahead(READ_AHEAD_BYTES // 4, 2) == 2
    assert read_ahead(READ_AHEAD_BYTES * 3, 16) == 1
    # pieces of 100k rows of five columns (12 MB) are read one ahead: more only added to the peak
    assert read_ahead(12 << 20, 2) == read_ahead(12 << 20, 16) == 1


def test_restore_and_checkouts_as_pylance(pair):
    for ds in (lt.dataset(pair[0]), lance.dataset(pair[1])):
        ds.delete("id >= 10")
    ours, theirs = lt.dataset(pair[0]), lance.dataset(pair[1])
    old_ours, old_theirs = ours.checkout_version(1), theirs.checkout_version(1)
    assert (old_ours.version, ours.version) == (old_theirs.version, theirs.version) == (1, 2)
    assert old_ours.restore() is None and old_theirs.restore() is None
    assert old_ours.version == old_theirs.version == 3 and old_ours.count_rows() == 30
    assert ours.version == 2  # another handle stays until checked out
    assert ours.checkout_latest() is None and theirs.checkout_latest() is None
    assert ours.version == theirs.version == 3
    assert ours.checkout(1).version == 1 and ours.version == 3


def test_a_failed_write_leaves_the_handle_where_it_was(pair):
    ours = lt.dataset(pair[0])
    with pytest.raises(lt.FilterError):
        ours.delete("nope = 1")
    assert ours.version == 1


def test_commit_lock_error_on_release_propagates(tmp_path):
    class Boom(Exception):
        pass

    class Lock:
        def __init__(self, version: int) -> None:
            self.version = version

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            raise Boom(f"release of {self.version}")

    uri = str(tmp_path / "ds")
    with pytest.raises(Boom, match="release of 1"):
        lt.write_dataset(_rows(5), uri, commit_lock=Lock)
    assert lt.dataset(uri).to_table() == _rows(5)  # committed: its files stay
    assert lance.dataset(uri).to_table() == _rows(5)


# -- pickling ------------------------------------------------------------------------------------


def _count_in_worker(ds: lt.LanceDataset) -> tuple[int, int]:
    return ds.version, ds.count_rows()


def test_a_pickled_handle_opens_its_version_without_listing(pair):
    ds = lt.dataset(pair[0])
    ds.delete("id < 5")
    data = pickle.dumps(ds)
    lt.write_dataset(_rows(3, 100), pair[0], mode="append")  # newer versions appear
    shutil.rmtree(Path(pair[0]) / "_versions")  # and the listing is made impossible
    back = pickle.loads(data)
    assert back.version == 2 and back.to_table() == ds.to_table()


def test_a_pickled_handle_opens_in_a_spawned_process(pair):
    ds = lt.dataset(pair[0])
    ds.delete("id < 5")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_count_in_worker, (ds,)) == (2, 25)


def test_lancedataset_opens_as_pylances_constructor(pair):
    ds = lt.LanceDataset(pair[0], 1)
    assert ds.version == 1 and isinstance(ds, lt.Dataset)


# -- names and signatures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        (lambda: lance.dataset, lambda: lt.dataset),
        (lambda: lance.write_dataset, lambda: lt.write_dataset),
        (lambda: lance.LanceDataset.__init__, lambda: lt.LanceDataset.__init__),
        (lambda: lance.LanceDataset.delete, lambda: lt.LanceDataset.delete),
        (lambda: lance.LanceDataset.cleanup_old_versions, lambda: lt.LanceDataset.cleanup_old_versions),
        (lambda: lance.LanceDataset.checkout_version, lambda: lt.LanceDataset.checkout_version),
        (lambda: lance.LanceDataset.drop, lambda: lt.LanceDataset.drop),
        (lambda: lance.LanceDataset.restore, lambda: lt.LanceDataset.restore),
        (lambda: lance.LanceDataset.checkout_latest, lambda: lt.LanceDataset.checkout_latest),
        (lambda: lance.LanceDataset.validate, lambda: lt.LanceDataset.validate),
        (
            lambda: lance.LanceDataset.explain_cleanup_old_versions,
            lambda: lt.LanceDataset.explain_cleanup_old_versions,
        ),
        (lambda: sys.modules["lance.dataset"].Tags.create, lambda: Tags.create),
        (lambda: sys.modules["lance.dataset"].Tags.update, lambda: Tags.update),
        (lambda: sys.modules["lance.dataset"].Tags.delete, lambda: Tags.delete),
        (lambda: sys.modules["lance.dataset"].Tags.get_version, lambda: Tags.get_version),
        (lambda: sys.modules["lance.dataset"].Tags.list_ordered, lambda: Tags.list_ordered),
        (lambda: sys.modules["lance.dataset"].LanceStats.dataset_stats, lambda: LanceStats.dataset_stats),
        (
            lambda: sys.modules["lance.dataset"].DatasetOptimizer.compact_files,
            lambda: lt.optimize.DatasetOptimizer.compact_files,
        ),
    ],
)
def test_ours_accept_every_pylance_parameter_in_its_order(theirs, ours):
    """A parameter pylance adds shows up here; positional ones keep pylance's order."""
    mine = inspect.signature(ours()).parameters
    yours = inspect.signature(theirs()).parameters
    assert set(yours) <= set(mine), sorted(set(yours) - set(mine))
    positional = [n for n, p in yours.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [n for n in mine if n in positional] == positional


def test_pylance_module_names():
    assert lt.LanceDataset is lt.Dataset
    assert issubclass(lt.commit.CommitConflictError, OSError)
    assert lt.commit.CommitConflictError("x", retryable=False).retryable is False
    assert {"Compaction", "CompactionMetrics", "CompactionOptions"} <= set(dir(lt.optimize))


def test_positional_arguments_in_pylances_order(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lt.write_dataset(_rows(4), uri, _rows(4).schema, "create")
    lt.write_dataset(_rows(2, 10), uri, None, "append")
    assert lt.dataset(uri, 1).count_rows() == 4 and ds.latest_version == 2


def test_engine_options_are_accepted_and_result_changing_ones_refused(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(
        _rows(4), uri, max_rows_per_group=16, data_cache_bytes=1, max_page_bytes=1 << 20, session=None
    )
    ds = lt.dataset(
        uri, block_size=4096, index_cache_size_bytes=1, metadata_cache_size_bytes=1, read_params={}
    )
    assert ds.count_rows() == 4
    for option, value in [
        ("external_blob_mode", "ingest"),
        ("table_id", ["t"]),
    ]:
        with pytest.raises(lt.UnsupportedOptionError, match=option) as info:
            lt.write_dataset(_rows(1), uri, mode="append", **{option: value})
        assert info.value.option == option and isinstance(info.value, NotImplementedError)
    with pytest.raises(lt.UnsupportedOptionError, match="table_id"):
        lt.dataset(uri, table_id=["t"])
    with pytest.raises(lt.UnsupportedOperationError, match="max_source_rows"):
        ds.optimize.compact_files(max_source_rows=10)
    assert lt.dataset(uri).version == 1  # nothing was written


def test_v1_manifest_paths_and_transaction_properties(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(3), uri, enable_v2_manifest_paths=False, transaction_properties={"k": "v"})
    assert [p.name for p in (Path(uri) / "_versions").glob("*.manifest")] == ["1.manifest"]
    assert lt.dataset(uri).versions()[0]["transaction_properties"] == {"k": "v"}
    txn = lance.dataset(uri).read_transaction(1)
    assert txn.transaction_properties == {"k": "v"}


# -- errors --------------------------------------------------------------------------------------


def test_errors_are_also_pylances_builtins(tmp_path, pair):
    missing = str(tmp_path / "missing")
    for lib in (lance, lt):
        with pytest.raises(ValueError):
            lib.dataset(missing)
        with pytest.raises(ValueError):
            lib.dataset(pair[0], version=99)
        with pytest.raises(OSError):
            lib.dataset(pair[0]).checkout_version(99)
        with pytest.raises(OSError):
            lib.write_dataset(_rows(1), pair[0])
    with pytest.raises(lt.DatasetNotFoundError):
        lt.dataset(missing)


# -- versions, time travel, tags, stats, validate, drop, cleanup ----------------------------------


def test_versions_are_shaped_as_pylances(pair):
    for ds in (lt.dataset(pair[0]), lance.dataset(pair[1])):
        ds.delete("id % 4 = 0")
    mine, yours = lt.dataset(pair[0]).versions(), lance.dataset(pair[1]).versions()
    assert [v["version"] for v in mine] == [v["version"] for v in yours]
    for m, y in zip(mine, yours):
        assert set(y) <= set(m)
        assert type(m["timestamp"]) is type(y["timestamp"]) and m["timestamp"].tzinfo is None
        assert set(m["metadata"]) == set(y["metadata"])
        for key in ("total_rows", "total_fragments", "total_data_files", "total_deletion_files"):
            assert m["metadata"][key] == y["metadata"][key]


_ASOF_SCRIPT = """
import datetime as dt, sys, time
import lance_table as lt
uri = sys.argv[1]
ts = lt.dataset(uri).versions()[0]["timestamp"]
now = dt.datetime.now()  # naive local time, as pylance reads it
assert abs((now - ts).total_seconds()) < 600, (now, ts)
assert lt.dataset(uri, asof=now).version == 1
assert lt.dataset(uri, asof=dt.datetime.now(dt.timezone.utc)).version == 1
"""


def test_asof_naive_is_local_time(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(3), uri)
    env = {**os.environ, "TZ": "America/New_York", "PYTHONPATH": str(Path(lt.__file__).parent.parent)}
    subprocess.run([sys.executable, "-c", _ASOF_SCRIPT, uri], check=True, env=env)


def test_tags_as_pylance(pair):
    for ds in (lt.dataset(pair[0]), lance.dataset(pair[1])):
        ds.delete("id = 0")
        ds.tags.create("old", 1)
        ds.tags.create("new", 2)
        ds.tags.update("old", 2)
        ds.tags.update("new", 1)
    mine, yours = lt.dataset(pair[0]).tags, lance.dataset(pair[1]).tags
    for order in (None, "asc", "desc"):
        m, y = mine.list_ordered(order), yours.list_ordered(order)
        assert [(n, t["version"]) for n, t in m] == [(n, t["version"]) for n, t in y]
    assert mine.list()["old"]["version"] == 2 and set(yours.list()["old"]) == set(mine.list()["old"].keys())


def test_stats_and_validate(pair):
    for ds in (lt.dataset(pair[0]), lance.dataset(pair[1])):
        ds.delete("id < 2")
    ours, theirs = lt.dataset(pair[0]), lance.dataset(pair[1])
    assert ours.stats.dataset_stats() == theirs.stats.dataset_stats()
    assert ours.stats.dataset_stats(max_rows_per_group=2) == theirs.stats.dataset_stats(max_rows_per_group=2)
    mine, yours = ours.stats.data_stats(), theirs.stats.data_stats()
    assert [(f.id, f.bytes_on_disk) for f in mine.fields] == [(f.id, f.bytes_on_disk) for f in yours.fields]
    assert ours.validate() is None and theirs.validate() is None
    data_file = ours.manifest.fragments[3].files[0].path
    os.remove(Path(pair[0]) / "data" / data_file)
    with pytest.raises(lt.DataFileNotFoundError):
        ours.validate()


def test_drop(pair, tmp_path):
    (Path(pair[0]) / "other").mkdir()
    (Path(pair[0]) / "other" / "notes.txt").write_text("x")
    lt.LanceDataset.drop(pair[0])
    with pytest.raises(lt.DatasetNotFoundError):
        lt.dataset(pair[0])
    assert not Path(pair[0]).exists()  # the whole directory goes, as with pylance:
    lance.LanceDataset.drop(pair[1])
    assert not Path(pair[1]).exists()
    with pytest.raises(OSError):
        lt.LanceDataset.drop(str(tmp_path / "missing"))
    lt.LanceDataset.drop(str(tmp_path / "missing"), ignore_not_found=True)


def test_cleanup_as_pylance_and_dry_run(pair):
    for ds in (lt.dataset(pair[0]), lance.dataset(pair[1])):
        ds.delete("id < 3")
        ds.delete("id < 6")
        ds.optimize.compact_files()
    ours, theirs = lt.dataset(pair[0]), lance.dataset(pair[1])
    files_before = sorted(p.relative_to(pair[0]) for p in Path(pair[0]).rglob("*") if p.is_file())
    dry = ours.cleanup_old_versions(retain_versions=2, dry_run=True)
    assert sorted(p.relative_to(pair[0]) for p in Path(pair[0]).rglob("*") if p.is_file()) == files_before
    mine = ours.cleanup_old_versions(retain_versions=2, delete_unverified=True)
    yours = theirs.cleanup_old_versions(retain_versions=2, delete_unverified=True)
    fields = ("old_versions", "data_files_removed", "deletion_files_removed", "index_files_removed")
    assert [getattr(mine, f) for f in fields] == [getattr(yours, f) for f in fields]
    assert (dry.old_versions, dry.data_files_removed) == (mine.old_versions, mine.data_files_removed)
    assert [v["version"] for v in lt.dataset(pair[0]).versions()] == [
        v["version"] for v in lance.dataset(pair[1]).versions()
    ]
    assert lt.dataset(pair[0]).to_table() == lance.dataset(pair[1]).to_table()


def test_explain_cleanup_matches_pylance_and_removes_nothing(pair):
    for ds in (lt.dataset(pair[0]), lance.dataset(pair[1])):
        ds.delete("id < 2")
        ds.optimize.compact_files()
    ours, theirs = lt.dataset(pair[0]), lance.dataset(pair[1])
    before = sorted(p for p in Path(pair[0]).rglob("*") if p.is_file())
    mine = ours.explain_cleanup_old_versions(older_than=dt.timedelta(0), include_files=True)
    yours = theirs.explain_cleanup_old_versions(older_than=dt.timedelta(0), include_files=True)
    assert sorted(p for p in Path(pair[0]).rglob("*") if p.is_file()) == before
    fields = ("old_versions", "data_files_removed", "transaction_files_removed")
    fields += ("deletion_files_removed", "index_files_removed")
    assert [getattr(mine.stats, f) for f in fields] == [getattr(yours.stats, f) for f in fields]
    assert mine.read_version == yours.read_version
    # the data files are the same (copied); deletion files, transactions and manifests each wrote
    data = [(Path(f.path).name, f.size_bytes) for f in mine.candidate_files if f.kind == "data"]
    assert sorted(data) == sorted(
        (Path(f.path).name, f.size_bytes) for f in yours.candidate_files if f.kind == "data"
    )
    assert sorted(f.kind for f in mine.candidate_files) == sorted(f.kind for f in yours.candidate_files)
    for explained in (mine, yours):  # bytes count every file, manifests included
        assert explained.stats.bytes_removed == sum(f.size_bytes for f in explained.candidate_files)
    done = ours.cleanup_old_versions(older_than=dt.timedelta(0))
    assert [getattr(done, f) for f in fields] == [getattr(mine.stats, f) for f in fields]
    assert done.bytes_removed == mine.stats.bytes_removed


def test_tag_reference_defaults_to_the_handles_version(pair):
    for lib, uri in ((lt, pair[0]), (lance, pair[1])):
        ds = lib.dataset(uri)
        ds.delete("id = 1")
        ds.tags.create("here")
        lib.dataset(uri, version=1).tags.update("here")
        ds.tags.create("same", "here")
        assert lib.dataset(uri, version="same").version == 1


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_data_stats_of_nested_and_string_fields(tmp_path, version):
    table = pa.table(
        {
            "a": range(900),
            "s": [f"x{i}" for i in range(900)],
            "st": [{"p": i, "q": str(i)} for i in range(900)],
        }
    )
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri, max_rows_per_file=400, data_storage_version=version)
    mine, yours = lt.dataset(uri).stats.data_stats(), lance.dataset(uri).stats.data_stats()
    assert [(f.id, f.bytes_on_disk) for f in mine.fields] == [(f.id, f.bytes_on_disk) for f in yours.fields]


def test_write_to_a_handle_and_open_from_manifest_bytes(pair):
    ds = lt.dataset(pair[0])
    lt.write_dataset(_rows(2, 100), ds, mode="append")  # pylance's uri may be a dataset
    manifest = next((Path(pair[0]) / "_versions").glob("*.manifest"))
    data = sorted((Path(pair[0]) / "_versions").glob("*.manifest"), key=lambda p: p.name)
    opened = [lt.LanceDataset(pair[0], serialized_manifest=p.read_bytes()) for p in data]
    assert sorted(d.version for d in opened) == [1, 2] and manifest.exists()
    with pytest.raises(lt.VersionNotFoundError):
        lt.LanceDataset(pair[0], 5, serialized_manifest=data[0].read_bytes())
