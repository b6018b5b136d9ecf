"""Taking a few rows of 2.1/2.2 pages decodes only those values where the encoding allows it.

Flat values, fixed-size lists of flat values, inline FastLanes bitpacking (and the dictionary
indices stored that way) and general-compressed variable-width values are picked value by value
from their chunks. These tests take scattered rows of multi-chunk pages written by us and by
pylance and compare them with the data, and check that the picking path really ran.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal, write_file

from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import batch, byteranges

pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

ROWS = 20_000


def _table() -> pa.Table:
    rng = np.random.default_rng(11)
    words = np.array([f"word-{i:03d}" for i in range(50)], dtype=object)
    letters = rng.integers(ord("a"), ord("z") + 1, ROWS * 12, dtype=np.uint8)
    text = pa.Array.from_buffers(
        pa.string(),
        ROWS,
        [
            None,
            pa.py_buffer((np.arange(ROWS + 1, dtype=np.int32) * 12).tobytes()),
            pa.py_buffer(letters.tobytes()),
        ],
    )
    return pa.table(
        {
            "id": pa.array(np.arange(ROWS, dtype=np.int64) * 3 + 7),  # bitpacked
            "x": pa.array(rng.random(ROWS)),  # 64-bit, barely packs
            "small": pa.array(rng.integers(0, 100, ROWS).astype(np.int32), mask=rng.random(ROWS) < 0.1),
            "cat": pa.array(words[rng.integers(0, 50, ROWS)], pa.string()),  # dictionary
            "text": text,  # general (zstd) in 2.2, FSST in 2.1
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * 4, dtype=np.float32)), 4),
            "b": pa.array(rng.integers(0, 255, ROWS).astype(np.uint8)),
        }
    )


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_take_picks_single_values(
    tmp_path: Path, version: str, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table()
    path = tmp_path / "t.lance"
    write_file(path, table, version, writer)
    picked: list[str] = []
    real = batch.pick_values

    def spy(enc, *args, **kwargs):  # type: ignore[no-untyped-def]
        got = real(enc, *args, **kwargs)
        if got is not None:
            picked.append(str(enc.WhichOneof("compression")))
        return got

    monkeypatch.setattr(batch, "pick_values", spy)
    cut: list[int] = []  # values cut from decompressed chunks
    original = batch._pick_variable

    def traced(*args):  # type: ignore[no-untyped-def]
        got = original(*args)
        cut.append(got.offsets.size - 1)
        return got

    monkeypatch.setattr(batch, "_pick_variable", traced)
    reader = LanceFileReader(path)
    rng = np.random.default_rng(5)
    for k in (1, 3, 40, 400):
        idx = np.unique(rng.integers(0, ROWS, k))
        assert_tables_equal(reader.take(idx), table.take(pa.array(idx)))
    # the first and last rows, and rows at chunk edges
    edges = np.array([0, 1, 1023, 1024, 1025, 4095, 4096, ROWS - 2, ROWS - 1])
    assert_tables_equal(reader.take(edges), table.take(pa.array(edges)))
    assert {"inline_bitpacking", "fixed_size_list"} <= set(picked)
    if version == "2.2" and writer == "ours":
        assert "general" in picked
        assert sum(cut) > 0  # the zstd strings' picks are cut from their decompressed chunks


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_bitpacked_values_are_picked_below_a_share_that_depends_on_their_width(
    tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At one in eight rows of every chunk, 64-bit values are picked (below their share) and
    32-bit ones decoded with their chunks; both give the rows asked for."""
    table = _table().select(["id", "small"])
    path = tmp_path / "t.lance"
    write_file(path, table, "2.2", writer)
    picked: dict[int, list[bool]] = {}
    real = batch.pick_values

    def spy(enc, *args, **kwargs):  # type: ignore[no-untyped-def]
        got = real(enc, *args, **kwargs)
        if enc.WhichOneof("compression") == "inline_bitpacking":
            bits = int(enc.inline_bitpacking.uncompressed_bits_per_value)
            picked.setdefault(bits, []).append(got is not None)
        return got

    monkeypatch.setattr(batch, "pick_values", spy)
    idx = np.arange(3, ROWS, 8)
    assert batch.PICK_BITPACKED[32] < 1 / 8 < batch.PICK_BITPACKED[64]
    assert_tables_equal(LanceFileReader(path).take(idx), table.take(pa.array(idx)))
    assert picked[64] and all(picked[64])
    assert picked[32] and not any(picked[32])


def _zstd_chunks(
    values: list[list[bytes]], scheme: str = "zstd", align: int = 1
) -> tuple[memoryview, np.ndarray, np.ndarray, np.ndarray]:
    """Compressed ``[n + 1 u32 offsets][bytes]`` chunks back to back, as a 2.2 page holds them
    (each padded to a multiple of ``align`` before compression): the data, each chunk's start
    and size, and its value count."""
    from lance_table.file.compression import general

    parts, at, sizes = [], [], []
    for chunk in values:
        head = (len(chunk) + 1) * 4
        offsets = np.cumsum([head, *map(len, chunk)]).astype(np.uint32)
        body = offsets.tobytes() + b"".join(chunk)
        raw = general.compress(body + b"\xfe" * (-len(body) % align), scheme)
        at.append(sum(len(p) for p in parts))
        sizes.append(len(raw))
        parts.append(raw)
    counts = np.array([len(c) for c in values], np.int64)
    return memoryview(b"".join(parts)), np.array(at, np.int64), np.array(sizes, np.int64), counts


def _general_enc(scheme: str = "zstd") -> object:
    from lance_table._proto import encodings_v2_1_pb2 as pb

    enc = pb.General()
    enc.compression.scheme = (
        pb.COMPRESSION_ALGORITHM_LZ4 if scheme == "lz4" else pb.COMPRESSION_ALGORITHM_ZSTD
    )
    enc.values.variable.offsets.flat.bits_per_value = 32
    return enc


@pytest.mark.parametrize(
    ("scheme", "align", "groups"),
    [
        ("zstd", 1, False),  # decoded together; offsets read at odd byte positions
        ("zstd", 4, False),  # decoded together; chunks start at the offset width
        ("zstd", 1, True),  # groups of chunks decoded on threads, then their values joined
        ("zstd", 4, True),
        ("lz4", 1, False),  # decoded one by one
        ("lz4", 4, True),
    ],
)
def test_general_strings_read_whole_and_by_few_or_many_picks(
    scheme: str, align: int, groups: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lance_table.file.pageio import PageIO
    from lance_table.storage.sources import open_source

    if groups:
        monkeypatch.setattr(batch, "_GENERAL_PARALLEL_BYTES", 1)
    rng = np.random.default_rng(4)
    values = [
        [bytes(rng.integers(97, 123, int(rng.integers(0, 9)), dtype=np.uint8)) for _ in range(50)]
        for _ in range(6)
    ]
    flat = [v for chunk in values for v in chunk]
    data, at, sizes, counts = _zstd_chunks(values, scheme, align)
    io = PageIO(open_source(b""), None, None, (), "test page")
    whole = batch._general(_general_enc(scheme), data, at, sizes, counts, io)
    assert isinstance(whole, batch.Var)
    assert [bytes(whole.data[a:b]) for a, b in zip(whole.offsets[:-1], whole.offsets[1:])] == flat
    for k in (1, 3, 200):
        pick = np.sort(rng.choice(len(flat), k, replace=False))
        got = batch._general(_general_enc(scheme), data, at, sizes, counts, io, pick)
        assert isinstance(got, batch.Var)
        assert [bytes(got.data[a:b]) for a, b in zip(got.offsets[:-1], got.offsets[1:])] == [
            flat[i] for i in pick
        ]


@pytest.mark.parametrize("busy", [False, True])
def test_general_strings_of_a_page_are_one_group_inside_a_busy_map(
    busy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Groups that would be decoded one after the other on this thread only cost the copy that
    # joins them: inside a map keeping every worker busy the page is decoded as one group.
    from lance_table import _parallel
    from lance_table.file.pageio import PageIO
    from lance_table.storage.sources import open_source

    monkeypatch.setattr(batch, "_GENERAL_PARALLEL_BYTES", 1)
    monkeypatch.setattr(_parallel._BUSY, "on", busy, raising=False)
    split: list[int] = []
    real = batch.map_parts
    monkeypatch.setattr(batch, "map_parts", lambda fn, items: split.append(len(items)) or real(fn, items))
    rng = np.random.default_rng(5)
    values = [
        [bytes(rng.integers(97, 123, int(rng.integers(0, 9)), dtype=np.uint8)) for _ in range(40)]
        for _ in range(8)
    ]
    data, at, sizes, counts = _zstd_chunks(values, "zstd", 1)
    io = PageIO(open_source(b""), None, None, (), "test page")
    whole = batch._general(_general_enc("zstd"), data, at, sizes, counts, io)
    assert isinstance(whole, batch.Var)
    got = [bytes(whole.data[a:b]) for a, b in zip(whole.offsets[:-1], whole.offsets[1:])]
    assert got == [v for chunk in values for v in chunk]
    assert split == ([] if busy else [batch._GENERAL_PARTS])


def test_zstd_strings_with_offsets_past_their_chunk_are_corrupt() -> None:
    from lance_table.errors import CorruptFileError
    from lance_table.file.compression import general
    from lance_table.file.pageio import PageIO
    from lance_table.storage.sources import open_source

    offsets = np.array([12, 14, 999], np.uint32)  # the second value ends past the chunk
    raw = general.compress(offsets.tobytes() + b"abcd", "zstd")
    data, at, sizes, counts = memoryview(raw), np.array([0]), np.array([len(raw)]), np.array([2])
    io = PageIO(open_source(b""), None, None, (), "test page")
    with pytest.raises(CorruptFileError, match="past the buffer"):
        batch._general(_general_enc(), data, at, sizes, counts, io)
    with pytest.raises(CorruptFileError, match="past the buffer"):
        batch._general(_general_enc(), data, at, sizes, counts, io, np.array([1]))


def test_variable_values_starting_inside_their_offsets_are_corrupt() -> None:
    from lance_table._proto import encodings_v2_1_pb2 as pb
    from lance_table.errors import CorruptFileError
    from lance_table.file.compression import general
    from lance_table.file.pageio import PageIO
    from lance_table.storage.sources import open_source

    io = PageIO(open_source(b""), None, None, (), "test page")
    raw = np.array([4, 12, 14], np.uint32).tobytes() + b"abcd"  # the first value starts at byte 4
    plain = pb.CompressiveEncoding()
    plain.variable.offsets.flat.bits_per_value = 32
    one = (np.array([0]), np.array([len(raw)]), np.array([2]))
    with pytest.raises(CorruptFileError, match="out of order"):
        batch.values(plain, memoryview(raw), *one, io)
    packed = general.compress(raw, "zstd")
    with pytest.raises(CorruptFileError, match="out of order"):
        batch._general(_general_enc(), memoryview(packed), np.array([0]), np.array([len(packed)]), one[2], io)


def test_join_of_evenly_laid_ranges_matches_slice_by_slice() -> None:
    """Chunks of equal values laid at even steps are joined in one copy; anything else (uneven
    lengths or steps, overlapping steps, ranges past the data) falls back to joining each slice."""
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 50_000, dtype=np.uint8).tobytes()

    def slow(starts: np.ndarray, lengths: np.ndarray) -> bytes:
        return b"".join(data[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist()))

    n = 40
    even = 100 + 1000 * np.arange(n)
    cases = {
        "even": (even, np.full(n, 900)),
        "shorter last": (even, np.append(np.full(n - 1, 900), 17)),
        "empty last": (even, np.append(np.full(n - 1, 900), 0)),
        "uneven lengths": (even, np.where(np.arange(n) == 5, 800, 900)),
        "uneven steps": (np.where(np.arange(n) == 7, even + 8, even), np.full(n, 900)),
        "overlapping": (100 + 500 * np.arange(n), np.full(n, 900)),
        "past the data": (even + 10_500, np.full(n, 900)),
    }
    for name, (starts, lengths) in cases.items():
        got = bytes(batch.join(memoryview(data), starts.astype(np.int64), lengths.astype(np.int64)))
        assert got == slow(starts, lengths), name
    strided = byteranges._strided_join(data, even.astype(np.int64), np.full(n, 900, np.int64))
    assert strided is not None and bytes(strided) == slow(even, np.full(n, 900))
    assert byteranges._strided_join(data, (even + 10_500).astype(np.int64), np.full(n, 900, np.int64)) is None


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_take_picks_the_definition_levels_of_its_rows(
    tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A take of a nullable column decodes the definition levels of its rows alone, also where a
    chunk ends in raw (unpacked) levels, and gets the same nulls as the data."""
    rng = np.random.default_rng(17)
    n = 5 * 1024 + 13  # the last chunk of each column ends in 13 levels, stored raw
    table = pa.table(
        {
            "i": pa.array(rng.integers(0, 1000, n).astype(np.int32), mask=rng.random(n) < 0.3),
            "f": pa.array(rng.random(n), mask=rng.random(n) < 0.5),
        }
    )
    path = tmp_path / "t.lance"
    write_file(path, table, "2.2", writer)
    picked: list[bool] = []  # per pick: whether it met raw tails
    real_pick, real_chunks = batch.pick_levels, batch._out_of_line_chunks
    seen_raw: list[bool] = []

    def chunks(*args):  # type: ignore[no-untyped-def]
        got = real_chunks(*args)
        if got is not None:
            seen_raw.append(bool(got.raw_tail.any()))
        return got

    def spy(*args):  # type: ignore[no-untyped-def]
        seen_raw.clear()
        got = real_pick(*args)
        if got is not None:
            picked.append(any(seen_raw))
        return got

    monkeypatch.setattr(batch, "pick_levels", spy)
    monkeypatch.setattr(batch, "_out_of_line_chunks", chunks)
    reader = LanceFileReader(path)
    edges = np.array([0, 511, 512, 1023, 1024, 2047, n - 14, n - 13, n - 12, n - 2, n - 1])
    for idx in (edges, np.unique(rng.integers(0, n, 60)), np.arange(0, n, 7)):
        assert_tables_equal(reader.take(idx), table.take(pa.array(idx)))
    assert len(picked) >= 4, "the definition levels were not picked"
    assert any(picked), "no pick met a chunk ending in raw levels"


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_scattered_chunks_are_read_as_few_spans(
    tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A take whose chunks lie closer than the source's coalescing gap reads them (and the bytes
    between) as one range; chunks farther apart are other ranges; the rows are the ones asked."""
    from lance_table.storage import sources

    rng = np.random.default_rng(3)
    table = pa.table({"x": pa.array(rng.random(60_000))})  # 64-bit values: 512 (4 KiB) a chunk
    path = tmp_path / "t.lance"
    write_file(path, table, "2.2", writer)
    asked: list[int] = []
    real = sources.read_joined

    def spy(source, ranges):  # type: ignore[no-untyped-def]
        asked.append(len(ranges))
        return real(source, ranges)

    monkeypatch.setattr(sources, "read_joined", spy)
    idx = np.array([0, 1100, 2100, 3100, 30_000, 59_999])  # four chunks one apart, two far apart
    assert_tables_equal(LanceFileReader(path).take(idx), table.take(pa.array(idx)))
    assert asked == [3]


@pytest.mark.parametrize(
    "keys",
    [
        ["a"] * 5,  # one group
        ["a", "b", "c", "d", "e"],  # a group per file (pylance's files with their own FSST tables)
        ["a", "a", "b", "b", "c"],  # runs of files in order
        ["a", "b", "a", "c", "b"],  # interleaved: put back in file order by a take
        ["b", "b", "a", "a", "b"],  # a group coming back after another
    ],
)
def test_files_decoded_in_groups_come_back_in_file_order(keys: list[str]) -> None:
    counts = np.array([3, 0, 2, 4, 1], np.int64)
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    asked: list[list[int]] = []

    def decode(members: np.ndarray) -> pa.Array:
        assert members.dtype == np.int64
        asked.append(members.tolist())
        return pa.array(
            [int(firsts[k]) + j for k in members.tolist() for j in range(int(counts[k]))], pa.int64()
        )

    got = byteranges.in_file_order(keys, counts, decode)
    assert got is not None and got.to_pylist() == list(range(int(counts.sum())))
    groups: dict[str, list[int]] = {}
    for k, key in enumerate(keys):
        groups.setdefault(key, []).append(k)
    assert asked == list(groups.values())  # each group once, its files in order
    assert byteranges.in_file_order(keys, counts, lambda members: None) is None
