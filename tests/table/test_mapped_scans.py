"""Scans of local 2.1/2.2 files read their pages through a memory map of the data file
(``lance_table.file.mapped_pages``), and nothing they return views the map: files written by either
library, flat, nested, dictionary and string columns, read as pylance reads them. 2.0 files (whose
plain values would view the map), takes and short spans read as before."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal, varied_table

import lance_table as lt
from lance_table.file import mapped_pages
from lance_table.storage import mapped as mapped_module
from lance_table.storage.mapped import MappedFileSource, mapped
from lance_table.storage.sources import LocalFileSource

ROWS = 70_000  # (above MAPPED_ROWS: one fragment's span is a scan's)


def _table() -> pa.Table:
    return varied_table(ROWS, 8, wide=True)


def _spans(views: list[MappedFileSource | None]) -> list[tuple[int, int]]:
    return [(np.frombuffer(v._view, np.uint8).ctypes.data, len(v._view)) for v in views if v is not None]


def _views_a_map(table: pa.Table, spans: list[tuple[int, int]]) -> bool:
    return any(
        mapped_module._views(chunk, start, start + size)
        for column in table.columns
        for chunk in column.chunks
        for start, size in spans
    )


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_scans_read_through_a_map_and_return_nothing_that_views_it(
    tmp_path, monkeypatch: pytest.MonkeyPatch, version: str, writer: str
) -> None:
    table = _table()
    uri = str(tmp_path / "ds")
    (lt if writer == "lance_table" else lance).write_dataset(table, uri, data_storage_version=version)
    made: list[MappedFileSource | None] = []

    def spy(source: LocalFileSource) -> MappedFileSource | None:
        made.append(mapped(source))
        return made[-1]

    monkeypatch.setattr(mapped_pages, "mapped", spy)
    want = lance.dataset(uri).to_table()
    got = lt.dataset(uri).to_table()
    assert_tables_equal(got, want)
    assert len(made) == (0 if version == "2.0" else 1)
    assert not _views_a_map(got, _spans(made))
    streamed = pa.Table.from_batches(list(lt.dataset(uri).to_batches(batch_size=ROWS)))
    assert_tables_equal(streamed, want)
    made.clear()
    idx = np.sort(np.random.default_rng(1).choice(ROWS, 300, replace=False))
    assert_tables_equal(lt.dataset(uri).take(idx), lance.dataset(uri).take(idx))
    small = lt.dataset(uri).to_table(filter="id >= 100 AND id < 600")
    assert_tables_equal(small, lance.dataset(uri).to_table(filter="id >= 100 AND id < 600"))
    assert made == []  # (a take and a short span are read, not mapped)


def test_arrays_that_view_the_map_are_copied_and_others_kept(tmp_path) -> None:
    """``owned``: an array on the map's bytes, a dictionary array whose dictionary is on them and
    a struct with such a child are copied (same values, no buffer left in the map); arrays in
    memory of their own come back as they are."""
    values = np.arange(1000, dtype=np.int64)
    path = tmp_path / "f.bin"
    path.write_bytes(values.tobytes())
    view = mapped(LocalFileSource(str(path)))
    assert view is not None
    on_map = pa.Array.from_buffers(pa.int64(), 1000, [None, pa.py_buffer(view.read_ranges([(0, 8000)])[0])])
    words = pa.Array.from_buffers(pa.int64(), 10, [None, pa.py_buffer(view.read_ranges([(80, 80)])[0])])
    dictionary = pa.DictionaryArray.from_arrays(pa.array([0, 3, 9, 3], pa.int32()), words)
    struct = pa.StructArray.from_arrays([pa.array(np.arange(1000)), on_map], names=["a", "b"])
    own = pa.array(np.arange(5))
    got = view.owned([on_map, dictionary, struct, own])
    start, size = _spans([view])[0]
    assert got[3] is own
    for before, after in zip([on_map, dictionary, struct], got[:3]):
        assert after is not before and after.equals(before)
        assert mapped_module._views(before, start, start + size)
        assert not mapped_module._views(after, start, start + size)
