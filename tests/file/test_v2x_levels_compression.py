"""Compressed repetition/definition levels in 2.1/2.2 mini-block pages, as pylance 14 writes them.

pylance is the oracle both ways: the level encoding we choose, and every chunk's compressed level
bytes, equal those in pylance's own files for the same levels and chunks; pylance reads our files
with nullable and nested columns in full and by take; the page-wide (fast) and chunk-by-chunk
(general) paths write the same bytes; and the benchmark's nested columns come out no larger than
~5% over pylance's.
"""

from __future__ import annotations

import importlib.util
import itertools
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

from lance_table.file.container import read_metadata, unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import level_compress, miniblock_encode, tiny_page
from lance_table.file.v2_1.compress import decode_levels
from lance_table.file.writer import LanceFileWriter
from lance_table.storage.sources import LocalFileSource

lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop


def _pages(path: Path) -> list[tuple[Any, list[bytes]]]:
    """(PageLayout, buffers) of every page of a file."""
    source = LocalFileSource(str(path))
    meta = read_metadata(source)
    out = []
    for col in meta.columns:
        for page in col.pages:
            _, layout = unpack_encoding(page.encoding, source, "page")
            ranges = list(zip(page.buffer_offsets, page.buffer_sizes))
            out.append((layout, [bytes(b) for b in source.read_ranges(ranges)]))
    return out


class _Where:
    what = "levels"
    path = "test"

    def corrupt(self, message: str) -> Exception:
        return ValueError(message)


def _chunk_levels(layout: Any, buffers: list[bytes]) -> dict[str, tuple[list[bytes], list[int]]]:
    """Each level kind's compressed bytes and level count, chunk by chunk, of a mini-block page."""
    mini = layout.mini_block_layout
    large = mini.has_large_chunk
    words = np.frombuffer(buffers[0], np.uint32 if large else np.uint16).astype(np.int64)
    kinds = [k for k in ("rep", "def") if mini.HasField(f"{k}_compression")]
    head = 2 + 2 * len(kinds) + (4 if large else 2) * mini.num_buffers
    out: dict[str, tuple[list[bytes], list[int]]] = {k: ([], []) for k in kinds}
    at = 0
    for word in words.tolist():
        chunk = buffers[1][at : at + ((word >> 4) + 1) * 8]
        at += len(chunk)
        count = struct.unpack_from("<H", chunk, 0)[0]
        sizes = struct.unpack_from(f"<{len(kinds)}H", chunk, 2)
        pos = (head + 7) & ~7
        for kind, size in zip(kinds, sizes):
            out[kind][0].append(chunk[pos : pos + size])
            out[kind][1].append(count)
            pos += (size + 7) & ~7
    return out


def _level_encodings(path: Path) -> set[str]:
    found = set()
    for layout, _ in _pages(path):
        if layout.WhichOneof("layout") == "mini_block_layout":
            for kind in ("rep", "def"):
                enc = getattr(layout.mini_block_layout, f"{kind}_compression")
                if layout.mini_block_layout.HasField(f"{kind}_compression"):
                    found.add(str(enc.WhichOneof("compression")))
    return found


def _value_encodings(path: Path) -> set[str]:
    return {
        str(layout.mini_block_layout.value_compression.WhichOneof("compression"))
        for layout, _ in _pages(path)
        if layout.WhichOneof("layout") == "mini_block_layout"
    }


def _nullable_floats(n: int, rate: float, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    mask = rng.random(n) < rate
    mask[n // 2] = True
    return pa.array(rng.random(n), mask=mask)


def _lists(n: int, seed: int, null_rate: float = 0.1, empty_rate: float = 0.1) -> pa.Array:
    rng = np.random.default_rng(seed)
    rows: list[list[int] | None] = []
    for _ in range(n):
        r = rng.random()
        items = rng.integers(0, 99, int(rng.integers(1, 6))).tolist()
        rows.append(None if r < null_rate else [] if r < null_rate + empty_rate else items)
    return pa.array(rows, pa.list_(pa.int32()))


def _nested_lists(n: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    rows = [
        None
        if rng.random() < 0.1
        else [
            None if rng.random() < 0.1 else [int(x) for x in rng.integers(0, 9, rng.integers(0, 3))]
            for _ in range(rng.integers(0, 4))
        ]
        for _ in range(n)
    ]
    return pa.array(rows, pa.list_(pa.list_(pa.int64())))


def _struct(n: int, seed: int, rate: float) -> pa.Array:
    rng = np.random.default_rng(seed)
    x = pa.array(rng.random(n), mask=rng.random(n) < rate)
    return pa.StructArray.from_arrays([x], names=["x"], mask=pa.array(rng.random(n) < rate / 2))


ORACLE_CASES = {
    "floats_20_alternating": lambda: pa.array(np.arange(20.0), mask=np.arange(20) % 2 == 0),
    "floats_50_sparse": lambda: _nullable_floats(50, 0.02, 1),
    "floats_100_half": lambda: _nullable_floats(100, 0.5, 2),
    "floats_1000": lambda: _nullable_floats(1000, 0.1, 3),
    "floats_1500_rare": lambda: _nullable_floats(1500, 0.03, 4),
    "floats_5000": lambda: _nullable_floats(5000, 0.3, 5),
    "floats_40k_rare": lambda: _nullable_floats(40_000, 0.002, 6),
    "floats_40k": lambda: _nullable_floats(40_000, 0.1, 7),
    "lists_700": lambda: _lists(700, 8),
    "lists_20k": lambda: _lists(20_000, 9),
    "lists_mostly_empty": lambda: _lists(20_000, 10, 0.0, 0.9),
    "nested_lists": lambda: _nested_lists(5000, 11),
    "struct_rare_nulls": lambda: _struct(30_000, 12, 0.01),
    "struct_nulls": lambda: _struct(30_000, 13, 0.1),
    "strings": lambda: pa.array(["a" * (i % 7) if i % 9 else None for i in range(30_000)]),
}


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_level_encoding_and_bytes_match_pylance(tmp_path: Path, version: str) -> None:
    """For every page pylance writes, our choice and our chunk bytes equal pylance's."""
    compared = 0
    seen: set[str] = set()
    for name, make in ORACLE_CASES.items():
        table = pa.table({"c": make()})
        path = tmp_path / f"{name}.lance"
        with lance_file.LanceFileWriter(str(path), table.schema, version=version) as w:
            w.write_batch(table)
        for layout, buffers in _pages(path):
            if layout.WhichOneof("layout") != "mini_block_layout":
                continue
            mini = layout.mini_block_layout
            for kind, (chunks, counts) in _chunk_levels(layout, buffers).items():
                enc = getattr(mini, f"{kind}_compression")
                levels = np.concatenate(
                    [decode_levels(enc, c, n, _Where()) for c, n in zip(chunks, counts)]  # type: ignore[arg-type]
                )
                codec = level_compress.choose(levels, rle=version == "2.2")
                assert codec.encoding() == enc, (name, kind)
                bounds = np.concatenate([[0], np.cumsum(counts)])
                ours = level_compress.compress_chunks(levels, bounds, codec)
                mine = [
                    bytes(ours.data[s : s + n]) for s, n in zip(ours.starts.tolist(), ours.lengths.tolist())
                ]
                assert mine == chunks, (name, kind)
                compared += 1
                seen.add(str(enc.WhichOneof("compression")))
    expected = {"flat", "inline_bitpacking", "out_of_line_bitpacking"} | (
        {"rle"} if version == "2.2" else set()
    )
    assert seen == expected
    assert compared >= 20


def _check_read(path: Path, table: pa.Table) -> None:
    theirs = lance_file.LanceFileReader(str(path))
    assert_tables_equal(theirs.read_all().to_table(), table)
    assert_tables_equal(LanceFileReader(path).read_all(), table)
    idx = np.unique(np.random.default_rng(0).integers(0, table.num_rows, 40))
    assert_tables_equal(theirs.take_rows(idx.tolist()).to_table(), table.take(pa.array(idx)))
    assert_tables_equal(LanceFileReader(path).take(idx), table.take(pa.array(idx)))


def _no_null_struct(n: int) -> pa.Array:
    return pa.StructArray.from_arrays([pa.array(np.arange(n, dtype=np.int32))], names=["x"])


READ_CASES = {
    **ORACLE_CASES,
    "dict_strings": lambda: pa.array(
        [f"label-{i % 50}" if i % 5 else None for i in range(30_000)], pa.string()
    ).dictionary_encode(),
    "low_card_strings": lambda: pa.array([f"label-{i % 300}" if i % 5 else None for i in range(30_000)]),
    "list_of_strings": lambda: pa.array(
        [None if i % 11 == 0 else [f"t{j}" if j % 7 else None for j in range(i % 5)] for i in range(20_000)]
    ),
    "list_of_structs": lambda: pa.array(
        [[{"a": j, "b": None if j % 3 else "x"} for j in range(i % 4)] for i in range(10_000)]
    ),
    "struct_no_nulls_small": lambda: _no_null_struct(600),  # all-zero def levels: inline width 0
    "struct_no_nulls": lambda: _no_null_struct(30_000),  # all-zero def levels: RLE (2.2), inline (2.1)
    # all-zero def levels under lists: RLE (2.2), out-of-line bitpacking at width 1 (2.1)
    # (chunks of more than 1024 values: run-length encoded numbers, booleans)
    "list_runs_no_nulls": lambda: pa.array([[7] * 6] * 3000, pa.list_(pa.int64())),
    "list_bools_no_nulls": lambda: pa.array([[i % 3 == 0] * (1 + i % 5) for i in range(5000)]),
}


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_reads_our_compressed_levels(tmp_path: Path, version: str) -> None:
    seen: set[str] = set()
    for name, make in READ_CASES.items():
        table = pa.table({"c": make()})
        path = tmp_path / f"{name}.lance"
        with LanceFileWriter(path, table.schema, version=version, page_size_bytes=1 << 18) as w:
            w.write(table)
        _check_read(path, table)
        seen |= _level_encodings(path)
    expected = {"flat", "inline_bitpacking", "out_of_line_bitpacking"} | (
        {"rle"} if version == "2.2" else set()
    )
    assert seen == expected


def test_rle_that_overflows_a_chunk_falls_back_to_flat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2.1 chunks are at most 32 KiB, planned with raw levels: RLE levels (3 bytes a level when
    every level differs from the last) can exceed that, and the page then stores them flat."""
    monkeypatch.setattr(miniblock_encode, "choose", lambda levels, rle, *_: level_compress.LevelCodec("rle"))
    # 1800 rows of an empty and a null inner list (rep 2,1,2,1..., def alternating too) before each
    # value: a chunk of 2 values holds 7202 levels, 28.8 KiB raw and 43 KiB as RLE
    rows = [[[], None] if i % 1801 else [[i]] for i in range(6 * 1801 + 1)]
    table = pa.table({"c": pa.array(rows, pa.list_(pa.list_(pa.int64())))})
    path = tmp_path / "fallback.lance"
    with LanceFileWriter(path, table.schema, version="2.1") as w:
        w.write(table)
    _check_read(path, table)
    assert "flat" in _level_encodings(path)


FAST_CASES = {
    "floats": lambda: _nullable_floats(20_000, 0.1, 20),
    "floats_rare": lambda: _nullable_floats(20_000, 0.001, 21),
    "floats_small": lambda: _nullable_floats(300, 0.2, 22),
    "ints_flat": lambda: pa.array(
        np.random.default_rng(23).integers(-(2**31), 2**31 - 1, 20_000, dtype=np.int32),
        mask=np.random.default_rng(24).random(20_000) < 0.2,
    ),
    "int64_512_per_chunk": lambda: pa.array(
        np.random.default_rng(25).integers(-(2**63), 2**63 - 1, 10_000, dtype=np.int64),
        mask=np.arange(10_000) % 3 == 0,
    ),
    "strings": lambda: pa.array([None if i % 4 == 0 else f"v{i}" * (i % 3) for i in range(20_000)]),
    "strings_rare_nulls": lambda: pa.array([None if i % 999 == 0 else f"v{i}" for i in range(20_000)]),
    "bools": lambda: pa.array([None if i % 5 == 0 else i % 2 == 0 for i in range(20_000)]),
    # strings whose chunks are compressed whole: asked for by field metadata, or (2.2) chosen
    "strings_zstd": lambda: pa.array([None if i % 4 == 0 else f"v{i}" * (i % 9) for i in range(20_000)]),
    "strings_lz4": lambda: pa.array([f"w{i % 77}" * (i % 5) for i in range(20_000)]),
    "letters": lambda: pa.array(
        [bytes(row).decode() for row in np.random.default_rng(26).integers(97, 123, (30_000, 20), np.uint8)]
    ),
}
# field metadata per case (strings not listed are stored plain, which takes the page-wide path)
FAST_METADATA = {
    "strings_zstd": {"lance-encoding:compression": "zstd"},
    "strings_lz4": {"lance-encoding:compression": "lz4"},
    "letters": None,  # 2.2 chooses zstd chunks for random letters; 2.1 stores them with FSST
}


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_fast_and_general_paths_write_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    real = miniblock_encode.fast_page
    used = []

    def spy(*args: Any) -> Any:
        page = real(*args)
        used.append(page is not None)
        return page

    monkeypatch.setattr(miniblock_encode, "fast_page", spy)
    # (one-chunk pages of small cases would go to the small-page shortcut, which
    # test_tiny_pages compares with the general path: here the page-wide fast path is compared)
    monkeypatch.setattr(tiny_page, "ENABLED", False)
    for name, make in FAST_CASES.items():
        values = make()
        plain = {"lance-encoding:compression": "none"} if pa.types.is_string(values.type) else None
        meta = FAST_METADATA.get(name, plain)
        table = pa.table([values], schema=pa.schema([pa.field("c", values.type, metadata=meta)]))
        fast, general = tmp_path / f"{name}_fast.lance", tmp_path / f"{name}_general.lance"
        used.clear()
        with LanceFileWriter(fast, table.schema, version=version) as w:
            w.write(table)
        assert used and all(used), name
        with monkeypatch.context() as m:
            m.setattr(miniblock_encode, "fast_page", lambda *args: None)
            with LanceFileWriter(general, table.schema, version=version) as w:
                w.write(table)
        assert fast.read_bytes() == general.read_bytes(), name
        assert_tables_equal(lance_file.LanceFileReader(str(fast)).read_all().to_table(), table)
        if name in FAST_METADATA and (version == "2.2" or name != "letters"):
            assert _value_encodings(fast) == {"general"}, name


def _nested_table(rows: int) -> pa.Table:
    spec = importlib.util.spec_from_file_location(
        "bench_common", Path(__file__).resolve().parents[2] / "benchmarks" / "common.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.nested_table(rows)  # type: ignore[no-any-return]


def test_nested_table_sizes_near_pylance(tmp_path: Path) -> None:
    """The benchmark's nullable and nested columns, one per file: at most ~5% over pylance."""
    table = _nested_table(200_000)
    for name in ("score", "tags", "point", "ints", "label"):
        sub = table.select([name])
        ours, theirs = tmp_path / f"{name}_ours.lance", tmp_path / f"{name}_theirs.lance"
        with LanceFileWriter(ours, sub.schema, version="2.2") as w:
            w.write(sub)
        with lance_file.LanceFileWriter(str(theirs), sub.schema, version="2.2") as w:
            w.write_batch(sub)
        size, reference = ours.stat().st_size, theirs.stat().st_size
        # random doubles and floats stay flat where pylance packs away their top 2 bits
        assert size <= reference * 1.05, (name, size, reference)
    assert_tables_equal(
        lance_file.LanceFileReader(str(tmp_path / "tags_ours.lance")).read_all().to_table(),
        table.select(["tags"]),
    )


def _index_by_definition(
    rep: np.ndarray, max_rep: int, ranges: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The repetition index entry by entry, as the format defines it: per chunk, the rows that
    end in it and the levels after its last row start (a row still open at a chunk's end that
    the next chunk ends at its very first level counts in this chunk)."""
    out: list[list[int]] = []
    for c, (lo, hi) in enumerate(ranges):
        last = c == len(ranges) - 1
        rows = sum(1 for k in range(lo + 1, hi) if rep[k] == max_rep) + last
        left = 0
        if not last:
            starts = [k for k in range(lo, hi) if rep[k] == max_rep]
            left = hi - starts[-1] if starts else hi - lo
        if c and hi > lo and rep[lo] == max_rep and out[c - 1][1]:
            out[c - 1] = [out[c - 1][0] + 1, 0]
        out.append([rows, left])
    return [(r, left) for r, left in out]


def test_repetition_index_matches_its_definition() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 60))
        max_rep = int(rng.integers(1, 3))
        rep = rng.integers(0, max_rep + 1, n).astype(np.uint16)
        cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 6)))).tolist()
        bounds = [0, *cuts, n]
        ranges = list(itertools.pairwise(bounds))
        got = np.frombuffer(miniblock_encode._repetition_index(rep, max_rep, ranges), np.uint64)
        assert got.reshape(-1, 2).tolist() == [list(e) for e in _index_by_definition(rep, max_rep, ranges)]


@pytest.mark.parametrize(
    ("kind", "width", "fields"),
    [
        ("flat", 0, {"flat": {"bitsPerValue": "16"}}),
        (
            "rle",
            0,
            {
                "rle": {
                    "values": {"flat": {"bitsPerValue": "16"}},
                    "runLengths": {"flat": {"bitsPerValue": "8"}},
                }
            },
        ),
        ("inline", 0, {"inlineBitpacking": {"uncompressedBitsPerValue": "16"}}),
        (
            "out_of_line",
            5,
            {
                "outOfLineBitpacking": {
                    "uncompressedBitsPerValue": "16",
                    "values": {"flat": {"bitsPerValue": "5"}},
                }
            },
        ),
    ],
)
def test_level_encodings_are_made_once_and_describe_their_codec(kind: str, width: int, fields: Any) -> None:
    from google.protobuf.json_format import MessageToDict

    enc = level_compress.LevelCodec(kind, width).encoding()
    assert MessageToDict(enc) == fields
    assert level_compress.LevelCodec(kind, width).encoding() is enc  # shared: built once
    if kind == "out_of_line":
        assert MessageToDict(level_compress.LevelCodec(kind, 7).encoding()) != fields
