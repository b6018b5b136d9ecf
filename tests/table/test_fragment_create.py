"""``LanceFragment.create`` and ``ColumnOrdering`` as pylance has them, compared with pylance."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import lance_table
from lance_table.errors import SchemaError, UnsupportedOptionError

lance = pytest.importorskip("lance")
from lance.dataset import ColumnOrdering  # noqa: E402  (pylance's, after the skip)

TABLE = pa.table({"id": pa.array(range(10), pa.int64()), "s": [f"v{i}" for i in range(10)]})


def test_create_then_commit_both_ways(tmp_path) -> None:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for lib, uri in ((lance_table, ours), (lance, theirs)):
        meta = lib.LanceFragment.create(uri, TABLE, fragment_id=3)
        assert meta.id == 3 and meta.physical_rows == 10 and len(meta.files) == 1
        op = lib.LanceOperation.Overwrite(TABLE.schema, [meta])
        lib.LanceDataset.commit(uri, op)
    # each library reads what the other made
    assert lance.dataset(ours).to_table().equals(TABLE)
    assert lance_table.dataset(theirs).to_table().equals(TABLE)
    assert [f.fragment_id for f in lance.dataset(ours).get_fragments()] == [3]
    # an appended fragment, created by one library and committed by the other
    more = pa.table({"id": pa.array([10, 11], pa.int64()), "s": ["a", "b"]})
    meta = lance_table.LanceFragment.create(theirs, more)
    version = lance.dataset(theirs).version
    pylance_meta = lance.FragmentMetadata.from_json(json.dumps(meta.to_json()))
    lance.LanceDataset.commit(theirs, lance.LanceOperation.Append([pylance_meta]), read_version=version)
    assert lance_table.dataset(theirs).to_table().equals(pa.concat_tables([TABLE, more]))


def test_create_checks_like_pylance(tmp_path) -> None:
    uri = str(tmp_path / "ds")
    lance_table.write_dataset(TABLE, uri)
    with pytest.raises(SchemaError):
        lance_table.LanceFragment.create(uri, pa.table({"other": [1]}))
    with pytest.raises(ValueError, match="fragment_id"):
        lance_table.LanceFragment.create(uri, TABLE, fragment_id=-1)
    with pytest.raises(UnsupportedOptionError, match="table_id"):
        lance_table.LanceFragment.create(uri, TABLE, table_id=["t"])
    assert len(lance_table.dataset(uri).versions()) == 1  # nothing committed


def test_column_ordering_sorts_as_pylance(tmp_path) -> None:
    data = pa.table({"k": [3, None, 1, 2, None], "v": ["a", "b", "c", "d", "e"]})
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_table.write_dataset(data, ours)
    lance.write_dataset(data, theirs)
    for ascending in (True, False):
        for nulls_first in (True, False):
            got = lance_table.dataset(ours).to_table(
                order_by=[lance_table.ColumnOrdering("k", ascending, nulls_first)]
            )
            want = lance.dataset(theirs).to_table(order_by=[ColumnOrdering("k", ascending, nulls_first)])
            assert got.equals(want), (ascending, nulls_first)
