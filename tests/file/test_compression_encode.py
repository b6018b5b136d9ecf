"""Encoders of the 2.1/2.2 compressions (FastLanes packing, RLE, FSST, dictionaries, zstd/lz4,
byte-stream split), each checked by decoding its output with our decoders: the byte algorithms
in ``compression/`` and the page-level containers of ``v2_1/compress.py``. FSST tables are also
checked byte by byte against the documented layout and a table pylance wrote."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.compression import (
    bitpacking,
    byte_stream_split,
    dictionary,
    fsst,
    fsst_encode,
    fsst_train,
    general,
    rle,
)
from lance_table.file.pageio import PageIO
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import compress as compress21
from lance_table.file.v2_1 import values as values21
from lance_table.storage.sources import open_source

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LENGTHS = [0, 1, 1023, 1024, 1025, 5000]


def _io() -> PageIO:
    return PageIO(open_source(b""), None, None, (), "test page")


def _fixed(values: values21.Values, dtype: Any) -> np.ndarray:
    assert isinstance(values, values21.Fixed)
    return np.frombuffer(values.data, dtype)


# --- FastLanes bitpacking ---------------------------------------------------------------------------


def _random(rng: np.random.Generator, t: int, w: int, n: int) -> np.ndarray:
    dtype = bitpacking.DTYPES[t]
    if w == 0:
        return np.zeros(n, dtype)
    values = rng.integers(0, 1 << w, n, dtype=np.uint64, endpoint=False).astype(dtype)
    values[: n // 7] = dtype((1 << w) - 1)  # every bit of the width set
    return values


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_pack_is_the_inverse_of_unpack_for_every_width(t: int, n: int) -> None:
    rng = np.random.default_rng(t * 10_000 + n)
    dtype = bitpacking.DTYPES[t]
    blocks = -(-n // bitpacking.BLOCK)
    for w in range(t + 1):
        values = _random(rng, t, w, n)
        words = bitpacking.pack(values, w)
        assert words.dtype == dtype
        assert words.size == blocks * w * bitpacking.BLOCK // t
        got = bitpacking.unpack(words, t, w, blocks)
        assert np.array_equal(got[:n], values), (t, w, n)
        assert not got[n:].any()  # the padding of the last block is zeros


def test_pack_drops_bits_above_the_width_and_checks_its_arguments() -> None:
    values = np.arange(2048, dtype=np.uint16) * 37
    got = bitpacking.unpack(bitpacking.pack(values, 5), 16, 5, 2)
    assert np.array_equal(got, values & 31)
    with pytest.raises(ValueError):
        bitpacking.pack(values.astype(np.int16), 5)
    with pytest.raises(ValueError):
        bitpacking.pack(values, 17)
    with pytest.raises(ValueError):
        bitpacking.as_unsigned(np.zeros(3, "U2"))


def test_block_bit_widths() -> None:
    values = np.zeros(3000, np.uint32)
    values[5] = 1
    values[1500] = 1000  # 10 bits
    values[2999] = 1 << 31
    assert bitpacking.block_bit_widths(values).tolist() == [1, 10, 32]
    assert bitpacking.bit_width(values) == 32
    assert bitpacking.bit_width(np.zeros(0, np.uint8)) == 0
    # signed and float values count as their bit patterns
    assert bitpacking.block_bit_widths(np.array([-1], np.int8)).tolist() == [8]
    assert bitpacking.block_bit_widths(np.array([1.0], np.float32)).tolist() == [30]
    assert bitpacking.block_bit_widths(np.array([2**63 - 1], np.int64)).tolist() == [63]


def _inline_enc(t: int) -> Any:
    enc = pb.CompressiveEncoding()
    enc.inline_bitpacking.uncompressed_bits_per_value = t
    return enc


@pytest.mark.parametrize(
    "values",
    [
        np.arange(5000, dtype=np.int32) % 100,
        np.arange(3000, dtype=np.int64) - 1500,  # negative: full width
        np.random.default_rng(1).random(2500),  # float64 as bit patterns
        np.random.default_rng(2).random(1025).astype(np.float32),
        np.random.default_rng(3).integers(0, 7, 4096).astype(np.uint8),
        np.concatenate([np.zeros(1024, np.uint16), np.full(1024, 65535, np.uint16), [3]]),
        np.zeros(0, np.uint32),
        np.zeros(10, np.int64),
    ],
    ids=["int32", "int64-signed", "float64", "float32", "uint8", "uint16-mixed", "empty", "zeros"],
)
def test_inline_bitpacking_through_the_page_decoder(values: np.ndarray) -> None:
    t = values.dtype.itemsize * 8
    words = bitpacking.pack_inline(values)
    widths = bitpacking.block_bit_widths(values)
    lanes = bitpacking.BLOCK // t
    assert words.size == int((1 + widths * lanes).sum())
    got = compress21.decode_values(_inline_enc(t), [words.tobytes()], values.size, _io())
    assert np.array_equal(_fixed(got, values.dtype), values)


def _out_of_line_enc(t: int, w: int) -> Any:
    enc = pb.CompressiveEncoding()
    enc.out_of_line_bitpacking.uncompressed_bits_per_value = t
    enc.out_of_line_bitpacking.values.flat.bits_per_value = w
    return enc


@pytest.mark.parametrize("n", [*LENGTHS, 1024 + 700, 2048 + 100])
@pytest.mark.parametrize("w", [1, 3, 16])
def test_out_of_line_bitpacking_through_the_page_decoder(n: int, w: int) -> None:
    values = _random(np.random.default_rng(n + w), 32, w, n)
    words = bitpacking.pack_out_of_line(values)
    full, tail = divmod(n, bitpacking.BLOCK)
    per_block = w * bitpacking.BLOCK // 32
    if tail:
        # pylance's rule: pad and pack the tail only when padding costs fewer bits than packing saves
        packed = w * (bitpacking.BLOCK - tail) < (32 - w) * tail
        assert words.size == full * per_block + (per_block if packed else tail)
    got = compress21.decode_values(_out_of_line_enc(32, w), [words.tobytes()], n, _io())
    assert np.array_equal(_fixed(got, np.uint32), values)


def test_out_of_line_bitpacking_width() -> None:
    values = np.array([1, 2, 300], np.uint16)
    assert bitpacking.pack_out_of_line(values, 12).size == 3  # raw tail
    with pytest.raises(ValueError):
        bitpacking.pack_out_of_line(values, 8)


@SETTINGS
@given(
    t=st.sampled_from([8, 16, 32, 64]),
    data=st.data(),
)
def test_pack_round_trip_property(t: int, data: st.DataObject) -> None:
    w = data.draw(st.integers(0, t))
    values = data.draw(st.lists(st.integers(0, (1 << w) - 1), max_size=2100))
    arr = np.array(values, dtype=bitpacking.DTYPES[t])
    blocks = -(-arr.size // bitpacking.BLOCK)
    assert np.array_equal(bitpacking.unpack(bitpacking.pack(arr, w), t, w, blocks)[: arr.size], arr)
    got = compress21.decode_values(_inline_enc(t), [bitpacking.pack_inline(arr).tobytes()], arr.size, _io())
    assert np.array_equal(_fixed(got, arr.dtype), arr)


# --- RLE ---------------------------------------------------------------------------------------------


class _Where:
    path = "test"
    what = "test"

    def corrupt(self, problem: str) -> ValueError:
        return ValueError(problem)


def test_rle_encode_splits_long_runs() -> None:
    values = np.array([1, 1, 1, 2, 2, 3, 3, 3, 3] + [5] * 1000, np.int32)
    run_values, run_lengths = rle.encode(values)
    assert run_values.tolist() == [1, 2, 3, 5, 5, 5, 5]
    assert run_lengths.dtype == np.uint8
    assert run_lengths.tolist() == [3, 2, 4, 255, 255, 255, 235]
    assert np.array_equal(rle.expand(run_values, run_lengths, -1, _Where()), values)
    assert rle.run_count(values) == 4
    wide_values, wide = rle.encode(values, max_run=1000)
    assert wide.dtype == np.uint16 and wide.tolist() == [3, 2, 4, 1000]
    assert wide_values.tolist() == [1, 2, 3, 5]


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint32, np.int64, np.float32, np.float64])
def test_rle_round_trip(dtype: Any) -> None:
    rng = np.random.default_rng(0)
    values = np.repeat(rng.integers(0, 5, 400), rng.integers(1, 700, 400)).astype(dtype)
    run_values, run_lengths = rle.encode(values)
    assert run_values.dtype == values.dtype
    assert int(run_lengths.min()) >= 1
    assert np.array_equal(rle.expand(run_values, run_lengths, -1, _Where()), values)
    assert rle.encode(values[:0])[0].size == 0


def test_rle_compares_bits() -> None:
    values = np.array([np.nan, np.nan, 0.0, -0.0, -0.0])
    run_values, run_lengths = rle.encode(values)
    assert run_lengths.tolist() == [2, 1, 2]
    assert np.array_equal(
        rle.expand(run_values, run_lengths, -1, _Where()).view(np.uint64), values.view(np.uint64)
    )


def test_rle_chunks() -> None:
    values = np.repeat([7, 8, 9], [5000, 10, 3000]).astype(np.uint16)
    run_values, run_lengths = rle.encode(values, chunk=2048)
    per_chunk = rle.chunk_runs(run_lengths, 2048)
    assert per_chunk.size == 4 and int(per_chunk.sum()) == run_lengths.size
    ends = np.cumsum(run_lengths)
    done = 0
    for i, count in enumerate(per_chunk):  # each chunk's runs cover exactly its values
        done += int(count)
        assert ends[done - 1] == min((i + 1) * 2048, values.size)
    assert np.array_equal(rle.expand(run_values, run_lengths, -1, _Where()), values)
    with pytest.raises(ValueError):
        rle.encode(values, chunk=0)


def test_rle_block_through_the_level_decoder() -> None:
    # def levels of a list<int64> with empty lists, as in LANCE_FORMAT.md 7.2
    levels = np.repeat(np.array([1, 0, 1, 0, 1, 0], np.uint16), [1, 6, 1, 6, 1, 1])
    block = rle.encode_block(levels)
    assert struct.unpack_from("<Q", block)[0] == 12
    assert np.frombuffer(block, np.uint8, 6, 20).tolist() == [1, 6, 1, 6, 1, 1]
    enc = pb.CompressiveEncoding()
    enc.rle.values.flat.bits_per_value = 16
    enc.rle.run_lengths.flat.bits_per_value = 8
    long = np.repeat(np.array([0, 2, 1], np.uint16), [300, 1, 600])
    for lv in (levels, long):
        got = compress21.decode_levels(enc, rle.encode_block(lv), lv.size, _io())
        assert np.array_equal(got, lv)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 600)), max_size=30), st.integers(1, 700))
def test_rle_round_trip_property(runs: list[tuple[int, int]], chunk: int) -> None:
    values = np.repeat([v for v, _ in runs], [n for _, n in runs]).astype(np.int32)
    for kw in ({}, {"chunk": chunk}):
        run_values, run_lengths = rle.encode(values, **kw)
        assert np.array_equal(rle.expand(run_values, run_lengths, -1, _Where()), values)
    assert int(rle.chunk_runs(run_lengths, chunk).sum()) == run_lengths.size


# --- general compression and byte-stream split --------------------------------------------------------


@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
def test_general_round_trip(scheme: str) -> None:
    for data in (b"", b"x", bytes(range(256)) * 100, np.arange(10_000, dtype=np.int64)):
        framed = general.compress(data, scheme)
        raw = data.tobytes() if isinstance(data, np.ndarray) else data
        head = struct.unpack_from("<Q" if scheme == "zstd" else "<I", framed)[0]
        assert head == len(raw)
        assert bytes(general.decompress(framed, scheme, len(raw), _Where())) == raw
    assert len(general.compress(b"a" * 100_000, scheme)) < 1000
    with pytest.raises(ValueError):
        general.compress(b"", "gzip")


@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
# LZ4: a block measured by its sequences, and one too long for that
@pytest.mark.parametrize("size", [480, 40_000])
def test_general_buffer_claiming_more_bytes_than_it_holds_is_refused(scheme: str, size: int) -> None:
    # (LZ4 left the bytes past the block's as the allocator had them: memory of other buffers
    # read back as values)
    data = np.random.default_rng(size).integers(97, 101, size, dtype=np.uint8).tobytes()
    framed = bytearray(general.compress(data, scheme))
    assert (len(framed) <= general._WALKED_LZ4) == (size < 1000) or scheme == "zstd"
    assert general.decompress(bytes(framed), scheme, None, _Where()) == data
    struct.pack_into("<Q" if scheme == "zstd" else "<I", framed, 0, len(data) + 50)
    with pytest.raises(ValueError, match="decompress"):
        general.decompress(bytes(framed), scheme, None, _Where())


def test_lz4_block_sizes_read_from_their_sequences() -> None:
    """The decoded size read off a block's sequences is what Arrow decodes, on blocks of runs,
    of noise and of repeats (long literal and match lengths); never more than a cut block holds."""
    rng = np.random.default_rng(5)
    for i in range(300):
        n = int(rng.integers(1, 5000))
        data = [
            rng.integers(0, 3, n, dtype=np.uint8).tobytes(),
            rng.integers(0, 256, n, dtype=np.uint8).tobytes(),
            (b"lance" * n)[:n],
        ][i % 3]
        block = general.compress(data, "lz4")[4:]
        assert general._lz4_size(block) == n
        cut = memoryview(block[: len(block) // 2])
        size = general._lz4_size(bytes(cut))  # -1, or what a block cut there decodes to
        assert size == -1 or not general._fits(cut, size - 1)


def _streamed_zstd(raw: bytes) -> bytes:
    """``raw`` framed as Lance does, in a zstd frame that does not state its content size."""
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as out:
        out.write(raw)
    return struct.pack("<Q", len(raw)) + sink.getvalue().to_pybytes()


@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
def test_decompress_many_matches_one_by_one(scheme: str) -> None:
    """Frames decoded together give what each gives alone, and any buffer that cannot go with the
    others (no content size in its frame, a length that disagrees with it, damage) is decoded on
    its own, so that the error names it."""
    rng = np.random.default_rng(1)
    raws = [rng.integers(97, 123, int(n), dtype=np.uint8).tobytes() for n in rng.integers(0, 5000, 40)]
    raws[3] = b""
    framed = [general.compress(r, scheme) for r in raws]

    def many(buffers: list[bytes]) -> list[bytes]:
        data = b"".join(buffers)
        sizes = np.array([len(b) for b in buffers], np.int64)
        at = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        return [bytes(v) for v in general.decompress_many(memoryview(data), at, sizes, scheme, _Where())]

    assert many(framed) == raws
    assert many(framed[:1]) == raws[:1]
    if scheme == "lz4":
        return
    mixed = list(framed)
    mixed[7] = _streamed_zstd(raws[7])  # decoded alone
    assert many(mixed) == raws
    lying = list(framed)  # the Lance length disagrees with the frame's own
    lying[5] = struct.pack("<Q", len(raws[5]) + 1) + framed[5][8:]
    with pytest.raises(ValueError, match="does not decompress"):
        many(lying)
    damaged = list(framed)
    damaged[9] = framed[9][:-5]  # a frame cut short
    with pytest.raises(ValueError, match="does not decompress"):
        many(damaged)
    # a changed literal byte is no error (the frames carry no checksum): the same bytes either way
    changed = list(framed)
    body = bytearray(framed[9])
    body[-3] ^= 0x01
    changed[9] = bytes(body)
    alone = [bytes(general.decompress(b, scheme, None, _Where())) for b in changed]
    assert many(changed) == alone


def test_general_through_the_page_decoder() -> None:
    values = np.arange(4000, dtype=np.int64) * 3
    for scheme, number in (("lz4", 1), ("zstd", 2)):
        enc = pb.CompressiveEncoding()
        enc.general.compression.scheme = number
        enc.general.values.byte_stream_split.values.flat.bits_per_value = 64
        data = general.compress(byte_stream_split.encode(values), scheme, level=3)
        got = compress21.decode_values(enc, [data], values.size, _io())
        assert np.array_equal(_fixed(got, np.int64), values)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.int64])
def test_byte_stream_split_round_trip(dtype: Any) -> None:
    values = (np.arange(1001) * 7.25).astype(dtype)
    split = byte_stream_split.encode(values)
    width = values.dtype.itemsize
    assert split[:4] == values.view(np.uint8)[::width][:4].tobytes()  # first: every value's byte 0
    assert np.array_equal(byte_stream_split.decode(split, width, values.size).view(dtype).ravel(), values)
    enc = pb.CompressiveEncoding()
    enc.byte_stream_split.values.flat.bits_per_value = width * 8
    got = compress21.decode_values(enc, [split], values.size, _io())
    assert np.array_equal(_fixed(got, dtype), values)


@SETTINGS
@given(st.binary(max_size=800), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["zstd", "lz4"]))
def test_split_and_general_round_trip_property(raw: bytes, width: int, scheme: str) -> None:
    values = np.frombuffer(raw[: len(raw) // width * width], f"u{width}")
    framed = general.compress(byte_stream_split.encode(values), scheme)
    split = general.decompress(framed, scheme, values.nbytes, _Where())
    assert byte_stream_split.decode(split, width, values.size).tobytes() == values.tobytes()


# --- dictionaries ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        pa.array(["b", "a", "b", None, "c", "a"]),
        pa.array(np.arange(1000) % 7),
        pa.chunked_array([pa.array([1.5, 2.5]), pa.array([1.5])]),
        pa.array([b"x", b"yy"], pa.large_binary()),
        pa.array(["q", "r", "q"]).dictionary_encode(),
    ],
)
def test_dictionary_round_trip(values: Any) -> None:
    dict_values, indices = dictionary.encode(values)
    assert indices.dtype == np.uint32
    plain = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(plain.type):
        plain = plain.cast(plain.type.value_type)
    back = dict_values.take(pa.array(indices))
    valid = plain.is_valid().to_numpy(zero_copy_only=False)
    assert back.filter(pa.array(valid)).equals(plain.filter(pa.array(valid)))
    assert len(dict_values) == dictionary.cardinality(values)
    assert dictionary.encode(np.array([3, 1, 3]))[1].tolist() == [0, 1, 0]


def test_dictionary_pays_like_pylance() -> None:
    low = pa.array([f"value-{i % 3}" for i in range(1000)])
    unique = pa.array([f"value-{i}" for i in range(1000)])
    assert dictionary.pays(low)
    assert not dictionary.pays(unique)
    assert not dictionary.pays(low[:99])  # too few values
    assert dictionary.pays(pa.array(np.repeat(np.arange(100), 1000)))  # int64 repeated 1000x
    assert not dictionary.pays(pa.array(np.arange(100_000)))
    assert not dictionary.pays(pa.array([True, False] * 100))
    assert not dictionary.pays(pa.array([[1]] * 200))
    # fixed width: 16 bytes per entry and 4 per index, against 8 bytes a value
    assert dictionary.estimated_size(1000, 8000, 10, None) == 10 * 16 + 4000
    # variable width: average value size and one 4-byte offset per entry, 4 bytes per index
    assert dictionary.estimated_size(1000, 20_000, 10, 32) == 10 * 20 + 10 * 4 + 4000
    assert dictionary.pays(low, distinct=1000) is False
    with pytest.raises(ValueError):
        dictionary.pays(low, ratio=1.5)


# --- FSST -------------------------------------------------------------------------------------------


def _buffers(strings: list[bytes]) -> tuple[bytes, np.ndarray]:
    return b"".join(strings), np.concatenate([[0], np.cumsum([len(s) for s in strings])]).astype(np.int64)


def _round_trip(strings: list[bytes], table: fsst_encode.SymbolTable | None = None) -> np.ndarray:
    data, offsets = _buffers(strings)
    if table is None:
        table = fsst_train.train(data, offsets)
    out, out_offsets = fsst_encode.compress(table, data, offsets)
    assert out.dtype == np.uint8 and out_offsets.dtype == np.int64
    assert out_offsets.size == len(strings) + 1 and out_offsets[-1] == out.size
    got, got_offsets = fsst.decode(table.to_bytes(), out.tobytes(), out_offsets)
    assert bytes(got) == data
    assert np.array_equal(got_offsets, offsets)
    return out


def _reference_compress(symbols: list[bytes], strings: list[bytes]) -> list[bytes]:
    """The documented matching rule, string by string: at each position the symbol of 3+ bytes
    that starts with the next 3 (the longest if several) when all of it matches, else the 2-byte
    symbol, else the 1-byte one, else an escape; parsing restarts every 511 bytes."""
    code = {s: i for i, s in reversed(list(enumerate(symbols)))}
    long: dict[bytes, bytes] = {}
    for s in symbols:
        if len(s) >= 3 and len(s) > len(long.get(s[:3], b"")):
            long[s[:3]] = s
    out = []
    for string in strings:
        buf = bytearray()
        for lo in range(0, len(string), fsst_encode.SEGMENT):
            seg = string[lo : lo + fsst_encode.SEGMENT]
            i = 0
            while i < len(seg):
                cand = long.get(seg[i : i + 3])
                if cand is not None and seg[i : i + len(cand)] == cand:
                    buf.append(code[cand])
                    i += len(cand)
                elif len(seg) - i >= 2 and seg[i : i + 2] in code:
                    buf.append(code[seg[i : i + 2]])
                    i += 2
                elif seg[i : i + 1] in code:
                    buf.append(code[seg[i : i + 1]])
                    i += 1
                else:
                    buf += bytes([fsst.ESCAPE, seg[i]])
                    i += 1
        out.append(bytes(buf))
    return out


def _table(symbols: list[bytes]) -> fsst_encode.SymbolTable:
    vals = np.array([int.from_bytes(s, "little") for s in symbols], np.uint64)
    return fsst_encode.SymbolTable(vals, np.array([len(s) for s in symbols], np.uint8))


def test_fsst_codes_follow_the_matching_rule() -> None:
    symbols = [b"a", b"ab", b"abc", b"abcdefgh", b"xyz", b"x\x00", b"\x00", b"\xff\xff", b"hello", b"hel"]
    table = _table(symbols)
    rng = np.random.default_rng(5)
    alphabet = np.frombuffer(b"abcdefghxyz\x00\xff lo", np.uint8)
    strings = [bytes(rng.choice(alphabet, int(rng.integers(0, 30)))) for _ in range(300)]
    strings += [b"abcdefgh" * 200, b"x", b"x\x00", b"ab", b"abcdefg", b"hello" * 150, b"\xff"]
    data, offsets = _buffers(strings)
    out, out_offsets = fsst_encode.compress(table, data, offsets)
    expected = _reference_compress(symbols, strings)
    assert bytes(out) == b"".join(expected)
    assert out_offsets.tolist() == _buffers(expected)[1].tolist()
    _round_trip(strings, table)


@pytest.mark.parametrize(
    "strings",
    [
        [],
        [b""] * 10,
        [bytes(range(256))] * 40,
        [b"\xff" * 7, b"\xff", b"a\xffb", b""] * 100,
        [b"hello world " * 20_000],  # one long string: many 511-byte segments
        [b"the quick brown fox jumps over the lazy dog"[: i % 40] for i in range(5000)],
    ],
    ids=["none", "empty", "all-bytes", "escapes", "long", "prefixes"],
)
def test_fsst_round_trip(strings: list[bytes]) -> None:
    _round_trip(strings)


def test_fsst_round_trip_random_bytes_and_foreign_tables() -> None:
    rng = np.random.default_rng(0)
    strings = [bytes(rng.integers(0, 256, int(rng.integers(0, 60)), dtype=np.uint8)) for _ in range(3000)]
    out = _round_trip(strings)
    assert out.size < 1.1 * sum(map(len, strings))
    _check_layout(fsst_train.train(*_buffers(strings)).to_bytes())  # every byte value occurs
    text = [f"row {i} of the table" for i in range(3000)]
    english = fsst_train.train(*_buffers([s.encode() for s in text]))
    assert english.lengths.size > 20
    _round_trip(strings, english)  # a table trained on other data: mostly escapes
    _round_trip([s.encode() for s in text], english)
    _round_trip(strings, _table([]))


def test_fsst_compress_in_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long inputs are compressed in parts cut at string starts (on threads): same output."""
    rng = np.random.default_rng(3)
    strings = [bytes(rng.integers(97, 100, int(rng.integers(0, 3000)), dtype=np.uint8)) for _ in range(300)]
    strings += [b""] * 3
    data, offsets = _buffers(strings)
    table = fsst_train.train(data, offsets)
    whole = fsst_encode.compress(table, data, offsets)
    monkeypatch.setattr(fsst_encode, "_PART", 1000)
    parts = fsst_encode.compress(table, data, offsets)
    assert np.array_equal(whole[0], parts[0]) and np.array_equal(whole[1], parts[1])
    _round_trip(strings, table)


@pytest.mark.parametrize("kind", [pa.string(), pa.binary(), pa.large_string(), pa.large_binary()])
def test_fsst_arrow_buffers(kind: pa.DataType) -> None:
    values = pa.array(["alpha", None, "", "gamma delta", None, "alpha"], kind)[1:]
    data, offsets = fsst_encode.arrow_buffers(values)
    assert offsets.tolist() == [0, 0, 0, 11, 11, 16]
    assert bytes(data) == b"gamma deltaalpha"
    out = _round_trip([b"", b"", b"gamma delta", b"", b"alpha"])
    assert out.size <= 32
    with pytest.raises(ValueError):
        fsst_encode.arrow_buffers(pa.array([1]))


def test_fsst_compress_sliced_offsets_and_raw_tables() -> None:
    data = b"xxxxhello worldhello there"
    out, offsets = fsst_encode.compress(_table([b"hello", b" "]), data, np.array([4, 15, 26]))
    assert bytes(out) == b"".join(_reference_compress([b"hello", b" "], [data[4:15], data[15:]]))
    assert bytes(out[:4]) == b"\x00\x01\xffw"
    got, got_offsets = fsst.decode(_table([b"hello", b" "]).to_bytes(), out.tobytes(), offsets)
    assert bytes(got) == data[4:] and got_offsets.tolist() == [0, 11, 22]
    raw, raw_offsets = fsst_encode.compress(fsst_encode.SymbolTable.raw(), data, np.array([4, 15, 26]))
    assert bytes(raw) == data[4:] and raw_offsets.tolist() == [0, 11, 22]
    with pytest.raises(ValueError):
        fsst_encode.compress(_table([]), data, np.array([0, 30]))


def test_fsst_encode_switches_off_below_32k_like_pylance() -> None:
    small = [f"value {i}".encode() for i in range(500)]
    table, out, offsets = fsst_train.encode(*_buffers(small))
    assert table == struct.pack("<Q", fsst.FSST_MAGIC << 32).ljust(fsst_encode.TABLE_SIZE, b"\0")
    assert bytes(out) == b"".join(small)
    large = [f"value {i}".encode() for i in range(10_000)]
    table, out, offsets = fsst_train.encode(*_buffers(large))
    assert table[3] == 1 and out.size < 0.6 * sum(map(len, large))
    got, _ = fsst.decode(table, out.tobytes(), offsets)
    assert bytes(got) == b"".join(large)


def _check_layout(table: bytes) -> fsst_encode.SymbolTable:
    """Every property of a stored table that LANCE_FORMAT.md 7.3 and pylance's encoder define."""
    assert len(table) == fsst_encode.TABLE_SIZE == 2312
    (header,) = struct.unpack_from("<Q", table)
    assert header >> 32 == 0x46535354 and table[4:8] == b"TSSF"
    assert (header >> 25) & 0x7F == 0  # only the switch bit in that byte
    n = header & 0xFF
    assert 0 < n <= 255 and table[3] == 1
    symbols = np.frombuffer(table, "<u8", n, 8)
    lengths = np.frombuffer(table, np.uint8, n, 8 + 8 * n)
    assert lengths.min() >= 1 and lengths.max() <= 8
    assert not any(table[8 + 9 * n :])  # zeros after the lengths
    for word, length in zip(symbols.tolist(), lengths.tolist()):
        assert word >> (8 * length) == 0  # nothing above a symbol's length
    # grouped by length: 2-byte symbols that begin a longer one (suffix_lim of them), the other
    # 2-byte symbols, then 3 to 8 bytes, then single bytes
    suffix_lim = (header >> 16) & 0xFF
    order = [1 if n_ == 2 else n_ if n_ > 2 else 9 for n_ in lengths.tolist()]
    assert order == sorted(order)
    twos = symbols[lengths == 2].tolist()
    prefixes = {w & 0xFFFF for w, n_ in zip(symbols.tolist(), lengths.tolist()) if n_ > 2}
    assert [w in prefixes for w in twos] == [True] * suffix_lim + [False] * (len(twos) - suffix_lim)
    # at most one symbol of 3+ bytes per 3-byte prefix
    long3 = [w & 0xFFFFFF for w, n_ in zip(symbols.tolist(), lengths.tolist()) if n_ > 2]
    assert len(long3) == len(set(long3))
    # the terminator byte appears in no multi-byte symbol
    terminator = (header >> 8) & 0xFF
    multi = [w.to_bytes(8, "little")[:n_] for w, n_ in zip(symbols.tolist(), lengths.tolist()) if n_ > 1]
    assert all(bytes([terminator]) not in s for s in multi)
    parsed = fsst_encode.SymbolTable.from_bytes(table)
    assert parsed.to_bytes() == table
    return parsed


def _text(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    vocab = [bytes(rng.integers(97, 123, int(rng.integers(3, 9)), dtype=np.uint8)) for _ in range(2000)]
    return [b" ".join(vocab[j] for j in rng.integers(0, 2000, 4))[:20] for _ in range(n)]


def test_fsst_table_layout() -> None:
    strings = _text(20_000)
    table = fsst_train.train(*_buffers(strings))
    raw = table.to_bytes()
    _check_layout(raw)
    assert table.symbol_bytes()[0] == raw[8 : 8 + table.lengths[0]]
    assert fsst_encode.SymbolTable.raw().to_bytes()[:8] == bytes([0, 0, 0, 0]) + b"TSSF"
    with pytest.raises(ValueError):
        fsst_encode.SymbolTable.from_bytes(b"\0" * 16)
    with pytest.raises(ValueError):
        fsst_encode.SymbolTable(np.zeros(1, np.uint64), np.array([9], np.uint8))
    with pytest.raises(ValueError):
        fsst_encode.SymbolTable(np.zeros(256, np.uint64), np.ones(256, np.uint8))


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, np.ndarray]]:
    """The (symbol table, offsets) of every FSST decode while our reader reads a file."""
    calls: list[tuple[bytes, np.ndarray]] = []
    real = fsst.decode_text

    def recording(table: Any, data: Any, offsets: Any) -> Any:
        calls.append((bytes(table), np.asarray(offsets)))
        return real(table, data, offsets)

    monkeypatch.setattr(fsst, "decode_text", recording)
    return calls


@pytest.mark.interop
def test_fsst_against_a_table_pylance_wrote(tmp_path: Any, spy: list[tuple[bytes, np.ndarray]]) -> None:
    """pylance's table has the layout we write; our compressor reproduces data with it, and our
    own table compresses the same strings to no more bytes than pylance's did (plus 10%)."""
    lance_file = pytest.importorskip("lance.file")
    strings = _text(50_000, seed=1)
    path = str(tmp_path / "f.lance")
    schema = pa.schema([pa.field("s", pa.string())])
    with lance_file.LanceFileWriter(path, schema, version="2.2") as w:
        w.write_batch(pa.table({"s": pa.array([s.decode() for s in strings])}))
    assert LanceFileReader(path).read_all()["s"].cast(pa.binary()).to_pylist() == strings
    assert spy, "pylance no longer FSST-compresses these strings"
    theirs = sum(int(offsets[-1] - offsets[0]) for _, offsets in spy)
    pylance_table = _check_layout(spy[0][0])
    _round_trip(strings, pylance_table)
    ours = _round_trip(strings).size
    assert ours <= 1.1 * theirs, (ours, theirs)


@SETTINGS
@given(
    st.lists(st.binary(max_size=40), max_size=60),
    st.lists(st.binary(min_size=1, max_size=8), max_size=40),
)
def test_fsst_round_trip_property(strings: list[bytes], symbols: list[bytes]) -> None:
    _round_trip(strings)
    _round_trip(strings, _table(symbols[:255]))
    _round_trip(strings * 20)


def test_fsst_two_byte_symbols_stop_at_segment_and_string_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2-byte symbol that would match across the end of a string or of a 511-byte segment is
    not taken there: the last byte gets its own code, or an escape when it has none."""
    symbols = [b"ab", b"ba", b"a", b"abcdefgh"]
    strings = [b"a" + b"ba" * 300, b"ab" * 300, b"a", b"ab", b"b", b"a" * 510 + b"ba", b"abcdefg", b"ba"]
    strings += [b"x" * 510 + b"ab", b"b" * 3, b""]
    data, offsets = _buffers(strings)
    mended: list[int] = []
    real = fsst_encode._overshot

    def counting(m: Any, words: np.ndarray, at: np.ndarray) -> np.ndarray:
        mended.extend(at.tolist())
        return real(m, words, at)

    monkeypatch.setattr(fsst_encode, "_overshot", counting)
    out, out_offsets = fsst_encode.compress(_table(symbols), data, offsets)
    assert len(mended) >= 3  # at string ends (to an escape and to a code) and a segment's end
    expected = _reference_compress(symbols, strings)
    assert bytes(out) == b"".join(expected)
    assert out_offsets.tolist() == _buffers(expected)[1].tolist()
    _round_trip(strings, _table(symbols))
