"""``manifest_needs_migration`` (pylance's ``lance.lance`` function) answers as pylance's on copies
of the same datasets: new ones, and ones older pylance releases wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table
from lance_table.migration import manifest_needs_migration

lance = pytest.importorskip("lance")
lance_native = pytest.importorskip("lance.lance")

pytestmark = pytest.mark.interop

_CORPUS = Path(__file__).parents[1] / "corpus" / "older_pylance"


def _same(path: str) -> bool:
    ours = manifest_needs_migration(lance_table.dataset(path))
    assert ours == lance_native.manifest_needs_migration(lance.dataset(path)), path
    return ours


def test_new_and_old_datasets_as_pylance(tmp_path: Path) -> None:
    path = str(tmp_path / "new")
    lance.write_dataset(pa.table({"x": [1, 2, 3]}), path)
    lance_table.dataset(path).delete("x = 2")  # a deletion file written by lance_table
    assert not _same(path)
    for old in ["0.10.18/legacy", "0.25.2/v2_1"]:
        copy = tmp_path / old.replace("/", "_")
        shutil.copytree(_CORPUS / old, copy)
        assert not _same(str(copy))


def test_not_a_dataset() -> None:
    with pytest.raises(TypeError, match="takes a dataset"):
        manifest_needs_migration("memory://x")
