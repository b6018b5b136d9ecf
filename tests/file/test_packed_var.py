"""Packed structs with variable-width children (``variable_packed_struct``, full-zip, format 2.2),
written and read by both libraries, through the file API and the dataset API.

pylance 14 is the oracle: each file is written by one library and read by both, and the contents
compared in full; what pylance refuses is refused here, with :class:`PackedStructError`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import lance_table
from lance_table.errors import PackedStructError
from lance_table.file import LanceFileReader, LanceFileWriter
from lance_table.file.inspect import describe

lance = pytest.importorskip("lance")
lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

PACKED = {"lance-encoding:packed": "true"}
N = 1200


def _packed_field(name: str, arr: pa.Array) -> pa.Field:
    return pa.field(name, arr.type, metadata=PACKED)


def _mixed(n: int = N) -> pa.StructArray:
    """Fixed and variable children side by side: empty strings and binaries, a nested struct
    holding a string, 64-bit offsets, fixed-size binary and lists; every 7th row null."""
    i = np.arange(n)
    words = pa.array([f"w{k % 13}" * (k % 5) for k in range(n)])  # every 5th empty
    inner = pa.StructArray.from_arrays(
        [pa.array([f"in{k}" for k in range(n)]), pa.array(i * 3, pa.int16())], names=["s", "v"]
    )
    children = [
        pa.array(i, pa.int32()),
        words,
        pa.array([bytes([k % 256]) * (k % 3) for k in range(n)], pa.binary()),
        pa.array([f"L{k}" for k in range(n)], pa.large_string()),
        pa.array(i.astype(np.float16)),
        pa.array([b"%04d" % (k % 10000) for k in range(n)], pa.binary(4)),
        pa.FixedSizeListArray.from_arrays(pa.array(np.arange(2 * n, dtype=np.float32)), 2),
        inner,
        pa.array([bytes(k % 4) for k in range(n)], pa.large_binary()),
    ]
    names = ["id", "text", "payload", "big", "half", "code", "vec", "inner", "raw"]
    return pa.StructArray.from_arrays(children, names=names, mask=pa.array(i % 7 == 3))


def _table(arr: pa.Array, name: str = "r", **more: pa.Array) -> pa.Table:
    fields = [_packed_field(name, arr)] + [pa.field(k, v.type) for k, v in more.items()]
    return pa.Table.from_arrays([arr, *more.values()], schema=pa.schema(fields))


def _cases() -> dict[str, pa.Table]:
    n = N
    mixed = _mixed()
    strings_only = pa.StructArray.from_arrays([pa.array(["", "a", "", "bcd"] * (n // 4))], names=["s"])
    long_words = pa.StructArray.from_arrays(  # FSST for the first child, zstd for the wide one
        [
            pa.array(["y" * 60 + str(k % 97) for k in range(n)]),
            pa.array(["q" * 33_000 + str(k) if k % 400 == 0 else "s" for k in range(n)]),
            pa.array(np.arange(n), pa.int64()),
        ],
        names=["fsst", "wide", "k"],
    )
    item = pa.field("item", mixed.type, metadata=PACKED)
    offsets = pa.array(np.r_[0, np.cumsum(np.arange(n // 10) % 4 * 2)].astype(np.int32))
    in_list = pa.ListArray.from_arrays(offsets, mixed.slice(0, int(offsets[-1].as_py())), type=pa.list_(item))
    outer = pa.StructArray.from_arrays(
        [mixed, pa.array(np.arange(n), pa.int32())],
        fields=[pa.field("p", mixed.type, metadata=PACKED), pa.field("z", pa.int32())],
        mask=pa.array(np.arange(n) % 11 == 5),
    )
    return {
        "mixed": _table(mixed, plain=pa.array(np.arange(n))),
        "strings_only": _table(strings_only),
        "long_words": _table(long_words),
        "in_list": pa.Table.from_arrays([in_list], schema=pa.schema([pa.field("l", in_list.type)])),
        "in_struct": pa.Table.from_arrays([outer], names=["o"]),
        "all_null_page": _table(pa.array([None] * 40, mixed.type)),
    }


def _write_ours(path: str, table: pa.Table, **kw: object) -> str:
    with LanceFileWriter(path, table.schema, version="2.2", **kw) as w:
        for batch in table.to_batches(max_chunksize=300):
            w.write_batch(batch)
    return path


def _write_theirs(path: str, table: pa.Table, **kw: object) -> str:
    with lance_file.LanceFileWriter(path, table.schema, version="2.2", **kw) as w:
        for start in range(0, table.num_rows, 300):
            # pylance 14 panics on slices of a packed struct with a struct child: copies
            w.write_batch(pa.Table.from_pylist(table.slice(start, 300).to_pylist(), table.schema))
    return path


def _pages(reader: object) -> list[str]:
    return [p.encoding for c in reader.metadata().columns for p in c.pages]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(_cases()))
def test_files_both_ways(tmp_path, name):
    table = _cases()[name]
    small = {} if name == "long_words" else {"data_cache_bytes": 16 * 1024}  # small pages
    ours = _write_ours(str(tmp_path / "ours.lance"), table, **small)
    theirs = _write_theirs(str(tmp_path / "theirs.lance"), table, **small)
    for path in (ours, theirs):
        assert lance_file.LanceFileReader(path).read_all().to_table().equals(table)
        mine = LanceFileReader(path)
        assert mine.read_all().to_table().equals(table)
        rows = sorted({0, 3, 7, table.num_rows // 2, table.num_rows - 1})
        assert mine.take_rows(rows).to_table().equals(table.take(rows))
    if name != "all_null_page":
        ours_pages = _pages(LanceFileReader(ours))
        assert any("VariablePackedStruct" in e and "FullZipLayout" in e for e in ours_pages)
        assert _pages(lance_file.LanceFileReader(ours)) == ours_pages  # pylance sees the same pages
        if name == "mixed":
            assert sum("VariablePackedStruct" in e for e in ours_pages) > 1  # several pages
        if name == "long_words":
            text = describe(ours, 1)
            assert "fsst {" in text and "COMPRESSION_ALGORITHM_ZSTD" in text


def test_read_back_tables_write_again(tmp_path):
    """Both readers give null struct rows null children; such a table is written again (pylance
    itself refuses to: it takes them for nulls inside the children)."""
    table = _cases()["mixed"]
    theirs = _write_theirs(str(tmp_path / "theirs.lance"), table)
    back = LanceFileReader(theirs).read_all().to_table()
    assert back.column("r").combine_chunks().field("text").null_count
    again = _write_ours(str(tmp_path / "again.lance"), back)
    assert lance_file.LanceFileReader(again).read_all().to_table().equals(table)


def test_dataset_both_ways(tmp_path):
    table = _cases()["mixed"]
    ours = lance_table.write_dataset(table, str(tmp_path / "ours"), data_storage_version="2.2")
    ours.insert(table.slice(0, 100))
    expected = pa.concat_tables([table, table.slice(0, 100)])
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(expected)
    assert ours.to_table().equals(expected)
    assert ours.schema.field("r").metadata == {b"lance-encoding:packed": b"true"}

    lance.write_dataset(table, str(tmp_path / "theirs"))  # pylance's default format is 2.2
    lance.write_dataset(table.slice(0, 100), str(tmp_path / "theirs"), mode="append")
    theirs = lance_table.dataset(str(tmp_path / "theirs"))
    assert theirs.to_table().equals(expected)
    assert theirs.to_table(filter="plain < 10").equals(
        expected.filter(pa.compute.less(expected["plain"], 10))
    )
    # compaction reads the packed rows back and writes them again; pylance reads the result
    theirs.optimize.compact_files()
    assert len(lance.dataset(str(tmp_path / "theirs")).get_fragments()) == 1
    assert lance.dataset(str(tmp_path / "theirs")).to_table().equals(expected)


def _refusals() -> dict[str, tuple[pa.Array, str, bool]]:
    """Packed structs pylance refuses: (array, file version, whether pylance raises an error
    rather than panicking)."""
    s = pa.array(["a", "bb", "", "d"])
    plain = pa.StructArray.from_arrays([pa.array([1, 2, 3, 4], pa.int32()), s], names=["i", "s"])
    return {
        "v2_0": (plain, "2.0", True),
        "v2_1": (plain, "2.1", True),
        "bool_child": (
            pa.StructArray.from_arrays([s, pa.array([True, False] * 2)], names=["s", "b"]),
            "2.2",
            True,
        ),
        "fixed_struct_child": (
            pa.StructArray.from_arrays(
                [s, pa.StructArray.from_arrays([pa.array([1] * 4)], names=["x"])], names=["s", "t"]
            ),
            "2.2",
            True,
        ),
        "null_in_child": (
            pa.StructArray.from_arrays([pa.array([1, None, 3, 4], pa.int32()), s], names=["i", "s"]),
            "2.2",
            True,
        ),
        "null_in_nested_child": (
            pa.StructArray.from_arrays(
                [
                    pa.array([1] * 4),
                    pa.StructArray.from_arrays([pa.array(["x", None, "y", "z"])], names=["q"]),
                ],
                names=["i", "t"],
            ),
            "2.2",
            True,
        ),
        "list_child": (
            pa.StructArray.from_arrays([s, pa.array([[1], [], [2, 3], [4]])], names=["s", "l"]),
            "2.2",
            False,
        ),
        "dictionary_child": (
            pa.StructArray.from_arrays([s, s.dictionary_encode()], names=["s", "d"]),
            "2.2",
            False,
        ),
        "null_child": (pa.StructArray.from_arrays([s, pa.nulls(4)], names=["s", "n"]), "2.2", False),
    }


@pytest.mark.parametrize("name", sorted(_refusals()))
def test_refused_as_pylance_refuses(tmp_path, name):
    arr, version, pylance_raises = _refusals()[name]
    table = _table(arr)
    with pytest.raises(PackedStructError, match="'r'") as info:
        _write_version(LanceFileWriter, str(tmp_path / "ours.lance"), table, version)
    assert all(isinstance(info.value, t) for t in (NotImplementedError, ValueError, OSError))
    with pytest.raises(OSError, match="'r'"):  # as pylance's write_dataset raises
        lance_table.write_dataset(table, str(tmp_path / "ds"), data_storage_version=version)
    assert not list((tmp_path).glob("ds/data/*.lance"))
    if pylance_raises:
        with pytest.raises((NotImplementedError, ValueError)):
            _write_version(lance_file.LanceFileWriter, str(tmp_path / "theirs.lance"), table, version)
        with pytest.raises(OSError):
            lance.write_dataset(table, str(tmp_path / "theirs_ds"), data_storage_version=version)


def _write_version(writer: type, path: str, table: pa.Table, version: str) -> None:
    with writer(path, table.schema, version=version) as w:
        w.write_batch(table)


def test_fixed_size_boolean_child(tmp_path):
    """Boolean lists filling whole bytes pack (null items do not: pylance fails on them)."""
    bits = pa.array([[k % 2 == 0, k % 3 == 0] * 4 for k in range(64)], pa.list_(pa.bool_(), 8))
    arr = pa.StructArray.from_arrays([pa.array([str(k) for k in range(64)]), bits], names=["s", "b"])
    ours = _write_ours(str(tmp_path / "ours.lance"), _table(arr))
    assert lance_file.LanceFileReader(ours).read_all().to_table().equals(_table(arr))
    with_null = pa.array([[True, None] * 4] * 64, pa.list_(pa.bool_(), 8))
    bad = pa.StructArray.from_arrays([arr.field(0), with_null], names=["s", "b"])
    with pytest.raises(PackedStructError, match="null items"):
        _write_ours(str(tmp_path / "bad.lance"), _table(bad))


def test_blob_descriptors_share_the_packing(tmp_path):
    """Blob v2 descriptors are packed structs too: many long external URIs get FSST, as pylance
    compresses them, and read back the same on both sides."""
    from lance.blob import blob_array

    target = tmp_path / "x.bin"
    target.write_bytes(b"0123456789" * 10)
    uris = [f"{target.as_uri()}?part={k % 37}&padding=abcdefghijklmnopqrstuvwxyz" for k in range(800)]
    table = pa.table({"id": pa.array(range(800), pa.int64()), "b": blob_array(uris)})
    for name, write in (("ours", lance_table.write_dataset), ("theirs", lance.write_dataset)):
        write(table, str(tmp_path / name), data_storage_version="2.2", allow_external_blob_outside_bases=True)
        (data_file,) = (tmp_path / name / "data").glob("*.lance")
        assert "fsst {" in describe(str(data_file), 1)
    ours = lance.dataset(str(tmp_path / "ours")).to_table().column("b")
    assert ours.to_pylist() == lance.dataset(str(tmp_path / "theirs")).to_table().column("b").to_pylist()
    assert (
        lance_table.dataset(str(tmp_path / "ours"))
        .to_table()
        .equals(lance_table.dataset(str(tmp_path / "theirs")).to_table())
    )
