"""The opt-in pyarrow client for data-file range reads on S3 (``lance_table_s3_reader="pyarrow"``):
same results as s3fs, the first read of a file by s3fs, then one HEAD per file and none after,
s3fs wherever an option has no pyarrow equivalent, typed errors naming the file, a clean exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import lance
import numpy as np
import pyarrow as pa
import pytest
import s3fs

import lance_table as lt
from lance_table.errors import CorruptFileError, DataFileNotFoundError, StorageOptionsError
from lance_table.storage import open_storage, remote_sources
from lance_table.storage.arrow_s3 import arrow_arguments
from lance_table.table.readers import READERS

pytestmark = pytest.mark.s3

ARROW = {"lance_table_s3_reader": "pyarrow"}
FRAGMENTS = 6


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table({"id": np.arange(rows), "x": rng.random(rows), "s": [f"v{i % 13}" for i in range(rows)]})


@pytest.fixture
def written(s3_uri, s3_options) -> pa.Table:  # type: ignore[no-untyped-def]
    data = _table(FRAGMENTS * 100)
    lance.write_dataset(data, s3_uri, storage_options=s3_options, max_rows_per_file=100)
    READERS.clear()
    return data


def _fs(s3_options: dict[str, str]) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(
        key=s3_options["aws_access_key_id"],
        secret=s3_options["aws_secret_access_key"],
        client_kwargs={"endpoint_url": s3_options["aws_endpoint"]},
    )


def test_reads_match_and_each_file_is_opened_with_one_head(written, s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    ds = lt.dataset(s3_uri, storage_options={**s3_options, **ARROW})
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    s3_requests.reset()
    assert ds.to_table().equals(written)
    first = dict(s3_requests.counts)  # small files: read whole on open, by s3fs
    s3_requests.reset()
    assert ds.to_table().equals(written)
    second = dict(s3_requests.counts)  # read again: by pyarrow, which opens each with a HEAD
    s3_requests.reset()
    assert ds.to_table().equals(written)
    again = dict(s3_requests.counts)
    idx = [0, 150, 599]
    assert ds.take(idx).equals(theirs.take(idx))
    assert ds.to_table(filter="id >= 250 AND id < 260").equals(
        theirs.to_table(filter="id >= 250 AND id < 260")
    )
    assert first == {"GET": FRAGMENTS}
    assert second == {"GET": FRAGMENTS, "HEAD": FRAGMENTS}
    assert again == {"GET": FRAGMENTS}  # an opened file sends no HEAD again


@pytest.mark.parametrize("reader", ["s3fs", "pyarrow"])
def test_a_long_range_is_read_in_parts_at_once(reader, s3_uri, s3_options, s3_requests, monkeypatch):  # type: ignore[no-untyped-def]
    data = _table(60_000)
    lance.write_dataset(data, s3_uri, storage_options=s3_options, data_storage_version="2.2")
    READERS.clear()
    ds = lt.dataset(s3_uri, storage_options={**s3_options, "lance_table_s3_reader": reader})
    assert ds.to_table(columns=["id"]).num_rows == data.num_rows  # pyarrow opens the file here
    monkeypatch.setattr(remote_sources, "SPLIT_READ_BYTES", 64 * 1024)  # the file's data: about 1 MiB
    s3_requests.reset()
    s3_requests.hold_until(2)  # reached only if two requests are sent at once
    assert ds.to_table().equals(data)
    assert "HEAD" not in s3_requests.counts
    assert s3_requests.counts["GET"] >= 8 and s3_requests.most_in_flight >= 2
    assert ds.take([5, 59_999]).equals(data.take([5, 59_999]))


def test_options_without_a_pyarrow_equivalent_stay_on_s3fs(written, s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    options = {**s3_options, **ARROW, "aws_request_payer": "true"}
    ds = lt.dataset(s3_uri, storage_options=options)
    s3_requests.reset()
    assert ds.to_table().equals(written)
    assert "HEAD" not in s3_requests.counts


def test_the_option_is_checked():  # type: ignore[no-untyped-def]
    with pytest.raises(StorageOptionsError, match="lance_table_s3_reader"):
        lt.dataset("s3://bucket/ds", storage_options={"lance_table_s3_reader": "curl"})


def test_storage_options_map_onto_pyarrow():  # type: ignore[no-untyped-def]
    kwargs = {
        "key": "k",
        "secret": "s",
        "token": "t",
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"region_name": "eu-west-1"},
        "config_kwargs": {
            "max_pool_connections": 64,
            "connect_timeout": 3.0,
            "s3": {"addressing_style": "path"},
        },
        "use_listings_cache": False,
    }
    got = arrow_arguments(kwargs, {})
    assert got is not None
    assert (got["access_key"], got["secret_key"], got["session_token"]) == ("k", "s", "t")
    assert (got["endpoint_override"], got["scheme"], got["region"]) == ("127.0.0.1:9000", "http", "eu-west-1")
    assert got["connect_timeout"] == 3.0
    assert arrow_arguments({"anon": True}, {"AWS_REGION": "us-west-2"}) == {
        "check_directory_existence_before_creation": False,
        "anonymous": True,
        "region": "us-west-2",
    }
    assert arrow_arguments({"key": "k", "secret": "s"}, {}) is None  # region unknown: s3fs follows redirects
    assert arrow_arguments({**kwargs, "client_kwargs": {"verify": False}}, {}) is None
    assert arrow_arguments({**kwargs, "s3_additional_kwargs": {"SSECustomerKey": b"k"}}, {}) is None
    assert arrow_arguments({**kwargs, "profile": "dev"}, {}) is None


def test_a_missing_data_file_is_named(written, s3_uri, s3_options):  # type: ignore[no-untyped-def]
    ds = lt.dataset(s3_uri, storage_options={**s3_options, **ARROW})
    assert ds.to_table().equals(written)  # the readers are open: the next reads go through pyarrow
    path = ds.get_fragments()[2].data_files()[0].path
    _fs(s3_options).rm_file(f"{s3_uri}/data/{path}")
    with pytest.raises(DataFileNotFoundError, match=path) as raised:
        ds.to_table()
    assert isinstance(raised.value, FileNotFoundError)


def test_a_file_of_another_size_than_the_manifest_says_is_named(s3_uri, s3_options):  # type: ignore[no-untyped-def]
    fs = _fs(s3_options)
    fs.pipe_file(f"{s3_uri}/data/f.lance", bytes(range(256)) * 40)
    storage = open_storage(s3_uri, {**s3_options, **ARROW})
    source = storage.source("data/f.lance", 256 * 40)
    assert bytes(source.read_ranges([(0, 4)])[0]) == bytes(range(4))  # by s3fs
    fs.pipe_file(f"{s3_uri}/data/f.lance", bytes(range(256)) * 30)
    with pytest.raises(CorruptFileError, match="disagree about its size") as raised:
        source.read_ranges([(8, 4)])  # by pyarrow: its HEAD finds the size changed
    assert raised.value.path.endswith("data/f.lance")
    missing = storage.source("data/gone.lance", 100)
    with pytest.raises(FileNotFoundError):
        missing.read_ranges([(0, 4)])  # by s3fs (a dataset's reader names the file, see readers.py)
    with pytest.raises(FileNotFoundError, match=r"gone\.lance"):
        missing.read_ranges([(0, 4)])  # by pyarrow


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_reads_and_both_exit_cleanly(written, s3_uri, s3_options):  # type: ignore[no-untyped-def]
    # one interpreter of its own (pyarrow's S3 client is finalized at its exit): it reads through
    # pyarrow, forks a child that reads through s3fs (pyarrow's client is not used after a fork)
    script = textwrap.dedent(
        f"""
        import os
        import lance_table as lt
        ds = lt.dataset({s3_uri!r}, storage_options={{**{s3_options!r}, **{ARROW!r}}})
        assert ds.to_table().num_rows == {written.num_rows}
        pid = os.fork()
        if pid == 0:
            ok = ds.to_table().num_rows == {written.num_rows} and ds.take([0, 599]).num_rows == 2
            os._exit(0 if ok else 3)
        assert os.waitpid(pid, 0)[1] == 0
        assert ds.to_table().num_rows == {written.num_rows}
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
