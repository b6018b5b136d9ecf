"""Fuzzing the file codec with damaged data files.

Every case damages a small honest file (random byte flips, truncations, or one integer field of the
footer, an offset table or a protobuf message set to an extreme value) and reads it whole, by
``take`` and by range. Allowed outcomes: a :class:`LanceTableError` naming the file, the original
rows, or (for damage no reader can detect, like flipped value bytes) other values of the right
schema and row count. Never another exception, more than 10 s, or much more memory than reading
the honest file needs.

The default run samples a few cases per kind of file; the ``stress`` tests run every footer edit and
many more sampled and random ones (``LANCE_TABLE_FUZZ_SCALE`` multiplies them), and
``test_fuzz_summary`` prints the outcome counts (``pytest -s``).
"""

from __future__ import annotations

import collections
import ctypes
import faulthandler
import os
import random
import struct
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import any_pb2
from google.protobuf.descriptor import FieldDescriptor

from lance_table._proto import encodings_v2_0_pb2, encodings_v2_1_pb2, file2_pb2, file_pb2
from lance_table.errors import LanceTableError
from lance_table.file import write_table
from lance_table.file.container import (
    FOOTER_SIZE,
    FOOTER_STRUCT,
    URL_ARRAY_ENCODING,
    URL_COLUMN_ENCODING,
    URL_PAGE_LAYOUT,
)
from lance_table.file.reader import LanceFileReader

ROWS = 300
TAKE = [299, 0, 5, 5, 150, 77, 201]
RANGE = (40, 260)
TIME_LIMIT = 10.0
# Peak memory on a damaged file may be this many times the honest read's, plus MEMORY_SLACK.
MEMORY_FACTOR = 2.0
MEMORY_SLACK = 8 << 20
EXTREMES = (0, 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, -1)
KINDS = ("lance_table-2.0", "pylance-2.0", "pylance-2.1", "pylance-2.2")
FAST_CASES = 45  # per kind of file, in the default run
# Under the stress marker (part of the full suite), per kind: random flips and truncations, and
# sampled protobuf integer edits. LANCE_TABLE_FUZZ_SCALE=5 gives the long run (about 5 minutes).
_SCALE = float(os.environ.get("LANCE_TABLE_FUZZ_SCALE", "1"))
STRESS_RANDOM = int(120 * _SCALE)
STRESS_PROTO = int(300 * _SCALE)
SCHEMA_FIELDS = "gb0.lance.file.Field."  # names of the cases that edit a field of the schema

_MESSAGES = {
    URL_ARRAY_ENCODING: encodings_v2_0_pb2.ArrayEncoding,
    URL_COLUMN_ENCODING: encodings_v2_0_pb2.ColumnEncoding,
    URL_PAGE_LAYOUT: encodings_v2_1_pb2.PageLayout,
}


def _source_table() -> pa.Table:
    rng = np.random.default_rng(7)
    n = ROWS
    words = ["lance", "columnar", "format", "fuzz", "page", "chunk", "buffer", "offset", "footer"]
    strings = [None if k % 7 == 0 else f"s{k}-" + "x" * (k % 13) for k in range(n)]
    lists = [None if k % 11 == 0 else list(range(k % 5)) for k in range(n)]
    struct_arr = pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int32)), pa.array([f"b{k % 17}" for k in range(n)])],
        names=["a", "b"],
    )
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * 4).astype(np.float32)), 4)
    return pa.table(
        {
            "i": pa.array(np.arange(n, dtype=np.int64) * 7 - 100),
            "f": pa.array(rng.standard_normal(n)),
            "s": pa.array(strings),
            "l": pa.array(lists, pa.list_(pa.int32())),
            "st": struct_arr,
            "v": vectors,
            "d": pa.array([("red", "green", "blue")[k % 3] for k in range(n)]),
            "r": pa.array(np.repeat(np.arange(n // 50, dtype=np.int32), 50)),
            "b": pa.array([None if k % 5 == 0 else k % 3 == 0 for k in range(n)]),
            # long strings with a shared vocabulary (FSST) and wide vectors (full-zip pages in 2.2)
            "t": pa.array([" ".join(words[j] for j in rng.integers(0, 9, 24)) + str(k) for k in range(n)]),
            "w": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 128).astype(np.float32)), 128),
        }
    )


def _write(kind: str, path: Path, table: pa.Table) -> None:
    if kind.startswith("lance_table"):
        write_table(path, table, page_size_bytes=4096)
        return
    import lance.file

    with lance.file.LanceFileWriter(str(path), table.schema, version=kind.split("-")[1]) as writer:
        writer.write_batch(table)


# -- the file's structure and its integer fields ------------------------------------------------


@dataclass
class _Layout:
    """Where the metadata blocks of a file are."""

    footer: list[int]
    cmo: list[tuple[int, int]]
    gbo: list[tuple[int, int]]


def _layout(data: bytes) -> _Layout:
    footer = list(FOOTER_STRUCT.unpack_from(data, len(data) - FOOTER_SIZE))
    _, cmo_start, gbo_start, n_global, n_cols = footer[:5]

    def table(start: int, n: int) -> list[tuple[int, int]]:
        return [struct.unpack_from("<QQ", data, start + 16 * i) for i in range(n)]

    return _Layout(footer, table(cmo_start, n_cols), table(gbo_start, n_global))


def _splice(data: bytes, layout: _Layout, blocks: dict[tuple[str, int], bytes]) -> bytes:
    """The file with some column metadata (``("col", i)``) or global buffers (``("gb", i)``)
    replaced: the new blocks, offset tables and footer are appended after the old metadata."""
    out = bytearray(data[:-FOOTER_SIZE])
    cmo, gbo = list(layout.cmo), list(layout.gbo)
    for (what, i), blob in blocks.items():
        target = cmo if what == "col" else gbo
        target[i] = (len(out), len(blob))
        out += blob
    cmo_start = len(out)
    for pos, size in cmo:
        out += struct.pack("<QQ", pos, size)
    gbo_start = len(out)
    for pos, size in gbo:
        out += struct.pack("<QQ", pos, size)
    footer = list(layout.footer)
    footer[1], footer[2] = cmo_start, gbo_start
    out += FOOTER_STRUCT.pack(*footer) + b"LANC"
    return bytes(out)


_SIGNED = {
    FieldDescriptor.TYPE_INT32: 32,
    FieldDescriptor.TYPE_SINT32: 32,
    FieldDescriptor.TYPE_SFIXED32: 32,
    FieldDescriptor.TYPE_ENUM: 32,
    FieldDescriptor.TYPE_INT64: 64,
    FieldDescriptor.TYPE_SINT64: 64,
    FieldDescriptor.TYPE_SFIXED64: 64,
}
_UNSIGNED = {
    FieldDescriptor.TYPE_UINT32: 32,
    FieldDescriptor.TYPE_FIXED32: 32,
    FieldDescriptor.TYPE_UINT64: 64,
    FieldDescriptor.TYPE_FIXED64: 64,
}


def _fits(fd: FieldDescriptor, value: int) -> bool:
    if fd.type in _SIGNED:
        bits = _SIGNED[fd.type]
        return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    return 0 <= value < 2 ** _UNSIGNED[fd.type]


Visit = Callable[[Any, FieldDescriptor, int | None], None]


def _walk(msg: Any, visit: Visit) -> bool:
    """Call ``visit(message, field, index)`` for every integer field of ``msg`` and the messages
    inside it (also those wrapped as bytes in an encoding); returns whether any was changed."""
    changed = False
    for fd in msg.DESCRIPTOR.fields:
        if fd.containing_oneof is not None and msg.WhichOneof(fd.containing_oneof.name) != fd.name:
            continue
        repeated = fd.is_repeated
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            if fd.message_type.GetOptions().map_entry:
                continue
            if repeated:
                for child in getattr(msg, fd.name):
                    changed |= _walk(child, visit)
            elif msg.HasField(fd.name):
                changed |= _walk(getattr(msg, fd.name), visit)
        elif fd.type in _SIGNED or fd.type in _UNSIGNED:
            if repeated:
                for k in range(len(getattr(msg, fd.name))):
                    changed |= bool(visit(msg, fd, k))
            else:
                changed |= bool(visit(msg, fd, None))
        elif fd.type == FieldDescriptor.TYPE_BYTES and msg.DESCRIPTOR.name == "DirectEncoding":
            wrapper = any_pb2.Any()
            wrapper.ParseFromString(msg.encoding)
            cls = _MESSAGES.get(wrapper.type_url)
            if cls is None:
                continue
            inner = cls()
            inner.ParseFromString(wrapper.value)
            if _walk(inner, visit):
                wrapper.value = inner.SerializeToString()
                msg.encoding = wrapper.SerializeToString()
                changed = True
    return changed


def _count_sites(msg: Any) -> list[FieldDescriptor]:
    fields: list[FieldDescriptor] = []
    _walk(msg, lambda m, fd, k: fields.append(fd))
    return fields


def _set_site(msg: Any, site: int, value: int) -> bool:
    """Set the ``site``-th integer field (in :func:`_walk` order) of ``msg`` to ``value``."""
    seen = [0]

    def visit(m: Any, fd: FieldDescriptor, k: int | None) -> bool:
        hit = seen[0] == site
        seen[0] += 1
        if not hit:
            return False
        if k is None:
            setattr(m, fd.name, value)
        else:
            getattr(m, fd.name)[k] = value
        return True

    return _walk(msg, visit)


# -- cases ---------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    make: Callable[[bytes], bytes]


def _footer_cases(data: bytes) -> Iterator[Case]:
    layout = _layout(data)
    widths = [64, 64, 64, 32, 32, 16, 16]
    for k, bits in enumerate(widths):
        for value in EXTREMES:
            if 0 <= value < 2**bits and value != layout.footer[k]:

                def make(d: bytes, k: int = k, value: int = value) -> bytes:
                    footer = list(layout.footer)
                    footer[k] = value
                    return d[:-FOOTER_SIZE] + FOOTER_STRUCT.pack(*footer) + b"LANC"

                yield Case(f"footer[{k}]={value}", make)
    tables = (("cmo", layout.footer[1], layout.cmo), ("gbo", layout.footer[2], layout.gbo))
    for name, start, entries in tables:
        for i in range(len(entries)):
            for half in (0, 1):
                for value in EXTREMES:
                    if value < 0:
                        continue
                    at = start + 16 * i + 8 * half

                    def make(d: bytes, at: int = at, value: int = value) -> bytes:
                        return d[:at] + struct.pack("<Q", value) + d[at + 8 :]

                    yield Case(f"{name}[{i}][{half}]={value}", make)


def _proto_cases(data: bytes) -> Iterator[Case]:
    layout = _layout(data)
    blocks: list[tuple[tuple[str, int], Any, bytes]] = []
    gb_pos, gb_size = layout.gbo[0]
    blocks.append((("gb", 0), file_pb2.FileDescriptor, data[gb_pos : gb_pos + gb_size]))
    for i, (pos, size) in enumerate(layout.cmo):
        blocks.append((("col", i), file2_pb2.ColumnMetadata, data[pos : pos + size]))
    for key, cls, raw in blocks:
        msg = cls()
        msg.ParseFromString(raw)
        for site, fd in enumerate(_count_sites(msg)):
            for value in EXTREMES:
                if not _fits(fd, value):
                    continue

                def make(d: bytes, key: Any = key, cls: Any = cls, raw: bytes = raw, site: int = site,
                         value: int = value) -> bytes:  # fmt: skip
                    msg = cls()
                    msg.ParseFromString(raw)
                    _set_site(msg, site, value)
                    return _splice(d, _layout(d), {key: msg.SerializeToString()})

                yield Case(f"{key[0]}{key[1]}.{fd.full_name}#{site}={value}", make)


def _random_cases(data: bytes, seed: int, n: int) -> Iterator[Case]:
    rng = random.Random(seed)
    size = len(data)
    for k in range(n):
        if k % 4 == 3:
            cut = rng.randrange(0, size)
            yield Case(f"truncate@{cut}", lambda d, cut=cut: d[:cut])
            continue
        # half the flips hit the metadata region, which is small but holds every pointer
        lo = _layout(data).footer[0] if k % 2 else 0
        flips = [(rng.randrange(lo, size), rng.randrange(256)) for _ in range(rng.randint(1, 4))]

        def make(d: bytes, flips: list[tuple[int, int]] = flips) -> bytes:
            out = bytearray(d)
            for pos, value in flips:
                out[pos] = value
            return bytes(out)

        yield Case("flip@" + ",".join(f"{p}:{v}" for p, v in flips), make)


def all_cases(data: bytes, seed: int, n_random: int, max_proto: int | None = None) -> list[Case]:
    """Every footer edit, the protobuf edits (a seeded sample of ``max_proto`` of them if given)
    and ``n_random`` random flips and truncations."""
    proto = list(_proto_cases(data))
    if max_proto is not None and len(proto) > max_proto:
        proto = random.Random(seed).sample(proto, max_proto)
    return [*_footer_cases(data), *proto, *_random_cases(data, seed, n_random)]


# -- running a case -----------------------------------------------------------------------------


@dataclass
class Stats:
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    worst_ratio: float = 0.0
    worst_ratio_case: str = ""
    slowest: float = 0.0
    slowest_case: str = ""
    honest_peak: int = 0


SUMMARY: dict[str, Stats] = collections.defaultdict(Stats)
_BASE_POOL = pa.default_memory_pool()


def _reads(path: Path) -> list[pa.Table]:
    reader = LanceFileReader(path)
    out = [reader.read_all()]
    out.append(reader.take([i for i in TAKE if i < reader.num_rows]))
    out.append(reader.read_range(*RANGE))
    return out


def _measured(path: Path) -> tuple[str | list[pa.Table], int, float]:
    """Run the reads under a watchdog; the outcome (an error message or the tables), the peak
    memory (Python/numpy via tracemalloc plus the Arrow pool) and the time taken."""
    pool = pa.proxy_memory_pool(_BASE_POOL)
    # Arrow buffers cached across cases may outlive this case: the pool must outlive them.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(pool))
    pa.set_memory_pool(pool)
    tracemalloc.reset_peak()
    faulthandler.dump_traceback_later(TIME_LIMIT * 3, exit=True)
    start = time.perf_counter()
    try:
        got: str | list[pa.Table] = _reads(path)
    except LanceTableError as exc:
        got = str(exc)
    finally:
        elapsed = time.perf_counter() - start
        faulthandler.cancel_dump_traceback_later()
        pa.set_memory_pool(_BASE_POOL)
    peak = tracemalloc.get_traced_memory()[1] + pool.max_memory()
    return got, peak, elapsed


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, list[pa.Table], int]]:
    """Each kind of file: its bytes, what reading it gives, and the peak memory that takes."""
    table = _source_table()
    root = tmp_path_factory.mktemp("fuzz")
    out = {}
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for kind in KINDS:
            path = root / f"{kind}.lance"
            _write(kind, path, table)
            _measured(path)  # warm caches
            got, peak, _ = _measured(path)
            assert not isinstance(got, str), got
            assert got[0].equals(table.cast(got[0].schema))
            out[kind] = (path.read_bytes(), got, peak)
            SUMMARY[kind].honest_peak = peak
    finally:
        if started:
            tracemalloc.stop()
    return out


def _check(kind: str, case: Case, data: bytes, expected: list[pa.Table], honest: int, where: Path) -> None:
    path = where / "case.lance"
    path.write_bytes(case.make(data))
    got, peak, elapsed = _measured(path)
    stats = SUMMARY[kind]
    ratio = peak / honest
    if ratio > stats.worst_ratio:
        stats.worst_ratio, stats.worst_ratio_case = ratio, case.name
    if elapsed > stats.slowest:
        stats.slowest, stats.slowest_case = elapsed, case.name
    assert elapsed < TIME_LIMIT, f"{kind} {case.name}: {elapsed:.1f} s"
    assert peak <= MEMORY_FACTOR * honest + MEMORY_SLACK, f"{kind} {case.name}: peak {peak} vs {honest}"
    if isinstance(got, str):
        assert str(path) in got, f"{kind} {case.name}: error does not name the file: {got}"
        # errors the reader's last-resort net translated (no check caught the damage first)
        stats.outcomes["error (safety net)" if " while decoding: " in got else "error"] += 1
        return
    # A schema field moved to another parent can still be a valid schema (of other fields): the
    # one kind of damage that may change the schema.
    schema_edit = case.name.startswith(SCHEMA_FIELDS)
    for table, want in zip(got, expected):
        if not schema_edit:
            assert table.schema.equals(want.schema), f"{kind} {case.name}: schema {table.schema}"
        assert table.num_rows == want.num_rows, f"{kind} {case.name}: {table.num_rows} rows"
        _validate(table)
    if not got[0].schema.equals(expected[0].schema):
        stats.outcomes["different schema"] += 1
        return
    same = all(t.equals(w) for t, w in zip(got, expected))
    stats.outcomes["original" if same else "different values"] += 1


def _binary_type(t: pa.DataType) -> pa.DataType:
    """``t`` with strings as binaries (flipped bytes may make invalid UTF-8, which no reader checks)."""
    if pa.types.is_string(t):
        return pa.binary()
    if pa.types.is_large_string(t):
        return pa.large_binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_binary_type(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_binary_type(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_binary_type(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_binary_type(t.value_type)), t.list_size)
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, _binary_type(t.value_type))
    return t


def _validate(table: pa.Table) -> None:
    """Full Arrow validation (offsets in bounds, ...), except for the UTF-8 check."""
    for column in table.columns:
        for chunk in column.chunks:
            target = _binary_type(chunk.type)
            chunk.validate()
            (chunk.view(target) if target != chunk.type else chunk).validate(full=True)


def _run(kind: str, corpus: Any, cases: list[Case], where: Path) -> None:
    data, expected, honest = corpus[kind]
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for case in cases:
            try:
                _check(kind, case, data, expected, honest, where)
            except AssertionError:
                raise
            except Exception as exc:
                raise AssertionError(f"{kind} {case.name}: {type(exc).__name__}: {exc}") from exc
    finally:
        if started:
            tracemalloc.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz(kind: str, corpus: Any, tmp_path: Path) -> None:
    data = corpus[kind][0]
    cases = all_cases(data, seed=1, n_random=FAST_CASES)
    picked = random.Random(kind).sample(cases, FAST_CASES)
    _run(kind, corpus, picked, tmp_path)


@pytest.mark.stress
@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_stress(kind: str, corpus: Any, tmp_path: Path) -> None:
    data = corpus[kind][0]
    _run(kind, corpus, all_cases(data, seed=2, n_random=STRESS_RANDOM, max_proto=STRESS_PROTO), tmp_path)


@pytest.mark.stress
def test_fuzz_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """Print the outcome counts of the cases run so far (``pytest -s`` shows them)."""
    lines = ["", "fuzz summary (kind: cases by outcome; worst peak memory ratio; slowest case)"]
    for kind, stats in SUMMARY.items():
        total = sum(stats.outcomes.values())
        counts = ", ".join(f"{k} {v}" for k, v in sorted(stats.outcomes.items()))
        lines.append(
            f"{kind}: {total} cases ({counts}); honest peak {stats.honest_peak / 2**20:.1f} MiB, "
            f"worst ratio {stats.worst_ratio:.2f} ({stats.worst_ratio_case}); "
            f"slowest {stats.slowest:.2f} s ({stats.slowest_case})"
        )
    with capsys.disabled():
        print("\n".join(lines))
