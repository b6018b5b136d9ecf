"""Fuzzing legacy (0.1) Lance data files: their footer, ``Metadata`` and schema-copy messages, page
tables, page statistics pages and any byte, read on their own and through a dataset.

Every case damages the one data file of a small legacy dataset (written by lance_table or by
pylance, three row groups, page statistics included) and then reads the file on its own (whole, by
``take``, by range, its statistics and the pruning verdicts they give) and the dataset (scan, filtered
scan and count, ``take``). Allowed outcomes: a :class:`LanceTableError` naming the file, the original
rows, or other values of the right schema and row count (damage no reader can detect). Through the
dataset the schema is always the manifest's. Never another exception, more than 10 s, or much more
memory than the honest reads need.

The default run samples a few cases per kind of file; the ``stress`` test runs every targeted edit
and many more sampled and random ones (``LANCE_TABLE_FUZZ_SCALE`` multiplies them).
"""

from __future__ import annotations

import ctypes
import faulthandler
import functools
import os
import random
import struct
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from test_fuzz import _count_sites, _fits, _set_site, _validate

import lance_table as lt
from lance_table._proto import file_pb2, table_pb2
from lance_table.errors import LanceTableError
from lance_table.file.legacy import LegacyFileReader, LegacyFileWriter
from lance_table.file.legacy.container import (
    LEGACY_FOOTER_SIZE,
    LEGACY_FOOTER_STRUCT,
    LEGACY_LENGTH_PREFIX,
    read_legacy_metadata,
)
from lance_table.file.legacy.prune import may_match
from lance_table.storage.sources import open_source
from lance_table.table.fragment import READERS
from lance_table.table.operations import write as write_operation

ROWS = 300
GROUP = 100
TAKE = [299, 0, 5, 5, 150, 77, 201]
RANGE = (40, 260)
TIME_LIMIT = 10.0
MEMORY_FACTOR = 2.0
MEMORY_SLACK = 8 << 20
EXTREMES = (0, 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, -1, -(2**63))
KINDS = ("lance_table-legacy", "pylance-legacy")
FAST_CASES = 24  # per kind of file, in the default run
_SCALE = float(os.environ.get("LANCE_TABLE_FUZZ_SCALE", "1"))
STRESS_RANDOM = int(100 * _SCALE)
STRESS_PROTO = int(100 * _SCALE)
STRESS_TARGETED = int(250 * _SCALE)
FILTER = "i >= 50 AND s >= 's1' AND x < 0.5"
# pruning questions asked of the statistics of every field that has them
PROBES = (("=", 0), ("<", 5), (">=", "s2"), ("is_null", None), ("between", (1, 2)), ("in", [3, "a"]))
SCHEMA_EDIT = "manifest."
LOGICAL_TYPES = (
    "int8", "int32", "uint64", "double", "float", "bool", "string", "large_binary", "struct", "list",
    "large_list", "fixed_size_list:float:4", "fixed_size_list:int64:1000000000", "dict:string:int32:false",
    "dict:int64:int8:false", "decimal:128:7:2", "date32:day", "timestamp:us:-", "null", "fixed_size_binary:3",
    "map", "bogus",
)  # fmt: skip  # cases that edit the file's schema copy may change its own schema


def _source_table() -> pa.Table:
    rng = np.random.default_rng(3)
    n = ROWS
    return pa.table(
        {
            "i": pa.array(np.arange(n, dtype=np.int64) * 3 - 100),
            "x": pa.array(rng.random(n)),
            "s": pa.array([None if k % 7 == 0 else f"s{k % 23}-" + "y" * (k % 9) for k in range(n)]),
            "b": pa.array(rng.random(n) < 0.4),
            "l": pa.array([list(range(k % 4)) for k in range(n)], pa.list_(pa.int32())),
            "st": pa.StructArray.from_arrays(
                [pa.array(np.arange(n, dtype=np.int32)), pa.array([f"t{k % 5}" for k in range(n)])],
                names=["a", "t"],
            ),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4),
            "d": pa.array([("red", "green", "blue")[k % 3] for k in range(n)]).dictionary_encode(),
        }
    )


def _write(kind: str, uri: Path, table: pa.Table) -> Path:
    if kind.startswith("lance_table"):
        # Dataset writes take no row group size: the real writer, with smaller groups.
        class SmallGroups(LegacyFileWriter):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs, max_rows_per_group=GROUP)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(write_operation, "LegacyFileWriter", SmallGroups)
            lt.write_dataset(table, uri, data_storage_version="legacy")
    else:
        import lance

        lance.write_dataset(table, str(uri), data_storage_version="legacy", max_rows_per_group=GROUP)
    (fragment,) = lt.dataset(uri).manifest.fragments
    (data_file,) = fragment.files
    return uri / "data" / data_file.path


# -- where things are in a legacy file ------------------------------------------------------------


@dataclass
class _Layout:
    metadata_position: int
    metadata: bytes  # the serialized Metadata
    manifest_position: int
    manifest: bytes  # the serialized schema copy
    cells: list[int]  # byte offsets of every int64 of both page tables
    stats_pages: list[tuple[int, int]]  # (position, values) of every statistics page


def _layout(data: bytes) -> _Layout:
    meta = read_legacy_metadata(open_source(data))
    pos = meta.metadata_position
    (length,) = LEGACY_LENGTH_PREFIX.unpack_from(data, pos)
    metadata = data[pos + 4 : pos + 4 + length]
    mpos = meta.manifest_position
    (mlen,) = LEGACY_LENGTH_PREFIX.unpack_from(data, mpos)
    ids = [f.id for f in meta.fields]
    span = (max(ids) - min(ids) + 1) * meta.num_batches
    cells = [meta.page_table_position + 8 * k for k in range(2 * span)]
    stats_pages = []
    if meta.stats is not None:
        n_stats = max(f.id for f in meta.stats.fields) + 1
        at = meta.stats.page_table_position
        cells += [at + 8 * k for k in range(2 * n_stats)]
        for k in range(n_stats):
            page, values = struct.unpack_from("<qq", data, at + 16 * k)
            if values:
                stats_pages.append((page, values))
    return _Layout(pos, metadata, mpos, data[mpos + 4 : mpos + 4 + mlen], cells, stats_pages)


def _spliced(data: bytes, layout: _Layout, metadata: Any, manifest: bytes | None) -> bytes:
    """The file with a new Metadata (and schema copy) appended after the old ones."""
    out = bytearray(data[:-LEGACY_FOOTER_SIZE])
    if manifest is not None:
        metadata.manifest_position = len(out)
        out += LEGACY_LENGTH_PREFIX.pack(len(manifest)) + manifest
    meta_pos = len(out)
    blob = metadata.SerializeToString()
    out += LEGACY_LENGTH_PREFIX.pack(len(blob)) + blob
    _, major, minor, magic = LEGACY_FOOTER_STRUCT.unpack_from(data, len(data) - LEGACY_FOOTER_SIZE)
    out += LEGACY_FOOTER_STRUCT.pack(meta_pos, major, minor, magic)
    return bytes(out)


# -- cases ----------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    make: Callable[[bytes], bytes]


def _put(at: int, fmt: str, value: int) -> Callable[[bytes], bytes]:
    size = struct.calcsize(fmt)
    return lambda d: d[:at] + struct.pack(fmt, value) + d[at + size :]


def _targeted_cases(data: bytes) -> Iterator[Case]:
    """Footer fields, every page table cell and the first values of every statistics page."""
    layout = _layout(data)
    footer = len(data) - LEGACY_FOOTER_SIZE
    for value in EXTREMES:
        yield Case(f"footer.metadata_position={value}", _put(footer, "<q", value))
    for k, value in ((1, 1), (1, -1), (2, 3), (2, 1), (2, -1)):
        yield Case(f"footer[{k}]={value}", _put(footer + 8 + 2 * (k - 1), "<h", value))
    for at in layout.cells:
        for value in EXTREMES:
            yield Case(f"cell@{at}={value}", _put(at, "<q", value))
    for page, values in layout.stats_pages:
        for value in EXTREMES:
            yield Case(f"stats@{page}={value}", _put(page, "<q", value))
        if values > 1:
            yield Case(f"stats@{page}+8=-1", _put(page + 8, "<q", -1))


def _proto_cases(data: bytes) -> Iterator[Case]:
    """Every integer field of the Metadata and of the schema copy, set to extreme values."""
    layout = _layout(data)
    for what, cls, raw in (
        ("metadata", file_pb2.Metadata, layout.metadata),
        ("manifest", table_pb2.Manifest, layout.manifest),
    ):
        msg = cls()
        msg.ParseFromString(raw)
        for site, fd in enumerate(_count_sites(msg)):
            for value in EXTREMES:
                if not _fits(fd, value):
                    continue

                def make(d: bytes, what: str = what, cls: Any = cls, raw: bytes = raw, site: int = site,
                         value: int = value) -> bytes:  # fmt: skip
                    edited = cls()
                    edited.ParseFromString(raw)
                    _set_site(edited, site, value)
                    metadata = file_pb2.Metadata()
                    metadata.ParseFromString(layout.metadata)
                    if what == "metadata":
                        return _spliced(d, layout, edited, None)
                    return _spliced(d, layout, metadata, edited.SerializeToString())

                yield Case(f"{what}.{fd.full_name}#{site}={value}", make)


def _type_cases(data: bytes) -> Iterator[Case]:
    """Every field of the schema copy and of the statistics schema given another logical type."""
    layout = _layout(data)
    metadata = file_pb2.Metadata()
    metadata.ParseFromString(layout.metadata)
    manifest = table_pb2.Manifest()
    manifest.ParseFromString(layout.manifest)
    sites = [("manifest", k) for k in range(len(manifest.fields))]
    sites += [("metadata", k) for k in range(len(metadata.statistics.schema))]
    for what, k in sites:
        for logical in LOGICAL_TYPES:

            def make(d: bytes, what: str = what, k: int = k, logical: str = logical) -> bytes:
                meta = file_pb2.Metadata()
                meta.ParseFromString(layout.metadata)
                if what == "metadata":
                    meta.statistics.schema[k].logical_type = logical
                    return _spliced(d, layout, meta, None)
                man = table_pb2.Manifest()
                man.ParseFromString(layout.manifest)
                man.fields[k].logical_type = logical
                return _spliced(d, layout, meta, man.SerializeToString())

            yield Case(f"{what}.fields[{k}].logical_type={logical}", make)


def _random_cases(data: bytes, seed: int, n: int) -> Iterator[Case]:
    rng = random.Random(seed)
    size = len(data)
    tail = _layout(data).cells[0]  # the page tables, statistics, schema copy and metadata
    for k in range(n):
        if k % 4 == 3:
            cut = rng.randrange(0, size)
            yield Case(f"truncate@{cut}", lambda d, cut=cut: d[:cut])
            continue
        lo = tail if k % 2 else 0
        flips = [(rng.randrange(lo, size), rng.randrange(256)) for _ in range(rng.randint(1, 4))]

        def make(d: bytes, flips: list[tuple[int, int]] = flips) -> bytes:
            out = bytearray(d)
            for pos, value in flips:
                out[pos] = value
            return bytes(out)

        yield Case("flip@" + ",".join(f"{p}:{v}" for p, v in flips), make)


def all_cases(
    data: bytes, seed: int, n_random: int, max_proto: int | None = None, max_targeted: int | None = None
) -> list[Case]:
    """The targeted and protobuf edits (seeded samples of at most ``max_targeted`` and ``max_proto``
    of them if given) and ``n_random`` random flips and truncations."""
    proto = list(_proto_cases(data))
    if max_proto is not None and len(proto) > max_proto:
        proto = random.Random(seed).sample(proto, max_proto)
    targeted = [*_targeted_cases(data), *_type_cases(data)]
    if max_targeted is not None and len(targeted) > max_targeted:
        targeted = random.Random(seed).sample(targeted, max_targeted)
    return [*targeted, *proto, *_random_cases(data, seed, n_random)]


# -- running a case -------------------------------------------------------------------------------


def _file_reads(path: Path) -> list[Any]:
    reader = LegacyFileReader(path)
    out: list[Any] = [reader.read_all()]
    out.append(reader.take([i for i in TAKE if i < reader.num_rows]))
    out.append(reader.read_range(*RANGE))
    stats = reader.statistics()
    verdicts = []
    if stats is not None:
        for fid in sorted(stats.fields):
            for op, value in PROBES:
                verdicts.append(may_match(stats, fid, op, value).tolist())
    out.append(verdicts)
    return out


def _dataset_reads(root: Path) -> list[Any]:
    READERS._items.clear()  # the file changed under its name (only tests do that)
    ds = lt.dataset(root)
    return [
        ds.to_table(),
        ds.to_table(filter=FILTER),
        ds.count_rows(FILTER),
        ds.take([i for i in TAKE if i < ROWS]),
    ]


def _measured(fn: Callable[[], list[Any]]) -> tuple[str | list[Any], int, float]:
    base = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(base)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(pool))  # Arrow buffers may outlive the case
    pa.set_memory_pool(pool)
    tracemalloc.reset_peak()
    faulthandler.dump_traceback_later(TIME_LIMIT * 3, exit=True)
    start = time.perf_counter()
    try:
        got: str | list[Any] = fn()
    except LanceTableError as exc:
        got = str(exc)
    finally:
        elapsed = time.perf_counter() - start
        faulthandler.cancel_dump_traceback_later()
        pa.set_memory_pool(base)
    return got, tracemalloc.get_traced_memory()[1] + pool.max_memory(), elapsed


@dataclass
class Base:
    path: Path  # the dataset's one data file
    data: bytes
    file_reads: list[Any]
    dataset_reads: list[Any]
    peak: int


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Base]:
    table = _source_table()
    out = {}
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for kind in KINDS:
            if kind.startswith("pylance"):
                pytest.importorskip("lance")
            root = tmp_path_factory.mktemp("fuzz_legacy") / kind
            path = _write(kind, root, table)
            reader = LegacyFileReader(path)
            assert reader.metadata.num_batches == ROWS // GROUP
            assert reader.statistics() is not None
            read_file = functools.partial(_file_reads, path)
            read_dataset = functools.partial(_dataset_reads, root)
            _measured(read_file), _measured(read_dataset)  # warm caches
            files, peak_f, _ = _measured(read_file)
            dsr, peak_d, _ = _measured(read_dataset)
            assert not isinstance(files, str) and not isinstance(dsr, str), (files, dsr)
            assert dsr[0].equals(table.cast(dsr[0].schema))
            out[kind] = Base(path, path.read_bytes(), files, dsr, max(peak_f, peak_d))
    finally:
        if started:
            tracemalloc.stop()
    return out


def _compare(kind: str, case: Case, got: list[Any], want: list[Any], schema_may_change: bool) -> None:
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, pa.Table):
            assert isinstance(g, pa.Table)
            if not schema_may_change:
                assert g.schema.equals(w.schema), f"{kind} {case.name} read {k}: schema {g.schema}"
            if k != 1:  # a filtered scan may match other rows when values changed
                assert g.num_rows == w.num_rows, f"{kind} {case.name} read {k}: {g.num_rows} rows"
            _validate(g)


def _check(kind: str, base: Base, case: Case) -> None:
    damaged = case.make(base.data)
    base.path.write_bytes(damaged)
    try:
        for what, fn, want in (
            ("file", lambda: _file_reads(base.path), base.file_reads),
            ("dataset", lambda: _dataset_reads(base.path.parent.parent), base.dataset_reads),
        ):
            got, peak, elapsed = _measured(fn)
            assert elapsed < TIME_LIMIT, f"{kind} {case.name} ({what}): {elapsed:.1f} s"
            limit = MEMORY_FACTOR * base.peak + MEMORY_SLACK
            assert peak <= limit, f"{kind} {case.name} ({what}): peak {peak} vs {base.peak}"
            if isinstance(got, str):
                assert base.path.name in got, (
                    f"{kind} {case.name} ({what}): error does not name the file: {got}"
                )
                continue
            # only the file's own schema copy says what the file alone reads as
            _compare(kind, case, got, want, what == "file" and case.name.startswith(SCHEMA_EDIT))
    finally:
        base.path.write_bytes(base.data)


def _run(kind: str, base: Base, cases: list[Case]) -> None:
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for case in cases:
            try:
                _check(kind, base, case)
            except AssertionError:
                raise
            except Exception as exc:
                raise AssertionError(f"{kind} {case.name}: {type(exc).__name__}: {exc}") from exc
    finally:
        if started:
            tracemalloc.stop()
        READERS._items.clear()


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_legacy(kind: str, bases: dict[str, Base]) -> None:
    base = bases[kind]
    cases = all_cases(base.data, seed=1, n_random=FAST_CASES)
    _run(kind, base, random.Random(kind).sample(cases, FAST_CASES))


@pytest.mark.stress
@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_legacy_stress(kind: str, bases: dict[str, Base]) -> None:
    base = bases[kind]
    cases = all_cases(
        base.data, seed=2, n_random=STRESS_RANDOM, max_proto=STRESS_PROTO, max_targeted=STRESS_TARGETED
    )
    _run(kind, base, cases)


def test_cases_cover_every_part_of_a_legacy_file(bases: dict[str, Base]) -> None:
    names = [c.name for c in all_cases(bases[KINDS[0]].data, seed=1, n_random=8)]
    for prefix in ("footer", "cell@", "stats@", "metadata.", "manifest.", "flip@", "truncate@"):
        assert any(n.startswith(prefix) for n in names), prefix
