"""verify(): every file a version references exists and agrees with the manifest; every problem is
reported, none stops the survey."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import DatasetNotFoundError, VersionNotFoundError
from lance_table.table.verify import KINDS, verify


@pytest.fixture
def sound(tmp_path: Path) -> str:
    """A dataset pylance wrote: 3 fragments, a deletion file, a BTree index (with its file list)."""
    uri = str(tmp_path / "ds")
    table = pa.table({"a": np.arange(300), "b": [f"v{i}" for i in range(300)]})
    ds = lance.write_dataset(table, uri, max_rows_per_file=100)
    ds.create_scalar_index("a", "BTREE")
    ds.delete("a < 10")
    return uri


def _files(uri: str, folder: str) -> list[Path]:
    return sorted(p for p in (Path(uri) / folder).rglob("*") if p.is_file())


def test_a_sound_dataset_has_no_problem_and_every_file_is_checked(sound: str) -> None:
    report = verify(sound)
    assert report.ok and report.problems == ()
    assert report.version == lance.dataset(sound).version
    assert dict(report.checked) == {"data": 3, "deletion": 1, "index": 2, "transaction": 1}
    assert sum(report.skipped.values()) == 0
    # the same from an open handle, and for an older version
    assert verify(lt.dataset(sound)).ok
    assert verify(sound, version=1).checked["deletion"] == 0


def test_every_problem_is_reported_with_its_file(sound: str) -> None:
    data = _files(sound, "data")
    data[0].unlink()  # missing
    with data[1].open("ab") as f:  # size and footer disagree
        f.write(b"xx")
    (deletion,) = _files(sound, "_deletions")
    deletion.write_bytes(b"not arrow")
    index_file = next(p for p in _files(sound, "_indices") if p.name == "page_lookup.lance")
    index_file.unlink()
    (txn,) = [p for p in _files(sound, "_transactions") if p.name.startswith("2-")]
    txn.unlink()

    report = verify(sound)
    assert not report.ok
    by_path = {p.path: p for p in report.problems}
    rel = lambda p: p.relative_to(sound).as_posix()  # noqa: E731
    assert "missing" in by_path[rel(data[0])].message
    grown = [p.message for p in report.problems if p.path == rel(data[1])]
    assert any("the manifest records" in m for m in grown) and any("footer" in m for m in grown)
    assert by_path[rel(deletion)].kind == "deletion"
    assert by_path[rel(index_file)].kind == "index"
    assert by_path[rel(txn)].kind == "transaction"
    assert {p.kind for p in report.problems} <= set(KINDS)
    assert all(str(p).startswith(p.path) for p in report.problems)


def test_row_counts_and_deletion_counts_must_agree_with_the_manifest(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lt.write_dataset(pa.table({"a": np.arange(100)}), uri, max_rows_per_file=50)
    ds.delete("a < 3")
    (old_deletion,) = _files(uri, "_deletions")
    ds.delete("a = 40")  # fragment 0's new deletion file holds 4 rows; the old one (3) stays
    (new_deletion,) = set(_files(uri, "_deletions")) - {old_deletion}
    new_deletion.write_bytes(old_deletion.read_bytes())
    # a data file of 100 rows in place of fragment 1's file of 50
    other = tmp_path / "other"
    lt.write_dataset(pa.table({"a": np.arange(100)}), other)
    (big,) = _files(str(other), "data")
    second = lt.dataset(uri).get_fragments()[1]
    (Path(uri) / "data" / second.data_files()[0].path).write_bytes(big.read_bytes())

    problems = verify(uri).problems
    messages = [str(p) for p in problems]
    assert any("holds 100 rows" in m and f"fragment {second.fragment_id} has 50" in m for m in messages), (
        messages
    )
    (deletion,) = [p for p in problems if p.kind == "deletion"]
    assert deletion.path == new_deletion.relative_to(uri).as_posix()
    assert "3" in deletion.message and "4" in deletion.message


def test_a_missing_dataset_or_version_is_a_typed_error(tmp_path: Path, sound: str) -> None:
    with pytest.raises(DatasetNotFoundError):
        verify(str(tmp_path / "nothing"))
    with pytest.raises(VersionNotFoundError):
        verify(sound, version=99)
