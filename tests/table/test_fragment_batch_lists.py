"""Columns of fixed-size lists (vectors) of many small fragments read as batches: the same rows,
filters, takes and scans after deletes as pylance, on files either library wrote, locally and on
S3 (where a batch requests its files' spans at once, one GET per file as pylance sends); rows
picked from a slice of a nested list column read fragment by fragment (Arrow takes them from
the wrong place unless the slice is copied)."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.table import fragment_batch

BATCHED = ["id", "vec", "d3", "rows_null", "nested", "u8"]


pytestmark = pytest.mark.usefixtures("empty_caches")


def _fsl(values: np.ndarray, size: int, mask: pa.Array | None = None) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(values), size, mask=mask)


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    inner = _fsl(rng.integers(0, 9, n * 6).astype(np.int16), 3)
    return pa.table(
        {
            "id": np.arange(start, start + n, dtype=np.int64),
            "vec": _fsl(rng.random(n * 4).astype(np.float32), 4),
            "d3": _fsl(rng.random(n * 3), 3),
            "rows_null": _fsl(rng.integers(0, 100, n * 2).astype(np.int32), 2, pa.array(rng.random(n) < 0.2)),
            "nested": pa.FixedSizeListArray.from_arrays(inner, 2),
            "u8": _fsl(rng.integers(0, 255, n * 8).astype(np.uint8), 8),
            # not batched (items with nulls, booleans): read file by file beside the others
            "item_nulls": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(n * 2), mask=rng.random(n * 2) < 0.1), 2
            ),
            "flags": _fsl(rng.random(n * 2) < 0.5, 2),
        }
    )


def _build(uri: str, version: str, options: dict[str, str] | None = None) -> None:
    """Appends alternating between the two libraries."""
    start = 0
    for i, n in enumerate([30, 7, 50, 30, 12, 40]):
        data = _rows(start, n, i)
        mode = "append" if i else "create"
        write = lance.write_dataset if i % 2 else lt.write_dataset
        write(data, uri, mode=mode, data_storage_version=version, storage_options=options)
        start += n


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_vector_columns_are_batched_and_equal_pylance(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "ds")
    _build(uri, version)
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    frags = ours._snapshot.fragment_readers()
    for column in BATCHED:
        assert fragment_batch.plans(frags, [column]).count(None) == 0, column
    assert ours.to_table().equals(theirs.to_table())
    where = "id % 3 = 1"
    for columns in (BATCHED, None):
        got = ours.to_table(columns=columns, filter=where)
        assert got.equals(theirs.to_table(columns=columns, filter=where))
    idx = [0, 29, 30, 36, 100, 168]
    assert ours.take(idx).equals(theirs.take(idx))
    theirs.delete("id % 7 = 0")
    ours = lt.dataset(uri)
    assert ours.to_table().equals(theirs.to_table())
    for columns in (BATCHED, None):
        got = ours.to_table(columns=columns, filter="id > 40")
        assert got.equals(theirs.to_table(columns=columns, filter="id > 40"))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_takes_of_few_rows_of_small_files_of_many_chunks_are_batched(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "ds")
    rng = np.random.default_rng(5)
    for i, n in enumerate([120, 90, 150, 120]):  # 16 floats a row: pages of several chunks
        data = pa.table(
            {"id": np.arange(i * 200, i * 200 + n), "vec": _fsl(rng.random(n * 16).astype(np.float32), 16)}
        )
        write = lance.write_dataset if i % 2 else lt.write_dataset
        write(data, uri, mode="append" if i else "create", data_storage_version=version)
    lance.dataset(uri).delete("id % 11 = 3")
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    plans = fragment_batch.plans(ours._snapshot.fragment_readers(), ["id", "vec"])
    assert all(p is not None and p[1].chunks > 1 for p in plans)
    assert all(fragment_batch.batchable(p, 2) for p in plans)  # a few rows of each: one batch
    idx = [0, 1, 117, 118, 250, 251, 420, 421]
    for columns in (None, ["vec"]):
        assert ours.take(idx, columns=columns).equals(theirs.take(idx, columns=columns))
    got = ours.take(idx, columns=["vec", "_rowid", "_rowaddr"])
    assert got.equals(theirs.take(idx, columns=["vec", "_rowid", "_rowaddr"]))


@pytest.mark.s3
def test_batches_on_s3_send_one_get_per_file(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    _build(s3_uri, "2.2", s3_options)
    ours = lt.dataset(s3_uri, storage_options=s3_options)
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    files = len(theirs.get_fragments())
    assert ours.to_table(columns=BATCHED).equals(theirs.to_table(columns=BATCHED))  # opens the files
    s3_requests.reset()
    assert ours.to_table(columns=BATCHED).equals(theirs.to_table(columns=BATCHED))
    assert s3_requests.counts == {"GET": 2 * files}  # one per file, each library
