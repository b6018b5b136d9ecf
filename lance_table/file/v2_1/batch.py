"""Decoding the buffers of many mini-block chunks in one numpy pass.

A page of short strings has thousands of chunks; decoding them one by one costs a Python round
trip each. For the compressions that dominate real data (flat values, variable-width values with
or without FSST, inline FastLanes bitpacking and flat 16-bit levels) the chunks are decoded here
all at once. Every function returns None when its input has no batch form; the caller then
decodes chunk by chunk with :func:`compress21.decode_values`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from lance_table._parallel import map_parts, parts_inline
from lance_table.file.compression import bitpacking, general
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import batch_even, batch_runs, inline_blocks
from lance_table.file.v2_1.byteranges import (
    alternate,
    as_bytes,
    even,
    exclusive_cumsum,
    gather,
    join,
    join_in_place,
    rows_at,
    runs_of,
    spans,
)
from lance_table.file.v2_1.values import MAX_LIST_SIZE, Fixed, Values, Var, concat_values, offsets_of


def levels(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> np.ndarray | None:
    """Repetition or definition levels of many chunks, if stored as plain, run-length encoded or
    bitpacked 16-bit values (None: another form)."""
    kind = enc.WhichOneof("compression")
    if kind == "out_of_line_bitpacking":
        got = _out_of_line(enc.out_of_line_bitpacking, data, at, sizes, counts, io)
        if got is None or got.bits not in bitpacking.DTYPES:
            return None
        return np.frombuffer(got.data, bitpacking.DTYPES[got.bits]).astype(np.uint16, copy=False)
    if kind == "rle":
        return batch_runs.levels(enc.rle, data, at, sizes, counts, io)
    if kind == "inline_bitpacking" and int(enc.inline_bitpacking.uncompressed_bits_per_value) == 16:
        got = inline_blocks.values(16, data, at, counts, io, sizes=sizes)
        return None if got is None else np.frombuffer(got.data, np.uint16, int(counts.sum()))
    if kind != "flat" or enc.flat.HasField("data") or enc.flat.bits_per_value != 16:
        return None
    need = counts * 2
    if bool(np.any(need > sizes)):
        raise io.corrupt("a chunk's level buffer is shorter than its levels")
    return np.frombuffer(join(data, at, need), np.uint16)


def values(
    enc: Any,
    data: memoryview,
    at: np.ndarray,
    sizes: np.ndarray,
    counts: np.ndarray,
    io: PageIO,
    floor: int | None = None,
    reuse: bool = False,
) -> Values | None:
    """The values of many chunks whose single value buffer starts at ``at`` (``sizes`` bytes).

    With a positive ``floor`` (integer values), blocks of inline bitpacking whose bit width
    keeps all their values below it are not unpacked: their values come back as 0. A caller that
    only asks which values reach the floor loses nothing. ``reuse``: nothing else views
    ``data`` (no levels decoded from it), so values of one width may be joined where they lie
    when the page owns it (see ``PageIO.take_owned``)."""
    kind = enc.WhichOneof("compression")
    if kind == "flat" and not enc.flat.HasField("data"):
        bits = int(enc.flat.bits_per_value)
        if bits == 1:
            return batch_runs.flat_bits(data, at, sizes, counts, io)
        if bits % 8:
            return None
        need = counts * (bits // 8)
        if bool(np.any(need > sizes)):
            raise io.corrupt("a chunk's value buffer is shorter than its values")
        owned = reuse and at.size > 1 and even(data, at, need) and io.take_owned(data)
        joined = join_in_place(data, at, need) if owned else None
        return Fixed(join(data, at, need) if joined is None else joined, bits)
    if kind == "variable":
        return _variable(enc.variable, data, at, sizes, counts, io)
    if kind == "fsst" and enc.fsst.values.WhichOneof("compression") == "variable":
        got = _variable(enc.fsst.values.variable, data, at, sizes, counts, io)
        return None if got is None else Var(got.data, got.offsets, bytes(enc.fsst.symbol_table))
    if kind == "fixed_size_list" and not enc.fixed_size_list.has_validity:
        per = int(enc.fixed_size_list.items_per_value)
        if not 0 < per <= MAX_LIST_SIZE:
            raise io.corrupt(f"a fixed-size list of {per} items")
        return values(enc.fixed_size_list.values, data, at, sizes, counts * per, io, reuse=reuse)
    if kind == "inline_bitpacking":
        return inline_blocks.values(
            int(enc.inline_bitpacking.uncompressed_bits_per_value), data, at, counts, io, floor, sizes
        )
    if kind == "general" and enc.general.values.WhichOneof("compression") in ("variable", "flat"):
        return _general(enc.general, data, at, sizes, counts, io)
    if kind == "rle":  # in block form (one buffer)
        return batch_runs.values(batch_runs.block_runs(enc.rle, data, at, sizes, counts, io))
    return None


# groups of chunks decompressed on threads when a page's general-compressed chunks are many
_GENERAL_PARTS = 4


def _general(
    enc: Any,
    data: memoryview,
    at: np.ndarray,
    sizes: np.ndarray,
    counts: np.ndarray,
    io: PageIO,
    pick: np.ndarray | None = None,
) -> Values | None:
    """Chunks whose one buffer is LZ4/ZSTD-compressed: decompressed a group of chunks at a time
    (see :func:`_decompress_group`) and decoded as one batch of the inner encoding per group;
    a big page's groups on threads, which mostly decompress (releasing the GIL), unless those
    would run one after the other on this thread (a scan keeping every worker busy): then the
    page is one group, and its values need no joining.

    With ``pick`` (sorted positions among the chunks' values) only those variable-width values
    are cut from the decompressed chunks."""
    scheme = general.SCHEMES_BY_NUMBER.get(enc.compression.scheme)
    if scheme is None:
        return None
    inner = enc.values
    width = _offset_width(inner.variable) if inner.WhichOneof("compression") == "variable" else 0
    if pick is not None and (not width or bool(np.any(np.diff(pick) < 0))):
        return None
    first_value = exclusive_cumsum(counts)

    def decode(group: tuple[int, int]) -> Values | None:
        a, b = group
        raw, raw_at, raw_sizes = _decompress_group(data, at[a:b], sizes[a:b], scheme, io)
        if pick is None:
            return values(inner, raw, raw_at, raw_sizes, counts[a:b], io)
        base = int(first_value[a])
        lo, hi = np.searchsorted(pick, [base, base + int(counts[a:b].sum())]).tolist()
        return _pick_variable(raw, raw_at, raw_sizes, counts[a:b], pick[lo:hi] - base, width, io)

    if int(sizes.sum()) < _GENERAL_PARALLEL_BYTES or parts_inline():
        # one group: parts that would run one after the other here only add the copy joining them
        return decode((0, at.size))
    cuts = np.linspace(0, at.size, _GENERAL_PARTS + 1).astype(np.int64)
    parts = map_parts(decode, [(a, b) for a, b in pairwise(cuts.tolist()) if b > a])
    found = [p for p in parts if p is not None]
    if len(found) < len(parts):
        return None
    return found[0] if len(found) == 1 else concat_values(found, io)


# compressed bytes of a page below which its chunks are decompressed on the calling thread
_GENERAL_PARALLEL_BYTES = 1 << 20


def _decompress_group(
    data: memoryview, at: np.ndarray, sizes: np.ndarray, scheme: str, io: PageIO
) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """The chunks ``data[at : at + size]`` decompressed back to back into one buffer, with where
    each starts and its size: in one call where :func:`general.decompress_joined` can, else
    one by one (and joined). The chunks keep no alignment: the decoders read them at any."""
    got = general.decompress_joined(data, at, sizes, scheme)
    if got is not None:
        out, raw_sizes = got
        return out, exclusive_cumsum(raw_sizes), raw_sizes
    raws = general.decompress_each(data, at, sizes, scheme, io)
    raw_sizes = np.array([len(r) for r in raws], np.int64)
    return memoryview(b"".join(raws)), exclusive_cumsum(raw_sizes), raw_sizes


def _pick_variable(
    data: memoryview,
    at: np.ndarray,
    sizes: np.ndarray,
    counts: np.ndarray,
    pick: np.ndarray,
    width: int,
    io: PageIO,
) -> Var:
    """The variable-width values ``pick`` (sorted positions among all values) of chunks of
    ``[n + 1 offsets][bytes]`` starting at ``at`` in ``data``."""
    if bool(np.any(at + sizes > len(data))):
        raise io.corrupt("a chunk runs past the page's data")
    if bool(np.any((counts + 1) * width > sizes)):
        raise io.corrupt("a chunk's variable offsets run past its buffer")
    chunk, offset = _locate(counts, pick)
    pair = _chunk_words(data, at[chunk] + offset * width, np.full(pick.size, 2), width).reshape(-1, 2)
    lo, hi = pair[:, 0].astype(np.int64), pair[:, 1].astype(np.int64)
    floor = (counts[chunk] + 1) * width
    if bool(np.any(lo < floor)) or bool(np.any(hi > sizes[chunk])) or bool(np.any(hi < lo)):
        raise io.corrupt("variable offsets are out of order or past the buffer")
    lengths = hi - lo
    return Var(gather(data, at[chunk] + lo, lengths), offsets_of(lengths))


_UINT_OF = {4: np.uint32, 8: np.uint64}


def _chunk_words(data: memoryview, at: np.ndarray, n: np.ndarray, width: int) -> np.ndarray:
    """``n[k]`` unsigned words of ``width`` bytes from byte ``at[k]`` of ``data``, back to back,
    at any alignment (one gather per distinct ``at % width``; the caller checks the bounds)."""
    dtype = _UINT_OF[width]
    residue = at % width
    present = np.flatnonzero(np.bincount(residue, minlength=1)).tolist()

    def words(r: int) -> np.ndarray:
        return np.frombuffer(data, dtype, (len(data) - r) // width, r)

    if len(present) == 1:
        r = present[0]
        if n.size and bool(np.all(n == n[0])):  # (pairs of offsets: one gather of pairs)
            return runs_of(words(r), (at - r) // width, int(n[0]))
        return words(r)[spans((at - r) // width, n)]
    out = np.empty(int(n.sum()), dtype)
    into = exclusive_cumsum(n)
    for r in present:
        sel = np.flatnonzero(residue == r)
        out[spans(into[sel], n[sel])] = words(r)[spans((at[sel] - r) // width, n[sel])]
    return out


def _offset_width(enc: Any) -> int:
    """The byte width of plain variable offsets (0: another form, decoded the general way)."""
    offsets_enc = enc.offsets
    if offsets_enc.WhichOneof("compression") != "flat" or offsets_enc.flat.HasField("data"):
        return 0
    width = int(offsets_enc.flat.bits_per_value) // 8
    return width if width in _UINT_OF else 0


def _variable(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> Var | None:
    """Chunks of ``[n + 1 offsets from the buffer start][bytes]`` (at any alignment): their value
    bytes joined, with the offsets of the values in the joined bytes."""
    width = _offset_width(enc)
    if not width:
        return None
    n1 = counts + 1
    if bool(np.any(at + sizes > len(data))):
        raise io.corrupt("a chunk runs past the page's data")
    if bool(np.any(n1 * width > sizes)):
        raise io.corrupt("a chunk's variable offsets run past its buffer")
    # each chunk's offsets are whole words back to back: their bytes joined (one copy in Arrow)
    words = np.frombuffer(join(data, at, n1 * width), _UINT_OF[width])
    lo, hi, offsets = _joined_offsets(words, counts, sizes, width, io)
    return Var(join(data, at + lo, hi - lo), offsets)


#: chunks of one value count but fewer than one in this many are shifted as runs of even chunks
_EVEN_SHARE = 16


def _joined_offsets(
    words: np.ndarray, counts: np.ndarray, sizes: np.ndarray, width: int, io: PageIO
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From the ``counts + 1`` offsets (``width`` bytes each) of each chunk back to back: where
    each chunk's value bytes start and end, and the n + 1 offsets of all the values once those
    bytes are joined, checked to lie in order between the chunk's offsets and its end
    (``sizes``).

    Each chunk's offsets move by where its bytes land in the joined bytes; a chunk's last offset
    then equals the next chunk's first, and is dropped. A few passes over the offsets, no lengths.
    """
    if not counts.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64)
    if counts.size > 2:
        odd = int(np.count_nonzero(counts[:-1] != counts[0]))
        if not odd:
            return batch_even.joined_offsets(words, counts, sizes, width, io)
        if odd * _EVEN_SHARE < counts.size:  # a few pages' chunks: each page's last one shorter
            return batch_even.segmented_offsets(words, counts, sizes, width, io)
    n1 = counts + 1
    first = exclusive_cumsum(n1)
    last = first + counts
    lo, hi = words[first].astype(np.int64), words[last].astype(np.int64)
    if bool(np.any(lo < n1 * width) or np.any(lo > hi) or np.any(hi > sizes)):
        raise io.corrupt("variable offsets are out of order or past the buffer")
    shift = exclusive_cumsum(hi - lo) - lo
    kept = counts.copy()  # offsets kept per chunk: all but the last, except in the last chunk
    kept[-1] += 1
    offsets = (np.delete(words, last[:-1]) if counts.size > 1 else words).astype(np.int64)
    offsets += np.repeat(shift, kept)
    if offsets.size > 1 and bool(np.any(offsets[1:] < offsets[:-1])):
        raise io.corrupt("variable offsets are out of order or past the buffer")
    return lo, hi, offsets


def pick_values(
    enc: Any,
    data: memoryview,
    at: np.ndarray,
    sizes: np.ndarray,
    counts: np.ndarray,
    pick: np.ndarray,
    io: PageIO,
    share: float = 0.0,
) -> Values | None:
    """The values ``pick`` (sorted positions among all the chunks' values) of many chunks whose
    single value buffer starts at ``at``, decoding only those values; None when the encoding has
    no such form, or (bitpacking) picking does not pay at this ``share`` of the chunks' values
    (see :data:`PICK_BITPACKED`): the caller then decodes the chunks and picks afterwards."""
    kind = enc.WhichOneof("compression")
    per, item = 1, enc  # a fixed-size list of plain values is rows of ``per`` values
    if kind == "fixed_size_list" and not enc.fixed_size_list.has_validity:
        per, item = int(enc.fixed_size_list.items_per_value), enc.fixed_size_list.values
        if not 0 < per <= MAX_LIST_SIZE:
            raise io.corrupt(f"a fixed-size list of {per} items")
    if kind in ("flat", "fixed_size_list"):
        item_width = batch_runs.flat_width(item)
        if not item_width:
            return None
        width = item_width * per
        chunk, offset = _locate(counts, pick)
        if bool(np.any(counts * width > sizes)):
            raise io.corrupt("a chunk's value buffer is shorter than its values")
        return Fixed(rows_at(data, at[chunk] + offset * width, width), item_width * 8)
    if kind == "inline_bitpacking":
        t = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        if share >= PICK_BITPACKED.get(t, 0.0):
            return None
        found = inline_blocks.walk(t, data, at, counts, io)
        if found is None:
            return None
        chunk, offset = _locate(counts, pick)
        block = found.first_block[chunk] + offset // bitpacking.BLOCK
        within = offset % bitpacking.BLOCK
        widths = found.width[block]
        present = np.flatnonzero(np.bincount(widths, minlength=1)).tolist()
        if len(present) == 1:  # one bit width: no grouping
            one = bitpacking.pick(found.words, t, present[0], found.data_at[block], within)
            return Fixed(as_bytes(one), t)
        out = np.empty(pick.size, bitpacking.DTYPES[t])
        for w in present:
            sel = np.flatnonzero(widths == w)
            out[sel] = bitpacking.pick(found.words, t, w, found.data_at[block[sel]], within[sel])
        return Fixed(as_bytes(out), t)
    if kind == "general":
        return _general(enc.general, data, at, sizes, counts, io, pick)
    if kind in ("variable", "fsst") and share < PICK_VARIABLE:
        inner = enc.variable if kind == "variable" else enc.fsst.values
        if kind == "fsst" and inner.WhichOneof("compression") != "variable":
            return None
        width = _offset_width(inner if kind == "variable" else inner.variable)
        if not width:
            return None
        got = _pick_variable(data, at, sizes, counts, pick, width, io)
        # FSST strings are compressed one by one: the picked ones are decompressed alone
        return got if kind == "variable" else Var(got.data, got.offsets, bytes(enc.fsst.symbol_table))
    return None


# Variable-width values (plain or FSST) are picked from their chunks while they are less than
# this share of the chunks' values (a take's few rows); above it the chunks are decoded whole.
PICK_VARIABLE = 0.25

# Picking a bitpacked value costs a few gathers and shifts of its own; unpacking costs per value of
# the chunks, less for narrower types. Values are picked while they are less than this share of
# the chunks' values, by the type's bits (below the measured break-even shares: about 0.2, 0.13,
# 0.095 and 0.07).
PICK_BITPACKED = {64: 1 / 6, 32: 1 / 9, 16: 1 / 12, 8: 1 / 16}


def _locate(counts: np.ndarray, pick: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted positions among the values of chunks holding ``counts`` values each: the chunk
    of each and its position in that chunk (the caller has checked the positions are below the
    total)."""
    starts = exclusive_cumsum(counts)
    per_chunk = np.diff(np.searchsorted(pick, starts), append=pick.size)
    chunk = np.repeat(np.arange(counts.size), per_chunk)
    return chunk, pick - starts[chunk]


def _block_starts(first: np.ndarray, blocks: np.ndarray, per_block: int) -> np.ndarray:
    """Word positions of the blocks of every chunk: ``blocks[k]`` blocks of ``per_block`` words
    back to back from ``first[k]``."""
    if not bool(np.any(blocks != 1)):  # a block per chunk (chunks of fewer values than a block)
        return first
    return first.repeat(blocks) + (spans(np.zeros_like(first), blocks) * per_block)


@dataclass
class _OutOfLine:
    """Where the values of chunks of out-of-line bitpacking are: per chunk, ``full`` whole
    blocks of ``per_block`` words from word ``first``, then a ``tail`` that is a padded block or
    (``raw_tail``) that many raw words."""

    t: int
    w: int
    words: np.ndarray
    per_block: int
    first: np.ndarray
    full: np.ndarray
    tail: np.ndarray
    raw_tail: np.ndarray
    blocks: np.ndarray  # bitpacked blocks per chunk (whole and padded)


def _out_of_line_chunks(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> _OutOfLine | None:
    """The layout of chunks of headerless W-bit FastLanes blocks, checked against their sizes."""
    t = int(enc.uncompressed_bits_per_value)
    dtype = bitpacking.DTYPES.get(t)
    inner = enc.values
    if dtype is None or inner.WhichOneof("compression") != "flat" or inner.flat.HasField("data"):
        return None
    w = int(inner.flat.bits_per_value)
    word = t // 8
    if w > t:
        raise io.corrupt(f"bit width {w} above {t}")
    if bool(np.any(at % word)):
        return None
    words = np.frombuffer(data, dtype, len(data) // word)
    per_block = w * bitpacking.BLOCK // t
    full, tail = np.divmod(counts, bitpacking.BLOCK)
    avail = sizes // word
    rest = avail - full * per_block
    raw_tail = (tail > 0) & (rest == tail)
    blocks = full + ((tail > 0) & ~raw_tail)
    if bool(np.any(blocks * per_block + raw_tail * tail > avail)):
        raise io.corrupt("out-of-line bitpacking runs past its buffer")
    return _OutOfLine(t, w, words, per_block, at // word, full, tail, raw_tail, blocks)


def _out_of_line(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> Fixed | None:
    """Chunks of headerless W-bit FastLanes blocks; a short tail is packed and padded, or raw."""
    found = _out_of_line_chunks(enc, data, at, sizes, counts, io)
    if found is None:
        return None
    t, words, per_block, blocks = found.t, found.words, found.per_block, found.blocks
    n_blocks = int(blocks.sum())
    if per_block and n_blocks:
        # every block is a row of per_block words: gather the rows, not the words
        block_at = _block_starts(found.first, blocks, per_block)
        packed = np.lib.stride_tricks.sliding_window_view(words, per_block)[block_at].reshape(-1)
    else:
        packed = words[:0]
    unpacked = bitpacking.unpack(packed, t, found.w, n_blocks)
    raw_tail, full = found.raw_tail, found.full
    if not bool(raw_tail.any()) and not bool(np.any(found.tail[:-1])):
        # whole blocks in every chunk but the last: the values are the unpacked blocks, in order
        return Fixed(as_bytes(unpacked[: int(counts.sum())]), t)
    if not bool(raw_tail.any()) and counts.size > 1:
        even = batch_even.runs(unpacked, blocks, counts)
        if even is not None:
            return Fixed(as_bytes(even), t)
    # Each chunk is its run of unpacked blocks cut to its count (a padded tail block is the run's
    # last), then its raw tail, if any: at most two slices per chunk, joined in one copy.
    size = unpacked.itemsize
    run_at = exclusive_cumsum(blocks) * (bitpacking.BLOCK * size)
    if not bool(raw_tail.any()):  # (chunks of uneven counts: pylance's levels under lists)
        return Fixed(join(as_bytes(unpacked), run_at, counts * size), t)
    packed_n = np.where(raw_tail, full * bitpacking.BLOCK, counts) * size
    raw_at = (found.first + full * per_block) * size
    raw_n = raw_tail * found.tail * size
    return Fixed(alternate(as_bytes(unpacked), run_at, packed_n, as_bytes(words), raw_at, raw_n), t)


def pick_levels(
    enc: Any,
    data: memoryview,
    at: np.ndarray,
    sizes: np.ndarray,
    counts: np.ndarray,
    pick: np.ndarray,
    io: PageIO,
) -> np.ndarray | None:
    """The levels ``pick`` (sorted positions among all the chunks' levels, below their total) of
    chunks of out-of-line bitpacked levels, without unpacking the rest; None for other forms."""
    if enc.WhichOneof("compression") != "out_of_line_bitpacking":
        return None
    found = _out_of_line_chunks(enc.out_of_line_bitpacking, data, at, sizes, counts, io)
    if found is None or found.t not in (8, 16):
        return None
    chunk, offset = _locate(counts, pick)
    block, within = np.divmod(offset, bitpacking.BLOCK)
    raw = found.raw_tail[chunk] & (block == found.full[chunk])
    word_at = found.first[chunk] + block * found.per_block
    if not bool(raw.any()):
        return bitpacking.pick(found.words, found.t, found.w, word_at, within).astype(np.uint16, copy=False)
    out = np.empty(pick.size, bitpacking.DTYPES[found.t])
    packed = ~raw
    out[packed] = bitpacking.pick(found.words, found.t, found.w, word_at[packed], within[packed])
    out[raw] = found.words[word_at[raw] + within[raw]]
    return out.astype(np.uint16, copy=False)
