"""Page statistics of legacy files: the values pylance writes, the seed's rules, and property tests.

A small decoder written here (test-only) reads the statistics of a legacy file, so that the values
in pylance's files and ours can be compared with each other and with the worked examples of the
format notes. Hypothesis checks :func:`compute_stats` against the rules of the format document,
computed by brute force, and against pylance on random data (whole files compared byte for byte).
"""

from __future__ import annotations

import decimal
import io
import itertools
import math
import struct
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_table._proto import file_pb2
from lance_table.file.legacy.stats_encode import (
    compute_stats,
    has_statistics,
    increment_binary,
    increment_utf8,
)
from lance_table.file.legacy.writer import LegacyFileWriter

lance = pytest.importorskip("lance")

_NUMPY = {
    "int8": "<i1",
    "uint8": "<u1",
    "int16": "<i2",
    "uint16": "<u2",
    "int32": "<i4",
    "uint32": "<u4",
    "int64": "<i8",
    "uint64": "<u8",
    "float": "<f4",
    "double": "<f8",
    "date32:day": "<i4",
    "date64:ms": "<i8",
}


# ---------------------------------------------------------------------------------------------
# a test-only decoder of legacy statistics


def _decode_page(data: bytes, lt: str, pos: int, n: int) -> list[Any]:
    if lt in _NUMPY:
        return np.frombuffer(data, _NUMPY[lt], n, pos).tolist()
    if lt == "bool":
        bits = np.frombuffer(data, np.uint8, (n + 7) // 8, pos)
        return np.unpackbits(bits, bitorder="little")[:n].astype(bool).tolist()
    if lt.startswith("decimal:128:"):
        return [
            int.from_bytes(data[pos + 16 * i : pos + 16 * i + 16], "little", signed=True) for i in range(n)
        ]
    assert lt in ("string", "large_string", "binary", "large_binary"), lt
    bounds = np.frombuffer(data, "<i8", n + 1, pos).tolist()
    raw = [data[a:b] for a, b in itertools.pairwise(bounds)]
    # zero length is null in a nullable VAR_BINARY column
    return [(v.decode() if "string" in lt else v) if v else None for v in raw]


def read_stats(data: bytes) -> dict[int, dict[str, list[Any]]]:
    """{data field id: {"null_count": [...], "min_value": [...], "max_value": [...]}}."""
    pos = struct.unpack_from("<q", data, len(data) - 16)[0]
    (n,) = struct.unpack_from("<I", data, pos)
    meta = file_pb2.Metadata()
    meta.ParseFromString(data[pos + 4 : pos + 4 + n])
    if not meta.HasField("statistics"):
        return {}
    st_meta = meta.statistics
    rows = max(st_meta.fields) + 1
    table = np.frombuffer(data, "<i8", rows * 2, st_meta.page_table_position).reshape(rows, 2)
    structs = {f.id: f for f in st_meta.schema if f.logical_type == "struct"}
    out: dict[int, dict[str, list[Any]]] = {}
    for f in st_meta.schema:
        if f.id in structs:
            continue
        page_pos, length = (int(x) for x in table[f.id])
        out.setdefault(int(structs[f.parent_id].name), {})[f.name] = _decode_page(
            data, f.logical_type, page_pos, length
        )
    return out


def _pylance_file(tmp_path: Path, table: pa.Table, group: int = 1024) -> bytes:
    uri = tmp_path / uuid.uuid4().hex
    lance.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_group=group)
    (path,) = (uri / "data").glob("*.lance")
    return path.read_bytes()


def _our_file(table: pa.Table, group: int = 1024) -> bytes:
    out = io.BytesIO()
    w = LegacyFileWriter(out, table.schema, max_rows_per_group=group, writer_version=("lance", "14.0.2"))
    w.write_batch(table)
    w.close()
    return out.getvalue()


# ---------------------------------------------------------------------------------------------
# the worked examples of the format notes, in pylance's files and ours

NEG_ZERO = -0.0
EXAMPLES: list[tuple[str, pa.Array, tuple[int, Any, Any]]] = [
    ("int32 all null", pa.nulls(3, pa.int32()), (3, -(2**31), 2**31 - 1)),
    ("uint64 all null", pa.nulls(2, pa.uint64()), (2, 0, 2**64 - 1)),
    ("int8", pa.array([5, None, -7, 3], pa.int8()), (1, -7, 5)),
    ("date32", pa.array([10, None, 3], pa.date32()), (1, 3, 10)),
    (
        "decimal",
        pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.00")], pa.decimal128(7, 2)),
        (1, -300, 125),
    ),
    ("decimal all null", pa.nulls(2, pa.decimal128(7, 2)), (2, -(2**127), 2**127 - 1)),
    ("floats inf", pa.array([float("-inf"), 1, 2, float("nan")]), (0, float("-inf"), 2.0)),
    ("floats -0.0", pa.array([1.5, None, NEG_ZERO, float("nan")], pa.float32()), (1, NEG_ZERO, 1.5)),
    ("floats 9, 0.0", pa.array([9.0, 0.0]), (0, NEG_ZERO, 9.0)),
    ("floats max zero", pa.array([-1.0, NEG_ZERO]), (0, -1.0, 0.0)),
    ("floats all NaN", pa.array([float("nan")] * 2), (0, float("-inf"), float("inf"))),
    ("floats all null", pa.nulls(2, pa.float64()), (2, float("-inf"), float("inf"))),
    ("bool mixed", pa.array([True, None, False, True]), (1, False, True)),
    ("bool true", pa.array([True, True]), (0, True, True)),
    ("bool false", pa.array([False]), (0, False, False)),
    ("bool all null", pa.nulls(2, pa.bool_()), (2, False, True)),
    ("string cut, max raised", pa.array(["e" * 70, "ff", "g", "h"]), (0, "e" * 64, "i")),
    ("string max cut", pa.array(["a", "z" * 70, "", "b"]), (0, None, "z" * 63 + "{")),  # min "" reads as null
    ("string utf8 cut", pa.array(["a" + "é" * 40]), (0, "a" + "é" * 31, "a" + "é" * 30 + "ê")),
    ("binary overflow", pa.array([b"\x00", None, b"", b"\xff" * 70]), (1, None, None)),
    (
        "binary carry",
        pa.array([b"a" * 63 + b"\x01\xff" + b"x" * 10]),
        (0, b"a" * 63 + b"\x01", b"a" * 63 + b"\x02"),
    ),
    ("string all null", pa.nulls(3, pa.large_string()), (3, None, None)),
]


@pytest.mark.interop
@pytest.mark.parametrize(("name", "arr", "expected"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_worked_examples_in_pylance_files_and_ours(
    tmp_path: Path, name: str, arr: pa.Array, expected: tuple[int, Any, Any]
) -> None:
    table = pa.table({"c": arr})
    theirs = read_stats(_pylance_file(tmp_path, table))
    ours = read_stats(_our_file(table))
    assert _same(ours, theirs)
    got = ours[0]
    values = (got["null_count"][0], got["min_value"][0], got["max_value"][0])
    assert _same(values, expected)


def _same(a: Any, b: Any) -> bool:
    """Equality that tells -0.0 from 0.0 and takes NaN as equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b) and type(a) is type(b)


@pytest.mark.interop
def test_which_fields_get_statistics(tmp_path: Path) -> None:
    table = pa.table(
        {
            "i": pa.array([1, 2]),
            "h": pa.array([1, 2], pa.float16()),
            "ts": pa.array([1, 2], pa.timestamp("us")),
            "d64": pa.array([1, 2], pa.date64()),
            "fsb": pa.array([b"a", b"b"], pa.binary(1)),
            "lst": pa.array([[1], [2]]),
            "dict": pa.array(["a", "b"]).dictionary_encode(),
            "st": pa.StructArray.from_arrays(
                [pa.array([1, 2]), pa.StructArray.from_arrays([pa.array(["x", "y"])], names=["c"])],
                names=["a", "b"],
                mask=pa.array([False, True]),
            ),
            "lb": pa.array([b"x", None], pa.large_binary()),
        }
    )
    theirs, ours = _pylance_file(tmp_path, table), _our_file(table)
    assert ours == theirs
    # i=0, d64=3, st.a=9, st.b.c=11, lb=12; no halffloat/timestamp/fsb/list/dictionary/struct
    assert sorted(read_stats(ours)) == [0, 3, 9, 11, 12]
    assert read_stats(ours)[9]["null_count"] == [0]  # a struct child counts only its own nulls
    assert not has_statistics(pa.float16()) and has_statistics(pa.date64())


@pytest.mark.interop
def test_statistics_per_row_group(tmp_path: Path) -> None:
    table = pa.table({"x": pa.array([3, 1, None, 7, None, None, 2], pa.int16())})
    theirs, ours = read_stats(_pylance_file(tmp_path, table, group=3)), read_stats(_our_file(table, group=3))
    assert ours == theirs == {0: {"null_count": [1, 2, 0], "min_value": [1, 7, 2], "max_value": [3, 7, 2]}}


# ---------------------------------------------------------------------------------------------
# the seed's rules, by brute force


def _expected_numeric(values: list[Any], kind: str, info: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
    present = [v for v in values if v is not None]
    if kind == "int":
        assert info is not None
        return (min(present), max(present)) if present else info
    if kind == "float":
        present = [v for v in present if not math.isnan(v)]
        if not present:
            return float("-inf"), float("inf")
        lo, hi = min(present), max(present)
        return (-0.0 if lo == 0 else lo), (0.0 if hi == 0 else hi)
    # bool
    return (True in present and False not in present), (True in present or False not in present)


INT_TYPES = [pa.int8(), pa.uint8(), pa.int16(), pa.uint16(), pa.int32(), pa.uint32(), pa.int64(), pa.uint64()]


@st.composite
def int_columns(draw: Any) -> tuple[pa.DataType, list[int | None]]:
    t = draw(st.sampled_from(INT_TYPES))
    info = np.iinfo(t.to_pandas_dtype())
    vals = draw(st.lists(st.none() | st.integers(int(info.min), int(info.max)), min_size=1, max_size=40))
    return t, vals


@settings(max_examples=150, deadline=None)
@given(int_columns())
def test_integer_bounds(col: tuple[pa.DataType, list[int | None]]) -> None:
    t, vals = col
    info = np.iinfo(t.to_pandas_dtype())
    got = compute_stats(pa.array(vals, t))
    assert got.null_count == vals.count(None)
    assert (got.min_value, got.max_value) == _expected_numeric(vals, "int", (int(info.min), int(info.max)))


def _floats(width: int = 64) -> st.SearchStrategy[float | None]:
    return st.none() | st.floats(width=width) | st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf])


floats = _floats()


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([32, 64]).flatmap(
        lambda w: st.tuples(st.just(w), st.lists(_floats(w), min_size=1, max_size=40))
    )
)
def test_float_bounds(case: tuple[int, list[float | None]]) -> None:
    width, vals = case
    t = pa.float32() if width == 32 else pa.float64()
    got = compute_stats(pa.array(vals, t))
    assert got.null_count == vals.count(None)
    assert _same((got.min_value, got.max_value), _expected_numeric(vals, "float"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.none() | st.booleans(), min_size=1, max_size=20))
def test_bool_bounds(vals: list[bool | None]) -> None:
    got = compute_stats(pa.array(vals, pa.bool_()))
    assert got.null_count == vals.count(None)
    assert (got.min_value, got.max_value) == _expected_numeric(vals, "bool")


def _cut_utf8(s: str) -> str:
    """The longest prefix of whole characters of at most 64 bytes (brute force over characters)."""
    out = ""
    for ch in s:
        if len((out + ch).encode()) > 64:
            break
        out += ch
    return out


texts = st.text(st.characters(codec="utf-8"), max_size=80) | st.sampled_from(
    ["", "a" * 65, "é" * 33, "\U0010ffff" * 17, "z" * 64, "\x7f" * 70]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.none() | texts, min_size=1, max_size=12), st.booleans())
def test_string_bounds(vals: list[str | None], large: bool) -> None:
    got = compute_stats(pa.array(vals, pa.large_string() if large else pa.string()))
    present = [v for v in vals if v is not None]
    assert got.null_count == vals.count(None)
    if not present:
        assert (got.min_value, got.max_value) == (None, None)
        return
    cut = [_cut_utf8(v) for v in present]
    key = str.encode
    assert got.min_value == min(cut, key=key)
    if cut == present:  # nothing was cut: the exact maximum
        assert got.max_value == max(present, key=key)
        return
    # Something was cut: the maximum is raised, it must be a strict upper bound of every value.
    top = max(cut, key=key)
    if got.max_value is None:
        assert increment_utf8(top) is None
        return
    assert len(got.max_value.encode()) == len(top.encode())
    assert all(key(got.max_value) > key(v) for v in present)
    # ... and the smallest one that keeps the prefix before the raised byte (format notes, 12.3)
    raised = got.max_value.encode()
    i = next(k for k in range(len(raised)) if raised[k] != top.encode()[k])
    assert raised[i + 1 :] == top.encode()[i + 1 :]
    for b in range(top.encode()[i] + 1, raised[i]):
        with pytest.raises(UnicodeDecodeError):
            (raised[:i] + bytes([b]) + raised[i + 1 :]).decode()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | st.binary(max_size=80) | st.just(b"\xff" * 70), min_size=1, max_size=12))
def test_binary_bounds(vals: list[bytes | None]) -> None:
    got = compute_stats(pa.array(vals, pa.binary()))
    present = [v for v in vals if v is not None]
    assert got.null_count == vals.count(None)
    if not present:
        assert (got.min_value, got.max_value) == (None, None)
        return
    cut = [v[:64] for v in present]
    assert got.min_value == min(cut)
    if cut == present:
        assert got.max_value == max(present)
        return
    top = max(cut)
    if all(b == 0xFF for b in top):
        assert got.max_value is None  # no 64-byte bound is above it: null
        return
    expected = (int.from_bytes(top, "big") + 1).to_bytes(len(top), "big")
    assert got.max_value == expected
    assert all(expected > v for v in present)


def test_increment_helpers() -> None:
    assert increment_binary(b"a\xff") == b"b\x00"
    assert increment_binary(b"\xff\xff") is None
    assert increment_utf8("a\x7f") == "b\x7f"  # 0x80.. are not valid alone: the byte before is raised
    assert increment_utf8("\U0010ffff") is None
    assert increment_utf8("zé") == "zê"


def test_types_without_statistics_are_refused() -> None:
    with pytest.raises(ValueError, match="no statistics"):
        compute_stats(pa.array([1.0], pa.float16()))


# ---------------------------------------------------------------------------------------------
# pylance on random data


@pytest.mark.interop
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.none() | texts, min_size=1, max_size=10),
    st.lists(floats, min_size=10, max_size=10),
    st.lists(st.none() | st.binary(max_size=70), min_size=10, max_size=10),
    st.integers(1, 6),
)
def test_random_statistics_match_pylance(
    tmp_path: Path, strs: list[str | None], fl: list[float | None], bins: list[bytes | None], group: int
) -> None:
    strs = (strs * 10)[:10]
    table = pa.table({"s": pa.array(strs), "f": pa.array(fl), "b": pa.array(bins)})
    assert _our_file(table, group) == _pylance_file(tmp_path, table, group)
