"""SQL value expressions (projections, ``update``, ``add_columns``), compared with pylance.

pylance computes ``to_table(columns={"v": sql})``, ``add_columns({"v": sql})`` and
``update({"col": sql})`` on a dataset it wrote; :func:`lance_table.filters.evaluate` and
:func:`~lance_table.filters.compile_value` compute the same SQL over the same rows, and the values
and their Arrow type must be the same. Where pylance refuses an expression, so do we (unless it is
one of the documented forms accepted beyond pylance, whose answers are checked here by definition).
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lance_table.errors import ColumnNotFoundError, FilterError
from lance_table.filters import CompiledValue, analyze_value, compile_value, evaluate

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop

TABLE = pa.table(
    {
        "id": [0, 1, 2, 3],
        "i8": pa.array([1, -7, None, 127], pa.int8()),
        "i32": pa.array([1, -7, None, 100], pa.int32()),
        "u8": pa.array([1, 7, None, 255], pa.uint8()),
        "u64": pa.array([1, 7, None, 2**64 - 1], pa.uint64()),
        "x": [1, -7, None, 4],
        "f": [1.5, -2.5, None, float("nan")],
        "f32": pa.array([1.5, -2.5, None, 3], pa.float32()),
        "name": ["apple", "Banana", None, ""],
        "big": pa.array(["a", "b", None, "c"], pa.large_string()),
        "dec": pa.array([1, 2, None, 3], pa.decimal128(10, 2)),
        "b": [True, False, None, True],
        "d": pa.array([dt.date(2024, 1, 1), None, dt.date(2030, 1, 1), dt.date(2000, 1, 1)]),
        "ts": pa.array(
            [
                dt.datetime(2024, 1, 1, 0, 0, 0, 500000),
                None,
                dt.datetime(2024, 1, 1, 1, 2, 3, 123),
                dt.datetime(2023, 12, 31),
            ]
        ),
        "l": [[1, 2], [3], None, []],
        "MixedCase": [5, 6, 7, 8],
    }
)

# expressions both libraries compute; values and types must be the same
SAME = [
    "x * 2 + 1",
    "i8 * 2",
    "i8 * 100",
    "i8 + x",
    "i8 + i32",
    "i32 * 2",
    "i32 / 2",
    "x / 2",
    "x % 3",
    "-x",
    "-i8",
    "u8 + 1",
    "u8 - 2",
    "u8 + x",
    "u64 + 1",
    "u64 + x",
    "u8 + i8",
    "f * 2",
    "f / 0",
    "x * f",
    "x + f32",
    "f32 * 2",
    "f32 + f",
    "i32 + f32",
    "2 * 3 + x",
    "5.0 / 2 + f",
    "dec + 1",
    "dec * x",
    "dec * 2",
    "name || 'x'",
    "name || big",
    "big || 'x'",
    "name || NULL",
    "'a' || name",
    "concat(name, 'x')",
    "concat_ws('-', name, name)",
    "upper(name)",
    "lower(big)",
    "upper(big)",
    "length(name)",
    "length(big)",
    "coalesce(x, 0)",
    "coalesce(x, 0.5)",
    "coalesce(i8, 1000)",
    "coalesce(i8, i32)",
    "coalesce(name, big)",
    "coalesce(f32, 1)",
    "coalesce(name, 'none')",
    "nullif(x, 1)",
    "nullif(name, 'apple')",
    "abs(i8)",
    "abs(f32)",
    "CAST(x AS double)",
    "CAST(x AS string)",
    "CAST(b AS int)",
    "CAST(d AS timestamp)",
    "CAST(ts AS date)",
    "CAST(x AS decimal(10, 2))",
    "CAST(f32 AS bigint)",
    "CAST(f AS string)",
    "CAST(f32 AS string)",
    "CAST(f * 1e20 AS string)",
    "CAST(f * 0.000001 AS string)",
    "CAST(f * 0.00001 AS string)",
    "CAST(f * 0.0000001 AS string)",
    "CAST(f * 1000000000000000 AS string)",
    "CAST(f * 10000000000000000 AS string)",
    "CAST(f / 3 AS string)",
    "CAST(f / 0 AS string)",
    "CAST(f * 0 AS string)",
    "CAST(u64 AS double)",
    "CAST(ts AS string)",
    "CAST(CAST(ts AS timestamp(9)) AS string)",
    "CAST(CAST(ts AS timestamp(3)) AS string)",
    "CAST(CAST(ts AS timestamp(0)) AS string)",
    "CAST(d AS string)",
    "CAST(dec AS string)",
    "x > 1",
    "NOT b",
    "b AND x > 1",
    "x IS NULL",
    "x IS DISTINCT FROM 1",
    "starts_with(name, 'a')",
    "contains(big, 'b')",
    "regexp_like(name, 'an+a', 'i')",
    "array_has(l, 3)",
    "array_has_any(l, [1, 3])",
    "array_length(l)",
    "l[1]",
    "l[2] * 10",
    "x + NULL",
    "x = NULL",
    "d - d",
    "mixedcase * 2",
    "MIXEDCASE + x",
    "`MixedCase`",
]


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return lance.write_dataset(TABLE, str(tmp_path_factory.mktemp("values") / "ds"))


def _pylance(dataset: Any, sql: str) -> pa.ChunkedArray:
    return dataset.to_table(columns={"v": sql, "id": "id"})["v"]


@pytest.mark.parametrize("sql", SAME)
def test_projection_matches_pylance(theirs: Any, sql: str) -> None:
    expected = _pylance(theirs, sql)
    ours = evaluate(sql, TABLE)
    assert ours.type == expected.type
    assert _same(ours.to_pylist(), expected.to_pylist())
    assert analyze_value(sql, TABLE.schema).type == expected.type


def _same(a: list[Any], b: list[Any]) -> bool:
    """Equal lists, NaN equal to NaN."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
            continue
        if x != y:
            return False
    return True


@pytest.mark.parametrize(
    "sql",
    [
        "nosuch + 1",
        "x || 'y'",
        "name || 1",
        "-u8",
        "substr(name, 1, 2)",
        "trim(name)",
        "CAST(x AS blah)",
        "name SIMILAR TO 'a%'",
        "`mixedcase` + 1",
    ],
)
def test_both_refuse(theirs: Any, sql: str) -> None:
    with pytest.raises(ValueError):
        _pylance(theirs, sql)
    with pytest.raises(FilterError):
        compile_value(sql, TABLE.schema)


@pytest.mark.parametrize(
    ("sql", "expected", "arrow_type"),
    [
        # pylance refuses a literal that does not fit the column's type; here Arrow's promotion applies
        ("x * 2.5", [2.5, -17.5, None, 10.0], pa.float64()),
        ("x / 2.0", [0.5, -3.5, None, 2.0], pa.float64()),
        ("i8 + 200", [201, 193, None, 327], pa.int64()),
        # and CASE, which pylance does not take
        ("CASE WHEN x > 1 THEN 'big' WHEN x < 0 THEN 'negative' ELSE 'small' END", None, pa.string()),
        ("CASE x WHEN 1 THEN 10 WHEN 4 THEN 40 END", [10, None, None, 40], pa.int64()),
        ("CASE WHEN b THEN x ELSE 0 END", [1, 0, 0, 4], pa.int64()),
        ("CASE WHEN name = '' THEN NULL ELSE upper(name) END", ["APPLE", "BANANA", None, None], pa.string()),
    ],
)
def test_beyond_pylance(theirs: Any, sql: str, expected: list[Any] | None, arrow_type: pa.DataType) -> None:
    with pytest.raises(ValueError):
        _pylance(theirs, sql)
    result = evaluate(sql, TABLE)
    assert result.type == arrow_type
    if expected is None:  # the CASE over x: big for x > 1, negative for x < 0, small otherwise
        expected = ["small", "negative", "small", "big"]
    assert result.to_pylist() == expected


def test_division_by_zero_fails_as_in_pylance(theirs: Any) -> None:
    with pytest.raises(pa.ArrowInvalid):
        _pylance(theirs, "x / 0")
    with pytest.raises(pa.ArrowInvalid, match="divide by zero"):
        evaluate("x / 0", TABLE)


def test_cast_of_nan_to_integer_fails_as_in_pylance(theirs: Any) -> None:
    with pytest.raises(pa.ArrowInvalid):
        _pylance(theirs, "CAST(f AS int)")
    with pytest.raises(pa.ArrowInvalid):
        evaluate("CAST(f AS int)", TABLE)
    assert evaluate("CAST(f32 AS int)", TABLE).to_pylist() == [1, -2, None, 3]


@pytest.mark.parametrize("sql", ["x * 2", "name || '!'", "1", "upper(name)", "coalesce(x, 0) + i32"])
def test_add_columns_computes_the_same_column(tmp_path: Path, sql: str) -> None:
    """pylance's ``add_columns({"v": sql})`` stores what :func:`evaluate` computes."""
    dataset = lance.write_dataset(TABLE, str(tmp_path / "ds"))
    dataset.add_columns({"v": sql})
    stored = lance.dataset(str(tmp_path / "ds")).to_table(columns=["v"])["v"]
    ours = evaluate(sql, TABLE)
    assert ours.type == stored.type
    assert ours.to_pylist() == stored.to_pylist()


def test_add_columns_null_is_a_null_column(tmp_path: Path) -> None:
    dataset = lance.write_dataset(TABLE, str(tmp_path / "ds"))
    dataset.add_columns({"v": "NULL"})
    stored = lance.dataset(str(tmp_path / "ds")).to_table(columns=["v"])["v"]
    assert stored.type == pa.null() == evaluate("NULL", TABLE).type
    assert len(evaluate("NULL", TABLE)) == TABLE.num_rows


@pytest.mark.parametrize(
    ("column", "sql"),
    [("name", "upper(name)"), ("x", "x / 2"), ("name", "x"), ("x", "'5'"), ("i8", "i8 * 2"), ("f32", "x")],
)
def test_update_writes_what_compile_value_casts_to(tmp_path: Path, column: str, sql: str) -> None:
    """``update({column: sql})``: pylance stores the value cast to the column's type; the expression
    from ``compile_value(sql, schema, to=type)`` gives the same values."""
    dataset = lance.write_dataset(TABLE, str(tmp_path / "ds"))
    dataset.update({column: sql})
    stored = lance.dataset(str(tmp_path / "ds")).to_table(columns=["id", column]).sort_by("id")[column]
    target = TABLE.schema.field(column).type
    value = analyze_value(sql, TABLE.schema, to=target)
    assert value.type == target
    ours = TABLE.select([]).append_column("v", [evaluate(value.expression, TABLE)])["v"]
    assert ours.to_pylist() == stored.to_pylist()


def test_compiled_value_reports_type_and_columns() -> None:
    value = analyze_value("coalesce(i8, 0) + mixedcase * 2", TABLE.schema)
    assert isinstance(value, CompiledValue)
    assert value.columns == ("i8", "MixedCase")
    assert value.type == pa.int64()
    assert isinstance(compile_value("x + 1", TABLE.schema), pc.Expression)
    literal = analyze_value("'a' || 'b'", TABLE.schema)
    assert (literal.columns, literal.type) == ((), pa.string())
    assert evaluate("'a' || 'b'", TABLE).to_pylist() == ["ab"] * 4


def test_expressions_and_batches() -> None:
    expr = pc.field("x") * 3
    assert compile_value(expr, TABLE.schema) is expr
    assert analyze_value(expr, TABLE.schema).columns == ("x",)
    batch = TABLE.to_batches()[0]
    assert evaluate(expr, batch).to_pylist() == [3, -21, None, 12]
    assert evaluate("x * 3", batch).to_pylist() == [3, -21, None, 12]
    cast = analyze_value("x", TABLE.schema, to=pa.string())
    assert evaluate(cast.expression, TABLE).to_pylist() == ["1", "-7", None, "4"]


def test_errors() -> None:
    with pytest.raises(ColumnNotFoundError, match="did you mean 'x'"):
        compile_value("xx + 1", TABLE.schema)
    with pytest.raises(FilterError, match="empty"):
        compile_value("  ", TABLE.schema)
    with pytest.raises(TypeError):
        compile_value(1, TABLE.schema)  # type: ignore[arg-type]
    with pytest.raises(FilterError, match="regexp_like"):
        compile_value("regexp_match(name, 'a')", TABLE.schema)
    with pytest.raises(FilterError, match="cannot convert 'abc'"):
        compile_value("'abc'", TABLE.schema, to=pa.int64())
    with pytest.raises(FilterError, match=r"CASE needs|syntax"):
        compile_value("CASE END", TABLE.schema)


def test_decimal_results_keep_their_precision() -> None:
    result = evaluate("dec * 2", TABLE)
    assert result.type == pa.decimal128(21, 4)
    assert result.to_pylist() == [
        decimal.Decimal("2.0000"),
        decimal.Decimal("4.0000"),
        None,
        decimal.Decimal("6.0000"),
    ]


@pytest.mark.parametrize(
    ("sql", "arrow_type", "value"),
    [
        ("coalesce(NULL, 1)", pa.int64(), 1),
        ("coalesce(NULL, NULL)", pa.null(), None),
        ("NULL IS DISTINCT FROM NULL", pa.bool_(), False),
        ("1 IS DISTINCT FROM NULL", pa.bool_(), True),
        ("concat_ws('-', 'a', NULL, 'b')", pa.string(), "a-b"),
        ("'a' || NULL", pa.string(), None),
        ("nullif(1, 1)", pa.int64(), None),
        ("CASE WHEN 1 = 2 THEN 'a' ELSE 'b' END", pa.string(), "b"),
        ("CASE 2 WHEN 1 THEN 10 WHEN 2 THEN 20 END", pa.int64(), 20),
        ("date '2024-01-02' - date '2024-01-01'", pa.int64(), 1),
        ("CAST(1.5 AS string)", pa.string(), "1.5"),
    ],
)
def test_literal_only_expressions_fill_every_row(sql: str, arrow_type: pa.DataType, value: Any) -> None:
    result = evaluate(sql, TABLE)
    assert result.type == arrow_type
    assert result.to_pylist() == [value] * TABLE.num_rows


def test_compiled_sqlglot_takes_postgres_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlglot's compiled build refuses objects of a Python subclass of its parser: the filter
    dialect then reads with PostgreSQL's parser, which also puts IS below comparisons."""
    from sqlglot.parsers.postgres import PostgresParser

    from lance_table.filters import dialect

    assert dialect._parser_class() is dialect._LowIsParser

    def refuse(self: object, *args: object, **kwargs: object) -> None:
        raise TypeError("interpreted classes cannot inherit from compiled")

    monkeypatch.setattr(dialect._LowIsParser, "__init__", refuse)
    assert dialect._parser_class() is PostgresParser
