"""Scans after deletes read the pages of which they keep only some rows through a memory map of
the data file (``lance_table.storage.mapped``). The rows must be pylance's reading of the same
dataset: files of 2.0, 2.1 and 2.2 written by either library (ours in small pages, so that
whole pages are deleted and deletes fall in the first and last pages), nested columns present,
rows deleted here and there, every n-th, in ranges, at random. pylance's 2.1/2.2 files hold FSST
strings, of which only the kept rows are decompressed."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal, varied_table

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file import mapped_pages, reader_small
from lance_table.file import reader as reader_module
from lance_table.file import writer as file_writer
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.miniblock import _kept_var
from lance_table.file.v2_1.values import Var
from lance_table.storage.mapped import MappedFileSource, mapped
from lance_table.storage.sources import BytesSource, LocalFileSource
from lance_table.table import scan

ROWS = 6000
# rows deleted by the first delete: every 7th, a span of whole pages, rows of the first and last pages
FIRST = f"id % 7 = 3 OR (id >= 2048 AND id < 3072) OR id IN (0, 1, 5, {ROWS - 4}, {ROWS - 1})"


def _table() -> pa.Table:
    return varied_table(ROWS, 5)


@pytest.fixture(scope="module", params=["2.0", "2.1", "2.2"])
def datasets(request, tmp_path_factory):
    """The same table as a dataset of two fragments written by each library, pylance's reading of
    each after the first delete, and the random rows the second delete removes."""
    version = request.param
    root = tmp_path_factory.mktemp(f"mapped-{version}")
    table = _table()
    mp = pytest.MonkeyPatch()
    kw = dict(file_writer.LanceFileWriter.__init__.__kwdefaults__)
    mp.setattr(file_writer.LanceFileWriter.__init__, "__kwdefaults__", {**kw, "page_size_bytes": 4096})
    try:
        lt.write_dataset(table, str(root / "ours"), data_storage_version=version, max_rows_per_file=ROWS // 2)
    finally:
        mp.undo()
    lance.write_dataset(
        table, str(root / "pylance"), data_storage_version=version, max_rows_per_file=ROWS // 2
    )
    rng = np.random.default_rng(11)
    second = rng.choice(ROWS, ROWS // 10, replace=False).tolist()
    uris = [str(root / "ours"), str(root / "pylance")]
    for uri in uris:
        lance.dataset(uri).delete(FIRST)
    return uris, second


def _compare(uri: str) -> None:
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    assert_tables_equal(ours.to_table(), theirs.to_table())
    columns = ["text", "vec", "id"]
    assert_tables_equal(ours.to_table(columns=columns), theirs.to_table(columns=columns))
    got = pa.Table.from_batches(list(ours.to_batches(batch_size=700)))
    assert_tables_equal(got, theirs.to_table())


def _kept_maps(monkeypatch: pytest.MonkeyPatch) -> list[MappedFileSource | None]:
    """The maps the reader makes from now on (the list fills as scans run)."""
    maps: list[MappedFileSource | None] = []

    def counting(source):
        view = mapped(source)
        maps.append(view)
        return view

    monkeypatch.setattr(mapped_pages, "mapped", counting)
    return maps


def test_scans_after_deletes_read_as_pylance_reads_them(datasets, monkeypatch):
    uris, second = datasets
    monkeypatch.setattr(scan, "TABLE_RANGE_ROWS", 1000)  # ranges inside the fragments
    maps = _kept_maps(monkeypatch)
    monkeypatch.setattr(reader_module, "PARALLEL_MIN_VALUES", 0)  # never the small-file read
    for uri in uris:
        _compare(uri)
    assert maps and all(isinstance(m, MappedFileSource) for m in maps)
    for k, uri in enumerate(uris):  # random rows deleted too, by each library
        ids = ", ".join(map(str, second))
        (lt.dataset(uri) if k else lance.dataset(uri)).delete(f"id IN ({ids})")
        _compare(uri)


def test_mapped_source_serves_the_files_bytes(tmp_path):
    path = tmp_path / "f.bin"
    data = bytes(range(256)) * 300
    path.write_bytes(data)
    source = mapped(LocalFileSource(path))
    assert source is not None and source.size() == len(data) and source.name == str(path)
    ranges = [(0, 10), (70_000, 5000), (len(data) - 3, 3), (100, 0)]
    assert [bytes(v) for v in source.read_ranges(ranges)] == [data[o : o + n] for o, n in ranges]
    assert bytes(source.read_joined(np.array([(5, 7), (900, 3)]))) == data[5:12] + data[900:903]
    assert bytes(source.read_joined([(64, 64)])) == data[64:128]
    with pytest.raises(CorruptFileError, match="outside the file"):
        source.read_ranges([(len(data) - 2, 3)])
    (tmp_path / "empty.bin").write_bytes(b"")
    assert mapped(LocalFileSource(tmp_path / "empty.bin")) is None


def test_kept_fsst_strings_with_offsets_out_of_order_are_corrupt():
    io = PageIO(BytesSource(b"", name="f.lance"), None, None, (), "column 3 page 0", buffers=())
    values = Var(b"abcdefgh", np.array([0, 4, 2, 8], np.int64), b"symbols")
    with pytest.raises(CorruptFileError, match="out of order"):
        _kept_var(values, 0, pa.array([True, False, True]), io)
    with pytest.raises(CorruptFileError, match="needed"):
        _kept_var(values, 2, pa.array([True, False, True]), io)


@pytest.mark.parametrize("version", ["2.0", "2.2"])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_results_hold_no_view_of_the_map(tmp_path, monkeypatch, writer, version):
    """A dictionary-typed column read from partly kept dictionary pages: the result's dictionary
    is a copy, so no map outlives the read (a map kept alive pins the file, and on some systems
    keeps it from being removed)."""
    n = 5000
    ids = np.arange(n, dtype=np.int64)
    words = pa.array(["alpha", "beta", "gamma"])
    cat = pa.DictionaryArray.from_arrays(pa.array(ids % 3, pa.int32()), words)
    table = pa.table({"id": ids, "cat": cat})
    uri = str(tmp_path / "dict")
    (lt if writer == "ours" else lance).write_dataset(table, uri, data_storage_version=version)
    lance.dataset(uri).delete("id % 7 = 3")
    maps = _kept_maps(monkeypatch)
    monkeypatch.setattr(reader_module, "PARALLEL_MIN_VALUES", 0)
    monkeypatch.setattr(reader_small, "PARALLEL_MIN_VALUES", 0)
    monkeypatch.setattr(scan, "TABLE_RANGE_ROWS", 1000)
    got = lt.dataset(uri).to_table()
    assert_tables_equal(got, lance.dataset(uri).to_table())
    assert maps
    for m in maps:
        if m is None:
            continue
        region = m._view.obj
        m._view.release()
        region.close()  # BufferError while any array still views the map
    assert got.column("cat").to_pylist() == table.filter(pa.array(ids % 7 != 3)).column("cat").to_pylist()
