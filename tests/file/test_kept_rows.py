"""Reads of many scattered runs (the live rows of a range with deletions) and of a few long runs
(the rows around a deleted range) from multi-page files: every page selects its kept rows as it
is decoded, a page with none is skipped, a page holding a few long runs decodes each as a span.
The rows read must be pylance's reading of the same file, at those positions."""

from __future__ import annotations

import lance.file
import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

from lance_table.file import page_select
from lance_table.file import reader as reader_module
from lance_table.file.reader import LanceFileReader
from lance_table.file.runs import Runs
from lance_table.file.writer import LanceFileWriter

ROWS = 10_000


def _table() -> pa.Table:
    ids = np.arange(ROWS, dtype=np.int64)
    words = np.array(["red", "green", "blue", "amber"], dtype=object)
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array(ids * 0.5, mask=ids % 11 == 0),
            "cat": pa.array(words[ids % 4], pa.string(), mask=ids % 17 == 0),  # dictionary in 2.2
            "text": pa.array([f"text-{i * 7919 % 100003}" for i in ids.tolist()]),
            "tags": pa.array([["a", "b"][: i % 3] for i in ids.tolist()], pa.list_(pa.string())),
        }
    )


@pytest.fixture(scope="module", params=[("2.0", 4096), ("2.2", 4096), ("2.0", None), ("2.2", None)], ids=str)
def files(request, tmp_path_factory):
    """A file of :func:`_table` in pages of 4 KiB (several per column; in 2.2, of one chunk each)
    or of the default size (one per column; in 2.2, of many chunks, the strings of few values
    as dictionaries), and pylance's reading of it."""
    version, page_bytes = request.param
    path = tmp_path_factory.mktemp("kept") / f"data-{version}.lance"
    table = _table()
    sizes = {"page_size_bytes": page_bytes} if page_bytes else {}
    with LanceFileWriter(path, table.schema, version=version, **sizes) as w:
        for batch in table.to_batches(max_chunksize=2000):
            w.write(batch)
    expected = lance.file.LanceFileReader(str(path)).read_all().to_table()
    return path, expected


def _selections() -> dict[str, np.ndarray]:
    ids = np.arange(ROWS)
    return {
        "every 10th deleted": ids[ids % 10 != 0],
        "every 10th deleted, from row 1": ids[(ids % 10 != 0) & (ids > 0)],
        "a range deleted": ids[(ids < 4000) | (ids >= 6000)],
        "two ranges deleted": ids[(ids < 3000) | ((ids >= 4000) & (ids < 7000)) | (ids >= 7100)],
        "a range and scattered rows deleted": ids[((ids < 3000) | (ids >= 6200)) & (ids % 7 != 3)],
    }


@pytest.mark.parametrize("general", [False, True], ids=["small read", "decoded on threads"])
@pytest.mark.parametrize("name", list(_selections()))
def test_runs_read_as_pylance_reads_them(files, monkeypatch, name, general):
    path, expected = files
    if general:  # every read decodes its pages as jobs of the decoding threads
        monkeypatch.setattr(reader_module, "PARALLEL_MIN_VALUES", 0)
    monkeypatch.setattr(page_select, "SPLIT_MIN_ROWS", 64)  # small pages read run by run too
    positions = _selections()[name]
    reader = LanceFileReader(path)
    got = reader.read_runs(Runs.from_sorted_unique(positions))
    assert_tables_equal(got, expected.take(pa.array(positions)))
    # a projection, and the same rows within a range that starts and ends inside pages
    inner = positions[(positions >= 123) & (positions < 9890)]
    got = reader.read_runs(Runs.from_sorted_unique(inner), ["text", "cat"])
    assert_tables_equal(got, expected.select(["text", "cat"]).take(pa.array(inner)))


def test_a_deleted_span_of_whole_pages_is_not_decoded(files, monkeypatch):
    path, expected = files
    monkeypatch.setattr(reader_module, "PARALLEL_MIN_VALUES", 0)
    ids = np.arange(ROWS)
    positions = ids[((ids < 2000) | (ids >= 8000)) & (ids % 5 != 0)]  # dense overall, none in between
    reader = LanceFileReader(path)
    decoded = []
    real = reader._decode_page if not reader._structural else reader._decode_structural

    def counting(col, page, *args, **kwargs):
        decoded.append(page)
        return real(col, page, *args, **kwargs)

    monkeypatch.setattr(reader, "_decode_structural" if reader._structural else "_decode_page", counting)
    got = reader.read_runs(Runs.from_sorted_unique(positions), ["id"])
    assert_tables_equal(got, expected.select(["id"]).take(pa.array(positions)))
    pages = reader._column(reader._roots[0]).page_starts
    middle = {p for p in range(len(pages) - 1) if pages[p] >= 2000 and pages[p + 1] <= 8000}
    if len(pages) > 2:
        assert middle, "the file must have pages inside the gap"
    assert not middle & set(decoded)
