"""A delete or a rewrite (compaction) on a manifest as read replaces only the changed fragments'
records and keeps the others' bytes (FragmentSource.positions / edited): the manifest it writes is
the one converting every fragment wrote, pylance reads it and keeps writing, concurrent deleters
still rebase, and a damaged previous manifest is refused naming it, with nothing committed."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import escape_a_data_path, latest_manifest, small_history, small_rows

import lance_table as lt
from lance_table._proto import table_pb2
from lance_table.errors import CommitConflictError, CorruptFileError
from lance_table.format.fragment import DeletionFile
from lance_table.format.fragment_source import FragmentSource
from lance_table.format.manifest_file import decode_manifest_file, encode_manifest_file
from lance_table.format.operations import Update
from lance_table.format.transaction import Delete, Rewrite, RewriteGroup, Transaction
from lance_table.storage import open_storage
from lance_table.table import versions
from lance_table.table.commit import apply
from lance_table.table.commit.apply import next_manifest
from lance_table.table.session import clear_caches

lance = pytest.importorskip("lance")


def _history(uri: str, writer: str, **options: Any) -> None:
    """Five appends (fragment 0 first) and a delete, written by ``writer``."""
    small_history(uri, writer, (30, 10, 20, 5, 8), **options)


def _both(uri: str) -> tuple[Any, Any]:
    """The latest manifest as read (fragments unconverted) and the same with converted fragments."""
    data, path = latest_manifest(uri)
    base = decode_manifest_file(data, path).manifest
    assert base.fragment_source is not None
    converted = dataclasses.replace(base, fragments=tuple(base.fragments))
    base.fragment_source._converted = None  # (replace converted it)
    assert converted.fragment_source is None
    return base, converted


def _operations(fragments: tuple[Any, ...]) -> list[Any]:
    """Updates (rows moved into new fragments, a deletion file alone, a new fragment with a
    tombstoned field, which takes the objects' way); a delete giving fragment 0 a deletion file
    and removing fragment 2; one removing fragment 1 and updating the last; a rewrite of
    fragments 0 and 1 into one (new id) and of 3 into 3's
    reserved id with new id 0 (given the next free id)."""
    f = {x.id: x for x in fragments}
    top = max(f)
    marked = dataclasses.replace(f[0], deletion_file=DeletionFile("arrow", 9, 77, 2))
    last = dataclasses.replace(f[top], deletion_file=DeletionFile("bitmap", 9, 78, 1))
    merged = dataclasses.replace(f[0], id=top + 7, physical_rows=f[0].physical_rows + f[1].physical_rows)
    fresh = dataclasses.replace(f[1], id=0)
    dropped = dataclasses.replace(  # a data file all of whose fields were dropped (tombstoned)
        f[1], id=0, files=(*f[1].files, dataclasses.replace(f[1].files[0], fields=(-2, -2)))
    )
    return [
        Update((1,), (marked,), (fresh, fresh)),
        Update((), (last,), ()),
        Update((0, 2), (), (dropped,)),
        Delete((marked,), (2,), "x"),
        Delete((last,), (1,), "x"),
        Delete((), (0, top), "x"),
        Rewrite(
            (
                RewriteGroup((f[0], f[1]), (merged,)),
                RewriteGroup((f[3],), (dataclasses.replace(f[3], id=0),)),
            )
        ),
    ]


@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
@pytest.mark.parametrize("options", [{}, {"data_storage_version": "2.0"}, {"enable_stable_row_ids": True}])
def test_edits_on_a_manifest_as_read_write_the_converted_paths_bytes(tmp_path, writer, options):
    uri = str(tmp_path / "ds")
    _history(uri, writer, **options)
    base, converted = _both(uri)
    stable = bool(options.get("enable_stable_row_ids"))
    for step, op in enumerate(_operations(converted.fragments)):
        txn = Transaction(read_version=base.version, operation=op, uuid=f"u{step}")
        edited = next_manifest(base, txn, now_ns=10**18 + step)
        made = next_manifest(converted, txn, now_ns=10**18 + step)
        source = edited.fragment_source
        tombstoned = isinstance(op, Update) and any(-2 in d.fields for f in op.new_fragments for d in f.files)
        assert (source is not None and source._converted is None) == (not stable and not tombstoned), op
        assert encode_manifest_file(edited, b"t") == encode_manifest_file(made, b"t"), op
        assert edited.fragment_facts == made.fragment_facts
        assert edited.num_rows == made.num_rows
        assert edited.max_fragment_id == made.max_fragment_id
        assert edited.fragments == made.fragments
        assert (edited.reader_feature_flags, edited.writer_feature_flags) == (
            made.reader_feature_flags,
            made.writer_feature_flags,
        )
        if not stable and not tombstoned:  # (the kept bytes: the other fragments are not converted)
            assert base.fragment_source._converted is None
        base.fragment_source._converted = None


def test_an_edit_of_a_missing_fragment_conflicts_as_before(tmp_path):
    uri = str(tmp_path / "ds")
    _history(uri, "lance_table")
    base, converted = _both(uri)
    gone = dataclasses.replace(converted.fragments[0], id=77)
    for m in (base, converted):
        with pytest.raises(CommitConflictError, match=r"\[77\]"):
            next_manifest(m, Transaction(base.version, Delete((gone,), (), "x")))
        with pytest.raises(CommitConflictError, match=r"\[77, 78\]"):
            next_manifest(
                m,
                Transaction(
                    base.version, Rewrite((RewriteGroup((gone, dataclasses.replace(gone, id=78)), ()),))
                ),
            )


def test_positions_are_confirmed_and_an_order_that_cannot_be_told_takes_the_objects(tmp_path):
    uri = str(tmp_path / "ds")
    _history(uri, "pylance")
    base, converted = _both(uri)
    source = base.fragment_source
    assert isinstance(source, FragmentSource)
    ids = [f.id for f in converted.fragments]
    assert ids[0] == 0  # (fragment 0's id is not written: its place is told from the records)
    assert source.positions(ids) == list(range(len(ids)))
    assert source.positions([ids[-1], 0]) == [len(ids) - 1, 0]
    assert source.positions([99]) is None
    assert source.positions([]) is None
    # a record whose id is not written first: the ids' order cannot be told, the objects' way is taken
    pb = table_pb2.DataFragment.FromString(source.raws[1])
    pb.ClearField("id")
    late = pb.SerializeToString() + bytes([0x08, ids[1]])  # (a valid record: the id written last)
    assert table_pb2.DataFragment.FromString(late).id == ids[1]
    moved = FragmentSource([source.raws[0], late, *source.raws[2:]], source.where, source.facts, 0)
    assert moved.positions([ids[1]]) is None and not moved.ids_ascend()
    assert source.ids_ascend()


@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_deletes_updates_and_compactions_after_cold_opens_read_back_both_ways(tmp_path, writer):
    uri = str(tmp_path / "ds")
    _history(uri, writer)
    want = lance.dataset(uri).to_table()
    drop: list[int] = []
    for doomed in (0, 201, 202, 300, 304):  # ours, cold each time (fragment 3 goes whole)
        clear_caches()
        lt.dataset(uri).delete(f"id = {doomed}" if doomed != 300 else "id >= 300 AND id < 305")
        drop += [doomed] if doomed != 300 else list(range(300, 305))
    clear_caches()
    lt.dataset(uri).optimize.compact_files(target_rows_per_fragment=25)
    clear_caches()
    lt.dataset(uri).update({"s": "'zz'"}, where="id = 21 OR id = 203")  # rows moved to a new fragment
    lance.dataset(uri).delete("id = 5")  # pylance keeps writing on ours
    lance.write_dataset(small_rows(900, 4), uri, mode="append")
    clear_caches()
    lt.dataset(uri).delete("id = 901")
    drop += [5, 901]
    want = pa.concat_tables([want, small_rows(900, 4)])
    want = want.filter(pc.invert(pc.is_in(want["id"], pa.array(drop, pa.int64())))).sort_by("id")
    moved = pc.is_in(want["id"], pa.array([21, 203], pa.int64()))
    want = want.set_column(1, "s", pc.if_else(moved, pa.scalar("zz"), want["s"]))
    assert lance.dataset(uri).to_table().sort_by("id") == want
    clear_caches()
    assert lt.dataset(uri).to_table().sort_by("id") == want
    ids = [f.fragment_id for f in lance.dataset(uri).get_fragments()]
    assert len(set(ids)) == len(ids)


def test_concurrent_deleters_rebase(tmp_path):
    uri = str(tmp_path / "ds")
    _history(uri, "pylance")
    before = lt.dataset(uri).version
    handles = [lt.dataset(uri) for _ in range(4)]  # all on one version: the later ones rebase
    errors: list[BaseException] = []

    def delete(i: int) -> None:
        try:
            clear_caches()
            handles[i].delete(f"id = {10 + i} OR id = {200 + i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=delete, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert lt.dataset(uri).version == before + 4
    got = lance.dataset(uri).to_table()["id"].to_pylist()
    for i in range(4):
        assert 10 + i not in got and 200 + i not in got
    assert len(got) == 73 - 2 - 8


def test_a_damaged_previous_manifest_is_refused_naming_it(tmp_path):
    uri = str(tmp_path / "ds")
    _history(uri, "lance_table")
    path = escape_a_data_path(uri)
    count = len(versions.list_versions(open_storage(uri)))
    for change in (
        lambda: lt.dataset(uri).delete("id = 4"),
        lambda: lt.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000),
    ):
        clear_caches()
        with pytest.raises(CorruptFileError, match="inside the dataset") as info:
            change()
        assert info.value.path.endswith(path)
        assert len(versions.list_versions(open_storage(uri))) == count  # nothing was committed


def test_edits_use_the_kept_bytes_not_a_conversion(tmp_path, monkeypatch):
    """The delete's commit finds its fragments without converting the previous manifest's."""
    uri = str(tmp_path / "ds")
    _history(uri, "lance_table")
    base, _ = _both(uri)
    calls: list[int] = []
    real = apply._positions

    def counting(m: Any, ids: set[int]) -> Any:
        calls.append(len(ids))
        return real(m, ids)

    monkeypatch.setattr(apply, "_positions", counting)
    txn = Transaction(base.version, Delete((), (2,), "x"))
    out = next_manifest(base, txn)
    assert calls == [1]
    assert out.fragment_source is not None and base.fragment_source._converted is None
    assert [f.id for f in out.fragments] == [0, 1, 3, 4]
