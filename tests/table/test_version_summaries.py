"""versions() summaries: computed by difference and cached per manifest file, never stale."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.format.manifest_file import decode_manifest_summary, manifest_body
from lance_table.table import version_summaries


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _history(mod, uri: str) -> None:
    """A history that adds, rewrites, removes and replaces fragments."""
    mod.write_dataset(_rows(0, 40), uri, max_rows_per_file=10)
    for i in range(3):
        mod.write_dataset(_rows(100 + 10 * i, 10), uri, mode="append")
    mod.dataset(uri).delete("id = 15")  # rewrites a fragment in the middle
    mod.dataset(uri).delete("id >= 20 AND id < 30")  # removes one
    mod.dataset(uri).delete("id = 3 OR id = 125")  # rewrites two
    mod.write_dataset(_rows(200, 5), uri, mode="append")
    mod.dataset(uri).delete("id = 201")
    mod.write_dataset(_rows(0, 7), uri, mode="overwrite")
    mod.write_dataset(_rows(300, 5), uri, mode="append")


def _slow_totals(uri: str) -> list[dict[str, str]]:
    out = []
    for name in sorted(os.listdir(f"{uri}/_versions"), reverse=True):
        if name.endswith(".manifest"):
            with open(f"{uri}/_versions/{name}", "rb") as f:
                out.append(decode_manifest_summary(f.read(), name).totals())
    return out


@pytest.mark.parametrize("writer", [lt, lance], ids=["ours", "pylance"])
def test_totals_match_pylance_and_the_slow_path(tmp_path, writer):
    uri = str(tmp_path / "ds")
    _history(writer, uri)
    ours = lt.dataset(uri).versions()
    theirs = lance.dataset(uri).versions()
    assert [v["metadata"] for v in ours] == [v["metadata"] for v in theirs]
    assert [v["metadata"] for v in ours] == _slow_totals(uri)
    assert [v["timestamp"] for v in ours] == [v["timestamp"] for v in theirs]
    assert lt.dataset(uri).versions() == ours  # the cached answer is the same


def test_a_recreated_dataset_never_answers_from_the_cache(tmp_path, monkeypatch):
    # times are trusted at once here, so only the size and time keep the old summaries out
    monkeypatch.setattr(version_summaries, "_FINE_CLOCK_MARGIN", -1.0)
    monkeypatch.setattr(version_summaries, "_COARSE_CLOCK_MARGIN", -1.0)
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 10), uri)
    lt.write_dataset(_rows(10, 10), uri, mode="append")
    assert [v["metadata"]["total_rows"] for v in lt.dataset(uri).versions()] == ["10", "20"]
    shutil.rmtree(uri)
    lt.write_dataset(_rows(0, 30), uri)
    lt.write_dataset(_rows(30, 60), uri, mode="append")
    assert [v["metadata"]["total_rows"] for v in lt.dataset(uri).versions()] == ["30", "90"]


def test_only_a_settled_time_identifies_a_file():
    class _S:
        cache_key = "k"

    from lance_table.storage.base import Entry

    now = time.time()
    assert version_summaries.summary_key(_S(), Entry("p", 10, now - 0.01), now) is None
    assert version_summaries.summary_key(_S(), Entry("p", 10, now - 1.5), now) is not None
    assert version_summaries.summary_key(_S(), Entry("p", 10, float(int(now) - 1)), now) is None
    assert version_summaries.summary_key(_S(), Entry("p", 10, None), now) is None
    assert version_summaries.summary_key(_S(), Entry("p", 10, None, "e1"), now) is not None


def test_the_fragment_run_is_found_and_skipped_whole(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 30), uri, max_rows_per_file=10)
    lt.dataset(uri).delete("id = 15")
    names = sorted((n for n in os.listdir(f"{uri}/_versions") if n.endswith(".manifest")), reverse=True)
    datas = [Path(f"{uri}/_versions/{n}").read_bytes() for n in names]  # V2 names: oldest first
    version_summaries.clear()
    for data in datas:
        run = version_summaries.find_fragment_run("k", manifest_body(data, "m"))
        assert run is not None
        summary = decode_manifest_summary(data, "m", skip=run.span)
        assert len(summary.fragments) == 0  # every fragment record was in the run
        assert run.totals == decode_manifest_summary(data, "m").totals()
        version_summaries.keep("k", run)
    # a span that misses records leaves them to the protobuf: the caller then counts them itself
    start = run.span[0]
    body = manifest_body(datas[-1], "m")
    first_end = start + 2 + body[start + 1]  # the first record (a length below 128)
    assert len(decode_manifest_summary(datas[-1], "m", skip=(start, first_end)).fragments) == 2
