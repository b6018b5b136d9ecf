"""FSST decoding through the table of symbol pairs (built from runs of one symbol length) and
code by code, against a byte-by-byte reference; and pylance-written FSST strings of many kinds,
read back whole from datasets of small fragments (one symbol table per file)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
from test_fsst import E, check, make_table

from lance_table.file.compression import fsst, fsst_pairs


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
        pairs = fsst.pair_table(table)
        assert pairs is not None
        rows = pairs.to_pylist()
        codes = [*range(nsym), E]  # the escape's row is empty: it pads an odd stream
        row = [*symbols, b""]
        for a in codes:
            for b in codes:
                assert rows[a | b << 8] == row[codes.index(a)] + row[codes.index(b)], (nsym, a, b)


def test_tables_in_many_runs_have_no_pair_table_and_still_decode(monkeypatch):
    monkeypatch.setattr(fsst, "PAIRS_MIN", 0)
    symbols = [b"a" * (1 + i % 2) for i in range(60)]  # lengths 1, 2, 1, 2, ...: 60 runs
    table = make_table(symbols)
    assert fsst.decoding_tables(table).runs is None and fsst.pair_table(table) is None
    check(table, [[0, 1, 2, 3], [59], [], [4, 4, 4]])


@pytest.mark.parametrize("pairs_min", [0, 1 << 30])  # always pairs / never pairs
def test_random_writer_tables_both_ways(monkeypatch, pairs_min):
    """Streams without escapes decode in pairs when long enough, else code by code: either way
    as the reference (strings starting at odd and even codes, empty strings, odd stream ends)."""
    monkeypatch.setattr(fsst, "PAIRS_MIN", pairs_min)
    rng = np.random.default_rng(pairs_min % 97)
    for case in range(40):
        lengths = sorted({int(x) for x in rng.integers(1, 9, int(rng.integers(1, 5)))})
        nsym = int(rng.integers(1, 256))
        symbols = _writer_order(_random_symbols(rng, nsym, lengths))
        table = make_table(symbols)
        strings = [
            rng.integers(0, nsym, int(rng.integers(0, 9))).tolist() for _ in range(int(rng.integers(0, 60)))
        ]
        if case % 4 == 0 and strings:  # some escapes too
            strings[0] = [E, 0xFF, *strings[0], E, E]
        check(table, strings)


def test_pairs_decode_a_large_stream_in_parts(monkeypatch):
    monkeypatch.setattr(fsst, "MIN_PART", 1 << 12)
    rng = np.random.default_rng(4)
    symbols = _writer_order(_random_symbols(rng, 255, [1, 2, 2, 3, 8]))
    table = make_table(symbols)
    strings = [rng.integers(0, 255, int(rng.integers(0, 40))).tolist() for _ in range(20_000)]
    assert sum(map(len, strings)) > fsst.PAIRS_MIN
    check(table, strings)


def test_pair_tables_are_built_only_for_long_streams(monkeypatch):
    built: list[bytes] = []
    real = fsst._build_pairs

    def counting(symbol_table: bytes) -> pa.Array | None:
        built.append(symbol_table)
        return real(symbol_table)

    monkeypatch.setattr(fsst, "pair_table", counting)
    table = make_table([b"ab", b"cd", b"e"])
    check(table, [[0, 1, 2]] * 100)
    assert not built
    check(table, [[0, 1, 2]] * (fsst.PAIRS_MIN // 3 + 1))
    assert built == [table]


def test_pair_tables_are_kept_within_their_byte_bound(monkeypatch):
    """Each symbol table's pair table is built once while the tables kept fit their bound in
    bytes; the least recently used go first, and clear_caches forgets them all."""
    from lance_table._lru import LRU
    from lance_table.table.session import clear_caches

    tables = [make_table([bytes([97 + i, 98]), b"c", bytes([100 + i])]) for i in range(5)]
    size = fsst._build_pairs(tables[0]).nbytes + len(tables[0])
    monkeypatch.setattr(fsst, "_PAIR_TABLES", LRU(1024, max_bytes=3 * size))
    built: list[bytes] = []
    real = fsst._build_pairs

    def counting(symbol_table: bytes) -> pa.Array | None:
        built.append(symbol_table)
        return real(symbol_table)

    monkeypatch.setattr(fsst, "_build_pairs", counting)
    monkeypatch.setattr(fsst, "PAIRS_MIN", 0)
    for _ in range(3):
        for t in tables[:3]:
            check(t, [[0, 1, 2, 0], [1]])
    assert built == tables[:3]
    check(tables[3], [[2, 2, 1]])  # a fourth drops the least recently used (the first)
    assert built == tables[:4] and fsst._PAIR_TABLES.nbytes <= 3 * size
    check(tables[2], [[0]])
    check(tables[0], [[0]])
    assert built == [*tables[:4], tables[0]]
    clear_caches()
    check(tables[2], [[0]])
    assert built == [*tables[:4], tables[0], tables[2]]


def test_corrupt_streams_are_refused_on_either_path(monkeypatch):
    table = make_table([b"ab", b"c"])
    for pairs_min in (0, 1 << 30):
        monkeypatch.setattr(fsst, "PAIRS_MIN", pairs_min)
        with pytest.raises(fsst.FsstError, match="code 2"):
            fsst.decode(table, bytes([0, 1, 2, 0]), np.array([0, 4]))
        with pytest.raises(fsst.FsstError, match="offsets"):
            fsst.decode(table, bytes([0, 1]), np.array([0, 1 << 40]))


def _pair_takes(monkeypatch) -> list[int]:
    """The lengths of the takes from pair tables (one per part decoded in pairs)."""
    takes: list[int] = []
    real = fsst.take_rows

    def counting(table: pa.Array, index: np.ndarray) -> tuple[memoryview, np.ndarray]:
        if len(table) == fsst._PAIR_ROWS + 256:
            takes.append(len(index))
        return real(table, index)

    monkeypatch.setattr(fsst, "take_rows", counting)
    return takes


@pytest.mark.parametrize("seed", range(6))
def test_streams_with_escapes_decode_in_pairs(monkeypatch, seed):
    """Escapes everywhere a pair can hold them: markers at odd and even codes (fillers or not),
    runs of 0xFF (escaped 0xFF literals), escapes starting and ending strings, strings that are
    one escape, empty strings around them, odd and even stream ends; in one part and in many."""
    monkeypatch.setattr(fsst, "PAIRS_MIN", 0)
    if seed % 2:
        monkeypatch.setattr(fsst, "MIN_PART", 1 << 6)
    takes = _pair_takes(monkeypatch)
    rng = np.random.default_rng(seed)
    symbols = _writer_order(_random_symbols(rng, int(rng.integers(1, 255)), [1, 2, 3, 8]))
    nsym = len(symbols)
    table = make_table(symbols)
    strings = []
    for _ in range(int(rng.integers(200, 2000))):
        s: list[int] = []
        for _ in range(int(rng.integers(0, 8))):
            pick = rng.random()
            if pick < 0.2:
                s += [E, int(rng.integers(0, 256))]
            elif pick < 0.3:
                s += [E, 0xFF]
            else:
                s.append(int(rng.integers(0, nsym)))
        strings.append(s)
    strings.append([E, 0xFF] if seed % 3 else [0])  # stream ends with an escape, or a symbol
    parsed = check(table, strings)
    assert parsed.escapes and parsed.escaped_ff and parsed.escape_starts_string and parsed.escape_ends_string
    assert takes and sum(takes) >= (sum(map(len, strings)) + 1) // 2  # every code in a pair


def test_fillers_put_every_marker_first_in_its_pair():
    rng = np.random.default_rng(7)
    table = make_table([b"ab", b"c"])
    for _ in range(50):
        strings = []
        for _ in range(int(rng.integers(1, 40))):
            s: list[int] = []
            for c in rng.choice([0, 1, E], int(rng.integers(0, 9))).tolist():
                s += [E, int(rng.choice([0xFF, 0x41, 0x00]))] if c == E else [c]
            strings.append(s)
        data = bytes(c for s in strings for c in s)
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in strings])]).astype(np.int64)
        codes = np.frombuffer(data, np.uint8)
        markers = fsst._escapes(codes, offsets, 2)
        if markers is None:
            continue
        filled, moved, at = fsst_pairs.aligned(codes, offsets, markers)
        assert not (at % 2).any()  # every marker first in its pair
        assert (filled[at] == E).all() and (filled[at + 1] == codes[markers + 1]).all()
        fillers = np.setdiff1d(np.flatnonzero(filled == E), np.concatenate([at, at + 1]))
        assert (fillers % 2 == 1).all()  # every filler second in its pair
        assert filled.size == codes.size + fillers.size
        # each string starts at its first code, or at the filler before its first marker
        inside = offsets < codes.size
        moved, was = moved[inside], offsets[inside]
        is_filler = np.isin(moved, fillers)
        assert (filled[moved + is_filler] == codes[was]).all()
        assert np.isin(moved[is_filler] + 1, at).all()  # a filler only before a marker
        check(table, strings)


def test_corrupt_streams_with_escapes_are_refused_in_pairs(monkeypatch):
    monkeypatch.setattr(fsst, "PAIRS_MIN", 0)
    table = make_table([b"ab", b"c"])
    with pytest.raises(fsst.FsstError, match="code 7"):
        fsst.decode(table, bytes([0, E, 9, 7, 1]), np.array([0, 5]))
    with pytest.raises(fsst.FsstError, match="escape byte ends a string"):
        fsst.decode(table, bytes([0, 1, E, E, E, 0]), np.array([0, 5, 6]))


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
@pytest.mark.parametrize("pairs_min", [0, 1 << 30])  # every page in pairs / code by code
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("kind", ["short", "long", "mixed", "unicode", "escaped", "repeated", "nulls"])
def test_pylance_fsst_strings_of_many_kinds(tmp_path, monkeypatch, version, kind, pairs_min):
    lance = pytest.importorskip("lance")
    import lance_table as lt

    monkeypatch.setattr(fsst, "PAIRS_MIN", pairs_min)

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


@pytest.mark.interop
def test_pylance_fsst_escapes_in_pairs_and_a_damaged_one(tmp_path, monkeypatch):
    """A page of pylance's with escapes everywhere (escaped 0xFF, escapes ending and starting
    strings, empty strings) is decoded in pairs, as pylance reads it; with one marker damaged
    so that an escape ends a string, the read fails with CorruptFileError naming the file."""
    lance_file = pytest.importorskip("lance.file")
    from test_fsst import Parsed, _strings_with_rare_bytes, reference

    from lance_table.errors import CorruptFileError
    from lance_table.file.reader import LanceFileReader

    values = pa.array(_strings_with_rare_bytes(100_000), pa.binary())
    schema = pa.schema([pa.field("b", pa.binary(), metadata={"lance-encoding:compression": "fsst"})])
    table = pa.table([values], schema=schema)
    path = tmp_path / "f.lance"
    pages: list[tuple[bytes, bytes, list[int]]] = []
    real = fsst.decode_text

    def recording(symbols, data, offsets):
        pages.append((bytes(symbols), bytes(data), np.asarray(offsets).tolist()))
        return real(symbols, data, offsets)

    monkeypatch.setattr(fsst, "decode_text", recording)
    takes = _pair_takes(monkeypatch)
    for _attempt in range(4):  # (pylance samples at random: in the rare case 0xFF got a symbol)
        pages.clear()
        with lance_file.LanceFileWriter(str(path), schema, version="2.2") as w:
            w.write_batch(table)
        got = LanceFileReader(path).read_all()["b"].combine_chunks()
        seen = Parsed()
        for symbols, data, offsets in pages:
            parsed = reference(symbols, data, offsets)
            seen.escaped_ff += parsed.escaped_ff
            seen.escape_ends_string += parsed.escape_ends_string
        if seen.escaped_ff and seen.escape_ends_string:
            break
    else:
        pytest.fail("pylance never escaped 0xFF at the end of a string")
    assert takes and sum(len(d) for _, d, _ in pages) >= fsst.PAIRS_MIN
    assert got.equals(values)
    assert got.equals(lance_file.LanceFileReader(str(path)).read_all().to_table()["b"].combine_chunks())
    # an escaped 0xFF ending a string is the only run of exactly two 0xFF bytes in the codes:
    # its marker made a symbol code leaves an escape ending the string
    data = bytearray(path.read_bytes())
    found = re.search(rb"(?<!\xff)\xff\xff(?!\xff)", data)
    assert found is not None
    data[found.start()] = 0
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="escape byte ends a string") as info:
        LanceFileReader(path).read_all()
    assert str(path) in str(info.value)
