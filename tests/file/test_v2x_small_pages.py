"""Small 2.1/2.2 pages (one mini-block chunk) are decoded by :mod:`miniblock_small`.

Files of a few hundred rows (a table of many small appends) hold one chunk per page. These tests
write such files with us and with pylance, read them with the small-page path and with the
general decoder (the path turned off), and compare both with the data: every row, ranges, takes
and reads with integer floors. They also check that the path really runs (the general mini-block
decoder is never called), that a page's description is parsed once per reader, and that a
damaged page reports what the general decoder reports.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal, write_file

from lance_table.errors import CorruptFileError
from lance_table.file.reader import LanceFileReader
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import decode as decode21
from lance_table.file.v2_1 import miniblock_small

pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

WORDS = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta"], dtype=object)


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(rows)
    text = [" ".join(WORDS[rng.integers(0, 7, 6)]) for _ in range(rows)]
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64) + 5),  # bitpacked
            "big": pa.array(rng.integers(-(2**40), 2**40, rows)),  # 64-bit, plain or wide blocks
            "small": pa.array(rng.integers(0, 100, rows).astype(np.int32), mask=rng.random(rows) < 0.1),
            "x": pa.array(rng.random(rows)),
            "f": pa.array(rng.random(rows).astype(np.float32), mask=rng.random(rows) < 0.2),
            "u8": pa.array(rng.integers(0, 255, rows).astype(np.uint8)),
            "s": pa.array([f"row-{i}" for i in range(rows)]),
            "sn": pa.array([f"v{i}" for i in range(rows)], pa.string(), mask=rng.random(rows) < 0.3),
            "text": pa.array(text),  # FSST where it pays
            "ls": pa.array([f"L{i}" * (i % 4) for i in range(rows)], pa.large_string()),
            "bin": pa.array([bytes([i % 256]) * (i % 5) for i in range(rows)], pa.binary()),
            "cat": pa.array(WORDS[rng.integers(0, 7, rows)], pa.string()),  # dictionary
            "catn": pa.array(WORDS[rng.integers(0, 7, rows)], pa.string(), mask=rng.random(rows) < 0.2),
            "flag": pa.array(rng.random(rows) < 0.5),  # 1-bit values
            "ts": pa.array(np.arange(rows, dtype=np.int64) * 1000, pa.timestamp("us")),
        }
    )


def _general(path: Path, monkeypatch: pytest.MonkeyPatch) -> LanceFileReader:
    """A reader of ``path`` that decodes every page the general way."""
    with monkeypatch.context() as m:
        m.setattr(miniblock_small, "plan", lambda layout, large: None)
        reader = LanceFileReader(path)
        reader.read_all()  # the (absent) descriptions are kept by the reader
    return reader


@pytest.mark.parametrize("rows", [1, 100, 300, 2000])
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_small_pages_read_as_the_general_decoder_reads_them(
    tmp_path: Path, rows: int, version: str, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(rows)
    path = tmp_path / "t.lance"
    write_file(path, table, version, writer)
    fast: list[str] = []
    real = miniblock_small.decode

    def spy(page, io, dtype, runs, floor=None):  # type: ignore[no-untyped-def]
        got = real(page, io, dtype, runs, floor)
        if got is not None:
            fast.append(str(dtype))
        return got

    monkeypatch.setattr(miniblock_small, "decode", spy)
    reader = LanceFileReader(path)
    general = _general(path, monkeypatch)
    assert_tables_equal(reader.read_all(), table)
    assert_tables_equal(reader.read_all(), general.read_all())
    rng = np.random.default_rng(1)
    for lo, hi in [(0, 1), (rows // 3, rows // 3 + max(rows // 4, 1)), (rows - 1, rows)]:
        assert_tables_equal(reader.read_range(lo, hi), table.slice(lo, hi - lo))
    for k in (1, 5, max(rows // 2, 1)):
        idx = np.unique(rng.integers(0, rows, k))
        assert_tables_equal(reader.take(idx), table.take(pa.array(idx)))
        assert_tables_equal(reader.take(idx), general.take(idx))
    floors = {"id": 50, "big": 1 << 20, "small": 64, "u8": 100}
    every = Runs.span(0, rows)
    got = reader.read_runs(every, list(floors), floors=floors)
    assert_tables_equal(got, general.read_runs(every, list(floors), floors=floors))
    for name, floor in floors.items():  # values at or above the floor are exact
        values = table[name].to_numpy(zero_copy_only=False)
        read = got[name].to_numpy(zero_copy_only=False)
        reach = ~np.isnan(values.astype(float)) & (values >= floor)
        assert np.array_equal(read[reach], values[reach])
    if 100 <= rows <= 300:  # one chunk a page: the small path decodes every column
        assert set(fast) >= {str(t) for t in table.schema.types}


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_small_pages_skip_the_general_mini_block_decoder(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(100)
    path = tmp_path / "t.lance"
    write_file(path, table, version, "ours")

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the general mini-block decoder ran")

    monkeypatch.setattr(decode21, "mini_block", refuse)
    reader = LanceFileReader(path)
    assert_tables_equal(reader.read_all(), table)
    assert_tables_equal(reader.take([3, 50, 99]), table.take([3, 50, 99]))


def test_page_descriptions_are_parsed_once_per_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(100)
    path = tmp_path / "t.lance"
    write_file(path, table, "2.2", "ours")
    planned: list[int] = []
    real = miniblock_small.plan

    def spy(layout, large):  # type: ignore[no-untyped-def]
        planned.append(1)
        return real(layout, large)

    monkeypatch.setattr(miniblock_small, "plan", spy)
    reader = LanceFileReader(path)
    for _ in range(3):
        reader.read_all()
        reader.take([1, 7])
    assert len(planned) == table.num_columns  # one page per column, described once


def _bits(table: pa.Table) -> pa.Table:
    """``table`` with floating-point columns as integers of their bits."""
    as_int = {32: pa.int32(), 64: pa.int64()}
    return pa.table(
        [
            pa.chunked_array([k.view(as_int[c.type.bit_width]) for k in c.chunks])
            if pa.types.is_floating(c.type)
            else c
            for c in table.columns
        ],
        names=table.column_names,
    )


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("column", ["id", "x", "s", "cat", "sn", "small", "f", "text"])
def test_a_damaged_small_page_reports_what_the_general_decoder_reports(
    tmp_path: Path, version: str, column: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(100).select([column])
    path = tmp_path / "t.lance"
    write_file(path, table, version, "ours")
    page = LanceFileReader(path).metadata.columns[0].pages[0]
    at, size = int(page.buffer_offsets[1]), int(page.buffer_sizes[1])
    raw = path.read_bytes()
    width = 4 if version == "2.2" else 2
    errors = 0
    for damage in (b"\xff" * 2, b"\x00" * 8, b"\xff" * 16):
        for where in (0, 2, width + 2, 8, size - 8):
            broken = bytearray(raw)
            broken[at + where : at + where + len(damage)] = damage
            bad = tmp_path / f"bad-{where}-{len(damage)}.lance"
            bad.write_bytes(bytes(broken))
            outcomes = []
            for fast in (True, False):
                with monkeypatch.context() as m:
                    if not fast:
                        m.setattr(miniblock_small, "plan", lambda layout, large: None)
                    try:
                        outcomes.append(("ok", LanceFileReader(bad).read_all()))
                    except CorruptFileError as exc:
                        outcomes.append(("error", str(exc)))
            (kind, got), (kind2, expected) = outcomes
            assert kind == kind2, (where, damage, outcomes)
            if kind == "ok":  # damaged floats may read as NaN: compare their bits
                assert _bits(got).equals(_bits(expected))
            else:
                assert got == expected
                errors += 1
    assert errors  # some damage is found


class _Counting:
    """A byte source that records the ranges of every request."""

    def __init__(self, data: bytes) -> None:
        from lance_table.storage.sources import open_source

        self._inner = open_source(data)
        self.requests: list[list[tuple[int, int]]] = []

    @property
    def name(self) -> str:
        return "counted"

    def size(self) -> int:
        return self._inner.size()

    def read_ranges(self, ranges):  # type: ignore[no-untyped-def]
        self.requests.append([(int(o), int(n)) for o, n in ranges])
        return self._inner.read_ranges(ranges)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_a_small_file_is_read_in_one_range(tmp_path: Path, version: str) -> None:
    """After the footer, every page buffer of a small file comes in one request of one range
    (sliced here), not one range per buffer for the source to merge, nor one request per page
    for the rows of a take."""
    table = _table(100)
    path = tmp_path / "t.lance"
    write_file(path, table, version, "ours")
    source = _Counting(path.read_bytes())
    reader = LanceFileReader(source)  # type: ignore[arg-type]
    opened = len(source.requests)
    assert_tables_equal(reader.read_all(), table)
    # one request of one range at most (none when the open already read the whole small file)
    assert [len(r) for r in source.requests[opened:]] in ([], [1])
    # a take needs every buffer of its pages of one chunk too: one request again
    taken = LanceFileReader(source)  # type: ignore[arg-type]
    opened = len(source.requests)
    assert_tables_equal(taken.take([3, 60]), table.take([3, 60]))
    assert [len(r) for r in source.requests[opened:]] in ([], [1])
    assert_tables_equal(reader.read_all(), table)  # a second read of the file: one request again
    assert [len(r) for r in source.requests[-1:]] == [1]


def test_buffers_far_apart_are_left_to_the_source() -> None:
    from lance_table.file.pageio import SPAN_GAP, PageIO, fetch_buffers

    source = _Counting(bytes(range(256)) * 64)
    io = PageIO(source, None, None, (), "page", buffers=((0, 8), (16, 8), (100 + SPAN_GAP, 8)))  # type: ignore[arg-type]
    fetch_buffers([(io, 0), (io, 1)])
    assert source.requests == [[(0, 24)]]
    assert bytes(io.whole(1)) == bytes(range(16, 24))
    fetch_buffers([(io, 0), (io, 1), (io, 2)])  # 0 and 1 are in hand
    far = PageIO(source, None, None, (), "page", buffers=((0, 8), (100 + SPAN_GAP, 8)))  # type: ignore[arg-type]
    fetch_buffers([(far, 0), (far, 1)])
    assert source.requests[-1] == [(0, 8), (100 + SPAN_GAP, 8)]
    assert bytes(far.whole(1)) == (bytes(range(256)) * 64)[100 + SPAN_GAP : 108 + SPAN_GAP]


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_small_files_are_read_without_per_page_jobs(
    tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of one small page per column is read column after column on the calling thread,
    without planning a job per page (the general path of bigger files)."""
    table = _table(100)
    path = tmp_path / "t.lance"
    write_file(path, table, "2.2", writer)

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("jobs were planned")

    monkeypatch.setattr(LanceFileReader, "_field_jobs", refuse)
    reader = LanceFileReader(path)
    assert_tables_equal(reader.read_all(), table)
    assert_tables_equal(
        reader.read_range(10, 20, columns=["s", "id"]), table.select(["s", "id"]).slice(10, 10)
    )
    assert_tables_equal(reader.take([0, 5, 99]), table.take([0, 5, 99]))
