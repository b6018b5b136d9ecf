"""Filters of simple numeric conditions evaluated with numpy give the compiled filter's answers.

The oracle is the compiled predicate run through Arrow (:func:`evaluate_mask`), whose semantics
the filter tests pin down (DataFusion's float order, literals in the column's type, SQL nulls).
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_table.errors import FilterError
from lance_table.filters import vectorized
from lance_table.filters.bounds import terms
from lance_table.table.scan import _compile_filter, evaluate_mask


def _table(rng: np.random.Generator, n: int = 400) -> pa.Table:
    holes = rng.random(n) < 0.15
    floats = rng.choice([0.0, -0.0, 0.1, 0.5, 1.0, -1.0, 2.5, 1e30, np.nan, np.inf, -np.inf], n)
    return pa.table(
        {
            "i64": pa.array(rng.integers(-5, 6, n), pa.int64()),
            "i8": pa.array(rng.integers(-128, 128, n).astype(np.int8), mask=holes),
            "u16": pa.array(rng.integers(0, 70_000, n).astype(np.uint16)),
            "u64": pa.array(rng.integers(0, 2**63, n, dtype=np.uint64) * 2, pa.uint64()),
            "f64": pa.array(floats, pa.float64(), mask=rng.random(n) < 0.1),
            "f32": pa.array(floats.astype(np.float32), pa.float32()),
            "s": pa.array([f"v{v}" for v in rng.integers(0, 5, n)]),
        }
    )


LITERALS = [
    "0",
    "-0",
    "1",
    "-1",
    "3",
    "0.1",
    "-0.0",
    "2.5",
    "255",
    "-129",
    "70000",
    "1e30",
    "1e40",
    "18446744073709551615",
]
OPS = ["=", "!=", "<>", "<", "<=", ">", ">="]


def _check(table: pa.Table, predicate: str) -> bool:
    """Compare; True when the numpy path took the predicate."""
    try:
        compiled = _compile_filter(predicate, table.schema)[0]
    except FilterError:  # the compiler refuses it: so does a scan, before any evaluation
        return False
    found, whole = terms(predicate, table.schema)
    got = vectorized.mask(table, found) if whole else None
    try:
        expected = evaluate_mask(table, compiled)
    except pa.ArrowInvalid:  # (a uint64 column against a negative literal): Arrow's answer stands
        assert got is None, predicate
        return False
    if got is not None:
        np.testing.assert_array_equal(got, expected, err_msg=predicate)
    return got is not None


def test_every_simple_comparison_agrees_with_the_compiled_filter() -> None:
    table = _table(np.random.default_rng(3))
    taken = 0
    for column, op, literal in itertools.product(["i64", "i8", "u16", "u64", "f64", "f32"], OPS, LITERALS):
        taken += _check(table, f"{column} {op} {literal}")
        taken += _check(table, f"{literal} {op} {column}")
    for column in ["i64", "i8", "f64", "f32"]:
        taken += _check(table, f"{column} BETWEEN -1 AND 1")
        taken += _check(table, f"{column} BETWEEN 0.1 AND 2.5")
        taken += _check(table, f"{column} IN (0, 1, 3)")
        taken += _check(table, f"{column} IN (2)")
        # more literals than are compared one by one: a lookup instead
        taken += _check(table, f"{column} IN (-4, -3, -2, -1, 0, 1, 2.5, 3, 4, 5, 100)")
        taken += _check(table, f"{column} IS NULL")
        taken += _check(table, f"{column} IS NOT NULL")
        taken += _check(table, f"{column} >= 0 AND {column} < 3 AND i64 != 2")
    assert taken > 500  # the numpy path really ran


def test_predicates_it_does_not_take_go_to_arrow() -> None:
    table = _table(np.random.default_rng(4))
    for predicate in [
        "s = 'v1'",  # strings
        "i64 < 1.5",  # a fractional literal against integers
        "i64 < 3 OR f64 > 1",  # not a conjunction of simple terms
        "i64 + 1 < 3",
        "i8 < 300",  # out of the column's range
        "f32 < 1e40",  # past float32
        "u64 > -1",
    ]:
        assert not _check(table, predicate), predicate


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    parts=st.lists(
        st.tuples(
            st.sampled_from(["i64", "i8", "u16", "f64", "f32"]),
            st.sampled_from(OPS),
            st.sampled_from(LITERALS),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_random_conjunctions_agree(seed: int, parts: list[tuple[str, str, str]]) -> None:
    table = _table(np.random.default_rng(seed), 200)
    _check(table, " AND ".join(f"{c} {op} {v}" for c, op, v in parts))


@pytest.mark.parametrize("chunks", [1, 3])
def test_chunked_and_sliced_columns(chunks: int) -> None:
    table = _table(np.random.default_rng(5), 900).slice(37, 800)
    if chunks > 1:
        table = pa.concat_tables([table.slice(0, 300), table.slice(300, 200), table.slice(500)])
    assert _check(table, "i8 >= -3 AND f64 > 0.1")


def test_rows_evaluated_a_block_at_a_time(monkeypatch) -> None:
    # blocks of 7 rows: each condition's answers and their conjunction are cut at the same rows
    monkeypatch.setattr(vectorized, "BLOCK", 7)
    table = _residue_table(np.random.default_rng(9), 300).slice(5)
    for predicate in [
        "i8 >= -3 AND f64 > 0.1 AND i32 IS NOT NULL",
        "i64 IN (0, 1, 3) AND f32 BETWEEN -1 AND 2.5",
        "i64 IN (-4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 100) AND i8 IS NULL",
        "big % 10 = -3 AND i32 % 4 != 1 AND u16 % 7 < 3",
    ]:
        assert _check(table, predicate), predicate


def _residue_table(rng: np.random.Generator, n: int = 600) -> pa.Table:
    """Integers of every sign, the types' extremes, nulls."""
    table = _table(rng, n)
    i32 = rng.integers(-40, 41, n).astype(np.int32)
    i32[:2] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max]
    i64 = rng.integers(-(2**62), 2**62, n)
    i64[:4] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, -25, 25]
    return table.append_column("i32", pa.array(i32, mask=rng.random(n) < 0.1)).append_column(
        "big", pa.array(i64, pa.int64())
    )


def test_remainder_conditions_agree_with_the_compiled_filter() -> None:
    # x % d <op> k: the remainder takes the dividend's sign (-25 % 10 is -5, -25 % -10 too)
    table = _residue_table(np.random.default_rng(6))
    taken = 0
    for column, divisor, op, literal in itertools.product(
        ["i8", "i32", "u16", "big"],
        ["10", "-10", "3", "-1", "300"],
        OPS,
        ["0", "2", "-5", "10"],
    ):
        taken += _check(table, f"{column} % {divisor} {op} {literal}")
    taken += _check(table, "0 = big % 10")
    taken += _check(table, "(i32 % 4) = -3 AND i32 < 0 AND f64 > 0.1")
    assert taken > 350


def test_remainders_it_does_not_take_go_to_arrow() -> None:
    table = _residue_table(np.random.default_rng(7))
    for predicate in [
        "f64 % 2 = 1",  # floats: fmod's exact answer is Arrow's
        "i64 % 2.5 = 0",
        "i64 % 10 = 0.5",
        "i8 % 300 = 127",  # a divisor outside the column's type
        "i64 % 10 IN (0, 5)",
        "(i64 + 1) % 10 = 0",
    ]:
        assert not _check(table, predicate), predicate
    found, whole = terms("i64 % 0 = 0", table.schema)
    assert whole and vectorized.mask(table, found) is None  # divide by zero: Arrow raises it


def test_remainder_conditions_prune_nothing() -> None:
    from lance_table.filters.bounds import conjuncts

    schema = _table(np.random.default_rng(8), 4).schema
    assert conjuncts("i64 % 10 = 0 AND i8 > 3", schema) == conjuncts("i8 > 3", schema)
