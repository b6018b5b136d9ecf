"""The reading API as pylance code calls it: ``scanner()``, ``to_table``/``to_batches`` with pylance's
options, system columns, ``take``/``_take_rows``/``head``/``sample``/``count_rows``. Each call runs on
pylance (the oracle) and on lance_table over copies of the same dataset, and the results are compared
in full."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal
from lance.dataset import ColumnOrdering

import lance_table as lt
from lance_table.errors import ScanOptionError, SchemaError, UnsupportedOperationError
from lance_table.table.scan_spec import ScanSpec, scan_spec
from lance_table.table.scanner import LanceScanner

pytestmark = pytest.mark.interop


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"n{i}" if i % 7 else None for i in ids],
            "s": pa.array([{"x": i * 10, "y": f"y{i}"} for i in ids]),
            "f": pa.array([i / 4 for i in ids], pa.float32()),
        }
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[lance.LanceDataset, lt.Dataset]:
    """A pylance dataset of 4 fragments with deletions, and lance_table's handle on a copy."""
    root = tmp_path_factory.mktemp("scan")
    lance.write_dataset(_rows(0, 40), root / "theirs", max_rows_per_file=12)
    lance.write_dataset(_rows(40, 5), root / "theirs", mode="append")
    lance.dataset(root / "theirs").delete("id % 5 = 3")
    shutil.copytree(root / "theirs", root / "ours")
    return lance.dataset(root / "theirs"), lt.dataset(root / "ours")


@pytest.fixture(scope="module")
def stable(tmp_path_factory: pytest.TempPathFactory) -> tuple[lance.LanceDataset, lt.Dataset]:
    """A dataset with stable row ids whose rows were deleted, moved by an update and compacted."""
    root = tmp_path_factory.mktemp("stable")
    uri = root / "theirs"
    lance.write_dataset(_rows(0, 30), uri, max_rows_per_file=8, enable_stable_row_ids=True)
    lance.write_dataset(_rows(30, 6), uri, mode="append")
    lance.dataset(uri).delete("id % 4 = 1")
    lance.dataset(uri).update({"name": "'moved'"}, where="id = 6 OR id = 20")
    lance.dataset(uri).optimize.compact_files(
        target_rows_per_fragment=12, materialize_deletions_threshold=0.3
    )
    lance.dataset(uri).delete("id = 10")
    shutil.copytree(uri, root / "ours")
    return lance.dataset(uri), lt.dataset(root / "ours")


SCANS = {
    "all": {},
    "columns": {"columns": ["name", "id"]},
    "nested": {"columns": ["s.x", "id", "s.y"]},
    "struct": {"columns": ["s"]},
    "system columns": {"columns": ["_rowaddr", "id", "_rowid", "_rowoffset"]},
    "with_row_id": {"columns": ["id"], "with_row_id": True, "with_row_address": True},
    "row id projected and asked": {"columns": ["_rowid", "id"], "with_row_id": True},
    "filter": {"columns": ["id", "name"], "filter": "id > 10 AND name IS NOT NULL"},
    "filter nested": {"columns": ["id"], "filter": "s.x >= 200"},
    "filter on _rowid": {"columns": ["id"], "filter": "_rowid >= 4294967296"},
    "filter on _rowaddr": {"columns": ["id"], "filter": "_rowaddr < 8589934594", "with_row_address": True},
    "expression filter": {"columns": ["id"], "filter": pc.field("id") < 9},
    "expressions": {"columns": {"double": "id * 2", "up": "upper(name)", "id": "id", "sx": "s.x + 1"}},
    "expression of _rowid": {"columns": {"r": "_rowid", "i": "id"}, "filter": "id > 30"},
    "expressions with row id": {"columns": {"i": "id - 1"}, "with_row_id": True},
    "limit offset": {"columns": ["id"], "limit": 7, "offset": 5},
    "limit offset filter": {"columns": ["id", "_rowoffset"], "filter": "id > 4", "limit": 6, "offset": 9},
    "offset past end": {"columns": ["id"], "offset": 1000},
    "limit 0": {"columns": ["id"], "limit": 0},
    "tuning knobs": {
        "columns": ["id"],
        "batch_readahead": 2,
        "fragment_readahead": 1,
        "io_buffer_size": 1 << 20,
        "late_materialization": True,
        "use_scalar_index": False,
        "fast_search": True,
        "prefilter": True,
        "use_stats": False,
        "scan_in_order": True,
        "batch_size_bytes": 4096,
    },
}


@pytest.mark.parametrize("kwargs", SCANS.values(), ids=SCANS.keys())
def test_to_table_as_pylance(pair, kwargs) -> None:
    theirs, ours = pair
    expected = theirs.to_table(**kwargs)
    got = ours.to_table(**kwargs)
    assert got.schema.names == expected.schema.names
    assert_tables_equal(got, expected)
    assert_tables_equal(ours.scanner(**kwargs).to_table(), expected)
    assert ours.scanner(**kwargs).projected_schema.names == theirs.scanner(**kwargs).projected_schema.names


@pytest.mark.parametrize("kwargs", SCANS.values(), ids=SCANS.keys())
def test_stable_row_ids_as_pylance(stable, kwargs) -> None:
    theirs, ours = stable
    assert_tables_equal(ours.to_table(**kwargs), theirs.to_table(**kwargs))


def test_stable_row_ids_are_not_addresses(stable) -> None:
    theirs, ours = stable
    cols = ["id", "_rowid", "_rowaddr", "_rowoffset"]
    got = ours.to_table(columns=cols)
    assert_tables_equal(got, theirs.to_table(columns=cols))
    assert got["_rowid"] != got["_rowaddr"]  # rows moved by the update and the compaction
    assert_tables_equal(
        ours.to_table(columns=["id", "_rowid"], filter="_rowid > 20"),
        theirs.to_table(columns=["id", "_rowid"], filter="_rowid > 20"),
    )


@pytest.mark.parametrize("name", ["pair", "stable"])
def test_take_rows_by_row_id(request, name) -> None:
    theirs, ours = request.getfixturevalue(name)
    live = theirs.to_table(columns=["_rowid"])["_rowid"].to_pylist()
    picked = [live[7], live[0], live[-1], live[7], live[3]]
    for columns in (["id", "name"], ["s.x", "_rowid", "_rowaddr", "_rowoffset"], {"v": "id + 100"}):
        expected = theirs._take_rows(picked, columns=columns)
        assert_tables_equal(ours._take_rows(picked, columns=columns), expected)
    # a deleted row's id is left out, as pylance does
    all_ids = theirs.to_table(columns=["id", "_rowid"], filter="id = 9")["_rowid"].to_pylist()
    assert_tables_equal(ours._take_rows(all_ids + picked[:2]), theirs._take_rows(all_ids + picked[:2]))


def test_take_rows_skips_deleted_addresses(pair) -> None:
    theirs, ours = pair
    deleted = 3  # id 3 (fragment 0, offset 3) is deleted
    got = ours._take_rows([deleted, 0, 4294967296], columns=["id"])
    assert_tables_equal(got, theirs._take_rows([deleted, 0, 4294967296], columns=["id"]))
    with pytest.raises(IndexError, match="names no row"):
        ours._take_rows([99 << 32])


@pytest.mark.parametrize("name", ["pair", "stable"])
def test_take_by_position(request, name) -> None:
    theirs, ours = request.getfixturevalue(name)
    idx = [0, 17, 3, 3, theirs.count_rows() - 1]
    for columns in (
        None,
        ["id"],
        ["_rowid", "id", "_rowaddr", "_rowoffset"],
        {"t": "f * 2"},
        ["s.y"],  # a take returns the struct with the fields asked for (a scan: a column "s.y")
        ["s.y", "id", "s.x"],
        ["s.x", "s"],
        ["s", "s.x"],
    ):
        assert_tables_equal(
            ours.take(idx, columns=columns), theirs.take(idx, columns=columns), check_metadata=False
        )
    assert_tables_equal(ours.take(pa.array(idx)), theirs.take(pa.array(idx)))
    with pytest.raises(IndexError):
        ours.take([theirs.count_rows()])


def test_head_sample_count(pair) -> None:
    theirs, ours = pair
    assert_tables_equal(ours.head(4), theirs.head(4))
    assert_tables_equal(
        ours.head(5, columns=["id"], filter="id > 20"), theirs.head(5, columns=["id"], filter="id > 20")
    )
    assert_tables_equal(ours.scanner(columns=["id"]).head(3), theirs.scanner(columns=["id"]).head(3))
    everything = set(theirs.to_table(columns=["id"])["id"].to_pylist())
    got = ours.sample(6, columns=["id", "name"])
    assert got.schema.names == ["id", "name"] and got.num_rows == 6
    assert len(set(got["id"].to_pylist())) == 6 and set(got["id"].to_pylist()) <= everything
    ordered = ours.sample(10, columns={"i": "id"}, randomize_order=False)["i"].to_pylist()
    assert ordered == sorted(ordered) and set(ordered) <= everything
    for flt in (None, "id > 17", pc.field("id") < 12, "_rowid > 4294967296"):
        assert ours.count_rows(flt) == theirs.count_rows(flt)
        assert ours.scanner(filter=flt).count_rows() == theirs.scanner(filter=flt).count_rows()
    frag = ours.get_fragments()[1]
    assert ours.count_rows(fragments=[frag]) == frag.count_rows()
    assert ours.scanner(fragments=[frag], filter="id > 15").count_rows() == frag.count_rows("id > 15")


def test_scanner_object(pair) -> None:
    theirs, ours = pair
    kw = {"columns": ["id", "s.x"], "filter": "id > 3", "batch_size": 4}
    scanner = ours.scanner(**kw)
    assert isinstance(scanner, LanceScanner) and isinstance(scanner, pa.dataset.Scanner)
    assert scanner.dataset_schema == ours.schema
    assert scanner.projected_schema.names == theirs.scanner(**kw).projected_schema.names
    reader = scanner.to_reader()
    assert isinstance(reader, pa.RecordBatchReader) and reader.schema == scanner.projected_schema
    batches = list(scanner.to_batches())
    assert max(b.num_rows for b in batches) <= 4
    assert_tables_equal(pa.Table.from_batches(batches), theirs.scanner(**kw).to_table(), check_metadata=False)
    plan = scanner.explain_plan()
    assert "id > 3" in plan and "s.x" in plan and isinstance(scanner.explain_plan(verbose=True), str)
    assert "Output: " in scanner.analyze_plan()
    assert isinstance(scanner.spec, ScanSpec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        scanner.spec.limit = 3  # type: ignore[misc]


def test_batches_sizes_as_pylance(pair) -> None:
    theirs, ours = pair
    got = [b.num_rows for b in ours.to_batches(batch_size=5, strict_batch_size=True)]
    assert got == [b.num_rows for b in theirs.to_batches(batch_size=5, strict_batch_size=True)]
    loose = list(ours.to_batches(batch_size=5, columns={"i": "id + 1"}))
    assert max(b.num_rows for b in loose) <= 5
    assert_tables_equal(
        pa.Table.from_batches(loose), theirs.to_table(columns={"i": "id + 1"}), check_metadata=False
    )


def test_fragments_option(pair) -> None:
    theirs, ours = pair
    order = [2, 0]
    kw = {"columns": ["id", "_rowid", "_rowoffset"], "filter": "id <> 4"}
    expected = theirs.scanner(fragments=[theirs.get_fragment(i) for i in order], **kw).to_table()
    assert_tables_equal(
        ours.scanner(fragments=[ours.get_fragment(i) for i in order], **kw).to_table(), expected
    )
    metas = [ours.get_fragment(i).metadata for i in order]
    assert_tables_equal(ours.to_table(fragments=metas, **kw), expected)
    with pytest.raises(ValueError, match="not in version"):
        ours.to_table(fragments=[77])


BAD = {
    "negative limit": ({"limit": -1}, ValueError, ScanOptionError),
    "negative offset": ({"offset": -2}, ValueError, ScanOptionError),
    "batch size 0": ({"batch_size": 0}, ValueError, ScanOptionError),
    "columns as a string": ({"columns": "id"}, TypeError, TypeError),
    "unknown column": ({"columns": ["nope"]}, ValueError, SchemaError),
    "unknown nested field": ({"columns": ["s.z"]}, ValueError, SchemaError),
    "column twice": ({"columns": ["id", "id"]}, ValueError, SchemaError),
    "unknown column in expression": ({"columns": {"a": "nope + 1"}}, ValueError, lt.FilterError),
    "unknown option": ({"not_an_option": 1}, TypeError, TypeError),
}


@pytest.mark.parametrize(("kwargs", "builtin", "typed"), BAD.values(), ids=BAD.keys())
def test_bad_options(pair, kwargs, builtin, typed) -> None:
    theirs, ours = pair
    with pytest.raises(builtin):
        theirs.to_table(**kwargs)
    with pytest.raises(typed):
        ours.to_table(**kwargs)


def test_count_with_limit_is_refused_as_pylance(pair) -> None:
    theirs, ours = pair
    with pytest.raises(ValueError):
        theirs.scanner(limit=3).count_rows()
    with pytest.raises(ScanOptionError):
        ours.scanner(limit=3).count_rows()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nearest": {"column": "f", "q": [1.0], "k": 2}},
        {"full_text_query": "abc"},
        {"include_deleted_rows": True},
        {"blob_handling": "all_binary"},
        {"row_addr_allowlist": b"\x00"},
        {"filter": {"expr_filter": "id > 1", "search_filter": "x"}},
    ],
    ids=lambda kw: next(iter(kw)),
)
def test_result_changing_options_are_refused_by_name(pair, kwargs) -> None:
    _, ours = pair
    name = next(iter(kwargs))
    with pytest.raises(UnsupportedOperationError, match=name if name != "filter" else "search_filter"):
        ours.scanner(**kwargs)


def test_spec_is_one_keyword_only_value() -> None:
    spec = scan_spec({"columns": {"a": "x + 1"}, "limit": 3, "batch_readahead": 9})
    assert spec == ScanSpec(expressions=(("a", "x + 1"),), limit=3)
    with pytest.raises(TypeError):
        ScanSpec(("a",))  # type: ignore[misc]
    assert scan_spec({"fragments": [3, 1]}).fragments == (3, 1)


def test_row_id_sequences_with_holes_and_arrays(tmp_path: Path) -> None:
    """Compaction of a dataset with stable row ids writes ranges with holes and sorted arrays."""
    uri = tmp_path / "theirs"
    lance.write_dataset(
        pa.table({"id": pa.array(range(300), pa.int64())}),
        uri,
        max_rows_per_file=100,
        enable_stable_row_ids=True,
    )
    lance.dataset(uri).delete("id = 50 or id = 250")
    lance.dataset(uri).update({"id": "id + 1000"}, where="id = 120 OR id = 7 OR id = 299")
    lance.dataset(uri).optimize.compact_files(
        target_rows_per_fragment=1000, materialize_deletions_threshold=0.0
    )
    shutil.copytree(uri, tmp_path / "ours")
    theirs, ours = lance.dataset(uri), lt.dataset(tmp_path / "ours")
    cols = ["id", "_rowid", "_rowaddr", "_rowoffset"]
    assert_tables_equal(ours.to_table(columns=cols), theirs.to_table(columns=cols))
    picked = [7, 299, 0, 120, 50, 298]
    assert_tables_equal(ours._take_rows(picked, columns=cols), theirs._take_rows(picked, columns=cols))


def test_slice_as_pylance(pair) -> None:
    theirs, ours = pair
    for args in ((3, 11), (0, 0), (30, 100)):
        assert_tables_equal(ours.slice(*args), theirs.slice(*args))
    assert_tables_equal(ours.slice(2, 6, columns={"i": "id"}), theirs.slice(2, 6, columns={"i": "id"}))
    for bad in ((-1, 3), (5, 2)):
        with pytest.raises(ValueError):
            theirs.slice(*bad)
        with pytest.raises(ScanOptionError):
            ours.slice(*bad)
    assert lt.LanceScanner is LanceScanner


def test_positional_arguments_as_pylance(pair) -> None:
    theirs, ours = pair
    args = (["id"], "id > 3", 5, 2, None, 3, None, 4, 2, True)
    assert_tables_equal(ours.to_table(*args), theirs.to_table(*args))
    got = pa.Table.from_batches(list(ours.to_batches(*args)))
    assert_tables_equal(got, pa.Table.from_batches(list(theirs.to_batches(*args))))


ORDERS = {
    "by name": {"order_by": ["name"]},
    "descending, limit and offset": {
        "order_by": [ColumnOrdering("f", ascending=False)],
        "limit": 5,
        "offset": 3,
    },
    "two keys, nulls first": {
        "order_by": [
            ColumnOrdering("name", nulls_first=True),
            ColumnOrdering("id", ascending=False, nulls_first=True),
        ]
    },
    "nulls first and last": {"order_by": [ColumnOrdering("name", nulls_first=True), ColumnOrdering("id")]},
    "filtered": {"order_by": [ColumnOrdering("id", ascending=False)], "filter": "id < 20"},
}


@pytest.mark.parametrize("kwargs", ORDERS.values(), ids=ORDERS.keys())
def test_order_by_as_pylance(pair, kwargs) -> None:
    theirs, ours = pair
    assert_tables_equal(ours.to_table(**kwargs), theirs.to_table(**kwargs))
    got = pa.Table.from_batches(list(ours.to_batches(batch_size=4, **kwargs)))
    assert_tables_equal(got, theirs.to_table(**kwargs))
    # a sort key outside the projection (pylance refuses it; here it sorts)
    by_f = ours.to_table(columns=["id"], **kwargs)
    assert by_f["id"] == ours.to_table(**kwargs)["id"]
    assert "order by" in ours.scanner(**kwargs).explain_plan()


def test_order_by_unknown_column(pair) -> None:
    _, ours = pair
    with pytest.raises(SchemaError):
        ours.to_table(order_by=["nope"])


def test_default_batch_size_from_the_environment(tmp_path, monkeypatch):
    lance.write_dataset(pa.table({"a": range(1000)}), tmp_path)
    monkeypatch.setenv("LANCE_DEFAULT_BATCH_SIZE", "12")
    sizes = [
        [b.num_rows for b in lib.dataset(tmp_path).scanner(scan_in_order=True).to_batches()]
        for lib in (lt, lance)
    ]
    assert sizes[0] == sizes[1] == [12] * 83 + [4]
    assert [b.num_rows for b in lt.dataset(tmp_path).to_batches(batch_size=100)][:1] == [100]
    monkeypatch.setenv("LANCE_DEFAULT_BATCH_SIZE", "bad")
    assert [b.num_rows for b in lt.dataset(tmp_path).to_batches()] == [1000]
