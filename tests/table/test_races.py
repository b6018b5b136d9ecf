"""Several processes commit to one dataset at once: no commit is lost, nothing is seen half-done."""

from __future__ import annotations

import multiprocessing as mp
import threading

import numpy as np
import pytest
from race_workers import appender, deleter, rows

import lance_table as lt

pytestmark = pytest.mark.stress

PROCS = 8
APPENDS = 25


def _run(fn, args: list[tuple]) -> list:
    ctx = mp.get_context("spawn")
    with ctx.Pool(len(args)) as pool:
        return pool.map(fn, args)


def _check_appends(uri: str, options: dict | None, size: int) -> None:
    ds = lt.dataset(uri, storage_options=options)
    versions = [v["version"] for v in ds.versions()]
    assert versions == list(range(1, PROCS * APPENDS + 2))  # contiguous: create + every append
    ids = np.sort(ds.to_table(columns=["id"])["id"].to_numpy())
    expected = np.sort(
        np.concatenate([np.arange(w * 1_000_000, w * 1_000_000 + APPENDS * size) for w in range(PROCS)])
    )
    assert np.array_equal(ids, expected)  # every row exactly once
    assert [v["operation"] for v in ds.versions()[1:]] == ["append"] * (PROCS * APPENDS)


def _race(uri: str, options: dict | None, size: int) -> None:
    lt.write_dataset(rows(np.zeros(0, np.int64)), uri, storage_options=options)
    results = _run(appender, [(uri, options or {}, w, APPENDS, size) for w in range(PROCS)])
    committed = sorted(v for r in results for v in r)
    assert committed == list(range(2, PROCS * APPENDS + 2))  # each worker saw its own distinct version
    _check_appends(uri, options, size)


def test_eight_processes_appending_on_local_disk(tmp_path):
    uri = str(tmp_path / "ds")
    _race(uri, None, 10)
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri).count_rows() == PROCS * APPENDS * 10
    assert lance.dataset(uri).version == PROCS * APPENDS + 1


@pytest.mark.s3
def test_eight_processes_appending_on_s3(s3_uri, s3_options):
    _race(s3_uri, s3_options, 5)
    lance = pytest.importorskip("lance")
    assert lance.dataset(s3_uri, storage_options=s3_options).count_rows() == PROCS * APPENDS * 5


def test_concurrent_appends_and_deletes_equal_a_serial_order(tmp_path):
    uri = str(tmp_path / "ds")
    initial = np.arange(1000)
    lt.write_dataset(rows(initial), uri, max_rows_per_file=250)  # 4 fragments, all deleters share them
    modulus, rounds = 4, 5
    jobs = [(uri, {}, w + 10, 8, 20) for w in range(4)]
    deletes = [(uri, {}, w, rounds, modulus) for w in range(modulus)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(8) as pool:
        a = pool.map_async(appender, jobs)
        d = pool.map_async(deleter, deletes)
        a.get()
        d.get()
    ds = lt.dataset(uri)
    ids = np.sort(ds.to_table(columns=["id"])["id"].to_numpy())
    # Appended ids never match the delete predicates, so every serial order gives the same result.
    appended = np.concatenate([np.arange(w * 1_000_000, w * 1_000_000 + 8 * 20) for w in range(10, 14)])
    survivors = initial[initial >= rounds * 200]
    assert np.array_equal(ids, np.sort(np.concatenate([survivors, appended])))
    ops = [v["operation"] for v in ds.versions()]
    assert ops.count("append") == 32 and ops.count("delete") == modulus * rounds
    lance = pytest.importorskip("lance")
    assert np.array_equal(np.sort(lance.dataset(uri).to_table(columns=["id"])["id"].to_numpy()), ids)


@pytest.mark.s3
def test_appends_racing_on_s3_while_manifest_stores_are_slow(s3_uri, s3_options, slow_s3_manifest_stores):
    """Each version has one claimant and holds that claimant's rows, even with a wide race window."""
    lt.write_dataset(rows(np.zeros(0, np.int64)), s3_uri, storage_options=s3_options)
    writers, appends = 4, 3
    barrier = threading.Barrier(writers)
    results: dict[int, list[int]] = {}

    def append(worker: int) -> None:
        barrier.wait()
        results[worker] = appender((s3_uri, s3_options, worker, appends, 5))

    threads = [threading.Thread(target=append, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claims = sorted((v, w) for w, vs in results.items() for v in vs)
    assert [v for v, _ in claims] == list(range(2, writers * appends + 2))
    for version, worker in claims:
        now = lt.dataset(s3_uri, version=version, storage_options=s3_options).to_table(columns=["id"])
        before = lt.dataset(s3_uri, version=version - 1, storage_options=s3_options).to_table(columns=["id"])
        added = set(now["id"].to_pylist()) - set(before["id"].to_pylist())
        assert {i // 1_000_000 for i in added} == {worker}
