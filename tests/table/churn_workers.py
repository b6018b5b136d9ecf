"""Worker processes for the churn test: writers of every kind beside a cleanup loop.

Each writer runs random operations until its deadline and returns a log of what was reported
committed: ``(kind, version, ids)`` where ``ids`` are the rows an append added.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from typing import Any

import numpy as np
import pyarrow as pa

import lance_table as lt

INITIAL = 2_000  # ids 0..INITIAL-1 are the rows deletes aim at; appended ids are far above
Log = list[tuple[str, int, list[int]]]


def rows(ids: np.ndarray) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array(ids * 0.5, pa.float64())})


def _open(uri: str, options: dict[str, Any]) -> lt.Dataset:
    return lt.dataset(uri, storage_options=options or None)


def writer(args: tuple[str, dict[str, Any], int, float, tuple[str, ...]]) -> Log:
    uri, options, worker, seconds, kinds = args
    rng = random.Random(worker)
    log: Log = []
    deadline = time.monotonic() + seconds
    next_id = (worker + 1) * 10_000_000
    while time.monotonic() < deadline:
        kind = rng.choice(kinds)
        try:
            if kind == "append":
                ids = np.arange(next_id, next_id + rng.randint(1, 30))
                next_id += 1000
                ds = lt.write_dataset(rows(ids), uri, mode="append", storage_options=options or None)
                log.append(("append", ds.version, ids.tolist()))
            elif kind == "overwrite":
                ids = np.arange(next_id, next_id + 50)
                next_id += 1000
                ds = lt.write_dataset(rows(ids), uri, mode="overwrite", storage_options=options or None)
                log.append(("overwrite", ds.version, ids.tolist()))
            else:
                before = _open(uri, options)
                read = before.version
                after = _other(kind, before, rng)  # a write moves the handle to its version
                if after is not None and after.version != read:
                    log.append((kind, after.version, []))
        except (lt.CommitConflictError, lt.VersionNotFoundError, lt.TagError):
            continue  # refused cleanly: nothing was reported committed
        except lt.DataFileNotFoundError as exc:
            if not exc.cleaned_up:
                raise
            continue  # the version it read was cleaned up under it
    return log


def _other(kind: str, ds: lt.Dataset, rng: random.Random) -> lt.Dataset | None:
    if kind == "delete":
        lo = rng.randrange(0, INITIAL, 10)
        ds.delete(f"id >= {lo} AND id < {lo + 10}")
        return ds
    if kind == "compact":
        metrics = ds.compact_files(target_rows_per_fragment=10_000)
        # a compaction re-run on the latest version (its own was cleaned up) may find nothing to
        # do: the handle then moves to the latest version without committing one
        return ds if metrics.fragments_removed else None
    if kind == "restore":
        listed = [v["version"] for v in ds.versions()]
        old = ds.checkout(rng.choice(listed))
        old.restore()
        return old
    if kind == "tag":
        name = f"t{rng.randrange(5)}"
        if name in ds.tags.list():
            ds.tags.delete(name)
        else:
            ds.tags.create(name, ds.version)
        return None
    raise ValueError(kind)


def cleaner(args: tuple[str, dict[str, Any], float]) -> int:
    """Run ``cleanup_old_versions(older_than=0)`` in a loop; return how many versions it removed."""
    uri, options, seconds = args
    deadline = time.monotonic() + seconds
    removed = 0
    while time.monotonic() < deadline:
        stats = _open(uri, options).cleanup_old_versions(
            older_than=dt.timedelta(0), error_if_tagged_old_versions=False
        )
        removed += stats.old_versions
    return removed
