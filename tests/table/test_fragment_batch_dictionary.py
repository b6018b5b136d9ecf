"""Many small fragments whose columns are dictionary-encoded or run-length encoded (what both
libraries write for a category column, a sorted code or a low-cardinality integer) read as
batches: the same rows, filters, takes and deletes as pylance, and a damaged file named."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.v2_1 import small_layouts
from lance_table.table import fragment_batch
from lance_table.table.readers import READERS

CATS = np.array(["red", "green", "blue", "cyan", "magenta"])


pytestmark = pytest.mark.usefixtures("empty_caches")


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    wide = seed % 4 == 3  # now and then a page of many distinct strings: no dictionary
    cat = [f"name-{i}" for i in range(start, start + n)] if wide else CATS[rng.integers(0, 5, n)]
    return pa.table(
        {
            "id": np.arange(start, start + n, dtype=np.int64),
            "cat": pa.array(cat, pa.string(), mask=rng.random(n) < 0.2),
            "tag": pa.array(np.repeat(np.roll(CATS, seed), -(-n // 5))[:n]),  # runs
            "code": pa.array(np.repeat(np.arange(12, dtype=np.int32), -(-n // 12))[:n] + seed),
            "level": pa.array(rng.integers(0, 3, n).astype(np.int64)),
        }
    )


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def written(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    """Appends of 60 to 300 rows alternating between the two libraries."""
    uri = str(tmp_path_factory.mktemp("dict") / "ds")
    start = 0
    for i in range(14):
        n = [300, 60, 120, 250][i % 4]
        write = lance.write_dataset if i % 2 else lt.write_dataset
        write(_rows(start, n, i), uri, mode="append" if i else "create", data_storage_version=request.param)
        start += n
    return uri


@pytest.fixture()
def many(written: str, tmp_path: Path) -> str:
    uri = str(tmp_path / "ds")
    shutil.copytree(written, uri)
    return uri


def test_the_dataset_holds_dictionaries_and_runs(written: str) -> None:
    text = " ".join(
        c.pages[0].encoding
        for f in sorted((Path(written) / "data").glob("*.lance"))
        for c in LanceFileReader(str(f)).metadata().columns
    )
    assert "dictionary: Some" in text and "Rle" in text and "InlineBitpacking" in text


def test_dictionary_and_run_columns_are_batched(written: str) -> None:
    frags = lt.dataset(written)._snapshot.fragment_readers()
    for columns in (["cat"], ["tag", "code"], ["level", "id"], ["cat", "tag", "code", "level"]):
        assert fragment_batch.plans(frags, columns).count(None) == 0, columns


def test_scans_filters_and_takes_equal_pylance(written: str) -> None:
    ours, theirs = lt.dataset(written), lance.dataset(written)
    assert ours.to_table().equals(theirs.to_table())
    for cols in (["cat"], ["tag", "code", "level"]):
        assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols))
    for flt in ["cat = 'blue'", "cat IS NULL", "tag = 'cyan' AND code > 5", "level = 2", "code < 3"]:
        got = ours.to_table(filter=flt, with_row_id=True)
        assert got.equals(theirs.to_table(filter=flt, with_row_id=True)), flt
    n = theirs.count_rows()
    picks = [*np.random.default_rng(3).choice(n, 150, replace=False).tolist(), 0, n - 1]
    assert ours.take(picks).equals(theirs.take(picks))


def test_deletes_then_reads_equal_pylance(many: str, tmp_path: Path) -> None:
    copy = str(tmp_path / "copy")
    shutil.copytree(many, copy)
    lt.dataset(many).delete("cat = 'red' OR code = 4")
    lance.dataset(copy).delete("cat = 'red' OR code = 4")
    ours, theirs = lt.dataset(many), lance.dataset(copy)
    assert ours.to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))
    flt = "tag <> 'green'"
    assert ours.to_table(columns=["cat", "tag"], filter=flt).equals(
        theirs.to_table(columns=["cat", "tag"], filter=flt)
    )
    assert lance.dataset(many).to_table().equals(theirs.to_table())


def test_an_index_past_its_dictionary_is_named(many: str) -> None:
    ds = lt.dataset(many)
    frag = ds._snapshot.manifest.fragments[2]  # ours: plain 32-bit indices into its dictionary
    lay = small_layouts.layout(READERS.get(ds._snapshot.storage, frag.files[0]), ["tag"])
    assert lay is not None and lay.columns[0].dict_at >= 0
    path = Path(many) / "data" / frag.files[0].path
    raw = bytearray(path.read_bytes())
    column = lay.columns[0]
    runs_at = lay.start + column.data_at + (column.page.header.size + 7) // 8 * 8
    raw[runs_at : runs_at + 4] = (10**6).to_bytes(4, "little")  # the first run's dictionary index
    path.write_bytes(bytes(raw))
    READERS.clear()
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(many).to_table(columns=["tag"])


def test_pages_of_many_run_length_chunks_equal_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "runs")
    n = 200_000
    data = pa.table({"code": np.repeat(np.arange(n // 500, dtype=np.int64), 500), "id": np.arange(n)})
    lance.write_dataset(data, uri, data_storage_version="2.2")
    (f,) = (Path(uri) / "data").glob("*.lance")
    assert "Rle" in LanceFileReader(str(f)).metadata().columns[0].pages[0].encoding
    ours = lt.dataset(uri)
    assert ours.to_table().equals(data)
    assert ours.to_table(filter="code = 77").equals(data.filter(pa.compute.equal(data["code"], 77)))
    picks = [0, 499, 500, n - 1]
    assert ours.take(picks, columns=["code"]).equals(data.take(picks).select(["code"]))


def test_a_damaged_dictionary_among_many_is_named(many: str) -> None:
    """A file whose dictionary block does not check out (an offset past its values in 2.1's
    plain block, a length header past what LZ4 can make in 2.2's) is named, though the files'
    dictionaries are decoded together; the files beside it read as pylance reads them."""
    ds = lt.dataset(many)
    frag = ds._snapshot.manifest.fragments[2]
    lay = small_layouts.layout(READERS.get(ds._snapshot.storage, frag.files[0]), ["cat"])
    assert lay is not None and lay.columns[0].dict_at >= 0
    column = lay.columns[0]
    at = lay.start + column.dict_at
    path = Path(many) / "data" / frag.files[0].path
    raw = bytearray(path.read_bytes())
    if column.dict_encoding.WhichOneof("compression") == "general":
        raw[at : at + 4] = (10**8).to_bytes(4, "little")  # the decompressed length it claims
    else:
        raw[at + 12 : at + 16] = (10**6).to_bytes(4, "little")  # the second item's end
    path.write_bytes(bytes(raw))
    READERS.clear()
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(many).to_table(columns=["cat"])
    theirs = lance.dataset(many)
    others = [f for f in theirs.get_fragments() if f.fragment_id != frag.id]
    ours = lt.dataset(many)
    mine = [ours.get_fragment(f.fragment_id) for f in others]
    got = ours.scanner(columns=["cat"], fragments=mine).to_table()
    assert got.equals(theirs.scanner(columns=["cat"], fragments=others).to_table())
