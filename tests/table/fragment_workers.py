"""Worker functions of the distributed-write tests (importable by spawned processes): each writes
rows into fragments of a dataset without committing, and returns their metadata as JSON text."""

from __future__ import annotations

import json

import lance
import lance.fragment
import numpy as np
import pyarrow as pa

import lance_table as lt


def make_rows(start: int, n: int) -> pa.Table:
    """Deterministic rows with ids ``start .. start + n`` (nulls and lists included)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "s": pa.array([f"row-{i}" if i % 13 else None for i in ids.tolist()]),
            "tags": pa.array([["a", "b"][: i % 3] for i in ids.tolist()], pa.list_(pa.string())),
        }
    )


def lance_table_worker(args: tuple[str, int, int]) -> list[str]:
    """lance_table writes rows ``start .. start + n`` into fragments (one per 100 rows)."""
    uri, start, n = args
    metas = lt.fragment.write_fragments(make_rows(start, n), uri, max_rows_per_file=100)
    assert isinstance(metas, list)
    return [json.dumps(m.to_json()) for m in metas]


def pylance_worker(args: tuple[str, int, int]) -> list[str]:
    """pylance writes rows ``start .. start + n`` into fragments (one per 100 rows)."""
    uri, start, n = args
    metas = lance.fragment.write_fragments(make_rows(start, n), uri, max_rows_per_file=100)
    return [json.dumps(m.to_json()) for m in metas]
