"""One-chunk pages of numbers, booleans and strings (a small append's), lists of them included,
are written by a shortcut (:mod:`lance_table.file.v2_1.tiny_page`): its files must be the general
path's, byte for byte.

Each table is written with the shortcut on and off, in 2.1 and 2.2, and the files are compared;
pylance reads one back. The shapes cover every type the shortcut takes, nulls (a few, all, inside
structs), values the general path bitpacks or run-length encodes, lists (null rows, empty lists,
null items, nested, in and of structs, maps), sliced arrays, pages of one value up to several
chunks, and the columns next to them that the shortcut leaves alone.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import tiny_page
from lance_table.file.v2_1.level_compress import FLAT, LevelCodec, choose, compress_chunks, compress_one
from lance_table.file.writer import LanceFileWriter

ROWS = (1, 2, 3, 7, 100, 255, 256, 300, 511, 512, 513, 1000, 2048, 4096, 4097)
VERSIONS = ("2.1", "2.2")


def _numbers(rows: int, seed: int) -> dict[str, pa.Array]:
    rng = np.random.default_rng(seed)
    nulls = rng.random(rows) < 0.2
    big = rng.integers(-(1 << 62), 1 << 62, rows)
    cols: dict[str, pa.Array] = {}
    for dtype in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(dtype)
        wide = rng.integers(info.min, info.max, rows, dtype=dtype, endpoint=True)
        cols[f"{dtype}"] = pa.array(wide)
        cols[f"{dtype}_nulls"] = pa.array(wide, mask=nulls)
        cols[f"{dtype}_small"] = pa.array(rng.integers(0, 3, rows).astype(dtype))  # bitpacked or RLE
    cols["ids"] = pa.array(np.arange(10_000, 10_000 + rows, dtype=np.int64))
    cols["runs"] = pa.array(np.repeat(big[: rows // 8 + 1], 8)[:rows])  # RLE
    cols["constant"] = pa.array(np.full(rows, 123456789, np.int64))
    cols["all_null"] = pa.array(big, mask=np.ones(rows, bool))
    cols["f16"] = pa.array(rng.random(rows).astype(np.float16))
    cols["f32"] = pa.array(rng.random(rows).astype(np.float32), mask=nulls)
    cols["f64"] = pa.array(rng.random(rows))
    cols["f64_nan"] = pa.array(np.where(nulls, np.nan, rng.random(rows)))
    cols["f64_whole"] = pa.array(rng.integers(0, 3, rows).astype(np.float64))
    cols["ts"] = pa.array(big // 1000, pa.timestamp("ms"))
    cols["ts_tz"] = pa.array(big // 1000, pa.timestamp("us", tz="UTC"), mask=nulls)
    cols["date32"] = pa.array(rng.integers(0, 50_000, rows).astype(np.int32), pa.date32())
    cols["date64"] = pa.array(rng.integers(0, 1 << 40, rows) * 86_400_000 // 86_400_000, pa.date64())
    cols["time32"] = pa.array(rng.integers(0, 86_400, rows).astype(np.int32), pa.time32("s"))
    cols["time64"] = pa.array(rng.integers(0, 86_400_000_000, rows), pa.time64("us"), mask=nulls)
    cols["duration"] = pa.array(big, pa.duration("ns"))
    cols["bool"] = pa.array(rng.random(rows) < 0.5)
    cols["bool_nulls"] = pa.array(rng.random(rows) < 0.5, mask=nulls)
    cols["bool_true"] = pa.array(np.ones(rows, bool))
    cols["bool_sliced"] = pa.array(rng.random(rows + 5) < 0.5, mask=rng.random(rows + 5) < 0.3).slice(3, rows)
    longer = rng.integers(-(1 << 40), 1 << 40, rows + 9)
    cols["int_sliced"] = pa.array(longer, mask=rng.random(rows + 9) < 0.3).slice(5, rows)
    struct_nulls = rng.random(rows) < 0.1
    cols["point"] = pa.StructArray.from_arrays(
        [pa.array(big), pa.array(rng.random(rows), mask=nulls), pa.array(rng.random(rows) < 0.5)],
        ["x", "y", "b"],
        mask=pa.array(struct_nulls),
    )
    # nullable fields of a struct without nulls: definition levels that are all 0
    cols["pair"] = pa.StructArray.from_arrays([pa.array(big), pa.array(rng.random(rows) < 0.5)], ["a", "b"])
    cols.update(_lists(rows, rng))
    cols["text"] = pa.array([f"v{i % 13}" if i % 5 else "" for i in range(rows)], mask=nulls)
    # strings and binary values: plain, page dictionaries (about half distinct either side of the
    # limit), empty, all null, sliced, near the full-zip width, FSST-sized pages, large offsets
    cols["unique"] = pa.array([f"user-{v}" for v in rng.integers(0, 1 << 40, rows)])
    cols["half"] = pa.array([f"h{i // 2}" for i in range(rows)], mask=rng.random(rows) < 0.05)
    cols["fewer"] = pa.array([f"h{i // 3}" for i in range(rows)])
    cols["binary"] = pa.array([bytes([i % 251]) * (i % 9) for i in range(rows)], pa.binary())
    cols["empty"] = pa.array([""] * rows, mask=rng.random(rows) < 0.3)
    cols["text_null"] = pa.array([None] * rows, pa.string())
    words = [f"w{i % 7}-{'x' * (i % 11)}" for i in range(rows + 6)]
    cols["text_sliced"] = pa.array(words, mask=rng.random(rows + 6) < 0.2).slice(4, rows)
    cols["near_wide"] = pa.array(["y" * (250 + i % 10) for i in range(rows)])
    cols["fsst_sized"] = pa.array([f"{'abcdefgh' * 24}-{i % 50}" for i in range(rows)])
    cols["large_text"] = pa.array([f"v{i % 13}" for i in range(rows)], pa.large_string())
    cols["dict"] = pa.array([f"k{i % 3}" for i in range(rows)]).dictionary_encode()
    cols["vec"] = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 4, dtype=np.float32)), 4)
    cols["decimal"] = pa.array([i * 3 for i in range(rows)], pa.decimal128(12, 2))
    return cols


def _lists(rows: int, rng: np.random.Generator) -> dict[str, pa.Array]:
    """Columns with repetition levels: lists of numbers, booleans and strings (page dictionaries
    with bitpacked or flat indices, plain), with null rows, empty lists and null items, nested
    lists, lists in and of structs, maps, large lists, slices, null rows that hold items."""
    cols: dict[str, pa.Array] = {}
    lists = [list(range(i % 4)) if i % 7 else None for i in range(rows)]
    cols["list"] = pa.array(lists, pa.list_(pa.int64()))
    cols["list_bool"] = pa.array([[True, False][: i % 3] for i in range(rows)], pa.list_(pa.bool_()))
    cols["tags"] = pa.array([["a", "b", "c"][: i % 4] for i in range(rows)], pa.list_(pa.string()))
    words = [
        [f"t{v}" if v % 5 else None for v in rng.integers(0, 9, i % 5)] if i % 6 else None
        for i in range(rows)
    ]
    cols["tags_nulls"] = pa.array(words, pa.list_(pa.string()))
    cols["list_unique"] = pa.array(
        [[f"u-{v}" for v in rng.integers(0, 1 << 30, i % 3)] for i in range(rows)], pa.list_(pa.string())
    )
    cols["list_small"] = pa.array([[i % 5] * (i % 3) for i in range(rows)], pa.list_(pa.int32()))
    cols["list_wide"] = pa.array(
        [rng.integers(-(1 << 60), 1 << 60, i % 3).tolist() for i in range(rows)], pa.list_(pa.int64())
    )
    cols["list_f64"] = pa.array([rng.random(i % 4).tolist() for i in range(rows)], pa.list_(pa.float64()))
    cols["list_ts"] = pa.array(
        [[i * 1000 + k for k in range(i % 3)] for i in range(rows)], pa.list_(pa.timestamp("ms"))
    )
    cols["list_runs"] = pa.array([[7] * 6 for _ in range(rows)], pa.list_(pa.int64()))  # RLE
    cols["large_list"] = pa.array([list(range(i % 3)) for i in range(rows)], pa.large_list(pa.int16()))
    cols["nested"] = pa.array(
        [[list(range(k)) for k in range(i % 3)] if i % 5 else None for i in range(rows)],
        pa.list_(pa.list_(pa.int64())),
    )
    inner = pa.array([["x", "yy"][: i % 3] for i in range(rows)], pa.list_(pa.string()))
    cols["struct_list"] = pa.StructArray.from_arrays([inner], ["l"], mask=pa.array(np.arange(rows) % 4 == 1))
    cols["list_struct"] = pa.array(
        [[{"x": k, "y": f"s{k}"} for k in range(i % 3)] for i in range(rows)],
        pa.list_(pa.struct([("x", pa.int64()), ("y", pa.string())])),
    )
    cols["map"] = pa.array(
        [[(f"k{k}", k) for k in range(i % 3)] for i in range(rows)], pa.map_(pa.string(), pa.int32())
    )
    longer = pa.array(
        [[f"w{i % 4}"] * (i % 3) if i % 5 else None for i in range(rows + 7)], pa.list_(pa.string())
    )
    cols["list_sliced"] = longer.slice(5, rows)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * 2)
    cols["null_rows_with_items"] = pa.ListArray.from_arrays(
        offsets, pa.array(np.arange(2 * rows) % 3), mask=pa.array(np.arange(rows) % 3 == 0)
    )
    return cols


def _table(rows: int, seed: int = 0) -> pa.Table:
    return pa.table(_numbers(rows, seed + rows))


def _assert_same_bytes(tiny: bytes, general: bytes) -> None:
    """The files are the same bytes (on failure, where they first differ: not a diff of both)."""
    if tiny != general:
        at = next((i for i, (a, b) in enumerate(zip(tiny, general)) if a != b), min(len(tiny), len(general)))
        pytest.fail(f"the files differ from byte {at} (sizes {len(tiny)} and {len(general)})")


def _assert_same(got: pa.Table, table: pa.Table) -> None:
    """The tables are equal, NaNs in the same places counting as equal."""
    nan = "f64_nan"
    assert got.drop_columns([nan]).equals(table.drop_columns([nan]))
    assert np.array_equal(got[nan].to_numpy(), table[nan].to_numpy(), equal_nan=True)


def _write(batches: list[pa.Table], version: str) -> bytes:
    sink = io.BytesIO()
    writer = LanceFileWriter(sink, batches[0].schema, version=version)
    for batch in batches:
        writer.write(batch)
    writer.close()
    return sink.getvalue()


def _both(batches: list[pa.Table], version: str, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    with monkeypatch.context() as m:
        m.setattr(tiny_page, "ENABLED", False)
        general = _write(batches, version)
    return _write(batches, version), general


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("rows", ROWS)
def test_tiny_pages_write_the_general_bytes(version: str, rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(rows)
    tiny, general = _both([table], version, monkeypatch)
    _assert_same_bytes(tiny, general)
    _assert_same(LanceFileReader(io.BytesIO(tiny)).read_all(), table)


@pytest.mark.parametrize("version", VERSIONS)
def test_pages_of_several_batches_write_the_general_bytes(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = [_table(rows, seed) for seed, rows in enumerate((3, 40, 100, 1))]
    tiny, general = _both(batches, version, monkeypatch)
    _assert_same_bytes(tiny, general)


def test_the_shortcut_writes_the_pages_it_is_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a test of nothing: the shortcut answers for plain and bitpacked numbers, booleans and
    strings (with and without nulls, in lists too) and page dictionaries, and leaves RLE and
    full-zip pages to the general path."""
    answered: list[str] = []
    original = tiny_page._page

    def spy(data: bytes, encoding: tuple[str, int], *args: object) -> object:
        answered.append(f"{encoding[0]}{encoding[1]}:{len(data)}")
        return original(data, encoding, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(tiny_page, "_page", spy)
    table = pa.table(
        {
            "ids": pa.array(np.arange(1 << 40, (1 << 40) + 100, dtype=np.int64)),
            "x": pa.array(np.linspace(0.1, 7.3, 100), mask=np.arange(100) % 9 == 0),
            "flag": pa.array(np.arange(100) % 3 == 0),
            "small": pa.array(np.arange(100) % 3),  # bitpacked
            "runs": pa.array(np.repeat(np.arange(10) << 40, 10)),  # RLE
            "name": pa.array([f"user-{i}" for i in range(100)]),  # plain
            "kind": pa.array(["a", "bb", "ccc", "dddd", "eeeee"] * 20),  # a page dictionary
            "long": pa.array(["z" * 300] * 99 + ["y"]),  # full-zip
            "tags": pa.array([["a", "b", "c"][: i % 4] for i in range(100)]),  # bitpacked indices
            "list_runs": pa.array([[7] * 6] * 100),  # RLE
            "list_text": pa.array([[f"v{i}"] for i in range(100)]),  # plain, in lists
        }
    )
    _write([table], "2.2")
    assert answered == [
        "flat64:800",
        "flat64:800",
        "flat1:13",
        "packed64:264",
        "variable32:1096",
        "flat32:400",
        "packed32:260",
        "variable32:696",
    ]


@pytest.mark.parametrize("large", [False, True])
def test_one_chunk_levels_are_the_general_bytes(large: bool) -> None:
    """The definition levels of a one-chunk page, compressed by the shortcut: the codec and the
    bytes of level_compress.choose and compress_chunks, whichever codec the levels get."""
    rng = np.random.default_rng(5)
    shapes = [np.zeros(n, np.uint16) for n in (1, 2, 100, 255, 256, 1024, 1025)]
    for n in (1, 2, 3, 50, 100, 254, 255, 256, 300, 1024, 1025, 4096):
        for share in (0.01, 0.1, 0.5, 0.9):
            shapes.append((rng.random(n) < share).astype(np.uint16) * rng.integers(1, 4, n).astype(np.uint16))
        shapes.append(np.repeat(rng.integers(0, 3, n // 40 + 1), 40)[:n].astype(np.uint16))
        shapes.append(np.ones(n, np.uint16))
    kinds = set()
    for defs in shapes:
        codec = choose(defs, large)
        chunks = compress_chunks(defs, np.array([0, defs.size], np.int64), codec)
        at, length = int(chunks.starts[0]), int(chunks.lengths[0])
        assert tiny_page._levels(defs, large) == (codec, chunks.data[at : at + length].tobytes())
        kinds.add(codec.kind)
    assert {"inline", "out_of_line", "rle" if large else "flat"} <= kinds


def test_compress_one_is_compress_chunks_of_one_chunk() -> None:
    """level_compress.compress_one (the one-chunk pages' levels, repetition levels too) makes the
    bytes of compress_chunks with one chunk, for every codec, chosen or not."""
    rng = np.random.default_rng(8)
    codecs = [FLAT, LevelCodec("rle"), LevelCodec("inline"), LevelCodec("out_of_line", 3)]
    for n in (1, 2, 7, 100, 255, 256, 700, 1024, 1025, 3000):
        for levels in (
            np.zeros(n, np.uint16),
            rng.integers(0, 2, n).astype(np.uint16),
            rng.integers(0, 6, n).astype(np.uint16),
            np.repeat(rng.integers(0, 3, n // 30 + 1), 30)[:n].astype(np.uint16),
        ):
            for codec in codecs:
                chunks = compress_chunks(levels, np.array([0, n], np.int64), codec)
                want = chunks.data[
                    int(chunks.starts[0]) : int(chunks.starts[0] + chunks.lengths[0])
                ].tobytes()
                assert compress_one(levels, codec) == want, (n, codec)


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_tiny_pages(tmp_path, version: str) -> None:
    lance_file = pytest.importorskip("lance.file")
    for rows in (1, 100, 513):
        table = _table(rows).drop_columns(["dict"])  # (pylance reads dictionaries back decoded)
        path = tmp_path / f"tiny-{rows}.lance"
        path.write_bytes(_write([table], version))
        _assert_same(lance_file.LanceFileReader(str(path)).read_all().to_table(), table)
