"""The change data feed (lance_table.table.changes, Dataset.table_changes) over datasets that pylance
and lance_table change: each version's change rows, replayed on the previous version's rows, give
exactly the rows the oracle reads at that version; change types are those Delta Lake's feed shows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import ScanOptionError, SchemaError, VersionNotFoundError
from lance_table.storage import open_storage
from lance_table.table.changes import DELETE, ManifestCache, version_changes

lance = pytest.importorskip("lance")


def _rows(start: int, n: int, tag: str = "x") -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids]})


def _history(uri: str, library: str, stable: bool) -> dict[int, str]:
    """Changes a dataset as the library does, version by version; what each version did."""
    lib = lance if library == "lance" else lt
    lib.write_dataset(_rows(0, 30), uri, max_rows_per_file=10, enable_stable_row_ids=stable)  # 1
    lib.write_dataset(_rows(30, 5), uri, mode="append")  # 2
    steps = {1: "write", 2: "append"}
    ds = lib.dataset(uri)
    ds.delete("id = 3 OR id >= 30")  # 3: a deletion file, and a whole fragment gone
    steps[ds.version] = "delete"
    ds.update({"v": "'upd'"}, where="id IN (1, 15)")  # 4
    steps[ds.version] = "update"
    source = pa.table({"id": pa.array([2, 40], pa.int64()), "v": ["m2", "m40"]})
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
    steps[lib.dataset(uri).version] = "merge"
    lib.dataset(uri).optimize.compact_files()
    ds = lib.dataset(uri)
    steps[ds.version] = "compact"
    ds.add_columns({"w": "id * 2"})
    steps[ds.version] = "add_columns"
    ds.drop_columns(["w"])
    steps[ds.version] = "drop_columns"
    lib.dataset(uri, version=steps_version(steps, "update")).restore()
    steps[lib.dataset(uri).version] = "restore"
    lib.write_dataset(_rows(100, 3), uri, mode="overwrite")
    steps[lib.dataset(uri).version] = "overwrite"
    return steps


def steps_version(steps: dict[int, str], what: str) -> int:
    return next(v for v, s in steps.items() if s == what)


def _key(row: dict) -> tuple:
    return row["id"], row["v"]


@pytest.mark.parametrize("library", ["lance", "lance_table"])
@pytest.mark.parametrize("stable", [True, False], ids=["stable_row_ids", "addresses"])
def test_changes_replay_every_version_and_name_updates(tmp_path: Path, library: str, stable: bool) -> None:
    uri = str(tmp_path / "ds")
    steps = _history(uri, library, stable)
    latest = lance.dataset(uri).version
    changes = lt.dataset(uri).table_changes(1).read_all()
    assert changes.schema.names == ["id", "v", "_change_type", "_commit_version", "_commit_timestamp"]
    assert changes["_commit_version"].to_pylist() == sorted(changes["_commit_version"].to_pylist())

    rows: Counter = Counter()
    kinds: dict[int, Counter] = {}
    for version in range(1, latest + 1):
        mine = changes.filter(pa.compute.equal(changes["_commit_version"], version)).to_pylist()
        kinds[version] = Counter(r["_change_type"] for r in mine)
        for r in mine:
            if r["_change_type"] in ("delete", "update_preimage"):
                assert rows[_key(r)] > 0, (version, r)
                rows[_key(r)] -= 1
            else:
                rows[_key(r)] += 1
        oracle = lance.dataset(uri, version=version).to_table(columns=["id", "v"]).to_pylist()
        assert +rows == Counter(_key(r) for r in oracle), f"version {version} ({steps[version]})"
        stamp = lance.dataset(uri, version=version).versions()[version - 1]["timestamp"]
        assert all(abs(r["_commit_timestamp"].timestamp() - stamp.timestamp()) < 1 for r in mine)

    by_step = {steps[v]: kinds[v] for v in steps}
    assert by_step["write"] == {"insert": 30} and by_step["append"] == {"insert": 5}
    assert by_step["delete"] == {"delete": 6}
    if stable:  # the row ids pair an update's old and new rows
        assert by_step["update"] == {"update_preimage": 2, "update_postimage": 2}
        assert by_step["merge"] == {"update_preimage": 1, "update_postimage": 1, "insert": 1}
    else:
        assert by_step["update"] == {"delete": 2, "insert": 2}
        assert by_step["merge"] == {"delete": 1, "insert": 2}
    for quiet in ("compact", "add_columns", "drop_columns"):
        assert by_step[quiet] == {}, quiet
    # the restore brings back the fragments of the update's version (the compaction replaced them)
    assert by_step["restore"] == {"delete": 30, "insert": 29}
    assert by_step["overwrite"] == {"delete": 29, "insert": 3}


def test_a_delete_plans_only_the_deleted_rows_and_a_range_reads_lazily(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(_rows(0, 1000), uri, max_rows_per_file=500)
    lance.dataset(uri).delete("id IN (7, 600, 601)")  # version 2
    cache = ManifestCache(open_storage(uri))
    planned = version_changes(cache, 2, ["id"])
    # one piece per fragment, each the deleted rows of the old fragment version, read by position
    assert [(p.change, p.rows, p.side.version, p.within is not None) for p in planned.pieces] == [
        (DELETE, 1, 1, True),
        (DELETE, 2, 1, True),
    ]
    got = lt.dataset(uri).table_changes(2, 2, columns=["id"]).read_all()
    assert got.to_pydict()["id"] == [7, 600, 601]
    assert lt.dataset(uri).table_changes(1, 2, batch_size=300).read_next_batch().num_rows == 300
    # a restore of version 1 gives the rows back: the deletion files shrink
    lance.dataset(uri, version=1).restore()  # version 3
    back = lt.dataset(uri).table_changes(3).read_all()
    assert back["id"].to_pylist() == [7, 600, 601] and set(back["_change_type"].to_pylist()) == {"insert"}


def test_a_column_rewritten_in_place_shows_each_row_updated(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(_rows(0, 6), uri, max_rows_per_file=3, enable_stable_row_ids=True)
    frag = ds.get_fragment(0)
    new = pa.table({"_rowid": pa.array([1], pa.uint64()), "v": ["new1"]})
    meta, fields = frag.update_columns(new)
    op = lance.LanceOperation.Update(updated_fragments=[meta], fields_modified=fields)
    lance.LanceDataset.commit(uri, op, read_version=ds.version)
    got = lt.dataset(uri).table_changes(2).read_all().select(["id", "v", "_change_type"]).to_pylist()
    pre = [(r["id"], r["v"]) for r in got if r["_change_type"] == "update_preimage"]
    post = [(r["id"], r["v"]) for r in got if r["_change_type"] == "update_postimage"]
    assert pre == [(0, "x0"), (1, "x1"), (2, "x2")]  # the fragment's rows, before and after
    assert post == [(0, "x0"), (1, "new1"), (2, "x2")]


def test_bad_ranges_and_schema_changes_are_named(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lt.write_dataset(_rows(0, 5), uri)
    ds.alter_columns({"path": "v", "name": "value"})  # version 2 renames a column
    with pytest.raises(SchemaError, match=r"version 2 \(operation Project\) drops or renames column 'v'"):
        lt.dataset(uri).table_changes(1).read_all()
    assert lt.dataset(uri).table_changes(2).read_all().num_rows == 0  # the new schema from 2 on
    with pytest.raises(ScanOptionError, match="starting_version"):
        lt.dataset(uri).table_changes(3, 2)
    with pytest.raises(VersionNotFoundError):
        lt.dataset(uri, version=1).table_changes(1, 5)
    with pytest.raises(SchemaError, match="nope"):
        lt.dataset(uri).table_changes(1, columns=["nope"])
