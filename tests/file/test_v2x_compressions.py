"""Value compressions of 2.1/2.2 pages beyond the common ones, checked against files pylance writes.

Every pylance case first asserts that the compression really appears in the file (pylance picks
compressions from the data, so a change there must not silently drop the coverage), then compares
our read_all, take and read_range with pylance's reader. Compressions pylance 14 never writes to
2.1/2.2 files (range, delta) are checked on hand-built encodings.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.file.container import read_metadata, unpack_encoding
from lance_table.file.inspect import describe
from lance_table.file.pageio import PageIO
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import compress as compress21
from lance_table.file.v2_1 import pervalue as pervalue21
from lance_table.file.v2_1 import values as values21
from lance_table.file.v2_1.layout import is_packed_struct as is_packed_struct21
from lance_table.file.v2_1.layout import leaf_columns
from lance_table.file.v2_1.values import Var
from lance_table.storage.sources import open_source

lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

N = 20_000
PACKED = {"lance-encoding:packed": "true"}
ZSTD = {"lance-encoding:compression": "zstd"}


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _write(path: Any, table: pa.Table, version: str) -> str:
    with lance_file.LanceFileWriter(str(path), table.schema, version=version) as w:
        w.write_batch(table)
    return str(path)


def _table(arr: pa.Array, metadata: dict[str, str] | None = None) -> pa.Table:
    return pa.table({"x": arr}, schema=pa.schema([pa.field("x", arr.type, metadata=metadata)]))


def _assert_uses(path: str, *needles: str) -> None:
    text = describe(path, 1)
    for needle in needles:
        assert needle in text, f"pylance no longer writes {needle!r} for this data:\n{text}"


def _assert_reads_like_pylance(path: str) -> None:
    theirs = lance_file.LanceFileReader(path).read_all().to_table()
    ours = LanceFileReader(path)
    assert ours.read_all().equals(theirs)
    rng = _rng()
    n = theirs.num_rows
    idx = rng.integers(0, n, 60)
    assert ours.take(idx).equals(theirs.take(pa.array(idx)).combine_chunks())
    lo = int(rng.integers(0, n))
    assert ours.read_range(lo, min(n, lo + 700)).equals(theirs.slice(lo, 700).combine_chunks())


def _check(tmp_path: Any, table: pa.Table, version: str, *needles: str) -> None:
    path = _write(tmp_path / "f.lance", table, version)
    _assert_uses(path, *needles)
    _assert_reads_like_pylance(path)


def _io() -> PageIO:
    return PageIO(open_source(b""), None, None, (), "test page")


# -- byte-stream split ---------------------------------------------------------------------------


def _bss_cases() -> dict[str, pa.Table]:
    rng = _rng()
    zstd = {"lance-encoding:compression": "zstd"}
    mask = rng.random(N) < 0.1
    return {
        # 40-bit integers: the top bytes are constant, so their byte streams have low entropy
        "int64_zstd": _table(pa.array(rng.integers(0, 1 << 40, N)), zstd),
        "int32_zstd": _table(pa.array(rng.integers(0, 1 << 20, N).astype(np.int32)), zstd),
        "float32_rounded_zstd": _table(
            pa.array(np.round(rng.normal(size=N) * 100, 1).astype(np.float32)), zstd
        ),
        "float32_forced_lz4": _table(
            pa.array(rng.normal(size=N).astype(np.float32)),
            {"lance-encoding:compression": "lz4", "lance-encoding:bss": "on"},
        ),
        "float64_forced_nulls": _table(
            pa.array(rng.normal(size=N), mask=mask), {**zstd, "lance-encoding:bss": "on"}
        ),
    }


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", sorted(_bss_cases()))
def test_byte_stream_split(tmp_path, version, name):
    _check(tmp_path, _bss_cases()[name], version, "byte_stream_split")


def test_byte_stream_split_layout():
    """Byte j of value i sits at j * n + i."""
    values = np.array([1.5, -2.25, 1e300], np.float64)
    split = values.view(np.uint8).reshape(3, 8).T.tobytes()
    enc = pb.CompressiveEncoding()
    enc.byte_stream_split.values.flat.bits_per_value = 64
    got = compress21.decode_values(enc, [split], 3, _io())
    assert isinstance(got, values21.Fixed)
    assert np.array_equal(np.frombuffer(got.data, np.float64), values)
    with pytest.raises(CorruptFileError):
        compress21.decode_values(enc, [split[:-1]], 3, _io())


# -- fixed-size lists with item validity ---------------------------------------------------------


def _fsl(values: pa.Array, dim: int, mask: np.ndarray | None = None) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(values, dim, mask=None if mask is None else pa.array(mask))


def _fsl_cases() -> dict[str, tuple[pa.Table, str]]:
    rng = _rng()
    n = 5000

    def nulls(k: int, p: float = 0.1) -> np.ndarray:
        return rng.random(k) < p

    floats = rng.normal(size=n * 128).astype(np.float32)
    inner = _fsl(pa.array(floats[: n * 6], mask=nulls(n * 6)), 2, nulls(n * 3))
    return {
        "float4": (_table(_fsl(pa.array(floats[: n * 4], mask=nulls(n * 4)), 4)), "mini_block"),
        "float4_null_rows": (
            _table(_fsl(pa.array(floats[: n * 4], mask=nulls(n * 4)), 4, nulls(n))),
            "mini_block",
        ),
        "int8_5": (
            _table(_fsl(pa.array(rng.integers(0, 100, n * 5).astype(np.int8), mask=nulls(n * 5)), 5)),
            "mini_block",
        ),
        "bool3": (_table(_fsl(pa.array(rng.random(n * 3) < 0.5, mask=nulls(n * 3)), 3)), "mini_block"),
        "nested_both_levels": (_table(_fsl(inner, 3)), "mini_block"),
        "nested_outer_level": (
            _table(_fsl(_fsl(pa.array(floats[: n * 6]), 2, nulls(n * 3)), 3)),
            "mini_block",
        ),
        "nested_inner_level": (
            _table(_fsl(_fsl(pa.array(floats[: n * 6], mask=nulls(n * 6)), 2), 3)),
            "mini_block",
        ),
        # wide lists go full-zip, where each value carries its validity bytes before its items
        "float128_full_zip": (
            _table(_fsl(pa.array(floats[: 2000 * 128], mask=nulls(2000 * 128)), 128)),
            "full_zip",
        ),
        "float128_full_zip_null_rows": (
            _table(_fsl(pa.array(floats[: 2000 * 128], mask=nulls(2000 * 128)), 128, nulls(2000))),
            "full_zip",
        ),
        # per-value form of nested lists: one bitmap per level with validity, for all its items
        "nested_full_zip_inner_level": (
            _table(_fsl(_fsl(pa.array(floats[: 1000 * 128], mask=nulls(1000 * 128)), 2), 64)),
            "full_zip",
        ),
        "nested_full_zip_both_levels": (
            _table(_fsl(_fsl(pa.array(floats[: 1000 * 128], mask=nulls(1000 * 128)), 2, nulls(64_000)), 64)),
            "full_zip",
        ),
        # items all null: the items are a constant without value and only the bitmaps are stored
        "all_items_null": (_table(_fsl(pa.nulls(2000 * 128, pa.float32()), 128)), "constant { }"),
        "all_items_null_short": (_table(_fsl(pa.nulls(n * 4, pa.float32()), 4)), "constant { }"),
    }


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", sorted(_fsl_cases()))
def test_fixed_size_list_with_item_validity(tmp_path, version, name):
    table, layout = _fsl_cases()[name]
    _check(tmp_path, table, version, "has_validity: true", layout)


def test_fixed_size_list_validity_bitmap_too_short():
    enc = pb.CompressiveEncoding()
    enc.fixed_size_list.items_per_value = 4
    enc.fixed_size_list.has_validity = True
    enc.fixed_size_list.values.flat.bits_per_value = 32
    data = np.arange(40, dtype=np.float32).tobytes()
    with pytest.raises(CorruptFileError):
        compress21.decode_values(enc, [b"\xff", data], 10, _io())  # 40 items need 5 bitmap bytes
    with pytest.raises(CorruptFileError):
        compress21.decode_values(enc, [b"\xff" * 5], 10, _io())  # per-value form: rows cut short


# -- packed structs ------------------------------------------------------------------------------


def _struct(children: list[pa.Array], names: list[str], mask: np.ndarray | None = None) -> pa.Array:
    return pa.StructArray.from_arrays(children, names=names, mask=None if mask is None else pa.array(mask))


def _packed_cases() -> dict[str, tuple[pa.Table, tuple[str, ...]]]:
    rng = _rng()
    a = pa.array(rng.integers(0, 1000, N).astype(np.int32))
    b = pa.array(rng.normal(size=N))
    fsb = pa.array([bytes(rng.integers(0, 256, 16, dtype=np.uint8)) for _ in range(2000)], pa.binary(16))
    ab = ["a", "b"]
    return {
        "int32_float64": (_table(_struct([a, b], ab), PACKED), ("bits_per_value: 96",)),
        "struct_nulls": (_table(_struct([a, b], ab, rng.random(N) < 0.2), PACKED), ("def_compression",)),
        "int8_int16": (
            _table(
                _struct(
                    [
                        pa.array(rng.integers(0, 100, N).astype(np.int8)),
                        pa.array(rng.integers(0, 999, N).astype(np.int16)),
                    ],
                    ab,
                ),
                PACKED,
            ),
            ("bits_per_value: 24",),
        ),
        "fixed_size_binary": (_table(_struct([fsb, b[:2000]], ab), PACKED), ("bits_per_value: 192",)),
        "legacy_key": (_table(_struct([a, b], ab), {"packed": "true"}), ("bits_per_value: 96",)),
    }


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", sorted(_packed_cases()))
def test_packed_struct(tmp_path, version, name):
    table, needles = _packed_cases()[name]
    path = _write(tmp_path / "f.lance", table, version)
    _assert_uses(path, "packed_struct {", *needles)
    assert len(read_metadata(open_source(path)).columns) == 1  # the whole struct is one column
    _assert_reads_like_pylance(path)


@pytest.mark.parametrize(
    ("metadata", "packed"),
    [
        ({"lance-encoding:packed": "true"}, True),
        ({"lance-encoding:packed": "TRUE"}, True),
        ({"lance-encoding:packed": "false"}, False),
        ({"lance-encoding:packed": "banana"}, False),
        ({"packed": "True"}, True),
        ({"packed": "false"}, False),
        ({"packed": "false", "lance-encoding:packed": "true"}, True),
        ({"packed": "true", "lance-encoding:packed": "false"}, True),
        ({}, False),
    ],
)
def test_packed_struct_rule_matches_pylance(tmp_path, metadata, packed):
    """Which structs pylance stores as one column (its rule differs from the 2.0 one)."""
    arr = _struct([pa.array(np.arange(10, dtype=np.int32)), pa.array(np.arange(10.0))], ["a", "b"])
    path = _write(tmp_path / "f.lance", _table(arr, metadata), "2.2")
    meta = read_metadata(open_source(path))
    assert len(meta.columns) == (1 if packed else 2)
    assert is_packed_struct21(meta.roots[0]) is packed
    assert max(leaf_columns(list(meta.roots)).values()) + 1 == len(meta.columns)


def test_packed_struct_bad_widths():
    enc = pb.CompressiveEncoding()
    enc.packed_struct.bits_per_value.extend([32, 12])
    enc.packed_struct.values.flat.bits_per_value = 44
    with pytest.raises(CorruptFileError):
        compress21.decode_values(enc, [b"\0" * 64], 8, _io())
    enc.packed_struct.bits_per_value[1] = 16
    with pytest.raises(CorruptFileError):  # rows are 48 bits, the values say 44
        compress21.decode_values(enc, [b"\0" * 64], 8, _io())


# -- variable packed structs and per-value general compression (full-zip, 2.2) -------------------


def _full_zip_values(path: str) -> tuple[Any, Var, PageIO]:
    """The value compression and the values (length prefixes removed) of a full-zip page whose
    values are ``[u32 length][bytes]`` without repetition/definition levels."""
    source = open_source(path)
    meta = read_metadata(source)
    col = meta.columns[0]
    assert len(col.pages) == 1
    page = col.pages[0]
    _, layout = unpack_encoding(page.encoding, source, "page")
    fz = layout.full_zip_layout
    assert fz.bits_per_offset == 32 and not fz.bits_rep and not fz.bits_def
    io = PageIO(source, page, col, meta.global_buffers, "page")
    data = bytes(io.whole(0))
    starts, lengths, at = [], [], 0
    while at < len(data):  # test helper: a plain walk over the values
        (length,) = struct.unpack_from("<I", data, at)
        starts.append(at + 4)
        lengths.append(length)
        at += 4 + length
    u8 = np.frombuffer(data, np.uint8)
    body = b"".join(u8[s : s + n].tobytes() for s, n in zip(starts, lengths))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return fz.value_compression, Var(body, offsets), io


def _full_zip_cases() -> dict[str, tuple[pa.Table, str]]:
    rng = _rng()
    n = 3000
    a = pa.array(rng.integers(0, 1000, n).astype(np.int32))
    words = pa.array([("abc" * (i % 7)) if i % 11 else "" for i in range(n)])
    return {
        "int32_string": (_table(_struct([a, words], ["a", "s"]), PACKED), "variable_packed_struct"),
        "fsl_float64": (
            _table(
                _struct(
                    [
                        _fsl(pa.array(rng.normal(size=n * 3).astype(np.float32)), 3),
                        pa.array(rng.normal(size=n)),
                    ],
                    ["v", "b"],
                ),
                PACKED,
            ),
            "variable_packed_struct",
        ),
        "three_fields_64bit_lengths": (
            _table(
                _struct(
                    [
                        a,
                        pa.array(words.to_pylist(), pa.large_string()),
                        pa.array([b"x" * (i % 5) for i in range(n)]),
                    ],
                    ["a", "s", "b"],
                ),
                PACKED,
            ),
            "bits_per_length: 64",
        ),
        "huge_field_zstd": (
            _table(
                _struct([pa.array(["q" * 40_000 + str(i) for i in range(40)]), a[:40]], ["s", "a"]), PACKED
            ),
            "COMPRESSION_ALGORITHM_ZSTD",
        ),
        "long_strings_zstd": (
            _table(
                pa.array(["y" * 300 + str(i) for i in range(2000)]), {"lance-encoding:compression": "zstd"}
            ),
            "general {",
        ),
        "huge_strings": (_table(pa.array(["z" * 40_000 + str(i) for i in range(40)] + [""])), "general {"),
    }


@pytest.mark.parametrize("name", sorted(_full_zip_cases()))
def test_per_value_compressions(tmp_path, name):
    table, needle = _full_zip_cases()[name]
    path = _write(tmp_path / "f.lance", table, "2.2")
    _assert_uses(path, "full_zip_layout", needle)
    enc, values, io = _full_zip_values(path)
    decoded = pervalue21.decode_per_value(enc, values, io)
    theirs = lance_file.LanceFileReader(path).read_all().to_table().column(0).combine_chunks()
    assert values21.to_arrow(decoded, table.schema.field(0).type, table.num_rows, io).equals(theirs)


@pytest.mark.parametrize("name", ["int32_string", "long_strings_zstd"])
def test_per_value_compressions_through_the_reader(tmp_path, name):
    table, _ = _full_zip_cases()[name]
    _assert_reads_like_pylance(_write(tmp_path / "f.lance", table, "2.2"))


def test_variable_packed_struct_damage():
    enc = pb.CompressiveEncoding()
    field = enc.variable_packed_struct.fields.add()
    field.value.flat.bits_per_value = 32
    field.bits_per_value = 32
    field = enc.variable_packed_struct.fields.add()
    field.value.variable.offsets.flat.bits_per_value = 32
    field.bits_per_length = 32
    row = struct.pack("<iI", 5, 3) + b"abc"
    good = pervalue21.decode_per_value(enc, Var(row, np.array([0, len(row)])), _io())
    arr = values21.to_arrow(good, pa.struct([("a", pa.int32()), ("s", pa.string())]), 1, _io())
    assert arr.to_pylist() == [{"a": 5, "s": "abc"}]
    for bad in (row[:-1], row + b"!", struct.pack("<iI", 5, 1 << 31) + b"abc", row[:3]):
        with pytest.raises(CorruptFileError):
            pervalue21.decode_per_value(enc, Var(bad, np.array([0, len(bad)])), _io())


def test_per_value_zstd_damage():
    enc = pb.CompressiveEncoding()
    enc.general.compression.scheme = pb.COMPRESSION_ALGORITHM_ZSTD
    enc.general.values.variable.offsets.flat.bits_per_value = 32
    frame = pa.Codec("zstd").compress(b"hello world", asbytes=True)
    good = struct.pack("<Q", 11) + frame
    got = pervalue21.decode_per_value(enc, Var(good, np.array([0, len(good)])), _io())
    assert values21.to_arrow(got, pa.string(), 1, _io()).to_pylist() == ["hello world"]
    for bad in (good[:5], struct.pack("<Q", 1 << 60) + frame, struct.pack("<Q", 11) + b"garbage!"):
        with pytest.raises(CorruptFileError):
            pervalue21.decode_per_value(enc, Var(bad, np.array([0, len(bad)])), _io())
    enc.general.compression.scheme = pb.COMPRESSION_ALGORITHM_LZ4
    with pytest.raises(UnsupportedFormatError, match="lz4"):
        pervalue21.decode_per_value(enc, Var(good, np.array([0, len(good)])), _io())


def _raw_zstd_frame(data: bytes) -> bytes:
    """A zstd frame that does not state its content size: one raw block, 1 KiB window."""
    return b"\x28\xb5\x2f\xfd\x00\x00" + ((len(data) << 3) | 1).to_bytes(3, "little") + data


def _zstd_values(frames: list[bytes], lengths: list[int]) -> Var:
    """Per-value ZSTD values ``[u64 length][frame]`` with the given (possibly wrong) lengths."""
    values = [struct.pack("<Q", n) + f for f, n in zip(frames, lengths)]
    return Var(b"".join(values), np.concatenate([[0], np.cumsum([len(v) for v in values])]))


def test_per_value_zstd_lengths_checked_value_by_value():
    """A damaged length that moves a value boundary but keeps the total is a typed error (it used
    to shift bytes from one value to the next: the lengths were only checked as a sum)."""
    enc = pb.CompressiveEncoding()
    enc.general.compression.scheme = pb.COMPRESSION_ALGORITHM_ZSTD
    enc.general.values.variable.offsets.flat.bits_per_value = 32
    zstd = pa.Codec("zstd")
    texts = [b"hello", b"abc", b"world!", b"", b"q" * 70_000, b"de"]
    # headers stating 1-byte and (70 000 bytes) 4-byte content sizes; "abc" and "de" state none
    frames = [zstd.compress(t, asbytes=True) for t in texts]
    frames[1], frames[5] = _raw_zstd_frame(texts[1]), _raw_zstd_frame(texts[5])
    lengths = [len(t) for t in texts]
    got = pervalue21.decode_per_value(enc, _zstd_values(frames, lengths), _io())
    assert values21.to_arrow(got, pa.binary(), len(texts), _io()).to_pylist() == texts
    # the header of the first frame says 5 bytes: its value cannot claim 6 (nor "abc" 2)
    shifted = [6, 2, *lengths[2:]]
    with pytest.raises(CorruptFileError, match="value 0 claims 6 bytes but its zstd frame header says 5"):
        pervalue21.decode_per_value(enc, _zstd_values(frames, shifted), _io())
    shifted = [*lengths[:4], 69_999, 3]
    with pytest.raises(CorruptFileError, match=r"value 4 claims 69999 bytes .* says 70000"):
        pervalue21.decode_per_value(enc, _zstd_values(frames, shifted), _io())
    # frames without a stated size are decompressed one by one against their own lengths
    bare = [_raw_zstd_frame(b"abc"), _raw_zstd_frame(b"de")]
    for shifted in ([4, 1], [2, 3], [0, 5]):
        with pytest.raises(CorruptFileError, match="compressed value 0 does not decompress"):
            pervalue21.decode_per_value(enc, _zstd_values(bare, shifted), _io())
    got = pervalue21.decode_per_value(enc, _zstd_values(bare, [3, 2]), _io())
    assert values21.to_arrow(got, pa.binary(), 2, _io()).to_pylist() == [b"abc", b"de"]


# -- per-value ZSTD with null rows (a null row of a full-zip page stores no bytes) ---------------


def _long_values(n: int, null: np.ndarray, t: pa.DataType | None = None) -> pa.Array:
    """``n`` values of about 300 letters (long enough that pylance stores them full-zip, each
    compressed on its own), null where ``null``; ``t`` is a string or binary type."""
    rng = _rng()
    words = [bytes(rng.integers(97, 123, int(k), dtype=np.uint8)) for k in rng.integers(280, 320, n)]
    return pa.array([None if z else w for z, w in zip(null.tolist(), words)], pa.binary()).cast(
        t or pa.string()
    )


_ROWS = np.arange(2000)
NULL_PATTERNS: dict[str, np.ndarray] = {
    "every_5th": _ROWS % 5 == 0,
    "sparse": _ROWS % 397 == 3,
    "dense": _ROWS % 7 != 0,
    "ends": (_ROWS < 10) | (_ROWS >= 1990),
    "none": np.zeros(_ROWS.size, bool),
}
LONG_TYPES = {"string": pa.string(), "binary": pa.binary(), "large_string": pa.large_string()}


def _check_per_value_nulls(path: str, source: pa.Table, *needles: str) -> None:
    _assert_uses(path, "full_zip_layout", "general {", *needles)
    _assert_reads_like_pylance(path)
    assert LanceFileReader(path).read_all().equals(source)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("nulls", sorted(NULL_PATTERNS))
@pytest.mark.parametrize("type_name", sorted(LONG_TYPES))
def test_per_value_zstd_null_rows(tmp_path, version, nulls, type_name):
    """Null rows of a full-zip page reach the per-value decompressor as empty values: they decode to
    empty values (the levels make them null) instead of being rejected as too short."""
    null = NULL_PATTERNS[nulls]
    table = _table(_long_values(null.size, null, LONG_TYPES[type_name]), ZSTD)
    path = _write(tmp_path / "f.lance", table, version)
    _check_per_value_nulls(
        path, table, "COMPRESSION_ALGORITHM_ZSTD", *(["bits_def: 1"] if null.any() else [])
    )


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_per_value_null_rows_lz4_asked(tmp_path, version):
    """Asked for LZ4, pylance 14 compresses full-zip values with ZSTD; whatever it picks must read."""
    null = NULL_PATTERNS["every_5th"]
    table = _table(_long_values(null.size, null, pa.large_binary()), {"lance-encoding:compression": "lz4"})
    _check_per_value_nulls(_write(tmp_path / "f.lance", table, version), table, "bits_def: 1")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_per_value_zstd_null_rows_nested(tmp_path, version):
    """Null and empty lists, null items, and null struct rows around a per-value ZSTD child."""
    n = 1000
    rng = _rng()
    items = _long_values(2 * n, NULL_PATTERNS["every_5th"])
    lengths = rng.integers(0, 4, n)
    null_list = rng.random(n) < 0.15
    lengths[null_list] = 0
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    item = pa.field("item", pa.string(), metadata=ZSTD)
    lists = pa.ListArray.from_arrays(offsets, items[: int(lengths.sum())], mask=pa.array(null_list))
    table = _table(lists.cast(pa.list_(item)))
    _check_per_value_nulls(_write(tmp_path / "l.lance", table, version), table, "bits_rep: 1", "bits_def: 2")

    child = pa.struct([pa.field("s", pa.string(), metadata=ZSTD), pa.field("i", pa.int64())])
    structs = pa.StructArray.from_arrays(
        [items[:n], pa.array(np.arange(n))], names=["s", "i"], mask=pa.array(rng.random(n) < 0.1)
    )
    table = pa.table({"x": structs.cast(child)})
    path = _write(tmp_path / "s.lance", table, version)
    _assert_uses(path, "full_zip_layout", "general {", "bits_def: 2")
    _assert_reads_like_pylance(path)
    assert LanceFileReader(path).read_all().equals(table)


def _zstd_per_value_encoding() -> Any:
    enc = pb.CompressiveEncoding()
    enc.general.compression.scheme = pb.COMPRESSION_ALGORITHM_ZSTD
    enc.general.values.variable.offsets.flat.bits_per_value = 32
    return enc


def _rows(rows: list[bytes]) -> Var:
    return Var(b"".join(rows), np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64))


def test_per_value_zstd_empty_values():
    """An empty value (a null row) decodes to an empty value; a non-empty value shorter than its
    length header is still damage; errors name a value by its row, null rows counted."""
    enc = _zstd_per_value_encoding()
    zstd = pa.Codec("zstd")
    texts = [b"hello", b"", b"world!"]  # an empty text is still a header and a frame
    stored = [struct.pack("<Q", len(t)) + zstd.compress(t, asbytes=True) for t in texts]
    rows = [b"", stored[0], b"", b"", stored[1], stored[2], b""]
    got = pervalue21.decode_per_value(enc, _rows(rows), _io())
    expected = [b"", b"hello", b"", b"", b"", b"world!", b""]
    assert values21.to_arrow(got, pa.binary(), len(rows), _io()).to_pylist() == expected
    for n in (1, 3):  # only null rows
        got = pervalue21.decode_per_value(enc, _rows([b""] * n), _io())
        assert values21.to_arrow(got, pa.binary(), n, _io()).to_pylist() == [b""] * n

    for cut in (1, 7):
        with pytest.raises(CorruptFileError, match="shorter than its length header"):
            pervalue21.decode_per_value(enc, _rows([*rows[:5], stored[2][:cut], b""]), _io())
    wrong = struct.pack("<Q", 5) + stored[2][8:]
    with pytest.raises(CorruptFileError, match="value 5 claims 5 bytes but its zstd frame header says 6"):
        pervalue21.decode_per_value(enc, _rows([*rows[:5], wrong, b""]), _io())
    bare = struct.pack("<Q", 2) + _raw_zstd_frame(b"abc")
    with pytest.raises(CorruptFileError, match="compressed value 5 does not decompress"):
        pervalue21.decode_per_value(enc, _rows([*rows[:5], bare, b""]), _io())
    backwards = Var(b"".join(rows), np.array([0, 0, len(stored[0]), 3, len(b"".join(rows))]))
    with pytest.raises(CorruptFileError, match="go backwards"):
        pervalue21.decode_per_value(enc, backwards, _io())


# -- range, delta, constant (hand-built: pylance 14 writes range/delta only to 2.3 files) -------


def _u(values: values21.Values, bits: int) -> list[int]:
    assert isinstance(values, values21.Fixed) and values.bits == bits
    return np.frombuffer(values.data, {32: np.uint32, 64: np.uint64}[bits]).tolist()


def test_range():
    enc = pb.CompressiveEncoding()
    enc.range.bits_per_value = 32
    enc.range.start = 3
    enc.range.step = 5
    assert _u(compress21.decode_values(enc, [], 4, _io()), 32) == [3, 8, 13, 18]
    enc.range.start = (1 << 32) - 8
    with pytest.raises(CorruptFileError, match="overflows"):
        compress21.decode_values(enc, [], 4, _io())
    enc.range.bits_per_value = 64
    assert _u(compress21.decode_values(enc, [], 4, _io()), 64)[-1] == (1 << 32) + 7
    enc.range.bits_per_value = 16
    with pytest.raises(CorruptFileError):
        compress21.decode_values(enc, [], 4, _io())


def test_delta():
    enc = pb.CompressiveEncoding()
    enc.delta.bits_per_value = 64
    enc.delta.base = 5
    enc.delta.deltas.flat.bits_per_value = 64
    deltas = np.array([0, 4, 3], np.uint64).tobytes()
    assert _u(compress21.decode_values(enc, [deltas], 4, _io()), 64) == [5, 5, 9, 12]
    # differences stored bit-packed, 32-bit values
    enc.delta.bits_per_value = 32
    enc.delta.deltas.Clear()
    enc.delta.deltas.out_of_line_bitpacking.uncompressed_bits_per_value = 32
    enc.delta.deltas.out_of_line_bitpacking.values.flat.bits_per_value = 32
    raw = np.array([1, 2, 3], np.uint32).tobytes()  # a short tail is stored unpacked
    assert _u(compress21.decode_values(enc, [raw], 4, _io()), 32) == [5, 6, 8, 11]
    enc.delta.deltas.Clear()
    enc.delta.deltas.flat.bits_per_value = 32
    with pytest.raises(CorruptFileError, match="overflows"):
        compress21.decode_values(enc, [np.array([1, 0xFFFFFFFF], np.uint32).tobytes()], 3, _io())
    with pytest.raises(CorruptFileError):
        compress21.decode_values(enc, [b"\0\0"], 3, _io())


def test_constant():
    enc = pb.CompressiveEncoding()
    enc.constant.value = struct.pack("<i", -7)
    got = compress21.decode_values(enc, [], 3, _io())
    assert values21.to_arrow(got, pa.int32(), 3, _io()).to_pylist() == [-7, -7, -7]
    enc.constant.ClearField("value")
    got = compress21.decode_values(enc, [], 3, _io())
    assert values21.to_arrow(got, pa.int32(), 3, _io()).to_pylist() == [None] * 3


# -- clear errors for what is not there -------------------------------------------------------------


def test_unset_and_unknown_compressions():
    with pytest.raises(CorruptFileError, match="no compression"):
        compress21.decode_values(pb.CompressiveEncoding(), [b""], 1, _io())
    unknown = pb.CompressiveEncoding()
    unknown.ParseFromString(
        bytes([0x98, 0x06, 1])
    )  # field 99 (varint key 792), value 1: a future compression
    with pytest.raises(UnsupportedFormatError, match="number 99"):
        compress21.decode_values(unknown, [b""], 1, _io())
    with pytest.raises(UnsupportedFormatError, match="number 99"):
        compress21.decode_block(unknown, b"", 1, _io())


def test_missing_buffer_is_corrupt_not_index_error():
    enc = pb.CompressiveEncoding()
    enc.fixed_size_list.items_per_value = 2
    enc.fixed_size_list.has_validity = True
    enc.fixed_size_list.values.flat.bits_per_value = 32
    with pytest.raises(CorruptFileError):
        compress21.decode_values(enc, [], 4, _io())


def test_variable_packed_struct_in_a_mini_block_is_named():
    enc = pb.CompressiveEncoding()
    enc.variable_packed_struct.fields.add()
    with pytest.raises(UnsupportedFormatError, match="variable packed struct"):
        compress21.decode_values(enc, [b""], 1, _io())
