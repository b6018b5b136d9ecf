"""Fuzzing the metadata files of a dataset: manifests (with their inline transaction), deletion files
(``.arrow`` and ``.bin``), ``.txn`` files, the version hint and tag files.

Every case damages one file of a small dataset (written by lance_table or by pylance) with a byte
flip, a truncation or a targeted edit (every integer field of a manifest or transaction set to
extreme values, tag JSON values replaced), then reads the dataset. Allowed outcomes:

* ``error``: a :class:`LanceTableError` whose message names the damaged file;
* ``same``: the original rows;
* ``different``: other values with the original schema (damage no reader can detect, such as a
  flipped bit inside a compressed value or a renamed column).

Anything else fails: another exception type, a case running past 10 s (a watchdog thread), or a
peak memory (tracemalloc, which sees numpy, plus pyarrow's pool maximum) above about twice what
reading the honest dataset needs.

The default test runs a seeded sample in a few seconds; the ``stress`` variant runs every targeted
edit and many more random ones, and prints the outcome counts per file kind.
"""

from __future__ import annotations

import collections
import json
import random
import shutil
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf.descriptor import FieldDescriptor

import lance_table as lt
from lance_table._proto import table_pb2, transaction_pb2
from lance_table.errors import LanceTableError
from lance_table.format.manifest_file import MANIFEST_FOOTER, MANIFEST_FOOTER_VERSION, MANIFEST_MAGIC
from lance_table.storage import open_storage
from lance_table.table import versions

CASE_SECONDS = 10.0
EXTREMES = (0, 1, 2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1)
MEMORY_SLACK = 16 << 20  # bytes allowed on top of twice the honest peak
KINDS = ("manifest", "arrow", "bin", "txn", "hint", "tag")

_INT32 = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32}
_INT64 = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64}
_UINT32 = {FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32}
_UINT64 = {FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64}
_LIMITS = {
    **{t: 2**31 - 1 for t in _INT32},
    FieldDescriptor.TYPE_ENUM: 2**31 - 1,
    **{t: 2**63 - 1 for t in _INT64},
    **{t: 2**32 - 1 for t in _UINT32},
    **{t: 2**64 - 1 for t in _UINT64},
}


# ---------------------------------------------------------------------------------------------
# base datasets


@dataclass
class Base:
    """A small dataset and what reading it honestly gives."""

    name: str
    root: Path
    expected: dict[str, Any]
    schema: pa.Schema
    peak: int  # tracemalloc peak of the honest reads


def _rows(n: int) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    return pa.table({"id": ids, "s": pa.array([f"r{i}" for i in range(n)]), "x": ids.astype(np.float64) / 7})


def _write_lance_table(root: Path) -> None:
    ds = lt.write_dataset(_rows(12_000), root, max_rows_per_file=6_000)
    ds.delete("id < 100")  # 100 rows: an Arrow deletion file
    ds.delete("id >= 6000 AND id < 11500")  # 5500 rows: a roaring bitmap
    ds.tags.create("t1", ds.version)


def _write_pylance(root: Path) -> None:
    lance = pytest.importorskip("lance")
    ds = lance.write_dataset(_rows(12_000), str(root), max_rows_per_file=6_000)
    ds.delete("id < 100")
    ds.delete("id >= 6000 AND id < 11500")
    ds = lance.dataset(str(root))
    ds.tags.create("t1", ds.version)


def _read_all(root: Path, tag: bool, txn: bool) -> dict[str, Any]:
    """The operations every case runs; tables are sorted by id so that order does not matter."""
    out: dict[str, Any] = {}
    ds = lt.dataset(root)
    out["count"] = ds.count_rows()
    table = ds.to_table()
    out["schema"] = table.schema
    out["table"] = table.sort_by("id") if "id" in table.column_names else table
    out["filtered"] = ds.count_rows("id >= 50 AND id < 7000")
    n = out["count"]
    indices = sorted({0, n // 3, n // 2, n - 1}) if n > 0 else []
    out["take"] = ds.take(indices)
    out["versions"] = [v["operation"] for v in ds.versions()]
    if tag:
        out["tags"] = sorted((name, t.version) for name, t in ds.tags.list().items())
        out["tag_count"] = lt.dataset(root, version="t1").count_rows("id >= 0")
    if txn:
        storage = open_storage(str(root))
        for entry in versions.list_versions(storage):
            mf = versions.read_manifest_file(storage, entry)
            # read the _transactions/*.txn file, not the inline copy
            t = versions.read_transaction(storage, replace(mf, transaction=None))
            out.setdefault("txns", []).append(None if t is None else t.operation.name)
    return out


def _measure(fn: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> list[Base]:
    out = []
    for name, write in (("lance_table", _write_lance_table), ("pylance", _write_pylance)):
        root = tmp_path_factory.mktemp("fuzz-base") / name
        write(root)
        expected, peak = _measure(lambda root=root: _read_all(root, True, True))
        out.append(Base(name, root, expected, expected["schema"], peak))
    return out


# ---------------------------------------------------------------------------------------------
# mutations


@dataclass(frozen=True)
class Case:
    kind: str
    base: str
    file: str  # relative path of the damaged file
    label: str
    mutate: Callable[[bytes], bytes]


def _flip(pos: int, mask: int) -> Callable[[bytes], bytes]:
    def mutate(data: bytes) -> bytes:
        if not data:
            return data
        out = bytearray(data)
        out[pos % len(out)] ^= mask
        return bytes(out)

    return mutate


def _truncate(keep: float) -> Callable[[bytes], bytes]:
    return lambda data: data[: int(len(data) * keep)]


def _split_manifest(data: bytes) -> tuple[Any, bytes | None, bytes | None]:
    (pos,) = struct.unpack_from("<Q", data, len(data) - 16)
    (n,) = struct.unpack_from("<I", data, pos)
    pb = table_pb2.Manifest()
    pb.ParseFromString(data[pos + 4 : pos + 4 + n])

    def section(offset: int) -> bytes:
        (length,) = struct.unpack_from("<I", data, offset)
        return data[offset + 4 : offset + 4 + length]

    index = section(pb.index_section) if pb.HasField("index_section") else None
    txn = section(pb.transaction_section) if pb.HasField("transaction_section") else None
    return pb, index, txn


def _join_manifest(pb: Any, index: bytes | None, txn: bytes | None) -> bytes:
    """The framing of ``format/manifest.py``: sections, the manifest, the footer."""
    out = bytearray()
    if index is not None:
        pb.index_section = len(out)
        out += struct.pack("<I", len(index)) + index
    if txn is not None:
        pb.transaction_section = len(out)
        out += struct.pack("<I", len(txn)) + txn
    body = pb.SerializeToString()
    pos = len(out)
    out += struct.pack("<I", len(body)) + body
    out += MANIFEST_FOOTER.pack(pos, *MANIFEST_FOOTER_VERSION) + MANIFEST_MAGIC
    return bytes(out)


Step = tuple[str, int | None]  # (field name, index in a repeated field or None)


def _int_slots(msg: Any, prefix: tuple[Step, ...] = ()) -> Iterator[tuple[tuple[Step, ...], int]]:
    """(path, largest allowed value) of every integer field set in ``msg``, recursively.

    Offsets of the manifest's own sections are left out: the framing rewrites them.
    """
    for fd, value in msg.ListFields():
        if fd.name in ("index_section", "transaction_section"):
            continue
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            if fd.message_type.GetOptions().map_entry:
                continue
            if fd.is_repeated:
                for i, item in enumerate(value):
                    yield from _int_slots(item, (*prefix, (fd.name, i)))
            else:
                yield from _int_slots(value, (*prefix, (fd.name, None)))
        elif fd.type in _LIMITS:
            if fd.is_repeated:
                for i in range(len(value)):
                    yield (*prefix, (fd.name, i)), _LIMITS[fd.type]
            else:
                yield (*prefix, (fd.name, None)), _LIMITS[fd.type]


def _set(msg: Any, path: tuple[Step, ...], value: int) -> None:
    for name, index in path[:-1]:
        msg = getattr(msg, name) if index is None else getattr(msg, name)[index]
    name, index = path[-1]
    if index is None:
        setattr(msg, name, value)
    else:
        getattr(msg, name)[index] = value


def _label(path: tuple[Step, ...], value: int) -> str:
    return ".".join(n if i is None else f"{n}[{i}]" for n, i in path) + f"={value}"


def _manifest_edits(data: bytes) -> Iterator[tuple[str, Callable[[bytes], bytes]]]:
    pb, _, txn = _split_manifest(data)
    for path, limit in _int_slots(pb):
        for value in EXTREMES:
            if value <= limit:

                def edit(d: bytes, path: tuple[Step, ...] = path, value: int = value) -> bytes:
                    m, i, t = _split_manifest(d)
                    _set(m, path, value)
                    return _join_manifest(m, i, t)

                yield _label(path, value), edit
    if txn is None:
        return
    t_pb = transaction_pb2.Transaction.FromString(txn)
    for path, limit in _int_slots(t_pb):
        for value in EXTREMES:
            if value <= limit:

                def edit_txn(d: bytes, path: tuple[Step, ...] = path, value: int = value) -> bytes:
                    m, i, t = _split_manifest(d)
                    tp = transaction_pb2.Transaction.FromString(t or b"")
                    _set(tp, path, value)
                    return _join_manifest(m, i, tp.SerializeToString())

                yield "inline." + _label(path, value), edit_txn


def _txn_edits(data: bytes) -> Iterator[tuple[str, Callable[[bytes], bytes]]]:
    for path, limit in _int_slots(transaction_pb2.Transaction.FromString(data)):
        for value in EXTREMES:
            if value <= limit:

                def edit(d: bytes, path: tuple[Step, ...] = path, value: int = value) -> bytes:
                    tp = transaction_pb2.Transaction.FromString(d)
                    _set(tp, path, value)
                    return tp.SerializeToString()

                yield _label(path, value), edit


_JSON_VALUES: tuple[Any, ...] = (0, -1, True, 1.5, "2", 2**64, None, [], {}, 10**400)


def _json_edits(data: bytes) -> Iterator[tuple[str, Callable[[bytes], bytes]]]:
    body = json.loads(data)
    for key in body:
        for value in _JSON_VALUES:

            def edit(d: bytes, key: str = key, value: Any = value) -> bytes:
                b = json.loads(d)
                if value == 10**400:  # a number no float or u64 can hold
                    return json.dumps(b).replace(json.dumps(b[key]), "1" + "0" * 400, 1).encode()
                b[key] = value
                return json.dumps(b).encode()

            yield f"{key}={value!r}"[:60], edit

        def drop(d: bytes, key: str = key) -> bytes:
            b = json.loads(d)
            del b[key]
            return json.dumps(b).encode()

        yield f"drop {key}", drop
    yield "not an object", lambda d: b"[1, 2]"
    yield "empty", lambda d: b""


def _targets(root: Path) -> dict[str, Path]:
    """The newest file of each kind in a base dataset."""
    manifests = sorted((root / "_versions").glob("*.manifest"))
    latest = versions.latest_entry(open_storage(str(root)))
    txns = sorted((root / "_transactions").glob("*.txn"), key=lambda p: p.stat().st_mtime)
    return {
        "manifest": root / latest.path if manifests else root,
        "arrow": next((root / "_deletions").glob("*.arrow")),
        "bin": next((root / "_deletions").glob("*.bin")),
        "txn": txns[-1],
        "hint": root / "_versions" / "latest_version_hint.json",
        "tag": root / "_refs" / "tags" / "t1.json",
    }


def make_cases(
    bases: list[Base], *, random_per_kind: int, edits_per_kind: int | None, seed: int
) -> list[Case]:
    """Random flips and truncations, plus targeted edits (all of them, or a seeded sample)."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for base in bases:
        for kind, path in _targets(base.root).items():
            if not path.exists():
                continue
            rel = str(path.relative_to(base.root))
            data = path.read_bytes()
            for _ in range(random_per_kind):
                pos, mask = rng.randrange(len(data)), rng.randrange(1, 256)
                cases.append(Case(kind, base.name, rel, f"flip {pos} ^{mask:#x}", _flip(pos, mask)))
            for keep in (0.0, 0.5, 0.9, rng.random()):
                cases.append(Case(kind, base.name, rel, f"truncate {keep:.2f}", _truncate(keep)))
            if kind == "manifest":
                edits = list(_manifest_edits(data))
            elif kind == "txn":
                edits = list(_txn_edits(data))
            elif kind in ("hint", "tag"):
                edits = list(_json_edits(data))
            else:
                edits = []
            if edits_per_kind is not None and len(edits) > edits_per_kind:
                edits = rng.sample(edits, edits_per_kind)
            cases.extend(Case(kind, base.name, rel, label, fn) for label, fn in edits)
    return cases


# ---------------------------------------------------------------------------------------------
# running a case


@dataclass
class Outcome:
    kind: str
    seconds: float
    peak: int
    detail: str = ""


class CaseFailure(AssertionError):
    pass


def _names_file(message: str, case: Case, root: Path) -> bool:
    rel = case.file
    if rel in message or Path(rel).name in message:
        return True
    if case.kind in ("manifest",):
        # errors found while checking what a manifest says against other files name its version
        version = (
            versions.latest_entry(open_storage(str(root))).version if (root / "_versions").exists() else -1
        )
        return f"version {version}" in message
    return False


def _arrow_peak() -> int:
    return pa.default_memory_pool().max_memory() or 0


def run_case(case: Case, base: Base, work: Path) -> Outcome:
    root = work / f"case-{abs(hash((case.base, case.file, case.label))) % 10**12}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(base.root, root)
    target = root / case.file
    target.write_bytes(case.mutate(target.read_bytes()))
    tag = case.kind == "tag"
    txn = case.kind == "txn"
    result: dict[str, Any] = {}

    def body() -> None:
        tracemalloc.start()
        tracemalloc.reset_peak()
        started = time.perf_counter()
        try:
            result["value"] = _read_all(root, tag, txn)
        except BaseException as exc:  # judged below
            result["error"] = exc
        finally:
            result["peak"] = tracemalloc.get_traced_memory()[1]
            result["seconds"] = time.perf_counter() - started
            tracemalloc.stop()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(CASE_SECONDS)
    where = f"{case.base} {case.kind} {case.file} [{case.label}]"
    if thread.is_alive():
        raise CaseFailure(f"{where}: still running after {CASE_SECONDS} s")
    peak = result["peak"]
    if peak > 2 * base.peak + MEMORY_SLACK:
        raise CaseFailure(f"{where}: peak memory {peak} bytes, honest reads need {base.peak}")
    error = result.get("error")
    if error is not None:
        if not isinstance(error, LanceTableError):
            raise CaseFailure(f"{where}: {type(error).__name__}: {error}") from error
        if not _names_file(str(error), case, root):
            raise CaseFailure(f"{where}: {type(error).__name__} does not name the file: {error}") from error
        shutil.rmtree(root, ignore_errors=True)
        return Outcome("error", result["seconds"], peak, f"{type(error).__name__}")
    value = result["value"]
    shutil.rmtree(root, ignore_errors=True)
    if _same(value, base.expected, tag, txn):
        return Outcome("same", result["seconds"], peak)
    if value["schema"].types != base.schema.types:
        raise CaseFailure(f"{where}: read with another schema {value['schema']}")
    return Outcome("different", result["seconds"], peak)


def _same(value: dict[str, Any], expected: dict[str, Any], tag: bool, txn: bool) -> bool:
    keys = (
        ["count", "filtered", "versions"] + (["tags", "tag_count"] if tag else []) + (["txns"] if txn else [])
    )
    if any(value.get(k) != expected.get(k) for k in keys):
        return False
    return value["table"].equals(expected["table"]) and value["take"].equals(expected["take"])


def run_cases(cases: list[Case], bases: list[Base], work: Path) -> dict[str, Any]:
    by_name = {b.name: b for b in bases}
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    failures: list[str] = []
    tag_failures: list[str] = []
    slowest = (0.0, "")
    peak = (0, "")
    arrow_before = _arrow_peak()
    for case in cases:
        try:
            outcome = run_case(case, by_name[case.base], work)
        except CaseFailure as exc:
            (tag_failures if case.kind == "tag" else failures).append(str(exc))
            counts[case.kind]["FAILED"] += 1
            continue
        counts[case.kind][outcome.kind] += 1
        where = f"{case.base} {case.kind} [{case.label}]"
        slowest = max(slowest, (outcome.seconds, where))
        peak = max(peak, (outcome.peak, where))
    honest = max(b.peak for b in bases)
    return {
        "counts": {k: dict(v) for k, v in counts.items()},
        "failures": failures,
        "tag_failures": tag_failures,
        "slowest": slowest,
        "peak": peak,
        "honest_peak": honest,
        "arrow_pool_max": (arrow_before, _arrow_peak()),
    }


def _check(report: dict[str, Any], honest_arrow: int) -> None:
    assert not report["failures"], "\n".join(report["failures"][:40])
    before, after = report["arrow_pool_max"]
    # pyarrow's pool only keeps a maximum over the whole process: it must not have grown far
    # beyond what the honest reads (and earlier tests) already needed.
    assert after <= 2 * max(before, honest_arrow) + MEMORY_SLACK, report["arrow_pool_max"]
    assert not report["tag_failures"], "\n".join(report["tag_failures"][:40])


def test_fuzz_metadata_sample(bases: list[Base], tmp_path: Path) -> None:
    honest_arrow = _arrow_peak()
    cases = make_cases(bases, random_per_kind=6, edits_per_kind=12, seed=1)
    report = run_cases([c for c in cases if c.kind != "tag"], bases, tmp_path)
    assert set(report["counts"]) == set(KINDS) - {"tag"}
    _check(report, honest_arrow)


def test_fuzz_tag_files_sample(bases: list[Base], tmp_path: Path) -> None:
    honest_arrow = _arrow_peak()
    cases = make_cases(bases, random_per_kind=6, edits_per_kind=None, seed=1)
    report = run_cases([c for c in cases if c.kind == "tag"], bases, tmp_path)
    assert set(report["counts"]) == {"tag"}
    _check(report, honest_arrow)


@pytest.mark.stress
def test_fuzz_metadata_stress(bases: list[Base], tmp_path: Path) -> None:
    honest_arrow = _arrow_peak()
    cases = make_cases(bases, random_per_kind=150, edits_per_kind=None, seed=2)
    started = time.perf_counter()
    report = run_cases(cases, bases, tmp_path)
    print(f"\n{len(cases)} cases in {time.perf_counter() - started:.1f} s")
    for kind in KINDS:
        print(f"  {kind:8} {report['counts'].get(kind, {})}")
    print(f"  slowest case {report['slowest'][0]:.2f} s: {report['slowest'][1]}")
    print(
        f"  peak traced memory {report['peak'][0]} bytes ({report['peak'][1]}), "
        f"honest {report['honest_peak']}"
    )
    print(f"  pyarrow pool max before/after {report['arrow_pool_max']}")
    for failure in report["tag_failures"]:
        print("  tag:", failure)
    _check(report, honest_arrow)
