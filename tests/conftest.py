from __future__ import annotations

import logging
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

S3_KEY = "testing"
S3_SECRET = "testing"
S3_BUCKET = "lance-table-tests"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 server (moto's threaded server) on 127.0.0.1, for the whole session."""
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", S3_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", S3_SECRET)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    import s3fs

    fs = s3fs.S3FileSystem(key=S3_KEY, secret=S3_SECRET, client_kwargs={"endpoint_url": endpoint})
    fs.mkdir(S3_BUCKET)
    yield endpoint
    server.stop()


@pytest.fixture
def s3_options(s3_endpoint: str) -> dict[str, str]:
    """storage_options for lance_table (and pylance) to reach the test S3 server."""
    return {
        "aws_access_key_id": S3_KEY,
        "aws_secret_access_key": S3_SECRET,
        "aws_endpoint": s3_endpoint,
        "aws_region": "us-east-1",
        "allow_http": "true",
    }


@pytest.fixture
def s3_uri(s3_endpoint: str) -> str:
    """A fresh, empty prefix in the test bucket."""
    return f"s3://{S3_BUCKET}/{uuid.uuid4().hex}"
