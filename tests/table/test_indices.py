"""Datasets with pylance-built indices (BTREE on an integer, BITMAP on a string, IVF_PQ on a
vector): after each lance_table write, pylance's indexed answers equal its full-scan answers, and
the manifest's index metadata is what pylance writes after the same operation."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table._proto import table_pb2
from lance_table.table.indices import FRAG_REUSE_INDEX_NAME, decode_section

pytestmark = pytest.mark.interop

DIM = 8
FILTERS = ["i > 1500", "i = 77", "i < 40", "s = 'c3'", "s IN ('c1', 'c5')"]


def _rows(start: int, n: int) -> pa.Table:
    rng = np.random.default_rng(start)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * DIM, dtype=np.float32)), DIM)
    ids = np.arange(start, start + n)
    return pa.table({"i": pa.array(ids), "s": pa.array([f"c{k % 7}" for k in ids]), "v": vec})


def _indexed(path: Path, version: str, stable: bool) -> str:
    uri = str(path)
    ds = lance.write_dataset(
        _rows(0, 2000), uri, max_rows_per_file=300, data_storage_version=version, enable_stable_row_ids=stable
    )
    ds.create_scalar_index("i", "BTREE")
    ds.create_scalar_index("s", "BITMAP")
    ds.create_index("v", "IVF_PQ", num_partitions=2, num_sub_vectors=2)
    lance.write_dataset(_rows(2000, 250), uri, mode="append")  # one fragment no index covers
    return uri


@pytest.fixture(params=[("2.0", False), ("2.2", False), ("2.2", True)], ids=["v2.0", "v2.2", "v2.2-stable"])
def indexed(request: Any, tmp_path: Path) -> tuple[str, str, str]:
    """Two copies of one indexed dataset: (ours, pylance's, kind)."""
    version, stable = request.param
    base = _indexed(tmp_path / "base", version, stable)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    return ours, theirs, "stable" if stable else "addresses"


def assert_indices_answer(uri: str) -> None:
    """pylance's indexed answers are its full-scan answers."""
    ds = lance.dataset(uri)
    for f in FILTERS:
        if f.split()[0] not in ds.schema.names:
            continue
        indexed = ds.to_table(filter=f, columns=["i"]).sort_by("i")
        scanned = ds.to_table(filter=f, columns=["i"], use_scalar_index=False).sort_by("i")
        assert indexed.equals(scanned), f
    q = np.random.default_rng(1).random(DIM, dtype=np.float32)
    knn = {"column": "v", "q": q, "k": 10, "nprobes": 2, "refine_factor": 1000}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ds.to_table(nearest=knn, columns=["i"], disable_scoring_autoprojection=True)
        b = ds.to_table(
            nearest={**knn, "use_index": False}, columns=["i"], disable_scoring_autoprojection=True
        )
    assert sorted(a["i"].to_pylist()) == sorted(b["i"].to_pylist())


def described(uri: str) -> list[tuple[Any, ...]]:
    """pylance's description of the indices, without what differs between two runs (uuids, times)."""
    out = []
    for d in lance.dataset(uri).describe_indices():
        segs = sorted(
            (sorted(s.fragment_ids), s.dataset_version_at_last_update, s.index_version) for s in d.segments
        )
        out.append((d.name, d.type_url, d.index_type, d.field_names, d.num_rows_indexed, segs))
    return sorted(out)


def section(uri: str) -> bytes | None:
    return lt.dataset(uri)._snapshot.manifest.index_section


def _reuse_content(uri: str) -> Any:
    for idx in decode_section(section(uri)):
        if idx.name == FRAG_REUSE_INDEX_NAME:
            return table_pb2.FragmentReuseIndexDetails.FromString(idx.index_details.value).inline
    return None


def test_append_keeps_the_index_section(indexed: tuple[str, str, str]) -> None:
    ours, theirs, _ = indexed
    lt.write_dataset(_rows(5000, 100), ours, mode="append")
    lance.write_dataset(_rows(5000, 100), theirs, mode="append")
    assert section(ours) == section(theirs)
    assert described(ours) == described(theirs)
    assert_indices_answer(ours)


@pytest.mark.parametrize("predicate", ["i % 5 = 0", "i < 600", "i < 2000", "s = 'c2'"])
def test_delete_keeps_indices_as_pylance_does(indexed: tuple[str, str, str], predicate: str) -> None:
    ours, theirs, _ = indexed
    lt.dataset(ours).delete(predicate)
    lance.dataset(theirs).delete(predicate)
    # "i < 2000" deletes every indexed fragment: pylance drops the vector index, keeps the others
    assert section(ours) == section(theirs)
    assert described(ours) == described(theirs)
    assert_indices_answer(ours)
    # pylance keeps writing ours: its append and delete land and the indices still answer
    lance.write_dataset(_rows(9000, 50), ours, mode="append")
    lance.dataset(ours).delete("i = 9001")
    assert_indices_answer(ours)


def test_overwrite_drops_indices(indexed: tuple[str, str, str]) -> None:
    ours, theirs, _ = indexed
    lt.write_dataset(_rows(0, 100), ours, mode="overwrite")
    lance.write_dataset(_rows(0, 100), theirs, mode="overwrite")
    assert section(ours) is None and section(theirs) is None
    assert described(ours) == [] and not lt.dataset(ours).has_index
    assert lance.dataset(ours).to_table().num_rows == 100


def test_restore_brings_back_that_versions_indices(indexed: tuple[str, str, str]) -> None:
    ours, theirs, _ = indexed
    v = lt.dataset(ours).version
    for uri, write in ((ours, lt.write_dataset), (theirs, lance.write_dataset)):
        write(_rows(0, 100), uri, mode="overwrite")
    lt.dataset(ours, version=v).restore()
    lance.dataset(theirs, version=v).restore()
    assert section(ours) == section(theirs) and section(ours) is not None
    assert described(ours) == described(theirs)
    assert_indices_answer(ours)


def test_compaction_records_moves_as_pylance_deferred_remap_does(indexed: tuple[str, str, str]) -> None:
    ours, theirs, kind = indexed
    lt.dataset(ours).delete("i % 5 = 0")
    lance.dataset(theirs).delete("i % 5 = 0")
    if kind == "stable":
        with pytest.warns(UserWarning, match="i_idx"):
            lt.dataset(ours).compact_files(target_rows_per_fragment=1000)
        lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1000)
        # bitmap and vector indices cover the new fragments as pylance's do; the BTREE (which
        # pylance rewrites) no longer covers the rewritten rows: they are scanned
        ours_d = {d[0]: d for d in described(ours)}
        theirs_d = {d[0]: d for d in described(theirs)}
        assert ours_d["s_idx"] == theirs_d["s_idx"] and ours_d["v_idx"] == theirs_d["v_idx"]
        assert ours_d["i_idx"][-1][0][0] == []
    else:
        lt.dataset(ours).compact_files(target_rows_per_fragment=1000)
        lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1000, defer_index_remap=True)
        assert described(ours) == described(theirs)
        assert _reuse_content(ours) == _reuse_content(theirs) and _reuse_content(ours) is not None
    assert [f.fragment_id for f in lance.dataset(ours).get_fragments()] == [
        f.fragment_id for f in lance.dataset(theirs).get_fragments()
    ]
    assert_indices_answer(ours)
    # later writes by either library keep the indices answering
    lance.write_dataset(_rows(7000, 300), ours, mode="append")
    lt.dataset(ours).delete("i % 7 = 1")
    assert_indices_answer(ours)
    lance.dataset(ours).delete("i = 1501")
    assert_indices_answer(ours)
    # and pylance can bring the indices up to date again
    lance.dataset(ours).optimize.optimize_indices()
    assert_indices_answer(ours)


def test_second_compaction_adds_a_reuse_version(tmp_path: Path) -> None:
    ours = _indexed(tmp_path / "ours", "2.0", False)
    theirs = str(tmp_path / "theirs")
    shutil.copytree(ours, theirs)
    for round_ in range(2):
        pred = f"i % 5 = {round_}"
        lt.dataset(ours).delete(pred)
        lance.dataset(theirs).delete(pred)
        lt.dataset(ours).compact_files(target_rows_per_fragment=2000)
        lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=2000, defer_index_remap=True)
        assert described(ours) == described(theirs)
        assert _reuse_content(ours) == _reuse_content(theirs)
        assert_indices_answer(ours)
    assert len(_reuse_content(ours).versions) == 2


def test_compaction_never_merges_indexed_with_unindexed_fragments(indexed: tuple[str, str, str]) -> None:
    ours, theirs, kind = indexed
    for uri, write in ((ours, lt.write_dataset), (theirs, lance.write_dataset)):
        write(_rows(3000, 100), uri, mode="append")
    # a target above every fragment would merge all of them, were it not for the indices
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lt.dataset(ours).compact_files(target_rows_per_fragment=100_000)
    lance.dataset(theirs).optimize.compact_files(
        target_rows_per_fragment=100_000, defer_index_remap=kind != "stable"
    )
    ours_frags = [(f.fragment_id, f.count_rows()) for f in lance.dataset(ours).get_fragments()]
    theirs_frags = [(f.fragment_id, f.count_rows()) for f in lance.dataset(theirs).get_fragments()]
    assert ours_frags == theirs_frags and len(ours_frags) == 2
    assert_indices_answer(ours)


def test_compaction_of_unindexed_fragments_records_nothing(tmp_path: Path) -> None:
    uri = _indexed(tmp_path / "ds", "2.0", False)
    lt.write_dataset(_rows(3000, 100), uri, mode="append")
    lt.write_dataset(_rows(3100, 100), uri, mode="append")
    before = decode_section(section(uri))
    lt.dataset(uri).compact_files(target_rows_per_fragment=250)  # merges the two new fragments only
    assert [f.count_rows() for f in lance.dataset(uri).get_fragments()][-2:] == [250, 200]
    assert decode_section(section(uri)) == before  # no reuse index: no indexed row moved
    assert_indices_answer(uri)


def test_defer_index_remap_records_no_unindexed_moves(tmp_path: Path) -> None:
    ours = _indexed(tmp_path / "ours", "2.0", False)
    for start in (3000, 3100):
        lt.write_dataset(_rows(start, 100), ours, mode="append")
    theirs = str(tmp_path / "theirs")
    shutil.copytree(ours, theirs)
    lt.dataset(ours).compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    assert described(ours) == described(theirs)
    assert _reuse_content(ours) is None and _reuse_content(theirs) is None
    assert_indices_answer(ours)


def test_cleanup_keeps_referenced_index_files(indexed: tuple[str, str, str]) -> None:
    ours, _, _ = indexed
    lt.dataset(ours).delete("i % 3 = 0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lt.dataset(ours).compact_files(target_rows_per_fragment=1000)
    lt.dataset(ours).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert len(lance.dataset(ours).versions()) == 1
    assert_indices_answer(ours)
    stats = lance.dataset(ours).stats.index_stats("s_idx")
    assert stats["num_indexed_rows"] + stats["num_unindexed_rows"] == lance.dataset(ours).count_rows()


def test_index_stats_agree_with_pylance_after_the_same_delete(indexed: tuple[str, str, str]) -> None:
    ours, theirs, _ = indexed
    lt.dataset(ours).delete("i < 700")
    lance.dataset(theirs).delete("i < 700")
    for name in ("i_idx", "s_idx", "v_idx"):
        a = json.dumps(lance.dataset(ours).stats.index_stats(name), sort_keys=True)
        b = json.dumps(lance.dataset(theirs).stats.index_stats(name), sort_keys=True)
        assert a.replace(ours, theirs) == b


def _replay(theirs: str, ours: str) -> None:
    """Commit with lance_table the transaction pylance just committed on ``theirs`` (a copy of
    ``ours`` one version behind), bringing the data files it wrote along."""
    for sub in ("data", "_deletions"):
        if (Path(theirs) / sub).exists():
            shutil.copytree(Path(theirs) / sub, Path(ours) / sub, dirs_exist_ok=True)
    ds = lt.dataset(ours)
    txn = lt.dataset(theirs).read_transaction(ds.version + 1)
    assert txn is not None
    lt.Dataset.commit(ours, txn.operation, read_version=ds.version)


@pytest.mark.parametrize(
    "op",
    [
        "update_indexed",  # Update: rewritten rows leave the BTREE and BITMAP coverage as pylance's do
        "update_other",
        "drop_indexed_column",  # Project: the index on the dropped column goes
        "add_column",  # Merge: the indices stay
    ],
)
def test_hand_built_commits_keep_index_metadata_as_pylance(indexed: tuple[str, str, str], op: str) -> None:
    ours, theirs, _ = indexed
    ds = lance.dataset(theirs)
    if op == "update_indexed":
        ds.update({"i": "i + 10000", "s": "'z'"}, where="i < 450")
    elif op == "update_other":
        ds.update({"v": "v"}, where="i % 3 = 0")
    elif op == "drop_indexed_column":
        ds.drop_columns(["s"])
    else:
        ds.add_columns({"d": "i * 2"})
    _replay(theirs, ours)
    assert section(ours) == section(theirs)
    assert described(ours) == described(theirs)
    assert lance.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
    assert_indices_answer(ours)


def test_describe_indices_and_list_indices_match_pylance(indexed: tuple[str, str, str]) -> None:
    ours, _, _ = indexed
    lt.dataset(ours).delete("i < 700")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lt.dataset(ours).compact_files(target_rows_per_fragment=1000)
    mine = lt.dataset(ours).describe_indices()
    theirs = lance.dataset(ours).describe_indices()
    assert len(mine) == len(theirs)
    for a, b in zip(mine, sorted(theirs, key=lambda d: d.name), strict=True):
        assert (a.name, a.type_url, a.index_type, a.fields, a.field_names, a.num_rows_indexed) == (
            b.name,
            b.type_url,
            b.index_type,
            b.fields,
            b.field_names,
            b.num_rows_indexed,
        )
        assert a.total_size_bytes == b.total_size_bytes
        for sa, sb in zip(a.segments, b.segments, strict=True):
            assert (sa.uuid, sa.dataset_version_at_last_update, sa.index_version, sa.base_id) == (
                sb.uuid,
                sb.dataset_version_at_last_update,
                sb.index_version,
                sb.base_id,
            )
            assert sorted(sa.fragment_ids) == sorted(sb.fragment_ids)
            assert (sa.created_at, sa.size_bytes) == (sb.created_at, sb.size_bytes)
    with pytest.warns(DeprecationWarning):
        rows = lt.dataset(ours).list_indices()
    with pytest.warns(DeprecationWarning):
        expected = lance.dataset(ours).list_indices()
    key = lambda r: (r["name"], r["uuid"])  # noqa: E731
    for a, b in zip(sorted(rows, key=key), sorted(expected, key=key), strict=True):
        assert {**a, "fragment_ids": sorted(a["fragment_ids"])} == {
            **b,
            "fragment_ids": sorted(b["fragment_ids"]),
        }
    assert lt.dataset(ours).has_index and lance.dataset(ours).has_index


def test_index_building_is_refused_with_a_typed_error(indexed: tuple[str, str, str]) -> None:
    ours, _, _ = indexed
    ds = lt.dataset(ours)
    for call in (
        lambda: ds.create_index("v", "IVF_PQ", num_partitions=2, num_sub_vectors=2),
        lambda: ds.create_scalar_index("i", "BTREE"),
        lambda: ds.drop_index("i_idx"),
        lambda: ds.index_statistics("i_idx"),
    ):
        with pytest.raises(lt.errors.UnsupportedOperationError) as err:
            call()
        assert isinstance(err.value, NotImplementedError)
    with pytest.raises(NotImplementedError, match="create_scalar_index"):
        ds.create_scalar_index("i", "BTREE")


def _index_files(uri: str) -> list[str]:
    root = Path(uri) / "_indices"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.mark.parametrize("then", ["overwrite", "delete_all", "compact"])
def test_cleanup_removes_the_index_files_pylance_removes(indexed: tuple[str, str, str], then: str) -> None:
    ours, theirs, kind = indexed
    for uri, lib in ((ours, lt), (theirs, lance)):
        if then == "overwrite":
            lib.write_dataset(_rows(0, 100), uri, mode="overwrite")
        elif then == "delete_all":
            lib.dataset(uri).delete("i < 5000")
        else:
            lib.dataset(uri).delete("i % 4 = 0")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if lib is lt:
                    lt.dataset(uri).compact_files(target_rows_per_fragment=1000)
                else:
                    lance.dataset(uri).optimize.compact_files(
                        target_rows_per_fragment=1000, defer_index_remap=kind != "stable"
                    )
    a = lt.dataset(ours).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    b = lance.dataset(theirs).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    if then != "compact" or kind != "stable":  # (pylance rewrites the BTREE there: a new uuid)
        assert _index_files(ours) == _index_files(theirs)
        assert a.index_files_removed == b.index_files_removed
    referenced = {s.uuid for d in lance.dataset(ours).describe_indices() for s in d.segments}
    assert {f.split("/")[0] for f in _index_files(ours)} <= referenced
    if referenced:
        assert_indices_answer(ours)


def test_a_reuse_index_changed_meanwhile_makes_the_rewrite_conflict(tmp_path: Path) -> None:
    from dataclasses import replace

    from lance_table.format.transaction import Rewrite
    from lance_table.table.indices import index_section_after

    uri = _indexed(tmp_path / "ds", "2.0", False)
    lt.dataset(uri).delete("i % 5 = 0")
    lt.dataset(uri).compact_files(target_rows_per_fragment=1000)  # records a reuse index
    manifest = lt.dataset(uri)._snapshot.manifest
    current = next(i for i in decode_section(manifest.index_section) if i.name == FRAG_REUSE_INDEX_NAME)
    stale = Rewrite((), frag_reuse_index=current.SerializeToString(), frag_reuse_extends=b"")
    with pytest.raises(lt.errors.CommitConflictError) as err:
        index_section_after(manifest, stale, manifest, False)
    assert err.value.retryable
    fresh = replace(stale, frag_reuse_extends=current.uuid.uuid)
    assert index_section_after(manifest, fresh, manifest, False) is not None


def test_reuse_details_in_their_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 200 KiB pylance keeps the reuse details in ``_indices/<uuid>/details.binpb``; so do we
    (here past a lowered limit: 200 KiB of moves takes millions of rows), pylance reads them, and a
    second compaction extends them from there."""
    from lance_table.table import frag_reuse

    monkeypatch.setattr(frag_reuse, "INLINE_LIMIT", 100)
    ours = _indexed(tmp_path / "ours", "2.0", False)
    theirs = str(tmp_path / "theirs")
    shutil.copytree(ours, theirs)
    for pred in ("i % 5 = 0", "i % 3 = 0"):
        lt.dataset(ours).delete(pred)
        lance.dataset(theirs).delete(pred)
        lt.dataset(ours).compact_files(target_rows_per_fragment=2000)
        lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=2000, defer_index_remap=True)
        reuse = next(i for i in decode_section(section(ours)) if i.name == FRAG_REUSE_INDEX_NAME)
        details = table_pb2.FragmentReuseIndexDetails.FromString(reuse.index_details.value)
        assert details.HasField("external") and details.external.path == "details.binpb"
        stored = (Path(ours) / "_indices" / _uuid(reuse) / "details.binpb").read_bytes()
        assert table_pb2.FragmentReuseIndexDetails.InlineContent.FromString(stored) == _reuse_content(theirs)
        assert described(ours) == described(theirs)
        mine = {d.name: sorted(d.segments[0].fragment_ids) for d in lt.dataset(ours).describe_indices()}
        assert mine == {
            d.name: sorted(d.segments[0].fragment_ids) for d in lance.dataset(ours).describe_indices()
        }
        assert_indices_answer(ours)


def _uuid(idx: Any) -> str:
    import uuid

    return str(uuid.UUID(bytes=idx.uuid.uuid))


@pytest.mark.parametrize(
    "kind", ["IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_RQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ"]
)
def test_vector_index_types_are_named_as_pylance_names_them(tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(0)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(600 * 16, dtype=np.float32)), 16)
    ds = lance.write_dataset(pa.table({"v": vec}), str(tmp_path / "ds"))
    ds.create_index("v", kind, num_partitions=2, **({"num_sub_vectors": 2} if "PQ" in kind else {}))
    mine = lt.dataset(str(tmp_path / "ds")).describe_indices()
    assert [d.index_type for d in mine] == [
        d.index_type for d in lance.dataset(str(tmp_path / "ds")).describe_indices()
    ]
    assert mine[0].index_type == kind


@pytest.mark.parametrize(
    "updates,where",
    [
        ({"i": "i + 10000"}, "i < 450"),
        ({"s": "'z'"}, "i < 450"),  # with stable row ids the moved rows stay in the vector index
        ({"s": "'z'"}, "i % 4 = 0"),
        ({"v": "v"}, "s = 'c1'"),
    ],
)
def test_update_keeps_index_metadata_as_pylance(
    indexed: tuple[str, str, str], updates: Any, where: str
) -> None:
    ours, theirs, _ = indexed
    lt.dataset(ours).update(updates, where=where)
    lance.dataset(theirs).update(updates, where=where)
    assert described(ours) == described(theirs)
    assert section(ours) == section(theirs)
    assert_indices_answer(ours)


@pytest.mark.parametrize("op", ["drop_indexed", "drop_other", "add_sql", "rename_indexed"])
def test_schema_evolution_keeps_index_metadata_as_pylance(indexed: tuple[str, str, str], op: str) -> None:
    ours, theirs, _ = indexed
    for ds in (lt.dataset(ours), lance.dataset(theirs)):
        if op == "drop_indexed":
            ds.drop_columns(["s"])
        elif op == "drop_other":
            ds.add_columns({"d": "i * 2"})
            ds.drop_columns(["d"])
        elif op == "add_sql":
            ds.add_columns({"d": "i * 2"})
        else:
            ds.alter_columns({"path": "s", "name": "s2"})
    assert section(ours) == section(theirs)
    assert described(ours) == described(theirs)
    assert_indices_answer(ours)


def test_merge_insert_keeps_index_metadata_as_pylance(indexed: tuple[str, str, str]) -> None:
    ours, theirs, _ = indexed
    source = _rows(400, 300)  # matches rows of indexed fragments
    source = source.set_column(1, "s", pa.array(["m"] * source.num_rows))
    for ds in (lt.dataset(ours), lance.dataset(theirs)):
        ds.merge_insert("i").when_matched_update_all().when_not_matched_insert_all().execute(source)
    assert described(ours) == described(theirs)
    assert section(ours) == section(theirs)
    assert_indices_answer(ours)
