"""``general`` values of the Lance 2.1/2.2 writer: the one buffer of each mini-block chunk of
another encoding compressed with zstd or LZ4 (a field's ``lance-encoding:compression``, 2.2's
chunks of short strings, wide values), compressed on threads a few chunks per task."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lance_table._parallel import map_parts
from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.compression import general
from lance_table.file.v2_1.value_kinds import MiniBlockValues, VariableValues

# General compression takes chunks of at most this many bytes before compression. A take
# decompresses a whole chunk for each row it wants, a scan pays zstd's fixed cost per chunk
# (reading its Huffman tables). At 5M rows of 20-letter text, 8 KiB against 16 KiB: a 1000-row
# take of the column 27 against 47 ms CPU (pylance's take of its FSST column: 25 ms), the
# column's projection 7% more CPU (354 against 330 ms; pylance's: 385 ms), the same file size.
# 16 KiB made the take of every column slower than pylance's (1.13-1.19x). Chunk value counts
# are powers of two, so a chunk holds 4-8 KiB.
GENERAL_CHUNK_BYTES = 8 * 1024
# chunks compressed per task on the pool
_COMPRESS_GROUP = 64
# a page of fewer bytes before compression is compressed on the calling thread (about 2 ms of
# zstd): a 20k-row file of 20-letter strings (400 KB) handed two tasks of 64 chunks to the pool,
# whose hand-offs cost a tenth of such a file's writing, while the file's other columns were
# being encoded on the other cores anyway
_INLINE_COMPRESS_BYTES = 1 << 20
#: the protobuf number of each general compression scheme
SCHEME_PB = {"zstd": pb.COMPRESSION_ALGORITHM_ZSTD, "lz4": pb.COMPRESSION_ALGORITHM_LZ4}


@dataclass
class GeneralValues(MiniBlockValues):
    """``general``: the one buffer of each chunk of ``inner`` compressed with LZ4 or ZSTD.

    The chunks are planned with bounds of their compressed sizes (they take as many values as
    fit :data:`GENERAL_CHUNK_BYTES`), then compressed together on threads (:meth:`prepare`) and
    kept until the page is assembled."""

    inner: MiniBlockValues = field(default_factory=lambda: VariableValues(None, 1, 0))
    scheme: str = "zstd"
    #: the most bytes of ``inner`` a chunk takes before compression
    chunk_bytes: int = GENERAL_CHUNK_BYTES
    _cache: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def chunk_values_limit(self) -> int:
        return self.inner.chunk_values_limit()

    def chunk_aim(self) -> int | None:
        return None  # compressed chunks take as many values as fit (see ``fits``)

    def fits(self, start: int, stop: int) -> bool:
        return sum(self.inner.sizes(start, stop)) <= self.chunk_bytes

    def _compressed(self, start: int, stop: int) -> bytes:
        key = (start, stop)
        got = self._cache.get(key)
        if got is None:
            (raw,) = self.inner.chunk(start, stop)
            got = self._cache[key] = general.compress(raw, self.scheme)
        return got

    def size_bounds(self, start: int, stop: int) -> list[int] | None:
        return [general.compressed_bound(sum(self.inner.sizes(start, stop)), self.scheme)]

    def prepare(self, ranges: list[tuple[int, int]]) -> None:
        wanted = set(ranges)
        self._cache = {key: got for key, got in self._cache.items() if key in wanted}
        todo = [r for r in ranges if r not in self._cache]
        self._cache.update(zip(todo, compress_all([self.inner.chunk(*r)[0] for r in todo], self.scheme)))

    def compressed_variable(self) -> tuple[VariableValues, int] | None:
        inner = self.inner
        return (inner, self.chunk_bytes) if type(inner) is VariableValues else None

    def compress(self, raws: list[memoryview]) -> list[bytes]:
        return compress_all(raws, self.scheme)

    def sizes(self, start: int, stop: int) -> list[int]:
        return [len(self._compressed(start, stop))]

    def chunk(self, start: int, stop: int) -> list[bytes]:
        return [self._compressed(start, stop)]

    def estimate(self, n: int, samples: int = 4) -> int:
        """About how many bytes the page's chunks take: a few chunk-sized runs of values, evenly
        spread, compressed and scaled to the whole."""
        total = sum(self.inner.sizes(0, n))
        if total <= samples * self.chunk_bytes:
            return len(general.compress(self.inner.chunk(0, n)[0], self.scheme)) if n else 0
        raw = packed = 0
        for start in np.linspace(0, n - 1, samples).astype(np.int64).tolist():
            stop = start + 1
            step = 1
            while stop < n and self.fits(start, min(n, stop + step)):
                stop = min(n, stop + step)
                step *= 2
            (chunk,) = self.inner.chunk(start, stop)
            raw += len(chunk)
            packed += len(general.compress(chunk, self.scheme))
        return int(total * packed / max(raw, 1))


def compress_all(raws: list[bytes] | list[memoryview], scheme: str) -> list[bytes]:
    """Each buffer compressed on its own, a few groups of them per task on the pool (a task per
    buffer would cost more than compressing it), or all on this thread when they are few bytes
    (see :data:`_INLINE_COMPRESS_BYTES`)."""

    def compress(group: list[bytes] | list[memoryview]) -> list[bytes]:
        return [general.compress(raw, scheme) for raw in group]

    if len(raws) <= _COMPRESS_GROUP or sum(memoryview(r).nbytes for r in raws) < _INLINE_COMPRESS_BYTES:
        return compress(raws)

    groups = [raws[i : i + _COMPRESS_GROUP] for i in range(0, len(raws), _COMPRESS_GROUP)]
    return [got for part in map_parts(compress, groups) for got in part]


def general_values(
    inner: MiniBlockValues, scheme: str, chunk_bytes: int = GENERAL_CHUNK_BYTES
) -> GeneralValues:
    """``inner`` (of one buffer per chunk) with each chunk's buffer compressed by ``scheme``
    (``zstd`` or ``lz4``), chunks of at most ``chunk_bytes`` before compression."""
    enc = pb.CompressiveEncoding()
    enc.general.compression.scheme = SCHEME_PB[scheme]
    enc.general.values.CopyFrom(inner.encoding)
    return GeneralValues(enc, 1, inner.max_value_bytes, inner, scheme, chunk_bytes)
