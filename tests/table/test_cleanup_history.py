"""Cleanup over a history of every kind of commit reads each manifest's head only (version, time,
transaction) and each doomed version's files from its transaction: it removes what pylance removes."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.format.manifest_file import decode_manifest_head, decode_manifest_summary

pytestmark = pytest.mark.interop


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "s": [f"r{i}" for i in range(n)]})


def _history(uri: str, mod: Any) -> None:
    """Appends, an overwrite, deletes and a compaction, each by ``mod`` (a library)."""
    mod.write_dataset(_rows(0, 6), uri, max_rows_per_file=2)
    mod.write_dataset(_rows(6, 2), uri, mode="append")
    mod.write_dataset(mod.dataset(uri).to_table(), uri, mode="overwrite", max_rows_per_file=3)
    mod.dataset(uri).delete("id = 1")
    mod.write_dataset(_rows(8, 2), uri, mode="append")
    mod.dataset(uri).delete("id = 7")
    ds = mod.dataset(uri)
    ds.compact_files() if mod is lt else ds.optimize.compact_files()
    mod.write_dataset(_rows(10, 2), uri, mode="append")


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cleanup-history")
    ours, theirs = root / "ours", root / "theirs"
    _history(str(ours), lt)
    _history(str(theirs), lance)
    return ours, theirs


def test_manifest_heads_are_their_summaries(histories: tuple[Path, Path]) -> None:
    for root in histories:
        for path in sorted((root / "_versions").glob("*.manifest")):
            data = path.read_bytes()
            head, whole = decode_manifest_head(data, str(path)), decode_manifest_summary(data, str(path))
            assert (head.version, head.timestamp_ns, head.transaction, head.transaction_file) == (
                whole.version,
                whole.timestamp_ns,
                whole.transaction,
                whole.transaction_file,
            )
            assert head.transaction is not None and head.fragments is None


@pytest.mark.parametrize("writer", ["ours", "theirs"])
def test_cleanup_of_a_young_history_removes_what_pylance_removes(
    histories: tuple[Path, Path], tmp_path: Path, writer: str
) -> None:
    # files younger than the grace period go only when a removed version references them: read
    # from the transactions of appends, overwrites, deletes and the compaction's rewrite
    source = histories[0] if writer == "ours" else histories[1]
    mine, yours = tmp_path / "mine", tmp_path / "yours"
    shutil.copytree(source, mine)
    shutil.copytree(source, yours)
    done = lt.dataset(str(mine)).cleanup_old_versions(older_than=dt.timedelta(0))
    expected = lance.dataset(str(yours)).cleanup_old_versions(older_than=dt.timedelta(0))
    fields = ("old_versions", "data_files_removed", "deletion_files_removed", "transaction_files_removed")
    assert [getattr(done, f) for f in fields] == [getattr(expected, f) for f in fields]
    assert done.data_files_removed > 0 and done.deletion_files_removed > 0
    left = sorted(p.relative_to(mine) for p in mine.rglob("*") if p.is_file() and "_versions" not in p.parts)
    assert left == sorted(
        p.relative_to(yours) for p in yours.rglob("*") if p.is_file() and "_versions" not in p.parts
    )
    assert lt.dataset(str(mine)).to_table() == lance.dataset(str(yours)).to_table()
