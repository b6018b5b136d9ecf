"""Listings that see the store as it is, bounded open files, and readers whose files went away."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import DataFileNotFoundError
from lance_table.storage.remote import FsspecStorage


@pytest.mark.s3
@pytest.mark.interop
def test_s3_sees_deletion_files_written_after_its_cleanup_listed(s3_uri, s3_options):
    """Cleanup lists _deletions; another process (pylance) then deletes rows; we read its file."""
    lance = pytest.importorskip("lance")
    ds = lt.write_dataset(pa.table({"id": np.arange(100)}), s3_uri, storage_options=s3_options)
    ds.delete("id < 3")
    ds.cleanup_old_versions(older_than=dt.timedelta(0))
    other = lance.dataset(s3_uri, storage_options=s3_options)
    other.delete("id < 10")
    again = lt.dataset(s3_uri, storage_options=s3_options)
    assert again.count_rows() == 90
    assert again.to_table()["id"].to_pylist() == list(range(10, 100))


@pytest.mark.s3
def test_fsspec_storage_with_a_listing_cache_sees_new_files(s3_endpoint, s3_uri, s3_options):
    """Any fsspec backend that caches listings: a listing is never answered from an old one."""
    import s3fs

    key, secret = s3_options["aws_access_key_id"], s3_options["aws_secret_access_key"]
    fs = s3fs.S3FileSystem(  # a listing cache, as s3fs has by default
        key=key, secret=secret, client_kwargs={"endpoint_url": s3_endpoint}, skip_instance_cache=True
    )
    root = s3_uri.split("://", 1)[1]
    storage = FsspecStorage(fs, root, s3_uri)
    storage.write("_deletions/a.bin", b"a")
    assert [e.name for e in storage.list_dir("_deletions")] == ["a.bin"]
    assert [e.name for e in storage.list_tree("_deletions")] == ["a.bin"]
    writer = s3fs.S3FileSystem(
        key=key, secret=secret, client_kwargs={"endpoint_url": s3_endpoint}, skip_instance_cache=True
    )
    writer.pipe_file(f"{root}/_deletions/b.bin", b"bb")
    assert storage.size("_deletions/b.bin") == 2
    assert storage.read("_deletions/b.bin") == b"bb"
    assert sorted(e.name for e in storage.list_dir("_deletions")) == ["a.bin", "b.bin"]
    assert sorted(e.name for e in storage.list_tree("_deletions")) == ["a.bin", "b.bin"]


def test_scan_of_more_fragments_than_open_files_allowed(tmp_path):
    """1,200 fragments under a limit of 256 open files: scan, count, take and compaction work."""
    uri = tmp_path / "ds"
    lt.write_dataset(pa.table({"id": np.arange(1200), "x": np.arange(1200) * 0.5}), uri, max_rows_per_file=1)
    script = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        import lance_table as lt
        ds = lt.dataset({str(uri)!r})
        assert len(ds.get_fragments()) == 1200
        assert ds.to_table()["id"].to_pylist() == list(range(1200))
        assert ds.count_rows("x > 100") == 1200 - 201
        assert ds.take([1199, 0, 600])["id"].to_pylist() == [1199, 0, 600]
        assert ds.to_table()["id"].to_pylist() == list(range(1200))  # readers now cached
        ds.compact_files(target_rows_per_fragment=600)
        assert len(ds.get_fragments()) == 2 and ds.count_rows() == 1200
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"


def test_a_pinned_handle_whose_files_were_cleaned_up(tmp_path):
    """A handle read once (its readers are cached), then its version is cleaned up: typed error."""
    uri = tmp_path / "ds"
    old = lt.write_dataset(pa.table({"id": np.arange(10)}), uri)
    assert old.to_table().num_rows == 10
    lt.write_dataset(pa.table({"id": np.arange(5)}), uri, mode="overwrite")
    old.cleanup_old_versions(older_than=dt.timedelta(0))
    with pytest.raises(DataFileNotFoundError, match="cleaned up") as info:
        old.to_table()
    assert info.value.version == 1 and info.value.cleaned_up
    assert isinstance(info.value, FileNotFoundError)
