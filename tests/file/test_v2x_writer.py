"""Writing Lance 2.1 and 2.2 files: every type, read back exactly by pylance and by our reader.

Each case is written with small page budgets (several pages per column, lists cut across mini-block
chunks and pages) and compared in full, by ``take_rows`` and by ``read_range``. A guard test checks
that the layouts the writer claims to use (mini-block, full-zip, constant, repetition indexes)
really appear in the files.
"""

from __future__ import annotations

import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typecases import compression_cases, type_cases

from lance_table.errors import SchemaError, UnsupportedFormatError
from lance_table.file.container import FileVersion, read_metadata, unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter
from lance_table.storage.sources import LocalFileSource

lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

VERSIONS = ("2.1", "2.2")
UNSUPPORTED: set[str] = set()  # every type is written now


def _write(
    path: Path, table: pa.Table, version: str, page_size: int = 1 << 20, batch: int | None = None
) -> None:
    with LanceFileWriter(path, table.schema, version=version, page_size_bytes=page_size) as w:
        for b in table.to_batches(max_chunksize=batch) if batch else [table]:
            w.write(b)


def _check(path: Path, table: pa.Table, seed: int = 0) -> None:
    """pylance and our reader both give back ``table``: whole, by take and by range."""
    theirs = lance_file.LanceFileReader(str(path))
    assert_tables_equal(theirs.read_all().to_table(), table)
    ours = LanceFileReader(path)
    assert_tables_equal(ours.read_all(), table)
    n = table.num_rows
    if not n:
        return
    rng = np.random.default_rng(seed)
    idx = np.unique(rng.integers(0, n, min(n, 25)))
    assert_tables_equal(theirs.take_rows(idx.tolist()).to_table(), table.take(pa.array(idx)))
    assert_tables_equal(ours.take(idx), table.take(pa.array(idx)))
    lo = int(rng.integers(0, n))
    count = min(n - lo, 1 + int(rng.integers(0, 300)))
    assert_tables_equal(theirs.read_range(lo, count).to_table(), table.slice(lo, count))
    assert_tables_equal(ours.read_range(lo, lo + count), table.slice(lo, count))


def _layouts(path: Path) -> list[list[str]]:
    """Per column, the layout of each page."""
    source = LocalFileSource(str(path))
    meta = read_metadata(source)
    out = []
    for i, col in enumerate(meta.columns):
        kinds = []
        for p, page in enumerate(col.pages):
            _, layout = unpack_encoding(page.encoding, source, f"column {i} page {p}")
            kinds.append(layout.WhichOneof("layout"))
            if kinds[-1] == "mini_block_layout" and layout.mini_block_layout.HasField("rep_compression"):
                assert layout.mini_block_layout.repetition_index_depth == 1
                kinds[-1] = "mini_block_layout+index"
        out.append(kinds)
    return out


# -- cases ---------------------------------------------------------------------------------------


def _lists(rng: np.random.Generator, n: int, longest: int, make, t: pa.DataType) -> pa.Array:
    """``n`` lists of 1..longest items with ~10% null and ~10% empty lists."""
    lengths = rng.integers(1, longest + 1, n)
    u = rng.random(n)
    lengths[u < 0.2] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    items = make(int(offsets[-1]))
    mask = pa.array(u < 0.1)
    cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    off = pa.array(offsets, pa.int64() if cls is pa.LargeListArray else pa.int32())
    return cls.from_arrays(off, items, type=t, mask=mask)


def nested_cases() -> dict[str, pa.Table]:
    rng = np.random.default_rng(5)
    n = 3000

    def ints(k: int) -> pa.Array:
        return pa.array(rng.integers(0, 1000, k), pa.int32(), mask=rng.random(k) < 0.1)

    def strs(k: int) -> pa.Array:
        return pa.array([f"v{i}" * (i % 5) for i in range(k)], mask=rng.random(k) < 0.1)

    def wide(k: int) -> pa.Array:
        return pa.array(["w" * (250 + i % 40) for i in range(k)], mask=rng.random(k) < 0.2)

    struct_t = pa.struct([("a", pa.int32()), ("b", pa.string())])

    def structs(k: int) -> pa.Array:
        return pa.StructArray.from_arrays(
            [ints(k), strs(k)], fields=list(struct_t), mask=pa.array(rng.random(k) < 0.15)
        )

    def vectors(k: int) -> pa.Array:
        return pa.FixedSizeListArray.from_arrays(pa.array(rng.random(k * 80).astype(np.float32)), 80)

    inner = pa.list_(pa.int64())

    def inner_lists(k: int) -> pa.Array:
        return _lists(rng, k, 4, lambda m: pa.array(np.arange(m)), inner)

    keys = pa.map_(pa.string(), pa.float64())
    map_lengths = rng.integers(0, 4, n)
    map_offsets = np.concatenate([[0], np.cumsum(map_lengths)])
    m = int(map_offsets[-1])
    maps = pa.MapArray.from_arrays(
        pa.array(map_offsets, pa.int32()),
        pa.array([f"k{i}" for i in range(m)]),
        pa.array(rng.random(m), mask=rng.random(m) < 0.2),
        type=keys,
        mask=pa.array(rng.random(n) < 0.1),
    )
    long_rows = _lists(rng, 40, 9000, lambda k: pa.array(np.arange(k)), pa.list_(pa.int64()))
    empties = pa.array([[1, 2]] + [[]] * 40000 + [[3]] + [None] * 20000 + [[4, 5]], pa.list_(pa.int16()))
    return {
        "list_int": pa.table({"l": _lists(rng, n, 8, ints, pa.list_(pa.int32()))}),
        "large_list_str": pa.table({"l": _lists(rng, n, 6, strs, pa.large_list(pa.string()))}),
        "list_struct": pa.table({"l": _lists(rng, n, 5, structs, pa.list_(struct_t))}),
        "list_list": pa.table({"l": _lists(rng, n, 4, inner_lists, pa.list_(inner))}),
        "list_wide_strings": pa.table({"l": _lists(rng, 300, 4, wide, pa.list_(pa.string()))}),
        "list_vectors": pa.table({"l": _lists(rng, 300, 3, vectors, pa.list_(pa.list_(pa.float32(), 80)))}),
        "map": pa.table({"m": maps}),
        "struct_of_list": pa.table(
            {
                "s": pa.StructArray.from_arrays(
                    [_lists(rng, n, 3, ints, pa.list_(pa.int32())), strs(n)],
                    names=["l", "t"],
                    mask=pa.array(rng.random(n) < 0.2),
                )
            }
        ),
        "long_lists": pa.table({"l": long_rows}),
        "many_empty_lists": pa.table({"l": empties}),
        "wide_strings": pa.table({"s": wide(500)}),
        "wide_vectors_nulls": pa.table(
            {
                "v": pa.FixedSizeListArray.from_arrays(
                    pa.array(rng.random(200 * 70).astype(np.float32), mask=rng.random(200 * 70) < 0.1),
                    70,
                    mask=pa.array(rng.random(200) < 0.2),
                )
            }
        ),
        "wide_fixed_binary": pa.table(
            {"b": pa.array([bytes([i % 256]) * 300 for i in range(100)], pa.binary(300))}
        ),
        "bool_lists": pa.table(
            {"l": _lists(rng, n, 5, lambda k: pa.array(rng.random(k) < 0.5), pa.list_(pa.bool_()))}
        ),
        "all_null_lists": pa.table({"l": pa.array([None, [], None] * 50, pa.list_(pa.int32()))}),
        "all_null_struct_child": pa.table(
            {
                "s": pa.StructArray.from_arrays(
                    [pa.nulls(90, pa.int64())], names=["x"], mask=pa.array([i % 3 == 0 for i in range(90)])
                )
            }
        ),
        "empty_struct": pa.table({"s": pa.array([{}] * 20, pa.struct([]))}),
        "null_type": pa.table({"x": pa.nulls(30)}),
    }


def _all_cases() -> dict[str, pa.Table]:
    cases = {**type_cases(400), **compression_cases(400), **nested_cases()}
    return {k: v for k, v in cases.items() if k not in UNSUPPORTED}


CASES = _all_cases()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_types_round_trip(tmp_path, name, version):
    table = CASES[name]
    path = tmp_path / "f.lance"
    _write(path, table, version, page_size=4096, batch=700)
    _check(path, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_one_page_per_column(tmp_path, version):
    table = pa.table({k: v.column(0) for k, v in type_cases(300).items() if k not in UNSUPPORTED})
    path = tmp_path / "f.lance"
    _write(path, table, version)
    _check(path, table, seed=1)
    assert all(len(pages) == 1 for pages in _layouts(path))


def _page_rows(path: Path) -> list[list[int]]:
    """Per column, the rows of each page."""
    meta = read_metadata(LocalFileSource(str(path)))
    return [[int(page.length) for page in col.pages] for col in meta.columns]


@pytest.mark.parametrize("version", VERSIONS)
def test_pages_hold_whole_batches(tmp_path, version):
    """A batch past the page budget is one page, as pylance writes it; smaller batches gather
    until they pass the budget; a batch past ``max_page_bytes`` is cut into even pages."""
    table = pa.table({"a": pa.array(np.arange(20_000, dtype=np.int64))})
    one = tmp_path / "one.lance"  # 7 KB batches against a 4 KiB budget (the cap is 8 KiB)
    with LanceFileWriter(one, table.schema, version=version, page_size_bytes=4096) as w:
        for b in table.slice(0, 900), table.slice(900, 900):
            w.write(b)
    assert _page_rows(one) == [[900, 900]]
    _check(one, table.slice(0, 1800))
    # with the default budget (8 MiB), as pylance: each 9.6 MB batch is a page
    large = pa.table({"a": pa.array(np.arange(2_400_000, dtype=np.int64))})
    for name, writer in (("ours", LanceFileWriter), ("theirs", lance_file.LanceFileWriter)):
        with writer(str(tmp_path / name), large.schema, version=version) as w:
            for b in large.slice(0, 1_200_000), large.slice(1_200_000):
                w.write_batch(b)
        assert _page_rows(tmp_path / name) == [[1_200_000, 1_200_000]], name

    small = tmp_path / "small.lance"  # batches of 100 rows gather into pages of whole batches
    _write(small, table.slice(0, 3000), version, page_size=4096, batch=100)
    (rows,) = _page_rows(small)
    assert sum(rows) == 3000 and all(r % 100 == 0 for r in rows)
    # several batches a page, and no more than the budget and one batch
    assert all(r > 100 and (r - 100) * 8 < 4096 for r in rows[:-1])
    _check(small, table.slice(0, 3000))

    big = tmp_path / "big.lance"  # 160 KB in one batch, at most 40 KB a page: four even pages
    with LanceFileWriter(
        big, table.schema, version=version, page_size_bytes=4096, max_page_bytes=45_000
    ) as w:
        w.write(table)
    assert _page_rows(big) == [[5000] * 4]
    _check(big, table)
    with pytest.raises(ValueError):
        LanceFileWriter(tmp_path / "bad.lance", table.schema, version=version, max_page_bytes=0)


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_files(tmp_path, version):
    table = pa.table({k: v.column(0).slice(0, 0) for k, v in nested_cases().items()})
    path = tmp_path / "empty.lance"
    _write(path, table, version)
    _check(path, table)
    with LanceFileWriter(tmp_path / "none.lance", table.schema, version=version):
        pass
    _check(tmp_path / "none.lance", table)


def test_metadata_and_footer(tmp_path):
    schema = pa.schema(
        [
            pa.field("m", pa.int64(), False, metadata={"unit": "m"}),
            pa.field("s", pa.struct([pa.field("x", pa.string(), metadata={"k": "v"})])),
        ],
        metadata={"owner": "me"},
    )
    table = pa.table([pa.array(range(10)), pa.array([{"x": str(i)} for i in range(10)])], schema=schema)
    for version, expected in (("2.1", FileVersion.V2_1), ("stable", FileVersion.V2_2)):
        path = tmp_path / f"{version}.lance"
        with LanceFileWriter(path, schema, version=version) as w:
            w.write(table)
        assert read_metadata(LocalFileSource(str(path))).version is expected
        got = lance_file.LanceFileReader(str(path)).read_all().to_table()
        assert got.schema.equals(schema, check_metadata=True)
        assert LanceFileReader(path).schema.equals(schema, check_metadata=True)
        assert got.equals(table)


def test_written_file_lists_leaves(tmp_path):
    schema = pa.schema(
        [("a", pa.int32()), ("s", pa.struct([("x", pa.int8()), ("l", pa.list_(pa.string()))]))]
    )
    w = LanceFileWriter(tmp_path / "f.lance", schema, version="2.2")
    w.write(
        pa.table(
            [pa.array([1], pa.int32()), pa.array([{"x": 1, "l": ["a"]}], schema.field("s").type)],
            schema=schema,
        )
    )
    info = w.close()
    assert info.field_ids == (0, 2, 4) and info.column_indices == (0, 1, 2)
    assert info.version is FileVersion.V2_2


@pytest.mark.parametrize("version", VERSIONS)
def test_layouts_guard(tmp_path, version):
    """The layouts claimed in the module docstrings appear where they should."""
    cases = nested_cases()
    # long distinct strings go full-zip; few distinct ones (``wide``) are a dictionary, as pylance
    rng = np.random.default_rng(4)

    def long(k: int) -> pa.Array:
        return pa.array([f"{i}:" + "w" * int(n) for i, n in enumerate(rng.integers(1100, 1400, k))])

    cases["list_long_strings"] = pa.table({"l": _lists(rng, 100, 4, long, pa.list_(pa.string()))})
    cases["long_strings"] = pa.table({"s": long(300)})
    expect = {
        "list_int": "mini_block_layout+index",
        "list_wide_strings": "mini_block_layout+index",
        "list_long_strings": "full_zip_layout",
        "list_vectors": "full_zip_layout",
        "wide_strings": "mini_block_layout",
        "long_strings": "full_zip_layout",
        "wide_vectors_nulls": "full_zip_layout",
        "all_null_lists": "constant_layout",
        "null_type": "constant_layout",
    }
    for name, layout in expect.items():
        path = tmp_path / f"{name}.lance"
        _write(path, cases[name], version)
        assert {k for pages in _layouts(path) for k in pages} == {layout}, name
    path = tmp_path / "many.lance"
    _write(path, cases["list_int"], version, page_size=2000)
    (pages,) = _layouts(path)
    assert len(pages) > 3
    # a take of a few rows of a long list column touches few chunks: the index is there
    path = tmp_path / "long.lance"
    _write(path, cases["long_lists"], version)
    (pages,) = _layouts(path)
    assert set(pages) == {"mini_block_layout+index"}
    source = LocalFileSource(str(path))
    page = read_metadata(source).columns[0].pages[0]
    raw = source.read_ranges([(page.buffer_offsets[-1], page.buffer_sizes[-1])])[0]
    index = np.frombuffer(raw, np.uint64).reshape(-1, 2)
    assert int(index[:, 0].sum()) == page.length
    assert (index[:, 1] > 0).any() and (index[:, 0] == 0).any()  # rows run across chunks
    # runs of null and empty lists too long for a chunk's levels go full-zip
    path = tmp_path / "empties.lance"
    _write(path, cases["many_empty_lists"], version)
    assert _layouts(path) == [["full_zip_layout"]]


def test_mini_block_chunk_grammar(tmp_path):
    """2.1 chunks use u16 words and sizes, 2.2 u32 with has_large_chunk; chunks hold 2^k values."""
    # negative floats use all 64 bits: flat, 512 per 4 KiB chunk
    table = pa.table({"x": pa.array((np.arange(10000) - 5000) / 7), "i": pa.array(np.arange(10000))})
    for version, large in (("2.1", False), ("2.2", True)):
        path = tmp_path / f"{version}.lance"
        _write(path, table, version)
        source = LocalFileSource(str(path))
        meta = read_metadata(source)
        page = meta.columns[0].pages[0]
        _, layout = unpack_encoding(page.encoding, source, "page")
        mini = layout.mini_block_layout
        assert mini.has_large_chunk is large
        raw = source.read_ranges([(page.buffer_offsets[0], page.buffer_sizes[0])])[0]
        words = np.frombuffer(raw, np.uint32 if large else np.uint16).astype(np.int64)
        counts = 1 << (words & 0xF)
        assert (counts[:-1] == 512).all() and words[-1] & 0xF == 0
        # bitpacked integers: one 1024-value FastLanes block per chunk, as pylance reads them
        page = meta.columns[1].pages[0]
        _, layout = unpack_encoding(page.encoding, source, "page")
        assert layout.mini_block_layout.value_compression.HasField("inline_bitpacking")
        raw = source.read_ranges([(page.buffer_offsets[0], page.buffer_sizes[0])])[0]
        words = np.frombuffer(raw, np.uint32 if large else np.uint16).astype(np.int64)
        assert ((1 << (words[:-1] & 0xF)) == 1024).all()


@pytest.mark.parametrize("version", VERSIONS)
def test_unsupported_types_raise(tmp_path, version):
    for name in sorted(UNSUPPORTED):
        table = {**type_cases(20), **compression_cases(20)}[name]
        with pytest.raises(UnsupportedFormatError, match="not written"):
            LanceFileWriter(tmp_path / "x.lance", table.schema, version=version)
    schema = pa.schema([("s", pa.struct([]))])
    w = LanceFileWriter(tmp_path / "y.lance", schema, version=version)
    with pytest.raises(UnsupportedFormatError, match="struct<>"):
        w.write(pa.table({"s": pa.array([{}, None], pa.struct([]))}))
        w.close()
    w.abort()
    w = LanceFileWriter(tmp_path / "z.lance", pa.schema([("a", pa.int32())]), version=version)
    with pytest.raises(SchemaError):
        w.write(pa.table({"a": pa.array([1], pa.int64())}))
    w.abort()


# -- random tables ---------------------------------------------------------------------------------

LEAVES = [
    pa.bool_(),
    pa.int8(),
    pa.uint32(),
    pa.int64(),
    pa.float16(),
    pa.float64(),
    pa.date32(),
    pa.timestamp("us"),
    pa.decimal128(9, 2),
    pa.binary(3),
    pa.string(),
    pa.large_binary(),
    pa.list_(pa.int16(), 3),
]


def _types() -> st.SearchStrategy[pa.DataType]:
    def nested(child: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
        return st.one_of(
            st.builds(pa.list_, child),
            st.builds(pa.large_list, child),
            st.builds(pa.map_, st.sampled_from([pa.string(), pa.int32()]), child),
            st.lists(child, min_size=1, max_size=3).map(
                lambda ts: pa.struct([(f"c{i}", t) for i, t in enumerate(ts)])
            ),
        )

    return st.recursive(st.sampled_from(LEAVES), nested, max_leaves=4)


def _generate(t: pa.DataType, n: int, rng: np.random.Generator, null_p: float) -> pa.Array:
    np_mask = rng.random(n) < null_p if null_p else None
    mask = pa.array(np_mask) if np_mask is not None else None
    if pa.types.is_struct(t):
        kids = [_generate(f.type, n, rng, null_p) for f in t]
        return pa.StructArray.from_arrays(kids, fields=list(t), mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 5, n))])
        total = int(offsets[-1])
        if pa.types.is_map(t):
            keys = _generate(t.key_type, total, rng, 0.0)
            items = _generate(t.item_type, total, rng, null_p)
            return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, items, type=t, mask=mask)
        values = _generate(t.value_type, total, rng, null_p)
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        off = pa.array(offsets, pa.int64() if cls is pa.LargeListArray else pa.int32())
        return cls.from_arrays(off, values, type=t, mask=mask)
    if pa.types.is_fixed_size_list(t):
        values = _generate(t.value_type, n * t.list_size, rng, null_p)
        return pa.FixedSizeListArray.from_arrays(values, type=t, mask=mask)
    if pa.types.is_boolean(t):
        return pa.array(rng.random(n) < 0.5, t, mask=np_mask)
    if pa.types.is_string(t) or pa.types.is_large_binary(t):
        words = ["y" * int(k) for k in rng.integers(0, 300, n)]
        return pa.array(words if pa.types.is_string(t) else [w.encode() for w in words], t, mask=np_mask)
    if pa.types.is_fixed_size_binary(t):
        return pa.array([bytes([int(k)]) * t.byte_width for k in rng.integers(0, 256, n)], t, mask=np_mask)
    if pa.types.is_decimal(t):
        return pa.array(
            [decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-1000, 1000, n)], t, mask=np_mask
        )
    if pa.types.is_floating(t):
        return pa.array(rng.standard_normal(n).astype(t.to_pandas_dtype()), t, mask=np_mask)
    raw = rng.integers(-100, 100, n)
    if pa.types.is_integer(t):
        return pa.array(np.abs(raw) if not pa.types.is_signed_integer(t) else raw, t, mask=np_mask)
    base = pa.int32() if t.bit_width == 32 else pa.int64()
    return pa.array(raw, base, mask=np_mask).view(t)


@st.composite
def _tables(draw: st.DrawFn) -> tuple[pa.Table, int, int, str]:
    schema = pa.schema([pa.field(f"f{i}", draw(_types())) for i in range(draw(st.integers(1, 3)))])
    n = draw(st.integers(0, 400))
    null_p = draw(st.sampled_from([0.0, 0.2, 1.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    table = pa.table([_generate(f.type, n, rng, null_p) for f in schema], schema=schema)
    return (
        table,
        draw(st.sampled_from([300, 5000, 1 << 20])),
        draw(st.integers(1, 500)),
        draw(st.sampled_from(VERSIONS)),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_tables())
def test_random_tables_round_trip(tmp_path_factory, case):
    table, page_size, batch, version = case
    path = tmp_path_factory.mktemp("v2x") / "f.lance"
    _write(path, table, version, page_size=page_size, batch=batch)
    try:
        theirs = lance_file.LanceFileReader(str(path)).read_all().to_table()
    except BaseException as exc:  # pylance panics surface as BaseException; let hypothesis shrink them
        raise AssertionError(f"pylance failed to read the file: {exc}") from None
    assert_tables_equal(theirs, table)
    assert_tables_equal(LanceFileReader(path).read_all(), table)


@pytest.mark.parametrize("wide", [False, True])
def test_shredding_reads_validity_at_any_offset(monkeypatch, wide: bool) -> None:
    """Arrays sliced at offsets that are not whole bytes of their bitmaps shred as their copies do
    (validity is unpacked from the bitmaps, which start mid-byte then); with 64-bit positions
    (lists of 2^31 items or more) as with 32-bit ones."""
    from lance_table.file.v2_1 import encode as encode21
    from lance_table.file.v2_1 import levels
    from lance_table.file.v2_1.levels import shred
    from lance_table.schema import build_tree, fields_from_arrow

    rng = np.random.default_rng(4)
    n = 500
    ints = pa.array(np.where(rng.random(n) < 0.2, None, rng.integers(0, 9, n)).tolist(), pa.int64())
    point = pa.StructArray.from_arrays(
        [ints, pa.array(rng.random(n))], ["a", "b"], mask=pa.array(rng.random(n) < 0.1)
    )
    rows = [[None if (i + j) % 5 == 0 else i + j for j in range(i % 4)] for i in range(n)]
    lists = pa.array([None if i % 7 == 0 else row for i, row in enumerate(rows)], pa.list_(pa.int32()))
    cats = pa.array([None if i % 6 == 0 else f"c{i % 3}" for i in range(n)]).dictionary_encode()
    table = pa.table({"ints": ints, "point": point, "lists": lists, "cats": cats})
    roots = build_tree(fields_from_arrow(table.schema))
    for offset, length in (3, 400), (13, 101), (1, 498):
        for root, column in zip(roots, table.columns):
            sliced = column.chunk(0).slice(offset, length)
            copy = pa.concat_arrays([sliced.slice(0, 1), sliced.slice(1)])  # fresh buffers at offset 0
            if pa.types.is_dictionary(sliced.type):
                copy = pa.DictionaryArray.from_arrays(pa.array(sliced.indices.to_pylist()), sliced.dictionary)
            assert copy.offset == 0
            for path in encode21.leaf_paths(root):
                want = shred(copy, path)
                with monkeypatch.context() as patch:
                    if wide:  # every position in 64 bits, compared with 32-bit ones
                        patch.setattr(levels, "_NARROW_LIMIT", 0)
                    got = shred(sliced, path)
                assert np.array_equal(got.codes, want.codes), (root.name, offset)
                assert (got.rep is None) == (want.rep is None)
                assert got.rep is None or np.array_equal(got.rep, want.rep)
                assert (got.visible is None) == (want.visible is None)
                assert got.visible is None or np.array_equal(got.visible, want.visible)
                assert got.values.to_pylist() == want.values.to_pylist()
                assert got.nulls.tolist() == want.nulls.tolist() and got.nulls.any()


@pytest.mark.parametrize("version", VERSIONS)
def test_null_lists_holding_items_write_without_them(tmp_path: Path, version: str) -> None:
    """Null lists whose offsets still span items (Arrow allows it) store none of those items:
    at the top, under a struct, sliced, with a dictionary and in a list of lists."""
    rng = np.random.default_rng(23)
    n = 3000
    lengths = rng.integers(0, 5, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    null = rng.random(n) < 0.2
    total = int(offsets[-1])
    words = pa.array([f"w{i % 37}" for i in range(total)], mask=rng.random(total) < 0.1)
    strings = pa.ListArray.from_arrays(pa.array(offsets), words, mask=pa.array(null))
    ints = pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.arange(total)), mask=pa.array(null))
    codes = pa.ListArray.from_arrays(pa.array(offsets), words.dictionary_encode(), mask=pa.array(null))
    holder = pa.StructArray.from_arrays([ints], names=["l"], mask=pa.array(rng.random(n) < 0.1))
    outer = pa.ListArray.from_arrays(pa.array(np.arange(0, n + 1, 3, dtype=np.int32)), strings[: n - n % 3])
    table = pa.table(
        {
            "strings": strings,
            "ints": ints,
            "codes": codes,
            "holder": holder,
            "outer": pa.concat_arrays([outer, pa.nulls(n - len(outer), outer.type)]),
        }
    )
    assert int((lengths[null] > 0).sum()) > 100  # null rows that hold items
    for part in (table, table.slice(17, 2000)):
        path = tmp_path / f"t{len(part)}.lance"
        _write(path, part, version, page_size=1 << 14)
        _check(path, part)
