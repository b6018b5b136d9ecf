"""FSST symbol-table training (the tables :mod:`fsst_encode` compresses with).

**Training** follows FSST's (Boncz, Neumann, Leis, VLDB 2020) as pylance implements it: a sample of
about 16 KiB is parsed with the current table, the symbols used and the concatenations of
neighbouring symbols are counted (``bincount`` over code pairs), every candidate's gain is its
count times its length (single bytes boosted 8x), the best 255 become the next table; after six
rounds the table that saved the most bytes on the sample wins. The training is not byte-identical
to pylance's (which samples at random), but compresses in the same league.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lance_table._numpy import sorted_unique
from lance_table.file.compression.fsst import ESCAPE
from lance_table.file.compression.fsst_encode import (
    MASKS,
    MAX_LEN,
    MAX_SYMBOLS,
    MIN_INPUT,
    SEGMENT,
    SymbolTable,
    as_bytes,
    compress,
    matcher,
    next_words,
    parse,
    segments,
)

SAMPLE_TARGET = 1 << 14
# pylance's rounds ("sample fractions"): a candidate needs a count of 5 * frac / 128; the table
# made in the last round counts no pairs, and comes from the best table's counts.
_ROUNDS = (8, 38, 68, 98, 108, 128)
# the least count on its sample of a symbol in a trained table (the last round's 5 * 128 / 128)
_MIN_COUNT = 5
# k-grams are counted in 2**_BITS bins by Fibonacci hashing (a collision only adds counts up)
_HASH = np.uint64(0x9E3779B97F4A7C15)
_BITS = 16


def _sample(
    raw: np.ndarray, offsets: np.ndarray, target: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """About ``target`` bytes of randomly chosen strings (at most one segment of each), as bytes
    and offsets from 0."""
    starts, ends = offsets[:-1], offsets[1:]
    total = int(offsets[-1] - offsets[0])
    if total > target:
        n = starts.size
        # random rows (a few more than the average length says are needed), in random order
        draw = min(n, int(target * n / max(total, 1) * 2) + 64)
        order = rng.permutation(n) if draw >= n // 4 else _distinct(rng.integers(0, n, draw), rng)
        lengths = np.minimum(ends - starts, SEGMENT)[order]
        take = int(np.searchsorted(np.cumsum(lengths), target)) + 1
        chosen = np.sort(order[:take])
        starts, ends = starts[chosen], ends[chosen]
        long = ends - starts > SEGMENT
        if long.any():  # a random window of each long string (the rng is not used after this)
            shift = (rng.random(int(long.sum())) * (ends - starts - SEGMENT + 1)[long]).astype(np.int64)
            starts = starts.copy()
            starts[long] += shift
            ends = np.minimum(ends, starts + SEGMENT)
    lengths = ends - starts
    new_offsets = np.concatenate([[0], np.cumsum(lengths)])
    index = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(int(new_offsets[-1]))
    return raw[index], new_offsets


def savings_estimate(
    sample: np.ndarray, sample_offsets: np.ndarray, wins: Callable[[int], bool] | None = None
) -> int:
    """About the most bytes (input bytes minus codes) a table trained on the sample can save on
    it, from its byte-pair and k-gram counts alone: a cheap test of whether FSST can win at all,
    meant to err high (it is above the trained table's saving on every kind of data tried).

    A code of k bytes saves k - 1, so the saving is C2 + C3 + ... + C8, Ck being the number of
    codes of k or more bytes. C2 is taken from the greedy parse whose only longer symbols are the
    255 most frequent byte pairs: in a run of r positions where one of them starts, the parse
    starts ceil(r / 2) codes. Ck (k >= 3) is at most the occurrences of the k-byte prefixes of the
    table's longer symbols: at most 255 k-grams, each seen at least 5 times (training keeps no
    rarer symbol), and never more than C(k-1). The k-grams are counted hashed into 2**16 bins,
    which can only add counts up. Escapes, which cost a byte each, are left out.

    ``wins`` (a test that a larger saving can only pass more easily) stops the counting as soon as
    its answer on the estimate is known: the value returned is then one on the same side of the
    test (a bound of the estimate from above that fails it, or a sum of its first terms that
    passes it), not the estimate itself. On random letters the pairs, 3- and 4-grams show that FSST
    cannot beat zstd: the k-grams up to 8 are never counted.
    """
    n = sample.size
    if n < 2:
        return 0
    offsets = np.asarray(sample_offsets, np.int64)
    lengths = np.diff(offsets)
    if int(lengths.max()) <= SEGMENT:  # (what a sample of a large page holds) a string per segment
        left = np.repeat(offsets[1:], lengths) - np.arange(n)  # bytes to the end of each one's segment
    else:
        starts, ends = segments(offsets)
        left = np.repeat(ends, ends - starts) - np.arange(n)
    # an aligned copy: every k below reads all the words again, faster than through the strided view
    words = np.ascontiguousarray(next_words(sample))
    pairs = (words & np.uint64(0xFFFF)).view(np.intp)  # (below 2**16: the same numbers as intp)
    two = left >= 2
    counts = np.bincount(pairs[two], minlength=1 << 16)
    top = _top(counts)
    if not top.size:
        return 0
    starts_pair = two & (counts >= top.min())[pairs]
    edges = np.diff(starts_pair.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    runs = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    bound = int(((runs + 1) // 2).sum())
    saving = bound
    shift = np.uint64(64 - _BITS)
    for k in range(3, MAX_LEN + 1):
        if wins is not None:  # each term still to come (k to MAX_LEN) is at most the last bound
            if wins(saving):
                return saving
            most = saving + bound * (MAX_LEN + 1 - k)
            if not wins(most):
                return most
        keys = ((words & MASKS[k]) * _HASH) >> shift
        counts = np.bincount(keys.view(np.intp)[left >= k], minlength=1 << _BITS)
        bound = min(bound, int(_top(counts).sum()))
        if not bound:
            break
        saving += bound
    return saving


def _top(counts: np.ndarray) -> np.ndarray:
    """The largest 255 (or fewer) counts of at least :data:`_MIN_COUNT`."""
    counts = counts[counts >= _MIN_COUNT]
    if counts.size > MAX_SYMBOLS:
        counts = np.partition(counts, counts.size - MAX_SYMBOLS)[-MAX_SYMBOLS:]
    return counts


def _distinct(draws: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The distinct values of ``draws`` in a random order."""
    unique = sorted_unique(draws)
    return unique[rng.permutation(unique.size)]


def _candidates(
    tok_val: np.ndarray, tok_len: np.ndarray, ids: np.ndarray, firsts: np.ndarray, new: np.ndarray, frac: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate symbols (values, lengths, gains) from one parse of the sample.

    ``ids`` are the tokens of the parse (symbol codes, or 256 + byte for an escape), ``firsts``
    the token of each one's first byte alone, ``new`` whether a token starts a segment. A token
    counts as itself and, when longer than a byte, as its first byte; neighbours count as their
    concatenation and (when the second is longer than a byte) as the first one extended by one
    byte. A count's gain is count times length, single bytes 8 times that; counts below
    ``5 * frac / 128`` are dropped, and the last round (``frac`` 128) counts no neighbours.
    """
    tokens = tok_len.size
    multi = tok_len[ids] > 1
    singles = np.bincount(ids, minlength=tokens) + np.bincount(firsts[multi], minlength=tokens)
    used = np.flatnonzero(singles)
    vals = [tok_val[used]]
    lens = [tok_len[used]]
    counts = [singles[used]]
    boost = [np.where(tok_len[used] == 1, 8, 1)]
    if frac < 128:
        pair = ~new[1:] & (tok_len[ids[:-1]] < MAX_LEN)
        left = ids[:-1][pair]
        for right, ok in ((ids[1:][pair], None), (firsts[1:][pair], multi[1:][pair])):
            key = left * tokens + right if ok is None else left[ok] * tokens + right[ok]
            seen, seen_counts = np.unique(key, return_counts=True)
            x, y = seen // tokens, seen % tokens
            length = np.minimum(tok_len[x] + tok_len[y], MAX_LEN)
            vals.append((tok_val[x] | (tok_val[y] << (tok_len[x] * 8).astype(np.uint64))) & MASKS[length])
            lens.append(length)
            counts.append(seen_counts)
            boost.append(np.ones(seen.size, np.int64))
    val = np.concatenate(vals)
    length = np.concatenate(lens).astype(np.int64)
    count = np.concatenate(counts).astype(np.int64)
    keep = count >= max(1, (5 * frac) // 128)
    gain = count * length * np.concatenate(boost)
    val, length, gain = val[keep], length[keep], gain[keep]
    # the same symbol from several counts: add up its gains
    order = np.lexsort((length, val))
    val, length, gain = val[order], length[order], gain[order]
    first = np.ones(val.size, bool)
    first[1:] = (val[1:] != val[:-1]) | (length[1:] != length[:-1])
    at = np.flatnonzero(first)
    return val[at], length[at], np.add.reduceat(gain, at) if at.size else gain


def _select(
    val: np.ndarray, length: np.ndarray, gain: np.ndarray, terminator: int
) -> tuple[np.ndarray, np.ndarray]:
    """The best 255 candidates by gain, at most one of 3+ bytes per 3-byte prefix, and none of
    2+ bytes that contains the terminator byte (pylance's encoder marks string ends with it)."""
    byte_of = (val[:, None] >> (8 * np.arange(MAX_LEN, dtype=np.uint64))[None, :]) & np.uint64(0xFF)
    inside = np.arange(MAX_LEN)[None, :] < length[:, None]
    bad = (length > 1) & ((byte_of == terminator) & inside).any(axis=1)
    val, length, gain = val[~bad], length[~bad], gain[~bad]
    order = np.lexsort((val, length, -gain))
    val, length = val[order], length[order]
    others = np.arange(val.size, dtype=np.uint64) + np.uint64(1 << 24)  # all distinct
    prefix = np.where(length >= 3, val & np.uint64(0xFFFFFF), others)
    _, first = np.unique(prefix, return_index=True)
    keep = np.sort(first)[:MAX_SYMBOLS]
    return val[keep], length[keep]


def _finalize(symbols: np.ndarray, lengths: np.ndarray, terminator: int) -> SymbolTable:
    """Order the symbols as pylance's encoder does: 2-byte symbols that begin a longer symbol
    (there are ``suffix_lim`` of them), the other 2-byte symbols, then by length 3 to 8, and the
    single bytes last. Decoders do not care; it keeps the tables alike."""
    lengths = lengths.astype(np.int64)
    two = np.flatnonzero(lengths == 2)
    long_prefixes = symbols[lengths > 2] & np.uint64(0xFFFF)
    has_suffix = np.isin(symbols[two], long_prefixes)
    order = np.concatenate(
        [
            two[has_suffix],
            two[~has_suffix][::-1],
            *(np.flatnonzero(lengths == n) for n in range(3, MAX_LEN + 1)),
            np.flatnonzero(lengths == 1),
        ]
    )
    return SymbolTable(
        symbols[order].astype(np.uint64),
        lengths[order].astype(np.uint8),
        terminator=terminator,
        suffix_lim=int(has_suffix.sum()),
    )


def _tokens(symbols: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Value and length of every token: the symbols at their codes, byte b at 256 + b."""
    tok_val = np.zeros(512, np.uint64)
    tok_len = np.zeros(512, np.int64)
    tok_val[: symbols.size] = symbols
    tok_len[: lengths.size] = lengths
    tok_val[256:] = np.arange(256, dtype=np.uint64)
    tok_len[256:] = 1
    return tok_val, tok_len


def training_sample(
    data: bytes | memoryview | np.ndarray,
    offsets: np.ndarray,
    *,
    sample_bytes: int = SAMPLE_TARGET,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The strings :func:`train` learns from: about ``sample_bytes`` of them, chosen at random
    (seeded), at most one segment of each, as bytes and offsets from 0."""
    return _sample(as_bytes(data), np.asarray(offsets, np.int64), sample_bytes, np.random.default_rng(seed))


def train(
    data: bytes | memoryview | np.ndarray,
    offsets: np.ndarray,
    *,
    sample_bytes: int = SAMPLE_TARGET,
    seed: int = 0,
    sample: tuple[np.ndarray, np.ndarray] | None = None,
) -> SymbolTable:
    """A symbol table for strings ``data[offsets[i]:offsets[i+1]]``, trained on a random sample
    of about ``sample_bytes`` of them (seeded: the same input gives the same table).

    ``sample`` is that sample when the caller already drew it (:func:`training_sample` with the
    same arguments), so that it is drawn once."""
    offsets = np.asarray(offsets, np.int64)
    if offsets.size < 2:
        return _finalize(np.zeros(0, np.uint64), np.zeros(0, np.uint8), 0)
    if sample is None:
        sample = training_sample(data, offsets, sample_bytes=sample_bytes, seed=seed)
    return _train_on(*sample)


def _train_on(sample: np.ndarray, sample_offsets: np.ndarray) -> SymbolTable:
    """The rounds of :func:`train` on its sample."""
    terminator = int(np.argmin(np.bincount(sample, minlength=256)))
    symbols, lengths = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    best_gain = -(1 << 62)
    best: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    seg_starts, _ = segments(sample_offsets)
    for frac in _ROUNDS:
        tok_val, tok_len = _tokens(symbols, lengths)
        positions, codes = parse(matcher(symbols, lengths), sample, sample_offsets)
        escaped = codes == ESCAPE
        ids = np.where(escaped, 256 + sample[positions].astype(np.int64), codes.astype(np.int64))
        gain = int(tok_len[ids].sum()) - ids.size - int(escaped.sum())
        new = np.isin(positions, seg_starts)
        firsts = 256 + sample[positions].astype(np.int64)
        if gain >= best_gain:
            best_gain, best = gain, (tok_val, tok_len, ids, firsts, new)
        if frac == _ROUNDS[-1]:
            break
        symbols, lengths = _select(*_candidates(tok_val, tok_len, ids, firsts, new, frac), terminator)
    # as FSST does: a last table from the best one's counts of single symbols only
    assert best is not None
    symbols, lengths = _select(*_candidates(*best, 128), terminator)
    return _finalize(symbols, lengths, terminator)


def encode(
    data: bytes | memoryview | np.ndarray, offsets: np.ndarray, *, min_input: int = MIN_INPUT, seed: int = 0
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Train a table on the strings and compress them: ``(table bytes, compressed, offsets)``.

    Below ``min_input`` bytes (pylance's 32 KiB) the table has its switch off and the strings are
    stored as they are, as pylance does.
    """
    offsets = np.asarray(offsets, np.int64)
    size = int(offsets[-1] - offsets[0]) if offsets.size else 0
    table = train(data, offsets, seed=seed) if size >= min_input else SymbolTable.raw()
    out, out_offsets = compress(table, data, offsets)
    return table.to_bytes(), out, out_offsets
