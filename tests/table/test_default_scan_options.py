"""``dataset(..., default_scan_options=...)`` against pylance 14 on copies of one dataset: every scan
through the handle starts from those options (a scan's own option wins), and ``schema`` shows what
a scan returns."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

import lance_table as lt

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

CASES = [
    {"with_row_id": True},
    {"with_row_address": True},
    {"columns": ["b"], "filter": "a >= 5"},
    {"columns": ["a"], "limit": 3, "with_row_id": True},
]


@pytest.fixture
def copies(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(pa.table({"a": range(10), "b": range(10, 20)}), ours, max_rows_per_file=4)
    shutil.copytree(ours, theirs)
    return ours, theirs


def test_scans_start_from_the_defaults(copies):
    ours, theirs = copies
    for defaults in CASES:
        mine = lt.dataset(ours, default_scan_options=defaults)
        pl = lance.dataset(theirs, default_scan_options=defaults)
        assert mine.schema == pl.schema, defaults
        assert mine.to_table().equals(pl.to_table()), defaults
        assert mine.scanner().to_table().equals(pl.scanner().to_table()), defaults
        assert mine.to_table(columns=["a"]).equals(pl.to_table(columns=["a"])), defaults  # given wins
        assert mine.head(2).equals(pl.head(2)), defaults
        assert mine.checkout_version(1).schema == pl.checkout_version(1).schema, defaults
    assert lt.dataset(ours).schema == lance.dataset(theirs).schema  # none: the dataset's schema


def test_bad_defaults_are_refused(copies):
    ours, _ = copies
    with pytest.raises(TypeError, match="default_scan_options"):
        lt.dataset(ours, default_scan_options=["with_row_id"])
    with pytest.raises(TypeError):  # an option scans do not have, when a scan runs
        lt.dataset(ours, default_scan_options={"no_such_option": 1}).to_table()
