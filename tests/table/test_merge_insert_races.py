"""merge_insert racing appends, deletes and other merge_inserts on threads: every commit lands (merges
retried on conflicts), nothing is lost or doubled, and pylance reads the result."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt

ROUNDS = 6
BASE = 1000


def _rows(ids: np.ndarray, tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "tag": pa.array([tag] * ids.size)})


def _run(workers: list) -> None:
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guard(w)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_merge_insert_races_appends_deletes_and_itself(tmp_path):
    _race(str(tmp_path / "ds"), None)


@pytest.mark.s3
def test_merge_insert_races_appends_deletes_and_itself_on_s3(s3_uri, s3_options):
    _race(s3_uri, s3_options)


def _race(uri: str, options: dict | None) -> None:
    lt.write_dataset(
        _rows(np.arange(BASE), "base"),
        uri,
        max_rows_per_file=100,
        enable_stable_row_ids=True,
        storage_options=options,
    )

    def appender():
        for r in range(ROUNDS):
            ids = np.arange(10_000 + r * 10, 10_000 + r * 10 + 10)
            lt.write_dataset(_rows(ids, "appended"), uri, mode="append", storage_options=options)

    def deleter():
        for r in range(ROUNDS):
            while True:  # a delete of rows a concurrent merge rewrote conflicts: run it again
                try:
                    lt.dataset(uri, storage_options=options).delete(f"id = {900 + r}")
                    break
                except lt.CommitConflictError as exc:
                    if not exc.retryable:
                        raise

    def merger(worker: int):
        def run():
            for r in range(ROUNDS):
                # each worker updates its own residue class of old ids (in the same fragments as
                # the other's) and inserts its own new ids
                old = np.arange(worker + 2 * r * 37, BASE, 2 * ROUNDS * 37)[:5]
                new = np.arange(20_000 + worker * 1000 + r * 10, 20_000 + worker * 1000 + r * 10 + 3)
                src = _rows(np.concatenate([old, new]), f"merged-{worker}")
                stats = (
                    lt.dataset(uri, storage_options=options)
                    .merge_insert("id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .conflict_retries(50)
                    .execute(src)
                )
                assert stats == {"num_inserted_rows": 3, "num_updated_rows": old.size, "num_deleted_rows": 0}

        return run

    _run([appender, deleter, merger(0), merger(1)])
    ds = lt.dataset(uri, storage_options=options)
    table = ds.to_table()
    ids = table["id"].to_numpy()
    assert np.unique(ids).size == ids.size  # no row doubled
    expected = (set(range(BASE)) - set(range(900, 900 + ROUNDS))) | {10_000 + i for i in range(ROUNDS * 10)}
    for w in (0, 1):
        for r in range(ROUNDS):
            expected |= set(range(20_000 + w * 1000 + r * 10, 20_000 + w * 1000 + r * 10 + 3))
    assert set(ids.tolist()) == expected  # nothing lost
    tags = dict(zip(ids.tolist(), table["tag"].to_pylist()))
    for w in (0, 1):
        for r in range(ROUNDS):
            for i in np.arange(w + 2 * r * 37, BASE, 2 * ROUNDS * 37)[:5].tolist():
                assert tags[i] == f"merged-{w}"
    ops = [v["operation"] for v in ds.versions()[1:]]
    assert sorted(ops) == sorted(["append"] * ROUNDS + ["delete"] * ROUNDS + ["update"] * (2 * ROUNDS))
    # stable row ids stay unique and pylance reads the same rows
    rowids = ds.to_table(with_row_id=True)["_rowid"].to_numpy()
    assert np.unique(rowids).size == rowids.size
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri, storage_options=options).to_table().sort_by("id").equals(table.sort_by("id"))


def test_merge_insert_gives_up_after_its_retries(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(np.arange(10), "base"), uri)
    stale = lt.dataset(uri)
    lt.dataset(uri).merge_insert("id").when_matched_update_all().execute(_rows(np.arange(3), "first"))
    # planned on the stale version, the update of the same fragment conflicts; no retries allowed
    with pytest.raises(lt.CommitConflictError):
        stale.merge_insert("id").when_matched_update_all().conflict_retries(0).execute(
            _rows(np.arange(2), "late")
        )
    # with retries it is planned again on the latest version
    assert stale.merge_insert("id").when_matched_update_all().execute(_rows(np.arange(2), "late")) == {
        "num_inserted_rows": 0,
        "num_updated_rows": 2,
        "num_deleted_rows": 0,
    }
    table = lt.dataset(uri).to_table().sort_by("id")
    assert table["tag"].to_pylist()[:3] == ["late", "late", "first"]
    assert table.num_rows == 10
