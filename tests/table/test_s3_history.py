"""A long history on S3: opening and committing list only the newest versions (V2 manifest names
sort newest first, and S3 lists in order), a page at a time; no test here measures time."""

from __future__ import annotations

import urllib.parse

import lance
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.table import versions

pytestmark = [pytest.mark.s3, pytest.mark.interop]


def _rows(start: int, n: int = 3) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _page_sizes(queries: list[str]) -> list[int]:
    return [int(urllib.parse.parse_qs(q)["max-keys"][0]) for q in queries]


def test_open_and_append_list_one_short_page(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    lt.write_dataset(_rows(0), s3_uri, storage_options=s3_options)
    for i in range(1, 4):
        lt.write_dataset(_rows(3 * i), s3_uri, mode="append", storage_options=s3_options)
    s3_requests.reset()
    ds = lt.dataset(s3_uri, storage_options=s3_options)
    assert ds.version == 4
    assert s3_requests.counts == {"LIST": 1, "GET": 1}
    assert _page_sizes(s3_requests.list_queries) == [versions.LATEST_PAGE]  # not the whole history
    s3_requests.reset()
    lt.write_dataset(_rows(100), s3_uri, mode="append", storage_options=s3_options)
    # the open of the latest version and the commit's look for newer ones: a short page each
    assert _page_sizes(s3_requests.list_queries) == [versions.LATEST_PAGE, versions.NEWER_PAGE]
    expected = pa.concat_tables([_rows(3 * i) for i in range(4)] + [_rows(100)])
    assert lance.dataset(s3_uri, storage_options=s3_options).to_table().equals(expected)


def test_a_commit_rebases_over_newer_versions_past_the_first_page(  # type: ignore[no-untyped-def]
    s3_uri, s3_options, monkeypatch
):
    monkeypatch.setattr(versions, "NEWER_PAGE", 2)
    lt.write_dataset(_rows(0, 10), s3_uri, storage_options=s3_options, max_rows_per_file=5)
    stale = lt.dataset(s3_uri, storage_options=s3_options)
    for i in range(3):  # another writer's versions 2..4: two pages of names to read
        lt.write_dataset(_rows(100 + 10 * i), s3_uri, mode="append", storage_options=s3_options)
    assert [e.version for e in versions.list_versions(stale._storage, after=1)] == [2, 3, 4]
    stale.delete("id = 7")  # rebased over all three appends
    ours = lt.dataset(s3_uri, storage_options=s3_options)
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    assert ours.version == theirs.version == 5
    assert ours.to_table().equals(theirs.to_table())
    assert ours.count_rows() == 10 + 3 * 3 - 1


def test_cleanup_removes_old_files_in_bulk_requests(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    import datetime as dt

    lt.write_dataset(_rows(0), s3_uri, storage_options=s3_options)
    for i in range(1, 4):
        lt.write_dataset(_rows(3 * i), s3_uri, mode="append", storage_options=s3_options)
    lt.dataset(s3_uri, storage_options=s3_options).delete("id = 1")
    s3_requests.reset()
    stats = lt.dataset(s3_uri, storage_options=s3_options).cleanup_old_versions(older_than=dt.timedelta(0))
    # four manifests and their transaction files go, in DeleteObjects requests: none one by one
    assert stats.old_versions == 4 and stats.transaction_files_removed == 4
    assert s3_requests.counts["DELETE"] == 0
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    assert [v["version"] for v in theirs.versions()] == [5]
    assert theirs.to_table().equals(lt.dataset(s3_uri, storage_options=s3_options).to_table())
    listed = lt.dataset(s3_uri, storage_options=s3_options)._storage.list_tree("_transactions")
    assert len(listed) == 1
