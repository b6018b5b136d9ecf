"""The compaction's read-ahead pipeline: where its pieces decode (on their own read-ahead thread when
every worker has one, on the decode pool when cores are left idle), and that the rows it writes are
the same whatever the thread count, read back by pylance, on inputs written by either library."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table import _parallel
from lance_table.table import fragment_batch
from lance_table.table.operations import compaction_rewrite

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop


def _table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": (ids % 97).astype(np.float64) / 7,
            "s": pa.array([f"row {i} " + "z" * (i % 13) for i in ids.tolist()]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, 4).astype(np.float32)), 4),
        }
    )


def _write(lib: object, uri: Path, fragments: int = 6, rows: int = 500) -> pa.Table:
    table = _table(fragments * rows)
    lib.write_dataset(table, str(uri), max_rows_per_file=rows, data_storage_version="2.2")  # type: ignore[attr-defined]
    return table


def _record_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Each piece read by a compaction: the thread reading it and whether its decoding maps run on
    that thread."""
    seen: list[tuple[str, bool]] = []
    real = fragment_batch.read

    def read(*args: object, **kwargs: object) -> pa.Table:
        seen.append((threading.current_thread().name, _parallel.runs_inline(_parallel.DECODE)))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fragment_batch, "read", read)
    return seen


@pytest.mark.parametrize("ahead_bytes", [1 << 40, 1])
def test_pieces_read_ahead_decode_on_their_thread_only_when_every_worker_has_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead_bytes: int
) -> None:
    table = _write(lt, tmp_path / "ds")
    monkeypatch.setattr(_parallel, "workers", lambda: 2)
    monkeypatch.setattr(compaction_rewrite, "workers", lambda: 2)
    monkeypatch.setattr(compaction_rewrite, "COPY_CHUNK_ROWS", 400)  # pieces of 400 rows
    # as many pieces ahead as workers (2), or one (the bytes allow no more): a worker left idle
    monkeypatch.setattr(compaction_rewrite, "READ_AHEAD_BYTES", ahead_bytes)
    seen = _record_reads(monkeypatch)
    ds = lt.dataset(tmp_path / "ds")
    ds.optimize.compact_files()
    first, rest = seen[0], seen[1 : len(seen)]
    assert ds.to_table() == table and len(ds.get_fragments()) == 1
    assert len(rest) >= 7  # pieces of at most 400 rows of 3000, the first read by the caller
    assert first == (threading.current_thread().name, False)
    assert all(name.startswith(_parallel.FRAGMENTS) for name, _ in rest)
    assert all(inline == (ahead_bytes > 1) for _, inline in rest)


@pytest.mark.parametrize("threads", [1, 2, 16])
@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_compacted_rows_are_the_same_at_any_thread_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int, writer: str
) -> None:
    lib = lt if writer == "lance_table" else lance
    table = _write(lib, tmp_path / "theirs")
    shutil.copytree(tmp_path / "theirs", tmp_path / "ours")
    for module in (_parallel, compaction_rewrite):
        monkeypatch.setattr(module, "workers", lambda: threads)
    monkeypatch.setattr(compaction_rewrite, "COPY_CHUNK_ROWS", 700)  # pieces across fragments
    ours = lt.dataset(tmp_path / "ours")
    ours.delete("id % 11 = 3")
    theirs = lance.dataset(tmp_path / "theirs")
    theirs.delete("id % 11 = 3")
    ours.optimize.compact_files()
    theirs.optimize.compact_files()
    kept = table.filter(pa.array(table["id"].to_numpy() % 11 != 3))
    assert len(ours.get_fragments()) == len(theirs.get_fragments()) == 1
    assert ours.to_table() == kept == theirs.to_table()
    # pylance reads our compacted files as it reads its own
    assert lance.dataset(tmp_path / "ours").to_table() == kept
    assert lt.dataset(tmp_path / "theirs").to_table() == kept
