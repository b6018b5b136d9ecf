"""add_columns and merge on a history of small fragments: runs of small fragments are read and
computed as groups (one read, one evaluation), each fragment still getting a data file of its own.
pylance is the oracle: it reads the new columns in full and keeps writing, on histories written by
either library (2.0 and 2.2, with deletions); the files are the bytes fragment-by-fragment writing
makes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_table as lt
from lance_table.errors import SchemaChangeError
from lance_table.table.operations import schema_add
from tests.helpers import assert_tables_equal
from tests.table.conftest import _clear_caches, make_rows

# small fragments around one too large to be grouped (it is computed on its own)
SIZES = [60] * 9 + [schema_add.SMALL_FRAGMENT_ROWS + 100] + [40] * 7


def _build(uri: str, writer: str, version: str) -> None:
    lib: Any = lt if writer == "lance_table" else lance
    start = 0
    for i, n in enumerate(SIZES):
        mode = "append" if i else "create"
        lib.write_dataset(make_rows(start, n), uri, mode=mode, data_storage_version=version)
        start += n
    # deletions in most fragments, all but one row of the second
    lib.dataset(uri).delete("id % 7 = 3 OR (id >= 61 AND id < 119)")


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    root = tmp_path_factory.mktemp("histories")
    out = {}
    for writer in ("lance_table", "pylance"):
        for version in ("2.0", "2.2"):
            uri = str(root / f"{writer}-{version}")
            _build(uri, writer, version)
            out[writer, version] = uri
    return out


def _copy(src: str, dst: Path) -> str:
    _clear_caches()
    shutil.copytree(src, dst)
    return str(dst)


def _udf(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch([pc.add(pc.multiply(batch.column("id"), 2), batch.column("x"))], ["y"])


def _keyed() -> pa.Table:
    ids = np.arange(0, sum(SIZES) + 50, 3, dtype=np.int64)  # every third id, and some unknown ones
    return pa.table({"id": ids, "y": pa.array([f"v{i}" for i in ids.tolist()])})


def _apply(lib: Any, uri: str, how: str) -> None:
    ds = lib.dataset(uri)
    if how == "sql":
        ds.add_columns({"y": "id * 2 + x", "z": "concat(s, '!')"})
    elif how == "udf":
        ds.add_columns(_udf, read_columns=["id", "x"])
    elif how == "aligned":  # data aligned with the live rows
        ds.add_columns(pa.table({"w": np.arange(ds.count_rows(), dtype=np.int32)}))
    else:
        ds.merge(_keyed(), left_on="id")


@pytest.mark.parametrize("how", ["sql", "udf", "merge", "aligned"])
@pytest.mark.parametrize("version", ["2.0", "2.2"])
@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_new_columns_as_pylance_writes_them(
    histories: dict[tuple[str, str], str], tmp_path: Path, writer: str, version: str, how: str
) -> None:
    ours = _copy(histories[writer, version], tmp_path / "ours")
    theirs = _copy(histories[writer, version], tmp_path / "theirs")
    _apply(lt, ours, how)
    _apply(lance, theirs, how)
    expected = lance.dataset(theirs).to_table()
    assert_tables_equal(lance.dataset(ours).to_table(), expected)
    assert_tables_equal(lt.dataset(ours).to_table(), expected)
    # a fragment's file of new columns holds every physical row, deleted ones too
    frags = lance.dataset(ours).get_fragments()
    assert len(frags) == len(SIZES) and [f.physical_rows for f in frags] == SIZES
    # pylance keeps writing: an append with the new columns, then a delete
    more = lance.dataset(ours).to_table(limit=10)
    lance.write_dataset(more, ours, mode="append")
    lance.dataset(ours).delete("id = 5")
    got = lance.dataset(ours).to_table()
    assert got.num_rows == expected.num_rows + 10 - 2
    assert_tables_equal(lt.dataset(ours).to_table(), got)


@pytest.mark.parametrize("how", ["sql", "udf", "merge", "aligned"])
@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_group_files_are_the_bytes_of_fragment_by_fragment_writes(
    histories: dict[tuple[str, str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    version: str,
    how: str,
) -> None:
    grouped = _copy(histories["pylance", version], tmp_path / "grouped")
    alone = _copy(histories["pylance", version], tmp_path / "alone")
    # groups of a few fragments (some cut by the rows bound, then by the large fragment)
    monkeypatch.setattr(schema_add, "GROUP_ROWS", 200)
    _apply(lt, grouped, how)
    monkeypatch.setattr(schema_add, "SMALL_FRAGMENT_ROWS", 0)  # every fragment on its own
    _apply(lt, alone, how)

    def new_files(uri: str) -> list[bytes]:
        frags = lt.dataset(uri).get_fragments()
        return [Path(uri, "data", f.data_files()[-1].path).read_bytes() for f in frags]

    assert new_files(grouped) == new_files(alone)
    assert_tables_equal(lt.dataset(grouped).to_table(), lt.dataset(alone).to_table())


def test_udf_is_called_with_each_fragments_live_rows(
    histories: dict[tuple[str, str], str], tmp_path: Path
) -> None:
    uri = _copy(histories["lance_table", "2.2"], tmp_path / "ds")
    seen: list[pa.RecordBatch] = []

    def udf(batch: pa.RecordBatch) -> pa.RecordBatch:
        seen.append(batch)
        return pa.record_batch([batch.column("_rowaddr")], ["addr"])

    lt.dataset(uri).add_columns(udf, read_columns=["id", "_rowaddr"])
    ds = lance.dataset(uri)
    got = ds.to_table(columns=["id", "addr"], with_row_address=True)
    assert got.column("addr").to_pylist() == got.column("_rowaddr").to_pylist()
    # (the first call learns the output schema) each batch of one fragment, each small fragment's
    # live rows in one batch, the large one's in batches of 1024 physical rows
    calls = [b.column("_rowaddr").to_numpy() for b in seen[1:]]
    assert np.concatenate(calls).tolist() == got.column("_rowaddr").to_pylist()
    frags = [int(c[0]) >> 32 for c in calls]
    assert all(np.all(c >> 32 == f) for c, f in zip(calls, frags))
    big = ds.get_fragments()[SIZES.index(max(SIZES))].fragment_id
    ids = [f.fragment_id for f in ds.get_fragments()]
    assert [f for f in frags if f != big] == [f for f in ids if f != big]
    assert frags.count(big) == -(-max(SIZES) // schema_add.DEFAULT_UDF_BATCH_ROWS)


def test_a_udf_giving_wrong_rows_in_a_group_names_its_fragment(
    histories: dict[tuple[str, str], str], tmp_path: Path
) -> None:
    uri = _copy(histories["lance_table", "2.2"], tmp_path / "ds")
    before = sorted(p.name for p in Path(uri, "data").iterdir())
    version = lt.dataset(uri).version
    calls = []

    def udf(batch: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(batch.num_rows)
        ids = batch.column("id")
        # the fourth fragment's batch is one row short
        return pa.record_batch([ids.slice(1) if len(calls) == 5 else ids], ["y"])

    third = lt.dataset(uri).get_fragments()[3].fragment_id
    with pytest.raises(SchemaChangeError, match=f"fragment {third}$"):
        lt.dataset(uri).add_columns(udf, read_columns=["id"])
    assert lt.dataset(uri).version == version
    assert sorted(p.name for p in Path(uri, "data").iterdir()) == before


def test_an_expression_reading_no_column(histories: dict[tuple[str, str], str], tmp_path: Path) -> None:
    """A SQL expression reading no column, on groups: a value for every row."""
    ours = _copy(histories["pylance", "2.2"], tmp_path / "ours")
    theirs = _copy(histories["pylance", "2.2"], tmp_path / "theirs")
    lt.dataset(ours).add_columns({"one": "1"})
    lance.dataset(theirs).add_columns({"one": "1"})
    assert_tables_equal(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())
