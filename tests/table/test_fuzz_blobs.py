"""Fuzzing blob v2 columns: damaged descriptors in the data file and damaged sidecar files.

Two small 2.2 datasets (one written by lance_table, one by pylance with external blobs below a
registered base path) hold blobs of every kind: inline, packed, dedicated, external, empty. Every
case damages one file: a field of one descriptor (kind, position, size, blob id, URI length and
bytes, the entry length) set to an extreme value, random byte flips in the descriptor pages, or a
sidecar truncated, extended, flipped, deleted or replaced by a directory. Then the dataset is read
(a scan, and every blob by ``take_blobs`` with external blobs allowed, whole and by range).
Allowed outcomes, as in the other fuzzers: a :class:`LanceTableError` naming the damaged file (or
the data file whose descriptor points at it), the original rows and bytes, or other values with the
original schema and row count (damage no reader can detect). Never another exception, more than
10 s, or much more memory than the honest reads.

The default run samples a few cases per kind (seconds); the ``stress`` test runs every targeted
edit and many random flips (``LANCE_TABLE_FUZZ_SCALE`` multiplies them).
"""

from __future__ import annotations

import collections
import os
import random
import shutil
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import LanceTableError
from lance_table.file.reader import LanceFileReader

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

CASE_SECONDS = 10.0
MEMORY_SLACK = 16 << 20
_SCALE = float(os.environ.get("LANCE_TABLE_FUZZ_SCALE", "1"))
STRESS_FLIPS = int(150 * _SCALE)
SAMPLE_PER_KIND = 12
KINDS = ("descriptor", "flip", "sidecar")
BLOB_METADATA = {
    "lance-encoding:blob": "true",
    "lance-encoding:blob-inline-size-threshold": "100",
    "lance-encoding:blob-dedicated-size-threshold": "3000",
}
SIZES = [0, 5, 100, 101, 500, 2999, 3001, 4000, 7, 250]
U64 = (0, 1, 2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1)
# Offsets in a descriptor entry (after its u32 length): kind u8, position u64, size u64,
# blob id u32, then the URI as u32 length and bytes.
FIELDS = {
    "kind": (0, "<B", (1, 2, 3, 4, 7, 255)),
    "position": (1, "<Q", U64),
    "size": (9, "<Q", U64),
    "blob_id": (17, "<I", (0, 1, 2, 3, 4, 7, 2**31, 2**32 - 1)),
    "uri_length": (21, "<I", (0, 1, 9, 255, 2**31, 2**32 - 1)),
}
URIS = (b"../", b"/etc/", b"http:", b"\xff\xfe", b"sub//", b"\x00")


@dataclass
class Base:
    name: str
    root: Path  # the dataset
    expected: dict[str, Any]
    peak: int


def _table(extra: list[Any] | None = None) -> pa.Table:
    values: list[Any] = [bytes([i]) * s for i, s in enumerate(SIZES)] + list(extra or [])
    field = pa.field("b", pa.large_binary(), nullable=False, metadata=BLOB_METADATA)
    ids = pa.array(range(len(values)), pa.int64())
    return pa.table({"id": ids, "b": pa.array(values, pa.large_binary())}).cast(
        pa.schema([pa.field("id", pa.int64()), field])
    )


def _write_pylance(root: Path) -> None:
    """pylance's blobs of every kind, two of them external below a registered base path."""
    from lance import DatasetBasePath
    from lance.blob import Blob, blob_array

    ext = root.parent / "ext"
    (ext / "sub").mkdir(parents=True)
    (ext / "sub" / "a.bin").write_bytes(bytes(range(256)) * 4)
    target = str(ext / "sub" / "a.bin")
    plain = _table()
    values = [*plain.column("b").to_pylist(), target, Blob.from_uri(target, position=3, size=50)]
    blobs = blob_array(values)
    table = pa.table({"id": pa.array(range(len(values)), pa.int64()), "b": blobs})
    bases = [DatasetBasePath(str(ext), name="ext", is_dataset_root=False, id=1)]
    lance.write_dataset(table, str(root), data_storage_version="2.2", initial_bases=bases)


def _read_all(root: Path) -> dict[str, Any]:
    ds = lt.dataset(root)
    table = ds.to_table()
    n = table.num_rows
    blobs = ds.take_blobs("b", indices=list(range(n)), allow_external=True)
    whole = [None if f is None else f.read() for f in blobs]
    heads = [None if f is None else f.read_range(0, min(3, f.size())) for f in blobs]
    return {"schema": table.schema, "rows": n, "table": table, "whole": whole, "heads": heads}


def _measure(fn: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> list[Base]:
    out = []
    for name in ("lance_table", "pylance"):
        root = tmp_path_factory.mktemp("fuzz-blobs") / name
        if name == "lance_table":
            lt.write_dataset(_table(), root, data_storage_version="2.2")
        else:
            _write_pylance(root)
        expected, peak = _measure(lambda root=root: _read_all(root))
        out.append(Base(name, root, expected, peak))
    return out


# ---------------------------------------------------------------------------------------------
# cases


@dataclass(frozen=True)
class Case:
    kind: str
    base: str
    file: str  # the damaged file, relative to the dataset root
    label: str
    mutate: Callable[[Path], None]


def _data_file(root: Path) -> str:
    (path,) = Path(root, "data").glob("*.lance")
    return str(path.relative_to(root))


def _entries(path: Path) -> tuple[list[int], list[tuple[int, int]]]:
    """Where each descriptor entry starts (its u32 length) in the blob column's pages, and the
    byte ranges of those pages."""
    meta = LanceFileReader(str(path)).metadata
    data = path.read_bytes()
    starts, spans = [], []
    for page in meta.columns[1].pages:
        at, end = int(page.buffer_offsets[0]), int(page.buffer_offsets[0] + page.buffer_sizes[0])
        spans.append((at, end))
        while at < end:
            starts.append(at)
            at += 4 + struct.unpack_from("<I", data, at)[0]
    return starts, spans


def _patch(offset: int, raw: bytes) -> Callable[[Path], None]:
    def mutate(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[offset : offset + len(raw)] = raw
        path.write_bytes(bytes(data))

    return mutate


def _descriptor_cases(base: Base) -> list[Case]:
    rel = _data_file(base.root)
    starts, _ = _entries(base.root / rel)
    data = (base.root / rel).read_bytes()
    cases = []
    for row, start in enumerate(starts):
        entry = start + 4
        for name, (offset, fmt, values) in FIELDS.items():
            for value in values:
                raw = struct.pack(fmt, value)
                cases.append(
                    Case(
                        "descriptor", base.name, rel, f"row {row} {name}={value}", _patch(entry + offset, raw)
                    )
                )
        for value in (0, 1, 24, 26, 2**32 - 1):
            cases.append(
                Case(
                    "descriptor",
                    base.name,
                    rel,
                    f"row {row} length={value}",
                    _patch(start, struct.pack("<I", value)),
                )
            )
        uri_length = struct.unpack_from("<I", data, entry + 21)[0]
        for uri in URIS if uri_length else ():
            raw = uri[:uri_length]
            cases.append(
                Case("descriptor", base.name, rel, f"row {row} uri={raw!r}", _patch(entry + 25, raw))
            )
    return cases


def _flip_cases(base: Base, count: int, rng: random.Random) -> list[Case]:
    rel = _data_file(base.root)
    _, spans = _entries(base.root / rel)
    cases = []
    for _ in range(count):
        lo, hi = rng.choice(spans)
        at, mask = rng.randrange(lo, hi), 1 << rng.randrange(8)

        def mutate(path: Path, at: int = at, mask: int = mask) -> None:
            data = bytearray(path.read_bytes())
            data[at] ^= mask
            path.write_bytes(bytes(data))

        cases.append(Case("flip", base.name, rel, f"byte {at} ^ {mask}", mutate))
    return cases


def _sidecar_cases(base: Base) -> list[Case]:
    def truncate(keep: float) -> Callable[[Path], None]:
        return lambda p: p.write_bytes(p.read_bytes()[: int(p.stat().st_size * keep)])

    def shorten(p: Path) -> None:
        p.write_bytes(p.read_bytes()[:-1])

    def extend(p: Path) -> None:
        p.write_bytes(p.read_bytes() + b"\x00" * 10)

    def flip(p: Path) -> None:
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0xFF
        p.write_bytes(bytes(data))

    def directory(p: Path) -> None:
        p.unlink()
        p.mkdir()

    edits = {"truncate 0": truncate(0), "truncate half": truncate(0.5), "one byte short": shorten}
    edits.update({"extended": extend, "flipped": flip, "deleted": Path.unlink, "a directory": directory})
    cases = []
    for sidecar in sorted(Path(base.root, "data").glob("*/*.blob")):
        rel = str(sidecar.relative_to(base.root))
        cases.extend(Case("sidecar", base.name, rel, label, edit) for label, edit in edits.items())
    return cases


def make_cases(bases: list[Base], flips: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for base in bases:
        cases += _descriptor_cases(base) + _flip_cases(base, flips, rng) + _sidecar_cases(base)
    return cases


# ---------------------------------------------------------------------------------------------
# running


class CaseFailure(AssertionError):
    pass


def run_case(case: Case, base: Base, work: Path) -> str:
    """Runs one case; returns its outcome (``error``, ``same`` or ``different``)."""
    root = work / f"case-{abs(hash((case.base, case.file, case.label))) % 10**12}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(base.root, root)
    case.mutate(root / case.file)
    result: dict[str, Any] = {}

    def body() -> None:
        started = time.perf_counter()
        try:
            result["value"], result["peak"] = _measure(lambda: _read_all(root))
        except BaseException as exc:  # judged below
            result["error"], result["peak"] = exc, 0
        result["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(CASE_SECONDS)
    where = f"{case.base} {case.kind} {case.file} [{case.label}]"
    if thread.is_alive():
        raise CaseFailure(f"{where}: still running after {CASE_SECONDS} s")
    shutil.rmtree(root, ignore_errors=True)
    if result["peak"] > 2 * base.peak + MEMORY_SLACK:
        raise CaseFailure(f"{where}: peak memory {result['peak']} bytes, honest reads need {base.peak}")
    error = result.get("error")
    if error is not None:
        if not isinstance(error, LanceTableError):
            raise CaseFailure(f"{where}: {type(error).__name__}: {error}") from error
        names = (Path(case.file).name, Path(_data_file(base.root)).name)
        if not any(name in str(error) for name in names):
            raise CaseFailure(f"{where}: {type(error).__name__} does not name the file: {error}") from error
        return "error"
    value, expected = result["value"], base.expected
    if value["schema"] != expected["schema"] or value["rows"] != expected["rows"]:
        raise CaseFailure(f"{where}: read {value['rows']} rows of {value['schema']}")
    same = value["table"].equals(expected["table"]) and value["whole"] == expected["whole"]
    return "same" if same and value["heads"] == expected["heads"] else "different"


def run_cases(cases: list[Case], bases: list[Base], work: Path) -> tuple[dict[str, Any], list[str]]:
    by_name = {b.name: b for b in bases}
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    failures = []
    for case in cases:
        try:
            counts[case.kind][run_case(case, by_name[case.base], work)] += 1
        except CaseFailure as exc:
            failures.append(str(exc))
            counts[case.kind]["FAILED"] += 1
    return {k: dict(v) for k, v in counts.items()}, failures


def test_fuzz_blobs_sample(bases: list[Base], tmp_path: Path) -> None:
    rng = random.Random(1)
    cases = make_cases(bases, flips=SAMPLE_PER_KIND, seed=1)
    by_kind = collections.defaultdict(list)
    for case in cases:
        by_kind[case.kind].append(case)
    sample = [
        c for kind in KINDS for c in rng.sample(by_kind[kind], min(SAMPLE_PER_KIND, len(by_kind[kind])))
    ]
    counts, failures = run_cases(sample, bases, tmp_path)
    assert not failures, "\n".join(failures[:40])
    assert set(counts) == set(KINDS)
    assert sum(c.get("error", 0) for c in counts.values()) > 0  # the damage is seen


@pytest.mark.stress
def test_fuzz_blobs_stress(bases: list[Base], tmp_path: Path) -> None:
    cases = make_cases(bases, flips=STRESS_FLIPS, seed=2)
    started = time.perf_counter()
    counts, failures = run_cases(cases, bases, tmp_path)
    print(f"\n{len(cases)} cases in {time.perf_counter() - started:.1f} s")
    for kind in KINDS:
        print(f"  {kind:10} {counts.get(kind, {})}")
    assert not failures, "\n".join(failures[:40])
