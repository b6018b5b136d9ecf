"""Worker functions for the multi-process race tests (importable by spawned processes)."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

import lance_table as lt


def rows(ids: np.ndarray) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "writer": pa.array(ids // 1_000_000, pa.int64())})


def appender(args: tuple[str, dict, int, int, int]) -> list[int]:
    """Append ``count`` batches of ``size`` rows with ids unique to this worker; return versions."""
    uri, options, worker, count, size = args
    versions = []
    for i in range(count):
        start = worker * 1_000_000 + i * size
        ds = lt.write_dataset(
            rows(np.arange(start, start + size)), uri, mode="append", storage_options=options
        )
        versions.append(ds.version)
    return versions


def deleter(args: tuple[str, dict, int, int, int]) -> list[str]:
    """Delete rows of the initial data whose id is congruent to ``worker`` mod ``modulus``, in rounds."""
    uri, options, worker, rounds, modulus = args
    done = []
    for r in range(rounds):
        predicate = f"id < 1000000 AND id % {modulus} = {worker} AND id >= {r * 200} AND id < {(r + 1) * 200}"
        for attempt in range(50):
            try:
                lt.dataset(uri, storage_options=options).delete(predicate)
                break
            except lt.CommitConflictError as exc:  # pragma: no cover - only with compaction in the mix
                if not exc.retryable:
                    raise
                time.sleep(0.01 * attempt)
        done.append(predicate)
    return done
