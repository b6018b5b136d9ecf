"""Constant pages of the 2.2 writer: a page whose rows all hold one value (no nulls, no lists) is
written as pylance 14 writes it, the same layout and the same page buffers, and both libraries read
it back; 2.1 files and pages that are not constant keep their mini-block form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PylanceReader
from lance.file import LanceFileWriter as PylanceWriter

from lance_table.file.container import read_metadata, unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter
from lance_table.storage.sources import LocalFileSource

N = 100

CONSTANT = {
    "int64": pa.array(np.full(N, 7, np.int64)),
    "uint8": pa.array(np.full(N, 3, np.uint8)),
    "float16": pa.array(np.full(N, 1.5, np.float16)),
    "nan": pa.array(np.full(N, np.nan)),
    "true": pa.array(np.ones(N, bool)),
    "false": pa.array(np.zeros(N, bool)),
    "timestamp": pa.array(np.full(N, 5, "datetime64[ms]")),
    "decimal": pa.array([1] * N, pa.decimal128(10, 2)),
    "fixed32": pa.array([b"x" * 32] * N, pa.binary(32)),
    "string": pa.array(["topic-1"] * N),
    "empty_string": pa.array([""] * N),
    "large_string": pa.array(["topic-1"] * N, pa.large_string()),
    "binary": pa.array([b"ab"] * N),
    "one_row": pa.array([42]),
}
NOT_CONSTANT = {
    "last_differs": pa.array([1] * (N - 1) + [2]),
    "bool_last_differs": pa.array([True] * (N - 1) + [False]),
    "string_lengths": pa.array(["ab"] * (N - 1) + ["abc"]),
    "string_same_bytes": pa.array(["ab"] * (N - 2) + ["a", "b"]),  # the same bytes, other cuts
    "with_nulls": pa.array(np.full(N, 7), mask=np.arange(N) % 10 == 0),
    "dictionary": pa.array(["a"] * N).dictionary_encode(),
    "fixed_size_list": pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(4 * N, np.float32)), 4),
    "list": pa.array([[1, 1]] * N, pa.list_(pa.int64())),
    # a nullable struct's child has definition levels (its layers come from the schema)
    "struct": pa.StructArray.from_arrays([pa.array(np.full(N, 7))], ["a"]),
}


def _write_ours(path: Path, table: pa.Table, version: str) -> None:
    writer = LanceFileWriter(str(path), table.schema, version=version)
    writer.write(table)
    writer.close()


def _pages(path: Path) -> list[tuple[str, bytes, list[bytes]]]:
    """Each page's layout kind, serialized layout and buffers."""
    source = LocalFileSource(str(path))
    out = []
    for col in read_metadata(source).columns:
        for page in col.pages:
            _, layout = unpack_encoding(page.encoding, source, "page")
            ranges = [(int(o), int(s)) for o, s in zip(page.buffer_offsets, page.buffer_sizes)]
            buffers = [bytes(b) for b in source.read_ranges(ranges)] if ranges else []
            out.append((layout.WhichOneof("layout"), layout.SerializeToString(), buffers))
    source.close()
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each case written to a 2.2 file by each library."""
    root = tmp_path_factory.mktemp("constant")
    out = {}
    for name, arr in {**CONSTANT, **NOT_CONSTANT}.items():
        table = pa.table({"x": arr})
        ours, theirs = root / f"{name}.lance", root / f"{name}.pylance.lance"
        _write_ours(ours, table, "2.2")
        with PylanceWriter(str(theirs), table.schema, version="2.2") as writer:
            writer.write_batch(table)
        out[name] = (ours, theirs)
    return out


@pytest.mark.interop
@pytest.mark.parametrize("name", sorted(CONSTANT))
def test_constant_pages_are_pylances(written: dict[str, tuple[Path, Path]], name: str) -> None:
    ours, theirs = written[name]
    mine, pylance = _pages(ours), _pages(theirs)
    assert [kind for kind, _, _ in mine] == ["constant_layout"] * len(mine)
    assert mine == pylance
    table = pa.table({"x": CONSTANT[name]})
    for got in (PylanceReader(str(ours)).read_all().to_table(), LanceFileReader(str(ours)).read_all()):
        assert got.schema == table.schema
        if name == "nan":  # (NaN equals nothing)
            assert np.isnan(got["x"].to_numpy()).all() and got.num_rows == N
        else:
            assert got.equals(table)


@pytest.mark.interop
@pytest.mark.parametrize("name", sorted(NOT_CONSTANT))
def test_other_pages_keep_their_form(written: dict[str, tuple[Path, Path]], name: str) -> None:
    ours, _ = written[name]
    assert all(kind == "mini_block_layout" for kind, _, _ in _pages(ours))
    table = pa.table({"x": NOT_CONSTANT[name]})
    expected = table.combine_chunks()
    assert PylanceReader(str(ours)).read_all().to_table().equals(expected)
    assert LanceFileReader(str(ours)).read_all().equals(expected)


def test_2_1_files_have_no_constant_pages(tmp_path: Path) -> None:
    """pylance 14 writes no constant pages of a value to 2.1 files; nor does this writer."""
    path = tmp_path / "c.lance"
    table = pa.table({"x": CONSTANT["int64"], "s": CONSTANT["string"]})
    _write_ours(path, table, "2.1")
    assert {kind for kind, _, _ in _pages(path)} == {"mini_block_layout"}
    assert LanceFileReader(str(path)).read_all().equals(table)


@pytest.mark.interop
def test_pylances_wide_fixed_constants_are_read(tmp_path: Path) -> None:
    """pylance keeps a constant fixed-width value of more than 32 bytes in a buffer of its own
    (``[u32 1][u32 size][value]``); such pages read back, one file alone and files of a dataset
    (whose small files are read together), and this writer keeps them mini-block."""
    import lance

    import lance_table as lt

    for n in (1, 100):
        table = pa.table(
            {"w": pa.array([b"x" * 33] * n, pa.binary(33)), "v": pa.array([b"y" * 100] * n, pa.binary(100))}
        )
        path = tmp_path / f"wide{n}.lance"
        with PylanceWriter(str(path), table.schema, version="2.2") as writer:
            writer.write_batch(table)
        assert {kind for kind, _, _ in _pages(path)} == {"constant_layout"}
        assert LanceFileReader(str(path)).read_all().equals(table)
        uri = str(tmp_path / f"ds{n}")
        for i in range(3):
            lance.write_dataset(table, uri, mode="append" if i else "create", data_storage_version="2.2")
        expected = pa.concat_tables([table] * 3)
        dataset = lt.dataset(uri)
        assert dataset.to_table().equals(expected)
        assert dataset.take([0, 2 * n]).equals(expected.take([0, 2 * n]))
        ours = tmp_path / f"ours{n}.lance"
        _write_ours(ours, table, "2.2")
        assert {kind for kind, _, _ in _pages(ours)} == {"mini_block_layout"}
