"""A handle's row count is its version's, however often it is asked and whatever the handle
commits: the count a long-lived handle keeps is never another version's (pylance counts the same)."""

from __future__ import annotations

import lance
from conftest import make_rows

import lance_table as lt


def test_a_handle_counts_its_own_version_across_commits(tmp_path):
    uri = str(tmp_path / "t")
    lt.write_dataset(make_rows(0, 10), uri, max_rows_per_file=3)
    ds = lt.dataset(uri)
    assert ds.count_rows() == ds.count_rows() == 10
    assert ds.count_rows(filter="id >= 3") == 7 == lance.dataset(uri).count_rows(filter="id >= 3")
    other = lt.dataset(uri)
    other.delete("id < 4")  # another handle: ``ds`` stays at its version
    assert ds.count_rows() == 10
    assert other.count_rows() == 6 == lance.dataset(uri).count_rows()
    ds = lt.dataset(uri)
    assert ds.count_rows() == 6
    lt.write_dataset(make_rows(100, 5), uri, mode="append")
    assert ds.count_rows() == 6  # a handle is pinned to its version
    ds = lt.dataset(uri)
    assert ds.count_rows() == 11
    ds.delete("id >= 102")  # the handle moves to the version it commits
    assert ds.count_rows() == 8 == lance.dataset(uri).count_rows()
    ds.insert(make_rows(200, 7))
    assert ds.count_rows() == 15 == lance.dataset(uri).count_rows()
    assert ds.checkout_version(1).count_rows() == 10 == lance.dataset(uri, version=1).count_rows()
    ds.checkout_version(1).restore()
    assert lt.dataset(uri).count_rows() == 10 == lance.dataset(uri).count_rows()
