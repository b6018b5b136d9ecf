"""Forked children (Spark's Python workers, multiprocessing with fork) read after their parent used
the thread pools and caches: they make their own pools, sized by LANCE_CPU_THREADS."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table import _parallel
from lance_table.table import readers, versions

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _in_child(work, timeout: float = 60.0) -> dict:
    """Run ``work()`` in a forked child, while this process holds the locks of the pools and of
    the reader and manifest caches (as a thread of a busy parent may at the fork); its result."""
    r, w = os.pipe()
    with contextlib.ExitStack() as held:
        for lock in (_parallel._LOCK, versions._DECODED_LOCK, readers.READERS._lock):
            held.enter_context(lock)
        pid = os.fork()
        if pid == 0:  # the child never leaves this block: it exits here
            code = 0
            try:
                out = json.dumps(work()).encode()
            except BaseException as exc:  # reported to the parent
                out, code = json.dumps({"error": repr(exc)}).encode(), 1
            os.write(w, out)
            os._exit(code)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the forked child did not finish within {timeout}s (a pool or lock of the parent?)")
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    return json.loads(data)


def test_a_forked_child_reads_with_its_own_pools(tmp_path, monkeypatch):
    uri = str(tmp_path / "ds")
    table = pa.table({"id": np.arange(3000), "s": [f"s{i}" for i in range(3000)]})
    lt.write_dataset(table, uri, max_rows_per_file=500)
    ds = lt.dataset(uri)
    assert ds.to_table().num_rows == 3000  # the parent's pools and caches are in use
    assert _parallel._POOLS
    monkeypatch.setenv("LANCE_CPU_THREADS", "3")

    def work() -> dict:
        got = lt.dataset(uri).to_table()
        again = ds.to_table(filter="id >= 2990")  # a handle the parent opened
        return {
            "rows": got.num_rows,
            "ids": int(pa.compute.sum(got["id"]).as_py()),
            "again": again["id"].to_pylist(),
            "pool": _parallel.pool(_parallel.FRAGMENTS)._max_workers,
        }

    got = _in_child(work)
    assert "error" not in got, got
    assert got["rows"] == 3000 and got["ids"] == 3000 * 2999 // 2
    assert got["again"] == list(range(2990, 3000))
    assert got["pool"] == 3  # the child's pools follow LANCE_CPU_THREADS


def test_thread_counts_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("LANCE_CPU_THREADS", "5")
    monkeypatch.setenv("LANCE_IO_THREADS", "7")
    assert _parallel.workers() == 5
    assert _parallel.io_threads() == 7
    monkeypatch.delenv("LANCE_IO_THREADS")
    assert _parallel.io_threads() == _parallel.IO_THREADS
    for bad in ("0", "many", "-2"):
        monkeypatch.setenv("LANCE_CPU_THREADS", bad)
        with pytest.raises(ValueError, match="LANCE_CPU_THREADS"):
            _parallel.workers()


@pytest.mark.s3
def test_a_forked_child_reads_s3_through_its_parents_handle(s3_uri, s3_options):
    uri = f"{s3_uri}/forked"
    lt.write_dataset(pa.table({"id": np.arange(600)}), uri, max_rows_per_file=200, storage_options=s3_options)
    ds = lt.dataset(uri, storage_options=s3_options)
    assert ds.count_rows() == 600 and ds.to_table().num_rows == 600  # cached readers hold connections

    def work() -> dict:
        return {"ids": ds.to_table()["id"].to_pylist(), "count": ds.count_rows("id < 10")}

    got = _in_child(work)
    assert "error" not in got, got
    assert sorted(got["ids"]) == list(range(600)) and got["count"] == 10
