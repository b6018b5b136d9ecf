"""update and merge_insert racing compaction and cleanup (threads, local disk and the moto S3 server):
every reported commit stays, no row is lost or doubled, each update counted once, and pylance reads
the result."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.stress

ORIGINAL = 600
ROUNDS = 5


def _rows(ids: np.ndarray, x: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array(np.full(ids.size, x, np.int64))})


def _retrying(fn: Callable[[], object]) -> object:
    """Run a maintenance step again when a writer took its fragments (a retryable conflict)."""
    while True:
        try:
            return fn()
        except lt.CommitConflictError as exc:
            if not exc.retryable:
                raise


def _race(uri: str, options: dict | None) -> None:
    lt.write_dataset(_rows(np.arange(ORIGINAL)), uri, max_rows_per_file=50, storage_options=options)
    stop = threading.Event()
    errors: list[BaseException] = []
    updated: list[int] = []

    def open_() -> lt.LanceDataset:
        return lt.dataset(uri, storage_options=options)

    def updater() -> None:
        for _ in range(ROUNDS):
            r = open_().update({"x": "x + 1"}, "id < 300", conflict_retries=500)
            updated.append(r["num_rows_updated"])

    def merger() -> None:
        for r in range(ROUNDS):
            # rows 300..309 + 10r are upserted to x = 100 + r; new ids 10_000 + 10r.. are inserted
            src = _rows(
                np.concatenate(
                    [np.arange(300 + 10 * r, 310 + 10 * r), 10_000 + np.arange(10 * r, 10 * r + 5)]
                )
            )
            src = src.set_column(1, "x", pa.array(np.full(src.num_rows, 100 + r, np.int64)))
            stats = (
                open_()
                .merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .conflict_retries(500)
                .execute(src)
            )
            assert stats == {"num_inserted_rows": 5, "num_updated_rows": 10, "num_deleted_rows": 0}

    def compactor() -> None:
        while not stop.is_set():
            _retrying(lambda: open_().optimize.compact_files(target_rows_per_fragment=400))

    def cleaner() -> None:
        while not stop.is_set():
            open_().cleanup_old_versions(older_than=dt.timedelta(0))

    def guard(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported below
                errors.append(exc)

        return run

    writers = [threading.Thread(target=guard(f)) for f in (updater, merger)]
    keepers = [threading.Thread(target=guard(f)) for f in (compactor, cleaner)]
    for t in writers + keepers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in keepers:
        t.join()
    assert not errors, errors

    ds = open_()
    table = ds.to_table().sort_by("id")
    ids = table["id"].to_numpy()
    expected = np.concatenate(
        [
            np.arange(ORIGINAL),
            np.sort(np.concatenate([10_000 + np.arange(10 * r, 10 * r + 5) for r in range(ROUNDS)])),
        ]
    )
    assert np.array_equal(ids, expected)  # nothing lost, nothing doubled
    x = dict(zip(ids.tolist(), table["x"].to_pylist()))
    assert updated == [300] * ROUNDS
    assert all(x[i] == ROUNDS for i in range(300))  # every reported update counted once
    for r in range(ROUNDS):
        assert all(x[i] == 100 + r for i in range(300 + 10 * r, 310 + 10 * r))
        assert all(x[i] == 100 + r for i in range(10_000 + 10 * r, 10_000 + 10 * r + 5))
    assert all(x[i] == 0 for i in range(300 + 10 * ROUNDS, ORIGINAL))
    # cleanup may have removed any older version, so only the listing's shape is certain
    numbers = [v["version"] for v in ds.versions()]
    assert numbers == sorted(set(numbers)) and numbers[-1] == ds.version
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri, storage_options=options).to_table().sort_by("id").equals(table)


def test_updates_and_merges_race_compaction_and_cleanup(tmp_path):
    _race(str(tmp_path / "ds"), None)


@pytest.mark.s3
def test_updates_and_merges_race_compaction_and_cleanup_on_s3(s3_uri, s3_options):
    _race(s3_uri, s3_options)
