"""Legacy (format 0.1) datasets: read, continued and created by lance_table, with pylance as the
oracle both ways, and filtered scans that skip pages by their statistics."""

from __future__ import annotations

import struct
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_table as lt
from lance_table.errors import CommitConflictError, CorruptFileError
from lance_table.format.manifest_file import decode_manifest_file
from lance_table.format.transaction import Append, Transaction
from lance_table.table.commit.apply import next_manifest
from lance_table.table.readers import READERS

lance = pytest.importorskip("lance")


def _table(n: int, start: int = 0, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    x = rng.random(n)
    x[rng.random(n) < 0.05] = np.nan
    return pa.table(
        {
            "id": ids,
            "x": pa.array(x),
            "i": pa.array(rng.integers(-50, 50, n).astype(np.int32)),
            "s": pa.array([None if k % 11 == 0 else f"v{k % 97}" for k in range(start, start + n)]),
            "b": pa.array(rng.random(n) < 0.5),
            "l": pa.array(
                [[k, k + 1] if k % 5 else [] for k in range(start, start + n)], pa.list_(pa.int32())
            ),
            "st": pa.StructArray.from_arrays(
                [pa.array(ids * 2), pa.array([f"t{k}" for k in range(start, start + n)])], names=["a", "t"]
            ),
        }
    )


def _bits(table: pa.Table) -> pa.Table:
    """``table`` with float64 columns as their bit patterns, so that NaNs compare equal."""
    for i, f in enumerate(table.schema):
        if pa.types.is_float64(f.type):
            bits = table.column(i).combine_chunks().view(pa.int64())
            table = table.set_column(i, pa.field(f.name, pa.int64()), bits)
    return table


def _equal(a: pa.Table, b: pa.Table) -> bool:
    return _bits(a).equals(_bits(b))


def _same(uri: str) -> None:
    """Every version reads the same in both libraries."""
    for v in lance.dataset(uri).versions():
        theirs = lance.dataset(uri, version=v["version"]).to_table()
        ours = lt.dataset(uri, version=v["version"]).to_table()
        assert _equal(ours, theirs), f"version {v['version']}"


def test_pylance_legacy_dataset_continued_by_lance_table_and_back(tmp_path):
    uri = str(tmp_path / "ds")
    lance.write_dataset(_table(3000), uri, data_storage_version="legacy", max_rows_per_file=1200)
    _same(uri)
    ds = lt.write_dataset(_table(1500, 3000, seed=1), uri, mode="append")
    ds.delete("id % 7 = 3 OR i > 40")
    _same(uri)
    ds.compact_files()
    assert lance.dataset(uri).data_storage_version == "0.1"
    _same(uri)
    lance.write_dataset(_table(700, 10_000, seed=2), uri, mode="append")
    lance.dataset(uri).delete("id < 100")
    lance.dataset(uri).optimize.compact_files()
    _same(uri)
    ds = lt.dataset(uri)
    assert {f.file_major_version for frag in ds.manifest.fragments for f in frag.files} == {0}
    assert _equal(
        ds.to_table(filter="id >= 3000 AND id < 3010"),
        lance.dataset(uri).to_table(filter="id >= 3000 AND id < 3010"),
    )


@pytest.mark.parametrize("name", ["legacy", "0.1"])
def test_lance_table_creates_legacy_datasets_pylance_continues(tmp_path, name):
    uri = str(tmp_path / "ds")
    source = _table(2500)
    lt.write_dataset(source, uri, data_storage_version=name)
    pds = lance.dataset(uri)
    assert pds.data_storage_version == "0.1"
    expected = pds.to_table()  # pylance's stand-ins for nulls that the format cannot store
    assert _equal(lt.dataset(uri).to_table(), expected)
    assert expected.column("s").equals(source.column("s"))  # strings keep their nulls
    lance.write_dataset(_table(500, 2500), uri, mode="append")
    lance.dataset(uri).delete("id % 2 = 0")
    lt.dataset(uri).compact_files()
    _same(uri)
    assert lance.dataset(uri).data_storage_version == "0.1"


def test_appends_keep_legacy_and_formats_never_mix(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(100), uri, data_storage_version="legacy")
    lt.write_dataset(_table(100, 100), uri, mode="append", data_storage_version="2.2")  # ignored, as pylance
    assert lance.dataset(uri).data_storage_version == "0.1"
    lt.write_dataset(_table(50), uri, mode="overwrite", data_storage_version="2.2")
    assert lance.dataset(uri).data_storage_version == "2.2"
    assert _equal(lt.dataset(uri).to_table(), lance.dataset(uri).to_table())


def _decoded(table: pa.Table) -> pa.Table:
    """``table`` with dictionary columns decoded (files of one dataset index one dictionary that
    grows, so the per-chunk dictionaries may differ between readers)."""
    cols = [pc.cast(c, c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.table(cols, names=table.column_names)


def _dict_rows(ids: range, values: list[str]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "d": pa.array([values[k % len(values)] for k in range(len(ids))]).dictionary_encode(),
        }
    )


def _check_versions(uri: str) -> None:
    for v in lance.dataset(uri).versions():
        theirs = lance.dataset(uri, version=v["version"]).to_table()
        ours = lt.dataset(uri, version=v["version"]).to_table()
        assert _decoded(ours).equals(_decoded(theirs)), v["version"]


def test_legacy_dictionary_columns_are_continued(tmp_path):
    uri = str(tmp_path / "ds")
    lance.write_dataset(_dict_rows(range(6), ["a", "b", "c"]), uri, data_storage_version="legacy")
    assert lt.dataset(uri).to_table().equals(lance.dataset(uri).to_table())
    # new values extend the manifest's dictionary; several files in one write share it
    ds = lt.write_dataset(
        _dict_rows(range(6, 30), ["x", "b", "yy"]), uri, mode="append", max_rows_per_file=10
    )
    assert lt.dataset(uri).manifest.dictionaries[1].to_pylist() == ["a", "b", "c", "x", "yy"]
    ds = lt.write_dataset(_dict_rows(range(30, 34), ["c", "zz"]), uri, mode="append")
    ds.delete("id % 5 = 1")
    ds.compact_files()
    _check_versions(uri)
    # pylance appends with the manifest's dictionary (it refuses any other), and we read it
    values = lance.dataset(uri).schema.field("d").type
    dictionary = lt.dataset(uri).manifest.dictionaries[1]
    assert dictionary.to_pylist() == ["a", "b", "c", "x", "yy", "zz"]
    assert pa.types.is_dictionary(values)
    more = pa.table(
        {
            "id": pa.array([100, 101], pa.int64()),
            "d": pa.DictionaryArray.from_arrays(pa.array([5, 0], pa.int32()), dictionary),
        }
    )
    lance.write_dataset(more, uri, mode="append")
    _check_versions(uri)
    assert lt.dataset(uri).to_table(filter="id >= 100").column("d").to_pylist() == ["zz", "a"]


def _keyed(ids: range, keys: list[int | None], values: pa.Array) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "d": pa.DictionaryArray.from_arrays(pa.array(keys, pa.int32()), values),
        }
    )


def test_legacy_dictionaries_holding_nulls_are_appended_and_compacted(tmp_path):
    """pyarrow cannot unify dictionaries that hold a null; files of several pieces (compaction,
    small batches) key every piece into the file's dictionary instead."""
    uri = str(tmp_path / "ds")
    lance.write_dataset(
        _keyed(range(4), [0, 1, 2, None], pa.array(["a", None, "b"])), uri, data_storage_version="legacy"
    )
    lt.write_dataset(_keyed(range(4, 7), [0, 1, 2], pa.array(["q", None, "a"])), uri, mode="append")
    lt.write_dataset(
        _keyed(range(7, 9), [0, 1], pa.array(["r", "a"])), uri, mode="append", max_rows_per_file=1
    )
    ds = lt.dataset(uri)
    ds.delete("id = 5")
    ds.compact_files()
    assert len(ds.manifest.fragments) == 1
    _check_versions(uri)
    assert _decoded(lt.dataset(uri).to_table()).column("d").to_pylist() == [
        "a",
        None,
        "b",
        "a",
        "q",
        "a",
        "r",
        "a",
    ]
    assert lt.dataset(uri).manifest.dictionaries[1].to_pylist() == ["a", None, "b", "q", "r"]


def test_new_legacy_dataset_with_dictionary_columns(tmp_path):
    uri = str(tmp_path / "new")
    tbl = _dict_rows(range(8), ["p", "q", "rr"]).append_column(
        "n", pa.array([5, 6, 5, 7, 5, 6, 5, 7], pa.int64()).dictionary_encode()
    )
    lt.write_dataset(tbl, uri, data_storage_version="legacy")
    lt.write_dataset(
        _dict_rows(range(8, 12), ["s"]).append_column(
            "n", pa.array([9, 5, 9, 9], pa.int64()).dictionary_encode()
        ),
        uri,
        mode="append",
    )
    _check_versions(uri)
    assert (
        lance.dataset(uri).to_table().column("d").to_pylist() == ["p", "q", "rr"] * 2 + ["p", "q"] + ["s"] * 4
    )
    assert _decoded(lance.dataset(uri).to_table()).column("n").to_pylist() == [
        5,
        6,
        5,
        7,
        5,
        6,
        5,
        7,
        9,
        5,
        9,
        9,
    ]


def test_legacy_dictionary_values_conflict(tmp_path):
    uri = str(tmp_path / "ds")
    base = lt.write_dataset(_dict_rows(range(2), ["a"]), uri, data_storage_version="legacy").manifest
    ours = pa.array(["a", "c"])
    # another commit extended the dictionary with "b": our files' key 1 would read "b"
    theirs = replace(base, dictionaries={1: pa.array(["a", "b"])})
    with pytest.raises(CommitConflictError) as info:
        next_manifest(theirs, Transaction(base.version, Append((), dictionaries={1: ours})))
    assert not info.value.retryable
    # a prefix either way is compatible: the longer dictionary is kept
    merged = next_manifest(base, Transaction(base.version, Append((), dictionaries={1: ours})))
    assert merged.dictionaries[1].equals(ours)
    kept = next_manifest(replace(base, dictionaries={1: ours}), Transaction(base.version, Append(())))
    assert kept.dictionaries[1].equals(ours)


def test_manifest_dictionary_offsets_are_checked(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_dict_rows(range(2), ["abc"]), uri, data_storage_version="legacy")
    (path,) = (tmp_path / "ds" / "_versions").glob("*.manifest")
    data = path.read_bytes()
    mf = decode_manifest_file(data, str(path))
    assert mf.manifest.dictionaries[1].to_pylist() == ["abc"]
    assert data[:3] == b"abc" and data[3:19] == bytes(8) + (3).to_bytes(8, "little")
    pb = mf.manifest.to_pb(None, None, {1: (10**6, 1)})
    body = pb.SerializeToString()
    bad = data[:19] + len(body).to_bytes(4, "little") + body + struct.pack("<QHH", 19, 0, 2) + b"LANC"
    with pytest.raises(CorruptFileError, match="dictionary"):
        decode_manifest_file(bad, "bad.manifest")


@pytest.fixture(scope="module")
def big_legacy(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("stats") / "ds")
    lance.write_dataset(_table(60_000, seed=5), uri, data_storage_version="legacy")
    return uri


def _bytes_read(uri: str, fn) -> int:
    """Bytes fetched from the dataset's data files while ``fn`` runs (through the real readers)."""
    READERS.clear()
    ds = lt.dataset(uri)
    ds.count_rows()  # nothing read yet
    total = [0]
    originals = []
    for frag in ds._snapshot.fragment_readers():
        for data_file in frag.fragment.files:
            source = frag._reader(data_file).source
            original = source.read_ranges

            def counting(ranges, original=original):
                total[0] += sum(n for _, n in ranges)
                return original(ranges)

            source.read_ranges = counting  # type: ignore[method-assign]
            originals.append((source, original))
    try:
        fn(ds)
    finally:
        for source, original in originals:
            source.read_ranges = original  # type: ignore[method-assign]
        READERS.clear()
    return total[0]


def test_selective_filter_reads_only_matching_pages(big_legacy):
    query = "id >= 30000 AND id < 30100"
    # counting reads only the filter's column: one 1024-row page of it (and the statistics) with
    # statistics, all 59 pages without
    with_stats = _bytes_read(big_legacy, lambda ds: ds.count_rows(query))
    without = _bytes_read(big_legacy, lambda ds: ds.count_rows(query, use_stats=False))
    assert with_stats * 20 < without, (with_stats, without)
    rows = _bytes_read(big_legacy, lambda ds: ds.to_table(filter=query))
    all_rows = _bytes_read(big_legacy, lambda ds: ds.to_table(filter=query, use_stats=False))
    assert rows * 5 < all_rows, (rows, all_rows)
    ds = lt.dataset(big_legacy)
    expected = lance.dataset(big_legacy).to_table(filter=query)
    assert _equal(ds.to_table(filter=query), expected)
    assert _equal(ds.to_table(filter=query, use_stats=False), expected)
    assert ds.count_rows(query) == 100


def test_selective_delete_reads_only_matching_pages(big_legacy, tmp_path):
    import shutil

    uri = str(tmp_path / "copy")
    shutil.copytree(big_legacy, uri)
    # the same rows: one predicate the statistics can bound, one they cannot
    pruned = _bytes_read(uri, lambda ds: ds.delete("id >= 30000 AND id < 30100"))
    assert lt.dataset(uri).count_rows() == 59_900
    shutil.rmtree(uri)
    shutil.copytree(big_legacy, uri)
    unpruned = _bytes_read(uri, lambda ds: ds.delete("id + 0 >= 30000 AND id + 0 < 30100"))
    assert pruned * 20 < unpruned, (pruned, unpruned)
    assert lt.dataset(uri).count_rows() == 59_900
    expected = lance.dataset(big_legacy).to_table(filter="id < 30000 OR id >= 30100")
    assert _equal(lance.dataset(uri).to_table(), expected)


@pytest.mark.parametrize(
    "query",
    [
        "id < 1500",
        "id >= 59000",
        "id BETWEEN 1000 AND 1030",
        "id IN (5, 40000, 59999)",
        "id = -1",
        "x < 0.01",
        "x > 0.99",
        "x != 0.5",
        "i = 0",
        "i < -45 AND id > 30000",
        "s = 'v3'",
        "s > 'v95'",
        "s IS NULL",
        "s IS NOT NULL AND id < 2000",
        "b = true AND id < 3000",
        "id > 10 OR x < 0.001",
        "NOT (id < 59990)",
    ],
)
def test_statistics_never_change_results(big_legacy, query):
    ds = lt.dataset(big_legacy)
    with_stats = ds.to_table(filter=query, with_row_id=True)
    without = ds.to_table(filter=query, with_row_id=True, use_stats=False)
    assert _equal(with_stats, without)
    # the rows as read, filtered by the predicate in memory, are the same rows
    full = ds.to_table(with_row_id=True)
    from lance_table.filters import parse_filter

    assert _equal(full.filter(parse_filter(query, full.schema)), with_stats)


def test_parallel_writers_dictionaries_are_joined(tmp_path):
    """Writers that each extended the dataset's dictionary their own way (Spark tasks): the parts
    whose keys disagree with the joined dictionary are rewritten, the others kept as written."""
    from lance_table.storage import open_storage
    from lance_table.table.commit import commit
    from lance_table.table.operations.legacy_dicts import WrittenPart, merge_written_parts
    from lance_table.table.operations.write import FragmentWriter, plan_write

    uri = str(tmp_path / "ds")
    lance.write_dataset(_dict_rows(range(2), ["a", "b"]), uri, data_storage_version="legacy")
    storage = open_storage(uri)
    base = lt.dataset(uri).manifest
    plan = plan_write(base, "append", lt.dataset(uri).schema, uri)
    parts = []
    for k, values in enumerate([["c", "a"], ["c", "x"], ["d", "b"], ["c", "a", "x", "d", "e"]]):
        writer = FragmentWriter(
            storage,
            plan.schema,
            list(plan.fields),
            data_format="0.1",
            dictionaries=plan.dictionaries,
            max_rows_per_file=3,
        )
        table = _dict_rows(range(100 * (k + 1), 100 * (k + 1) + 5), values)
        for batch in table.cast(plan.schema).to_batches():
            writer.write(batch)
        parts.append(WrittenPart(tuple(writer.finish()), tuple(writer.paths), dict(writer.dictionaries)))
    merged = merge_written_parts(storage, plan.schema, plan.fields, plan.dictionaries, parts, write_tag="ab")
    # part 0 and 1 ([a b c], [a b c x]) are kept; part 2 ([a b d]) is rewritten; part 3 extends
    # the joined [a b c x d] and is kept
    kept = set(parts[0].files) | set(parts[1].files) | set(parts[3].files)
    assert set(merged.replaced) == set(parts[2].files)
    assert kept < set(merged.files) and len(merged.files) == len(kept) + len(parts[2].files)
    assert merged.dictionaries[1].to_pylist() == ["a", "b", "c", "x", "d", "e"]
    commit(storage, base, plan.pending(merged.fragments, merged.files, merged.dictionaries))
    expected = [("a", "b")[i % 2] for i in range(2)]
    for values in [["c", "a"], ["c", "x"], ["d", "b"], ["c", "a", "x", "d", "e"]]:
        expected += [values[i % len(values)] for i in range(5)]
    assert _decoded(lance.dataset(uri).to_table()).column("d").to_pylist() == expected
    _check_versions(uri)
