"""Datasets whose manifest records the legacy format 0.1 for data files of format 2.0 (pylance 0.16
wrote them so): they read, the next commit records the files' format as pylance's does, and a
mixture of formats is an ``OSError`` naming the problem when a commit is tried, as in pylance."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import assert_tables_equal, edit_latest_manifest

import lance_table as lt

lance = pytest.importorskip("lance")


def _record_legacy(pb: Any) -> None:
    """Record what pylance 0.16 recorded: format 0.1, and 0.3 (its name of 2.0) for each file."""
    pb.data_format.file_format, pb.data_format.version = "lance", "0.1"
    for frag in pb.fragments:
        for data_file in frag.files:
            data_file.file_major_version, data_file.file_minor_version = 0, 3


def _wrongly_recorded(root: Path) -> Path:
    """A 2.0 dataset of three fragments (pylance's) whose manifest says 0.1, as pylance 0.16 wrote."""
    table = pa.table({"id": pa.array(range(30), pa.int64()), "s": [f"r{i}" for i in range(30)]})
    lance.write_dataset(table, root, max_rows_per_file=10, data_storage_version="2.0")
    edit_latest_manifest(root, _record_legacy)
    return root


def test_wrongly_recorded_format_reads_and_is_fixed_by_the_next_commit(tmp_path: Path) -> None:
    ours = _wrongly_recorded(tmp_path / "ours")
    ds, their_ds = lt.dataset(ours), lance.dataset(ours)
    assert ds.data_storage_version == their_ds.data_storage_version == "0.1"
    expected = their_ds.to_table()
    assert_tables_equal(ds.to_table(), expected)

    ds.delete("id = 3")
    assert ds.data_storage_version == "2.0"
    assert lance.dataset(ours).data_storage_version == "2.0"
    assert_tables_equal(lance.dataset(ours).to_table(), expected.filter(pa.compute.field("id") != 3))
    # appends now write the files' format, and pylance keeps writing
    lt.write_dataset(pa.table({"id": pa.array([100], pa.int64()), "s": ["x"]}), ours, mode="append")
    lance.write_dataset(pa.table({"id": pa.array([101], pa.int64()), "s": ["y"]}), ours, mode="append")
    got = lance.dataset(ours)
    assert got.count_rows() == 31  # 30, one deleted, two appended
    assert {f.data_files()[0].file_major_version for f in got.get_fragments()} <= {0, 2}
    assert_tables_equal(lt.dataset(ours).to_table(), got.to_table())


def test_an_append_to_a_wrongly_recorded_dataset_writes_the_files_format(tmp_path: Path) -> None:
    root = _wrongly_recorded(tmp_path / "ds")
    ds = lt.write_dataset(pa.table({"id": pa.array([7], pa.int64()), "s": ["a"]}), root, mode="append")
    assert ds.data_storage_version == "2.0"
    assert [f.data_files()[0].file_major_version for f in lt.dataset(root).get_fragments()][-1] == 2
    assert lance.dataset(root).count_rows() == 31


def test_a_mixture_of_formats_reads_but_refuses_commits(tmp_path: Path) -> None:
    root = _wrongly_recorded(tmp_path / "ds")
    legacy = tmp_path / "legacy"
    lance.write_dataset(
        pa.table({"id": pa.array([50, 51], pa.int64()), "s": ["p", "q"]}),
        legacy,
        data_storage_version="legacy",
    )
    legacy_manifest = lance.dataset(legacy)
    legacy_file = legacy_manifest.get_fragments()[0].data_files()[0].path
    shutil.copy(legacy / "data" / legacy_file, root / "data" / legacy_file)

    def add_legacy_fragment(pb: Any) -> None:
        frag = pb.fragments.add()
        frag.CopyFrom(pb.fragments[0])
        frag.id = max(f.id for f in pb.fragments) + 1
        frag.physical_rows = 2
        del frag.files[:]
        data_file = frag.files.add()
        data_file.path = legacy_file
        data_file.fields.extend([0, 1])
        data_file.file_major_version, data_file.file_minor_version = 0, 0
        pb.max_fragment_id = frag.id

    edit_latest_manifest(root, add_legacy_fragment)
    ds = lt.dataset(root)
    assert ds.count_rows() == 32 == lance.dataset(root).count_rows()
    assert_tables_equal(ds.to_table(), lance.dataset(root).to_table())
    before = sorted(p.name for p in (root / "_versions").iterdir())
    with pytest.raises(lt.MixedFileVersionsError, match="mixture of file versions") as raised:
        ds.delete("id = 1")
    assert isinstance(raised.value, OSError)
    with pytest.raises(OSError):  # pylance refuses the commit too
        lance.dataset(root).delete("id = 1")
    assert sorted(p.name for p in (root / "_versions").iterdir()) == before
