"""When the 2.1/2.2 writer trains an FSST table for a page of strings, and when it skips it.

Training is the costly part of FSST (rounds of parsing and counting); the writer first sizes the
cheap candidates (zstd chunks in 2.2, a dictionary, plain bytes) and asks the training sample's
statistics (:func:`fsst_train.savings_estimate`) whether FSST could still beat them. These tests
count the trainings, check that a skipped training changes no choice and no byte, and that the
estimate stays above what training really saves.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.compression import fsst_encode, fsst_train
from lance_table.file.v2_1 import values_encode


def _fixed(raw: np.ndarray, count: int) -> pa.Array:
    """``count`` strings of equal length cut from ``raw``."""
    size = raw.size // count
    offsets = np.arange(count + 1, dtype=np.int32) * size
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(raw.tobytes())]
    )


def _letters(rng: np.random.Generator, n: int) -> pa.Array:
    """Random lowercase letters, 20 a string: zstd (Huffman on 26 letters) beats FSST."""
    return _fixed(rng.integers(97, 123, 20 * n, dtype=np.uint8), n)


def _digraphs(rng: np.random.Generator, n: int) -> pa.Array:
    """Strings of 200 two-letter pairs: FSST (a pair per code) beats zstd."""
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    pairs = np.stack([letters[rng.integers(0, 26, 200)], letters[rng.integers(0, 26, 200)]], 1)
    return _fixed(pairs[rng.integers(0, 200, 10 * n)].reshape(-1), n)


_VOCAB = np.array(["the", "of", "and", "to", "in", "is", "was", "that", "for", "on", "with", "from"])


def _words(rng: np.random.Generator, n: int) -> pa.Array:
    """Sentences of a small vocabulary (3 to 11 words)."""
    picks = [_VOCAB[rng.integers(0, _VOCAB.size, int(rng.integers(3, 12)))] for _ in range(n)]
    return pa.array([" ".join(words) for words in picks])


def _base64(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array([base64.b64encode(rng.bytes(30)).decode() for _ in range(n)])


def _hex(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array([rng.bytes(16).hex() for _ in range(n)])


def _urls(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(
        [f"https://www.example.com/item/{rng.integers(1e6)}?id={rng.integers(1e9)}" for _ in range(n)]
    )


def _bytes(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array([rng.bytes(int(rng.integers(5, 60))) for _ in range(n)], pa.binary())


KINDS: dict[str, Callable[[np.random.Generator, int], pa.Array]] = {
    "letters": _letters,
    "digraphs": _digraphs,
    "words": _words,
    "base64": _base64,
    "hex": _hex,
    "urls": _urls,
    "bytes": _bytes,
}


@pytest.fixture
def trainings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the tables trained (their input sizes)."""
    seen: list[int] = []
    real = fsst_train.train

    def counting(data: np.ndarray, offsets: np.ndarray, **kwargs: object) -> fsst_encode.SymbolTable:
        seen.append(int(offsets[-1] - offsets[0]))
        return real(data, offsets, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fsst_train, "train", counting)
    return seen


def _encode(values: pa.Array, v2_2: bool) -> tuple[str, list[bytes]]:
    """The compression chosen for a page and its chunk bytes (a few chunks, spread)."""
    chosen = values_encode.compress_values(values, "x", None, v2_2)
    n = len(values)
    step = max(1, n // 5)
    chunks = [b"".join(chosen.chunk(i, min(n, i + 100))) for i in range(0, n, step)]
    return str(chosen.encoding.WhichOneof("compression")), chunks


@pytest.mark.parametrize("name", sorted(KINDS))
def test_savings_estimate_is_above_what_training_saves(name: str) -> None:
    rng = np.random.default_rng(5)
    data, offsets = fsst_encode.arrow_buffers(KINDS[name](rng, 20_000))
    sample = fsst_train.training_sample(data, offsets)
    table = fsst_train.train(data, offsets, sample=sample)
    out, _ = fsst_encode.compress(table, *sample)
    assert fsst_train.savings_estimate(*sample) >= sample[0].size - out.size


@pytest.mark.parametrize("name", sorted(KINDS))
def test_savings_estimate_stopped_early_keeps_every_decision(name: str) -> None:
    """With a test of the saving (``wins``), the counting stops once the test's answer is known;
    the value then returned answers it as the full estimate does, at every threshold."""
    rng = np.random.default_rng(11)
    data, offsets = fsst_encode.arrow_buffers(KINDS[name](rng, 20_000))
    sample = fsst_train.training_sample(data, offsets)
    full = fsst_train.savings_estimate(*sample)
    for threshold in [*np.linspace(0, sample[0].size, 41).astype(int).tolist(), full, full + 1]:
        asked: list[int] = []

        def wins(saving: int, threshold: int = threshold, asked: list[int] = asked) -> bool:
            asked.append(saving)
            return saving >= threshold

        got = fsst_train.savings_estimate(*sample, wins=wins)
        assert (got >= threshold) == (full >= threshold), threshold
        assert len(asked) <= 2 * (fsst_encode.MAX_LEN - 2)


def test_savings_estimate_on_letters_stops_after_the_4_grams(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random letters in 2.2 (zstd wins): the writer's test is answered by the byte pairs and
    their 3- and 4-grams; the longer k-grams are never counted."""
    counted: list[int] = []
    real = np.bincount

    def bincount(x: np.ndarray, *args: object, **kwargs: object) -> np.ndarray:
        counted.append(x.size)
        return real(x, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fsst_train.np, "bincount", bincount)
    values = _letters(np.random.default_rng(2), 10_000)
    assert _encode(values, True)[0] == "general"
    assert 1 <= len(counted) <= 3  # (the full estimate counts pairs and 3- to 8-grams: 7 passes)


def test_train_on_a_given_sample_is_train() -> None:
    data, offsets = fsst_encode.arrow_buffers(_words(np.random.default_rng(1), 5000))
    alone = fsst_train.train(data, offsets)
    given = fsst_train.train(data, offsets, sample=fsst_train.training_sample(data, offsets))
    assert alone.to_bytes() == given.to_bytes()


@pytest.mark.parametrize(
    ("name", "v2_2", "trained", "kind"),
    [
        ("letters", True, 0, "general"),  # zstd beats what FSST could reach: never trained
        ("base64", True, 0, "general"),
        ("bytes", True, 0, "variable"),  # nothing compresses random bytes
        ("bytes", False, 0, "variable"),
        ("letters", False, 1, "fsst"),  # in 2.1 FSST is the only rival of plain bytes
        ("digraphs", True, 1, "fsst"),  # FSST beats zstd
    ],
)
def test_training_only_when_fsst_can_win(
    name: str, v2_2: bool, trained: int, kind: str, trainings: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page is trained for only when the sample's statistics say FSST may beat the other
    candidates, and comes out as it did when a table was always trained (and then lost)."""
    values = KINDS[name](np.random.default_rng(2), 10_000)
    chosen = _encode(values, v2_2)
    assert (chosen[0], len(trainings)) == (kind, trained)
    # forced to train (an estimate that FSST saves everything): the same choice, the same bytes
    monkeypatch.setattr(fsst_train, "savings_estimate", lambda sample, offsets, wins=None: sample.size)
    assert _encode(values, v2_2) == chosen
    assert len(trainings) == trained + 1


@pytest.mark.interop
def test_skipped_training_pages_read_back_in_pylance(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    rng = np.random.default_rng(4)
    table = pa.table({name: make(rng, 5000).cast(pa.binary()) for name, make in KINDS.items()})
    lt.write_dataset(table, tmp_path / "t", data_storage_version="2.2")
    assert lance.dataset(tmp_path / "t").to_table().equals(table)
    assert lt.dataset(tmp_path / "t").to_table().equals(table)


@pytest.mark.parametrize("longest", [40, 511, 512, 3000])
def test_training_sample_takes_whole_strings_or_windows_of_long_ones(longest: int) -> None:
    """The training sample holds whole strings of at most a segment (511 bytes), and windows of a
    segment inside longer ones: each sampled string is one of the page's strings, or a piece of
    one of exactly a segment's length (pages without long strings draw no windows at all)."""
    rng = np.random.default_rng(longest)
    lengths = rng.integers(1, longest + 1, 3000)
    strings = [bytes(rng.integers(97, 123, int(k), dtype=np.uint8)) for k in lengths]
    data, offsets = fsst_encode.arrow_buffers(pa.array(strings, pa.binary()))
    sample, sample_offsets = fsst_train.training_sample(data, offsets)
    assert 16_000 <= sample.size <= 16_384 + 511
    pieces = [sample[a:b].tobytes() for a, b in pairwise(sample_offsets.tolist())]
    whole = set(strings)
    for piece in pieces:
        if piece not in whole:
            assert len(piece) == fsst_encode.SEGMENT and longest > fsst_encode.SEGMENT
            assert any(piece in s for s in strings if len(s) > fsst_encode.SEGMENT)
    assert fsst_train.training_sample(data, offsets)[0].tobytes() == sample.tobytes()  # (seeded)
