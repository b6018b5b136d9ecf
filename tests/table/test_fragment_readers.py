"""Readers of a version's fragments made on demand: what a take of a few rows among many
fragments reads, checked against pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.interop


def _dataset(path: Path) -> str:
    uri = str(path / "d")
    lt.write_dataset(
        pa.table({"id": np.arange(300), "s": [f"v{i}" for i in range(300)]}), uri, max_rows_per_file=10
    )
    lt.dataset(uri).delete("id % 7 = 3")
    return uri


def test_readers_are_made_when_first_asked_for(tmp_path: Path) -> None:
    uri = _dataset(tmp_path)
    snapshot = lt.dataset(uri)._snapshot
    readers = snapshot.readers_on_demand()
    assert len(readers) == 30 and not readers._made
    last = readers[-1]
    assert last is readers[29] and readers._made.keys() == {29}
    assert [r.fragment.id for r in readers[2:5]] == [2, 3, 4]
    assert [r.fragment for r in readers] == [r.fragment for r in snapshot.fragment_readers()]
    assert readers.live_counts().tolist() == [f.num_rows for f in snapshot.manifest.fragments]
    assert [r.fragment.id for r in snapshot.readers_on_demand([7, 3])] == [7, 3]
    with pytest.raises(IndexError):
        readers[30]
    with pytest.raises(ValueError, match="fragments"):
        snapshot.readers_on_demand([99])


def test_take_among_many_fragments_matches_pylance(tmp_path: Path) -> None:
    uri = _dataset(tmp_path)
    rows = lance.dataset(uri).count_rows()
    picks = [0, 5, rows - 1, 131, 5, 77]
    assert lt.dataset(uri).take(picks).equals(lance.dataset(uri).take(picks))
    with pytest.raises(IndexError):
        lt.dataset(uri).take([rows])
