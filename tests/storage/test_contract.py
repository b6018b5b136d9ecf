"""One contract, every backend: local disk, fsspec memory, S3 (moto's server), Azure (Azurite) and
GCS (fake-gcs-server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import fsspec
import numpy as np
import pyarrow as pa
import pytest
from helpers import race_creates

from lance_table.errors import CorruptFileError
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter
from lance_table.storage import Storage, open_storage
from lance_table.storage.sources import LocalFileSource, read_joined, read_spans


@pytest.fixture(
    params=[
        "local",
        "memory",
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("s3fs", marks=pytest.mark.s3),  # S3 with every read through s3fs
        pytest.param("azure", marks=pytest.mark.azure),
        pytest.param("gcs", marks=pytest.mark.gcs),
    ]
)
def storage(request, tmp_path) -> Iterator[Storage]:
    if request.param == "local":
        yield open_storage(str(tmp_path / "root"))
    elif request.param == "memory":
        root = f"memory://contract-{uuid.uuid4().hex}"
        yield open_storage(root)
        fsspec.filesystem("memory").rm(root.replace("memory://", "/"), recursive=True)
    elif request.param == "s3fs":
        options = {**request.getfixturevalue("s3_options"), "lance_table_s3_reader": "s3fs"}
        yield open_storage(request.getfixturevalue("s3_uri"), options)
    else:
        uri = request.getfixturevalue({"s3": "s3_uri", "azure": "az_uri", "gcs": "gs_uri"}[request.param])
        options = request.getfixturevalue(f"{request.param}_options")
        yield open_storage(uri, options)


def test_write_read_size_exists(storage):
    assert not storage.exists("a/b.bin")
    storage.write("a/b.bin", b"hello world")
    assert storage.exists("a/b.bin")
    assert storage.read("a/b.bin") == b"hello world"
    assert storage.size("a/b.bin") == 11
    storage.write("a/b.bin", b"replaced")
    assert storage.read("a/b.bin") == b"replaced"
    with pytest.raises(FileNotFoundError):
        storage.read("a/missing")


def test_read_ranges(storage):
    data = bytes(range(256)) * 40
    storage.write("r.bin", data)
    ranges = [(0, 10), (5000, 100), (12, 0), (10_000, 240), (3, 7)]
    assert [bytes(b) for b in storage.read_ranges("r.bin", ranges)] == [data[o : o + n] for o, n in ranges]
    source = storage.source("r.bin")
    for one in [(10_000, 240)], [(0, len(data))], [(len(data), 0)]:  # one range: read as it is
        assert [bytes(b) for b in source.read_ranges(one)] == [data[o : o + n] for o, n in one]
    for bad in [(10_000, 241)], [(-1, 4)], [(0, 4), (10_200, 41)]:
        with pytest.raises(CorruptFileError, match="outside the file") as info:
            source.read_ranges(bad)
        assert "r.bin" in str(info.value)


def test_read_joined_matches_the_ranges_read_one_by_one(storage):
    """``read_joined`` gives the ranges' bytes one after another, whatever their order, gaps or
    number (local files read runs of close ranges with one preadv each, in calls of at most a few
    hundred buffers)."""
    data = bytes(range(251)) * 4200  # about 1 MiB; 251 keeps neighbouring ranges distinct
    storage.write("j.bin", data)
    source = storage.source("j.bin")
    rng = np.random.default_rng(5)
    many = np.sort(rng.choice(len(data) - 300, 1500, replace=False))
    cases = {
        "gaps small and large": [(0, 10), (20, 5), (9000, 300), (9300, 1), (500_000, 4096)],
        "adjacent": [(100, 50), (150, 50), (200, 0), (200, 7)],
        "all far apart": [(0, 10), (20_000, 5), (60_000, 300), (900_000, 0), (950_000, 7)],
        "empty ranges": [(0, 0), (len(data), 0), (40, 0)],
        "one": [(77, 1000)],
        "out of order": [(5000, 10), (0, 10), (7000, 3)],
        "overlapping": [(0, 100), (50, 100), (120, 5)],
        "over the iovec limit": [(int(s), int(n)) for s, n in zip(many, rng.integers(0, 300, many.size))],
    }
    for name, ranges in cases.items():
        want = b"".join(data[o : o + n] for o, n in ranges)
        assert bytes(read_joined(source, ranges)) == want, name
        assert bytes(read_joined(source, np.array(ranges, np.int64).reshape(-1, 2))) == want, name
    assert bytes(read_joined(source, [])) == b""
    for bad in [(10, 4), (len(data) - 3, 4)], [(-1, 4)], [(0, 4), (10, -2)]:
        with pytest.raises(CorruptFileError, match="outside the file") as info:
            read_joined(source, bad)
        assert "j.bin" in str(info.value)


def test_read_spans_places_each_range_in_the_spans_read(storage):
    """``read_spans`` reads sorted ranges as spans (near ones together with the bytes between) and
    says where each range lies in what it read."""
    data = bytes(range(251)) * 4200
    storage.write("s.bin", data)
    source = storage.source("s.bin")
    starts = np.array([0, 100, 30_000, 30_010, 200_000, 1_000_000], np.int64)
    ends = starts + np.array([10, 50, 10, 0, 4096, 300], np.int64)
    got, at, to = read_spans(source, starts, ends)
    for s, e, a, t in zip(starts.tolist(), ends.tolist(), at.tolist(), to.tolist()):
        assert bytes(got[a:t]) == data[s:e]
    gaps = starts[1:] - ends[:-1]
    bridged = gaps[gaps <= int(getattr(source, "coalesce_gap", 0))]  # read with their neighbours
    assert len(got) == int((ends - starts).sum() + bridged.sum())
    empty, at, to = read_spans(source, starts[:0], ends[:0])
    assert len(empty) == 0 and at.size == 0 and to.size == 0


def test_a_local_file_cut_short_under_a_joined_read_is_a_short_read(tmp_path):
    path = tmp_path / "cut.bin"
    path.write_bytes(bytes(range(256)) * 64)
    source = LocalFileSource(path)
    path.write_bytes(bytes(range(256)) * 32)  # shorter than the source was told
    for ranges in (
        [(0, 10), (12_000, 100)],
        [(100, 10), (9000, 10)],
        [(100, 10), (8000, 1000)],
        [(8000, 10), (8150, 100)],
    ):
        with pytest.raises(CorruptFileError, match="short read") as info:
            read_joined(source, ranges)
        assert "cut.bin" in str(info.value)
    with pytest.raises(CorruptFileError, match="short read"):
        source.read_ranges([(0, 10), (12_000, 100)])


def test_a_big_local_read_goes_into_one_buffer_and_is_checked(tmp_path):
    """Reads of a MiB and more fill a numpy buffer (``os.pread`` would build a bytes object);
    their bytes are the file's, and a file cut short under them is a short read."""
    path = tmp_path / "big.bin"
    data = np.random.default_rng(3).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    source = LocalFileSource(path)
    (got,) = source.read_ranges([(12345, 2 << 20)])
    assert bytes(got) == data[12345 : 12345 + (2 << 20)]
    path.write_bytes(data[: 1 << 20])
    with pytest.raises(CorruptFileError, match="short read") as info:
        source.read_ranges([(12345, 2 << 20)])
    assert "big.bin" in str(info.value)


def test_put_if_absent(storage):
    storage.put_if_absent("v/1", b"first")
    with pytest.raises(FileExistsError):
        storage.put_if_absent("v/1", b"second")
    assert storage.read("v/1") == b"first"


def test_put_if_absent_has_exactly_one_winner(storage):
    winners = race_creates(storage, "race/key", 12)
    assert len(winners) == 1
    assert storage.read("race/key") == f"writer {winners[0]}".encode()


def test_list_and_delete(storage):
    assert storage.list_dir("nothing/here") == []
    assert storage.list_tree("nothing") == []
    for name in ("d/x", "d/y", "d/sub/z"):
        storage.write(name, name.encode())
    assert sorted(e.path for e in storage.list_dir("d")) == ["d/x", "d/y"]
    entries = {e.path: e for e in storage.list_tree("d")}
    assert sorted(entries) == ["d/sub/z", "d/x", "d/y"]
    assert entries["d/sub/z"].size == 7
    storage.delete("d/x")
    storage.delete("d/x")  # missing is fine
    assert sorted(e.path for e in storage.list_dir("d")) == ["d/y"]


def test_delete_many(storage):
    names = [f"m/{i}" for i in range(5)] + ["m/a[1]"]  # a name fsspec could read as a pattern
    for name in names:
        storage.write(name, b"x")
    storage.delete_many([*names[:3], "m/missing", names[-1]])  # missing is fine
    assert sorted(e.path for e in storage.list_dir("m")) == ["m/3", "m/4"]
    storage.delete_many([])


def test_streaming_writer_and_codec_source(storage):
    table = pa.table({"id": list(range(1000)), "s": [f"v{i}" for i in range(1000)]})
    with storage.open_writer("data/f.lance") as out, LanceFileWriter(out, table.schema) as w:
        w.write(table)
    reader = LanceFileReader(storage.source("data/f.lance"))
    assert reader.read_all().equals(table)
    assert reader.take([999, 0]).to_pydict() == {"id": [999, 0], "s": ["v999", "v0"]}


def test_remote_ranges_are_fetched_in_one_concurrent_call(storage, monkeypatch):
    """Merged ranges far apart reach an fsspec backend as one ``cat_ranges`` call (s3fs fetches its
    ranges concurrently), not one request after another."""
    if not hasattr(storage, "fs"):
        pytest.skip("local files are read with preadv")
    if getattr(storage, "_direct", None) is not None:
        pytest.skip("direct S3 reads send their own GETs (see test_s3_direct.py)")
    data = bytes(range(256)) * 4096  # 1 MiB: ranges 200 KiB apart are not merged
    storage.write("far.bin", data)
    calls = []
    original = storage.fs.cat_ranges

    def counting(paths, starts, ends, **kwargs):
        calls.append(len(paths))
        return original(paths, starts, ends, **kwargs)

    monkeypatch.setattr(storage.fs, "cat_ranges", counting)
    ranges = [(0, 100), (200_000, 50), (400_000, 7), (900_000, 1000)]
    got = storage.read_ranges("far.bin", ranges)
    assert [bytes(b) for b in got] == [data[o : o + n] for o, n in ranges]
    assert calls == [4]


def test_files_deleted_while_a_local_directory_is_listed_are_skipped(tmp_path, monkeypatch):
    """Cleanup lists directories that writers change meanwhile: a file that vanishes between the
    directory read and its stat is left out, not a FileNotFoundError."""
    import os

    storage = open_storage(str(tmp_path / "root"))
    for name in ("a.bin", "b.bin", "c.bin"):
        storage.write(f"d/{name}", b"x")

    class Vanishing:
        def __init__(self, entry):
            self.entry = entry
            self.name = entry.name

        def is_file(self):
            return self.entry.is_file()

        def is_dir(self):
            return self.entry.is_dir()

        def is_symlink(self):
            return self.entry.is_symlink()

        def stat(self):
            if self.name == "b.bin":
                os.unlink(self.entry.path)
            return self.entry.stat()

    real_scandir = os.scandir

    class Scan:
        def __init__(self, path):
            self.it = real_scandir(path)

        def __enter__(self):
            return (Vanishing(e) for e in self.it)

        def __exit__(self, *exc):
            self.it.close()

    monkeypatch.setattr(os, "scandir", Scan)
    assert sorted(e.name for e in storage.list_tree("d")) == ["a.bin", "c.bin"]
    storage.write("d/b.bin", b"x")
    assert sorted(e.name for e in storage.list_dir("d")) == ["a.bin", "c.bin"]


def test_local_tree_listing_walks_as_os_walk(tmp_path):
    """Nested directories are listed with their files' sizes; a link to a directory is not
    followed (as ``os.walk``), a link to a file is listed with the file's size."""
    import os

    storage = open_storage(str(tmp_path / "root"))
    storage.write("d/a.bin", b"xy")
    storage.write("d/sub/deeper/b.bin", b"xyz")
    storage.write("other/c.bin", b"c")
    os.symlink(tmp_path / "root" / "other", tmp_path / "root" / "d" / "linked_dir")
    os.symlink(tmp_path / "root" / "other" / "c.bin", tmp_path / "root" / "d" / "linked.bin")
    got = {e.path: e.size for e in storage.list_tree("d")}
    assert got == {"d/a.bin": 2, "d/sub/deeper/b.bin": 3, "d/linked.bin": 1}
    assert {e.path for e in storage.list_tree("")} == {*got, "other/c.bin"}


def test_local_tree_listing_never_drops_a_directorys_other_files(tmp_path):
    """An entry that cannot be stat'ed for another reason than being gone (a link loop) fails the
    listing, as it did under ``os.walk``: the directory's other files are never silently left out
    (a deep clone would miss them)."""
    import os

    storage = open_storage(str(tmp_path / "root"))
    for i in range(20):
        storage.write(f"d/f{i}.bin", b"x")
    os.symlink(tmp_path / "root" / "d" / "loop", tmp_path / "root" / "d" / "loop")
    with pytest.raises(OSError, match="loop"):
        storage.list_tree("d")
