"""Struct and list fields of many small fragments read as batches (the leaf pages of all files
decoded as the chunks of one page): the same rows, row ids, filters, takes and scans after deletes
as pylance, on files either library wrote, and a damaged file named as a read fragment by
fragment names it."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.field_shapes import leaf_paths
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import small_layouts, small_many, small_nested
from lance_table.table import fragment_batch, fragment_reads
from lance_table.table.readers import READERS

NESTED = ["st", "inner", "req", "tags", "nums", "meta"]
# constant pages (all null, or pylance 2.2's pages of one value) of fields with and without nesting
CONSTANT = ["src", "ver", "opt", "meta"]


pytestmark = pytest.mark.usefixtures("empty_caches")


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    k = rng.integers(0, 4, n)
    # lists: null (1 in 8), empty, or of up to three items, some of them null
    tags = [
        None if r % 8 == 1 else [None if (i + j) % 7 == 3 else f"t{(i + j) % 5}" for j in range(c)]
        for i, (c, r) in enumerate(zip(k.tolist(), rng.integers(0, 8, n).tolist()))
    ]
    nums = [None if c == 3 and i % 2 else list(range(i, i + c)) for i, c in enumerate(k.tolist())]
    a = pa.array(rng.integers(-100, 100, n), mask=rng.random(n) < 0.2)
    b = pa.array([f"b{i}" for i in ids.tolist()], mask=rng.random(n) < 0.1)
    st = pa.StructArray.from_arrays([a, b], ["a", "b"], mask=pa.array(rng.random(n) < 0.15))
    deep = pa.StructArray.from_arrays(
        [pa.array(rng.random(n)), pa.array([str(i % 9) for i in range(n)])], ["x", "y"]
    )
    inner = pa.StructArray.from_arrays([pa.array(ids.astype(np.int32)), deep], ["k", "deep"])
    req_type = pa.struct(
        [pa.field("p", pa.int16(), nullable=False), pa.field("q", pa.float32(), nullable=False)]
    )
    req = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 9, n).astype(np.int16)), pa.array(rng.random(n).astype(np.float32))],
        fields=list(req_type),
    )
    # the same in every row of an append (one value, or all null in some appends)
    src = pa.array([f"source-{seed % 3}"] * n)
    ver = pa.array([seed % 2] * n, pa.int32())
    opt = pa.array([None] * n if seed % 3 else rng.random(n), pa.float64())
    meta = pa.StructArray.from_arrays([src, pa.array([7] * n, pa.int64())], ["src", "v"])
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("st", st.type),
            pa.field("inner", inner.type),
            pa.field("req", req_type, nullable=False),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("nums", pa.list_(pa.int32())),
            pa.field("src", pa.string()),
            pa.field("ver", pa.int32()),
            pa.field("opt", pa.float64()),
            pa.field("meta", meta.type),
        ]
    )
    lists = [pa.array(tags, pa.list_(pa.string())), pa.array(nums, pa.list_(pa.int32()))]
    return pa.table([ids, st, inner, req, *lists, src, ver, opt, meta], schema=schema)


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def many(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    """12 appends of a few dozen rows alternating between the two libraries."""
    uri = str(tmp_path_factory.mktemp("nested") / "ds")
    start = 0
    for i in range(12):
        n = [37, 100, 12, 64][i % 4]
        write = lance.write_dataset if i % 2 else lt.write_dataset
        write(_rows(start, n, i), uri, mode="append" if i else "create", data_storage_version=request.param)
        start += n
    return uri


def test_nested_fields_are_read_as_batches(many: str) -> None:
    frags = lt.dataset(many)._snapshot.fragment_readers()
    for columns in (NESTED, ["id", "st"], ["tags"], CONSTANT):
        assert None not in fragment_batch.plans(frags, columns), columns
    # every field decodes in the batch (no fall back to reading the files one by one)
    names = NESTED + CONSTANT[:-1]
    found = [p for p in fragment_batch.plans(frags, names) if p is not None]
    data, bases = small_many.joined(fragment_reads.spans(frags, found))
    io = PageIO(found[0][0]._stored, None, None, (), "small pages of many files")
    expected = lance.dataset(many).to_table(columns=names)
    for c, name in enumerate(names):
        got = small_many.decode(
            [lay for _, lay in found], data, bases, c, expected.schema.field(name).type, io
        )
        assert got is not None and got.equals(expected.column(name).combine_chunks()), name


def test_scans_filters_and_takes_equal_pylance(many: str) -> None:
    ours, theirs = lt.dataset(many), lance.dataset(many)
    assert ours.to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))
    for cols in (["tags"], ["st", "nums"], ["inner", "req", "id"], CONSTANT):
        assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols)), cols
    for flt in [
        "id >= 40 AND id < 300",
        "st.a > 20",
        "st IS NULL",
        "req.p = 3",
        "src = 'source-1'",
        "opt > 0.5",
    ]:
        got = ours.to_table(columns=["tags", "st", "id"], filter=flt, with_row_id=True)
        assert got.equals(theirs.to_table(columns=["tags", "st", "id"], filter=flt, with_row_id=True)), flt
    n = theirs.count_rows()
    picks = [*np.random.default_rng(3).choice(n, 60, replace=False).tolist(), 0, n - 1]
    assert ours.take(picks).equals(theirs.take(picks))


def test_deletes_then_scans_and_takes_equal_pylance(many: str, tmp_path: Path) -> None:
    mine, copy = str(tmp_path / "mine"), str(tmp_path / "copy")
    shutil.copytree(many, mine)
    shutil.copytree(many, copy)
    lt.dataset(mine).delete("id % 5 = 2 OR st.a < -80")
    lance.dataset(copy).delete("id % 5 = 2 OR st.a < -80")
    ours, theirs = lt.dataset(mine), lance.dataset(copy)
    assert ours.to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))
    flt = "id > 30 AND id < 500"
    cols = ["nums", "inner"]
    assert ours.to_table(columns=cols, filter=flt).equals(theirs.to_table(columns=cols, filter=flt))
    picks = list(range(0, theirs.count_rows(), 9))
    assert ours.take(picks, columns=NESTED).equals(theirs.take(picks, columns=NESTED))


def test_a_damaged_nested_page_among_many_is_named(many: str, tmp_path: Path) -> None:
    uri = str(tmp_path / "damaged")
    shutil.copytree(many, uri)
    ds = lt.dataset(uri)
    ds.to_table()  # the readers (footers) are cached: only the page bytes change below
    frag = ds._snapshot.manifest.fragments[5]
    lay = small_layouts.layout(READERS.get(ds._snapshot.storage, frag.files[0]), ["tags"])
    assert lay is not None and isinstance(lay.columns[0], small_nested.NestedLayout)
    path = Path(uri) / "data" / frag.files[0].path
    raw = bytearray(path.read_bytes())
    at = lay.start + lay.columns[0].leaves[0].data_at  # the chunk's level count: levels missing
    raw[at : at + 2] = (int.from_bytes(raw[at : at + 2], "little") - 1).to_bytes(2, "little")
    path.write_bytes(bytes(raw))
    for cols in (["tags"], ["id", "tags"]):
        with pytest.raises(CorruptFileError, match=path.name):
            lt.dataset(uri).to_table(columns=cols)


def test_a_file_without_a_leaf_of_a_field_is_read_on_its_own(many: str) -> None:
    """A fragment whose data file does not list every leaf of a nested field (as a manifest of
    fields stored elsewhere would) gets no batch plan for it; the other fragments keep theirs."""
    from dataclasses import replace

    frags = list(lt.dataset(many)._snapshot.fragment_readers())
    node = frags[0].roots["st"]
    leaves = [leaf.id for leaf, _ in leaf_paths(node, [])]
    assert len(leaves) > 1
    data_file = frags[1].fragment.files[0]
    fields = tuple(f for f in data_file.fields if f != leaves[-1])
    fragment = replace(frags[1].fragment, files=(replace(data_file, fields=fields),))
    frags[1] = replace(frags[1], fragment=fragment)
    found = fragment_batch.plans(frags, ["id", "st"])
    assert found[1] is None and all(p is not None for k, p in enumerate(found) if k != 1)
