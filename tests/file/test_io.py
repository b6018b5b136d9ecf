"""Reads fetch only the byte ranges they need, coalescing neighbours."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

from lance_table.file import BytesSource, write_table
from lance_table.file.container import unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.storage.ranges import coalesce


class CountingSource(BytesSource):
    def __init__(self, data: bytes) -> None:
        super().__init__(data, name="counting")
        self.requests: list[list[tuple[int, int]]] = []

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        self.requests.append(list(ranges))
        return super().read_ranges(ranges)

    @property
    def bytes_read(self) -> int:
        return sum(n for req in self.requests for _, n in req)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    n = 200_000
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "x": pa.array(rng.random(n)),
            "s": pa.array([f"text-{i:08d}" for i in range(n)]),
            "l": pa.array([[i] * (i % 4) for i in range(n)], pa.list_(pa.int64())),
        }
    )
    path = tmp_path_factory.mktemp("io") / "big.lance"
    write_table(path, table, page_size_bytes=256 * 1024)
    return path.read_bytes(), table


def _open(data):
    src = CountingSource(data)
    reader = LanceFileReader(src)
    src.requests.clear()
    return src, reader


def _page_ranges(reader, column):
    col = reader.metadata.columns[column]
    return [(o, s) for p in col.pages for o, s in zip(p.buffer_offsets, p.buffer_sizes)]


def test_projection_fetches_only_that_column(big):
    data, table = big
    src, reader = _open(data)
    got = reader.read_all(columns=["x"])
    assert_tables_equal(got, table.select(["x"]))
    x_ranges = set(_page_ranges(reader, 1))
    fetched = {r for req in src.requests for r in req}
    assert fetched <= x_ranges
    assert src.bytes_read == sum(s for _, s in x_ranges)


def test_take_fetches_a_tiny_fraction(big):
    data, table = big
    src, reader = _open(data)
    idx = np.random.default_rng(1).integers(0, table.num_rows, 20)
    assert_tables_equal(reader.take(idx), table.take(pa.array(idx)))
    # 20 rows of 4 columns; each needs a few dozen bytes (plus the item values of its list)
    assert src.bytes_read < 20 * 4 * 64
    assert src.bytes_read < len(data) / 1000


def test_range_fetches_only_its_rows(big):
    data, table = big
    src, reader = _open(data)
    got = reader.read_range(100_000, 100_100, columns=["id", "s"])
    assert_tables_equal(got, table.select(["id", "s"]).slice(100_000, 100))
    # 100 int64 + 100 offsets (+1) + ~1.3 KB of string bytes
    assert src.bytes_read < 100 * 8 + 101 * 8 + 100 * 13 + 64


def test_coalesce_merges_near_ranges_and_keeps_order():
    merged, which, inner = coalesce([(1000, 10), (0, 10), (20, 5), (10_000_000, 4)], gap=100)
    assert merged == [(0, 25), (1000, 10), (10_000_000, 4)]
    assert which.tolist() == [1, 0, 0, 2]
    assert inner.tolist() == [0, 0, 20, 0]


def test_coalesced_reads_return_each_range(big):
    data, _ = big
    src = BytesSource(data)
    ranges = [(5, 3), (0, 10), (1_000, 1), (7, 0)]
    assert [bytes(b) for b in src.read_ranges(ranges)] == [data[o : o + n] for o, n in ranges]


def test_a_take_reads_the_chunk_tables_of_all_its_pages_in_one_request(tmp_path):
    """2.2 mini-block pages read in part need their chunk table, dictionary and repetition index
    before their chunks: a take fetches those of every page it touches, of every column, at once."""
    n = 60_000
    rng = np.random.default_rng(4)
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "cat": pa.array(rng.choice(["red", "green", "blue"], n)),
            "tags": pa.array([[f"t{i % 7}"] * (i % 3) for i in range(n)], pa.list_(pa.string())),
        }
    )
    path = tmp_path / "pages.lance"
    write_table(path, table, version="2.2", page_size_bytes=64 * 1024)
    src, reader = _open(path.read_bytes())
    small = {}
    for c, col in enumerate(reader.metadata.columns):
        for p, page in enumerate(col.pages):
            layout = unpack_encoding(page.encoding, src, "page")[1].mini_block_layout
            wanted = (
                [0]
                + [2] * layout.HasField("dictionary")
                + [len(page.buffer_offsets) - 1] * bool(layout.repetition_index_depth)
            )
            small[(c, p)] = {(int(page.buffer_offsets[k]), int(page.buffer_sizes[k])) for k in wanted}
    assert sum(len(col.pages) for col in reader.metadata.columns) >= 6
    idx = np.sort(rng.choice(n, 40, replace=False))
    assert_tables_equal(reader.take(idx), table.take(pa.array(idx)))
    holding = [k for k, req in enumerate(src.requests) if set(req) & set().union(*small.values())]
    assert len(holding) == 1
    touched = [key for key, ranges in small.items() if ranges <= set(src.requests[holding[0]])]
    assert len(touched) >= 6


class _RemoteLike:
    """A byte source that is not in memory (as a remote file's), counting its requests."""

    def __init__(self, data: bytes) -> None:
        self._inner = BytesSource(data, name="remote-like")
        self.requests = 0

    @property
    def name(self) -> str:
        return self._inner.name

    def size(self) -> int:
        return self._inner.size()

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        self.requests += 1
        return self._inner.read_ranges(ranges)


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_a_small_file_is_read_whole_when_opened_for_the_first_read(tmp_path, version):
    from lance_table.table.readers import reader_weight

    table = pa.table({"id": np.arange(300), "s": [f"v{i}" for i in range(300)]})
    write_table(tmp_path / "small.lance", table, version=version)
    src = _RemoteLike((tmp_path / "small.lance").read_bytes())
    reader = LanceFileReader(src)
    assert src.requests == 1 and reader.held_bytes == src.size()
    assert reader_weight(reader) >= src.size()
    assert reader.read_all().equals(table)
    assert src.requests == 1
    assert reader.take([5, 299, 0]).equals(table.take([5, 299, 0]))
    assert src.requests > 1  # later reads go to the file (which may have been deleted since)


def test_a_large_file_is_not_kept(big):
    src = _RemoteLike(big[0])
    reader = LanceFileReader(src)
    assert reader.held_bytes == 0
    reader.read_all(columns=["id"])
    assert src.requests > 1


def test_a_take_from_a_small_remote_file_is_one_request(tmp_path):
    """The pages a take reads in part come with the rest when all are small: one request, not
    one per column after its chunk table."""
    n = 20_000  # pages of several chunks, read in part by a take
    table = pa.table({"id": np.arange(n), "x": np.arange(n) * 0.5, "s": [f"v{i}" for i in range(n)]})
    write_table(tmp_path / "small.lance", table, version="2.2")
    reader = LanceFileReader(_RemoteLike((tmp_path / "small.lance").read_bytes()))
    reader.read_all()
    src = reader._source
    before = src.requests
    assert reader.take([3, 9_000, 19_997]).equals(table.take([3, 9_000, 19_997]))
    assert src.requests - before == 1


def test_ranges_are_gathered_from_their_spans_as_sliced_one_by_one(monkeypatch):
    # spans_of + gather (a remote take's many small ranges): the spans hold every range, lie more
    # than the gap apart, and the gathered bytes are the ranges' one after another, for ranges in
    # any order, overlapping, empty, small (numpy picks, over several blocks) and large (copies)
    from lance_table.storage import ranges as sources

    monkeypatch.setattr(sources, "GATHER_BLOCK", 1000)  # several blocks of picks
    rng = np.random.default_rng(8)
    blob = rng.integers(0, 256, 200_000, dtype=np.uint8).tobytes()
    cases = [
        [(7 + 40 * k, 9) for k in range(500)],  # a take's values: small, close, in order
        [(int(o), int(n)) for o, n in zip(rng.integers(0, 190_000, 300), rng.integers(0, 60, 300))],
        [(100, 20), (100, 20), (110, 30), (5, 0), (150_000, 7)],  # repeated, overlapping, empty
        [(int(o), 5000) for o in rng.integers(0, 190_000, 20)],  # large ranges: copied one by one
        [(50, 10), (60, 10), (70, 10)],  # ranges that follow one another: a slice of the spans
        [(1000, 300_000 // 3)],
    ]
    for gap in (0, 64, 4096):
        for ranges in cases:
            arr = np.array(ranges, np.int64)
            spans, inside = sources.spans_of(arr, gap)
            assert sources.apart(spans, gap)
            assert np.all(spans[1:, 0] > spans[:-1, 0] + spans[:-1, 1] + gap)
            data = b"".join(blob[o : o + n] for o, n in spans.tolist())
            got = sources.gather(memoryview(data), inside, arr[:, 1])
            assert bytes(got) == b"".join(blob[o : o + n] for o, n in ranges)
    assert bytes(sources.gather(memoryview(b"xyz"), np.zeros(0, np.int64), np.zeros(0, np.int64))) == b""


def test_a_thread_gives_freed_memory_back_after_pages_of_some_megabytes_not_after_each(tmp_path, monkeypatch):
    # decoding a page of a MiB or more counts its bytes; Arrow's pool is asked to give back what
    # the thread freed once those add up to RELEASE_BYTES (a whole-table read's scratch stays
    # bounded), not after every page (each next read would fault that memory in again)
    import threading

    import lance

    from lance_table.file import pageio

    n = 300_000
    data = pa.table({"x": pa.array(np.random.default_rng(2).random(n))})  # one page of ~2.4 MB
    lance.write_dataset(data, tmp_path / "d", data_storage_version="2.2")
    (path,) = (tmp_path / "d" / "data").iterdir()
    reader = LanceFileReader(path.read_bytes())
    released: list[int] = []

    class Pool:
        def release_unused(self) -> None:
            released.append(1)

    monkeypatch.setattr(pageio.pa, "default_memory_pool", Pool)
    monkeypatch.setattr(pageio, "_DECODED", threading.local())
    page = sum(reader.metadata.columns[0].pages[0].buffer_sizes)
    assert pageio.COUNTED_PAGE_BYTES <= page < pageio.RELEASE_BYTES
    reads = 12
    for _ in range(reads):
        assert reader.read_all().equals(data)
    per = -(-pageio.RELEASE_BYTES // page)  # pages a release
    assert len(released) == reads // per
    released.clear()
    reader.read_range(5, 15)  # a small read: its bytes are not counted
    assert len(released) == 0
