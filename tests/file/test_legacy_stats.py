"""Page statistics of legacy files, and batch pruning with them, checked against pylance."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_table.file.legacy import LegacyFileReader
from lance_table.file.legacy.prune import ALL, NONE, may_match, pylance_verdicts

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

COUNTER = iter(range(10**9))


def _write(tmp: Path, table: pa.Table, group: int) -> tuple[str, LegacyFileReader]:
    uri = str(tmp / f"ds{next(COUNTER)}")
    lance.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_group=group)
    (path,) = (Path(uri) / "data").glob("*.lance")
    return uri, LegacyFileReader(path)


def _stats(tmp: Path, arr: pa.Array, group: int | None = None):
    _, reader = _write(tmp, pa.table({"x": arr}), group or max(len(arr), 1))
    return reader.statistics().fields[0]


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "values, lo, hi",
    [
        ([-INF, 1.0, 2.0, NAN], -INF, 2.0),
        ([NAN, NAN], -INF, INF),
        ([None, None], -INF, INF),
        ([1.5, None, -0.0, NAN], -0.0, 1.5),
        ([9.0, 0.0], -0.0, 9.0),
        ([-3.0, 0.0], -3.0, 0.0),
    ],
)
def test_float_stats(tmp_path, values, lo, hi):
    fs = _stats(tmp_path, pa.array(values, pa.float64()))
    got_lo, got_hi = fs.min_value[0].as_py(), fs.max_value[0].as_py()
    assert (got_lo, math.copysign(1, got_lo)) == (lo, math.copysign(1, lo))
    assert (got_hi, math.copysign(1, got_hi)) == (hi, math.copysign(1, hi))
    assert fs.null_count.tolist() == [values.count(None)]


@pytest.mark.parametrize(
    "values, lo, hi",
    [([True, None, False, True], False, True), ([True, True], True, True), ([None, None], False, True)],
)
def test_bool_stats(tmp_path, values, lo, hi):
    fs = _stats(tmp_path, pa.array(values, pa.bool_()))
    assert (fs.min_value[0].as_py(), fs.max_value[0].as_py()) == (lo, hi)


def test_int_stats_several_batches(tmp_path):
    fs = _stats(tmp_path, pa.array([3, None, -7, 5, None, None, 2], pa.int32()), group=2)
    assert fs.null_count.tolist() == [1, 0, 2, 0]
    assert fs.min_value.to_pylist() == [3, -7, -(2**31), 2]
    assert fs.max_value.to_pylist() == [3, 5, 2**31 - 1, 2]


@pytest.mark.parametrize(
    "values, lo, hi",
    [
        (["a" + "é" * 40, "b"], "a" + "é" * 31, "c"),  # a value was cut: max incremented
        (["e" * 70, "ff", "g", "h"], "e" * 64, "i"),
        (["a", "z" * 70, "", "b"], None, "z" * 63 + "{"),
        ([None, None], None, None),
    ],
)
def test_string_stats(tmp_path, values, lo, hi):
    fs = _stats(tmp_path, pa.array(values, pa.string()))
    assert (fs.min_value[0].as_py(), fs.max_value[0].as_py()) == (lo, hi)
    assert len(fs.min_value[0].as_py().encode()) <= 64 if lo else True


def test_binary_stats_overflow(tmp_path):
    fs = _stats(tmp_path, pa.array([b"\x00", None, b"", b"\xff" * 70], pa.binary()))
    assert fs.max_value[0].as_py() is None
    assert fs.null_count.tolist() == [1]


def test_stats_fields_and_struct_children(tmp_path):
    t = pa.table(
        {
            "h": pa.array([1.0, 2.0], pa.float16()),
            "st": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int64()), ("b", pa.string())])),
            "l": pa.array([[1], None], pa.list_(pa.int32())),
            "d": pa.array(["p", None]).dictionary_encode(),
            "dt": pa.array([1, None], pa.date32()),
        }
    )
    _, reader = _write(tmp_path, t, 2)
    stats = reader.statistics()
    names = {n.id: n.name for r in reader.metadata.roots for n in r.walk()}
    assert sorted(names[i] for i in stats.fields) == ["a", "b", "dt"]
    # A struct child counts its own nulls only: the parent's null is not counted.
    a = next(i for i in stats.fields if names[i] == "a")
    assert stats.fields[a].null_count.tolist() == [0]


# -- pruning ---------------------------------------------------------------------------------------


def _matches(values: pa.Array, op: str, v) -> np.ndarray:
    """Which values as read satisfy the comparison, as pylance evaluates it (NaN largest, equal to
    itself; -0.0 == 0.0; null never matches a comparison)."""
    py = values.to_pylist()
    if op == "is_null":
        return np.array([x is None for x in py], bool)
    if op == "is_not_null":
        return np.array([x is not None for x in py], bool)
    if op == "in":
        return np.logical_or.reduce([_matches(values, "=", x) for x in v]) if v else np.zeros(len(py), bool)
    if op == "between":
        return _matches(values, ">=", v[0]) & _matches(values, "<=", v[1])
    if v is None:
        return np.zeros(len(py), bool)  # a comparison with NULL is never true

    def key(x):
        return (1, 0.0) if isinstance(x, float) and math.isnan(x) else (0, x)

    fns = {
        "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    }  # fmt: skip
    return np.array([x is not None and fns[op](key(x), key(v)) for x in py], bool)


def _check(reader: LegacyFileReader, nullable: bool, op: str, v) -> np.ndarray:
    """may_match never excludes a batch holding a matching row as read; returns the mask."""
    stats = reader.statistics()
    col = reader.read_all()["x"]
    mask = may_match(stats, 0, op, v, nullable=nullable)
    offs = stats.batch_offsets
    for b in range(stats.num_batches):
        hit = _matches(col.slice(int(offs[b]), int(offs[b + 1] - offs[b])).combine_chunks(), op, v)
        assert mask[b] or not hit.any(), (b, op, v, col.to_pylist())
    return mask


OPS = ["=", "!=", "<", "<=", ">", ">=", "is_null", "is_not_null"]
floats = st.one_of(st.sampled_from([0.0, -0.0, NAN, INF, -INF, 1.0, -1.0]), st.floats(-100, 100))
strings = st.one_of(st.sampled_from(["", "a", "b", "z" * 70, "z" * 64, "é" * 40]), st.text(max_size=70))
KINDS = {
    "int": (pa.int32(), st.integers(-5, 5), st.integers(-(2**31), 2**31 - 1)),
    "float": (pa.float64(), floats, floats),
    "bool": (pa.bool_(), st.booleans(), st.booleans()),
    "string": (pa.string(), strings, strings),
    "binary": (pa.binary(), st.binary(max_size=70), st.binary(max_size=70)),
}


@pytest.mark.parametrize("kind", list(KINDS))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_may_match_never_excludes_a_match(tmp_path, kind, data):
    t, values, extra = KINDS[kind]
    rows = data.draw(st.lists(st.one_of(st.none(), values), min_size=1, max_size=12))
    nullable = data.draw(st.booleans()) or None in rows
    table = pa.table({"x": pa.array(rows, t)}, schema=pa.schema([pa.field("x", t, nullable)]))
    _, reader = _write(tmp_path, table, data.draw(st.integers(1, 4)))
    literals = [*rows[:4], data.draw(extra), data.draw(values)]
    for op in OPS:
        for v in literals:
            _check(reader, nullable, op, v)
    _check(reader, nullable, "in", literals[:3])
    if None not in literals[:2]:
        lo, hi = sorted(literals[:2], key=lambda x: (isinstance(x, float) and math.isnan(x), x))
        _check(reader, nullable, "between", (lo, hi))


def test_may_match_prunes(tmp_path):
    """Bounds that prove no match exclude batches; nulls read as 0 keep a batch for x = 0."""
    _, reader = _write(tmp_path, pa.table({"x": pa.array([1, 2, 5, 6, None, 9], pa.int32())}), 2)
    stats = reader.statistics()
    assert may_match(stats, 0, "=", 5).tolist() == [False, True, False]
    assert may_match(stats, 0, ">", 6).tolist() == [False, False, True]
    assert may_match(stats, 0, "=", 0).tolist() == [False, False, True]  # the null reads as 0
    assert may_match(stats, 0, "is_null").tolist() == [False, False, False]
    assert may_match(stats, 0, "in", [2, 9]).tolist() == [True, False, True]
    # between is the AND of >= and <=: [0 (a null), 9] is kept although neither is in [3, 4]
    assert may_match(stats, 0, "between", (3, 4)).tolist() == [False, False, True]
    assert may_match(stats, 0, "between", (10, 20)).tolist() == [False, False, False]
    assert may_match(stats, 0, "=", 2**40).tolist() == [False, False, False]
    _, reader = _write(tmp_path, pa.table({"s": pa.array(["q" * 70, "q" * 71, "a", ""])}), 2)
    stats = reader.statistics()
    assert may_match(stats, 0, "=", "q" * 71).tolist() == [True, False]
    assert may_match(stats, 0, "=", "r").tolist() == [False, False]
    assert may_match(stats, 0, "is_null").tolist() == [False, True]  # "" reads as null


def _pylance_rows(uri: str, reader: LegacyFileReader, op: str, v, sql: str) -> tuple[list[int], list[int]]:
    """Row ids pylance's filter returns, and ours from the verdicts plus evaluation on read rows."""
    theirs = lance.dataset(uri).to_table(filter=sql, with_row_id=True)["_rowid"].to_pylist()
    stats = reader.statistics()
    verdicts = pylance_verdicts(stats, 0, op, v)
    col = reader.read_all()["x"].combine_chunks()
    ours: list[int] = []
    offs = stats.batch_offsets
    for b, verdict in enumerate(verdicts):
        lo, hi = int(offs[b]), int(offs[b + 1])
        if verdict == ALL:
            ours.extend(range(lo, hi))
        elif verdict != NONE:
            ours.extend(lo + np.flatnonzero(_matches(col.slice(lo, hi - lo), op, v)))
    return sorted(theirs), sorted(int(i) for i in ours)


@pytest.mark.parametrize(
    "values, t",
    [
        ([0, None, 1, None, None, None, 5, 6, 0, 3], pa.int32()),
        ([0.0, None, NAN, 1.0, None, None, 1.0, 2.0, -0.0, 3.0], pa.float64()),
        (["a", None, "", "b", None, None, "x", "y", "a", "c"], pa.string()),
    ],
)
def test_pylance_verdicts_reproduce_pylance_filters(tmp_path, values, t):
    uri, reader = _write(tmp_path, pa.table({"x": pa.array(values, t)}), 2)
    lits = {"int32": [0, 1, 5, 7], "double": [0, 1.0, 0.5, 2.0], "string": ["a", "b", "", "x"]}[str(t)]
    checked = 0
    for v in lits:
        for op in ["=", "!=", "<", "<=", ">", ">="]:
            lit = f"'{v}'" if isinstance(v, str) else repr(v)
            theirs, ours = _pylance_rows(uri, reader, op, v, f"x {op} {lit}")
            assert theirs == ours, (op, v)
            checked += 1
    for op in ["is_null", "is_not_null"]:
        theirs, ours = _pylance_rows(uri, reader, op, None, f"x {op.replace('_', ' ')}")
        assert theirs == ours, op
    theirs, ours = _pylance_rows(uri, reader, "in", lits[:2], f"x in ({', '.join(map(repr, lits[:2]))})")
    assert theirs == ours
    assert checked == 24
