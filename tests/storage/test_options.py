"""Storage options: pylance's S3 names work, unknown or unsafe ones are typed errors, and handles
opened with other options never share another handle's cached readers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import DataFileNotFoundError, LanceTableError, StorageOptionsError
from lance_table.storage import open_storage
from lance_table.storage.options import KNOWN_S3_OPTIONS, s3fs_arguments

BUCKET = "some-bucket"

# -- names and values, without a server ---------------------------------------------------------


@pytest.mark.parametrize(
    "name, value",
    [
        ("bogus", "1"),
        ("aws_no_such_option", "x"),
        ("AioSession", "x"),
    ],
)
def test_unknown_option_is_a_typed_error_listing_the_known_ones(name: str, value: str) -> None:
    with pytest.raises(StorageOptionsError) as info:
        open_storage(f"s3://{BUCKET}/x", {"aws_region": "us-east-1", name: value})
    err = info.value
    assert isinstance(err, LanceTableError) and isinstance(err, ValueError)
    assert err.option == name and repr(name) in str(err)
    assert "aws_access_key_id" in str(err) and "timeout" in str(err) and "client_max_retries" in str(err)
    assert err.known == KNOWN_S3_OPTIONS


@pytest.mark.parametrize(
    "options, what",
    [
        ({"asynchronous": True}, "event loop"),
        ({"loop": object()}, "event loop"),
        ({"session": object()}, "event loop"),
        ({"use_listings_cache": True}, "listing cache"),
        ({"listings_expiry_time": 10}, "listing cache"),
        ({"aws_metadata_endpoint": "http://169.254.169.254"}, "environment"),
    ],
)
def test_unsafe_options_are_refused_with_the_reason(options: dict[str, object], what: str) -> None:
    with pytest.raises(StorageOptionsError, match=what) as info:
        open_storage(f"s3://{BUCKET}/x", options)
    assert info.value.option == next(iter(options))


@pytest.mark.parametrize(
    "options, problem",
    [
        ({"allow_http": "perhaps"}, "true or false"),
        ({"timeout": "soon"}, "duration"),
        ({"connect_timeout": "5 fortnights"}, "duration"),
        ({"client_max_retries": "-1"}, "whole number"),
        ({"aws_server_side_encryption": "rot13"}, "AES256"),
        ({"aws_bucket": "another-bucket"}, "URI's bucket"),
        ({"conditional_put": "dynamo:table"}, "etag"),
        ({"aws_region": "us-east-1", "region": "eu-west-1"}, "given twice"),
        ({"client_kwargs": "endpoint"}, "dict"),
    ],
)
def test_bad_values_name_the_option(options: dict[str, object], problem: str) -> None:
    with pytest.raises(StorageOptionsError, match=problem) as info:
        s3fs_arguments(options, BUCKET)
    assert info.value.option in options


def test_a_bad_secret_is_never_shown() -> None:
    with pytest.raises(StorageOptionsError) as info:
        s3fs_arguments({"aws_sse_customer_key_base64": "not base64 but secret!"}, BUCKET)
    assert "secret!" not in str(info.value)


def test_pylance_names_and_aliases_map_to_s3fs() -> None:
    got = s3fs_arguments(
        {
            "Access_Key_Id": "k",
            "secret_access_key": "s",
            "aws_token": "t",
            "endpoint": "http://127.0.0.1:9",
            "region": "eu-west-1",
            "aws_virtual_hosted_style_request": "true",
            "skip_signature": "false",
            "timeout": "1m 30s",
            "aws_connect_timeout": "500ms",
            "client_max_retries": "2",
            "allow_invalid_certificates": "true",
            "aws_server_side_encryption": "aws:kms",
            "aws_sse_kms_key_id": "kms-key",
            "request_payer": "true",
            "http2_only": "true",  # pylance's HTTP client tuning: accepted, nothing to do for s3fs
            "client_retry_timeout": "180",
        },
        BUCKET,
    )
    assert got == {
        "key": "k",
        "secret": "s",
        "token": "t",
        "endpoint_url": "http://127.0.0.1:9",
        "anon": False,
        "requester_pays": True,
        "client_kwargs": {"region_name": "eu-west-1", "verify": False},
        "config_kwargs": {
            "read_timeout": 90.0,
            "connect_timeout": 0.5,
            "retries": {"total_max_attempts": 3, "mode": "standard"},
            "s3": {"addressing_style": "virtual"},
        },
        "s3_additional_kwargs": {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "kms-key"},
        "use_listings_cache": False,
    }


def test_s3fs_own_names_still_work() -> None:
    got = s3fs_arguments(
        {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://h"}, "use_listings_cache": 0},
        BUCKET,
    )
    assert got == {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": "http://h"},
        "use_listings_cache": False,
    }
    assert s3fs_arguments({"aws_default_region": "us-west-2"}, BUCKET)["client_kwargs"] == {
        "region_name": "us-west-2"
    }


def test_cache_keys_follow_the_options_and_hide_secrets() -> None:
    uri = f"s3://{BUCKET}/same"
    one = open_storage(uri, {"aws_access_key_id": "k", "aws_secret_access_key": "secret-one"})
    alias = open_storage(uri, {"access_key_id": "k", "secret_access_key": "secret-one"})
    other = open_storage(uri, {"aws_access_key_id": "k", "aws_secret_access_key": "secret-two"})
    assert one.cache_key == alias.cache_key != other.cache_key
    assert one.cache_key.startswith(uri)
    assert "secret" not in one.cache_key and "secret" not in repr(one)


# -- against the S3 server ----------------------------------------------------------------------


@pytest.mark.s3
def test_pylance_timeouts_and_aliases_reach_botocore(s3_uri: str, s3_options: dict[str, str]) -> None:
    import lance

    options = {
        "access_key_id": s3_options["aws_access_key_id"],
        "secret_access_key": s3_options["aws_secret_access_key"],
        "endpoint": s3_options["aws_endpoint"],
        "region": "us-east-1",
        "allow_http": "true",
        "timeout": "60s",
        "connect_timeout": "5s",
        "client_max_retries": "4",
    }
    table = pa.table({"id": pa.array(range(100), pa.int64())})
    ds = lt.write_dataset(table, s3_uri, storage_options=options)
    assert ds.to_table().equals(table)
    assert lance.dataset(s3_uri, storage_options=options).to_table().equals(table)  # pylance's names
    storage = open_storage(s3_uri, options)
    storage.list_dir("_versions")
    config = storage.fs.s3.meta.config  # type: ignore[attr-defined]
    assert (config.read_timeout, config.connect_timeout) == (60.0, 5.0)
    assert config.retries["total_max_attempts"] == 5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def other_s3_endpoint(s3_endpoint: str) -> Iterator[str]:
    """A second S3 server in its own process (moto's store is per process), with the test bucket."""
    import s3fs

    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]  # set by s3_endpoint
    bucket = s3fs.S3FileSystem(key=key, secret=secret, endpoint_url=s3_endpoint).ls("")[0]

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "AWS_DEFAULT_REGION": "us-east-1"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("the second moto server did not start")
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        s3fs.S3FileSystem(key=key, secret=secret, endpoint_url=endpoint).mkdir(bucket)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.s3
def test_same_uri_on_two_endpoints_reads_each_own_store(
    s3_uri: str, s3_options: dict[str, str], other_s3_endpoint: str
) -> None:
    """A dataset copied to a second server, where one data file is missing: a handle on the second
    server must fail on its own store, not read the first server's file through a cached reader."""
    uri = s3_uri
    table = pa.table({"id": pa.array(range(1000), pa.int64())})
    first = lt.write_dataset(table, uri, storage_options=s3_options)
    assert first.to_table().equals(table)  # its readers are now cached

    other_options = {**s3_options, "aws_endpoint": other_s3_endpoint}
    src, dst = open_storage(uri, s3_options), open_storage(uri, other_options)
    for entry in src.list_tree(""):
        dst.write(entry.path, src.read(entry.path))
    data_file = first.get_fragments()[0].metadata.files[0].path
    dst.delete(f"data/{data_file}")

    second = lt.dataset(uri, storage_options=other_options)
    with pytest.raises(DataFileNotFoundError) as info:
        second.to_table()
    assert data_file in str(info.value)
    assert lt.dataset(uri, storage_options=s3_options).to_table().equals(table)


def test_s3_clients_get_a_connection_pool_for_concurrent_reads() -> None:
    from lance_table.storage.options import S3_POOL_CONNECTIONS, with_connection_pool

    got = with_connection_pool({"key": "k"})
    assert got["config_kwargs"] == {"max_pool_connections": S3_POOL_CONNECTIONS}
    mine = with_connection_pool({"config_kwargs": {"max_pool_connections": 3, "retries": {}}})
    assert mine["config_kwargs"] == {"max_pool_connections": 3, "retries": {}}
