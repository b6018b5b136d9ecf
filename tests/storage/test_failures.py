"""An unreachable endpoint and missing credentials are typed errors, raised within the timeout."""

from __future__ import annotations

import socket
import time

import pytest

import lance_table
from lance_table.errors import StorageCredentialsError, StorageUnreachableError

pytest.importorskip("s3fs")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def no_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def test_unreachable_endpoint_is_a_typed_error_within_the_timeout(no_aws_environment: None) -> None:
    options = {
        "aws_endpoint": f"http://127.0.0.1:{_closed_port()}",
        "aws_access_key_id": "a",
        "aws_secret_access_key": "b",
        "aws_region": "us-east-1",
        "connect_timeout": "1s",
        "client_max_retries": "0",
    }
    started = time.monotonic()
    with pytest.raises(StorageUnreachableError, match="cannot reach the storage of s3://bucket/ds") as info:
        lance_table.dataset("s3://bucket/ds", storage_options=options)
    assert time.monotonic() - started < 10
    assert isinstance(info.value, ConnectionError)
    with pytest.raises(StorageUnreachableError):
        lance_table.write_dataset(_table(), "s3://bucket/ds", storage_options=options)


def test_missing_credentials_are_named(no_aws_environment: None) -> None:
    options = {"aws_endpoint": f"http://127.0.0.1:{_closed_port()}", "aws_region": "us-east-1"}
    with pytest.raises(StorageCredentialsError, match="NoCredentialsError") as info:
        lance_table.dataset("s3://bucket/ds", storage_options=options)
    assert isinstance(info.value, PermissionError)


def _table():
    import pyarrow as pa

    return pa.table({"a": [1, 2]})


@pytest.mark.s3
def test_missing_credentials_against_the_s3_server(s3_endpoint: str, no_aws_environment: None) -> None:
    """No credentials anywhere: botocore's NoCredentialsError before any request, a typed error."""
    options = {"aws_endpoint": s3_endpoint, "aws_region": "us-east-1", "allow_http": "true"}
    started = time.monotonic()
    with pytest.raises(StorageCredentialsError, match="NoCredentialsError"):
        lance_table.write_dataset(_table(), "s3://lance-table-tests/no-credentials", storage_options=options)
    assert time.monotonic() - started < 10
