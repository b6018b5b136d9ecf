"""Where 2.0 pages end: as in pylance's 2.0 writer, a column's buffered arrays become one page once
they pass the page size (however far past), and an array past it alone is split into even pages
of at most ``max_page_bytes``. pylance is the oracle: the same batches make pages of the same rows,
and pylance reads every type back from pages made this way."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal
from typecases import compression_cases, type_cases

import lance_table as lt
from lance_table.file import LanceFileWriter as ApiWriter
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter

lance = pytest.importorskip("lance")
lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

CASES = {**type_cases(), **compression_cases()}


def _page_rows(path) -> list[list[int]]:
    return [[p.length for p in c.pages] for c in LanceFileReader(path).metadata.columns]


def _own_batches(table: pa.Table, sizes: list[int]) -> list[pa.RecordBatch]:
    """``table`` cut into batches of ``sizes`` rows, each with buffers of its own (a slice would
    be counted by pylance at the size of the buffers it shares)."""
    out, start = [], 0
    for n in sizes:
        out.extend(table.take(pa.array(np.arange(start, start + n))).to_batches())
        start += n
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_pylance_reads_pages_of_several_batches_and_split_batches(tmp_path, name):
    table = CASES[name]
    n = table.num_rows
    sizes = [n - 11, 1, 2, 5, 3]  # the first batch is split; the small ones gather into a page
    path = tmp_path / "ours.lance"
    with LanceFileWriter(
        path, table.schema, page_size_bytes=table.nbytes // 8 + 256, max_page_bytes=table.nbytes // 10 + 1
    ) as w:
        for batch in _own_batches(table, sizes):
            w.write(batch)
    pages = _page_rows(path)
    if table.nbytes > 1000:  # (the first batch is past the page size alone)
        assert max(len(p) for p in pages) > 2
    got = lance_file.LanceFileReader(str(path)).read_all().to_table()
    assert_tables_equal(got, table)
    assert_tables_equal(LanceFileReader(path).read_all(), table)


def _shape_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    null = rng.random(n) < 0.1
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "x": pa.array(rng.random(n), mask=null),
            "s": pa.array([f"value-{i}" * (1 + i % 3) for i in rng.integers(0, 10**6, n)]),
            "b": pa.array(rng.random(n) < 0.5),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8),
        }
    )


@pytest.mark.parametrize(
    "sizes",
    [[20_000], [500] * 40, [3000, 200, 9000, 50, 7000, 750], [100] * 7 + [12_000] + [100] * 30],
    ids=["one", "many-small", "mixed", "small-big-small"],
)
def test_file_pages_end_where_pylance_ends_them(tmp_path, sizes):
    table = _shape_table(sum(sizes), 5)
    batches = _own_batches(table, sizes)
    opts = {"version": "2.0", "data_cache_bytes": 5 * 40_000, "max_page_bytes": 90_000}
    for lib, name in ((lt.file, "ours.lance"), (lance_file, "theirs.lance")):
        writer = ApiWriter if lib is lt.file else lance_file.LanceFileWriter
        with writer(str(tmp_path / name), table.schema, **opts) as w:
            for batch in batches:
                w.write_batch(batch)
    ours, theirs = _page_rows(tmp_path / "ours.lance"), _page_rows(tmp_path / "theirs.lance")
    assert ours == theirs
    assert max(len(p) for p in ours) > 1
    assert_tables_equal(lance_file.LanceFileReader(str(tmp_path / "ours.lance")).read_all().to_table(), table)


@pytest.mark.parametrize("sizes", [[150_000], [5_000] * 30], ids=["one-batch", "batches"])
def test_dataset_pages_end_where_pylance_ends_them(tmp_path, sizes):
    """At the default 8 MiB a column (32 MiB pages): a 150k-row batch of 64 float32s (38 MB) is two
    pages, not five of 8 MiB; 5k-row batches gather until they pass 8 MiB."""
    n = sum(sizes)
    rng = np.random.default_rng(1)
    table = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "text": pa.array([f"t{i:060d}" for i in range(n)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 64, dtype=np.float32)), 64),
        }
    )
    data = pa.Table.from_batches(_own_batches(table, sizes))
    lt.write_dataset(data, str(tmp_path / "ours"), data_storage_version="2.0")
    lance.write_dataset(data, str(tmp_path / "theirs"), data_storage_version="2.0")
    (ours,) = (tmp_path / "ours" / "data").iterdir()
    (theirs,) = (tmp_path / "theirs" / "data").iterdir()
    assert _page_rows(ours) == _page_rows(theirs)
    assert len(_page_rows(ours)[2]) == (2 if len(sizes) == 1 else 5)
    assert_tables_equal(lance.dataset(str(tmp_path / "ours")).to_table(), table)
