"""Writing blob v2 columns of format 2.2 datasets: pylance reads and continues what lance_table
writes, and lance_table continues what pylance writes (creates, appends, deletes, compaction).

Every check compares with pylance 14: the manifest schema, the descriptors (kind, size, sidecar id;
inline positions are file offsets, which depend on the rest of the file) and the blob bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.errors import SchemaError, UnsupportedFormatError
from lance_table.file import writer as file_writer
from lance_table.file.v2_1.blob_v2 import BlobKind

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

INLINE_MAX = 64 * 1024
PACKED_MAX = 4 * 1024 * 1024
BLOB_META = {"lance-encoding:blob": "true"}


def _table(values: list[bytes | None], start: int = 0, metadata: dict[str, str] | None = None) -> pa.Table:
    field = pa.field("b", pa.large_binary(), metadata={**BLOB_META, **(metadata or {})})
    schema = pa.schema([pa.field("id", pa.int64()), field])
    ids = pa.array(range(start, start + len(values)), pa.int64())
    return pa.table({"id": ids, "b": pa.array(values, pa.large_binary())}, schema=schema)


def _values(n: int, seed: int, big: bool = True) -> list[bytes | None]:
    """Empty, inline (up to the 64 KiB edge), packed (~70 KB) and, with ``big``, one dedicated
    (~5 MB) blob; every 5th row null."""
    rng = np.random.default_rng(seed)
    sizes = [0, 3, INLINE_MAX, INLINE_MAX + 1, 70_000, 1000, 80_000]
    out: list[bytes | None] = []
    for i in range(n):
        if i % 5 == 2:
            out.append(None)
            continue
        size = 5_000_000 if big and i == 1 else sizes[i % len(sizes)]
        out.append(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    return out


def _descriptors(uri: str) -> list[dict | None]:
    return lance.dataset(uri).to_table().column("b").to_pylist()


def _same_layout(ours: list[dict | None], theirs: list[dict | None]) -> None:
    """Descriptors that store the blobs alike: same kinds, sizes and sidecars, and positions in
    the sidecars (inline positions are offsets in data files laid out differently)."""
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if b is None:
            assert a is None, k
            continue
        assert a is not None, k
        if b["kind"] == BlobKind.INLINE:
            a, b = dict(a, position=0), dict(b, position=0)
        assert a == b, (k, a, b)


def _check(uri: str, expected: list[bytes | None]) -> None:
    """Both libraries read the same tables, and the expected bytes, at every version."""
    for version in range(1, lance.dataset(uri).version + 1):
        ours, theirs = lt.dataset(uri, version=version), lance.dataset(uri, version=version)
        assert_tables_equal(ours.to_table(), theirs.to_table())
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    ids = theirs.to_table(columns=["id"]).column("id").to_pylist()
    rows = list(range(len(ids)))
    for blobs in (theirs.take_blobs("b", indices=rows), ours.take_blobs("b", indices=rows)):
        got = [None if f is None else f.read() for f in blobs]
        assert got == [expected[i] for i in ids]


def _sidecars(uri: str) -> list[tuple[str, int]]:
    """(name, size) of every sidecar of the dataset, whatever data file it belongs to."""
    return sorted((p.name, p.stat().st_size) for p in Path(uri, "data").glob("*/*.blob"))


@pytest.mark.parametrize("rows_per_file", [None, 4])
def test_pylance_reads_what_we_create(tmp_path, rows_per_file):
    values = _values(12, 1)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    kw = {} if rows_per_file is None else {"max_rows_per_file": rows_per_file}
    lt.write_dataset(_table(values), ours, data_storage_version="2.2", **kw)
    lance.write_dataset(_table(values), theirs, data_storage_version="2.2", **kw)
    assert lt.dataset(ours).manifest.fields == lt.dataset(theirs).manifest.fields
    assert [f.fields for frag in lt.dataset(ours).manifest.fragments for f in frag.files] == [
        f.fields for frag in lt.dataset(theirs).manifest.fragments for f in frag.files
    ]
    assert lance.dataset(ours).schema == lance.dataset(theirs).schema
    _same_layout(_descriptors(ours), _descriptors(theirs))
    assert _sidecars(ours) == _sidecars(theirs)
    kinds = {d["kind"] for d in _descriptors(ours) if d is not None}
    assert kinds == {BlobKind.INLINE, BlobKind.PACKED, BlobKind.DEDICATED}
    _check(ours, values)


def test_nulls_and_empty_blobs(tmp_path):
    values: list[bytes | None] = [None, b"", None, b"", b"a"]
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lt.write_dataset(_table(values), ours, data_storage_version="2.2")
    lance.write_dataset(_table(values), theirs, data_storage_version="2.2")
    _same_layout(_descriptors(ours), _descriptors(theirs))
    _check(ours, values)
    assert lance.dataset(ours).take_blobs("b", indices=[1])[0].size() == 0


def test_non_nullable_blob_column_and_thresholds(tmp_path):
    """A non-null column, and the threshold metadata pylance honours: a small pack file limit
    opens a new packed sidecar for each blob that would pass it."""
    rng = np.random.default_rng(5)
    values: list[bytes | None] = [rng.bytes(70_000) for _ in range(3)] + [b"", b"x" * 300]
    md = {
        "lance-encoding:blob-pack-file-size-threshold": "100000",
        "lance-encoding:blob-inline-size-threshold": "200",
    }
    field = pa.field("b", pa.large_binary(), nullable=False, metadata={**BLOB_META, **md})
    table = pa.table({"id": pa.array(range(5), pa.int64()), "b": pa.array(values, pa.large_binary())})
    table = table.cast(pa.schema([pa.field("id", pa.int64()), field]))
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lt.write_dataset(table, ours, data_storage_version="2.2")
    lance.write_dataset(table, theirs, data_storage_version="2.2")
    assert lt.dataset(ours).manifest.fields == lt.dataset(theirs).manifest.fields
    _same_layout(_descriptors(ours), _descriptors(theirs))
    assert _sidecars(ours) == _sidecars(theirs)
    assert len(_sidecars(ours)) == 3  # a pack file per 70 KB blob; the 300-byte one joins the last
    _check(ours, values)


def test_blob_array_input(tmp_path):
    """pylance's ``BlobType`` input (four fields) keeps its logical struct in the manifest."""
    from lance.blob import blob_array

    values: list[bytes | None] = [b"abc", None, b"", b"z" * 70_000]
    table = pa.table({"id": pa.array(range(4), pa.int64()), "b": blob_array(values)})
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lt.write_dataset(table, ours, data_storage_version="2.2")
    lance.write_dataset(table, theirs, data_storage_version="2.2")
    assert lt.dataset(ours).manifest.fields == lt.dataset(theirs).manifest.fields
    _same_layout(_descriptors(ours), _descriptors(theirs))
    _check(ours, values)
    # appends take bytes, blob arrays or the plain struct alike
    lt.write_dataset(_table([b"q"], 4), ours, mode="append")
    lance.write_dataset(_table([b"r"], 5), ours, mode="append")
    lt.write_dataset(
        pa.table({"id": pa.array([6], pa.int64()), "b": blob_array([b"s"])}), ours, mode="append"
    )
    _check(ours, [*values, b"q", b"r", b"s"])


def test_appends_deletes_and_compaction_alternate(tmp_path):
    """Each library continues the other's versions; every version reads alike in both."""
    uri = str(tmp_path / "ds")
    values = _values(10, 2) + _values(8, 3, big=False) + _values(9, 4) + _values(6, 6, big=False)
    lance.write_dataset(_table(values[:10]), uri, data_storage_version="2.2", max_rows_per_file=6)
    lt.write_dataset(_table(values[10:18], 10), uri, mode="append", max_rows_per_file=5)
    _check(uri, values[:18])
    lance.write_dataset(_table(values[18:27], 18), uri, mode="append")
    lt.dataset(uri).delete("id % 4 = 1")
    _check(uri, values[:27])
    before = {p for p in Path(uri, "data").glob("*.lance")}
    compacted = lt.dataset(uri)
    compacted.compact_files(target_rows_per_fragment=1000)
    assert len(compacted.get_fragments()) == 1
    new_files = {p for p in Path(uri, "data").glob("*.lance")} - before
    (new,) = new_files
    assert Path(new.with_suffix("")).is_dir()  # the rewrite has sidecars of its own
    assert not any(before_file.stem in str(new) for before_file in before)
    _check(uri, values[:27])
    lance.write_dataset(_table(values[27:], 27), uri, mode="append")
    lance.dataset(uri).delete("id = 28")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
    lt.write_dataset(_table([b"tail" * 20_000], 40), uri, mode="append")
    lt.dataset(uri).compact_files(target_rows_per_fragment=1000)
    _check(uri, [*values, *[None] * 7, b"tail" * 20_000])
    assert lance.dataset(uri).count_rows() == 33 - 7 - 1 + 1


def test_overwrite_and_many_descriptor_pages(tmp_path, monkeypatch):
    """Descriptor columns cut into several pages (a small page budget) read in pylance."""
    kw = dict(file_writer.LanceFileWriter.__init__.__kwdefaults__)
    monkeypatch.setattr(
        file_writer.LanceFileWriter.__init__, "__kwdefaults__", {**kw, "page_size_bytes": 1000}
    )
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table([b"old"]), uri, data_storage_version="2.2")
    values = [None if i % 9 == 0 else bytes([i % 256]) * (i % 50) for i in range(300)]
    lt.write_dataset(_table(values), uri, mode="overwrite", data_storage_version="2.2")
    _check(uri, values)


def test_failed_write_leaves_no_files(tmp_path):
    uri = str(tmp_path / "ds")
    lance.write_dataset(_table([b"a"]), uri, data_storage_version="2.2")
    before = sorted(p for p in Path(uri).rglob("*") if p.is_file())

    def batches():
        yield _table([b"p" * 70_000, b"d" * 5_000_000], 1).to_batches()[0]
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        lt.write_dataset(batches(), uri, mode="append", schema=_table([]).schema)
    assert sorted(p for p in Path(uri).rglob("*") if p.is_file()) == before
    assert lance.dataset(uri).version == 1


def test_what_is_not_written_is_refused(tmp_path):
    from lance.blob import BlobType, blob_array

    uri = str(tmp_path / "ds")
    lt.write_dataset(_table([b"a"]), uri, data_storage_version="2.2")
    external = pa.table({"id": pa.array([1], pa.int64()), "b": blob_array([(tmp_path / "x.bin").as_uri()])})
    with pytest.raises(lt.BlobLocationError, match="outside the dataset's registered external base"):
        lt.write_dataset(external, uri, mode="append")  # (see test_blob_v2_external for the rest)
    neither = pa.StructArray.from_arrays(
        [pa.array([None], pa.large_binary()), pa.array([None], pa.utf8())], names=["data", "uri"]
    )
    with pytest.raises(SchemaError, match=r"'b'.*neither"):
        lt.write_dataset(pa.table({"id": pa.array([1], pa.int64()), "b": neither}), uri, mode="append")
    assert lt.dataset(uri).version == 1
    with pytest.raises(UnsupportedFormatError, match=r"'b'.*2.2"):
        lt.write_dataset(
            pa.table({"b": blob_array([b"x"])}), str(tmp_path / "v21"), data_storage_version="2.1"
        )
    nested = pa.StructArray.from_arrays([blob_array([b"x"])], fields=[pa.field("b", BlobType())])
    with pytest.raises(UnsupportedFormatError, match="top level"):
        lt.write_dataset(pa.table({"s": nested}), str(tmp_path / "nested"), data_storage_version="2.2")


def test_compaction_stores_blobs_as_pylance_does(tmp_path):
    """The same dataset compacted by each library: the new descriptors and sidecars agree."""
    import shutil

    base = str(tmp_path / "base")
    values = _values(14, 8)
    lance.write_dataset(_table(values), base, data_storage_version="2.2", max_rows_per_file=5)
    lance.dataset(base).delete("id = 3")
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    lt.dataset(ours).compact_files(target_rows_per_fragment=1000)
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1000)
    assert lance.dataset(ours).version == lance.dataset(theirs).version
    _same_layout(_descriptors(ours), _descriptors(theirs))
    assert _sidecars(ours) == _sidecars(theirs)
    _check(ours, values)


def test_cleanup_keeps_the_sidecars_of_live_files(tmp_path):
    """A sidecar lives and dies with its data file: cleanup never takes one whose data file a
    kept version needs, and takes those of the files it removes."""
    import datetime as dt

    uri = str(tmp_path / "ds")
    first = _values(8, 3, big=False)
    lance.write_dataset(_table(first), uri)  # pylance's sidecars
    second = _values(8, 4, big=False)
    lt.write_dataset(_table(second, 8), uri, mode="append")  # ours
    live = _sidecars(uri)
    assert len(live) >= 2
    lt.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert _sidecars(uri) == live
    for ds in (lt.dataset(uri), lance.dataset(uri)):
        got = [None if f is None else f.read() for f in ds.take_blobs("b", indices=list(range(16)))]
        assert got == first + second
    # an overwrite leaves the old files to cleanup, sidecars included
    third = _values(6, 5, big=False)
    lt.write_dataset(_table(third), uri, mode="overwrite")
    new = set(_sidecars(uri)) - set(live)
    lt.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert set(_sidecars(uri)) == new
    blobs = lance.dataset(uri).take_blobs("b", indices=list(range(6)))
    assert [None if f is None else f.read() for f in blobs] == third
