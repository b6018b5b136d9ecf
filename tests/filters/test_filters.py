"""Tests for :mod:`lance_table.filters`: SQL predicates compiled to pyarrow Expressions.

Each predicate is checked against an independent oracle: a Python function of one row (from
``TABLE.to_pylist()``) that evaluates the predicate with SQL's three-valued logic; a row is expected
when the oracle says TRUE. The interop class checks a set of predicates against pylance itself.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_table.errors import FilterError, LanceTableError
from lance_table.filters import filter_columns, parse_filter

UTC = dt.timezone.utc
NAN = float("nan")
INF = float("inf")

STRUCT = pa.struct([("a", pa.int64()), ("n", pa.struct([("c", pa.string())]))])
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int64()),
        ("i32", pa.int32()),
        ("f", pa.float64()),
        ("f32", pa.float32()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("st", STRUCT),
        ("weird name", pa.int64()),
        ("Id", pa.int64()),
    ]
)


def _ts(*args: int) -> dt.datetime:
    return dt.datetime(*args)  # type: ignore[arg-type]


_D = dt.date
_T = _ts


def _S(a: int | None, c: str | None = None, *, n: bool = True) -> dict[str, Any]:
    return {"a": a, "n": {"c": c} if n else None}


# id, i, i32, f, f32, s, b, d, ts, st, weird name, Id   (tz holds the same instants as ts, in UTC)
_DATA: list[tuple[Any, ...]] = [
    (0, 1, 1, 1.5, 0.1, "apple", True, _D(2024, 1, 1), _T(2024, 1, 1, 10), _S(1, "x"), 1, 10),
    (1, -7, -7, -2.0, 1.5, "Banana", False, _D(2023, 12, 31), _T(2024, 1, 1, 9, 59), _S(2, "y"), 2, 20),
    (2, None, None, None, None, None, None, None, None, None, None, None),
    (3, 10, 10, NAN, NAN, "a_b", True, _D(2024, 6, 15), _T(2024, 6, 1), _S(None, n=False), 4, 40),
    (4, 3, 3, 0.0, 0.0, "50%", False, _D(2024, 1, 2), _T(2023, 1, 1), _S(5), 5, 50),
    (5, 0, 0, 10.0, -2.5, "cherry", True, _D(2020, 2, 29), _T(2024, 1, 1, 10, 0, 0, 1), _S(6, "x"), 6, 60),
    (6, -8, -8, -0.0, None, "it's", None, _D(1999, 12, 31), _T(1999, 12, 31, 23, 59, 59), _S(-1, "z"), 7, 70),
    (7, 5, 5, INF, 3.0, "", True, _D(2024, 1, 1), _T(2024, 1, 1), _S(5, "xx"), None, 80),
    (8, 2, 2, -INF, 2.0, "back\\slash", False, None, _T(2024, 1, 2), _S(2, "y"), 9, None),
    (9, 7, 7, 2.5, 0.5, "APPLE pie", True, _D(2024, 12, 31), _T(2025, 1, 1), None, 10, 100),
]
_NAMES = ["id", "i", "i32", "f", "f32", "s", "b", "d", "ts", "st", "weird name", "Id"]
ROWS: list[dict[str, Any]] = []
for _values in _DATA:
    _row = dict(zip(_NAMES, _values))
    _row["tz"] = None if _row["ts"] is None else _row["ts"].replace(tzinfo=UTC)
    ROWS.append(_row)
TABLE = pa.Table.from_pylist(ROWS, schema=SCHEMA)
PY_ROWS = TABLE.to_pylist()  # what the oracles see: values as Arrow hands them back (f32 as float32)


# --------------------------------------------------------------------------------------------------
# The oracle: SQL semantics in plain Python


def _key(x: Any) -> tuple[int, Any]:
    """DataFusion's order: NaN equals NaN and is above +inf; -0.0 = 0.0."""
    if isinstance(x, float) and math.isnan(x):
        return (1, 0)
    return (0, x)


def cmp(a: Any, op: str, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    ka, kb = _key(a), _key(b)
    return {
        "=": ka == kb,
        "<>": ka != kb,
        "<": ka < kb,
        "<=": ka <= kb,
        ">": ka > kb,
        ">=": ka >= kb,
    }[op]


def and3(*xs: bool | None) -> bool | None:
    if any(x is False for x in xs):
        return False
    return None if any(x is None for x in xs) else True


def or3(*xs: bool | None) -> bool | None:
    if any(x is True for x in xs):
        return True
    return None if any(x is None for x in xs) else False


def not3(x: bool | None) -> bool | None:
    return None if x is None else not x


def in3(x: Any, items: list[Any]) -> bool | None:
    if x is None:
        return None
    if any(cmp(x, "=", item) for item in items):
        return True
    return None if None in items else False


def between3(x: Any, low: Any, high: Any) -> bool | None:
    return and3(cmp(x, ">=", low), cmp(x, "<=", high))


def like3(s: str | None, pattern: str, ignore_case: bool = False) -> bool | None:
    if s is None:
        return None
    regex, chars = [], iter(pattern)
    for ch in chars:
        if ch == "\\":
            regex.append(re.escape(next(chars)))
        elif ch == "%":
            regex.append(".*")
        elif ch == "_":
            regex.append(".")
        else:
            regex.append(re.escape(ch))
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    return re.fullmatch("".join(regex), s, flags) is not None


def arith(a: Any, op: str, b: Any) -> Any:
    """SQL arithmetic: NULL in, NULL out; integer / and % truncate toward zero."""
    if a is None or b is None:
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "/":
        if both_int:
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        return a / b
    if op == "%":
        if both_int:
            return a - b * arith(a, "/", b)
        return NAN if math.isinf(a) else math.fmod(a, b)
    raise AssertionError(op)


def get(row: dict[str, Any], *path: str) -> Any:
    value: Any = row
    for name in path:
        if value is None:
            return None
        value = value[name]
    return value


def is_true(x: bool | None) -> bool:
    return x is True


Oracle = Callable[[dict[str, Any]], "bool | None"]

CASES: list[tuple[str, Oracle]] = [
    # comparisons
    ("i = 1", lambda r: cmp(r["i"], "=", 1)),
    ("i == 1", lambda r: cmp(r["i"], "=", 1)),
    ("i != 1", lambda r: cmp(r["i"], "<>", 1)),
    ("i <> 1", lambda r: cmp(r["i"], "<>", 1)),
    ("i < 3", lambda r: cmp(r["i"], "<", 3)),
    ("i <= 3", lambda r: cmp(r["i"], "<=", 3)),
    ("i > 3", lambda r: cmp(r["i"], ">", 3)),
    ("i >= 3", lambda r: cmp(r["i"], ">=", 3)),
    ("3 < i", lambda r: cmp(3, "<", r["i"])),
    ("i > -8", lambda r: cmp(r["i"], ">", -8)),
    ("i = i32", lambda r: cmp(r["i"], "=", r["i32"])),
    ("i > f", lambda r: cmp(r["i"], ">", r["f"])),
    ("s = 'apple'", lambda r: cmp(r["s"], "=", "apple")),
    ("s < 'b'", lambda r: cmp(r["s"], "<", "b")),
    ("s >= 'B'", lambda r: cmp(r["s"], ">=", "B")),
    ("s = 'it''s'", lambda r: cmp(r["s"], "=", "it's")),
    ("s = ''", lambda r: cmp(r["s"], "=", "")),
    ('s = "apple"', lambda r: cmp(r["s"], "=", "apple")),  # "..." is a string unless it names a column
    ("b = true", lambda r: cmp(r["b"], "=", True)),
    ("b <> FALSE", lambda r: cmp(r["b"], "<>", False)),
    ("b", lambda r: r["b"]),
    ("i = NULL", lambda r: None),
    ("i <> NULL", lambda r: None),
    ("1 = 1", lambda r: True),
    ("TRUE", lambda r: True),
    ("FALSE", lambda r: False),
    # AND, OR, NOT, parentheses
    ("i > 0 AND b", lambda r: and3(cmp(r["i"], ">", 0), r["b"])),
    ("i > 0 OR b", lambda r: or3(cmp(r["i"], ">", 0), r["b"])),
    ("NOT b", lambda r: not3(r["b"])),
    ("NOT (i > 1)", lambda r: not3(cmp(r["i"], ">", 1))),
    ("NOT NOT (i > 1)", lambda r: cmp(r["i"], ">", 1)),
    ("i > 1 AND NULL", lambda r: and3(cmp(r["i"], ">", 1), None)),
    ("i > 1 OR NULL", lambda r: or3(cmp(r["i"], ">", 1), None)),
    ("NOT NULL", lambda r: None),
    ("s = 'apple' OR s IS NULL", lambda r: or3(cmp(r["s"], "=", "apple"), r["s"] is None)),
    (
        "(i > 0 OR s = 'Banana') AND NOT (b = false)",
        lambda r: and3(or3(cmp(r["i"], ">", 0), cmp(r["s"], "=", "Banana")), not3(cmp(r["b"], "=", False))),
    ),
    (
        "i > 0 OR s = 'Banana' AND b",  # AND binds tighter than OR
        lambda r: or3(cmp(r["i"], ">", 0), and3(cmp(r["s"], "=", "Banana"), r["b"])),
    ),
    (
        "i = 1 OR i = 2 OR i = 3 OR i = 5 OR i = 7 OR i = 10",
        lambda r: in3(r["i"], [1, 2, 3, 5, 7, 10]),
    ),
    (
        "i > -100 AND i < 100 AND s IS NOT NULL AND b IS NOT NULL AND d IS NOT NULL",
        lambda r: and3(
            cmp(r["i"], ">", -100),
            cmp(r["i"], "<", 100),
            r["s"] is not None,
            r["b"] is not None,
            r["d"] is not None,
        ),
    ),
    # IN, NOT IN
    ("i IN (1, 10)", lambda r: in3(r["i"], [1, 10])),
    ("i IN (1)", lambda r: in3(r["i"], [1])),
    ("i NOT IN (1, 10)", lambda r: not3(in3(r["i"], [1, 10]))),
    ("i IN (1, NULL)", lambda r: in3(r["i"], [1, None])),
    ("i NOT IN (1, NULL)", lambda r: not3(in3(r["i"], [1, None]))),
    ("i IN (NULL)", lambda r: in3(r["i"], [None])),
    ("i IN (1.5, 1)", lambda r: in3(r["i"], [1.5, 1])),
    ("i IN (i32, 100)", lambda r: in3(r["i"], [r["i32"], 100])),
    ("i32 IN (1, 10)", lambda r: in3(r["i32"], [1, 10])),
    ("s IN ('apple', 'cherry', '')", lambda r: in3(r["s"], ["apple", "cherry", ""])),
    ("s NOT IN ('apple', 'cherry')", lambda r: not3(in3(r["s"], ["apple", "cherry"]))),
    ("f IN (0, 10)", lambda r: in3(r["f"], [0.0, 10.0])),
    ("d IN (date '2024-01-01', date '2020-02-29')", lambda r: in3(r["d"], [_D(2024, 1, 1), _D(2020, 2, 29)])),
    ("d IN ('2024-01-01', '2020-02-29')", lambda r: in3(r["d"], [_D(2024, 1, 1), _D(2020, 2, 29)])),
    # BETWEEN
    ("i BETWEEN 0 AND 3", lambda r: between3(r["i"], 0, 3)),
    ("i NOT BETWEEN 0 AND 3", lambda r: not3(between3(r["i"], 0, 3))),
    ("i BETWEEN 3 AND 0", lambda r: between3(r["i"], 3, 0)),
    ("i BETWEEN 1 AND NULL", lambda r: between3(r["i"], 1, None)),
    ("i BETWEEN -1 AND 5 AND b", lambda r: and3(between3(r["i"], -1, 5), r["b"])),
    ("f BETWEEN -1 AND 2", lambda r: between3(r["f"], -1, 2)),
    ("s BETWEEN 'a' AND 'b'", lambda r: between3(r["s"], "a", "b")),
    (
        "d BETWEEN date '2024-01-01' AND date '2024-12-31'",
        lambda r: between3(r["d"], _D(2024, 1, 1), _D(2024, 12, 31)),
    ),
    (
        "d NOT BETWEEN '2024-01-01' AND '2024-12-31'",
        lambda r: not3(between3(r["d"], _D(2024, 1, 1), _D(2024, 12, 31))),
    ),
    # IS NULL, IS TRUE, IS FALSE
    ("i IS NULL", lambda r: r["i"] is None),
    ("i IS NOT NULL", lambda r: r["i"] is not None),
    ("f IS NULL", lambda r: r["f"] is None),  # NaN is not NULL
    ("st IS NULL", lambda r: r["st"] is None),
    ("b IS TRUE", lambda r: r["b"] is True),
    ("b IS NOT TRUE", lambda r: r["b"] is not True),
    ("b IS FALSE", lambda r: r["b"] is False),
    ("b IS NOT FALSE", lambda r: r["b"] is not False),
    ("b IS UNKNOWN", lambda r: r["b"] is None),
    ("i > 1 IS TRUE", lambda r: cmp(r["i"], ">", 1) is True),  # IS binds below comparisons
    ("i > 1 IS NOT TRUE", lambda r: cmp(r["i"], ">", 1) is not True),
    ("(i > 1) IS NOT FALSE", lambda r: cmp(r["i"], ">", 1) is not False),
    ("i = 1 IS NULL", lambda r: cmp(r["i"], "=", 1) is None),
    ("i IS NULL = TRUE", lambda r: r["i"] is None),
    ("NOT i IS NULL", lambda r: r["i"] is not None),
    # LIKE, ILIKE
    ("s LIKE 'a%'", lambda r: like3(r["s"], "a%")),
    ("s LIKE '%e'", lambda r: like3(r["s"], "%e")),
    ("s LIKE '%an%'", lambda r: like3(r["s"], "%an%")),
    ("s LIKE 'a_b'", lambda r: like3(r["s"], "a_b")),
    ("s LIKE '_____'", lambda r: like3(r["s"], "_____")),
    ("s LIKE 'a\\_b'", lambda r: like3(r["s"], "a\\_b")),
    ("s LIKE '%\\%'", lambda r: like3(r["s"], "%\\%")),
    ("s LIKE '%\\\\%'", lambda r: like3(r["s"], "%\\\\%")),
    ("s LIKE ''", lambda r: like3(r["s"], "")),
    ("s LIKE 'A%'", lambda r: like3(r["s"], "A%")),
    ("s NOT LIKE 'a%'", lambda r: not3(like3(r["s"], "a%"))),
    ("NOT s LIKE 'a%'", lambda r: not3(like3(r["s"], "a%"))),
    ("s ILIKE 'a%'", lambda r: like3(r["s"], "a%", ignore_case=True)),
    ("s ILIKE '%PIE'", lambda r: like3(r["s"], "%PIE", ignore_case=True)),
    ("s NOT ILIKE 'b%'", lambda r: not3(like3(r["s"], "b%", ignore_case=True))),
    ("s LIKE 'a#_b' ESCAPE '#'", lambda r: like3(r["s"], "a\\_b")),
    ("s LIKE '%#%' ESCAPE '#'", lambda r: like3(r["s"], "%\\%")),
    ("s LIKE 'back\\slash' ESCAPE '#'", lambda r: cmp(r["s"], "=", "back\\slash")),
    ("s LIKE NULL", lambda r: None),
    ("'abc' LIKE 'a%'", lambda r: True),
    ("CAST(i AS string) LIKE '-%'", lambda r: like3(None if r["i"] is None else str(r["i"]), "-%")),
    # arithmetic
    ("i + 1 > 2", lambda r: cmp(arith(r["i"], "+", 1), ">", 2)),
    ("i - 1 < 0", lambda r: cmp(arith(r["i"], "-", 1), "<", 0)),
    ("i * 2 - 1 = 1", lambda r: cmp(arith(arith(r["i"], "*", 2), "-", 1), "=", 1)),
    ("i - -1 = 2", lambda r: cmp(arith(r["i"], "-", -1), "=", 2)),
    ("1 + 2 * i = 7", lambda r: cmp(arith(1, "+", arith(2, "*", r["i"])), "=", 7)),
    ("(1 + 2) * i = 9", lambda r: cmp(arith(3, "*", r["i"]), "=", 9)),
    ("i / 2 = -3", lambda r: cmp(arith(r["i"], "/", 2), "=", -3)),  # truncates toward zero
    ("i / 2 = -4", lambda r: cmp(arith(r["i"], "/", 2), "=", -4)),
    ("i / 2 = 3", lambda r: cmp(arith(r["i"], "/", 2), "=", 3)),
    ("i / -2 = 3", lambda r: cmp(arith(r["i"], "/", -2), "=", 3)),
    ("i32 / 2 = -3", lambda r: cmp(arith(r["i32"], "/", 2), "=", -3)),
    ("i / 2.0 = -3.5", lambda r: cmp(arith(r["i"], "/", 2.0), "=", -3.5)),
    ("i % 3 = -1", lambda r: cmp(arith(r["i"], "%", 3), "=", -1)),
    ("i % 3 = 2", lambda r: cmp(arith(r["i"], "%", 3), "=", 2)),
    ("i % -3 = 1", lambda r: cmp(arith(r["i"], "%", -3), "=", 1)),
    ("f % 2 = 1.5", lambda r: cmp(arith(r["f"], "%", 2.0), "=", 1.5)),
    ("f * 2 > 3", lambda r: cmp(arith(r["f"], "*", 2.0), ">", 3)),
    ("f + i > 0", lambda r: cmp(arith(r["f"], "+", r["i"]), ">", 0)),
    ("-i > 0", lambda r: cmp(None if r["i"] is None else -r["i"], ">", 0)),
    ("-(i + 1) = -2", lambda r: cmp(arith(r["i"], "+", 1), "=", 2)),
    ("st.a + 1 = 2", lambda r: cmp(arith(get(r, "st", "a"), "+", 1), "=", 2)),
    ("`weird name` * Id > 100", lambda r: cmp(arith(r["weird name"], "*", r["Id"]), ">", 100)),
    # literals
    ("f = 1.5", lambda r: cmp(r["f"], "=", 1.5)),
    ("f = 1.5e0", lambda r: cmp(r["f"], "=", 1.5)),
    ("f > .5", lambda r: cmp(r["f"], ">", 0.5)),
    ("f < -1e308", lambda r: cmp(r["f"], "<", -1e308)),
    ("i < 1.5", lambda r: cmp(r["i"], "<", 1.5)),
    ("i = 1.0", lambda r: cmp(r["i"], "=", 1.0)),
    ("i > -9223372036854775808", lambda r: cmp(r["i"], ">", -(2**63))),
    ("i32 < 10000000000", lambda r: cmp(r["i32"], "<", 10**10)),
    ("i32 = 10000000000", lambda r: cmp(r["i32"], "=", 10**10)),
    ("f32 = 0.1", lambda r: cmp(r["f32"], "=", PY_ROWS[0]["f32"])),  # the literal takes float32
    ("f32 > 1", lambda r: cmp(r["f32"], ">", 1)),
    ("d = date '2024-01-01'", lambda r: cmp(r["d"], "=", _D(2024, 1, 1))),
    ("d = date '2024-1-1'", lambda r: cmp(r["d"], "=", _D(2024, 1, 1))),
    ("d > '2024-01-01'", lambda r: cmp(r["d"], ">", _D(2024, 1, 1))),
    ("'2024-01-01' < d", lambda r: cmp(r["d"], ">", _D(2024, 1, 1))),
    ("d = CAST('2024-01-01' AS date)", lambda r: cmp(r["d"], "=", _D(2024, 1, 1))),
    ("ts > timestamp '2024-01-01 10:00:00'", lambda r: cmp(r["ts"], ">", _ts(2024, 1, 1, 10))),
    ("ts >= '2024-01-01 10:00:00'", lambda r: cmp(r["ts"], ">=", _ts(2024, 1, 1, 10))),
    ("ts = timestamp '2024-01-01T10:00:00'", lambda r: cmp(r["ts"], "=", _ts(2024, 1, 1, 10))),
    (
        "ts = timestamp '2024-01-01 10:00:00.000001'",
        lambda r: cmp(r["ts"], "=", _ts(2024, 1, 1, 10, 0, 0, 1)),
    ),
    ("ts = timestamp '2024-01-01 11:00:00+01:00'", lambda r: cmp(r["ts"], "=", _ts(2024, 1, 1, 10))),
    ("ts = timestamp '2024-01-01 10:00:00Z'", lambda r: cmp(r["ts"], "=", _ts(2024, 1, 1, 10))),
    ("ts > timestamp '2024-01-01'", lambda r: cmp(r["ts"], ">", _ts(2024, 1, 1))),
    ("ts > date '2024-01-01'", lambda r: cmp(r["ts"], ">", _ts(2024, 1, 1))),
    ("d < timestamp '2024-01-01 10:00:00'", lambda r: cmp(r["d"], "<=", _D(2024, 1, 1))),
    (
        "tz = timestamp '2024-01-01 10:00:00'",  # a naive literal against a zoned column is UTC
        lambda r: cmp(r["tz"], "=", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
    ),
    ("tz = '2024-01-01 10:00:00'", lambda r: cmp(r["tz"], "=", dt.datetime(2024, 1, 1, 10, tzinfo=UTC))),
    (
        "tz < timestamp '2024-01-01 11:00:00+01:00'",
        lambda r: cmp(r["tz"], "<", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
    ),
    ("tz > date '2024-01-01'", lambda r: cmp(r["tz"], ">", dt.datetime(2024, 1, 1, tzinfo=UTC))),
    ("ts = tz", lambda r: cmp(r["ts"], "=", None if r["tz"] is None else r["tz"].replace(tzinfo=None))),
    (
        "ts > d",
        lambda r: cmp(r["ts"], ">", None if r["d"] is None else dt.datetime.combine(r["d"], dt.time())),
    ),
    ("b = 'true'", lambda r: cmp(r["b"], "=", True)),
    # CAST
    ("CAST(i AS string) = '1'", lambda r: cmp(None if r["i"] is None else str(r["i"]), "=", "1")),
    ("CAST(i AS varchar) = '-7'", lambda r: cmp(None if r["i"] is None else str(r["i"]), "=", "-7")),
    ("CAST(i * 0.75 AS int) = -5", lambda r: cmp(_trunc(arith(r["i"], "*", 0.75)), "=", -5)),
    ("CAST(st.a / 4.0 AS bigint) = 1", lambda r: cmp(_trunc(arith(get(r, "st", "a"), "/", 4.0)), "=", 1)),
    ("CAST(i AS double) / 2 = -3.5", lambda r: cmp(arith(r["i"], "/", 2.0), "=", -3.5)),
    ("CAST(i AS float) / 2 = -3.5", lambda r: cmp(arith(r["i"], "/", 2.0), "=", -3.5)),
    ("CAST(b AS int) = 1", lambda r: cmp(None if r["b"] is None else int(r["b"]), "=", 1)),
    ("CAST(i AS boolean)", lambda r: None if r["i"] is None else r["i"] != 0),
    (
        "CAST(ts AS date) = date '2024-01-01'",
        lambda r: cmp(None if r["ts"] is None else r["ts"].date(), "=", _D(2024, 1, 1)),
    ),
    ("CAST(d AS timestamp) < timestamp '2024-01-01 00:00:01'", lambda r: cmp(r["d"], "<=", _D(2024, 1, 1))),
    ("CAST(i AS date) = date '1970-01-02'", lambda r: cmp(r["i"], "=", 1)),
    ("CAST('1' AS int) = i", lambda r: cmp(r["i"], "=", 1)),
    ("CAST(-1.9 AS int) = i", lambda r: cmp(r["i"], "=", -1)),
    ("i::double > 2.5", lambda r: cmp(r["i"], ">", 2.5)),
    ("CAST(st.a * 0.5 AS decimal(10, 2)) = 2.5", lambda r: cmp(arith(get(r, "st", "a"), "*", 0.5), "=", 2.5)),
    # functions
    ("lower(s) = 'apple'", lambda r: cmp(None if r["s"] is None else r["s"].lower(), "=", "apple")),
    ("upper(s) LIKE 'APPLE%'", lambda r: like3(None if r["s"] is None else r["s"].upper(), "APPLE%")),
    ("abs(i) = 7", lambda r: cmp(None if r["i"] is None else abs(r["i"]), "=", 7)),
    ("length(s) = 5", lambda r: cmp(None if r["s"] is None else len(r["s"]), "=", 5)),
    ("char_length(s) < 3", lambda r: cmp(None if r["s"] is None else len(r["s"]), "<", 3)),
    # identifiers
    ("`weird name` = 2", lambda r: cmp(r["weird name"], "=", 2)),
    ('"weird name" = 2', lambda r: cmp(r["weird name"], "=", 2)),
    ("Id = 10", lambda r: cmp(r["Id"], "=", 10)),  # case sensitive: not the column id
    ("`Id` > 50", lambda r: cmp(r["Id"], ">", 50)),
    ("id = 1", lambda r: cmp(r["id"], "=", 1)),
    ("`id` < Id", lambda r: cmp(r["id"], "<", r["Id"])),
    # nested fields
    ("st.a = 1", lambda r: cmp(get(r, "st", "a"), "=", 1)),
    ("st.a IS NULL", lambda r: get(r, "st", "a") is None),
    ("st.n.c = 'x'", lambda r: cmp(get(r, "st", "n", "c"), "=", "x")),
    ("st.n IS NULL", lambda r: get(r, "st", "n") is None),
    ("st.n.c IS NULL", lambda r: get(r, "st", "n", "c") is None),
    ("`st`.`n`.`c` LIKE 'x%'", lambda r: like3(get(r, "st", "n", "c"), "x%")),
    ('"st".a > 1', lambda r: cmp(get(r, "st", "a"), ">", 1)),
    ("st.a = i", lambda r: cmp(get(r, "st", "a"), "=", r["i"])),
    ("st.a IN (5, 6)", lambda r: in3(get(r, "st", "a"), [5, 6])),
    # floats: NaN equals NaN and is the greatest value; -0.0 = 0.0
    ("f > 1", lambda r: cmp(r["f"], ">", 1)),
    ("f >= 10", lambda r: cmp(r["f"], ">=", 10)),
    ("f < 1", lambda r: cmp(r["f"], "<", 1)),
    ("f <= 0", lambda r: cmp(r["f"], "<=", 0)),
    ("f = 0", lambda r: cmp(r["f"], "=", 0.0)),
    ("f = -0.0", lambda r: cmp(r["f"], "=", 0.0)),
    ("f <> 1.5", lambda r: cmp(r["f"], "<>", 1.5)),
    ("f = f", lambda r: cmp(r["f"], "=", r["f"])),
    ("f < f32", lambda r: cmp(r["f"], "<", r["f32"])),
    ("f >= f32", lambda r: cmp(r["f"], ">=", r["f32"])),
    ("f <> f32", lambda r: cmp(r["f"], "<>", r["f32"])),
    ("NOT (f < 5)", lambda r: not3(cmp(r["f"], "<", 5))),
    ("f = CAST('NaN' AS double)", lambda r: cmp(r["f"], "=", NAN)),
    ("f < CAST('NaN' AS double)", lambda r: cmp(r["f"], "<", NAN)),
    ("f <= CAST('NaN' AS double)", lambda r: cmp(r["f"], "<=", NAN)),
    ("i < CAST('NaN' AS double)", lambda r: cmp(r["i"], "<", NAN)),
    ("f IN (CAST('NaN' AS double), 1.5)", lambda r: in3(r["f"], [NAN, 1.5])),
    ("f NOT IN (1.5, 2.5)", lambda r: not3(in3(r["f"], [1.5, 2.5]))),
    ("f > i", lambda r: cmp(r["f"], ">", r["i"])),
]


def _trunc(x: float | None) -> int | None:
    return None if x is None else int(x)


def _expected(oracle: Oracle) -> list[int]:
    return [row["id"] for row in PY_ROWS if oracle(row) is True]


def _ours(sql: str | pc.Expression, table: pa.Table = TABLE) -> list[int]:
    return table.filter(parse_filter(sql, table.schema))["id"].to_pylist()


@pytest.mark.parametrize(("sql", "oracle"), [pytest.param(sql, oracle, id=sql) for sql, oracle in CASES])
def test_predicate_matches_oracle(sql: str, oracle: Oracle) -> None:
    assert _ours(sql) == _expected(oracle)


def test_cases_select_something_and_not_everything() -> None:
    """The data is rich enough that most predicates split the rows (guards against vacuous oracles)."""
    splitting = [sql for sql, oracle in CASES if 0 < len(_expected(oracle)) < len(PY_ROWS)]
    assert len(splitting) >= 0.85 * len(CASES)


@pytest.mark.parametrize(("sql", "oracle"), [pytest.param(sql, oracle, id=sql) for sql, oracle in CASES])
def test_filter_columns_suffice(sql: str, oracle: Oracle) -> None:
    """Reading only filter_columns() is enough to evaluate the predicate, with the same result."""
    columns = filter_columns(sql, SCHEMA)
    narrow = TABLE.select(columns).append_column("__pos", pa.array(range(TABLE.num_rows), pa.int64()))
    kept = narrow.filter(parse_filter(sql, narrow.schema))["__pos"].to_pylist()
    assert [PY_ROWS[p]["id"] for p in kept] == _expected(oracle)


def test_result_is_an_expression() -> None:
    expr = parse_filter("i > 1", SCHEMA)
    assert isinstance(expr, pc.Expression)
    assert expr.equals(pc.field("i") > pa.scalar(1, pa.int64()))


def test_expression_is_returned_as_is() -> None:
    expr = (pc.field("i") > 1) & pc.field("b")
    assert parse_filter(expr, SCHEMA) is expr


def test_long_in_list_and_or_chain() -> None:
    values = list(range(-5000, 5000, 3))
    sql = f"i IN ({', '.join(map(str, values))})"
    assert _ours(sql) == _expected(lambda r: in3(r["i"], values))
    chain = " OR ".join(f"i = {v}" for v in range(-10, 11))
    assert _ours(chain) == _expected(lambda r: in3(r["i"], list(range(-10, 11))))


def test_dictionary_column_compares_by_value() -> None:
    table = pa.table({"id": [0, 1, 2, 3], "k": pa.array(["a", "b", None, "a"]).dictionary_encode()})
    assert _ours("k = 'a'", table) == [0, 3]
    assert _ours("k IN ('b', 'c')", table) == [1]
    assert _ours("k LIKE 'a%'", table) == [0, 3]


def test_timestamp_units_and_zones() -> None:
    instants = [dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 10, 0, 1), None]
    table = pa.table(
        {
            "id": [0, 1, 2],
            "sec": pa.array(instants, pa.timestamp("s")),
            "ns": pa.array(instants, pa.timestamp("ns")),
            "ny": pa.array(
                [None if t is None else t.replace(tzinfo=UTC) for t in instants],
                pa.timestamp("ms", "America/New_York"),
            ),
        }
    )
    assert _ours("sec = timestamp '2024-01-01 10:00:00'", table) == [0]
    assert _ours("ns > '2024-01-01 10:00:00.5'", table) == [1]
    # as in pylance, a naive timestamp meeting a zoned one is wall-clock time in that zone; a literal
    # with an offset is first converted to UTC and then read as such a naive timestamp
    assert _ours("ny = timestamp '2024-01-01 10:00:00'", table) == []
    assert _ours("ny = timestamp '2024-01-01 05:00:00'", table) == [0]
    assert _ours("ny = timestamp '2024-01-01 05:00:00-05:00'", table) == []
    assert _ours("sec = ny", table) == []
    assert _ours("ns <= sec", table) == [0, 1]


def test_integer_division_by_zero_fails_when_evaluated() -> None:
    """As in pylance, the error comes from evaluation, not from parsing."""
    expr = parse_filter("i / 0 = 1", SCHEMA)
    with pytest.raises(pa.ArrowInvalid, match="divide by zero"):
        TABLE.filter(expr)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-1000, 1000)), min_size=1, max_size=30),
    divisor=st.integers(-50, 50).filter(bool),
    bound=st.integers(-60, 60),
    op=st.sampled_from(["/", "%"]),
)
def test_integer_division_and_modulo_truncate(
    values: list[int | None], divisor: int, bound: int, op: str
) -> None:
    table = pa.table({"id": pa.array(range(len(values)), pa.int64()), "i": pa.array(values, pa.int64())})
    sql = f"i {op} {divisor} >= {bound}"
    want = [k for k, v in enumerate(values) if cmp(arith(v, op, divisor), ">=", bound)]
    assert _ours(sql, table) == want


# --------------------------------------------------------------------------------------------------
# filter_columns


@pytest.mark.parametrize(
    ("sql", "columns"),
    [
        ("i > 1", ["i"]),
        ("b AND i > 1 AND s LIKE 'a%'", ["i", "s", "b"]),  # schema order, not reference order
        ("st.n.c = 'x' OR st.a = 1", ["st"]),
        ("`weird name` = 1 AND Id = 2", ["weird name", "Id"]),
        ('"weird name" = 2', ["weird name"]),
        ('s = "no such column"', ["s"]),
        ("Id = 1", ["Id"]),
        ("id = 1", ["id"]),
        ("TRUE", []),
        ("1 = 1", []),
        ("CAST(d AS timestamp) < ts", ["d", "ts"]),
        ("i IN (i32, 3)", ["i", "i32"]),
    ],
)
def test_filter_columns_sql(sql: str, columns: list[str]) -> None:
    assert filter_columns(sql, SCHEMA) == columns


@pytest.mark.parametrize(
    ("expr", "columns"),
    [
        (pc.field("i") > 1, ["i"]),
        ((pc.field("Id") > 1) & (pc.field("b")), ["b", "Id"]),
        (pc.field("st", "n", "c") == "x", ["st"]),
        (pc.field("weird name") < pc.field("i32"), ["i32", "weird name"]),
        (pc.is_in(pc.field("s"), value_set=pa.array(["a", "b"])), ["s"]),
        (pc.scalar(True), []),
        (parse_filter("f > 1 AND tz > '2024-01-01'", SCHEMA), ["f", "tz"]),
    ],
    ids=str,
)
def test_filter_columns_expression(expr: pc.Expression, columns: list[str]) -> None:
    assert filter_columns(expr, SCHEMA) == columns


def test_filter_columns_expression_exact_with_prefix_names() -> None:
    schema = pa.schema([("a", pa.int64()), ("ab", pa.int64()), ("abc", pa.int64()), ("b", pa.bool_())])
    assert filter_columns(pc.field("ab") > 1, schema) == ["ab"]
    assert filter_columns((pc.field("abc") > 1) | pc.field("b"), schema) == ["abc", "b"]


def test_filter_columns_expression_unbindable_returns_all() -> None:
    assert filter_columns(pc.field("nosuch") > 1, SCHEMA) == SCHEMA.names


def test_filter_columns_many_columns() -> None:
    schema = pa.schema([(f"c{k}", pa.int64()) for k in range(300)])
    expr = (pc.field("c7") > 1) & (pc.field("c250") < pc.field("c70"))
    assert filter_columns(expr, schema) == ["c7", "c70", "c250"]
    assert filter_columns("c299 = 1 OR c3 = 2", schema) == ["c3", "c299"]


# --------------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("", "empty filter"),
        ("   ", "empty filter"),
        ("i >", "syntax error"),
        ("i = = 1", "syntax error"),
        ("i 1", "syntax error"),
        ("s = 'abc", "syntax error"),
        ("(i > 1", "syntax error"),
        ("i > 1; i < 2", "single expression"),
        ("i = (SELECT 1)", "unsupported SQL construct: Subquery"),
        ("i IN (SELECT 1)", "unsupported SQL construct: Subquery"),
        ("EXISTS (SELECT 1)", "unsupported SQL construct: Exists"),
        ("SELECT 1", "unsupported SQL construct: Select"),
        ("count(i) > 1", "aggregate function COUNT"),
        ("sum(i) > 1", "aggregate function SUM"),
        ("foo(i) = 1", "unsupported function 'foo'"),
        ("TRY_CAST(i AS int) = 1", "unsupported SQL construct: TryCast"),
        ("sqrt(i) > 1", "unsupported SQL construct: Sqrt"),
        ("i = ?", "unsupported SQL construct: Placeholder"),
        ("nosuch = 1", "No field named nosuch"),
        ("`ID` = 1", "No field named ID; did you mean 'id'?"),
        ("`weird  name` = 1", "No field named weird  name"),
        ("x.i = 1", "No field named x"),
        ("st.z = 1", "unknown field 'z' in struct column 'st'"),
        ("st.n.z = 1", "unknown field 'z' in struct column 'st.n'"),
        ("i.x = 1", "not a struct"),
        ("i", "does not return a boolean"),
        ("NULL", "does not return a boolean"),
        ("i + 1", "does not return a boolean"),
        ("i AND b", "AND needs a boolean operand"),
        ("NOT i", "NOT needs a boolean operand"),
        ("i IS TRUE", "needs a boolean operand"),
        ("s + 1 > 2", "cannot apply +"),
        ("s LIKE s", "pattern of LIKE must be a string literal"),
        ("i LIKE 'a%'", "cannot apply LIKE"),
        ("s LIKE 'a' ESCAPE 'ab'", "one-character"),
        ("s LIKE 'a#' ESCAPE '#'", "ends with its escape character"),
        ("d = 'not a date'", "cannot read 'not a date' as a date"),
        ("d = '2024-02-30'", "as a date"),
        ("ts > 'yesterday'", "as a timestamp"),
        ("i = 'abc'", "cannot convert 'abc' to int64"),
        ("CAST(i AS decimal) = 1", "DECIMAL needs a precision and a scale"),
        ("CAST(i AS timestamp(4)) = 1", "unsupported timestamp precision 4"),
        ("CAST(i AS json) = 1", "unsupported CAST target type"),
        ("st = 1", "cannot"),
        ("i = 99999999999999999999999", "out of range"),
    ],
)
def test_errors(sql: str, message: str) -> None:
    with pytest.raises(FilterError, match=re.escape(message)):
        parse_filter(sql, SCHEMA)
    with pytest.raises(FilterError):
        filter_columns(sql, SCHEMA)


def test_error_classes() -> None:
    with pytest.raises(ValueError):
        parse_filter("nosuch = 1", SCHEMA)
    with pytest.raises(LanceTableError):
        parse_filter("nosuch = 1", SCHEMA)
    with pytest.raises(TypeError):
        parse_filter(1, SCHEMA)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        filter_columns(None, SCHEMA)  # type: ignore[arg-type]


def test_ambiguous_column() -> None:
    schema = pa.schema([("a", pa.int64()), ("a", pa.int64())])
    with pytest.raises(FilterError, match="ambiguous column 'a'"):
        parse_filter("a = 1", schema)


def test_double_quotes_name_a_column_or_a_string() -> None:
    """Lance reads "..." as a string; here it is a column when the schema has one of that name."""
    assert _ours('"Id" = 10') == [0]
    assert _ours('s = "Banana"') == [1]
    assert _ours('"st"."a" = 1') == [0]


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    sql = "(" * 3000 + "i > 1" + ")" * 3000
    with pytest.raises(FilterError):
        parse_filter(sql, SCHEMA)


# --------------------------------------------------------------------------------------------------
# Interop with pylance, the reference implementation

# predicates pylance accepts; each compares our rows with pylance's
INTEROP = [
    "i = 1",
    "i != 1 AND s IS NOT NULL",
    "i IN (1, 10)",
    "i NOT IN (1, NULL)",
    "i IN (1, NULL)",
    "i BETWEEN 0 AND 3",
    "i NOT BETWEEN 0 AND 3",
    "NOT (i > 1)",
    "i > 1 OR NULL",
    "b IS NOT TRUE",
    "b IS FALSE",
    "i > 1 IS TRUE",
    "s LIKE 'a%'",
    "s LIKE 'a\\_b'",
    "s LIKE '%\\%'",
    "s NOT LIKE '%a%'",
    "s ILIKE 'b%'",
    "s = 'it''s'",
    's = "apple"',
    "i / 2 = -3",
    "i % 3 = -1",
    "i * 2 - 1 = 1",
    "-i > 0",
    "CAST(i AS string) = '1'",
    "CAST(i * 0.75 AS int) = -5",
    "CAST(st.a / 4.0 AS bigint) = 1",
    "CAST(ts AS date) = date '2024-01-01'",
    "d = date '2024-01-01'",
    "d < timestamp '2024-01-01 10:00:00'",
    "ts > date '2024-01-01'",
    "ts > timestamp '2024-01-01 10:00:00'",
    "ts = timestamp '2024-01-01 11:00:00+01:00'",
    "tz = timestamp '2024-01-01 10:00:00'",
    "tz > date '2024-01-01'",
    "ts = tz",
    "i32 = 10",
    "f32 = 0.1",
    "f > 1",
    "f <= 0",
    "f = 0",
    "f <> 1.5",
    "f = f",
    "NOT (f < 5)",
    "f IN (0, 10)",
    "i > f",
    "st.a = 1",
    "st.n.c = 'x'",
    "st.n IS NULL",
    "`st`.`a` > 1",
    "`weird name` = 2",
    "Id = 10",
    "lower(s) = 'apple'",
    "length(s) = 5",
    "abs(i) = 7",
]


@pytest.fixture(scope="module")
def lance_dataset(tmp_path_factory: pytest.TempPathFactory) -> Any:
    lance = pytest.importorskip("lance")
    path: Path = tmp_path_factory.mktemp("filters") / "ds"
    return lance.write_dataset(TABLE, str(path))


@pytest.mark.interop
class TestAgainstPylance:
    @pytest.mark.parametrize("sql", INTEROP)
    def test_same_rows(self, lance_dataset: Any, sql: str) -> None:
        theirs = lance_dataset.to_table(filter=sql, columns=["id"])["id"].to_pylist()
        assert sorted(_ours(sql)) == sorted(theirs)

    @pytest.mark.parametrize("sql", INTEROP)
    def test_same_rows_deleted(self, tmp_path: Path, sql: str) -> None:
        lance = pytest.importorskip("lance")
        ds = lance.write_dataset(TABLE, str(tmp_path / "ds"))
        ds.delete(sql)
        remaining = sorted(ds.to_table(columns=["id"])["id"].to_pylist())
        deleted = set(_ours(sql))
        assert remaining == [r["id"] for r in PY_ROWS if r["id"] not in deleted]

    @pytest.mark.parametrize(
        ("ours_only", "pylance_form"),
        [
            ("d > '2024-01-01'", "d > date '2024-01-01'"),
            ("tz = '2024-01-01 10:00:00'", "tz = timestamp '2024-01-01 10:00:00'"),
            ("ts >= '2024-01-01 10:00:00'", "ts >= timestamp '2024-01-01 10:00:00'"),
            ('"weird name" = 2', "`weird name` = 2"),
            ("i < 1.5", "CAST(i AS double) < 1.5"),
        ],
    )
    def test_accepted_beyond_pylance(self, lance_dataset: Any, ours_only: str, pylance_form: str) -> None:
        """Forms pylance rejects (string literals it does not coerce, "..." names, int vs float
        literals) give here the rows pylance gives for the spelled-out form."""
        with pytest.raises(ValueError):
            lance_dataset.to_table(filter=ours_only)
        theirs = lance_dataset.to_table(filter=pylance_form, columns=["id"])["id"].to_pylist()
        assert sorted(_ours(ours_only)) == sorted(theirs)

    @pytest.mark.parametrize("sql", ["nosuch = 1", "st.z = 1", "i = (SELECT 1)", "x.i = 1"])
    def test_both_reject(self, lance_dataset: Any, sql: str) -> None:
        with pytest.raises(ValueError):
            lance_dataset.to_table(filter=sql)
        with pytest.raises(FilterError):
            parse_filter(sql, SCHEMA)
