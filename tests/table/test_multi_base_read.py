"""Datasets whose files live in several base paths (pylance's multi-base datasets and shallow
clones), written by pylance: lance_table reads them as pylance does (writes to them: see
test_multi_base_writes.py)."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance import DatasetBasePath

import lance_table as lt
from lance_table.file.runs import Runs
from lance_table.table.fragment import FragmentReader

pytestmark = pytest.mark.interop


def _same(uri: Path) -> None:
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    assert ours.to_table().equals(theirs.to_table())
    assert ours.count_rows("a > 4") == theirs.count_rows("a > 4")
    assert ours.take([0, 5, 8]).equals(theirs.take([0, 5, 8]))
    for mine, yours in zip(ours.get_fragments(), theirs.get_fragments()):
        assert mine.to_table().equals(yours.to_table())


@pytest.fixture()
def multi_base(tmp_path: Path) -> Path:
    bases = [
        DatasetBasePath(f"file://{tmp_path / 'p1'}", name="p1"),
        DatasetBasePath(f"file://{tmp_path / 'p2'}", name="p2", is_dataset_root=True),
    ]
    uri = tmp_path / "main"
    table = pa.table({"a": range(10), "s": [str(i) for i in range(10)]})
    lance.write_dataset(table, uri, initial_bases=bases, target_bases=["p1"], max_rows_per_file=5)
    more = pa.table({"a": range(10, 15), "s": [str(i) for i in range(10, 15)]})
    lance.write_dataset(more, uri, mode="append", target_bases=["p2"])
    lance.write_dataset(more, uri, mode="append")  # the primary path
    lance.dataset(uri).delete("a = 3 OR a = 12")
    return uri


def test_files_in_other_bases_read_as_pylance_reads_them(multi_base: Path) -> None:
    files = lance.dataset(multi_base).get_fragments()
    assert len({f.data_files()[0].base_id for f in files}) == 3  # two bases and the primary path
    _same(multi_base)


def test_shallow_clone_reads_its_source_files(multi_base: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    lance.dataset(multi_base).shallow_clone(clone, 4)  # after the delete: its deletion files too
    lance.dataset(clone).delete("a = 1")  # a new deletion file in the clone, the old ones in the source
    _same(clone)
    assert lt.dataset(clone).count_rows() == lance.dataset(clone).count_rows() == 16


def test_a_base_the_reader_does_not_know_is_a_typed_error(multi_base: Path) -> None:
    snapshot = lt.dataset(multi_base)._snapshot
    frag = snapshot.manifest.fragments[0]
    assert frag.files[0].base_id is not None
    reader = FragmentReader(frag, snapshot.storage, snapshot.roots)  # (no base paths given)
    with pytest.raises(lt.UnsupportedFormatError, match="base path"):
        reader.read(["a"], Runs.span(0, 1))
