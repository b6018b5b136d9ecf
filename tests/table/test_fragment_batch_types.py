"""Columns of many types in many small pylance-written fragments are read as batches (one numpy
pass per column over all the files), whatever form each file's validity takes, with the same
rows as pylance."""

from __future__ import annotations

import decimal
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader

import lance_table as lt
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import small_layouts, small_many
from lance_table.table import fragment_batch

BATCHED = ["i8", "u16", "f16", "f32", "date", "tstz", "dec", "bin", "lstr", "text", "fsb", "flag"]
# columns of one value per append, now and then of several: pylance's constant pages among others
CONSTANT = ["load", "source", "unset"]


def _rows(i: int, rng: np.random.Generator, n: int = 100) -> pa.Table:
    nulls = rng.random(n) < 0.2
    text = [f"some longer text value number {k} with words" for k in range(i * n, i * n + n)]
    return pa.table(
        {
            "i8": pa.array(rng.integers(-100, 100, n).astype(np.int8), mask=nulls),
            "u16": pa.array(rng.integers(0, 60000, n).astype(np.uint16)),
            "f16": pa.array(rng.random(n).astype(np.float16)),
            "f32": pa.array(rng.random(n).astype(np.float32), mask=nulls),
            "date": pa.array(rng.integers(0, 20000, n).astype(np.int32), pa.date32()),
            "tstz": pa.array(np.arange(n).astype("datetime64[us]")).cast(pa.timestamp("us", tz="UTC")),
            "dec": pa.array([decimal.Decimal(k) / 100 for k in range(n)], pa.decimal128(10, 2)),
            "bin": pa.array([bytes([k % 256]) * (k % 7) for k in range(n)], pa.binary()),
            "lstr": pa.array(text, pa.large_string()),
            "text": pa.array(text, pa.string(), mask=nulls),
            "fsb": pa.array([bytes([k % 256]) * 4 for k in range(n)], pa.binary(4)),
            "flag": pa.array(rng.random(n) < 0.5, mask=nulls),
            "load": pa.array(np.full(n, i, np.int64) + (np.arange(n) if i % 5 == 4 else 0)),
            "source": pa.array([f"kafka-{i % 3}" if i % 5 != 3 else f"s{k}" for k in range(n)]),
            "unset": pa.array([None if i % 7 != 6 or k % 2 else float(k) for k in range(n)], pa.float64()),
        }
    )


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def written(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    uri = str(tmp_path_factory.mktemp("types") / "ds")
    rng = np.random.default_rng(0)
    for i in range(40):
        mode = "append" if i else "create"
        lance.write_dataset(_rows(i, rng), uri, mode=mode, data_storage_version=request.param)
    return uri


def test_every_column_decodes_in_one_batch(written: str) -> None:
    frags = lt.dataset(written)._snapshot.fragment_readers()
    defs = set()
    for name in BATCHED + CONSTANT:
        found = fragment_batch.plans(frags, [name])
        assert found.count(None) == 0, name
        layouts = [lay for _, lay in found]
        pages = [c.page for lay in layouts for c in lay.columns if isinstance(c, small_layouts.ColumnLayout)]
        defs |= {p.defs.WhichOneof("compression") for p in pages if p.defs}
        data, bases = small_many.joined([reader.read_span(lay.start, lay.length) for reader, lay in found])
        io = PageIO(found[0][0]._stored, None, None, (), "test")
        got = small_many.decode(layouts, data, bases, 0, frags[0].roots[name].arrow_type, io)
        assert got is not None, name
        assert got.equals(lance.dataset(written).to_table(columns=[name]).column(0).combine_chunks()), name
    assert "inline_bitpacking" in defs  # (pylance 2.2 mostly writes RLE levels, now and then these)


def test_pylance_writes_constant_pages(written: str) -> None:
    text = " ".join(
        c.pages[0].encoding
        for f in sorted((Path(written) / "data").glob("*.lance"))
        for c in LanceFileReader(str(f)).metadata().columns
    )
    assert "ConstantLayout" in text and "inline_value: None" in text  # (all null; strings in 2.2)
    if lance.dataset(written).data_storage_version == "2.2":
        assert "inline_value: Some" in text


def test_scans_and_filters_equal_pylance(written: str) -> None:
    ours, theirs = lt.dataset(written), lance.dataset(written)
    assert ours.to_table().equals(theirs.to_table())
    for flt in [
        "i8 > 50",
        "f32 IS NULL",
        "flag",
        "text IS NOT NULL AND u16 < 1000",
        "load = 7",
        "unset IS NULL",
    ]:
        got = ours.to_table(filter=flt, with_row_id=True)
        assert got.equals(theirs.to_table(filter=flt, with_row_id=True)), flt


def test_repeated_constant_value_buffers_are_read_once(written: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The constant pages of a string (its value in a buffer) of appends of a few sources are
    each read once per batch of files, not once per file; the rows are pylance's."""
    from lance_table.file.v2_1 import small_constant
    from lance_table.table.session import clear_caches

    calls: list[bytes] = []
    read = small_constant.constant_bytes

    def counted(raw: bytes, io: PageIO) -> bytes:
        calls.append(bytes(raw))
        return read(raw, io)

    monkeypatch.setattr(small_constant, "constant_bytes", counted)
    clear_caches()
    got = lt.dataset(written).to_table(columns=["source"])
    assert got.equals(lance.dataset(written).to_table(columns=["source"]))
    if calls:  # (2.2: pylance keeps a constant string in a buffer)
        assert len(calls) < 16  # of some 32 files of a constant source
