"""Compressions the Lance 2.1/2.2 writer picks: FSST for strings (mini-block and full-zip), RLE for
runs, bitpacked floats, general ZSTD/LZ4 from field metadata (``lance-encoding:compression``) and
dictionaries for repeated strings.

Each column meant to trigger one is written by us and read back exactly by pylance (whole and by
``take_rows``) and by our reader; a guard checks that the compression really is in the file and
that the file is smaller than with plain values (``lance-encoding:compression: none``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

from lance_table.file.container import read_metadata, unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter
from lance_table.storage.sources import LocalFileSource

lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

VERSIONS = ("2.1", "2.2")
N = 100_000
KEY = "lance-encoding:compression"


def _words(rng: np.random.Generator, count: int, size: int) -> pa.Array:
    """``count`` random strings of ``size`` letters."""
    letters = np.frombuffer(b"abcdefghijklmnop", np.uint8)
    raw = letters[rng.integers(0, letters.size, count * size)]
    offsets = np.arange(count + 1, dtype=np.int32) * size
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(raw)])


def _digraphs(rng: np.random.Generator, count: int, size: int) -> pa.Array:
    """``count`` strings of ``size`` letters made of 200 two-letter pairs: FSST (a pair per code)
    compresses them better than zstd, which sees no long repeats and byte frequencies only."""
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    pairs = np.stack([letters[rng.integers(0, 26, 200)], letters[rng.integers(0, 26, 200)]], 1)
    raw = pairs[rng.integers(0, 200, count * size // 2)].reshape(-1)
    offsets = np.arange(count + 1, dtype=np.int32) * size
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(raw.tobytes())]
    )


def _cases() -> dict[str, tuple[pa.Array, dict[str, str], str]]:
    """name: (values, field metadata, the compression expected somewhere in the value encoding)."""
    rng = np.random.default_rng(7)
    strings = _words(rng, N, 20)  # almost all distinct
    pairs = _digraphs(rng, N, 20)
    pairs_nulls = pc.if_else(pa.array(rng.random(N) < 0.1), pa.scalar(None, pa.string()), pairs)
    with_nulls = pc.if_else(pa.array(rng.random(N) < 0.1), pa.scalar(None, pa.string()), strings)
    runs = np.repeat(rng.integers(0, 1 << 40, N // 1000), 1000)
    few = np.array(["apple", "banana", "cherry"], dtype=object)
    vocab = _words(rng, 1000, 20).to_numpy(zero_copy_only=False)
    lists = pa.ListArray.from_arrays(
        np.arange(0, 2 * N + 1, 2, dtype=np.int32), pa.array(few[rng.integers(0, 3, 2 * N)], pa.string())
    )
    return {
        "fsst": (pairs, {}, "fsst"),
        "fsst_nulls": (pairs_nulls, {}, "fsst"),
        "fsst_binary": (pairs.cast(pa.binary()), {}, "fsst"),
        # values of 256 bytes or more go full-zip, FSST-compressed one by one
        "fsst_full_zip": (_words(rng, 10_000, 300), {}, "fsst"),
        "fsst_full_zip_list": (
            pa.ListArray.from_arrays(
                np.arange(0, 15_001, 3, dtype=np.int32),
                pc.if_else(
                    pa.array(rng.random(15_000) < 0.1), pa.scalar(None, pa.string()), _words(rng, 15_000, 300)
                ),
            ),
            {},
            "fsst",
        ),
        "dict_string": (pa.array(few[rng.integers(0, 3, N)], pa.string()), {}, "dictionary"),
        "dict_nulls": (
            pa.array(np.where(rng.random(N) < 0.2, None, vocab[rng.integers(0, 1000, N)]), pa.string()),
            {},
            "dictionary",
        ),
        "dict_runs": (
            pa.array(np.repeat(vocab[rng.integers(0, 1000, N // 1000)], 1000), pa.string()),
            {},
            "rle",
        ),
        "dict_list": (lists, {}, "dictionary"),
        # doubles whose top 12 bits are zero (subnormals) pack; random doubles in [0, 1) stay
        # flat (see test_random_doubles_stay_flat)
        "bitpack_float": (pa.array(rng.random(N) * 1e-310), {}, "inline_bitpacking"),
        "rle_int64": (pa.array(runs), {}, "rle"),
        "rle_float": (pa.array(np.repeat(rng.random(N // 1000), 1000)), {}, "rle"),
        "rle_int32_nulls": (
            pa.array(
                np.where(np.repeat(rng.random(N // 500) < 0.3, 500), None, runs // 7 % 1000).tolist(),
                pa.int32(),
            ),
            {},
            "rle",
        ),
        "zstd_int": (pa.array(runs + rng.integers(0, 50, N)), {KEY: "zstd"}, "general"),
        "zstd_string": (pa.array(strings, pa.string()), {KEY: "zstd"}, "general"),
        "lz4_string": (pa.array(with_nulls, pa.string()), {KEY: "lz4"}, "general"),
        "zstd_float": (pa.array(np.round(rng.random(N), 2)), {KEY: "zstd"}, "general"),
    }


CASES = _cases()


def _table(values: pa.Array, metadata: dict[str, str]) -> pa.Table:
    """One column ``x``; under a list the metadata goes to the items (the leaf that is encoded)."""
    t = values.type
    if pa.types.is_list(t):
        t = pa.list_(t.value_field.with_metadata(metadata or None))
        values = values.cast(t)
        metadata = {}
    return pa.table([values], schema=pa.schema([pa.field("x", t, metadata=metadata or None)]))


def _write(path: Path, table: pa.Table, version: str) -> int:
    with LanceFileWriter(path, table.schema, version=version) as w:
        w.write(table)
    return path.stat().st_size


def _kinds(enc: object) -> set[str]:
    """Every compression named in an encoding tree."""
    out: set[str] = set()
    stack = [enc]
    while stack:
        node = stack.pop()
        kind = node.WhichOneof("compression")  # type: ignore[attr-defined]
        if kind is None:
            continue
        out.add(kind)
        inner = getattr(node, kind)
        for f, v in inner.ListFields():
            if f.message_type is not None and f.message_type.name == "CompressiveEncoding":
                stack.append(v)
    return out


def _value_compressions(path: Path) -> set[str]:
    """The page layouts of a file and every compression named in their value encodings."""
    source = LocalFileSource(str(path))
    meta = read_metadata(source)
    out: set[str] = set()
    for col in meta.columns:
        for p, page in enumerate(col.pages):
            _, layout = unpack_encoding(page.encoding, source, f"page {p}")
            kind = layout.WhichOneof("layout")
            out.add(kind)
            out |= _kinds(getattr(layout, kind).value_compression) if kind != "constant_layout" else set()
            if kind == "mini_block_layout" and layout.mini_block_layout.HasField("dictionary"):
                out.add("dictionary")
    return out


# in 2.2, strings of a few hundred bytes are zstd-compressed mini-block chunks, not FSST full-zip
_ZSTD_CHUNKS_IN_22 = {"fsst_full_zip", "fsst_full_zip_list"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_compressed_roundtrip(tmp_path: Path, name: str, version: str) -> None:
    values, metadata, expected = CASES[name]
    full_zip = "full_zip" in name
    if version == "2.2" and name in _ZSTD_CHUNKS_IN_22:
        expected, full_zip = "general", False
    table = _table(values, metadata)
    path = tmp_path / "c.lance"
    size = _write(path, table, version)
    theirs = lance_file.LanceFileReader(str(path))
    assert_tables_equal(theirs.read_all().to_table(), table)
    assert_tables_equal(LanceFileReader(path).read_all(), table)
    idx = np.sort(np.random.default_rng(3).permutation(len(values))[:2000])
    assert_tables_equal(theirs.take_rows(idx.tolist()).to_table(), table.take(pa.array(idx)))
    assert_tables_equal(LanceFileReader(path).take(idx), table.take(pa.array(idx)))
    # guard: the compression is there and pays
    found = _value_compressions(path)
    assert expected in found
    assert ("full_zip_layout" in found) == full_zip
    plain_path = tmp_path / "plain.lance"
    plain = _write(plain_path, _table(values, {KEY: "none"}), version)
    assert expected not in _value_compressions(plain_path)
    assert size < plain, (size, plain)


@pytest.mark.parametrize("version", VERSIONS)
def test_strings_take_the_smallest_compression_measured(tmp_path: Path, version: str) -> None:
    """Random letters: zstd (order-0 entropy) beats FSST, which only 2.2 files weigh it against;
    letter pairs: FSST wins in both."""
    rng = np.random.default_rng(11)
    letters = pa.table({"x": _words(rng, N, 20)})
    pairs = pa.table({"x": _digraphs(rng, N, 20)})
    sizes = {}
    for name, table in (("letters", letters), ("pairs", pairs)):
        path = tmp_path / f"{name}.lance"
        sizes[name] = _write(path, table, version)
        assert_tables_equal(lance_file.LanceFileReader(str(path)).read_all().to_table(), table)
        assert_tables_equal(LanceFileReader(path).read_all(), table)
        found = _value_compressions(path)
        expected = "general" if name == "letters" and version == "2.2" else "fsst"
        assert expected in found and not ({"general", "fsst"} - {expected}) & found, (name, found)
    if version == "2.2":  # smaller than the 2.1 file, whose strings are FSST-compressed
        assert sizes["letters"] < _write(tmp_path / "l21.lance", letters, "2.1")


@pytest.mark.parametrize("version", VERSIONS)
def test_compression_skipped_when_it_does_not_pay(tmp_path: Path, version: str) -> None:
    rng = np.random.default_rng(5)
    short = pa.table(
        {
            "short": _words(rng, N, 5),  # 5 bytes or less: no FSST
            "noruns": pa.array(rng.integers(0, 1 << 60, N)),  # no runs: no RLE
        }
    )
    few = pa.table({"few": _words(rng, 500, 20)})  # below 32 KiB: no FSST
    for i, table in enumerate([short, few]):
        path = tmp_path / f"s{i}.lance"
        _write(path, table, version)
        assert not {"fsst", "rle", "general", "dictionary"} & _value_compressions(path)
        assert_tables_equal(lance_file.LanceFileReader(str(path)).read_all().to_table(), table)


@pytest.mark.parametrize("version", VERSIONS)
def test_random_doubles_stay_flat(tmp_path: Path, version: str) -> None:
    """Bitpacking would save 2 of 64 bits of random doubles in [0, 1) and unpacking costs several
    times a flat read: they are written flat (pylance packs them), and read back exactly."""
    values = pa.array(np.random.default_rng(4).random(N))
    table = _table(values, {})
    path = tmp_path / "r.lance"
    _write(path, table, version)
    found = _value_compressions(path)
    assert "flat" in found and "inline_bitpacking" not in found
    assert_tables_equal(lance_file.LanceFileReader(str(path)).read_all().to_table(), table)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("rows", [50, 100, 200])
def test_short_pages_of_narrow_integers_stay_flat(tmp_path: Path, version: str, rows: int) -> None:
    """A page of a few hundred integers (a small append's) packs into whole 1024-value blocks,
    more bytes than its plain values: it is written flat, as pylance writes it, and no larger
    than pylance's file; a full block of the same values is bitpacked."""
    table = _table(pa.array(np.arange(25_000, 25_000 + rows, dtype=np.int64)), {})
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    size = _write(ours, table, version)
    assert "inline_bitpacking" not in _value_compressions(ours)
    with lance_file.LanceFileWriter(str(theirs), table.schema, version=version) as w:
        w.write_batch(table)
    assert size <= theirs.stat().st_size
    assert_tables_equal(lance_file.LanceFileReader(str(ours)).read_all().to_table(), table)
    full = _table(pa.array(np.arange(25_000, 25_000 + 1024 * 3, dtype=np.int64)), {})
    _write(ours, full, version)
    assert "inline_bitpacking" in _value_compressions(ours)
