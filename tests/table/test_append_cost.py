"""An append on a manifest as read reuses its fragments' bytes (FragmentSource.extended): the
manifest it writes is the one converting every fragment wrote, pylance reads it and keeps writing,
fragment ids stay unique, concurrent appends still resolve, and a damaged previous manifest is
refused naming it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pytest
from helpers import escape_a_data_path, latest_manifest, small_history, small_rows

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.format import fragment as fragment_module
from lance_table.format.fragment_source import FragmentSource
from lance_table.format.manifest_file import _parse, decode_manifest_file, encode_manifest_file
from lance_table.format.transaction import Append, Transaction
from lance_table.storage import open_storage
from lance_table.table import versions
from lance_table.table.commit.apply import next_manifest
from lance_table.table.session import clear_caches

lance = pytest.importorskip("lance")


def _history(uri: str, writer: str, **options: Any) -> None:
    """Four appends and a delete, written by ``writer``."""
    small_history(uri, writer, (30, 10, 20, 5), **options)


def _ids(uri: str) -> list[int]:
    return [f.fragment_id for f in lance.dataset(uri).get_fragments()]


@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
@pytest.mark.parametrize("options", [{}, {"data_storage_version": "2.0"}, {"enable_stable_row_ids": True}])
def test_an_append_on_a_manifest_as_read_writes_the_converted_paths_bytes(tmp_path, writer, options):
    uri = str(tmp_path / "ds")
    _history(uri, writer, **options)
    data, path = latest_manifest(uri)
    base = decode_manifest_file(data, path).manifest
    assert base.fragment_source is not None
    pb, _, _ = _parse(data, path)
    new = tuple(
        dataclasses.replace(f, id=0) for f in fragment_module.checked_fragments(pb.fragments[:2], path)
    )
    stable = bool(options.get("enable_stable_row_ids"))
    reused, converted = base, dataclasses.replace(base, fragments=tuple(base.fragments))
    base.fragment_source._converted = None  # (replace converted it)
    for step in range(3):  # three appends in a row: the later ones extend an extended source
        txn = Transaction(read_version=reused.version, operation=Append(new), uuid=f"u{step}")
        reused = next_manifest(reused, txn, now_ns=10**18 + step)
        converted = next_manifest(converted, txn, now_ns=10**18 + step)
        source = reused.fragment_source
        assert (source is not None and source._converted is None) == (not stable)
        assert converted.fragment_source is None
        assert encode_manifest_file(reused, b"t") == encode_manifest_file(converted, b"t")
        assert reused.fragment_facts == converted.fragment_facts
        assert reused.num_rows == converted.num_rows
        assert reused.max_fragment_id == converted.max_fragment_id == 5 + 2 * step
    if not stable:  # live rows as converting tells them (the source knows them without)
        assert reused.fragment_source.live_rows == [f.num_rows for f in converted.fragments]
    assert reused.fragments == converted.fragments
    assert [f.id for f in reused.fragments] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_appends_after_cold_opens_read_back_both_ways_with_unique_ids(tmp_path, writer):
    uri = str(tmp_path / "ds")
    _history(uri, writer)
    expected = [lance.dataset(uri).to_table()]
    for i in range(3):  # ours, cold each time (the previous manifest read, not converted)
        clear_caches()
        lt.write_dataset(small_rows(1000 + 10 * i, 7), uri, mode="append")
        expected.append(small_rows(1000 + 10 * i, 7))
    lance.write_dataset(small_rows(2000, 4), uri, mode="append")  # pylance keeps writing on ours
    expected.append(small_rows(2000, 4))
    clear_caches()
    lt.write_dataset(small_rows(3000, 3), uri, mode="append")
    expected.append(small_rows(3000, 3))
    want = pa.concat_tables(expected)
    assert lance.dataset(uri).to_table() == want
    clear_caches()
    assert lt.dataset(uri).to_table() == want
    ids = _ids(uri)
    assert len(set(ids)) == len(ids) == 9 and ids == sorted(ids)
    clear_caches()
    lt.dataset(uri).delete("id = 1001 OR id = 2000")  # delete, then compact, then append
    clear_caches()
    lt.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
    clear_caches()
    lt.write_dataset(small_rows(4000, 2), uri, mode="append")
    lance.write_dataset(small_rows(5000, 2), uri, mode="append")
    ids = _ids(uri)
    assert len(set(ids)) == len(ids) and ids[-2] > max(ids[:-2]) and ids[-1] > ids[-2]
    want = want.filter(pa.compute.invert(pa.compute.is_in(want["id"], pa.array([1001, 2000]))))
    want = pa.concat_tables([want, small_rows(4000, 2), small_rows(5000, 2)])
    got = lance.dataset(uri).to_table()
    assert got.sort_by("id") == want.sort_by("id")
    clear_caches()
    assert lt.dataset(uri).to_table().sort_by("id") == want.sort_by("id")


def test_concurrent_appends_on_one_read_version_resolve(tmp_path):
    uri = str(tmp_path / "ds")
    _history(uri, "lance_table")
    read_version = lt.dataset(uri).version
    for i in range(3):  # each commits on the same version read: the later ones rebase
        frags = lt.fragment.write_fragments(small_rows(100 * (i + 10), 3), uri)
        clear_caches()
        lt.LanceDataset.commit(uri, lt.LanceOperation.Append(frags), read_version=read_version)
    ids = _ids(uri)
    assert len(set(ids)) == len(ids) == 7
    assert lance.dataset(uri).count_rows() == 63 + 9


def test_a_damaged_previous_manifest_is_refused_naming_it(tmp_path):
    uri = str(tmp_path / "ds")
    _history(uri, "lance_table")
    path = escape_a_data_path(uri)
    clear_caches()
    with pytest.raises(CorruptFileError, match="inside the dataset") as info:
        lt.write_dataset(small_rows(900, 3), uri, mode="append")
    assert info.value.path.endswith(path)
    assert lance.dataset(uri, version=4).count_rows() == 65  # nothing was committed
    assert len(versions.list_versions(open_storage(uri))) == 5


def test_extended_keeps_a_converted_tuple_converted(tmp_path):
    uri = str(tmp_path / "ds")
    _history(uri, "lance_table")
    data, path = latest_manifest(uri)
    source = decode_manifest_file(data, path).manifest.fragment_source
    assert isinstance(source, FragmentSource)
    before = source.fragments()
    more = (dataclasses.replace(before[0], id=9),)
    out = source.extended(more)
    assert out is not None and out._converted == before + more
    assert out.entries() == encode_entries(before + more)


def encode_entries(fragments: tuple[Any, ...]) -> bytes:
    return b"".join(f.manifest_entry for f in fragments)
