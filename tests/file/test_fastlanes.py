"""FastLanes unpacking against a bit-by-bit reading of the layout's definition."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from lance_table.file.compression import bitpacking, pack_few, unpack_blocks


def _reference(words: np.ndarray, t: int, w: int, blocks: int) -> np.ndarray:
    """Lane ``l`` is the little-endian bit stream of words ``k * lanes + l``; its field ``r`` is the
    value at ``ORDER[r // 8] * 16 + (r % 8) * 128 + l``."""
    lanes = bitpacking.BLOCK // t
    out = np.zeros(blocks * bitpacking.BLOCK, np.uint64)
    for b in range(blocks):
        block = words[b * w * lanes : (b + 1) * w * lanes].astype(object)
        for lane in range(lanes):
            stream = sum(int(block[k * lanes + lane]) << (k * t) for k in range(w))
            for r in range(t):
                pos = int(bitpacking.ORDER[r // 8]) * 16 + (r % 8) * 128 + lane
                out[b * bitpacking.BLOCK + pos] = (stream >> (r * w)) & ((1 << w) - 1)
    return out


def _reference_bits(words: np.ndarray, t: int, w: int, blocks: int) -> np.ndarray:
    """:func:`_reference` by whole arrays of bits: each lane's words as one little-endian bit
    stream, cut into W-bit fields, each field's bits summed as a 64-bit value, the fields put at
    their places."""
    lanes = bitpacking.BLOCK // t
    grid = words[: blocks * w * lanes].reshape(blocks, w, lanes).transpose(0, 2, 1)  # (block, lane, word)
    bits = np.unpackbits(np.ascontiguousarray(grid).view(np.uint8), bitorder="little")
    fields = bits.reshape(blocks, lanes, t, w).astype(np.uint64)
    values = (fields << np.arange(w, dtype=np.uint64)).sum(axis=3, dtype=np.uint64)  # (block, lane, field)
    r = np.arange(t)
    place = bitpacking.ORDER[r // 8] * 16 + (r % 8) * 128  # of field r of lane 0
    out = np.zeros((blocks, bitpacking.BLOCK), np.uint64)
    out[:, place[None, :] + np.arange(lanes)[:, None]] = values
    return out.reshape(-1)


def test_the_bit_by_bit_reference_agrees_with_the_definition() -> None:
    rng = np.random.default_rng(11)
    for t, w in [(8, 3), (16, 16), (32, 19), (64, 62)]:
        words = rng.integers(0, 1 << t, 2 * w * bitpacking.BLOCK // t, dtype=np.uint64, endpoint=False)
        words = words.astype(bitpacking.DTYPES[t])
        assert np.array_equal(_reference_bits(words, t, w, 2), _reference(words, t, w, 2)), (t, w)


@pytest.mark.parametrize("t", [8, 16, 32, 64])
@pytest.mark.parametrize("group", [3, 64])
def test_every_width_and_layout_unpacks_to_the_reference(
    t: int, group: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every width 1..T, random words (every bit pattern, the top field's bits set too): back to
    back, led by a word each (a strided view), at uneven places (gathered), into a given array,
    in groups of 3 blocks (a short last one) or of 64, the kernel's temporaries reused from call
    to call and between types, all give the reference's values."""
    monkeypatch.setattr(unpack_blocks, "GROUP", group)
    rng = np.random.default_rng(t * 7 + group)
    dtype = bitpacking.DTYPES[t]
    lanes = bitpacking.BLOCK // t
    blocks = 8 if group == 3 else 67
    for w in range(1, t + 1):
        size = w * lanes
        words = rng.integers(0, 1 << t, blocks * size, dtype=np.uint64, endpoint=False).astype(dtype)
        words[:size] = dtype((1 << t) - 1)  # every bit set: nothing may leak between fields
        want = _reference_bits(words, t, w, blocks).astype(dtype)
        assert np.array_equal(bitpacking.unpack(words, t, w, blocks), want), (t, w)
        led = np.zeros((blocks, size + 2), dtype)
        led[:, 1 : size + 1] = words.reshape(blocks, size)
        even = np.arange(blocks) * (size + 2) + 1
        out = np.full(blocks * bitpacking.BLOCK, 5, dtype)
        assert bitpacking.unpack(led.reshape(-1), t, w, blocks, even, out) is out
        assert np.array_equal(out, want), (t, w)
        uneven = even + (np.arange(blocks) >= blocks // 2)
        spread = np.zeros(led.size + 1, dtype)
        spread[uneven[:, None] + np.arange(size)] = words.reshape(blocks, size)
        assert np.array_equal(bitpacking.unpack(spread, t, w, blocks, uneven), want), (t, w)


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_unpack_matches_the_definition_for_every_width(t: int) -> None:
    rng = np.random.default_rng(t)
    dtype = bitpacking.DTYPES[t]
    for w in sorted({1, 2, 3, t // 2 - 1, t // 2, t - 1, t}):
        blocks = 2
        words = rng.integers(0, 1 << t, blocks * w * bitpacking.BLOCK // t, dtype=np.uint64, endpoint=False)
        words = words.astype(dtype)
        got = bitpacking.unpack(words, t, w, blocks)
        assert got.dtype == dtype
        assert np.array_equal(got.astype(np.uint64), _reference(words, t, w, blocks)), (t, w)


def test_unpack_of_width_zero_and_no_blocks() -> None:
    assert np.array_equal(bitpacking.unpack(np.zeros(0, np.uint32), 32, 0, 3), np.zeros(3072, np.uint32))
    assert bitpacking.unpack(np.zeros(0, np.uint16), 16, 5, 0).size == 0


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_pick_gives_the_unpacked_values_for_every_width(t: int) -> None:
    rng = np.random.default_rng(t)
    dtype = bitpacking.DTYPES[t]
    for w in range(t + 1):
        per_block = w * bitpacking.BLOCK // t
        words = (
            rng.integers(0, 1 << t, 3 * per_block, dtype=dtype, endpoint=False) if w else np.zeros(0, dtype)
        )
        full = bitpacking.unpack(words, t, w, 3)
        block = rng.integers(0, 3, 300)
        position = rng.integers(0, bitpacking.BLOCK, 300)
        got = bitpacking.pick(words, t, w, block * per_block, position)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, full[block * bitpacking.BLOCK + position])


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_the_head_of_a_block_is_its_first_unpacked_values_for_every_width(t: int) -> None:
    rng = np.random.default_rng(t + 1)
    dtype = bitpacking.DTYPES[t]
    for w in range(t + 1):
        per_block = w * bitpacking.BLOCK // t
        words = rng.integers(0, 1 << t, per_block, dtype=dtype, endpoint=False) if w else np.zeros(0, dtype)
        full = bitpacking.unpack(words, t, w, 1)
        for count in (0, 1, 7, 100, bitpacking.HEAD_VALUES, bitpacking.BLOCK):
            got = bitpacking.unpack_head(words, t, w, count)
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, full[:count])


def test_chunks_packed_together_equal_chunks_packed_alone() -> None:
    """A page's bitpacked chunks are packed in one pass per width (``prepare``); each must be the
    bytes that packing the chunk alone gives, short chunks and mixed widths included."""
    from lance_table.file.v2_1.value_kinds import BitpackedValues

    rng = np.random.default_rng(2)
    words = (rng.integers(0, 1 << 20, 5000) >> rng.integers(0, 20, 5000)).astype(np.uint32)
    words[1024:2048] = 0  # a block of width 0
    cuts = [0, 1024, 2048, 2500, 3524, 3600, 4624, 5000]
    ranges = list(itertools.pairwise(cuts))
    values = BitpackedValues(None, 1, 4, words)
    alone = [bitpacking.pack_inline(words[a:b]).tobytes() for a, b in ranges]
    assert [values.sizes(a, b)[0] for a, b in ranges] == [len(x) for x in alone]
    values.prepare(ranges)
    assert [values.chunk(a, b)[0] for a, b in ranges] == alone


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_packing_and_unpacking_in_groups_of_blocks_changes_nothing(
    t: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Big inputs are packed and unpacked a group of blocks at a time; groups of 3 blocks (the
    last one short) give the same words and values as one group of all 10."""
    rng = np.random.default_rng(t + 1)
    dtype = bitpacking.DTYPES[t]
    n = 9 * bitpacking.BLOCK + 17
    for w in sorted({1, 3, t // 2 - 1, t // 2 + 3, t - 1}):
        values = rng.integers(0, 1 << w, n, dtype=np.uint64, endpoint=False).astype(dtype)
        monkeypatch.setattr(bitpacking, "PACK_GROUP", 256)
        monkeypatch.setattr(unpack_blocks, "GROUP", 256)
        words = bitpacking.pack(values, w)
        whole = bitpacking.unpack(words, t, w, 10)
        monkeypatch.setattr(bitpacking, "PACK_GROUP", 3)
        monkeypatch.setattr(unpack_blocks, "GROUP", 3)
        assert np.array_equal(bitpacking.pack(values, w), words), (t, w)
        assert np.array_equal(bitpacking.unpack(words, t, w, 10), whole), (t, w)
        assert np.array_equal(whole[:n], values) and not whole[n:].any(), (t, w)
        assert np.array_equal(whole[: 3 * bitpacking.BLOCK].astype(np.uint64), _reference(words, t, w, 3))


def test_inline_packing_by_runs_of_one_width_equals_packing_a_width_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocks in a few runs of one width (sorted values) are packed a run at a time; the words are
    those of packing a width at a time, and each block unpacks to its values."""
    values = np.concatenate(
        [np.arange(3000, dtype=np.uint32), np.zeros(1100, np.uint32), np.arange(5000, 6500)]
    )
    values = values.astype(np.uint32)
    words, starts = bitpacking.pack_inline_blocks(bitpacking._blocks(values))
    monkeypatch.setattr(bitpacking, "_SLICED_RUNS", 0)
    apart, apart_starts = bitpacking.pack_inline_blocks(bitpacking._blocks(values))
    assert np.array_equal(words, apart) and np.array_equal(starts, apart_starts)
    widths = words[starts].astype(np.int64)
    assert widths.tolist() == [10, 11, 12, 0, 13, 13]
    got = [bitpacking.unpack(words[s + 1 :], 32, int(w), 1) for s, w in zip(starts.tolist(), widths)]
    padded = np.zeros(len(got) * bitpacking.BLOCK, np.uint32)
    padded[: values.size] = values
    assert np.array_equal(np.concatenate(got), padded)


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_blocks_at_any_spacing_unpack_into_an_array_as_blocks_back_to_back(t: int) -> None:
    """Blocks led by a word each (inline bitpacking) are read through a strided view when evenly
    spaced, else gathered; either way, written into a given array or not, every width gives the
    values that packed them."""
    rng = np.random.default_rng(t + 2)
    dtype = bitpacking.DTYPES[t]
    lanes = bitpacking.BLOCK // t
    for w in range(t + 1):
        values = rng.integers(0, 1 << w, 4 * bitpacking.BLOCK, dtype=np.uint64, endpoint=False).astype(dtype)
        packed = bitpacking.pack(values, w).reshape(4, w * lanes)
        size = 1 + w * lanes
        led = np.zeros((4, size), dtype)
        led[:, 1:] = packed
        words = led.reshape(-1)
        even = np.arange(4) * size + 1
        # a spare word before the third block: the blocks are no longer evenly spaced
        words_uneven = np.concatenate([words[: 2 * size], np.zeros(1, dtype), words[2 * size :]])
        uneven = np.array([1, size + 1, 2 * size + 2, 3 * size + 2])
        block = bitpacking.BLOCK
        out = np.full(5 * block, 7, dtype)
        got = bitpacking.unpack(words, t, w, 4, even, out[block:])
        assert np.shares_memory(got, out)
        assert np.array_equal(out[block:], values) and (out[:block] == 7).all(), (t, w)
        assert np.array_equal(bitpacking.unpack(words, t, w, 4, even), values), (t, w)
        assert np.array_equal(bitpacking.unpack(words_uneven, t, w, 4, uneven), values), (t, w)
        for one in range(4):
            alone = bitpacking.unpack(words, t, w, 1, even[one : one + 1])
            assert np.array_equal(alone, values[one * block : (one + 1) * block]), (t, w)


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_unpacking_field_by_field_gives_the_values_for_every_width_and_layout(
    t: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long runs are unpacked field by field (``unpack_fields``, in units of 16 or 32 bits where
    the width allows): forced onto 5 blocks in groups of 2, every width gives the values that
    packed them, the blocks back to back, led by a word each or gathered, into a given array or
    not; a short run takes the block-by-block kernel."""
    from lance_table.file.compression import unpack_fields

    rng = np.random.default_rng(t + 3)
    dtype = bitpacking.DTYPES[t]
    lanes = bitpacking.BLOCK // t
    assert not unpack_fields.worth(t, 5, 5, "led") and unpack_fields.worth(t, 5, 1024, "led")
    monkeypatch.setattr(unpack_fields, "worth", lambda t, w, blocks, layout: True)
    monkeypatch.setattr(unpack_fields, "GROUP", 2)
    for w in range(1, t + 1):
        values = rng.integers(0, 1 << w, 5 * bitpacking.BLOCK, dtype=np.uint64, endpoint=False).astype(dtype)
        packed = bitpacking.pack(values, w)
        assert np.array_equal(bitpacking.unpack(packed, t, w, 5), values), (t, w)
        size = 1 + w * lanes
        led = np.zeros((5, size), dtype)
        led[:, 1:] = packed.reshape(5, -1)
        at = np.arange(5) * size + 1
        out = np.empty(5 * bitpacking.BLOCK, dtype)
        flat = led.reshape(-1)
        assert np.array_equal(bitpacking.unpack(flat, t, w, 5, at, out), values), (t, w)
        # uneven: the fourth block one word further on
        uneven = np.concatenate([flat[: 3 * size], np.zeros(1, dtype), flat[3 * size :]])
        at[3:] += 1
        assert np.array_equal(bitpacking.unpack(uneven, t, w, 5, at), values), (t, w)
    monkeypatch.undo()
    w = min(t - 1, 13)
    wide = rng.integers(0, 1 << w, 256 * bitpacking.BLOCK, dtype=np.uint64).astype(dtype)
    assert unpack_fields.worth(t, w, 256, "back")
    assert np.array_equal(bitpacking.unpack(bitpacking.pack(wide, w), t, w, 256), wide)


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_wide_widths_take_each_fields_next_word_from_the_next_field_in_groups(
    t: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above T / 2 bits most fields run on into the next word, which the block kernel takes from
    the lane's next field already unpacked (the last T / 8 rows from the block's first rows):
    every such width, in groups of 3 blocks with a short last group, led by a word each or back
    to back, gives the definition's values; and the values that were packed."""
    from lance_table.file.compression import unpack_fields

    monkeypatch.setattr(unpack_fields, "worth", lambda t, w, blocks, layout: False)
    monkeypatch.setattr(unpack_blocks, "GROUP", 3)
    rng = np.random.default_rng(t + 9)
    dtype = bitpacking.DTYPES[t]
    lanes = bitpacking.BLOCK // t
    blocks = 7
    for w in range(t // 2 + 1, t):
        values = rng.integers(0, 1 << w, blocks * bitpacking.BLOCK, dtype=np.uint64, endpoint=False)
        values = values.astype(dtype)
        values[: bitpacking.BLOCK] = dtype((1 << w) - 1)  # every bit set: nothing may leak between fields
        packed = bitpacking.pack(values, w)
        assert np.array_equal(bitpacking.unpack(packed, t, w, blocks), values), (t, w)
        led = np.zeros((blocks, 1 + w * lanes), dtype)
        led[:, 1:] = packed.reshape(blocks, -1)
        at = np.arange(blocks) * (1 + w * lanes) + 1
        got = bitpacking.unpack(led.reshape(-1), t, w, blocks, at)
        assert np.array_equal(got, values), (t, w)
        if w in (t // 2 + 1, t - 1):
            assert np.array_equal(got.astype(np.uint64), _reference(packed, t, w, blocks)), (t, w)


def test_pylance_files_of_wide_bitpacked_values_read_as_pylance_reads_them(tmp_path) -> None:
    """pylance bitpacks floats as their bit patterns (random doubles in [0, 1) at 62 bits, from 2 on
    at 63, floats at 30; negative doubles it stores as they are) and wide integers at their
    widths: files it wrote read here as it reads them, whole, by a take and after deleting rows
    here and there, through the wide-width kernel."""
    import lance
    import lance.file as lance_file

    import lance_table
    from lance_table.file.reader import LanceFileReader

    n = 100_000  # (98 blocks: groups of 64 and a short one)
    rng = np.random.default_rng(5)
    table = pa.table(
        {
            "id": np.arange(n),
            "f64": rng.random(n),
            "f64_63": rng.random(n) * 1000,  # (doubles of 2 and more: 63 bits)
            "f64_64": rng.random(n) - 0.5,
            "f32": rng.random(n, dtype=np.float32),
            "i64": rng.integers(0, 1 << 45, n),
            "i32": rng.integers(0, 1 << 21, n).astype(np.int32),
        }
    )
    path = str(tmp_path / "f.lance")
    with lance_file.LanceFileWriter(path, table.schema, version="2.2") as w:
        w.write_batch(table)
    unpack_blocks._group_shifts.cache_clear()
    ours = LanceFileReader(path)
    theirs = lance_file.LanceFileReader(path).read_all().to_table()
    assert theirs.equals(table)
    assert ours.read_all().equals(theirs)
    assert (
        unpack_blocks._group_shifts.cache_info().misses >= 5
    )  # (64, 62), (64, 63), (32, 30), (64, 45), (32, 21)
    idx = np.sort(rng.choice(n, 500, replace=False))
    assert ours.take(idx).equals(theirs.take(pa.array(idx)).combine_chunks())
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri, data_storage_version="2.2")
    lance.dataset(uri).delete("id % 7 = 3")
    assert lance_table.dataset(uri).to_table().equals(lance.dataset(uri).to_table())


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_a_short_block_packed_by_bit_places_is_the_grid_packing(
    t: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pack_few (a short block's values placed bit by bit) makes the words of the grid packing,
    for every width, short and full blocks, bits above the width dropped; pack takes it only
    for short blocks of narrow widths, and what it packs unpacks to the values."""
    rng = np.random.default_rng(t + 1)
    dtype = bitpacking.DTYPES[t]
    monkeypatch.setattr(pack_few, "FEW_VALUES", 0)  # pack: the grid packing only
    for w in range(1, t + 1):
        for n in (1, 7, 100, 150, 512, 513, 1023, 1024):
            wide = rng.integers(0, 1 << 63, n, dtype=np.uint64).astype(dtype)
            narrow = wide & dtype((1 << w) - 1)
            for values in (narrow, wide):
                grid = bitpacking.pack(values, w)
                got = pack_few.pack_few(values, w)
                assert got.dtype == dtype and np.array_equal(got, grid), (t, w, n)
            unpacked = bitpacking.unpack(got, t, w, 1)[:n]
            assert np.array_equal(unpacked, narrow), (t, w, n)
    monkeypatch.undo()
    calls: list[int] = []
    original = pack_few.pack_few
    monkeypatch.setattr(pack_few, "pack_few", lambda v, w: calls.append(v.size) or original(v, w))
    for n, w in ((150, 2), (512, pack_few.FEW_BITS), (513, 2), (150, pack_few.FEW_BITS + 1)):
        if w <= t:
            values = rng.integers(0, 1 << w, n, dtype=np.uint64).astype(dtype)
            assert np.array_equal(bitpacking.unpack(bitpacking.pack(values, w), t, w, 1)[:n], values)
    assert calls == [150, 512] if t > 8 else calls == [150]


def test_threads_unpacking_wide_widths_at_once_each_get_their_values() -> None:
    """The wide-width kernel's temporaries come from a shared free list: threads unpacking at
    the same time never share one, and at most ``_KEPT`` of each type are kept afterwards."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(17)
    cases = []
    for t, w in [(64, 62), (64, 63), (64, 40), (32, 30), (32, 17), (16, 15)]:
        values = rng.integers(0, 1 << w, 70 * bitpacking.BLOCK, dtype=np.uint64).astype(bitpacking.DTYPES[t])
        cases.append((t, w, bitpacking.pack(values, w), values))

    def run(k: int) -> bool:
        t, w, words, values = cases[k % len(cases)]
        return all(np.array_equal(bitpacking.unpack(words, t, w, 70), values) for _ in range(5))

    with ThreadPoolExecutor(12) as pool:
        assert all(pool.map(run, range(48)))
    assert all(len(free) <= unpack_blocks._KEPT for free in unpack_blocks._FREE.values())
    assert unpack_blocks._FREE[64]
