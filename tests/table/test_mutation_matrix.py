"""Every in-place operation on every data format, with and without stable row ids: one script of
operations (update, merge_insert upsert / subset / delete, delete, insert, add_columns,
alter_columns, drop_columns, truncate_table) runs with lance_table on one copy of a dataset and
with pylance on another; after each step both copies hold the same rows (with their row ids), the
same schema, and each side reads the other's."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

CASES = [
    ("legacy", False),
    ("legacy", True),
    ("2.0", False),
    ("2.0", True),
    ("2.1", False),
    ("2.1", True),
    ("2.2", False),
    ("2.2", True),
]


def _table(ids: range, tag: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "n": pa.array([i % 5 for i in ids], pa.int32()),
            "s": pa.array([None if i % 4 == 1 else f"{tag}{i}" for i in ids]),
        }
    )


Step = tuple[str, Callable[[Any, Any], object]]

STEPS: list[Step] = [
    ("update", lambda m, d: d.update({"n": "n * 10", "s": "'u'"}, where="id % 3 = 0")),
    (
        "merge_upsert",
        lambda m, d: (
            d.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(_table(range(15, 30), "m"))
        ),
    ),
    (
        "merge_subset",
        lambda m, d: (
            d.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(
                pa.table({"id": pa.array([2, 3, 40], pa.int64()), "n": pa.array([-1, -2, -3], pa.int32())})
            )
        ),
    ),
    (
        "merge_delete",
        lambda m, d: d.merge_insert("id").when_matched_delete().execute(_table(range(5, 8), "x")),
    ),
    ("delete", lambda m, d: d.delete("n = 4 OR id = 20")),
    ("insert", lambda m, d: d.insert(_table(range(50, 53), "i"))),
    ("add_columns", lambda m, d: d.add_columns({"twice": "n * 2"})),
    ("alter_rename", lambda m, d: d.alter_columns({"path": "s", "name": "text"})),
    ("alter_cast", lambda m, d: d.alter_columns({"path": "n", "data_type": pa.int64()})),
    ("drop_columns", lambda m, d: d.drop_columns(["twice"])),
    ("update_after_schema_changes", lambda m, d: d.update({"n": "n + 1"}, where="id > 20")),
    ("truncate", lambda m, d: d.truncate_table()),
    (
        "insert_after_truncate",
        lambda m, d: d.insert(_table(range(3), "t").rename_columns(["id", "n", "text"]).cast(d.schema)),
    ),
]


def _state(uri: str, stable: bool) -> pa.Table:
    theirs = lance.dataset(uri).to_table(with_row_id=stable)
    ours = lt.dataset(uri).to_table(with_row_id=stable)
    assert_tables_equal(ours, theirs, check_metadata=False)
    assert lt.dataset(uri).schema.equals(lance.dataset(uri).schema)
    return theirs.sort_by("id")


@pytest.mark.parametrize(("fmt", "stable"), CASES)
def test_every_operation_on_every_format(tmp_path, fmt, stable):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(
        _table(range(20), "a"),
        theirs,
        max_rows_per_file=7,
        data_storage_version=fmt,
        enable_stable_row_ids=stable,
    )
    shutil.copytree(theirs, ours)
    for name, step in STEPS:
        got = step(lt, lt.dataset(ours))
        want = step(lance, lance.dataset(theirs))
        if isinstance(want, dict):
            assert got == want, name
        assert_tables_equal(_state(ours, stable), _state(theirs, stable), check_metadata=False)
        assert lance.dataset(ours).version == lance.dataset(theirs).version, name
