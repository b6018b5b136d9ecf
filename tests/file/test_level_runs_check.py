"""Run-length encoded levels of a mini-block chunk must add up to the level count its header
declares, compared modulo 65536 as pylance compares them (the header field is 16 bits): a chunk
whose runs say more or fewer levels is refused, naming the file, on a read and a take of it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PylanceFileReader

import lance_table
from lance_table.errors import CorruptFileError
from lance_table.file.reader import LanceFileReader

# the run lengths of the definition levels of the page's third chunk (2524 levels): runs of 1500
# lists and 1500 nulls, split at 255
RUNS = bytes([255, 255, 255, 187, 255, 255, 255, 255, 255, 225, 72])


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, int]:
    rows = [None if (i // 1500) % 2 else [i, i] for i in range(8000)]
    path = tmp_path_factory.mktemp("levels") / "lists.lance"
    lance_table.file.write_table(path, pa.table({"l": pa.array(rows, pa.list_(pa.int32()))}), version="2.2")
    data = path.read_bytes()
    at = data.find(RUNS)
    assert at >= 0 and data.find(RUNS, at + 1) < 0
    return path, data, at


def _damaged(tmp_path: Path, written: tuple[Path, bytes, int], changes: dict[int, int]) -> Path:
    _, data, at = written
    raw = bytearray(data)
    for k, by in changes.items():
        raw[at + k] += by
    path = tmp_path / "damaged.lance"
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("changes", [{10: 1}, {10: 100}, {3: 1}, {0: -1}])
def test_level_runs_that_miss_the_header_count_are_refused(
    tmp_path: Path, written: tuple[Path, bytes, int], changes: dict[int, int]
) -> None:
    path = _damaged(tmp_path, written, changes)
    total = 2524 + sum(changes.values())
    with pytest.raises(
        CorruptFileError, match=f"adding up to {total} levels, but its header declares 2524"
    ) as info:
        LanceFileReader(path).read_all()
    assert str(path) in str(info.value) and isinstance(info.value, ValueError)
    with pytest.raises(CorruptFileError, match="header declares 2524"):
        LanceFileReader(path).take([3000])
    assert LanceFileReader(path).take([5]).column("l").to_pylist() == [[5, 5]]  # other chunks read
    with pytest.raises(ValueError, match=f"proves {total} levels but the header declared 2524"):
        PylanceFileReader(str(path)).read_all().to_table()


def test_level_runs_of_the_declared_count_are_read(tmp_path: Path, written: tuple[Path, bytes, int]) -> None:
    """Runs moved between values but adding up to the count: both libraries read the same rows."""
    path = _damaged(tmp_path, written, {3: 1, 10: -1})
    ours = LanceFileReader(path).read_all()
    assert ours.equals(PylanceFileReader(str(path)).read_all().to_table())
    assert ours.num_rows == 8000
