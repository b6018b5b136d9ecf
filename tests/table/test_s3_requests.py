"""How many requests dataset operations send to S3 (counted in the test server), and that reads of
many files are sent at once (the server holds requests until the expected number is in flight, so
the count does not depend on the machine's load). Results are compared with pylance's; no test here
measures time."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table._parallel import workers
from lance_table.table.readers import READERS

pytestmark = [pytest.mark.s3, pytest.mark.interop]

FRAGMENTS = 24
ROWS_PER_FRAGMENT = 50


def _table(rows: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "x": rng.random(rows),
            "s": pa.array([f"value-{i % 37}" for i in range(rows)]),
        }
    )


@pytest.fixture(params=["2.0", "2.2"])
def small_fragments(request, s3_uri, s3_options) -> tuple[str, pa.Table]:  # type: ignore[no-untyped-def]
    """A dataset of FRAGMENTS small fragments, written by pylance."""
    data = _table(FRAGMENTS * ROWS_PER_FRAGMENT)
    lance.write_dataset(
        data,
        s3_uri,
        storage_options=s3_options,
        max_rows_per_file=ROWS_PER_FRAGMENT,
        data_storage_version=request.param,
    )
    READERS.clear()
    return s3_uri, data


def test_open_lists_once_and_reads_the_manifest_with_one_get(small_fragments, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    uri, data = small_fragments
    s3_requests.reset()
    ds = lt.dataset(uri, storage_options=s3_options)
    assert ds.count_rows() == data.num_rows
    assert s3_requests.counts == {"LIST": 1, "GET": 1}  # no HEAD: the listing gives what is needed


def test_full_scan_of_small_fragments_reads_each_file_once(small_fragments, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    uri, data = small_fragments
    ds = lt.dataset(uri, storage_options=s3_options)
    s3_requests.reset()
    assert ds.to_table().equals(data)
    assert s3_requests.counts == {"GET": FRAGMENTS}  # footer and data in one request a file
    s3_requests.reset()
    assert ds.to_table(columns=["x"]).equals(data.select(["x"]))
    assert s3_requests.counts == {"GET": FRAGMENTS}  # the footers are cached: one request a file
    theirs = lance.dataset(uri, storage_options=s3_options)
    assert ds.to_table().equals(theirs.to_table())


def test_reads_of_many_files_are_in_flight_at_once(small_fragments, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    uri, data = small_fragments
    ds = lt.dataset(uri, storage_options=s3_options)
    s3_requests.reset()
    s3_requests.hold_until(2 * workers() + 1)  # reached only if that many are sent at once
    assert ds.to_table().equals(data)
    # more than one thread per worker waits on the store, however few cores there are
    assert s3_requests.most_in_flight > 2 * workers()


def test_take_reads_each_touched_small_file_once(small_fragments, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    uri, data = small_fragments
    ds = lt.dataset(uri, storage_options=s3_options)
    idx = np.array([3, 70, 71, 500, 1111, 1199])
    touched = len(set((idx // ROWS_PER_FRAGMENT).tolist()))
    s3_requests.reset()
    assert ds.take(idx).equals(data.take(pa.array(idx)))
    assert s3_requests.counts == {"GET": touched}
    assert ds.take(idx).equals(lance.dataset(uri, storage_options=s3_options).take(idx))


def test_delete_sends_no_head_and_writes_deletion_files_at_once(small_fragments, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    uri, data = small_fragments
    ds = lt.dataset(uri, storage_options=s3_options)
    ds.delete("id % 10 = 0")  # a deletion file for every fragment
    READERS.clear()
    s3_requests.reset()
    ds = lt.dataset(uri, storage_options=s3_options)
    ds.delete("id % 10 = 1")
    assert "HEAD" not in s3_requests.counts
    # one GET a data file and a deletion file, the manifest's
    assert s3_requests.counts["GET"] <= 2 * FRAGMENTS + 1
    assert s3_requests.counts["PUT"] <= FRAGMENTS + 2  # deletion files, transaction, manifest
    expected = data.filter(pa.array(np.arange(data.num_rows) % 10 > 1))
    assert ds.to_table().equals(expected)
    assert lance.dataset(uri, storage_options=s3_options).to_table().equals(expected)


def test_scan_of_one_large_file_reads_few_ranges(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    data = _table(200_000, seed=4)
    lance.write_dataset(data, s3_uri, storage_options=s3_options)
    READERS.clear()
    s3_requests.reset()
    ds = lt.dataset(uri := s3_uri, storage_options=s3_options)
    assert ds.to_table(columns=["x"]).equals(data.select(["x"]))
    # listing, manifest, footer, then the column's pages: one request per range a worker decodes
    assert s3_requests.counts["LIST"] == 1 and "HEAD" not in s3_requests.counts
    assert s3_requests.counts["GET"] <= 2 + workers()
    s3_requests.reset()
    s3_requests.hold_until(3)
    whole = ds.to_table()
    # every column's pages are asked for at once, not a worker's page after another
    assert s3_requests.most_in_flight >= 3
    assert whole.equals(lance.dataset(uri, storage_options=s3_options).to_table())


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_stream_of_a_large_file_asks_what_a_scan_asks(version, s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    # more rows than a local stream reads at a time (READ_CHUNK_ROWS): on a remote store a
    # stream reads them in a whole-table scan's ranges, not in two ranges of requests of their own
    data = _table(300_000, seed=5)
    lance.write_dataset(data, s3_uri, storage_options=s3_options, data_storage_version=version)
    READERS.clear()
    ds = lt.dataset(s3_uri, storage_options=s3_options)
    assert ds.to_table().equals(data)  # (the footer is cached from here on)
    s3_requests.reset()
    assert ds.to_table().equals(data)
    whole = s3_requests.counts["GET"]
    s3_requests.reset()
    streamed = pa.Table.from_batches(list(ds.to_batches()), schema=data.schema)
    assert s3_requests.counts == {"GET": whole}
    assert streamed.equals(data)
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    assert pa.Table.from_batches(list(theirs.to_batches()), schema=data.schema).equals(streamed)


def test_a_cold_take_opens_the_touched_files_at_once(small_fragments, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    uri, data = small_fragments
    idx = np.arange(0, FRAGMENTS * ROWS_PER_FRAGMENT, ROWS_PER_FRAGMENT)  # a row of every fragment
    ds = lt.dataset(uri, storage_options=s3_options)
    READERS.clear()
    s3_requests.reset()
    s3_requests.hold_until(2 * workers() + 1)
    assert ds.take(idx).equals(data.take(pa.array(idx)))
    assert s3_requests.counts == {"GET": FRAGMENTS}
    assert s3_requests.most_in_flight > 2 * workers()  # not one file's request after another's


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_take_from_a_large_file_asks_for_its_pages_at_once(version, s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    rows = 40_000
    rng = np.random.default_rng(5)
    data = pa.table({f"c{k}": rng.random(rows) for k in range(6)})  # ~2 MB: no page is fetched whole
    lance.write_dataset(data, s3_uri, storage_options=s3_options, data_storage_version=version)
    READERS.clear()
    ds = lt.dataset(s3_uri, storage_options=s3_options)
    idx = np.sort(rng.choice(rows, 200, replace=False))
    ds.take(idx[:1])  # the file's footer is read
    s3_requests.reset()
    got = ds.take(idx)
    ours = dict(s3_requests.counts)
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    theirs.take(idx[:1])
    s3_requests.reset()
    assert got.equals(theirs.take(idx))
    assert got.equals(data.take(pa.array(idx)))
    # every column's rows are asked for at once, not a column's ranges after another's: the
    # columns lie one after another, so their ranges go out as one coalesced request
    assert ours == {"GET": 1}
    assert ours["GET"] <= s3_requests.counts["GET"]  # no more than pylance sends


def test_delete_lists_versions_once_as_pylance(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    data = _table(2_000)
    lists = {}
    for name, write, open_ in (
        ("ours", lt.write_dataset, lt.dataset),
        ("theirs", lance.write_dataset, lance.dataset),
    ):
        uri = f"{s3_uri}/{name}"
        write(data, uri, storage_options=s3_options)
        ds = open_(uri, storage_options=s3_options)
        s3_requests.reset()
        ds.delete("id % 100 = 0")
        lists[name] = s3_requests.counts["LIST"]
    # the commit's listing of the versions since the handle's (no other before the files are written)
    assert lists == {"ours": 1, "theirs": 1}
    expected = data.filter(pa.array(np.arange(data.num_rows) % 100 > 0))
    for name in ("ours", "theirs"):
        assert lt.dataset(f"{s3_uri}/{name}", storage_options=s3_options).to_table().equals(expected)
        assert lance.dataset(f"{s3_uri}/{name}", storage_options=s3_options).to_table().equals(expected)


def test_append_puts_what_pylance_puts(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    data = _table(100)
    puts = {}
    for name, write in (("ours", lt.write_dataset), ("theirs", lance.write_dataset)):
        uri = f"{s3_uri}/{name}"
        write(data, uri, storage_options=s3_options)
        s3_requests.reset()
        write(data, uri, mode="append", storage_options=s3_options)
        puts[name] = s3_requests.counts["PUT"]
    # the data file, the transaction, the manifest: no version hint on an object store, which
    # pylance neither writes nor reads there
    assert puts == {"ours": 3, "theirs": 3}
    ours = f"{s3_uri}/ours"
    storage = lt.dataset(ours, storage_options=s3_options)._storage
    assert "latest_version_hint.json" not in storage.list_names("_versions")
    expected = pa.concat_tables([data, data])
    assert lance.dataset(ours, storage_options=s3_options).to_table().equals(expected)
    assert lt.dataset(ours, storage_options=s3_options).to_table().equals(expected)
