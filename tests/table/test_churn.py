"""Writers of every kind and a cleanup loop, in separate processes: a reported commit never vanishes.

Each writer logs the versions it was told it committed. Afterwards: no version was reported twice,
every reported append's rows are in the latest version unless an overwrite or restore was reported
later, no manifest repeats a fragment id, every listed version reads, and pylance reads the latest
version as we do. ``LANCE_TABLE_CHURN_SECONDS`` sets how long the processes run.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections import Counter

import numpy as np
import pytest
from churn_workers import INITIAL, cleaner, rows, writer

import lance_table as lt
from lance_table.storage import open_storage
from lance_table.table import versions

pytestmark = pytest.mark.stress

SECONDS = float(os.environ.get("LANCE_TABLE_CHURN_SECONDS", "20"))
KINDS = (
    ("append", "append", "append", "delete"),
    ("append", "append", "compact", "delete", "tag"),
    ("append", "append", "restore", "overwrite", "append", "delete"),
)


def _churn(uri: str, options: dict[str, str] | None, seconds: float) -> None:
    lt.write_dataset(rows(np.arange(INITIAL)), uri, max_rows_per_file=200, storage_options=options)
    ctx = mp.get_context("spawn")
    with ctx.Pool(len(KINDS) + 1) as pool:
        cleaning = pool.apply_async(cleaner, ((uri, options or {}, seconds),))
        writing = pool.map_async(writer, [(uri, options or {}, w, seconds, k) for w, k in enumerate(KINDS)])
        logs = writing.get(timeout=seconds * 5 + 120)
        removed = cleaning.get(timeout=120)
    events = sorted((version, kind, ids) for log in logs for kind, version, ids in log)
    assert len(events) > 20 and removed > 0, "the processes did too little to test anything"

    twice = [v for v, n in Counter(v for v, _, _ in events).items() if n > 1]
    assert not twice, f"versions reported committed twice: {twice[:10]}"

    ds = lt.dataset(uri, storage_options=options)
    latest_ids = set(ds.to_table(columns=["id"])["id"].to_pylist())
    resets = [v for v, kind, _ in events if kind in ("overwrite", "restore")]
    last_reset = max(resets, default=0)
    lost = [
        v for v, kind, ids in events if kind == "append" and v > last_reset and not set(ids) <= latest_ids
    ]
    assert not lost, f"appends reported committed as versions {lost[:10]} are not in the latest version"
    assert max(v for v, _, _ in events) <= ds.version

    storage = open_storage(uri, options)
    for entry in versions.list_versions(storage):
        manifest = versions.read_manifest_file(storage, entry).manifest
        ids = [f.id for f in manifest.fragments]
        assert len(ids) == len(set(ids)), f"version {entry.version} repeats fragment ids"
        lt.dataset(uri, version=entry.version, storage_options=options).to_table()

    lance = pytest.importorskip("lance")
    theirs = lance.dataset(uri, storage_options=options).to_table().sort_by("id")
    assert theirs.equals(ds.to_table().sort_by("id"))


def test_writers_of_every_kind_beside_a_cleanup_loop_on_local_disk(tmp_path):
    _churn(str(tmp_path / "ds"), None, SECONDS)


@pytest.mark.s3
def test_writers_of_every_kind_beside_a_cleanup_loop_on_s3(s3_uri, s3_options):
    _churn(s3_uri, s3_options, SECONDS)
