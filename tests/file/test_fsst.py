"""FSST decompression: tricky streams against a byte-by-byte reference, and pylance-written data."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pytest

from lance_table import _parallel
from lance_table.errors import CorruptFileError
from lance_table.file.compression import fsst
from lance_table.file.reader import LanceFileReader


def make_table(symbols: list[bytes], switch: bool = True) -> bytes:
    """A symbol table in Lance's layout: header, symbols as u64 words, one length byte each."""
    header = (fsst.FSST_MAGIC << 32) | (int(switch) << 24) | len(symbols)
    words = b"".join(s.ljust(8, b"\0") for s in symbols)
    return struct.pack("<Q", header) + words + bytes(len(s) for s in symbols)


@dataclass
class Parsed:
    """What the reference decoder saw."""

    data: bytes = b""
    offsets: list[int] = field(default_factory=lambda: [0])
    escapes: int = 0
    escaped_ff: int = 0  # escaped literal 0xFF bytes, i.e. the pair FF FF
    escape_ends_string: int = 0  # the escaped literal is the last byte of its string
    escape_starts_string: int = 0
    ascii: bool = False  # symbols and escaped literals all ASCII: the output needs no UTF-8 look


def reference(table: bytes, data: bytes, offsets: list[int]) -> Parsed:
    """Decode string by string, code by code: obviously right, and slow."""
    (header,) = struct.unpack_from("<Q", table)
    out = Parsed()
    if not (header >> 24) & 1:
        return Parsed(bytes(data), list(offsets))
    nsym = header & 0xFF
    syms = [table[8 + 8 * i : 8 + 8 * i + table[8 + 8 * nsym + i]] for i in range(nsym)]
    out.ascii = all(s.isascii() for s in syms)
    buf = bytearray()
    for lo, hi in itertools.pairwise(offsets):
        i = lo
        while i < hi:
            if data[i] == fsst.ESCAPE:
                out.escapes += 1
                out.escaped_ff += data[i + 1] == 0xFF
                out.escape_ends_string += i + 2 == hi
                out.escape_starts_string += i == lo
                out.ascii &= data[i + 1] < 0x80
                buf.append(data[i + 1])
                i += 2
            else:
                buf += syms[data[i]]
                i += 1
        out.offsets.append(len(buf))
    out.data = bytes(buf)
    return out


def check(table: bytes, strings: list[list[int]]) -> Parsed:
    """Decode ``strings`` (each a list of code bytes) both ways and compare."""
    data = bytes(b for s in strings for b in s)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in strings])]).astype(np.int64)
    expected = reference(table, data, offsets.tolist())
    out, new_offsets, ascii = fsst.decode_text(table, data, offsets)
    assert isinstance(out, (bytes, memoryview))
    assert bytes(out) == expected.data
    assert new_offsets.tolist() == expected.offsets
    assert ascii == expected.ascii
    assert not ascii or expected.data.isascii()  # what lets a read skip its UTF-8 check
    return expected


SYMBOLS = [b"a", b"bc", b"def", b"ghij", b"klmno", b"pqrstu", b"vwxyz01", b"23456789", b"\xff"]
TABLE = make_table(SYMBOLS)
E = fsst.ESCAPE


def test_symbols_of_every_length():
    check(TABLE, [[0, 1, 2, 3, 4, 5, 6, 7, 8], [7, 7, 0], [8]])


def test_escape_runs_alternate_marker_and_literal():
    parsed = check(TABLE, [[E, E, E, E, 0], [E, E], [E, E, E, E, E, E]])
    assert parsed.escapes == 6 and parsed.escaped_ff == 6
    assert check(TABLE, [[E, 0xFF]]).data == b"\xff"


def test_escape_at_the_end_and_start_of_strings():
    parsed = check(TABLE, [[0, E, 0x41], [E, 0x42, 1], [E, E], [E, E, E, 7], [2, E, 0]])
    assert parsed.escape_ends_string == 4 and parsed.escape_starts_string == 3


def test_parsing_restarts_at_every_string():
    # Without the restart the run FF FF | FF FF would pair the wrong bytes.
    parsed = check(TABLE, [[1, E, E], [E, E], [E, 0x30]])
    assert parsed.data == b"bc\xff\xff0"


def test_empty_strings():
    check(TABLE, [[], [0], [], [], [E, E], []])
    check(TABLE, [[], [], []])
    out, offsets = fsst.decode(TABLE, b"", np.array([0]))
    assert out == b"" and offsets.tolist() == [0]


def test_raw_mode_when_the_switch_is_off():
    table = make_table([b"abc"], switch=False)
    data = bytes([0, E, 3, 255, 254])
    out, offsets = fsst.decode(table, data, np.array([0, 2, 2, 5]))
    assert out == data and offsets.tolist() == [0, 2, 2, 5]
    assert fsst.decode(table, memoryview(data), np.array([0, 5]))[0] == data


def test_no_symbols_only_escapes():
    check(make_table([]), [[E, 0x61, E, E], [], [E, 0]])


ASCII_TABLE = make_table([b"a", b"bc", b"def", b"ghij", b"x y z 0."])


def test_ascii_output_is_known_without_looking_at_it():
    # ASCII symbols without escapes, or with escapes of ASCII bytes: ASCII output
    assert check(ASCII_TABLE, [[0, 1, 2], [3, 4], []]).ascii
    assert check(ASCII_TABLE, [[0, E, 0x7F, 1], [E, 0x00], [E, 0x41]]).ascii
    # one escaped byte of 0x80 or more (0xFF too: its escape is a run of two 0xFF bytes)
    assert not check(ASCII_TABLE, [[0, 1], [E, 0x80, 2]]).ascii
    assert not check(ASCII_TABLE, [[0], [E, E, 0]]).ascii
    assert not check(ASCII_TABLE, [[0], [1, E, 0xC3, E, 0xA9]]).ascii  # (valid UTF-8, still looked at)
    # one symbol that is not ASCII, used or not; bytes past a symbol's length do not count
    assert not check(make_table([b"a", b"\xc3\xa9"]), [[0, 0]]).ascii
    padded = bytearray(make_table([b"ab"]))
    padded[8 + 2] = 0xFF  # a byte of the u64 word past the 2-byte symbol
    assert check(bytes(padded), [[0, 0], [0]]).ascii
    # raw data (the encoder switched off) is not looked at: never known ASCII
    raw = fsst.decode_text(make_table([b"a"], switch=False), b"abc", np.array([0, 3]))
    assert bytes(raw.data) == b"abc" and not raw.ascii


def test_random_ascii_tables_with_escapes(monkeypatch):
    monkeypatch.setattr(fsst, "MIN_PART", 4)
    rng = np.random.default_rng(12)
    for case in range(60):
        nsym = int(rng.integers(1, 255))
        symbols = [bytes(rng.integers(0, 128, int(rng.integers(1, 9)), dtype=np.uint8)) for _ in range(nsym)]
        high = case % 3 == 0  # some escaped literals of 0x80 and more
        strings = []
        for _ in range(int(rng.integers(1, 40))):
            s: list[int] = []
            for _ in range(int(rng.integers(0, 12))):
                if rng.random() < 0.1:
                    s += [E, int(rng.integers(0, 256 if high else 128))]
                else:
                    s.append(int(rng.integers(0, nsym)))
            strings.append(s)
        check(make_table(symbols), strings)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64])
def test_random_streams_across_part_boundaries(monkeypatch, block):
    """Random tables and code streams, decoded in tiny parts so that every boundary case occurs
    (odd part sizes are rounded up to even ones: pairs of codes never straddle two parts)."""
    monkeypatch.setattr(fsst, "MIN_PART", block)
    monkeypatch.setattr(fsst, "_MAX_PART", block)
    rng = np.random.default_rng(block)
    for case in range(80):
        escapes = 0.3 if case % 2 else 0.0  # without escapes, codes are decoded in pairs
        nsym = int(rng.integers(0 if escapes else 1, 256))
        symbols = [bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8)) for _ in range(nsym)]
        table = make_table(symbols)
        strings = []
        for _ in range(int(rng.integers(0, 30))):
            s: list[int] = []
            for _ in range(int(rng.integers(0, 12))):
                if nsym == 0 or rng.random() < escapes:
                    s += [E, int(rng.choice([0xFF, 0xFF, int(rng.integers(0, 256))]))]
                else:
                    s.append(int(rng.integers(0, nsym)))
            strings.append(s)
        check(table, strings)


def test_large_stream_matches_reference(monkeypatch):
    monkeypatch.setattr(fsst, "MIN_PART", 4096)
    rng = np.random.default_rng(7)
    symbols = [bytes(rng.integers(97, 123, int(rng.integers(1, 9)), dtype=np.uint8)) for _ in range(200)]
    table = make_table(symbols)
    strings = []
    for _ in range(20_000):
        s = rng.integers(0, 200, int(rng.integers(0, 20))).tolist()
        if rng.random() < 0.05:
            s[len(s) // 2 : len(s) // 2] = [E, int(rng.integers(0, 256))]
        strings.append(s)
    assert sum(map(len, strings)) > 8 * fsst.MIN_PART  # several parts
    check(table, strings)


def _part_count(monkeypatch, busy: bool) -> int:
    """How many lookups in the table of symbol pairs decoding a stream of eight parts' worth of
    codes makes, from a thread that is (or is not) running a task of a map that keeps every
    worker busy."""
    takes = []
    real = fsst.take_rows

    def counting(table, index):
        if len(table) == fsst._PAIR_ROWS + 256:  # the pair table
            takes.append(len(index))
        return real(table, index)

    monkeypatch.setattr(fsst, "take_rows", counting)
    rng = np.random.default_rng(3)
    strings = [rng.integers(0, len(SYMBOLS), 17).tolist() for _ in range(8 * fsst.MIN_PART // 17)]
    monkeypatch.setattr(_parallel._BUSY, "on", busy, raising=False)
    check(TABLE, strings)  # the same bytes either way
    return len(takes)


def test_streams_are_cut_into_parts_only_for_free_threads(monkeypatch):
    # Parts that would run one after the other cost a join and gain nothing: one lookup then.
    assert _part_count(monkeypatch, busy=True) == 1
    assert _part_count(monkeypatch, busy=False) == min(fsst._PARTS, _parallel.workers())


def test_streams_are_not_cut_for_threads_other_decodes_keep_busy(monkeypatch):
    # Each of the workers already decodes a stream (the pages of a scan): one part each.
    monkeypatch.setattr(fsst._IN_FLIGHT, "count", _parallel.workers())
    assert fsst._bounds(8 * fsst.MIN_PART) == [0, 8 * fsst.MIN_PART]
    monkeypatch.setattr(fsst._IN_FLIGHT, "count", 1)
    assert len(fsst._bounds(8 * fsst.MIN_PART)) - 1 == min(fsst._PARTS, _parallel.workers())
    assert fsst._bounds(fsst.MIN_PART) == [0, fsst.MIN_PART]  # too short to be worth a cut
    assert fsst._IN_FLIGHT.count == 1


@pytest.mark.parametrize(
    ("table", "data", "offsets", "match"),
    [
        (b"FSST", b"", [0], "too short"),
        (struct.pack("<Q", 1 << 24), b"", [0], "magic"),
        (make_table([b"a"] * 3)[:20], b"", [0], "cannot hold"),
        (make_table([b"a"]), bytes([1]), [0, 1], "code 1"),
        (make_table([b"a"]), bytes([0, E]), [0, 2], "escape"),
        (make_table([b"a"]), bytes([E, 0, E]), [0, 1, 3], "escape"),
        (make_table([b"a"]), bytes([0, 0]), [0, 3], "offsets"),
        (make_table([b"a"]), bytes([0, 0]), [0, 2, 1], "offsets"),
        (make_table([b""]), bytes([0]), [0, 1], "lengths"),
        (make_table([b"a"])[:-1] + b"\x09", bytes([0]), [0, 1], "lengths"),
    ],
)
def test_malformed_input_is_refused(table, data, offsets, match):
    with pytest.raises(fsst.FsstError, match=match):
        fsst.decode(table, data, np.array(offsets))


# --- data pylance compressed ---------------------------------------------------------------------


@pytest.fixture
def spy(monkeypatch):
    """Every (symbol table, data, offsets) that lance_table's readers pass to ``fsst.decode``."""
    calls: list[tuple[bytes, bytes, list[int]]] = []
    real = fsst.decode_text

    def recording(table, data, offsets):
        calls.append((bytes(table), bytes(data), np.asarray(offsets).tolist()))
        return real(table, data, offsets)

    monkeypatch.setattr(fsst, "decode_text", recording)
    return calls


def _strings_with_rare_bytes(n: int) -> list[bytes]:
    """Values that make pylance's FSST escape: empty values, runs of 0xFF and other rare bytes.

    The common text is varied enough to fill the symbol table, and 0xFF is so rare that it is
    almost never worth a symbol (the table is trained on a random sample).
    """
    rng = np.random.default_rng(0)
    words = [bytes(rng.integers(97, 123, int(rng.integers(2, 7)), dtype=np.uint8)) for _ in range(300)]
    out = []
    for i in range(n):
        s = b"-".join(words[j] for j in rng.integers(0, 300, 3)) + str(i).encode()
        if i % 2000 == 0:
            s = s[:5] + b"\xff\xff" + s[5:]
        if i % 2500 == 3:
            s += b"\xff"
        if i % 300 == 7:
            s = bytes(rng.integers(128, 255, 3, dtype=np.uint8)) + s
        if i % 13 == 0:
            s = b""
        out.append(s)
    return out


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_fsst_with_escapes(tmp_path, spy, version):
    lance_file = pytest.importorskip("lance.file")
    values = pa.array(_strings_with_rare_bytes(100_000), pa.binary())
    schema = pa.schema([pa.field("b", pa.binary(), metadata={"lance-encoding:compression": "fsst"})])
    table = pa.table([values], schema=schema)
    path = tmp_path / "f.lance"
    # pylance samples at random; in the rare case that 0xFF made it into the table, write again.
    for _attempt in range(4):
        spy.clear()
        with lance_file.LanceFileWriter(str(path), schema, version=version) as w:
            w.write_batch(table)
        ours = LanceFileReader(path).read_all()
        assert ours["b"].equals(lance_file.LanceFileReader(str(path)).read_all().to_table()["b"])
        assert ours["b"].equals(table["b"])
        seen = Parsed()
        assert spy
        for sym, data, offsets in spy:
            assert (sym[3] & 1) == 1  # switch on
            parsed = reference(sym, data, offsets)
            seen.escapes += parsed.escapes
            seen.escaped_ff += parsed.escaped_ff
            seen.escape_ends_string += parsed.escape_ends_string
            seen.escape_starts_string += parsed.escape_starts_string
        assert seen.escapes > 100 and seen.escape_starts_string > 100
        if seen.escaped_ff > 50 and seen.escape_ends_string > 20:
            break
    else:
        pytest.fail(f"pylance never escaped 0xFF: {seen}")


@pytest.mark.interop
def test_pylance_fsst_raw_mode(tmp_path, spy):
    """Below 32 KiB of input pylance's FSST encoder switches itself off and stores the bytes raw."""
    lance_file = pytest.importorskip("lance.file")
    values = pa.array([f"value {i}" if i % 3 else "" for i in range(500)])
    schema = pa.schema([pa.field("s", pa.string(), metadata={"lance-encoding:compression": "fsst"})])
    table = pa.table([values], schema=schema)
    path = tmp_path / "f.lance"
    with lance_file.LanceFileWriter(str(path), schema, version="2.0") as w:
        w.write_batch(table)
    ours = LanceFileReader(path).read_all()
    assert ours["s"].equals(table["s"])
    assert spy and all((sym[3] & 1) == 0 for sym, _, _ in spy)


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_fsst_strings_with_nulls_and_empty_values_both_ways(tmp_path, spy, version):
    """pylance's FSST pages of nullable strings (nulls, empty values, 8-byte words) read here as
    pylance reads them, and our file of the same column reads back the same in pylance."""
    lance_file = pytest.importorskip("lance.file")
    rng = np.random.default_rng(11)
    words = np.array(["alphabet", "betatron", "gammaray", "deltaone", "x", "", "é✓"], dtype=object)
    picks = [words[rng.integers(0, words.size, int(rng.integers(0, 6)))] for _ in range(20_000)]
    values = [" ".join(p) + (f" {i}" if i % 5 else "") for i, p in enumerate(picks)]
    column = pa.array(values, pa.string(), mask=rng.random(20_000) < 0.1)
    table = pa.table({"s": column})
    theirs, ours = tmp_path / "theirs.lance", tmp_path / "ours.lance"
    with lance_file.LanceFileWriter(str(theirs), table.schema, version=version) as w:
        w.write_batch(table)
    assert LanceFileReader(theirs).read_all()["s"].equals(table["s"])
    assert spy  # pylance compressed the page with FSST
    from lance_table.file.writer import LanceFileWriter

    with LanceFileWriter(ours, table.schema, version=version) as w:
        w.write_batch(table)
    assert lance_file.LanceFileReader(str(ours)).read_all().to_table()["s"].equals(table["s"])


# --- the UTF-8 check of strings FSST decompressed ----------------------------------------------


def _words_table(rare: str | None, version: str) -> pa.Table:
    """20,000 ASCII strings (FSST pages in pylance's files), one of them ``rare`` if given."""
    rng = np.random.default_rng(1)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta"])
    values = [" ".join(rng.choice(words, 4)) + f" {i}" for i in range(20_000)]
    if rare is not None:
        values[777] = rare
    meta = {"lance-encoding:compression": "fsst"} if version == "2.0" else None  # (not 2.0's default)
    return pa.table([pa.array(values)], schema=pa.schema([pa.field("s", pa.string(), metadata=meta)]))


@pytest.fixture
def looked(monkeypatch):
    """The lengths of the string arrays whose UTF-8 the readers look at."""
    from lance_table.file import utf8

    seen: list[int] = []
    real = utf8.problem_of

    def recording(data, t=None):
        seen.append(len(data))
        return real(data, t)

    monkeypatch.setattr(utf8, "problem_of", recording)
    return seen


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_ascii_fsst_pages_are_not_looked_at_again(tmp_path, spy, looked, version):
    """pylance's FSST pages of ASCII strings decode to strings known valid: no UTF-8 pass over
    them. With one string that is not ASCII (its bytes escaped), the page is checked."""
    lance_file = pytest.importorskip("lance.file")
    for rare, checked in ((None, False), ("x\u01c5y é", True)):
        table = _words_table(rare, version)
        path = tmp_path / f"{version}-{checked}.lance"
        with lance_file.LanceFileWriter(str(path), table.schema, version=version) as w:
            w.write_batch(table)
        spy.clear()
        looked.clear()
        got = LanceFileReader(path).read_all()
        assert got["s"].equals(table["s"])
        assert got["s"].equals(lance_file.LanceFileReader(str(path)).read_all().to_table()["s"])
        assert spy  # pylance compressed the strings with FSST
        assert bool(looked) == checked, looked
        looked.clear()
        assert LanceFileReader(path).take([0, 777, 19_999])["s"].equals(table["s"].take([0, 777, 19_999]))
        assert bool(looked) == checked, looked


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_fsst_output_that_is_not_utf8_is_refused(tmp_path, version):
    """An escaped literal damaged into a byte that is not UTF-8, in a page otherwise all ASCII
    (an ASCII symbol table): the read refuses it with the typed error, as pylance refuses it."""
    lance_file = pytest.importorskip("lance.file")
    table = _words_table("x~`y", version)  # rare bytes: pylance escapes them
    path = tmp_path / "f.lance"
    for _attempt in range(4):  # (pylance samples at random: in the rare case that "~" is a symbol)
        with lance_file.LanceFileWriter(str(path), table.schema, version=version) as w:
            w.write_batch(table)
        data = bytearray(path.read_bytes())
        if data.count(b"\xff~\xff`") == 1:
            break
    else:
        pytest.fail("pylance never escaped '~`'")
    assert LanceFileReader(path).read_all()["s"].equals(table["s"])
    data[data.find(b"\xff~\xff`") + 1] = 0xFE  # "x\xfe`y": not UTF-8
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=r"column 's'.* not valid UTF-8") as info:
        LanceFileReader(path).read_all()
    assert str(path) in str(info.value)
    with pytest.raises(CorruptFileError, match="'s'"):
        LanceFileReader(path).take([3, 777])
    assert LanceFileReader(path).take([3, 776])["s"].equals(table["s"].take([3, 776]))
    with pytest.raises(ValueError, match=r"(?i)utf-?8"):
        lance_file.LanceFileReader(str(path)).read_all().to_table()
