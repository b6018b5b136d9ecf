"""Small behaviours of pylance 14 that ported code relies on, run on both libraries: ``len(ds)``,
the error types of an append with other fields and of an empty ``LanceFragment.create``, and an
Overwrite committed with ``max_retries=0`` over a newer version."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import AppendSchemaError, EmptyDataError

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

TABLE = pa.table({"a": list(range(10)), "b": list(range(10))})


@pytest.mark.parametrize("lib", [lt, lance], ids=["lance_table", "pylance"])
def test_len_append_and_empty_fragments(tmp_path, lib):
    ds = lib.write_dataset(TABLE, str(tmp_path / "ds"), max_rows_per_file=4)
    ds.delete("a < 3")
    assert len(ds) == 7 and bool(lib.dataset(str(tmp_path / "ds")))
    with pytest.raises(OSError):
        lib.write_dataset(pa.table({"other": [1], "b": [2]}), ds, mode="append")
    with pytest.raises(OSError):
        lib.fragment.LanceFragment.create(str(tmp_path / "frag"), pa.table({"a": pa.array([], pa.int64())}))
    assert lib.dataset(str(tmp_path / "ds")).count_rows() == 7


def test_our_errors_are_typed(tmp_path):
    ds = lt.write_dataset(TABLE, str(tmp_path / "ds"))
    with pytest.raises(AppendSchemaError, match="unexpected=\\['other'\\]"):
        lt.write_dataset(pa.table({"other": [1], "b": [2]}), ds, mode="append")
    with pytest.raises(EmptyDataError):  # (a ValueError too, as before)
        lt.fragment.LanceFragment.create(str(tmp_path / "frag"), pa.table({"a": pa.array([], pa.int64())}))


@pytest.mark.parametrize("lib", [lt, lance], ids=["lance_table", "pylance"])
def test_overwrite_without_retries_over_a_newer_version(tmp_path, lib):
    uri = str(tmp_path / "ds")
    fragment = lib.fragment.LanceFragment.create(uri, TABLE)
    overwrite = lib.LanceOperation.Overwrite(TABLE.schema, [fragment])
    first = lib.LanceDataset.commit(uri, overwrite, max_retries=0)
    lib.LanceDataset.commit(uri, overwrite, read_version=first.version, max_retries=0)
    with pytest.raises(OSError, match=f"Commit conflict for version {first.version + 1}"):
        lib.LanceDataset.commit(uri, overwrite, read_version=first.version, max_retries=0)
    # an Append is rebased over a newer delete whatever the retries
    lib.dataset(uri).delete("a < 5")
    append = lib.LanceOperation.Append([lib.fragment.LanceFragment.create(uri, TABLE)])
    assert lib.LanceDataset.commit(uri, append, read_version=2, max_retries=0).version == 4
    assert lib.dataset(uri).count_rows() == 15


@pytest.mark.parametrize("lib", [lt, lance], ids=["lance_table", "pylance"])
def test_a_fragment_of_rows_without_columns_is_refused(tmp_path, lib):
    """A frame of rows with no columns writes nothing: an OSError in both libraries."""
    pd = pytest.importorskip("pandas")
    for frame in (pd.DataFrame([]), pd.DataFrame([{}])):
        with pytest.raises(OSError):
            lib.fragment.LanceFragment.create(str(tmp_path / "frag"), frame)
    assert not (tmp_path / "frag" / "data").exists() or not any((tmp_path / "frag" / "data").iterdir())
