"""``metadata_cache_size_bytes=0``: the handle caches no file metadata (as a pylance handle so
opened keeps its cache empty); what it reads is the same."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table
from lance_table.table.deletion import DELETIONS
from lance_table.table.readers import READERS

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop


def test_zero_metadata_cache_caches_nothing(tmp_path: Path) -> None:
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    ds = lance.write_dataset(pa.table({"id": range(50)}), theirs, max_rows_per_file=20)
    ds.delete("id % 7 = 0")
    shutil.copytree(theirs, ours)

    def cached_here() -> tuple[bool, bool]:
        return (
            any(ours in str(key[0]) for key in list(READERS._items)),
            any(ours in str(key[0]) for key in list(DELETIONS._items)),
        )

    for handle in (
        lance_table.dataset(ours, metadata_cache_size_bytes=0),
        lance_table.LanceDataset(ours, metadata_cache_size_bytes=0),
        lance_table.dataset(ours, session=lance_table.Session(metadata_cache_size_bytes=0)),
    ):
        assert handle.to_table() == lance.dataset(theirs).to_table()
        assert cached_here() == (False, False)
        assert handle.session().size_bytes() == 0
    cached = lance_table.dataset(ours)
    cached.to_table()
    assert cached_here() == (True, True)
    assert cached.session().size_bytes() > 0
    # pylance: the zero-sized cache holds less than the default one after the same read
    default, zero = lance.dataset(theirs), lance.dataset(theirs, metadata_cache_size_bytes=0)
    default.to_table()
    zero.to_table()
    assert zero.session().size_bytes() < default.session().size_bytes()
