"""Damaged metadata files are refused with typed errors naming the file, before they can make a
reader leave the dataset, allocate memory sized by a bad count, or disagree with itself."""

from __future__ import annotations

import datetime as dt
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import edit_latest_manifest

import lance_table as lt
from lance_table._proto import transaction_pb2
from lance_table.errors import (
    CorruptFileError,
    DataFileNotFoundError,
    LanceTableError,
    SchemaError,
)
from lance_table.format.transaction import Transaction
from lance_table.storage import open_storage
from lance_table.table import versions
from lance_table.table.deletion import encode_deletions, read_deletions


def _rows(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "s": pa.array([f"r{i}" for i in ids.tolist()])})


def _manifest_file(root: Path) -> Path:
    return root / versions.latest_entry(open_storage(str(root))).path


def _edit_manifest(root: Path, edit: Callable[[Any], None]) -> Path:
    return edit_latest_manifest(root, edit)


def _fresh(tmp_path: Path, name: str = "ds", n: int = 12_000, **kw: Any) -> lt.Dataset:
    return lt.write_dataset(_rows(n), tmp_path / name, **kw)


# -- 1. paths stay inside the dataset ----------------------------------------------------------


def test_data_file_path_outside_the_dataset_is_refused(tmp_path: Path) -> None:
    victim = _fresh(tmp_path, "victim", 10)
    victim_file = victim.manifest.fragments[0].files[0].path
    _fresh(tmp_path, "ds", 10)
    root = tmp_path / "ds"

    def point_at_victim(pb: Any) -> None:
        pb.fragments[0].files[0].path = f"../../victim/data/{victim_file}"

    manifest = _edit_manifest(root, point_at_victim)
    with pytest.raises(CorruptFileError) as info:
        lt.dataset(root).to_table()
    assert str(manifest) in str(info.value) and "../../victim" in str(info.value)
    with pytest.raises(CorruptFileError):
        lt.dataset(root).compact_files()


@pytest.mark.parametrize(
    "bad",
    [
        "../x.lance",
        "/etc/passwd",
        "s3://bucket/x.lance",
        "file:x.lance",
        "a\\..\\x",
        "a//x.lance",
        "./x.lance",
        "a/../../x",
        "x\x00.lance",
        "",
        "C:x.lance",
    ],
)
def test_every_escaping_form_is_refused(tmp_path: Path, bad: str) -> None:
    _fresh(tmp_path, n=10)
    root = tmp_path / "ds"

    def set_path(pb: Any) -> None:
        pb.fragments[0].files[0].path = bad

    manifest = _edit_manifest(root, set_path)
    with pytest.raises(CorruptFileError, match="inside the dataset") as info:
        lt.dataset(root)
    assert info.value.path == str(manifest)


def test_nested_relative_paths_and_transaction_file_names(tmp_path: Path) -> None:
    ds = _fresh(tmp_path, n=10)
    root = tmp_path / "ds"
    name = ds.manifest.fragments[0].files[0].path
    (root / "data" / "sub").mkdir()
    (root / "data" / name).rename(root / "data" / "sub" / name)
    _edit_manifest(root, lambda pb: setattr(pb.fragments[0].files[0], "path", f"sub/{name}"))
    assert lt.dataset(root).to_table().num_rows == 10  # nested relative paths stay readable
    lt.dataset(root).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert (root / "data" / "sub" / name).exists()  # and live: cleanup keeps them
    assert lt.dataset(root).to_table().num_rows == 10

    _edit_manifest(root, lambda pb: setattr(pb, "transaction_file", "../../elsewhere.txn"))
    with pytest.raises(CorruptFileError, match="transaction file"):
        lt.dataset(root)


def test_transaction_with_escaping_data_file_is_refused() -> None:
    pb = transaction_pb2.Transaction(read_version=1, uuid="u")
    frag = pb.append.fragments.add(physical_rows=3)
    frag.files.add(path="../../other/x.lance", fields=[0], file_major_version=2)
    with pytest.raises(CorruptFileError, match="inside the dataset") as info:
        Transaction.from_bytes(pb.SerializeToString(), "some/1-u.txn")
    assert info.value.path == "some/1-u.txn"


# -- 2. counts are checked before they size anything -------------------------------------------


def test_physical_rows_larger_than_the_data_file(tmp_path: Path) -> None:
    _fresh(tmp_path)
    root = tmp_path / "ds"
    manifest = _edit_manifest(root, lambda pb: setattr(pb.fragments[0], "physical_rows", 2**28))
    ds = lt.dataset(root)
    tracemalloc.start()
    try:
        # (changes in place size their scans from the manifest, but each fragment's task checks
        # the count before it reads)
        changes = (
            lambda: ds.update({"id": "id + 1"}, where="id < 5"),
            lambda: ds.add_columns({"y": "id * 2"}),
        )
        for read in (ds.to_table, lambda: ds.count_rows("id >= 0"), lambda: ds.take([0]), *changes):
            with pytest.raises(CorruptFileError, match="holds 12000") as info:
                read()
            assert str(manifest) in str(info.value)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_physical_rows_beyond_a_row_address_is_refused_on_open(tmp_path: Path) -> None:
    _fresh(tmp_path, n=10)
    root = tmp_path / "ds"
    _edit_manifest(root, lambda pb: setattr(pb.fragments[0], "physical_rows", 2**40))
    with pytest.raises(CorruptFileError, match="2\\*\\*32"):
        lt.dataset(root)


# -- 3. deletion files must agree with the manifest ---------------------------------------------


def _with_deletions(tmp_path: Path, predicate: str) -> tuple[Path, Path]:
    ds = _fresh(tmp_path)
    ds.delete(predicate)
    root = tmp_path / "ds"
    df = ds.manifest.fragments[0].deletion_file
    assert df is not None
    return root, next((root / "_deletions").iterdir())


def test_zeroed_roaring_header_is_corrupt(tmp_path: Path) -> None:
    root, path = _with_deletions(tmp_path, "id < 6000")
    assert path.suffix == ".bin"
    data = bytearray(path.read_bytes())
    data[4:16] = bytes(12)
    path.write_bytes(bytes(data))
    ds = lt.dataset(root)
    assert ds.count_rows() == 6000  # the manifest alone
    for read in (ds.to_table, lambda: ds.count_rows("id >= 0")):
        with pytest.raises(CorruptFileError) as info:
            read()
        assert path.name in str(info.value)


@pytest.mark.parametrize("count", [2**31, 2**63 - 1, 12_001])
def test_more_deleted_rows_than_physical_rows_is_refused_on_open(tmp_path: Path, count: int) -> None:
    root, _ = _with_deletions(tmp_path, "id < 100")
    manifest = _edit_manifest(
        root, lambda pb: setattr(pb.fragments[0].deletion_file, "num_deleted_rows", count)
    )
    with pytest.raises(CorruptFileError, match="deletes") as info:
        lt.dataset(root)
    assert info.value.path == str(manifest)


@pytest.mark.parametrize("predicate", ["id < 100", "id < 6000"])
def test_deletion_file_count_must_match_the_manifest(tmp_path: Path, predicate: str) -> None:
    root, path = _with_deletions(tmp_path, predicate)
    _edit_manifest(root, lambda pb: setattr(pb.fragments[0].deletion_file, "num_deleted_rows", 50))
    ds = lt.dataset(root)
    with pytest.raises(CorruptFileError, match=r"\b50\b") as info:
        ds.to_table()
    assert path.name in str(info.value)


def test_zero_deleted_rows_with_a_deletion_file_is_refused(tmp_path: Path) -> None:
    # pylance 14 reads 0 as "unknown" but then fails its own count_rows(); count_rows() here is
    # manifest-only, so the count must be known.
    root, _ = _with_deletions(tmp_path, "id < 100")
    _edit_manifest(root, lambda pb: setattr(pb.fragments[0].deletion_file, "num_deleted_rows", 0))
    with pytest.raises(CorruptFileError, match="deletes 0"):
        lt.dataset(root)


def test_every_byte_flip_of_an_arrow_deletion_file_is_corrupt_or_harmless(tmp_path: Path) -> None:
    offsets = np.arange(0, 4000, 3, dtype=np.uint32)
    data = encode_deletions(offsets, "arrow")
    root, path = _with_deletions(tmp_path, "id < 100")
    storage = open_storage(str(root))
    frag = lt.dataset(root).manifest.fragments[0]
    from dataclasses import replace

    assert frag.deletion_file is not None
    frag = replace(frag, deletion_file=replace(frag.deletion_file, num_deleted_rows=offsets.size))
    pool = pa.default_memory_pool()
    before = pool.max_memory() or 0
    outcomes: dict[str, int] = {}
    for pos in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            damaged = bytearray(data)
            damaged[pos] ^= mask
            path.write_bytes(bytes(damaged))
            try:
                read_deletions(storage, frag)
                outcomes["read"] = outcomes.get("read", 0) + 1
            except CorruptFileError as exc:
                assert path.name in str(exc)
                outcomes["corrupt"] = outcomes.get("corrupt", 0) + 1
    assert outcomes["corrupt"] > 0
    assert (pool.max_memory() or 0) <= max(2 * before, 64 << 20)


def test_huge_uncompressed_length_in_arrow_deletion_file(tmp_path: Path) -> None:
    root, path = _with_deletions(tmp_path, "id < 1100")
    data = bytearray(path.read_bytes())
    # lance_table writes ZSTD-flagged buffers from 1024 offsets on: the values buffer starts with
    # its length, 4400
    at = bytes(data).find(struct.pack("<q", 4400))
    assert at > 0
    struct.pack_into("<q", data, at, 2**40)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="decompressed"):
        lt.dataset(root).to_table()


# -- 4. damaged schemas name the manifest -------------------------------------------------------


@pytest.mark.parametrize(
    "edit",
    [
        lambda pb: setattr(pb.fields[1], "id", pb.fields[0].id),
        lambda pb: setattr(pb.fields[1], "parent_id", 77),
        lambda pb: setattr(pb.fields[0], "parent_id", pb.fields[0].id),
        lambda pb: setattr(pb.fields[0], "logical_type", "decimal:128:x:2"),
        lambda pb: setattr(pb.fields[0], "logical_type", "fixed_size_list:int32:99999999999999999999"),
        lambda pb: setattr(pb.fields[1], "name", pb.fields[0].name),
        lambda pb: setattr(pb.timestamp, "seconds", 2**62),
    ],
)
def test_damaged_schema_names_the_manifest(tmp_path: Path, edit: Callable[[Any], None]) -> None:
    _fresh(tmp_path, n=10)
    manifest = _edit_manifest(tmp_path / "ds", edit)
    with pytest.raises(CorruptFileError) as info:
        lt.dataset(tmp_path / "ds").to_table()
    assert info.value.path == str(manifest)


def test_unknown_logical_type_names_the_manifest(tmp_path: Path) -> None:
    _fresh(tmp_path, n=10)
    manifest = _edit_manifest(tmp_path / "ds", lambda pb: setattr(pb.fields[0], "logical_type", "int6$"))
    with pytest.raises(LanceTableError) as info:
        lt.dataset(tmp_path / "ds").to_table()
    assert str(manifest) in str(info.value)


# -- 5. files of a cleaned-up version -----------------------------------------------------------


def test_reading_a_cleaned_up_version_raises_data_file_not_found(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    pinned = lt.write_dataset(_rows(10), root)
    latest = lt.write_dataset(_rows(10, 100), root, mode="overwrite")
    latest.cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    with pytest.raises(DataFileNotFoundError) as info:
        pinned.to_table()
    err = info.value
    assert isinstance(err, FileNotFoundError) and isinstance(err, LanceTableError)
    assert err.version == 1 and err.cleaned_up
    assert "version 1" in str(err) and "cleaned up" in str(err) and str(root) in err.path


def test_missing_deletion_file_of_a_live_version(tmp_path: Path) -> None:
    root, path = _with_deletions(tmp_path, "id < 100")
    path.unlink()
    with pytest.raises(DataFileNotFoundError) as info:
        lt.dataset(root).to_table()
    assert path.name in str(info.value) and not info.value.cleaned_up and info.value.version == 2


# -- 6. schema metadata must be UTF-8 -----------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        pa.schema([pa.field("a", pa.int64())], metadata={b"k": b"\xff\xfe"}),
        pa.schema([pa.field("a", pa.int64())], metadata={b"\xff": b"v"}),
        pa.schema([pa.field("a", pa.int64(), metadata={b"k": b"\xff"})]),
        pa.schema([pa.field("a", pa.int64(), metadata={b"\xfe": b"v"})]),
        pa.schema([pa.field("a", pa.struct([pa.field("x", pa.int64(), metadata={b"k": b"\xff"})]))]),
    ],
)
@pytest.mark.parametrize("mode", ["create", "overwrite"])
def test_non_utf8_schema_metadata_is_refused(tmp_path: Path, schema: pa.Schema, mode: str) -> None:
    root = tmp_path / "ds"
    if mode == "overwrite":
        lt.write_dataset(pa.table({"b": [1]}), root)
    data = pa.Table.from_pylist([], schema=schema)
    with pytest.raises(SchemaError, match="UTF-8"):
        lt.write_dataset(data, root, mode=mode)  # type: ignore[arg-type]
    assert not (root / "data").exists() or mode == "overwrite"


def test_utf8_schema_metadata_round_trips(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("a", pa.int64(), metadata={b"k": "é".encode()})], metadata={b"m": b"v"})
    ds = lt.write_dataset(pa.Table.from_pylist([{"a": 1}], schema=schema), tmp_path / "ds")
    assert lt.dataset(tmp_path / "ds").schema == ds.schema
    assert ds.schema.field("a").metadata == {b"k": "é".encode()}


@pytest.mark.parametrize("fmt", ["2.1", "2.2"])
def test_a_schema_that_marks_a_struct_child_holding_nulls_non_nullable_is_corrupt(tmp_path: Path, fmt: str):
    root = tmp_path / "ds"
    table = pa.table({"id": [1, 2, 3], "st": pa.array([{"x": 1}, {"x": None}, None])})
    lt.write_dataset(table, root, data_storage_version=fmt)

    def child_not_nullable(pb: Any) -> None:
        for f in pb.fields:
            if f.name == "x":
                f.nullable = False

    _edit_manifest(root, child_not_nullable)
    for read in (lambda: lt.dataset(root).to_table(), lambda: lt.dataset(root).take([1])):
        with pytest.raises(CorruptFileError, match=r"data/.*\.lance.*'st'"):
            read()


def test_a_legacy_column_the_manifest_marks_non_nullable_reads_as_pylance_reads_it(tmp_path: Path):
    """Legacy files are read with the manifest's nullability: a non-nullable string column's null
    reads as '' in pylance, and here."""
    root = tmp_path / "ds"
    lt.write_dataset(pa.table({"id": [1, 2, 3], "s": ["a", None, "c"]}), root, data_storage_version="legacy")
    _edit_manifest(root, lambda pb: [setattr(f, "nullable", False) for f in pb.fields if f.name == "s"])
    ours = lt.dataset(root).to_table()
    lance = pytest.importorskip("lance")
    assert ours.equals(lance.dataset(str(root)).to_table())


@pytest.mark.parametrize("fmt", ["2.0", "2.2"])
def test_a_schema_that_marks_a_column_holding_nulls_non_nullable_is_corrupt(tmp_path: Path, fmt: str):
    """pylance refuses to read such a column too (an Arrow error); ours names the file."""
    root = tmp_path / "ds"
    lt.write_dataset(pa.table({"id": [1, 2, 3], "s": ["a", None, "c"]}), root, data_storage_version=fmt)
    _edit_manifest(root, lambda pb: [setattr(f, "nullable", False) for f in pb.fields if f.name == "s"])
    with pytest.raises(CorruptFileError, match=r"data/.*\.lance.*'s' holds 1 null"):
        lt.dataset(root).to_table()
    assert lt.dataset(root).to_table(columns=["id"])["id"].to_pylist() == [1, 2, 3]
    assert lt.dataset(root).take([0, 2])["s"].to_pylist() == ["a", "c"]  # rows without nulls read


def test_an_append_past_the_last_fragment_id_is_a_typed_error(tmp_path: Path):
    root = tmp_path / "ds"
    lt.write_dataset(_rows(10), root)
    _edit_manifest(root, lambda pb: setattr(pb, "max_fragment_id", 2**32 - 1))
    before = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    with pytest.raises(lt.CommitError, match="every fragment id"):
        lt.write_dataset(_rows(5, 10), root, mode="append")
    assert sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file()) == before
    assert lt.dataset(root).to_table().equals(_rows(10))


def test_a_manifest_with_repeated_fragment_ids_is_never_written(tmp_path: Path):
    root = tmp_path / "ds"
    lt.write_dataset(_rows(10), root, max_rows_per_file=5)
    # A damaged manifest whose max_fragment_id is below its fragments' ids: the next append would
    # reuse fragment id 1.
    _edit_manifest(root, lambda pb: setattr(pb, "max_fragment_id", 0))
    with pytest.raises(lt.CommitError, match=r"fragment ids \[1\] twice"):
        lt.write_dataset(_rows(5, 10), root, mode="append")
    assert lt.dataset(root).version == 1
