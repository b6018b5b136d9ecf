"""The shared codecs of :func:`general.codec`: a reused codec compresses to the bytes a fresh
``pa.Codec`` makes (the writer's output must not depend on which thread wrote a page, nor on how
many buffers the codec compressed before, on this thread or others), one codec per setting."""

from __future__ import annotations

import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pytest

from lance_table.file.compression import general
from lance_table.file.compression.general import codec, compress, decompress
from lance_table.file.pageio import PageIO
from lance_table.storage.sources import open_source

_SCHEMES = {"zstd": ("zstd", "<Q"), "lz4": ("lz4_raw", "<I")}


def _buffers() -> list[bytes]:
    """Buffers of the sizes small pages have (and a few larger), text-like and random."""
    rng = np.random.default_rng(7)
    out = [b"", b"a", bytes(300), os.urandom(200)]
    for size in (17, 90, 400, 1500, 70_000):
        words = rng.choice([b"click", b"view", b"purchase", b"user-12", b"\x00\x01"], size // 4)
        out.append(b"".join(words.tolist())[:size])
    return out


def _fresh(data: bytes, scheme: str, level: int | None) -> bytes:
    name, head = _SCHEMES[scheme]
    return struct.pack(head, len(data)) + pa.Codec(name, compression_level=level).compress(data, asbytes=True)


@pytest.mark.parametrize(("scheme", "level"), [("zstd", None), ("zstd", 1), ("zstd", 9), ("lz4", None)])
def test_reused_codec_writes_the_bytes_of_a_fresh_one(scheme: str, level: int | None) -> None:
    buffers = _buffers()
    for _ in range(3):  # the same codec again and again, buffers of every size in turn
        for data in buffers:
            got = compress(data, scheme, level=level)
            assert got == _fresh(data, scheme, level)
            assert bytes(decompress(got, scheme, len(data), _where())) == data


def test_reused_codecs_across_threads_write_the_same_bytes() -> None:
    buffers = _buffers() * 4
    expected = [_fresh(d, "zstd", None) for d in buffers] + [_fresh(d, "lz4", None) for d in buffers]
    jobs = [(d, "zstd") for d in buffers] + [(d, "lz4") for d in buffers]
    with ThreadPoolExecutor(4) as pool:  # the threads interleave their calls
        got = list(pool.map(lambda job: compress(job[0], job[1]), jobs * 3))
    assert got == expected * 3


def test_one_codec_per_setting_shared_by_threads() -> None:
    here = codec("zstd")
    assert codec("zstd") is here
    assert codec("zstd", 5) is not here
    assert codec("lz4_raw") is not here
    seen: list[pa.Codec] = []
    thread = threading.Thread(target=lambda: seen.append(codec("zstd")))
    thread.start()
    thread.join()
    assert seen[0] is here
    assert here.name == "zstd"
    assert codec("zstd", 5).compression_level == 5


def test_zstd_each_with_reused_codecs_frames_each_value_as_a_fresh_codec() -> None:
    values = [b"x" * 300, b"", b"short", bytes(range(256)) * 2, b"user-977 " * 40]
    offsets = np.cumsum([0] + [len(v) for v in values])
    data = np.frombuffer(b"".join(values), np.uint8)
    for _ in range(2):
        packed, at = general.zstd_each(data, offsets)
        for k, value in enumerate(values):
            frame = packed[at[k] : at[k + 1]].tobytes()
            if len(value) >= general.RAW_FRAME_BELOW:
                assert frame == _fresh(value, "zstd", None)
            assert bytes(decompress(frame, "zstd", len(value), _where())) == value


def _where() -> PageIO:
    return PageIO(open_source(b""), None, None, (), "test buffer")
