"""Differential fuzz of filters and deletes on value columns over many 2.0/2.1/2.2 fragments, the
dataset written in rounds by either library (both writers' fragments in one dataset), then deleted
from by either library with predicates on any column.

The columns stress the batched reads of many fragments' predicate columns: integers of every bit
width (all zeros, small, sorted, negative, the full 64-bit range, widths changing block to block;
8- to 64-bit types), strings for FSST and zstd chunks (short repeated text, random bytes, very long
strings beside short ones, non-ASCII), nulls at random rates (none to all), fragments of exactly
1024 * k rows and pages of many chunks. Both libraries run the same filters (projections that
leave the predicate's column out, limit, offset, row ids and addresses), takes, and deletes on
copies, compared in full.

The default run tries a few seeded cases; the ``stress`` test many more
(``LANCE_TABLE_FUZZ_SCALE`` multiplies them). A failing case names its seed: rerun it with
``LANCE_TABLE_FILTER_FUZZ_SEED=<seed>``.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.file import writer as file_writer

FAST_CASES = 6
STRESS_CASES = int(150 * float(os.environ.get("LANCE_TABLE_FUZZ_SCALE", "1")))
INT_KINDS = ("zero", "small", "sorted", "neg", "full", "mixed")
STR_KINDS = ("short", "bytes", "long", "unicode")


def _ints(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind == "zero":
        return np.zeros(n, np.int64)
    if kind == "small":
        return rng.integers(0, 7, n)
    if kind == "sorted":
        return np.sort(rng.integers(0, 10**6, n))
    if kind == "neg":
        return rng.integers(-1000, 1000, n)
    if kind == "full":
        return rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, n, dtype=np.int64)
    widths = rng.integers(0, 63, n // 1024 + 1)  # "mixed": the bit width changes block to block
    return np.concatenate([rng.integers(0, 2 ** int(w) + 1, 1024) for w in widths])[:n]


def _strings(rng: np.random.Generator, n: int, kind: str) -> list[str]:
    keys = rng.integers(0, 10**6, n).tolist()
    if kind == "short":
        return [f"user_{k % 97}_" + "ab" * (k % 5) for k in keys]
    if kind == "bytes":  # every byte value (FSST escapes), as Latin-1 text
        return [bytes(rng.integers(0, 256, k % 12).astype(np.uint8)).decode("latin-1") for k in keys]
    if kind == "long":
        return [("lorem ipsum dolor " * (1 + k % 400)) if k % 50 == 0 else f"s{k % 13}xyz" for k in keys]
    return ["ünï" * (k % 4) + "ä€" + str(k % 7) for k in keys]


def _table(rng: np.random.Generator, start: int, n: int, spec: dict[str, tuple[str, str, float]]) -> pa.Table:
    cols = [pa.array(np.arange(start, start + n, dtype=np.int64))]
    for typ, kind, rate in spec.values():
        nulls = rng.random(n) < rate
        if typ == "str":
            cols.append(pa.array(_strings(rng, n, kind), pa.string(), mask=nulls))
            continue
        v = _ints(rng, n, kind)
        if typ != "int64":
            info = np.iinfo(typ)
            v = np.clip(v, info.min, info.max).astype(typ)
        cols.append(pa.array(v, mask=nulls))
    return pa.Table.from_arrays(cols, names=["id", *spec])


def _spec(rng: np.random.Generator) -> dict[str, tuple[str, str, float]]:
    spec = {}
    for k in range(int(rng.integers(1, 4))):
        typ = str(rng.choice(["int64", "int32", "uint8", "int16", "str", "str"]))
        kind = str(rng.choice(STR_KINDS if typ == "str" else INT_KINDS))
        spec[f"c{k}"] = (typ, kind, float(rng.choice([0, 0, 0.1, 0.6, 1.0])))
    return spec


def _predicate(rng: np.random.Generator, table: pa.Table, spec: dict[str, tuple[str, str, float]]) -> str:
    """A predicate on a random column, its literal one of the column's values."""
    name = str(rng.choice(list(spec)))
    col = table.column(name).drop_null()
    if rng.random() < 0.15:
        return f"{name} IS NULL"
    if len(col) == 0:
        return f"{name} IS NOT NULL"
    value = col[int(rng.integers(0, len(col)))].as_py()
    if spec[name][0] == "str":
        if any(not 32 <= ord(ch) <= 126 for ch in value):
            return f"{name} IS NOT NULL AND id % 3 = 0"
        return f"{name} {rng.choice(['=', '<>', '<', '>='])} '{value.replace(chr(39), chr(39) * 2)}'"
    pred = f"{name} {rng.choice(['=', '<', '>=', '<>'])} {value}"
    return f"({pred}) OR id < {int(rng.integers(0, 50))}" if rng.random() < 0.3 else pred


def _write(t: pa.Table, uri: str, rng: np.random.Generator, mode: str, per: int, version: str) -> str:
    if rng.random() < 0.5:
        kw = dict(file_writer.LanceFileWriter.__init__.__kwdefaults__)
        page = int(rng.choice([300, 4096, 1 << 20, 1 << 20]))
        file_writer.LanceFileWriter.__init__.__kwdefaults__ = {**kw, "page_size_bytes": page}
        try:
            lt.write_dataset(t, uri, mode=mode, max_rows_per_file=per, data_storage_version=version)
        finally:
            file_writer.LanceFileWriter.__init__.__kwdefaults__ = kw
        return f"ours {t.num_rows}/{per} ({page} B pages)"
    group = int(rng.choice([64, 1024]))
    lance.write_dataset(
        t, uri, mode=mode, max_rows_per_file=per, max_rows_per_group=group, data_storage_version=version
    )
    return f"pylance {t.num_rows}/{per}"


def _build(root: Path, seed: int) -> tuple[str, dict[str, tuple[str, str, float]], str]:
    rng = np.random.default_rng(seed)
    version = str(rng.choice(["2.0", "2.1", "2.2", "2.2"]))
    spec = _spec(rng)
    uri = str(root / f"case-{seed}")
    start, log = 0, []
    for r in range(int(rng.integers(1, 4))):
        shape = rng.random()
        if shape < 0.2:  # fragments of exactly 1024 * k rows
            per = 1024 * int(rng.integers(1, 5))
            n = per * int(rng.integers(1, 4))
        elif shape < 0.4:  # pages of many chunks
            per = int(rng.integers(2000, 9000))
            n = per * int(rng.integers(1, 3)) + int(rng.integers(0, 100))
        else:  # many small fragments
            per = int(rng.integers(1, 400))
            n = per * int(rng.integers(2, 25)) + int(rng.integers(0, per))
        log.append(
            _write(_table(rng, start, n, spec), uri, rng, "create" if r == 0 else "append", per, version)
        )
        start += n
        full = lance.dataset(uri).to_table()
        for _ in range(int(rng.integers(0, 3))):
            if not full.num_rows:
                break
            pred = (
                _predicate(rng, full, spec) if rng.random() < 0.6 else f"id % {int(rng.integers(2, 9))} = 1"
            )
            lib = lt if rng.random() < 0.5 else lance
            lib.dataset(uri).delete(pred)
            log.append(f"delete by {lib.__name__}: {pred}")
    return uri, spec, f"seed {seed}: {version}, {spec}, {log}"


def _compare(root: Path, uri: str, spec: dict[str, tuple[str, str, float]], seed: int) -> None:
    rng, prng = np.random.default_rng(seed + 7), random.Random(seed)
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    expected = theirs.to_table()
    assert_tables_equal(ours.to_table(), expected)
    names = expected.column_names
    for _ in range(4):
        pred = _predicate(rng, expected, spec)
        kw: dict = {"filter": pred, "columns": prng.sample(names, prng.randint(1, len(names)))}
        if prng.random() < 0.4:
            kw["limit"] = prng.choice([1, 10, 500])
        if prng.random() < 0.3:
            kw["offset"] = prng.choice([0, 3, 100])
        if prng.random() < 0.3:
            kw["with_row_id"] = True
            kw["with_row_address"] = prng.random() < 0.5
        try:
            assert_tables_equal(ours.to_table(**kw), theirs.to_table(**kw))
            assert ours.count_rows(filter=pred) == theirs.count_rows(filter=pred)
        except Exception as exc:
            raise AssertionError(f"filter {kw}: {exc!r}") from exc
    if expected.num_rows:
        idx = sorted(prng.sample(range(expected.num_rows), min(expected.num_rows, prng.randint(1, 60))))
        assert_tables_equal(ours.take(idx), theirs.take(idx))
    pred = _predicate(rng, expected, spec)
    mine, yours = root / f"ours-{seed}", root / f"theirs-{seed}"
    shutil.copytree(uri, mine)
    shutil.copytree(uri, yours)
    lt.dataset(str(mine)).delete(pred)
    lance.dataset(str(yours)).delete(pred)
    want = lance.dataset(str(yours)).to_table()
    try:
        assert_tables_equal(lance.dataset(str(mine)).to_table(), want)
        assert_tables_equal(lt.dataset(str(mine)).to_table(), want)
    except Exception as exc:
        raise AssertionError(f"delete {pred}: {exc!r}") from exc


def _run(seeds: list[int], root: Path) -> None:
    for seed in seeds:
        uri, spec, what = _build(root, seed)
        try:
            _compare(root, uri, spec, seed)
        except Exception as exc:
            raise AssertionError(f"{what}: {exc!r}") from exc


def _seeds(count: int, base: int) -> list[int]:
    pinned = os.environ.get("LANCE_TABLE_FILTER_FUZZ_SEED")
    return [int(pinned)] if pinned else [base + k for k in range(count)]


def test_filters_and_deletes_on_value_columns_match_pylance(tmp_path):
    _run(_seeds(FAST_CASES, 0), tmp_path)


@pytest.mark.stress
def test_filters_and_deletes_on_value_columns_match_pylance_stress(tmp_path):
    _run(_seeds(STRESS_CASES, 10_000), tmp_path)
