"""A manifest's fragment entries are joined once per fragment tuple: the next version of an append
reuses the entries of the version before and joins only its new fragments, and the bytes are those
of a manifest encoded from scratch (which pylance reads)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa

import lance_table as lt
from lance_table.format import manifest_file
from lance_table.format.manifest import DELETION_BITMAP, DataFile, DeletionFile, Fragment, Manifest
from lance_table.format.manifest_file import decode_manifest_file, encode_manifest_file
from lance_table.schema import fields_from_arrow
from lance_table.table.session import clear_caches


def _fragment(i: int, rows: int = 10) -> Fragment:
    return Fragment(id=i, files=(DataFile(f"f{i}.lance", (0,), (0,), 2, 2, 100 + i),), physical_rows=rows)


def _manifest(fragments: tuple[Fragment, ...], version: int) -> Manifest:
    fields = tuple(fields_from_arrow(pa.schema([pa.field("id", pa.int64())])))
    return Manifest(fields=fields, fragments=fragments, version=version, max_fragment_id=len(fragments))


def _fresh(m: Manifest) -> bytes:
    """``m`` encoded with no entries kept from an earlier manifest."""
    manifest_file._ENTRIES.clear()
    return encode_manifest_file(m, b"txn")


def test_an_appended_version_reuses_the_entries_of_the_one_before() -> None:
    clear_caches()
    first = _manifest(tuple(_fragment(i) for i in range(5)), 1)
    encode_manifest_file(first, b"txn")
    # an entry the next encoding would read again shows up in its bytes
    first.fragments[2].__dict__["manifest_entry"] = b"\x12\x00"
    new = _fragment(5)
    second = _manifest((*first.fragments, new), 2)
    data = encode_manifest_file(second, b"txn")
    assert b"\x12\x00\x12" not in data.replace(new.manifest_entry, b"")  # the kept bytes were joined
    del first.fragments[2].__dict__["manifest_entry"]
    assert data == _fresh(second)
    assert decode_manifest_file(data, "x.manifest").manifest.fragments == second.fragments


def test_manifests_that_do_not_extend_a_kept_tuple_are_joined_whole() -> None:
    clear_caches()
    frags = tuple(_fragment(i) for i in range(6))
    encode_manifest_file(_manifest(frags, 1), b"txn")
    deleted = replace(frags[3], deletion_file=DeletionFile(DELETION_BITMAP, 2, 7, 1))
    cases = [
        frags[:4],  # shorter than the kept tuple
        (*frags[:3], deleted, *frags[4:]),  # a fragment in the middle changed
        (*frags[1:], _fragment(6)),  # the first removed (compaction)
        (*tuple(_fragment(i) for i in range(6)), _fragment(6, 3)),  # equal fragments, other objects
        (),
    ]
    for k, fragments in enumerate(cases):
        m = _manifest(fragments, 2 + k)
        encode_manifest_file(_manifest(frags, 1), b"txn")  # kept again before each case
        data = encode_manifest_file(m, b"txn")
        assert data == _fresh(m), k
        assert decode_manifest_file(data, "x.manifest").manifest.fragments == fragments


def test_appends_with_kept_entries_read_back_in_pylance_and_lance_table(tmp_path) -> None:
    import lance

    clear_caches()
    uri = str(tmp_path / "ds")
    rows = lambda i: pa.table({"id": np.arange(i * 10, i * 10 + 10), "s": [f"r{i}"] * 10})  # noqa: E731
    lt.write_dataset(rows(0), uri, data_storage_version="2.2")
    for i in range(1, 8):
        lt.write_dataset(rows(i), uri, mode="append")
    lance.write_dataset(rows(8), uri, mode="append")  # pylance's manifest: new fragment objects
    for i in range(9, 12):
        lt.write_dataset(rows(i), uri, mode="append")
    expected = pa.concat_tables([rows(i) for i in range(12)])
    theirs = lance.dataset(uri)
    assert len(theirs.get_fragments()) == 12
    assert theirs.to_table().sort_by("id").equals(expected)
    assert lt.dataset(uri).to_table().sort_by("id").equals(expected)
    # every version's manifest is what encoding it from scratch gives
    clear_caches()
    ours = lt.dataset(uri)
    for v in (2, 5, 12):
        old = ours.checkout_version(v)
        assert len(old.get_fragments()) == v
        assert lance.dataset(uri, version=v).count_rows() == v * 10
