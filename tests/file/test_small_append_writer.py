"""Fixed costs of the 2.1/2.2 writer that every small append pays, cut without changing a byte:
what the writer remembers between files (checked leaves, the stored schema) must never serve
another schema, and each shortcut (the chunk plan's first size, chunk words and ``Any`` wrappers
packed in Python, the distinct count of small text pages) must give what the long way gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_table.errors import PackedStructError, UnsupportedFormatError
from lance_table.file.v2_1 import encode, miniblock_fast
from lance_table.file.v2_1.value_kinds import FixedValues, Leaf
from tests.helpers import file_bytes, pylance_file_table

_write = file_bytes
_read = pylance_file_table


@pytest.mark.interop
def test_checked_leaves_are_per_schema(tmp_path) -> None:
    """A leaf checked for one schema says nothing of a leaf of the same name in another: an
    unstorable type is refused after a storable one, and list depth and blob columns are each
    schema's own."""
    plain = pa.table({"x": pa.array([1, 2, 3], pa.int64())})
    listed = pa.table({"x": pa.array([[1], [], [2, 3]], pa.list_(pa.int64()))})
    blob_field = pa.field("x", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    blobs = pa.table({"x": pa.array([b"a", b"bb", None], pa.large_binary())}).cast(pa.schema([blob_field]))
    for table in (plain, listed, blobs, plain, listed):
        assert _read(_write(table), tmp_path).equals(table)
    bad = pa.table({"x": pa.array([True, False, True]).dictionary_encode()})
    with pytest.raises(UnsupportedFormatError, match="dictionaries of bool"):
        _write(bad)
    encode._LEAVES.clear()
    assert _read(_write(plain), tmp_path).equals(plain)


@pytest.mark.interop
def test_checked_leaves_are_per_version(tmp_path) -> None:
    """The same leaf is checked again for another file version (2.1 refuses what 2.2 writes)."""
    packed = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])
    field = pa.field("s", packed, metadata={"packed": "true"})
    table = pa.table({"s": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "yy"}], packed)}).cast(
        pa.schema([field])
    )
    assert _read(_write(table, "2.2"), tmp_path).equals(table)
    with pytest.raises(PackedStructError, match="need Lance file format"):
        _write(table, "2.1")


def _plan_by_search(values: FixedValues, n: int, head: int, limit: int, max_values: int, per_level: int):
    """The chunk plan of fixed-width values by trying every power of two from the largest."""

    def total(count: int) -> tuple[int, int]:
        sizes = values.sizes(0, count)
        return head + miniblock_fast.pad8(per_level * count) + sum(
            miniblock_fast.pad8(s) for s in sizes
        ), sum(sizes)

    aim = values.chunk_aim()
    for k in range(min(max_values.bit_length() - 1, miniblock_fast.MAX_LOG_VALUES), 0, -1):
        size, value_bytes = total(1 << k)
        if size <= limit and (k == 1 or aim is None or value_bytes <= aim):
            return 1 << k, k
    return None


@pytest.mark.parametrize("width", [1, 2, 3, 4, 8, 12, 16, 64, 100, 1000, 3000, 5000])
@pytest.mark.parametrize("per_value", [1, 3, 16])
def test_fixed_plan_matches_the_full_search(width: int, per_value: int) -> None:
    """The fixed-width plan starts its search at the largest chunk within the aim: the same
    chunks as trying every size from 4096 values down."""
    items = np.zeros((per_value * 8, width), np.uint8)
    values = FixedValues(None, 1, width * per_value, leaf=Leaf(width * 8, table=items), per_value=per_value)
    for head, limit, per_level in ((8, 1 << 18, 0), (8, 1 << 15, 2), (16, 1 << 15, 0)):
        for max_values in (4096, 1024, 7):
            got = miniblock_fast._fixed_plan(values, 8, head, limit, max_values, per_level)
            assert got == _plan_by_search(values, 8, head, limit, max_values, per_level)


@pytest.mark.interop
def test_remembered_descriptors_follow_schema_and_metadata(tmp_path) -> None:
    """The schema a file stores is remembered between files, but never served to a file of other
    fields or other schema metadata: each file reads back with its own schema."""
    tables = [
        pa.table({"x": pa.array([1, 2], pa.int64())}),
        pa.table({"x": pa.array(["a", "b"])}),
        pa.table({"x": pa.array([1, 2], pa.int64())}).replace_schema_metadata({"k": "1"}),
        pa.table({"x": pa.array([1, 2], pa.int64())}).replace_schema_metadata({"k": "2"}),
        pa.table({"x": pa.array([1, 2], pa.int64())}),
    ]
    for table in tables * 2:
        got = _read(_write(table), tmp_path)
        assert got.equals(table)
        assert got.schema.metadata == table.schema.metadata


@pytest.mark.parametrize("large", [False, True])
def test_chunk_words_of_few_chunks_are_the_numpy_words(large: bool) -> None:
    """The chunk words of a small page, packed in Python, are those numpy packs for larger ones."""
    from lance_table.file.v2_1 import miniblock_encode

    rng = np.random.default_rng(3)
    limit = (1 << 18) if large else (1 << 15)
    for count in (1, 2, 5, miniblock_encode._FEW_WORDS, miniblock_encode._FEW_WORDS + 1):
        sizes = (rng.integers(1, limit // 8 + 1, count) * 8).tolist()
        logs = [*rng.integers(1, 13, count - 1).tolist(), 0]
        words = ((np.array(sizes) // 8 - 1) << 4) | np.array(logs)
        expected = words.astype(np.uint32 if large else np.uint16).tobytes()
        assert miniblock_encode._chunk_words(sizes, logs, large) == expected


def test_any_wrappers_are_the_bytes_protobuf_writes() -> None:
    """Page encodings are wrapped in ``Any`` by hand: the same bytes as protobuf's own message."""
    from google.protobuf import any_pb2

    from lance_table.file.container import URL_PAGE_LAYOUT, any_bytes

    for url in (URL_PAGE_LAYOUT, "", "x" * 200):
        for size in (0, 1, 127, 128, 300, 16383, 16384, 2_100_000):
            value = bytes(range(256)) * (size // 256) + bytes(size % 256)
            expected = any_pb2.Any(type_url=url, value=value).SerializeToString()
            assert any_bytes(url, value) == expected


@pytest.mark.parametrize("kind", [pa.string(), pa.binary()])
def test_small_pages_make_the_dictionary_arrow_makes(kind: pa.DataType) -> None:
    """A small page's dictionary, made in a Python dict, is the one Arrow's hash kernel makes (the
    same values in the same order, the same indices, 0 for nulls), and it is ruled out exactly
    when the kernel's count rules it out: more than half of its values distinct (nulls aside)."""
    from lance_table.file.compression import dictionary
    from lance_table.file.v2_1 import values_encode

    rng = np.random.default_rng(11)
    for n in (1, 2, 100, 101, 200, values_encode.SET_COUNT_MAX):
        for distinct in sorted({1, max(n // 2 - 1, 1), max(n // 2, 1), n // 2 + 1, n}):
            words = [f"w{i}é" if i % 3 else "" for i in rng.integers(0, distinct, n)]
            words[: min(distinct, n)] = [f"w{i}é" if i % 3 else "" for i in range(min(distinct, n))]
            nulls = rng.random(n) < 0.1
            for mask in (None, nulls, np.ones(n, bool)):
                whole = pa.array(words, mask=mask).cast(kind)
                for arr in (whole, whole.slice(1)):  # (a slice: its own rows only)
                    items, indices = dictionary.encode(arr)
                    exact = (len(items) - items.null_count) * 2 > len(arr)
                    small = values_encode.small_dictionary(arr)
                    assert (small is None) == exact, (n, distinct)
                    if small is not None:
                        assert small[0].type == items.type and small[0].equals(items)
                        assert small[1].dtype == np.uint32 and np.array_equal(small[1], indices)


def test_a_schema_without_extension_types_is_stored_as_it_is() -> None:
    """Every write asks for the storage form of its schema: without extension types at any depth
    (fixed-size lists, lists, maps, structs) it is the schema itself, not a copy built anew."""
    from lance_table.extensions import storage_schema

    schema = pa.schema(
        [
            pa.field("vec", pa.list_(pa.float32(), 4)),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("big", pa.large_list(pa.int64())),
            pa.field("m", pa.map_(pa.string(), pa.int32())),
            pa.field("s", pa.struct([pa.field("a", pa.list_(pa.int8(), 2))])),
        ]
    )
    assert storage_schema(schema) is schema


def test_the_inline_encoding_bound_shrinks_with_more_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from lance_table.file import writer

    monkeypatch.setenv("LANCE_CPU_THREADS", "2")
    assert writer._inline_bytes() == writer.INLINE_ENCODE_BYTES
    monkeypatch.setenv("LANCE_CPU_THREADS", "16")
    assert writer._inline_bytes() == writer.INLINE_ENCODE_BYTES // 8
    monkeypatch.setenv("LANCE_CPU_THREADS", "512")
    assert writer._inline_bytes() == writer.MIN_INLINE_ENCODE_BYTES
    monkeypatch.setattr(writer, "INLINE_ENCODE_BYTES", 0)  # (the pools forced, as tests do)
    assert writer._inline_bytes() == 0


@pytest.mark.parametrize("kind", [pa.string(), pa.large_binary()])
def test_remembered_variable_parts_are_each_arrays_own(kind: pa.DataType) -> None:
    """The offsets and bytes :func:`variable_parts` keeps for the last arrays are those of the
    array asked about (sliced, replaced by another of the same size once it is gone), and no
    caller can change them for the next one."""
    import gc

    from lance_table.file.v2_1.value_kinds import variable_parts

    def expected(arr: pa.Array) -> tuple[list[int], bytes]:
        values = [v.as_py() for v in arr]
        raw = [v.encode() if isinstance(v, str) else v for v in values]
        return [0, *np.cumsum([len(v) for v in raw]).tolist()], b"".join(raw)

    base = pa.array(["ab", "cde", "", "fghij"]).cast(kind)
    for arr in (base, base.slice(1, 2), base.slice(2)):
        offsets, data = variable_parts(arr)
        assert (offsets.tolist(), data.tobytes()) == expected(arr)
        assert variable_parts(arr)[0] is offsets  # asked again: the kept answer
        with pytest.raises(ValueError):
            offsets[0] = 5
        with pytest.raises(ValueError):
            data[:1] = 0
    for round_ in range(3):  # new arrays (maybe at a dead one's address) get their own answer
        arr = pa.array([f"v{round_}-{i}" * (round_ + 1) for i in range(4)]).cast(kind)
        offsets, data = variable_parts(arr)
        assert (offsets.tolist(), data.tobytes()) == expected(arr)
        del offsets, data
        del arr
        gc.collect()


def test_lists_of_leaves_shred_as_the_walk_down_their_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A top-level list of a leaf is shredded in one pass (levels._shred_list_leaf): its levels,
    slots and values are those of the general walk, for lists and large lists of numbers,
    booleans and strings, with null rows, empty lists and null items, sliced, and all null;
    null rows that hold items are left to the walk."""
    from lance_table.file.v2_1 import levels
    from lance_table.schema import build_tree, fields_from_arrow

    rng = np.random.default_rng(12)
    cases = []
    for n in (1, 3, 100, 700):
        lengths = rng.integers(0, 5, n)
        rows = [[int(v) if v % 6 else None for v in rng.integers(0, 50, k)] for k in lengths]
        for kind in (pa.int64(), pa.string(), pa.bool_()):
            items = [
                None
                if r is None
                else [
                    None
                    if v is None
                    else (v if kind == pa.int64() else f"s{v}" if kind == pa.string() else v % 2 == 0)
                    for v in r
                ]
                for r in rows
            ]
            nulls = [None if rng.random() < 0.2 else r for r in items]
            for list_type in (pa.list_(kind), pa.large_list(kind)):
                for data in (items, nulls, [[x for x in r if x is not None] for r in items], [None] * n):
                    arr = pa.array(data, list_type)
                    cases += [arr, arr.slice(n // 3, n - n // 3)]
    offsets = pa.array(np.arange(0, 21, 2, dtype=np.int32))
    holding = pa.ListArray.from_arrays(
        offsets, pa.array(np.arange(20)), mask=pa.array(np.arange(10) % 3 == 0)
    )
    fast = 0
    for arr in [*cases, holding]:
        path = encode.leaf_paths(build_tree(fields_from_arrow(pa.schema([pa.field("l", arr.type)])))[0])[0]
        got = levels.shred(arr, path)
        fast += levels._shred_list_leaf(arr) is not None
        with monkeypatch.context() as patch:
            patch.setattr(levels, "_shred_list_leaf", lambda _: None)
            want = levels.shred(arr, path)
        assert got.rows == want.rows and got.values.equals(want.values)
        for name in ("rep", "codes", "visible", "nulls", "empties"):
            mine, theirs = getattr(got, name), getattr(want, name)
            assert (mine is None) == (theirs is None), name
            assert mine is None or (mine.dtype == theirs.dtype and np.array_equal(mine, theirs)), name
    assert levels._shred_list_leaf(holding) is None
    assert fast == len(cases)


def _vector_arrays() -> list[pa.Array]:
    """Fixed-size lists as appends bring them: whole, sliced, nested, with null rows, of
    booleans, over a child that is itself a slice, and two columns sharing one child buffer."""
    rng = np.random.default_rng(5)
    flat = pa.array(rng.random(4000, dtype=np.float32))
    vec = pa.FixedSizeListArray.from_arrays(flat, 16)
    nested = pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(flat, 4), 4)
    nulls = pa.FixedSizeListArray.from_arrays(flat, 8, mask=pa.array(rng.random(500) < 0.2))
    bools = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(800) < 0.5), 8)
    sliced_child = pa.FixedSizeListArray.from_arrays(flat.slice(37, 1600), 16)
    return [
        *(vec, vec.slice(3, 40), nested, nested.slice(10, 7)),
        *(nulls, nulls.slice(1, 99), bools.slice(5, 50), sliced_child),
    ]


@pytest.mark.parametrize("k", range(8))
def test_the_vector_bound_is_never_below_nbytes(k: int) -> None:
    """The cheap bound of a piece of fixed-size lists (the sizes of the buffers it lists, never
    pyarrow's slow ``nbytes`` walk) is at least what ``nbytes`` counts, as every decision that
    depends on it assumes: a page budget is only ever passed early by it, never late."""
    from lance_table.file.v2_1 import levels

    arr = _vector_arrays()[k]
    piece = levels._shred_top_leaf(arr)
    bound = piece.nbytes_bound()
    assert bound >= arr.nbytes
    assert bound == sum(b.size for b in arr.buffers() if b is not None)
    assert piece.nbytes() == arr.nbytes  # (and the exact count stays pyarrow's)


@pytest.mark.interop
def test_vector_pages_fill_where_the_exact_count_fills_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """Many small appends of vectors under a small page budget: the pages fill at the same rows,
    and the file has the same bytes, whether pieces are first counted by the cheap bound or by
    ``nbytes`` (the writer makes the count exact wherever a page may fill)."""
    import io

    from lance_table.file.v2_1 import levels
    from lance_table.file.writer import LanceFileWriter

    rng = np.random.default_rng(9)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(300 * 16, dtype=np.float32)), 16)
    table = pa.table({"id": pa.array(np.arange(300)), "vec": vec})

    def written() -> bytes:
        sink = io.BytesIO()
        with LanceFileWriter(sink, table.schema, version="2.2", page_size_bytes=3000) as writer:
            for start in range(0, 300, 7):
                writer.write(table.slice(start, 7))
        return sink.getvalue()

    assert levels._fixed_size_lists(vec.type)  # (the cheap bound is what the writer counts first)
    cheap = written()
    monkeypatch.setattr(levels, "_fixed_size_lists", lambda t: False)
    exact = written()
    assert cheap == exact
    assert _read(cheap, tmp_path).equals(table)  # (pylance reads the pages back)
