"""Large binary and string values in the 2.1/2.2 writer: each value of a full-zip page holding one
longer than 32 KiB is compressed on its own with zstd, as pylance does, and no pass over the page
(FSST training, estimates, the mini-block candidates) reads such values whole.

Files are read back exactly by pylance and by our reader; the cost is checked structurally (what
tracemalloc sees allocated), never by timing.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table
from lance_table.file.compression import entries, fsst_encode, fsst_train, general
from lance_table.file.container import read_metadata, unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter
from lance_table.storage.sources import LocalFileSource

MB = 1 << 20
KEY = "lance-encoding:compression"


def _text(size: int, seed: int) -> bytes:
    """``size`` bytes of words (FSST and zstd both compress them), made without big temporaries."""
    rng = np.random.default_rng(seed)
    words = b"alpha beta gamma delta lorem ipsum dolor sit amet consectetur adipiscing elit".split()
    base = b" ".join(words[i] for i in rng.integers(0, len(words), min(size, 1 << 14)))
    return (base * -(-size // len(base)))[:size]


def _one(value: bytes, t: pa.DataType) -> pa.Array:
    """One value without copies (offsets of the array's width)."""
    width = np.int64 if t in (pa.large_binary(), pa.large_string()) else np.int32
    offsets = pa.py_buffer(np.array([0, len(value)], width))
    return pa.Array.from_buffers(t, 1, [None, offsets, pa.py_buffer(value)])


def _value_compressions(path: Path) -> list[str]:
    """Each page's layout and the compression at the top of its value encoding."""
    source = LocalFileSource(str(path))
    out = []
    for col in read_metadata(source).columns:
        for p, page in enumerate(col.pages):
            _, layout = unpack_encoding(page.encoding, source, f"page {p}")
            kind = layout.WhichOneof("layout")
            if kind == "constant_layout":
                out.append(kind)
                continue
            enc = getattr(layout, kind).value_compression
            top = enc.WhichOneof("compression")
            if top == "general":
                top = f"general/{general.SCHEMES_BY_NUMBER[enc.general.compression.scheme]}"
            out.append(f"{kind}:{top}")
    return out


def _cases() -> dict[str, pa.Table]:
    rng = np.random.default_rng(1)
    return {
        "texts": pa.table({"s": [_text(3 * MB, 0).decode(), _text(MB, 9).decode()]}),
        "random_binary": pa.table({"s": pa.array([rng.bytes(MB), rng.bytes(40_000)], pa.binary())}),
        "medium_values": pa.table({"s": [_text(100_000, i).decode() for i in range(40)]}),
        "just_above": pa.table({"s": pa.array([rng.bytes(32 * 1024 + 1), b"x" * 50], pa.binary())}),
        "nulls_and_empties": pa.table(
            {"s": [_text(50_000, 1).decode(), None, "", "abc", None, "x" * 40_000]}
        ),
        "one_letter": pa.table({"s": ["x" * 4 * MB, "y" * 3 * MB]}),
        "large_string": pa.table({"s": pa.array([_text(70_000, 2).decode(), "tail"], pa.large_string())}),
        "list": pa.table(
            {"s": [[_text(60_000, 3).decode(), None], None, [], ["a", _text(40_000, 4).decode()]]}
        ),
        "struct": pa.table(
            {"s": pa.array([{"v": _text(50_000, 5).decode()}, None, {"v": None}, {"v": "b"}])}
        ),
    }


CASES = _cases()


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_large_values_are_compressed_one_by_one_like_pylance(tmp_path: Path, name: str, version: str) -> None:
    lance_file = pytest.importorskip("lance.file")
    table = CASES[name]
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    with LanceFileWriter(ours, table.schema, version=version) as w:
        w.write(table)
    with lance_file.LanceFileWriter(str(theirs), table.schema, version=version) as w:
        w.write_batch(table)
    assert_tables_equal(lance_file.LanceFileReader(str(ours)).read_all().to_table(), table)
    assert_tables_equal(LanceFileReader(ours).read_all(), table)
    assert_tables_equal(LanceFileReader(ours).take([0, len(table) - 1]), table.take([0, len(table) - 1]))
    # pylance's choice for such pages, and ours (pylance stores a page of one value, or of equal
    # ones, as a constant page: our writer does not write those)
    found = _value_compressions(ours)
    assert set(found) == {"full_zip_layout:general/zstd"}, found
    assert set(_value_compressions(theirs)) == set(found)


@pytest.mark.interop
@pytest.mark.parametrize("scheme", ["none", "zstd", "lz4"])
def test_field_compression_of_large_values(tmp_path: Path, scheme: str) -> None:
    """``none`` keeps them plain; any other scheme still compresses each value with zstd, as
    pylance does."""
    lance_file = pytest.importorskip("lance.file")
    field = pa.field("s", pa.string(), metadata={KEY: scheme})
    table = pa.table([pa.array([_text(50_000, 0).decode(), "x"])], schema=pa.schema([field]))
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    with LanceFileWriter(ours, table.schema, version="2.2") as w:
        w.write(table)
    with lance_file.LanceFileWriter(str(theirs), table.schema, version="2.2") as w:
        w.write_batch(table)
    expected = "full_zip_layout:variable" if scheme == "none" else "full_zip_layout:general/zstd"
    assert _value_compressions(ours) == _value_compressions(theirs) == [expected]
    assert_tables_equal(lance_file.LanceFileReader(str(ours)).read_all().to_table(), table)
    assert_tables_equal(LanceFileReader(ours).read_all(), table)


@pytest.mark.interop
def test_dataset_of_one_large_value_round_trips(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    table = pa.table({"s": _one(_text(8 * MB, 7), pa.string()), "b": _one(_text(5 * MB, 8), pa.binary())})
    lance_table.write_dataset(table, str(tmp_path / "ds"), data_storage_version="2.2")
    assert_tables_equal(lance.dataset(str(tmp_path / "ds")).to_table(), table)
    assert_tables_equal(lance_table.dataset(str(tmp_path / "ds")).to_table(), table)


@pytest.mark.interop
def test_pylance_values_of_one_letter_read_back(tmp_path: Path) -> None:
    """pylance compresses 4 MiB of one letter to about 130 bytes (zstd's run-length blocks): a
    ratio far above what compressed data was thought able to reach, and not damage."""
    lance_file = pytest.importorskip("lance.file")
    table = CASES["one_letter"]
    path = tmp_path / "theirs.lance"
    with lance_file.LanceFileWriter(str(path), table.schema, version="2.2") as w:
        w.write_batch(table)
    assert path.stat().st_size < 4096
    assert_tables_equal(LanceFileReader(path).read_all(), table)


def test_zstd_ratio_of_a_run_is_accepted() -> None:
    packed = general.compress(b"z" * 8 * MB, "zstd")
    assert len(packed) < 2048
    assert bytes(general.decompress(packed, "zstd", 8 * MB, None)) == b"z" * 8 * MB  # type: ignore[arg-type]


def test_zstd_each_frames_every_value_on_its_own() -> None:
    rng = np.random.default_rng(2)
    values = [
        b"",
        b"abc",
        rng.bytes(127),
        b"x" * 128,
        rng.bytes(255),
        _text(40_000, 1),
        b"",
        b"z" * 3 * MB,
        b"q",
    ]
    data = np.frombuffer(b"".join(values), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])])
    out, at = general.zstd_each(data, offsets)
    assert at[-1] == out.size
    for i, value in enumerate(values):
        frame = out[at[i] : at[i + 1]].tobytes()
        assert bytes(general.decompress(frame, "zstd", len(value), None)) == value  # type: ignore[arg-type]
    # short values are one raw block each, as zstd itself stores them (and pylance wrote "abc")
    assert (
        out[at[1] : at[2]].tobytes()
        == (3).to_bytes(8, "little") + bytes.fromhex("28b52ffd2003190000") + b"abc"
    )
    assert at[8] - at[7] < 1024  # long ones are compressed
    # values left out take no bytes
    keep = np.array([len(v) > 0 for v in values])
    kept, kept_at = general.zstd_each(data, offsets, keep)
    assert np.array_equal(np.diff(kept_at)[keep], np.diff(at)[keep]) and not np.diff(kept_at)[~keep].any()
    assert kept.tobytes() == b"".join(out[at[i] : at[i + 1]].tobytes() for i in np.flatnonzero(keep))
    with pytest.raises(ValueError):
        general.zstd_each(data, offsets, ~keep)


def test_join_entries_places_heads_and_bodies() -> None:
    rng = np.random.default_rng(3)
    n = 5000
    body_len = rng.integers(0, 600, n)
    body_len[[10, 11, 4000]] = [entries.ALONE, entries.ALONE + 5, 3 * entries.ALONE]
    head_len = rng.integers(0, 6, n)
    heads = rng.integers(0, 256, (n, 5), dtype=np.uint8)
    body = rng.integers(0, 256, int(body_len.sum()), dtype=np.uint8)
    pieces = entries.join_entries(heads, head_len, body, body_len)
    expected, at = [], 0
    for i in range(n):
        expected.append(heads[i, : head_len[i]].tobytes() + body[at : at + body_len[i]].tobytes())
        at += body_len[i]
    assert b"".join(p.tobytes() for p in pieces) == b"".join(expected)
    # long bodies are views of the input, and no piece but those is long
    assert sum(np.shares_memory(p, body) for p in pieces) == 3
    assert max(p.size for p in pieces if not np.shares_memory(p, body)) < 2 * entries.GROUP


def test_fsst_estimate_of_a_long_string_compresses_a_sample() -> None:
    text = _text(20 * MB, 3)
    offsets = np.array([0, len(text)])
    table = fsst_train.train(text, offsets)
    tracemalloc.start()
    try:
        estimate = fsst_encode.estimate(table, text, offsets)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MB, peak
    assert 0 < estimate < len(text) // 2
    # and the sample speaks for the whole
    part = text[: 2 * MB]
    exact = fsst_encode.compress(table, part, np.array([0, len(part)]))[0].size
    assert abs(fsst_encode.estimate(table, part, np.array([0, len(part)])) - exact) < 0.03 * exact


@pytest.mark.parametrize("kind", ["text", "random"])
def test_writing_a_large_value_allocates_a_small_multiple_of_it(tmp_path: Path, kind: str) -> None:
    size = 20 * MB
    value = _text(size, 4) if kind == "text" else np.random.default_rng(4).bytes(size)
    table = pa.table({"s": _one(value, pa.binary())})
    tracemalloc.start()
    try:
        lance_table.write_dataset(table, str(tmp_path / "ds"), data_storage_version="2.2")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * size, peak / size
    assert lance_table.dataset(str(tmp_path / "ds")).to_table()["s"].to_pylist() == [value]


def test_reading_a_large_value_allocates_a_small_multiple_of_it(tmp_path: Path) -> None:
    size = 20 * MB
    value = np.random.default_rng(5).bytes(size)
    table = pa.table({"s": _one(value, pa.binary())})
    lance_table.write_dataset(table, str(tmp_path / "ds"), data_storage_version="2.2")
    dataset = lance_table.dataset(str(tmp_path / "ds"))
    tracemalloc.start()
    try:
        got = dataset.to_table()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * size, peak / size
    assert got["s"][0].as_py() == value
