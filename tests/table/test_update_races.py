"""Updates racing appends and deletes on local disk (threads): nothing is lost, nothing comes back,
and every version is a state some serial order of the committed operations reaches."""

from __future__ import annotations

import datetime as dt
import threading

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.stress

ORIGINAL = 800
UPDATES = 12
DELETES = 12
APPENDS = 8
MODULUS = 4  # update k adds 1 to x where id % MODULUS = k % MODULUS


def _rows(ids: np.ndarray) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array(np.zeros(ids.size, np.int64))})


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_ids"])
def test_updates_race_appends_and_deletes(tmp_path, stable):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(np.arange(ORIGINAL)), uri, max_rows_per_file=100, enable_stable_row_ids=stable)
    deleted = [int(i) for i in np.random.default_rng(1).choice(ORIGINAL, DELETES, replace=False)]
    errors: list[BaseException] = []
    counts: list[int] = []

    def updater() -> None:
        for k in range(UPDATES):
            r = lt.dataset(uri).update(
                {"x": "x + 1"},
                f"id < {ORIGINAL} AND id % {MODULUS} = {k % MODULUS}",
                conflict_retries=500,
                retry_timeout=dt.timedelta(minutes=5),
            )
            counts.append(r["num_rows_updated"])

    def deleter() -> None:
        for i in deleted:
            # a delete that meets an update of its fragment is re-run on the latest version
            assert lt.dataset(uri).delete(f"id = {i}") == {"num_deleted_rows": 1}

    def appender() -> None:
        for a in range(APPENDS):
            lt.write_dataset(_rows(np.arange(10_000 + a * 10, 10_000 + a * 10 + 10)), uri, mode="append")

    def run(fn) -> None:
        try:
            fn()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in (updater, deleter, appender)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

    ds = lt.dataset(uri)
    history = ds.versions()
    assert [v["version"] for v in history] == list(range(1, len(history) + 1))
    ops = [v["operation"] for v in history[1:]]
    assert sorted(ops) == sorted(["update"] * UPDATES + ["delete"] * DELETES + ["append"] * APPENDS)
    # every version holds each id at most once (no row duplicated by an update rebased wrongly)
    for v in history:
        ids = ds.checkout(v["version"]).to_table(columns=["id"])["id"].to_numpy()
        assert np.unique(ids).size == ids.size, v
    final = ds.to_table().sort_by("id")
    ids = final["id"].to_numpy()
    expected = np.sort(
        np.concatenate([np.setdiff1d(np.arange(ORIGINAL), deleted), 10_000 + np.arange(APPENDS * 10)])
    )
    assert np.array_equal(ids, expected)  # nothing lost, no deleted row back
    x = dict(zip(ids.tolist(), final["x"].to_pylist()))
    per_residue = [sum(1 for k in range(UPDATES) if k % MODULUS == r) for r in range(MODULUS)]
    assert all(x[i] == per_residue[i % MODULUS] for i in ids.tolist() if i < ORIGINAL)
    assert all(x[i] == 0 for i in ids.tolist() if i >= 10_000)
    if stable:  # updated rows kept their ids
        t = ds.to_table(columns=["id"], with_row_id=True)
        assert all(r == i for i, r in zip(t["id"].to_pylist(), t["_rowid"].to_pylist()) if i < ORIGINAL)
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri).to_table().sort_by("id").equals(final)
