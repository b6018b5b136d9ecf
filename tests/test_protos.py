"""Tests for the generated protobuf modules in ``lance_table._proto``.

Checks that the generated code matches ``protos/`` and that our message
definitions parse metadata written by pylance without leaving unknown fields.
"""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import any_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

import lance_table._proto as proto_pkg
from lance_table._proto import (
    encodings_v2_0_pb2,
    encodings_v2_1_pb2,
    file2_pb2,
    table_pb2,
    transaction_pb2,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
GEN_SCRIPT = REPO_ROOT / "scripts" / "gen_protos.py"
PROTO_DIR = REPO_ROOT / "protos"

MANIFEST_FOOTER = struct.Struct("<QHH4s")
FILE_FOOTER = struct.Struct("<QQQIIHH4s")
MAGIC = b"LANC"


def _load_gen_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_protos", GEN_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unknown_fields(msg: Message, path: str = "") -> Iterator[str]:
    """Yield a description of every unknown field in ``msg`` and its children."""
    here = path or msg.DESCRIPTOR.full_name
    for field in UnknownFieldSet(msg):
        yield f"{here}: field {field.field_number} (wire type {field.wire_type})"
    for fd, value in msg.ListFields():
        if fd.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        child_path = f"{here}.{fd.name}"
        if fd.message_type.GetOptions().map_entry:
            if fd.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE:
                for key, item in value.items():
                    yield from _unknown_fields(item, f"{child_path}[{key!r}]")
        elif fd.is_repeated:
            for i, item in enumerate(value):
                yield from _unknown_fields(item, f"{child_path}[{i}]")
        else:
            yield from _unknown_fields(value, child_path)


def _assert_fully_known(msg: Message) -> None:
    unknown = list(_unknown_fields(msg))
    assert not unknown, "unknown fields:\n" + "\n".join(unknown)


def _read_sized(data: bytes, offset: int) -> bytes:
    """Read a u32-length-prefixed message starting at ``offset``."""
    (length,) = struct.unpack_from("<I", data, offset)
    start = offset + 4
    assert start + length <= len(data)
    return data[start : start + length]


# --------------------------------------------------------------------------
# Generated code is in sync with protos/
# --------------------------------------------------------------------------


def test_digest_matches_proto_sources() -> None:
    gen = _load_gen_script()
    assert gen.compute_protos_digest(PROTO_DIR) == proto_pkg.PROTOS_DIGEST


def test_generated_modules_are_up_to_date() -> None:
    pytest.importorskip("grpc_tools")
    result = subprocess.run(
        [sys.executable, str(GEN_SCRIPT), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_any_type_urls_match_lance() -> None:
    # Pages and columns store their encodings in google.protobuf.Any, so the
    # full names must match what Lance writes byte for byte.
    assert encodings_v2_0_pb2.ArrayEncoding.DESCRIPTOR.full_name == "lance.encodings.ArrayEncoding"
    assert encodings_v2_0_pb2.ColumnEncoding.DESCRIPTOR.full_name == "lance.encodings.ColumnEncoding"
    assert encodings_v2_1_pb2.PageLayout.DESCRIPTOR.full_name == "lance.encodings21.PageLayout"


# --------------------------------------------------------------------------
# Real bytes written by pylance
# --------------------------------------------------------------------------


@pytest.mark.interop
def test_pylance_manifest_and_transaction_parse_cleanly(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")

    uri = tmp_path / "ds"
    lance.write_dataset(pa.table({"a": [1, 2, 3]}), str(uri))

    manifests = sorted((uri / "_versions").glob("*.manifest"))
    assert len(manifests) == 1
    data = manifests[0].read_bytes()

    pos, major, minor, magic = MANIFEST_FOOTER.unpack(data[-MANIFEST_FOOTER.size :])
    assert magic == MAGIC
    assert (major, minor) == (0, 2)

    manifest = table_pb2.Manifest.FromString(_read_sized(data, pos))
    _assert_fully_known(manifest)
    assert manifest.version == 1
    assert [f.name for f in manifest.fields] == ["a"]
    assert manifest.data_format.file_format == "lance"
    assert [frag.physical_rows for frag in manifest.fragments] == [3]
    assert manifest.HasField("transaction_section")
    assert not manifest.HasField("transaction_section_deprecated")

    txn = transaction_pb2.Transaction.FromString(_read_sized(data, manifest.transaction_section))
    _assert_fully_known(txn)
    assert txn.WhichOneof("operation") == "overwrite"
    assert txn.read_version == 0

    txn_files = sorted((uri / "_transactions").glob("*.txn"))
    assert [p.name for p in txn_files] == [manifest.transaction_file]
    detached = transaction_pb2.Transaction.FromString(txn_files[0].read_bytes())
    _assert_fully_known(detached)
    assert detached.uuid == txn.uuid


def _sample_table(num_rows: int = 100_000) -> pa.Table:
    rng = np.random.default_rng(42)
    # A few large, distinct values push the "big" column into a full-zip layout.
    blobs = [rng.integers(0, 256, 5_000, dtype=np.uint8).tobytes() for _ in range(200)]
    return pa.table(
        {
            "i64": pa.array(rng.integers(-(2**40), 2**40, num_rows), pa.int64()),
            "str": pa.array([f"value-{i % 997}" for i in range(num_rows)], pa.string()),
            "list": pa.array(
                [list(range(i % 5)) if i % 7 else None for i in range(num_rows)],
                pa.list_(pa.int32()),
            ),
            "f32": pa.array(rng.random(num_rows, dtype=np.float32), pa.float32()),
            "const": pa.array(np.full(num_rows, 7), pa.int64()),
            "null_list": pa.nulls(num_rows, pa.list_(pa.int32())),
            "big": pa.array(blobs + [None] * (num_rows - len(blobs)), pa.binary()),
        }
    )


def _write_lance_file(path: Path, version: str) -> bytes:
    lance_file = pytest.importorskip("lance.file")
    table = _sample_table()
    with lance_file.LanceFileWriter(str(path), table.schema, version=version) as writer:
        writer.write_batch(table)
    return path.read_bytes()


def _column_metadatas(data: bytes) -> tuple[tuple[int, int], list[file2_pb2.ColumnMetadata]]:
    _, cmo_start, _, _, num_columns, major, minor, magic = FILE_FOOTER.unpack(data[-FILE_FOOTER.size :])
    assert magic == MAGIC
    columns = []
    for i in range(num_columns):
        pos, size = struct.unpack_from("<QQ", data, cmo_start + 16 * i)
        column = file2_pb2.ColumnMetadata.FromString(data[pos : pos + size])
        _assert_fully_known(column)
        columns.append(column)
    return (major, minor), columns


def _check_column_encoding(column: file2_pb2.ColumnMetadata) -> None:
    if column.encoding.WhichOneof("location") != "direct":
        return
    wrapped = any_pb2.Any.FromString(column.encoding.direct.encoding)
    assert wrapped.type_url == "/lance.encodings.ColumnEncoding"
    encoding = encodings_v2_0_pb2.ColumnEncoding.FromString(wrapped.value)
    _assert_fully_known(encoding)


@pytest.mark.interop
def test_pylance_v2_2_page_layouts_parse_cleanly(tmp_path: Path) -> None:
    data = _write_lance_file(tmp_path / "v22.lance", "2.2")
    version, columns = _column_metadatas(data)
    assert version == (2, 2)

    layouts: set[str] = set()
    large_chunk = False
    inline_constant = False
    for column in columns:
        _check_column_encoding(column)
        for page in column.pages:
            wrapped = any_pb2.Any.FromString(page.encoding.direct.encoding)
            assert wrapped.type_url == "/lance.encodings21.PageLayout"
            layout = encodings_v2_1_pb2.PageLayout.FromString(wrapped.value)
            _assert_fully_known(layout)
            kind = layout.WhichOneof("layout")
            assert kind is not None
            layouts.add(kind)
            if kind == "mini_block_layout":
                large_chunk |= layout.mini_block_layout.has_large_chunk
            if kind == "constant_layout":
                inline_constant |= layout.constant_layout.HasField("inline_value")

    assert {"mini_block_layout", "constant_layout", "full_zip_layout"} <= layouts
    assert large_chunk
    assert inline_constant


@pytest.mark.interop
def test_pylance_v2_0_array_encodings_parse_cleanly(tmp_path: Path) -> None:
    data = _write_lance_file(tmp_path / "v20.lance", "2.0")
    version, columns = _column_metadatas(data)
    assert version == (0, 3)

    kinds: set[str] = set()
    for column in columns:
        _check_column_encoding(column)
        for page in column.pages:
            wrapped = any_pb2.Any.FromString(page.encoding.direct.encoding)
            assert wrapped.type_url == "/lance.encodings.ArrayEncoding"
            encoding = encodings_v2_0_pb2.ArrayEncoding.FromString(wrapped.value)
            _assert_fully_known(encoding)
            kind = encoding.WhichOneof("array_encoding")
            assert kind is not None
            kinds.add(kind)

    assert len(kinds) >= 3
