"""Damaged files give typed errors that name the file; never a crash, a hang or a huge allocation."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from lance_table.errors import CorruptFileError, LanceTableError, UnsupportedFormatError
from lance_table.file import write_table
from lance_table.file.container import FOOTER_SIZE
from lance_table.file.reader import LanceFileReader


@pytest.fixture
def good(tmp_path):
    table = pa.table(
        {
            "i": pa.array(np.arange(500)),
            "s": pa.array([f"v{i}" if i % 3 else None for i in range(500)]),
            "l": pa.array([[i] * (i % 3) for i in range(500)], pa.list_(pa.int32())),
        }
    )
    path = tmp_path / "good.lance"
    write_table(path, table, page_size_bytes=1024)
    return path, path.read_bytes()


def _write(tmp_path, data: bytes):
    path = tmp_path / "bad.lance"
    path.write_bytes(data)
    return path


def _footer(data: bytes) -> list[int]:
    return list(struct.unpack_from("<QQQIIHH", data, len(data) - FOOTER_SIZE))


def _with_footer(data: bytes, fields: list[int]) -> bytes:
    return data[:-FOOTER_SIZE] + struct.pack("<QQQIIHH", *fields) + b"LANC"


def test_wrong_magic(tmp_path, good):
    _, data = good
    path = _write(tmp_path, data[:-4] + b"NOPE")
    with pytest.raises(CorruptFileError, match="magic") as info:
        LanceFileReader(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("size", [0, 1, 39])
def test_too_small(tmp_path, size):
    path = _write(tmp_path, b"LANC"[:size] if size <= 4 else b"\0" * (size - 4) + b"LANC")
    with pytest.raises(CorruptFileError, match="too small"):
        LanceFileReader(path)


@pytest.mark.parametrize("cut", [1, 40, 100, 1000])
def test_truncated(tmp_path, good, cut):
    _, data = good
    path = _write(tmp_path, data[:-cut])
    with pytest.raises(CorruptFileError) as info:
        LanceFileReader(path).read_all()
    assert str(path) in str(info.value)


@pytest.mark.parametrize("version", [(0, 4), (3, 0), (1, 0)])
def test_unknown_version(tmp_path, good, version):
    _, data = good
    fields = _footer(data)
    fields[5], fields[6] = version
    path = _write(tmp_path, _with_footer(data, fields))
    with pytest.raises(UnsupportedFormatError, match=f"{version[0]}.{version[1]}"):
        LanceFileReader(path)


def test_a_2_0_file_relabelled_as_2_2_is_corrupt(tmp_path, good):
    _, data = good
    fields = _footer(data)
    fields[5], fields[6] = 2, 2
    path = _write(tmp_path, _with_footer(data, fields))
    with pytest.raises(CorruptFileError, match="PageLayout"):
        LanceFileReader(path).read_all(columns=["i", "s"])


@pytest.mark.parametrize(
    "index,value",
    [(0, 2**63), (1, 2**40), (2, 2**40), (3, 2**31), (4, 2**31), (3, 0)],
)
def test_offsets_beyond_the_file(tmp_path, good, index, value):
    _, data = good
    fields = _footer(data)
    fields[index] = value
    path = _write(tmp_path, _with_footer(data, fields))
    with pytest.raises(CorruptFileError):
        LanceFileReader(path).read_all()


def test_protobuf_that_does_not_parse(tmp_path, good):
    _, data = good
    _, cmo_start, *_ = _footer(data)
    pos, size = struct.unpack_from("<QQ", data, cmo_start)
    broken = data[:pos] + b"\xff" * size + data[pos + size :]
    path = _write(tmp_path, broken)
    with pytest.raises(CorruptFileError, match="protobuf") as info:
        LanceFileReader(path).read_all()
    assert str(path) in str(info.value)


def test_a_column_s_metadata_is_parsed_and_checked_when_the_column_is_read(tmp_path, good):
    """A read of some columns parses only their metadata (a filter over many small files reads
    one column of each); a damaged column fails the first read that needs it, naming it.
    (A 2.2 file: a 2.0 reader looks at each string column's first page when it opens.)"""
    source, _ = good
    write_table(source, LanceFileReader(source).read_all(), version="2.2")
    data = source.read_bytes()
    _, cmo_start, *_ = _footer(data)
    pos, size = struct.unpack_from("<QQ", data, cmo_start + 16)  # column 1: "s"
    path = _write(tmp_path, data[:pos] + b"\xff" * size + data[pos + size :])
    reader = LanceFileReader(path)
    assert reader.read_all(columns=["i"]).column("i").to_pylist() == list(range(500))
    with pytest.raises(CorruptFileError, match="metadata of column 1"):
        reader.read_all(columns=["s"])


def test_page_buffer_beyond_the_data(tmp_path, good):
    from lance_table._proto import file2_pb2

    _, data = good
    fields = _footer(data)
    cm_start, cmo_start, gbo_start, n_global, n_cols = fields[:5]
    table = [struct.unpack_from("<QQ", data, cmo_start + 16 * i) for i in range(n_cols)]
    pos, size = table[0]
    col = file2_pb2.ColumnMetadata()
    col.ParseFromString(data[pos : pos + size])
    col.pages[0].buffer_sizes[0] = 10**12
    blob = col.SerializeToString()
    # rebuild the metadata region with the enlarged column 0
    metas = [blob] + [data[p : p + s] for p, s in table[1:]]
    gb_pos, gb_size = struct.unpack_from("<QQ", data, gbo_start)
    head = data[:cm_start]
    out = bytearray(head)
    offsets = []
    for m in metas:
        offsets.append((len(out), len(m)))
        out += m
    new_cmo = len(out)
    for p, s in offsets:
        out += struct.pack("<QQ", p, s)
    new_gbo = len(out)
    out += struct.pack("<QQ", gb_pos, gb_size)
    out += struct.pack("<QQQIIHH", cm_start, new_cmo, new_gbo, n_global, n_cols, 0, 3) + b"LANC"
    path = _write(tmp_path, bytes(out))
    with pytest.raises(CorruptFileError, match="beyond"):
        LanceFileReader(path).read_all()


@pytest.mark.parametrize("region", ["metadata", "data"])
def test_random_damage_never_escapes_as_an_untyped_error(tmp_path, good, region):
    """Overwrite random bytes: every failure must be a LanceTableError."""
    _, data = good
    rng = np.random.default_rng(0)
    meta_start = _footer(data)[0]
    lo, hi = (meta_start, len(data)) if region == "metadata" else (0, meta_start)
    for trial in range(300):
        damaged = bytearray(data)
        for _ in range(rng.integers(1, 4)):
            pos = int(rng.integers(lo, hi))
            damaged[pos] = int(rng.integers(0, 256))
        path = _write(tmp_path, bytes(damaged))
        try:
            reader = LanceFileReader(path)
            reader.read_all()
            reader.take([0, 499])
        except LanceTableError:
            pass
        except (IndexError, ValueError) as exc:  # pragma: no cover - reported with the trial number
            if not isinstance(exc, LanceTableError):
                raise AssertionError(f"trial {trial}: untyped {type(exc).__name__}: {exc}") from exc
