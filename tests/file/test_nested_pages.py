"""Struct and list columns cut by pylance into many pages (its file writer with a small column
cache: a page per batch of a few hundred rows), read here with the pages of a leaf decoded in one
pass (:mod:`nested_pages`). Whole reads, ranges and takes across page boundaries, and a dataset
of such a file with and without deletions, match pylance's reads of the same file; the pages of
each leaf decoded together match them decoded one by one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyFileReader
from lance.file import LanceFileWriter as PyFileWriter

import lance_table as lt
from lance_table.file import LanceFileReader
from lance_table.file.field_shapes import leaf_paths
from lance_table.file.reader import LanceFileReader as CodecReader
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import batch_even, decode, nested_pages, nested_rows, repdef

ROWS = 2400
# batch sizes of the write: every batch is a page of each column, of uneven rows
BATCHES = [250, 100, 400, 150, 300, 200]


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    ids = np.arange(ROWS)
    names = [None if i % 13 == 5 else f"name-{i % 89}-{'abcdefgh' * (i % 3)}" for i in range(ROWS)]
    st = pa.StructArray.from_arrays(
        [pa.array(ids * 3), pa.array(names, pa.string())], ["a", "b"], mask=pa.array(ids % 17 == 3)
    )
    lengths = rng.integers(0, 5, ROWS)
    offs = np.zeros(ROWS + 1, np.int32)
    np.cumsum(lengths, out=offs[1:])
    n_items = int(offs[-1])
    words = np.array([f"word-{k}-of-some-text" for k in range(40)])
    tags = pa.ListArray.from_arrays(pa.array(offs), pa.array(words[np.arange(n_items) % 40]))
    items = pa.array([None if k % 7 == 3 else f"v{k % 11}" for k in range(n_items)], pa.string())
    holey = pa.ListArray.from_arrays(pa.array(offs), items, mask=pa.array(ids % 9 == 4))
    rec = pa.StructArray.from_arrays(
        [pa.array(np.arange(n_items, dtype=np.int32)), items],
        ["x", "y"],
        mask=pa.array(np.arange(n_items) % 10 == 6),
    )
    recs = pa.ListArray.from_arrays(pa.array(offs), rec, mask=pa.array(ids % 11 == 2))
    outer = np.zeros(ROWS + 1, np.int32)
    np.cumsum(ids % 3, out=outer[1:])
    inner = np.zeros(int(outer[-1]) + 1, np.int32)
    np.cumsum(np.arange(int(outer[-1])) % 4, out=inner[1:])
    lists = pa.ListArray.from_arrays(pa.array(inner), pa.array(np.arange(int(inner[-1]))))
    nested = pa.ListArray.from_arrays(pa.array(outer), lists, mask=pa.array(ids % 19 == 7))
    # long distinct strings: pylance stores some pages with FSST (a symbol table per page)
    urls = pa.array(
        [f"https://example.com/path/{k * 7919 % 100003}/item?id={k}&ref=abcdefghij" for k in range(n_items)]
    )
    links = pa.ListArray.from_arrays(pa.array(offs), urls)
    return pa.table(
        {"id": ids, "st": st, "tags": tags, "holey": holey, "recs": recs, "nested": nested, "links": links},
    )


def _batches(table: pa.Table) -> list[pa.Table]:
    out, at, k = [], 0, 0
    while at < table.num_rows:
        n = BATCHES[k % len(BATCHES)]
        out.append(table.slice(at, n))
        at, k = at + n, k + 1
    return out


@pytest.fixture(scope="module")
def paged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """A dataset of one fragment whose file pylance wrote a page per batch."""
    table = _table()
    uri = tmp_path_factory.mktemp("nested-pages") / "ds"
    ds = lance.write_dataset(table.slice(0, 1), uri, data_storage_version="2.2")
    frag = ds.get_fragments()[0].metadata
    path = uri / "data" / "paged.lance"
    with PyFileWriter(str(path), table.schema, version="2.2", data_cache_bytes=1024) as writer:
        for part in _batches(table):
            writer.write_batch(part)
    data_file = frag.files[0]
    data_file._path = "paged.lance"
    data_file.file_size_bytes = os.path.getsize(path)
    frag.files = [data_file]
    frag.physical_rows = ROWS
    lance.LanceDataset.commit(
        uri, lance.LanceOperation.Overwrite(table.schema, [frag]), read_version=ds.version
    )
    return uri, table


def test_file_has_many_pages_per_leaf(paged: tuple[Path, pa.Table]) -> None:
    uri, _ = paged
    reader = CodecReader(str(uri / "data" / "paged.lance"))
    nodes, _ = reader._project(["tags"])
    (leaf, _), *_ = leaf_paths(nodes[0], [nodes[0].to_arrow_field()])
    assert len(reader._column(leaf).page_starts) - 1 >= len(BATCHES)


def test_file_reads_match_pylance(paged: tuple[Path, pa.Table]) -> None:
    uri, table = paged
    path = str(uri / "data" / "paged.lance")
    ours, theirs = LanceFileReader(path), PyFileReader(path)
    whole = ours.read_all().to_table()
    assert whole.equals(theirs.read_all().to_table())
    assert whole.equals(table)
    # ranges that start and end inside pages and on their boundaries (pages of 250, 100, 400 rows)
    for start, n in [(240, 20), (250, 100), (249, 352), (0, 750), (345, 1700), (1000, ROWS - 1000)]:
        got = ours.read_range(start, n).to_table()
        assert got.equals(theirs.read_range(start, n).to_table()), (start, n)
    idx = np.unique(
        np.concatenate(
            [[0, 249, 250, 349, 350, 749, 750, ROWS - 1], np.random.default_rng(1).choice(ROWS, 200)]
        )
    )
    assert ours.take_rows(idx).to_table().equals(theirs.take_rows(idx).to_table())


def test_dataset_reads_match_pylance(paged: tuple[Path, pa.Table], tmp_path: Path) -> None:
    uri, _ = paged
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    assert ours.to_table().equals(theirs.to_table())
    for col in ("st", "tags", "holey", "recs", "nested", "links"):
        assert ours.to_table(columns=[col]).equals(theirs.to_table(columns=[col])), col
    idx = np.sort(np.random.default_rng(2).choice(ROWS, 150, replace=False))
    assert ours.take(idx).equals(theirs.take(idx))
    copy = tmp_path / "copy"
    shutil.copytree(uri, copy)
    lance.dataset(copy).delete("id % 7 = 1 OR (id >= 300 AND id < 420)")
    ours, theirs = lt.dataset(copy), lance.dataset(copy)
    assert ours.to_table().equals(theirs.to_table())
    assert ours.to_table(columns=["recs"]).equals(theirs.to_table(columns=["recs"]))
    assert ours.take([0, 249, 250, 1000]).equals(theirs.take([0, 249, 250, 1000]))


def test_pages_decoded_together_match_one_by_one(paged: tuple[Path, pa.Table]) -> None:
    uri, _ = paged
    reader = CodecReader(str(uri / "data" / "paged.lance"))
    joined = 0
    for name in ("st", "tags", "holey", "recs", "nested", "links"):
        nodes, _ = reader._project([name])
        for leaf, path in leaf_paths(nodes[0], [nodes[0].to_arrow_field()]):
            col = reader._column(leaf)
            pages = list(reader._pages(col, Runs.span(0, ROWS), prefetch=False))
            layouts = [col.encoding(p, reader._source) for p, _, _ in pages]
            one_by_one = [
                decode.decode_nested_page(lay, io, path, True, local)
                for (_, local, io), lay in zip(pages, layouts)
            ]
            for group in nested_pages.plan(pages, layouts, 1):
                # the group, and its pages but the first and the last
                for lo, hi in {(group[0], group[-1] + 1), (group[0] + 1, group[-1])}:
                    if hi - lo < 2:
                        continue
                    ios = [io for _, _, io in pages[lo:hi]]
                    got = nested_pages.decode(layouts[lo:hi], ios, path, True)
                    assert got is not None, (name, leaf.name)
                    assert got.equals(pa.concat_arrays(one_by_one[lo:hi])), (name, leaf.name, lo, hi)
                    joined += 1
    assert joined >= 10


def test_levels_that_do_not_join_at_page_boundaries_are_refused() -> None:
    layers = [repdef.ALL_VALID_ITEM, repdef.EMPTYABLE_LIST]
    # two pages of 2 rows each: [[a, b], []] then [[c], [d, e]]
    rep = np.array([1, 0, 1, 1, 1, 0], np.uint16)
    defs = np.array([0, 0, 1, 0, 0, 0], np.uint16)
    good = repdef.whole_rows(rep, defs, layers, np.array([3, 3]), np.array([2, 2]), np.array([2, 3]))
    assert good
    # the second page starting inside a row, rows or values counted in the wrong page
    assert not repdef.whole_rows(rep, defs, layers, np.array([2, 4]), np.array([2, 2]), np.array([2, 3]))
    assert not repdef.whole_rows(rep, defs, layers, np.array([3, 3]), np.array([1, 3]), np.array([2, 3]))
    assert not repdef.whole_rows(rep, defs, layers, np.array([3, 3]), np.array([2, 2]), np.array([3, 2]))


class _Page:
    def corrupt(self, problem: str) -> ValueError:
        return ValueError(problem)


def _chunked_offsets(
    counts: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chunks of ``counts`` variable-width values, as their offsets words back to back (each
    chunk's from its buffer start), their buffer sizes and the offsets of the values joined."""
    words, sizes, joined = [], [], [0]
    for c in counts.tolist():
        lengths = rng.integers(0, 5, c)
        base = (c + 1) * 4 + int(rng.integers(0, 3))
        offs = base + np.concatenate([[0], np.cumsum(lengths)])
        words.append(offs)
        sizes.append(int(offs[-1]) + int(rng.integers(0, 3)))
        joined.extend((joined[-1] + np.cumsum(lengths)).tolist())
    return np.concatenate(words).astype(np.uint32), np.array(sizes), np.array(joined)


def test_offsets_of_pages_of_even_chunks_join_at_each_page_end() -> None:
    rng = np.random.default_rng(5)
    for _ in range(40):
        # pages of even chunks of 4 values, each page's last chunk shorter (or empty)
        pages = [np.append(np.full(int(rng.integers(1, 6)), 4), rng.integers(0, 4)) for _ in range(4)]
        counts = np.concatenate(pages)
        words, sizes, want = _chunked_offsets(counts, rng)
        lo, hi, got = batch_even.segmented_offsets(words, counts, sizes, 4, _Page())
        assert np.array_equal(got, want)
        assert np.array_equal(hi - lo, np.diff(np.append(0, want[np.cumsum(counts)])))
    # an offset out of order inside a chunk is damage, even next to a chunk boundary
    counts = np.array([4, 4, 2, 4, 3])
    words, sizes, _ = _chunked_offsets(counts, rng)
    words[6] = words[7] + 1
    with pytest.raises(ValueError, match="out of order"):
        batch_even.segmented_offsets(words, counts, sizes, 4, _Page())


def test_rows_of_many_pages_decoded_together_match_one_by_one(paged: tuple[Path, pa.Table]) -> None:
    uri, _ = paged
    reader = CodecReader(str(uri / "data" / "paged.lance"))
    wanted = np.unique(
        np.concatenate(
            [[0, 249, 250, 349, 350, 749, 750, ROWS - 1], np.random.default_rng(4).choice(ROWS, 120)]
        )
    )
    runs = Runs(wanted, np.ones(wanted.size, np.int64))
    joined = 0
    for name in ("tags", "holey", "recs", "nested", "links"):
        nodes, _ = reader._project([name])
        for leaf, path in leaf_paths(nodes[0], [nodes[0].to_arrow_field()]):
            col = reader._column(leaf)
            pages = list(reader._pages(col, runs, prefetch=False))
            layouts = [col.encoding(p, reader._source) for p, _, _ in pages]
            one_by_one = [
                decode.decode_nested_page(lay, io, path, True, local)
                for (_, local, io), lay in zip(pages, layouts)
            ]
            for group in nested_pages.plan(pages, layouts, 1):
                if len(group) < 2:
                    continue
                chosen = [pages[j] for j in group]
                got = nested_rows.decode([layouts[j] for j in group], chosen, path, True)
                assert got is not None, (name, leaf.name)
                assert got.equals(pa.concat_arrays([one_by_one[j] for j in group])), (name, leaf.name)
                joined += 1
    assert joined >= 3


def _damaged_copy(
    uri: Path, tmp_path: Path, name: str, page: int, buffer: int, at: int, byte: int | None
) -> str:
    """A copy of the paged file with one byte (``byte``; None: the whole buffer zeroed) of buffer
    ``buffer`` of page ``page`` of the leaf of column ``name`` changed."""
    src = str(uri / "data" / "paged.lance")
    reader = CodecReader(src)
    nodes, _ = reader._project([name])
    (leaf, _), *_ = leaf_paths(nodes[0], [nodes[0].to_arrow_field()])
    col = reader._column(leaf)
    pages = list(reader._pages(col, Runs.span(0, ROWS), prefetch=False))
    offset, size = pages[page][2].buffers[buffer]
    data = bytearray(Path(src).read_bytes())
    if byte is None:
        data[offset : offset + size] = bytes(size)
    else:
        assert data[offset + at] != byte
        data[offset + at] = byte
    out = tmp_path / f"{name}-{page}-{buffer}-{at}.lance"
    out.write_bytes(bytes(data))
    return str(out)


def test_take_from_pages_with_damaged_levels_or_index_is_refused(
    paged: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    from lance_table.errors import CorruptFileError

    uri, _ = paged
    rows = np.unique(
        np.concatenate(
            [[0, 249, 250, 349, 350, 749, 750, ROWS - 1], np.random.default_rng(4).choice(ROWS, 120)]
        )
    )
    # a byte of the levels of a chunk of the third page (its rows' starts no longer those of its
    # repetition index: decoded with the next pages, a row's levels came from another page), and
    # a zeroed repetition index (no row starts anywhere: an IndexError)
    for page, buffer, at, byte in [(2, 1, 44, 17), (2, 2, 0, None)]:
        path = _damaged_copy(uri, tmp_path, "nested", page, buffer, at, byte)
        with pytest.raises(CorruptFileError, match=path.rsplit("/", 1)[-1]):
            LanceFileReader(path).take_rows(rows).to_table()
