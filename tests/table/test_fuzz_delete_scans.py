"""Differential fuzz of reads after deletes: small random datasets (legacy, 2.0, 2.1, 2.2; written by
either library, with random schemas, nulls and, for our writer, small pages), random deletes
(rows here and there, ranges, whole fragments, everything) by either library, then the same
reads on both libraries: whole scans, batches, offset and limit, row ids and addresses, takes,
filters with limit and offset, projections.

The default run tries a few seeded cases; the ``stress`` test tries many more
(``LANCE_TABLE_FUZZ_SCALE`` multiplies them). A failing case names its seed: rerun it with
``LANCE_TABLE_DELSCAN_SEED=<seed>``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.file import writer as file_writer
from lance_table.table import scan

FAST_CASES = 6
_SCALE = float(os.environ.get("LANCE_TABLE_FUZZ_SCALE", "1"))
STRESS_CASES = int(60 * _SCALE)
VERSIONS = ("legacy", "2.0", "2.1", "2.2")
WORDS = np.array(["red", "green", "blue", "amber", "teal"], dtype=object)


def _column(kind: str, n: int, rng: np.random.Generator, version: str) -> pa.Array:
    """A column of ``kind`` for ``n`` rows, with nulls at a random rate (possibly none or all;
    2.0 and legacy files store no null structs)."""
    rate = float(rng.choice([0.0, 0.0, 0.1, 0.5, 1.0]))
    nulls = rng.random(n) < rate
    if kind == "int":
        return pa.array(rng.integers(-(2**40), 2**40, n), mask=nulls)
    if kind == "small_int":
        return pa.array(rng.integers(0, 7, n).astype(np.int32), mask=nulls)
    if kind == "float":
        return pa.array(rng.standard_normal(n), mask=nulls)
    if kind == "dict_str":  # few distinct values: dictionary pages in 2.1/2.2
        return pa.array(WORDS[rng.integers(0, WORDS.size, n)], pa.string(), mask=nulls)
    if kind == "str":
        return pa.array(
            [f"v{k}-" + "x" * int(k % 23) for k in rng.integers(0, 10**6, n).tolist()], mask=nulls
        )
    if kind == "large_str":
        return pa.array(
            [f"w{k}" * int(1 + k % 5) for k in rng.integers(0, 1000, n).tolist()], pa.large_string()
        )
    if kind == "bool":
        return pa.array(rng.random(n) < 0.3, mask=nulls)
    if kind == "list":
        lengths = rng.integers(0, 4, n)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        values = pa.array(rng.integers(0, 100, int(offsets[-1])).astype(np.int32))
        return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(nulls))
    if kind == "list_str":
        lengths = rng.integers(0, 3, n)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        values = pa.array(WORDS[rng.integers(0, WORDS.size, int(offsets[-1]))], pa.string())
        return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(nulls))
    if kind == "struct":
        a = pa.array(rng.integers(0, 1000, n).astype(np.int32))
        b = pa.array(WORDS[rng.integers(0, WORDS.size, n)], pa.string(), mask=rng.random(n) < 0.2)
        mask = pa.array(nulls) if version not in ("legacy", "2.0") else None
        return pa.StructArray.from_arrays([a, b], names=["a", "b"], mask=mask)
    if kind in ("packed_var", "packed"):  # children without nulls; the struct's own nulls (2.2)
        a = pa.array(rng.integers(0, 1000, n).astype(np.int32))
        if kind == "packed":
            return pa.StructArray.from_arrays([a, pa.array(rng.random(n))], names=["a", "f"])
        b = pa.array([f"p{k}" * int(k % 4) for k in rng.integers(0, 500, n).tolist()])
        return pa.StructArray.from_arrays([a, b], names=["a", "b"], mask=pa.array(nulls))
    if kind == "fsl":
        return pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * 3).astype(np.float32)), 3)
    raise AssertionError(kind)


KINDS = (
    "int",
    "small_int",
    "float",
    "dict_str",
    "str",
    "large_str",
    "bool",
    "list",
    "list_str",
    "struct",
    "fsl",
)
PACKED = {"legacy": (), "2.0": (), "2.1": ("packed",), "2.2": ("packed", "packed_var")}


def _table(rng: np.random.Generator, n: int, version: str) -> pa.Table:
    kinds = rng.choice(KINDS + PACKED[version], size=int(rng.integers(1, 5)), replace=False).tolist()
    fields, cols = [pa.field("id", pa.int64())], [pa.array(np.arange(n, dtype=np.int64))]
    for k, kind in enumerate(kinds):
        col = _column(kind, n, rng, version)
        meta = {"lance-encoding:packed": "true"} if kind.startswith("packed") else None
        fields.append(pa.field(f"c{k}_{kind}", col.type, metadata=meta))
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def _deletes(rng: np.random.Generator, n: int, per_file: int) -> list[str]:
    """One to three delete predicates over ``id``: scattered rows, ranges, whole fragments, all."""
    out = []
    for _ in range(int(rng.integers(1, 4))):
        shape = rng.choice(["mod", "mod", "range", "fragment", "short_runs", "all", "one"], p=None)
        if shape == "mod":
            m = int(rng.integers(2, 12))
            out.append(f"id % {m} = {int(rng.integers(0, m))}")
        elif shape == "range":
            lo = int(rng.integers(0, n))
            out.append(f"id >= {lo} AND id < {lo + int(rng.integers(1, n // 2 + 2))}")
        elif shape == "fragment":
            f = int(rng.integers(0, max(1, -(-n // per_file))))
            out.append(f"id >= {f * per_file} AND id < {(f + 1) * per_file}")
        elif shape == "short_runs":  # runs of a few rows, a few rows apart
            m, k = int(rng.integers(5, 40)), int(rng.integers(1, 5))
            out.append(f"id % {m} < {k}")
        elif shape == "one":
            out.append(f"id = {int(rng.integers(0, n))}")
        elif rng.random() < 0.3:
            out.append("id >= 0")
    return out


def _build(root: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The dataset of case ``seed`` (and a description of it)."""
    rng = np.random.default_rng(seed)
    version = str(rng.choice(VERSIONS))
    n = int(rng.integers(1, 1800)) if rng.random() < 0.85 else int(rng.integers(2000, 5000))
    per_file = int(rng.integers(max(1, n // (4 if rng.random() < 0.7 else 30)), n + 1))
    table = _table(rng, n, version)
    writer = str(rng.choice(["ours", "pylance"]))
    uri = str(root / f"case-{seed}")
    if writer == "ours":
        kw = dict(file_writer.LanceFileWriter.__init__.__kwdefaults__)
        page = int(rng.choice([300, 1000, 4096, 1 << 20]))
        monkeypatch.setattr(
            file_writer.LanceFileWriter.__init__, "__kwdefaults__", {**kw, "page_size_bytes": page}
        )
        lt.write_dataset(table, uri, max_rows_per_file=per_file, data_storage_version=version)
        monkeypatch.setattr(file_writer.LanceFileWriter.__init__, "__kwdefaults__", kw)
    else:
        group = int(rng.choice([64, 256, 1024]))
        lance.write_dataset(
            table, uri, max_rows_per_file=per_file, max_rows_per_group=group, data_storage_version=version
        )
    preds = _deletes(rng, n, per_file)
    for pred in preds:
        (lt if rng.random() < 0.5 else lance).dataset(uri).delete(pred)
    what = f"seed {seed}: {writer} {version}, {n} rows, {per_file}/file"
    what += f", {table.schema.names[1:]}, deletes {preds}"
    return uri, what


def _compare(uri: str, rng: random.Random, remote: Callable[[str], lt.LanceDataset] | None = None) -> None:
    """The reads of both libraries compared; ``remote`` (given the local dataset) opens our
    side on a copy of it in object storage."""
    ours, theirs = (remote or lt.dataset)(uri), lance.dataset(uri)
    expected = theirs.to_table()
    n = expected.num_rows
    names = expected.column_names
    assert_tables_equal(ours.to_table(), expected)
    assert ours.count_rows() == theirs.count_rows() == n
    size = rng.choice([1, 7, 100, 333, 1024])
    batches = list(ours.to_batches(batch_size=size))
    assert all(0 < b.num_rows <= size for b in batches)
    assert_tables_equal(pa.Table.from_batches(batches, expected.schema), expected)
    cols = rng.sample(names, rng.randint(1, len(names)))
    off, lim = rng.randint(0, n + 3), rng.choice([None, 0, 1, rng.randint(0, n + 3)])
    assert_tables_equal(
        ours.to_table(columns=cols, offset=off, limit=lim),
        theirs.to_table(columns=cols, offset=off, limit=lim),
    )
    got = ours.to_table(columns=["id"], with_row_id=True, with_row_address=True)
    want = theirs.to_table(columns=["id"], with_row_id=True, with_row_address=True)
    for name in ("id", "_rowid", "_rowaddr"):
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    if n:
        idx = sorted(rng.sample(range(n), min(n, rng.randint(1, 40))))
        if rng.random() < 0.5:
            rng.shuffle(idx)
        assert_tables_equal(ours.take(idx, columns=cols), theirs.take(idx, columns=cols))
    m, r = rng.randint(2, 9), rng.randint(0, 7)
    pred = f"id % {m} <> {r}"
    ids = expected.column("id").to_numpy()
    match = pa.array(ids % m != r)
    floats = [c for c in names if c.endswith("_float")]
    if floats:
        pred += f" AND ({floats[0]} > -0.5 OR id < 50)"
        either = pc.or_kleene(pc.greater(expected.column(floats[0]), -0.5), pa.array(ids < 50))
        match = pc.and_kleene(match, either)
    off, lim = rng.choice([None, 0, 3, 50]), rng.choice([None, 1, 10, 200])
    cols = cols if "id" in cols else ["id", *cols]
    kwargs: dict = {"filter": pred, "columns": cols, "limit": lim, "offset": off}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    got = ours.to_table(**kwargs)
    # the oracle: pylance's whole table, filtered here (pylance 14 cannot filter some of the
    # packed structs it writes), and pylance's own filtered read where it can
    want = expected.select(cols).filter(match).slice(off or 0, lim)
    assert_tables_equal(got, want)
    if not any("packed_var" in c for c in cols):
        assert_tables_equal(got, theirs.to_table(**kwargs))
    assert ours.count_rows(filter=pred) == theirs.count_rows(filter=pred) == expected.filter(match).num_rows
    # the same handle read from several threads at once (takes and filters of one file at a time)
    calls = (
        [lambda: ours.to_table(**kwargs), lambda: ours.take(idx, columns=cols), ours.to_table] if n else []
    )
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda call: call(), calls * 2))
    for call, res in zip(calls * 2, results):
        assert_tables_equal(res, call())


def _run(
    seeds: list[int],
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    remote: Callable[[str], lt.LanceDataset] | None = None,
) -> None:
    monkeypatch.setattr(scan, "READ_CHUNK_ROWS", 300)  # fragments read in several ranges
    monkeypatch.setattr(scan, "TABLE_RANGE_ROWS", 300)
    done = []
    for seed in seeds:
        uri, what = _build(root, seed, monkeypatch)
        try:
            _compare(uri, random.Random(seed), remote)
        except Exception as exc:
            raise AssertionError(f"{what}: {exc!r}") from exc
        done.append(what)
    assert len(done) == len(seeds)


def _seeds(count: int, base: int) -> list[int]:
    pinned = os.environ.get("LANCE_TABLE_DELSCAN_SEED")
    return [int(pinned)] if pinned else [base + k for k in range(count)]


def test_reads_after_random_deletes_match_pylance(tmp_path, monkeypatch):
    _run(_seeds(FAST_CASES, 0), tmp_path, monkeypatch)


@pytest.mark.stress
def test_reads_after_random_deletes_match_pylance_stress(tmp_path, monkeypatch):
    _run(_seeds(STRESS_CASES, 10_000), tmp_path, monkeypatch)


@pytest.mark.s3
@pytest.mark.parametrize("reader", ["direct", "s3fs", "pyarrow"])
def test_reads_from_s3_after_random_deletes_match_pylance(tmp_path, monkeypatch, s3_uri, s3_options, reader):
    """The same cases with our side reading a copy in S3 (takes and filters of remote files
    send their pages' first reads together; each client of range reads)."""
    import s3fs

    fs = s3fs.S3FileSystem(
        key=s3_options["aws_access_key_id"],
        secret=s3_options["aws_secret_access_key"],
        client_kwargs={"endpoint_url": s3_options["aws_endpoint"]},
    )
    options = {**s3_options, "lance_table_s3_reader": reader}

    def remote(uri: str) -> lt.LanceDataset:
        target = f"{s3_uri}/{Path(uri).name}"
        fs.put(uri, target.removeprefix("s3://"), recursive=True)
        return lt.dataset(target, storage_options=options)

    _run(_seeds(max(2, int(2 * _SCALE)), 500), tmp_path, monkeypatch, remote)
