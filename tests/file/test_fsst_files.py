"""FSST strings of several files, each with its own symbol table, decoded into one output
(``fsst_files``): against the byte-by-byte reference file by file, and pylance's datasets of many
small fragments (a symbol table per file) read whole, projected, filtered and after deletes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from test_fsst import E, make_table, reference
from test_fsst_pairs import _random_symbols, _texts, _writer_order

from lance_table.file.compression import fsst, fsst_files


def _file(rng: np.random.Generator, kind: str) -> tuple[bytes, list[list[int]]]:
    """A symbol table and the code strings of one file of ``kind``."""
    nsym = int(rng.integers(1, 256))
    symbols = _writer_order(_random_symbols(rng, nsym, [1, 2, 3, 8] if kind != "short" else [1, 2]))
    count = 0 if kind == "none" else int(rng.integers(1, 400))
    strings = []
    for _ in range(count):
        size = 0 if kind == "empty" else int(rng.integers(0, 12))
        s = rng.integers(0, nsym, size).tolist()
        if kind == "escapes" and s and rng.random() < 0.3:
            s = [E, int(rng.integers(0, 256)), *s] if rng.random() < 0.5 else [*s, E, 0xFF]
        strings.append(s)
    if kind == "raw":
        return make_table(symbols, switch=False), [rng.integers(0, 256, len(s)).tolist() for s in strings]
    return make_table(symbols), strings


def _check(files: list[tuple[bytes, list[list[int]]]], skew: int = 0, lead: int = 0) -> fsst.Decoded:
    """Decode the files' codes back to back (after ``lead`` unused bytes, in a buffer ``skew``
    bytes off its alignment) and compare with the reference, file by file."""
    strings = [s for _, ss in files for s in ss]
    codes = bytes(c for s in strings for c in s)
    buffer = bytes(skew + lead) + codes
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in strings])]).astype(np.int64) + lead
    rows = np.array([len(ss) for _, ss in files], np.int64)
    got = fsst_files.decode_files([t for t, _ in files], memoryview(buffer)[skew:], offsets, rows)
    expected, ends, at, ascii = b"", [0], 0, True
    for table, ss in files:
        size = sum(map(len, ss))
        one = reference(table, codes[at : at + size], np.cumsum([0, *map(len, ss)]).tolist())
        at += size
        ends += [len(expected) + e for e in one.offsets[1:]]
        expected += one.data
        ascii &= one.ascii or not ss  # (a file without rows says nothing)
    assert bytes(got.data) == expected
    assert got.offsets.tolist() == ends
    assert got.ascii == ascii
    return got


KINDS = ["plain", "short", "escapes", "raw", "empty", "none"]


@pytest.mark.parametrize("pairs_min", [0, 1 << 30])  # every file in pairs where it can / none
def test_files_decode_as_each_alone(monkeypatch, pairs_min):
    """Files of every kind in random orders: odd and even code counts (a file's first code paired
    with the last of the file before), escapes, raw files, empty strings, files without rows."""
    monkeypatch.setattr(fsst, "PAIRS_MIN", pairs_min)
    rng = np.random.default_rng(pairs_min % 101)
    for case in range(60):
        kinds = rng.choice(KINDS, int(rng.integers(1, 8))).tolist()
        _check([_file(rng, k) for k in kinds], skew=case % 2, lead=case % 3)


def test_files_in_pairs_take_no_single_codes(monkeypatch):
    """Files without escapes, long enough for their pair tables, are taken two codes at a time
    out of the joined codes, whatever the parity of where each starts and ends: one pair take
    per file and no code-by-code decode."""
    monkeypatch.setattr(fsst, "PAIRS_MIN", 0)
    rng = np.random.default_rng(3)
    takes: list[int] = []
    real_take = fsst.take_rows

    def counting(table, index):
        takes.append(len(index))
        return real_take(table, index)

    monkeypatch.setattr(fsst, "take_rows", counting)
    monkeypatch.setattr(fsst, "decode_text", None)  # (never called)
    files = [_file(rng, "plain") for _ in range(5)]
    files[1][1].append([0])  # odd and even code counts
    files[2][1].append([0, 0])
    for skew in (0, 1):
        takes.clear()
        got = _check(files, skew=skew)
        assert len(takes) == 5
        codes = sum(len(s) for _, ss in files for s in ss)
        assert sum(takes) <= codes // 2 + 5  # (a pair across each file boundary at most)
        assert len(got.data) == got.offsets[-1]


def test_malformed_files_are_refused(monkeypatch):
    monkeypatch.setattr(fsst, "PAIRS_MIN", 0)
    table = make_table([b"ab", b"c"])
    codes = bytes([0, 1, 0, 1, 1])
    with pytest.raises(fsst.FsstError, match="in order"):
        fsst_files.decode_files([table, table], codes, np.array([0, 3, 2, 5]), np.array([1, 2]))
    with pytest.raises(fsst.FsstError, match="4 string offsets for 2 strings"):
        fsst_files.decode_files([table, table], codes, np.array([0, 2, 3, 5]), np.array([1, 1]))
    with pytest.raises(fsst.FsstError, match="in order"):
        fsst_files.decode_files([table], codes, np.array([0, 6]), np.array([1]))
    # a code past the second file's symbols (none past the first's)
    small = make_table([b"x"])
    with pytest.raises(fsst.FsstError, match="code 1 is not in a symbol table of 1"):
        fsst_files.decode_files([table, small], codes, np.array([0, 3, 5]), np.array([1, 1]))


# --- pylance writes, lance_table reads ------------------------------------------------------------


@pytest.fixture
def grouped(monkeypatch):
    """How many files each multi-file FSST decode held."""
    seen: list[int] = []
    real = fsst_files.decode_files

    def recording(tables, data, offsets, rows):
        seen.append(len(tables))
        return real(tables, data, offsets, rows)

    monkeypatch.setattr(fsst_files, "decode_files", recording)
    return seen


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("kind", ["short", "long", "mixed", "escaped", "nulls"])
def test_pylance_fragments_decode_together(tmp_path, grouped, version, kind):
    """pylance's datasets of many small fragments, each file with its own FSST table: strings
    of many kinds (escapes, non-ASCII, empty strings, nulls, long strings) read whole, projected,
    filtered, taken and after deletes as pylance reads them, the files of a batch decoded
    together."""
    lance = pytest.importorskip("lance")
    import lance_table as lt

    rng = np.random.default_rng(len(kind) + int(version[-1]))
    n = 2_000 if kind == "long" else 60_000
    table = pa.table({"id": pa.array(np.arange(n)), "s": pa.array(_texts(kind, n, rng), pa.string())})
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri, data_storage_version=version, max_rows_per_file=n // 12)
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    got = ours.to_table(columns=["s"])
    assert got["s"].combine_chunks().equals(table["s"].combine_chunks())
    # files of one batch decoded together (long strings: full-zip pages, read file by file)
    assert (max(grouped, default=0) > 1) == (kind != "long")
    assert ours.to_table().equals(theirs.to_table())
    flt = f"id >= {n // 3} AND id < {n // 2}"
    assert ours.to_table(columns=["s"], filter=flt).equals(theirs.to_table(columns=["s"], filter=flt))
    rows = np.sort(rng.choice(n, 300, replace=False))
    assert ours.take(rows, columns=["s"]).equals(theirs.take(rows, columns=["s"]))
    theirs.delete("id % 10 = 3")
    assert lt.dataset(uri).to_table().equals(lance.dataset(uri).to_table())
    theirs.delete("id % 3 = 0")  # a third of the rows gone: picked rows, not a filter
    assert lt.dataset(uri).to_table(columns=["s"]).equals(lance.dataset(uri).to_table(columns=["s"]))
