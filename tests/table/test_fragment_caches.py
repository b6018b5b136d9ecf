"""What a scan keeps between scans: data file readers and deletion vectors, bounded, and never
served for a path that was written again."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.reader import LanceFileReader
from lance_table.format import paths
from lance_table.storage.local import LocalStorage
from lance_table.table import deletion, fragment_batch, fragment_plans
from lance_table.table.readers import READERS, ReaderCache


def _table(start: int, rows: int) -> pa.Table:
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table({"id": ids, "s": pa.array([f"v{i}" for i in ids.tolist()])})


pytestmark = pytest.mark.usefixtures("empty_caches")


def _count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    init = LanceFileReader.__init__

    def counting(self: LanceFileReader, source: object) -> None:
        opened.append(str(getattr(source, "name", source)))
        init(self, source)  # type: ignore[arg-type]

    monkeypatch.setattr(LanceFileReader, "__init__", counting)
    return opened


def test_a_second_scan_opens_no_data_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(0, 600), uri, max_rows_per_file=50)
    opened = _count_opens(monkeypatch)
    first = lt.dataset(uri).to_table()
    assert len(opened) == 12
    assert lt.dataset(uri).to_table().equals(first)
    assert lt.dataset(uri).to_table(filter="id >= 100 AND id < 120").num_rows == 20
    assert len(opened) == 12
    assert first.equals(lance.dataset(uri).to_table())


def test_a_rewritten_path_of_another_size_is_opened_again(tmp_path: Path) -> None:
    small, big = str(tmp_path / "small"), str(tmp_path / "big")
    lt.write_dataset(_table(0, 10), small)
    lt.write_dataset(_table(100, 500), big)
    storage = LocalStorage(small)
    (entry,) = lt.dataset(small).manifest.fragments[0].files
    assert READERS.get(storage, entry).num_rows == 10
    # the same path, written again with other contents (and the manifest saying so)
    (other,) = lt.dataset(big).manifest.fragments[0].files
    shutil.copy(Path(big) / paths.data_file_path(other.path), Path(small) / paths.data_file_path(entry.path))
    rewritten = dataclasses.replace(entry, file_size_bytes=other.file_size_bytes)
    assert READERS.get(storage, rewritten).num_rows == 500


def test_the_reader_cache_is_bounded_by_entries_and_bytes(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(0, 100), uri, max_rows_per_file=10)
    storage = LocalStorage(uri)
    files = [f.files[0] for f in lt.dataset(uri).manifest.fragments]
    by_count = ReaderCache(size=3)
    for f in files:
        by_count.get(storage, f)
    assert len(by_count) == 3
    from lance_table.table.readers import reader_weight

    # a small file's reader weighs its bytes too: the weights differ a little with the files' sizes
    heaviest = max(reader_weight(ReaderCache().get(storage, f)) for f in files)
    by_bytes = ReaderCache(max_bytes=4 * heaviest)
    for f in files:
        by_bytes.get(storage, f)
    assert len(by_bytes) == 4 and by_bytes.nbytes <= by_bytes.max_bytes


def _count_deletion_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    read = LocalStorage.read

    def counting(self: LocalStorage, path: str) -> bytes:
        if path.startswith("_deletions"):
            reads.append(path)
        return read(self, path)

    monkeypatch.setattr(LocalStorage, "read", counting)
    return reads


@pytest.mark.parametrize("rows_deleted", ["id % 10 = 0", "id % 2 = 1"])
def test_deletion_vectors_are_decoded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_deleted: str
) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(0, 400), uri, max_rows_per_file=100)
    lance.dataset(uri).delete(f"{rows_deleted} AND id < 300")
    reads = _count_deletion_reads(monkeypatch)
    first = lt.dataset(uri).to_table()
    n = len(reads)
    assert n >= 2
    assert lt.dataset(uri).to_table().equals(first)
    assert lt.dataset(uri).count_rows() == first.num_rows
    assert len(reads) == n
    assert first.equals(lance.dataset(uri).to_table())
    # a new deletion writes a new file: read once, and the rows it deletes are gone
    lt.dataset(uri).delete("id = 301")
    assert lt.dataset(uri).to_table().equals(lance.dataset(uri).to_table())
    assert len(reads) == n + 1


def test_cached_deletion_vectors_are_read_only(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(0, 100), uri)
    lt.dataset(uri).delete("id < 5")
    frag = lt.dataset(uri).manifest.fragments[0]
    got = deletion.read_deletions(LocalStorage(uri), frag)
    assert got.tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        got[0] = 7


def test_the_deletion_cache_is_bounded() -> None:
    cache = deletion.DeletionCache(size=2, max_bytes=10**6)
    for i in range(4):
        cache.put(("s", f"p{i}", "arrow", 1, 10), np.array([i], np.uint32))
    assert len(cache) == 2 and cache.get(("s", "p0", "arrow", 1, 10)) is None
    small = deletion.DeletionCache(max_bytes=1000)
    small.put(("s", "big", "arrow", 1000, 10**6), np.arange(1000, dtype=np.uint32))
    assert len(small) == 0


def test_fragments_with_few_deletions_read_whole_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(0, 1000), uri, max_rows_per_file=100)
    lance.dataset(uri).delete("id % 10 = 3 OR id = 7")
    runs_read: list[int] = []
    read_runs = LanceFileReader._read_runs

    def counting(self: LanceFileReader, runs, *args, **kwargs):  # type: ignore[no-untyped-def]
        runs_read.append(runs.count)
        return read_runs(self, runs, *args, **kwargs)

    monkeypatch.setattr(LanceFileReader, "_read_runs", counting)
    batched = lt.dataset(uri).to_table()  # small fragments: read as batches, whole files decoded
    assert batched.equals(lance.dataset(uri).to_table())
    # fragment by fragment (larger fragments are read so): each file's reader decodes one span,
    # its pages selecting the live rows
    no_plans = lambda frags, names: [None] * len(frags)  # noqa: E731
    monkeypatch.setattr(fragment_batch, "plans", no_plans)
    monkeypatch.setattr(fragment_plans, "plans", no_plans)  # (by_columns asks per column)
    got = lt.dataset(uri).to_table()
    assert got.equals(lance.dataset(uri).to_table())
    assert runs_read and set(runs_read) == {1}
    ours = lt.dataset(uri).to_table(columns=["s"], filter="id > 500", with_row_id=True)
    assert ours.equals(lance.dataset(uri).to_table(columns=["s"], filter="id > 500", with_row_id=True))


@pytest.mark.parametrize("fmt", ["2.1", "2.2"])
def test_a_small_file_is_read_in_one_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    from lance_table.storage.sources import LocalFileSource

    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(0, 300), uri, max_rows_per_file=50, data_storage_version=fmt)
    expected = lt.dataset(uri).to_table()  # the readers are open from now on
    requests: list[str] = []
    read_ranges = LocalFileSource.read_ranges

    def counting(self: LocalFileSource, ranges):  # type: ignore[no-untyped-def]
        requests.append(self.name)
        return read_ranges(self, ranges)

    monkeypatch.setattr(LocalFileSource, "read_ranges", counting)
    # (a batch of local files reads each one's span straight into its place in the batch)
    from lance_table.table import fragment_reads

    read_into = fragment_reads.read_into

    def counting_into(source: LocalFileSource, reads):  # type: ignore[no-untyped-def]
        requests.extend(source.name for _ in reads)
        return read_into(source, reads)

    monkeypatch.setattr(fragment_reads, "read_into", counting_into)
    got = lt.dataset(uri).to_table()
    assert got.equals(expected) and got.equals(lance.dataset(uri).to_table())
    assert len(requests) == 6 and len(set(requests)) == 6


def test_clear_caches_forgets_every_kept_reader_vector_and_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``clear_caches`` leaves the process as a fresh one would be: the next read opens every
    data file again and returns what pylance returns."""
    from lance_table.table.session import clear_caches

    uri = str(tmp_path / "t")
    lt.write_dataset(_table(0, 50), uri)
    lt.write_dataset(_table(50, 50), uri, mode="append")
    lt.dataset(uri).delete("id = 3")
    ds = lt.dataset(uri)
    first = ds.to_table(filter="id < 60")
    assert len(READERS) and len(deletion.DELETIONS)
    assert clear_caches() > 0
    assert len(READERS) == len(deletion.DELETIONS) == 0
    opened = _count_opens(monkeypatch)
    again = lt.dataset(uri).to_table(filter="id < 60")
    assert len(opened) == 2
    assert again.equals(first)
    assert again.equals(lance.dataset(uri).to_table(filter="id < 60"))
