"""FSST decoding through the table of symbol pairs (built from runs of one symbol length) and
code by code, against a byte-by-byte reference; and pylance-written FSST strings of many kinds,
read back whole from datasets of small fragments (one symbol table per file)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from test_fsst import E, check, make_table

from lance_table.file.compression import fsst


def _writer_order(symbols: list[bytes]) -> list[bytes]:
    """The symbols as writers order them: by length 2, 3 to 8, then 1 (one run per length)."""
    return sorted(symbols, key=lambda s: (len(s) == 1, len(s)))


def _random_symbols(rng: np.random.Generator, nsym: int, lengths: list[int]) -> list[bytes]:
    return [bytes(rng.integers(0, 256, int(rng.choice(lengths)), dtype=np.uint8)) for _ in range(nsym)]


@pytest.mark.parametrize("lengths", [[1], [2], [1, 2], [3, 5, 8], [1, 2, 3, 4, 5, 6, 7, 8], [7], [6, 1]])
def test_every_row_of_the_pair_table(lengths):
    rng = np.random.default_rng(sum(lengths))
    for nsym in (1, 2, 17, 200, 254, 255):
        symbols = _writer_order(_random_symbols(rng, nsym, lengths))
        table = make_table(symbols)
        pairs = fsst._pairs(table)
        assert pairs is not None
        rows = pairs.to_pylist()
        codes = [*range(nsym), E]  # the escape's row is empty: it pads an odd stream
        row = [*symbols, b""]
        for a in codes:
            for b in codes:
                assert rows[a | b << 8] == row[codes.index(a)] + row[codes.index(b)], (nsym, a, b)


def test_tables_in_many_runs_have_no_pair_table_and_still_decode(monkeypatch):
    monkeypatch.setattr(fsst, "_PAIRS_MIN", 0)
    symbols = [b"a" * (1 + i % 2) for i in range(60)]  # lengths 1, 2, 1, 2, ...: 60 runs
    table = make_table(symbols)
    assert fsst._tables(table).runs is None and fsst._pairs(table) is None
    check(table, [[0, 1, 2, 3], [59], [], [4, 4, 4]])


@pytest.mark.parametrize("pairs_min", [0, 1 << 30])  # always pairs / never pairs
def test_random_writer_tables_both_ways(monkeypatch, pairs_min):
    """Streams without escapes decode in pairs when long enough, else code by code: either way
    as the reference (strings starting at odd and even codes, empty strings, odd stream ends)."""
    monkeypatch.setattr(fsst, "_PAIRS_MIN", pairs_min)
    rng = np.random.default_rng(pairs_min % 97)
    for case in range(40):
        lengths = sorted({int(x) for x in rng.integers(1, 9, int(rng.integers(1, 5)))})
        nsym = int(rng.integers(1, 256))
        symbols = _writer_order(_random_symbols(rng, nsym, lengths))
        table = make_table(symbols)
        strings = [
            rng.integers(0, nsym, int(rng.integers(0, 9))).tolist() for _ in range(int(rng.integers(0, 60)))
        ]
        if case % 4 == 0 and strings:  # some escapes too: those streams decode code by code
            strings[0] = [E, 0xFF, *strings[0], E, E]
        check(table, strings)


def test_pairs_decode_a_large_stream_in_parts(monkeypatch):
    monkeypatch.setattr(fsst, "_MIN_PART", 1 << 12)
    rng = np.random.default_rng(4)
    symbols = _writer_order(_random_symbols(rng, 255, [1, 2, 2, 3, 8]))
    table = make_table(symbols)
    strings = [rng.integers(0, 255, int(rng.integers(0, 40))).tolist() for _ in range(20_000)]
    assert sum(map(len, strings)) > fsst._PAIRS_MIN
    check(table, strings)


def test_pair_tables_are_built_only_for_long_streams(monkeypatch):
    built: list[bytes] = []
    real = fsst._pairs.__wrapped__

    def counting(symbol_table: bytes) -> pa.Array | None:
        built.append(symbol_table)
        return real(symbol_table)

    monkeypatch.setattr(fsst, "_pairs", counting)
    table = make_table([b"ab", b"cd", b"e"])
    check(table, [[0, 1, 2]] * 100)
    assert not built
    check(table, [[0, 1, 2]] * (fsst._PAIRS_MIN // 3 + 1))
    assert built == [table]


def test_corrupt_streams_are_refused_on_either_path(monkeypatch):
    table = make_table([b"ab", b"c"])
    for pairs_min in (0, 1 << 30):
        monkeypatch.setattr(fsst, "_PAIRS_MIN", pairs_min)
        with pytest.raises(fsst.FsstError, match="code 2"):
            fsst.decode(table, bytes([0, 1, 2, 0]), np.array([0, 4]))
        with pytest.raises(fsst.FsstError, match="offsets"):
            fsst.decode(table, bytes([0, 1]), np.array([0, 1 << 40]))


# --- pylance writes, lance_table reads ------------------------------------------------------------


def _texts(kind: str, n: int, rng: np.random.Generator) -> list[str | None]:
    """``n`` values of one kind; all but "mixed" and "escaped" are ASCII (no escapes: pairs)."""
    words = np.array(["lance", "table", "arrow", "format", "column", "fragment", "x", "scan"])
    if kind == "short":
        return [f"{w} {i}" for i, w in enumerate(rng.choice(words, n))]
    if kind == "long":
        return [" ".join(rng.choice(words, int(rng.integers(50, 400)))) + str(i) for i in range(n)]
    if kind == "mixed":  # non-ASCII words among ASCII ones: their bytes escaped, or symbols
        more = np.append(words, ["ünïcödé", "日本語", "🙂"])
        return [" ".join(rng.choice(more, int(rng.integers(0, 5)))) + str(i) for i in range(n)]
    if kind == "unicode":
        return [
            "".join(map(chr, rng.integers(0x100, 0x3000, int(rng.integers(1, 12))).tolist()))
            for _ in range(n)
        ]
    if kind == "escaped":  # code points of all planes (no surrogates): bytes too varied for symbols
        points = rng.integers(0x80, 0x10FFFF - 0x800, (n, 4))
        points += (points >= 0xD800) * 0x800
        return ["".join(map(chr, p.tolist())) if i % 3 else "" for i, p in enumerate(points)]
    if kind == "repeated":
        return ["the same words again and again " * int(rng.integers(1, 4)) + str(i % 5000) for i in range(n)]
    assert kind == "nulls"
    return [None if i % 7 == 0 else "" if i % 5 == 0 else s for i, s in enumerate(_texts("short", n, rng))]


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("kind", ["short", "long", "mixed", "unicode", "escaped", "repeated", "nulls"])
def test_pylance_fsst_strings_of_many_kinds(tmp_path, version, kind):
    lance = pytest.importorskip("lance")
    import lance_table as lt

    rng = np.random.default_rng(len(kind))
    n = 1_500 if kind == "long" else 40_000
    table = pa.table({"id": pa.array(np.arange(n)), "s": pa.array(_texts(kind, n, rng), pa.string())})
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri, data_storage_version=version, max_rows_per_file=n // 4)
    got = lt.dataset(uri).to_table()
    assert got.equals(lance.dataset(uri).to_table())
    assert got["s"].combine_chunks().equals(table["s"].combine_chunks())
    projected = lt.dataset(uri).to_table(columns=["s"])["s"].combine_chunks()
    assert projected.equals(table["s"].combine_chunks())
