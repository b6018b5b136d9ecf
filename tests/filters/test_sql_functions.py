"""SQL filters as pylance accepts them, compared with pylance itself.

pylance writes one dataset (per storage version); pylance and lance_table each filter it with the
same SQL, and the ids of the rows they select must be the same. Where pylance refuses a filter, so
must we (with a typed error that is also a ValueError); where we answer beyond pylance (integer
literals outside a column's range), the answer is checked against its definition.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_table
from lance_table.errors import ColumnNotFoundError, FilterError
from lance_table.filters import parse_filter

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop

UTC = dt.timezone.utc
_TS = [
    dt.datetime(2024, 1, 1),
    dt.datetime(2024, 1, 1, 1),
    None,
    dt.datetime(2023, 12, 31, 22),
    dt.datetime(2024, 6, 1),
]
_STRINGS = ["apple", "Banana", None, "", "a.b*c (x) [y] 50%_off"]


def _table() -> pa.Table:
    n = 5
    return pa.table(
        {
            "id": list(range(n)),
            "MixedCase": [1, 2, None, 4, 5],
            "lower": [10, 20, 30, None, 50],
            "my col": [1, None, 3, 4, 5],
            "Foo": [1, 2, 3, 4, 5],
            "foo": [50, 40, 30, 20, 10],
            "s": pa.array(
                [{"x": 1, "Y": "a"}, {"x": 2, "Y": None}, None, {"x": None, "Y": "c"}, {"x": 5, "Y": "e"}],
                pa.struct([("x", pa.int64()), ("Y", pa.string())]),
            ),
            "name": _STRINGS,
            "big": pa.array(_STRINGS, pa.large_string()),
            "cat": pa.array(["red", "green", None, "red", ""]).dictionary_encode(),
            "l": [[1, 2], [3], None, [], [2, None, 5]],
            "tags": [["a", "b"], ["c"], None, [], ["a", None]],
            "bin": [b"\x01\x02", b"", None, b"\xff", b"\x01"],
            "ts": pa.array(_TS, pa.timestamp("us")),
            "tz": pa.array(
                [None if t is None else t.replace(tzinfo=UTC) for t in _TS], pa.timestamp("us", "UTC")
            ),
            "tzb": pa.array(
                [None if t is None else t.replace(tzinfo=UTC) for t in _TS],
                pa.timestamp("us", "Europe/Berlin"),
            ),
            "d": pa.array(
                [dt.date(2024, 1, 1), None, dt.date(2099, 1, 1), dt.date(2000, 1, 1), dt.date(2024, 6, 1)]
            ),
            "u": pa.array([0, 5, None, 2**64 - 1, 7], pa.uint64()),
            "i8": pa.array([-128, 5, None, 127, 0], pa.int8()),
            "f": [1.5, -2.5, None, float("nan"), 0.0],
        }
    )


TABLE = _table()

# filters both libraries accept; the rows must be the same
SAME = [
    # names: exact first, else the first column equal ignoring case; quoted names exact
    "MixedCase = 1",
    "mixedcase = 1",
    "MIXEDCASE > 1",
    "`MixedCase` = 2",
    "LOWER = 20",
    "foo = 40",
    "FOO = 2",
    "fOO = 2",
    "Foo = 2",
    "`my col` = 3",
    "`my col` IS NULL",
    "s.x = 1",
    "`s`.`x` = 2",
    "S.x = 5",
    "`S`.x = 1",
    "`S`.`x` = 1",
    "s.Y = 'c'",
    "s.`Y` IS NULL",
    "s['x'] = 2",
    "s IS NULL",
    # string functions, NULLs and empty strings
    "starts_with(name, 'a')",
    "starts_with(name, '')",
    "starts_with(big, 'B')",
    "starts_with(cat, 'r')",
    "ends_with(name, 'a')",
    "contains(name, 'an')",
    "contains(name, '(x)')",
    "contains(name, NULL)",
    "contains(cat, 'ee')",
    "lower(name) = 'banana'",
    "upper(big) = 'APPLE'",
    "upper(cat) = 'RED'",
    "lower(NULL) IS NULL",
    "length(name) = 0",
    "char_length(big) > 5",
    "name = ''",
    "name || '!' = 'apple!'",
    "concat(name, 'x') = 'x'",
    "concat_ws('-', name, name) = '-'",
    "coalesce(name, 'zz') = 'zz'",
    "coalesce(NULL, name, 'y') = 'y'",
    "coalesce(MixedCase, 0) = 0",
    "coalesce(i8, 1000) > 100",
    "nullif(name, 'apple') IS NULL",
    # regular expressions
    "regexp_like(name, '^a.*e$')",
    "regexp_like(name, 'B', 'i')",
    "regexp_like(name, '\\[y\\]')",
    "regexp_like(name, 'a\\.b\\*c')",
    "regexp_like(big, 'an+a')",
    "regexp_like(cat, 'e{2}')",
    "regexp_match(name, 'a.')",
    "regexp_match(name, 'a.') IS NOT NULL",
    "regexp_match(name, 'a.') IS NULL",
    "NOT regexp_match(name, 'a.')",
    "regexp_match(name, 'a.') OR id = 2",
    # LIKE
    "name LIKE '%\\%\\_off'",
    "name LIKE '_pple'",
    "name LIKE ''",
    "name NOT LIKE '%a%'",
    "name ILIKE '%AN%'",
    "name NOT ILIKE '%AN%'",
    "big LIKE 'a%'",
    "cat LIKE 'r%'",
    # lists
    "array_has(l, 1)",
    "array_has(l, 5)",
    "array_has(l, NULL)",
    "array_has(tags, 'a')",
    "array_contains(l, 3)",
    "list_has(l, 2)",
    "array_has_any(l, [1, 3])",
    "array_has_any(l, make_array(5, 7))",
    "array_has_any(l, [1, NULL])",
    "array_has_any(l, [])",
    "array_has_any(tags, ['c', 'z'])",
    "array_has_all(l, [1, 2])",
    "array_has_all(l, [2, 5])",
    "array_has_all(l, [])",
    "array_has_all(tags, ['a'])",
    "array_has_all(l, [NULL])",
    "array_has_all(l, [2, NULL])",
    "array_has_any(l, [NULL])",
    "array_has_any(tags, [NULL, 'c'])",
    "l[1] = 1",
    "l[0] = 1",
    "l[2] IS NULL",
    "l[3] = 5",
    "tags[2] = 'b'",
    "tags[1] IS NULL",
    "array_length(l) = 0",
    "array_length(l) > 1",
    "cardinality(tags) = 2",
    # dates, times, zones
    "d < CURRENT_DATE",
    "d > current_date()",
    "ts < now()",
    "ts < current_timestamp",
    "ts < CURRENT_TIMESTAMP()",
    "d = date '2024-01-01'",
    "d > date '2024-01-01'",
    "ts > timestamp '2024-01-01 00:00:00+02:00'",
    "ts = timestamp '2024-01-01T01:00:00Z'",
    "ts = TIMESTAMP '2024-01-01 01:00:00+01:00'",
    "ts = timestamp '2024-01-01 00:00:00+0200'",
    "ts = timestamp '2024-01-01 00:00:00 +02'",
    "ts = timestamp '2024-01-01 01:00:00 Europe/Berlin'",
    "ts = timestamp '2024-01-01 01:00:00UTC'",
    "ts = timestamp '2024-01-01 01:00:00 GMT'",
    "ts >= timestamp '2024-01-01T00:30:00.5Z'",
    "ts = timestamp '2024-01-01'",
    "tz > timestamp '2024-01-01 00:00:00+02:00'",
    "tz > TIMESTAMP '2024-01-01 00:30:00'",
    "tzb > TIMESTAMP '2024-01-01 00:30:00'",
    "tzb > timestamp '2024-01-01 00:00:00+02:00'",
    "tzb = timestamp '2024-01-01 01:00:00'",
    "tzb > date '2024-01-01'",
    "tz = ts",
    "tzb = ts",
    "tzb = tz",
    "CAST(tzb AS timestamp) = ts",
    "CAST(ts AS date) = date '2024-01-01'",
    # CAST to the types pylance takes
    "CAST(MixedCase AS string) = '1'",
    "CAST(id AS tinyint) = 1",
    "CAST(id AS smallint unsigned) = 2",
    "CAST(id AS int unsigned) = 3",
    "CAST(id AS bigint unsigned) = 4",
    "CAST(id AS INTEGER) = 1",
    "CAST(id AS float) = 1.0",
    "CAST(f AS double) > 0",
    "CAST(name AS binary) = X'6170706c65'",
    "CAST(id AS decimal(10, 2)) = 2",
    "CAST(id AS boolean)",
    "CAST(id AS date) = date '1970-01-02'",
    "CAST(d AS timestamp) = ts",
    "CAST(ts AS timestamp(3)) = ts",
    "id::string = '3'",
    # binary literals
    "bin = X'0102'",
    "bin = x'0102'",
    "bin > X''",
    "bin = X'FF'",
    # integers, arithmetic, IS DISTINCT FROM, BETWEEN, IN
    "u = 2*3-1",
    "u + 1 > 0",
    "u > 18446744073709551614",
    "i8 * 2 = -2",
    "i8 * 100 > 0",
    "i8 BETWEEN 0 AND 10",
    "i8 NOT BETWEEN 0 AND 10",
    "i8 IN (5, 127)",
    "i8 NOT IN (5, 127)",
    "MixedCase IS DISTINCT FROM 1",
    "MixedCase IS NOT DISTINCT FROM NULL",
    "name IS DISTINCT FROM 'apple'",
    "f > 1",
    "f IS NULL",
]


@pytest.fixture(scope="module", params=["legacy", "stable"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """The dataset written by pylance, opened by both libraries."""
    path = tmp_path_factory.mktemp(f"sql_{request.param}") / "ds"
    theirs = lance.write_dataset(TABLE, str(path), data_storage_version=request.param)
    return theirs, lance_table.dataset(str(path))


def _ids(result: pa.Table) -> list[int]:
    return sorted(result["id"].to_pylist())


@pytest.mark.parametrize("sql", SAME)
def test_same_rows_as_pylance(written: tuple[Any, Any], sql: str) -> None:
    theirs, ours = written
    expected = _ids(theirs.to_table(filter=sql, columns=["id"]))
    assert _ids(ours.to_table(columns=["id"], filter=sql)) == expected


def test_the_cases_split_the_rows(written: tuple[Any, Any]) -> None:
    """Most filters select some rows and not all (guards against vacuous comparisons)."""
    theirs, _ = written
    splitting = [sql for sql in SAME if 0 < len(theirs.to_table(filter=sql, columns=["id"])) < TABLE.num_rows]
    assert len(splitting) > 0.8 * len(SAME)


@pytest.mark.parametrize(
    "sql",
    [
        "nosuch = 1",
        "mixedcas = 1",
        "`mixedcase` = 1",
        "s.y = 'a'",
        "s.z = 1",
        "s ~ 'a'",
        "substr(name, 1, 2) = 'ap'",
        "trim(name) = 'a'",
        "regexp_like(name, '(')",
        "CAST(id AS blah) = 1",
        "name SIMILAR TO 'a%'",
        "array_has(l, '1')",
        "tz = timestamptz '2024-01-01 00:00:00'",
        "ts = timestamp '2024-01-01 00:00:00 utc'",
        "ts = timestamp '2024-01-01 00:00:00 Nowhere/City'",
        "name LIKE 'a%' ESCAPE 'ab'",
    ],
)
def test_both_refuse(written: tuple[Any, Any], sql: str) -> None:
    theirs, ours = written
    with pytest.raises(ValueError):
        theirs.to_table(filter=sql)
    with pytest.raises(FilterError):
        ours.to_table(filter=sql)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # pylance refuses a literal outside the column's type; its meaning is clear, so we answer it
        ("u > -1", [0, 1, 3, 4]),
        ("u >= -1", [0, 1, 3, 4]),
        ("-1 < u", [0, 1, 3, 4]),
        ("u < -1", []),
        ("u = -1", []),
        ("u != -1", [0, 1, 3, 4]),
        ("u IN (-1, 5)", [1]),
        ("u NOT IN (-1, 5)", [0, 3, 4]),
        ("u BETWEEN -5 AND 5", [0, 1]),
        ("i8 > 200", []),
        ("i8 < 200", [0, 1, 3, 4]),
        ("i8 > -200", [0, 1, 3, 4]),
        ("i8 = 300", []),
        ("i8 IN (300, 5)", [1]),
        ("i8 <> 300", [0, 1, 3, 4]),
    ],
)
def test_out_of_range_literals_are_answered(written: tuple[Any, Any], sql: str, expected: list[int]) -> None:
    theirs, ours = written
    with pytest.raises(ValueError):
        theirs.to_table(filter=sql)
    column = sql.split()[0] if sql[0] != "-" else "u"
    rows = theirs.to_table(columns=["id", column]).to_pylist()  # legacy files read NULL integers as 0
    if theirs.data_storage_version != "0.1":
        assert expected == [r["id"] for r in rows if r[column] is not None and _holds(sql, r[column])]
    expected = [r["id"] for r in rows if r[column] is not None and _holds(sql, r[column])]
    assert _ids(ours.to_table(columns=["id"], filter=sql)) == expected


def _holds(sql: str, value: int) -> bool:
    if sql == "-1 < u":
        return value > -1
    text = sql.split(maxsplit=1)[1]
    text = text.replace("<>", "!=").replace("NOT IN", "not in").replace("IN", "in")
    text = re.sub(r"^= ", "== ", text)
    if text.startswith("BETWEEN"):
        low, high = (int(x) for x in re.findall(r"-?\d+", text))
        return low <= value <= high
    return bool(eval(f"{value} {text}"))


def test_unknown_column_error_lists_columns_and_suggests(written: tuple[Any, Any]) -> None:
    theirs, ours = written
    with pytest.raises(ValueError, match="Did you mean 'MixedCase'"):
        theirs.to_table(filter="mixedcas = 1")
    with pytest.raises(ColumnNotFoundError) as info:
        ours.to_table(filter="mixedcas = 1")
    error = info.value
    assert isinstance(error, ValueError) and isinstance(error, FilterError)
    assert error.name == "mixedcas" and error.suggestion == "MixedCase"
    # the columns, then the system columns a filter may also name
    assert error.columns == (*TABLE.column_names, "_rowid", "_rowaddr")
    assert "did you mean 'MixedCase'?" in str(error) and "my col" in str(error)
    with pytest.raises(
        ColumnNotFoundError, match=r"unknown field 'y' in struct column 's'; did you mean 'Y'"
    ):
        parse_filter("s.y = 1", TABLE.schema)
    with pytest.raises(ColumnNotFoundError) as info:
        parse_filter("zzzzzz = 1", TABLE.schema)
    assert info.value.suggestion is None and "did you mean" not in str(info.value)


def test_unknown_column_error_pickles() -> None:
    import pickle

    with pytest.raises(ColumnNotFoundError) as info:
        parse_filter("mixedcas = 1", TABLE.schema)
    copy = pickle.loads(pickle.dumps(info.value))
    assert (copy.name, copy.suggestion, str(copy)) == ("mixedcas", "MixedCase", str(info.value))


def test_long_in_lists(written: tuple[Any, Any]) -> None:
    """Thousands of values: one hash lookup, the same rows as pylance."""
    theirs, ours = written
    for sql in [
        "id IN (" + ", ".join(str(i) for i in range(1, 5000, 2)) + ")",
        "name IN (" + ", ".join(f"'w{i}'" for i in range(3000)) + ", 'apple', '')",
        "i8 NOT IN (" + ", ".join(str(i) for i in range(-5, 100)) + ")",
    ]:
        assert _ids(ours.to_table(columns=["id"], filter=sql)) == _ids(
            theirs.to_table(filter=sql, columns=["id"])
        )


def test_case_of_names_in_many_places(tmp_path: Path) -> None:
    """With columns AB, Ab and ab, each spelling reads the column pylance reads."""
    table = pa.table({"id": [0], "AB": [1], "Ab": [2], "ab": [3], "XY": [4], "Xy": [5]})
    theirs = lance.write_dataset(table, str(tmp_path / "ds"))
    ours = lance_table.dataset(str(tmp_path / "ds"))
    for name in ["AB", "Ab", "ab", "aB", "xy", "XY", "Xy", "xY", "`Xy`"]:
        for value in range(1, 6):
            sql = f"{name} = {value}"
            assert _ids(ours.to_table(columns=["id"], filter=sql)) == _ids(theirs.to_table(filter=sql)), sql


def test_dictionary_and_large_string_columns_match_plain_strings() -> None:
    for sql in ["starts_with(COL, 'r')", "COL LIKE '%e%'", "upper(COL) = 'RED'", "COL IN ('red', '')"]:
        plain = TABLE.filter(parse_filter(sql.replace("COL", "name"), TABLE.schema))
        assert plain.num_rows == TABLE.filter(parse_filter(sql.replace("COL", "big"), TABLE.schema)).num_rows
    cat = pa.table({"c": pa.array(["red", None, "blue"]).dictionary_encode()})
    assert cat.filter(parse_filter("starts_with(c, 'r') OR c IS NULL", cat.schema)).num_rows == 2


def test_filters_on_a_copy_after_delete(tmp_path: Path) -> None:
    """The same predicate deletes the same rows in both libraries (delete runs the compiled filter)."""
    for sql in ["array_has(l, 2)", "mixedcase IS NULL OR regexp_like(name, '^B')", "u > -1 AND i8 < 100"]:
        a, b = tmp_path / f"a{len(sql)}", tmp_path / f"b{len(sql)}"
        lance.write_dataset(TABLE, str(a))
        shutil.copytree(a, b)
        pylance_sql = sql.replace("u > -1 AND ", "")  # pylance refuses the out-of-range literal
        lance.dataset(str(a)).delete(pylance_sql)
        lance_table.dataset(str(b)).delete(sql)
        left = _ids(lance.dataset(str(a)).to_table(columns=["id"]))
        assert left == _ids(lance.dataset(str(b)).to_table(columns=["id"]))
        assert left == _ids(lance_table.dataset(str(b)).to_table(columns=["id"]))


def test_array_functions_as_expressions_evaluate_in_plain_arrow() -> None:
    """The compiled expression is an ordinary pyarrow Expression: Table.filter runs it."""
    expr = parse_filter("array_has_any(l, [1, 3]) AND NOT array_has(tags, 'zz')", TABLE.schema)
    assert isinstance(expr, pc.Expression)
    assert TABLE.filter(expr)["id"].to_pylist() == [0, 1]
    sliced = TABLE.slice(1)
    assert sliced.filter(parse_filter("array_has(l, 3)", sliced.schema))["id"].to_pylist() == [1]
