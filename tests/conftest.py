from __future__ import annotations

import collections
import functools
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cloud_servers import az_uri, azure_options, azurite_endpoint, gcs_endpoint, gcs_options, gs_uri  # noqa: F401
from xdist_scopes import LongestFirst

S3_KEY = "testing"
S3_SECRET = "testing"
S3_BUCKET = "lance-table-tests"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under pytest-xdist (``pytest -n 2``, as CI runs the suite), tests go to the workers module by
    module, so that a module's fixtures (datasets pylance writes, servers) are made once, and all of
    ``tests/spark/`` goes to one worker, so that one JVM starts, not one per worker; the longest
    scopes go first. ``--dist`` other than ``load`` or ``loadscope`` keeps pytest-xdist's own
    scheduling."""
    if config.getoption("dist") not in ("load", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def __init__(self, config: pytest.Config, log: object) -> None:
            super().__init__(config, log)
            self.workqueue = LongestFirst()

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "tests/spark/" if module.startswith("tests/spark/") else module

    return ModuleScheduling(config, log)


def serialize_moto_object_writes() -> Callable[[], None]:
    """Make moto's conditional writes atomic, as they are on S3; return a function that undoes it.

    moto checks ``If-None-Match: *`` / ``If-Match`` in one step and stores the object in a later one,
    with no lock in between. Under its threaded server two racing conditional PUTs can therefore both
    pass the check and both get 200 (the later silently replaces the earlier), which S3 never allows.
    One lock held across every object PUT and POST (which includes completing a multipart upload)
    restores S3's guarantee that exactly one of several racing creates wins.
    """
    from moto.s3.responses import S3Response

    lock = threading.Lock()
    originals = {name: getattr(S3Response, name) for name in ("_key_response_put", "_key_response_post")}

    def locked(method: Callable[..., object]) -> Callable[..., object]:
        @functools.wraps(method)
        def wrapper(*args: object, **kwargs: object) -> object:
            with lock:
                return method(*args, **kwargs)

        return wrapper

    for name, method in originals.items():
        setattr(S3Response, name, locked(method))

    def undo() -> None:
        for name, method in originals.items():
            setattr(S3Response, name, method)

    return undo


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 server (moto's threaded server) on 127.0.0.1, for the whole session.

    Object writes are serialized (see :func:`serialize_moto_object_writes`) so that conditional
    PUTs are atomic, as the race tests require.
    """
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    undo = serialize_moto_object_writes()
    try:
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
    finally:
        undo()


@pytest.fixture
def slow_s3_manifest_stores(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> float:
    """The test S3 server waits before storing each object under ``_versions/``, after it has checked
    the PUT's preconditions: a wide, deterministic window for racing conditional creates. Returns the delay.
    """
    from moto.s3.models import S3Backend

    delay = 0.05
    original = S3Backend.put_object

    def slow_put_object(
        self: object, bucket_name: str, key_name: str, *args: object, **kwargs: object
    ) -> object:
        if "_versions/" in key_name:
            time.sleep(delay)
        return original(self, bucket_name, key_name, *args, **kwargs)

    monkeypatch.setattr(S3Backend, "put_object", slow_put_object)
    return delay


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


class S3Requests:
    """The requests the test S3 server received for one key prefix, by kind (``LIST`` for a listing,
    else the HTTP method), and the most that were in flight at once.

    How many requests overlap in time depends on scheduling, not only on the client: on a loaded
    machine requests sent at once may still reach the server one after another. A test that checks
    that requests are sent at once calls :meth:`hold_until` first: the server then holds every
    request until that many are in flight, so that a client that sends them at once reaches the
    count whatever the load, and one that waits for each answer before the next request never does
    (its requests are released after ``timeout``, and the count stays short of the target).
    """

    def __init__(self, prefix: str, delay: float) -> None:
        self.prefix = prefix
        self.delay = delay
        self.counts: collections.Counter[str] = collections.Counter()
        self.list_queries: list[str] = []  # the query string of each listing
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._hold_for = 0  # requests are held until this many are in flight (0: none are held)
        self._timeout = 0.0

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.list_queries.clear()
            self.most_in_flight = 0
            self._hold_for = 0

    def hold_until(self, count: int, timeout: float = 20.0) -> None:
        """Hold each request from now on until ``count`` are in flight at once, then hold none.

        If they are not within ``timeout`` seconds of a request's arrival, the held requests are
        answered and none is held afterwards (so a client that sends one request after another
        fails the test's count after one timeout, not after one a request).
        """
        with self._lock:
            self._hold_for = count
            self._timeout = timeout

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def record(self, environ: dict[str, object]) -> bool:
        path, query = str(environ.get("PATH_INFO", "")), str(environ.get("QUERY_STRING", ""))
        if self.prefix not in path and self.prefix not in query:
            return False
        parts = path.strip("/").split("/", 1)
        method = str(environ["REQUEST_METHOD"])
        kind = "LIST" if method == "GET" and (len(parts) < 2 or not parts[1]) else method
        with self._lock:
            self.counts[kind] += 1
            if kind == "LIST":
                self.list_queries.append(query)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            if self._hold_for:
                if self.in_flight >= self._hold_for:
                    self._hold_for = 0
                    self._arrived.notify_all()
                elif not self._arrived.wait_for(lambda: not self._hold_for, self._timeout):
                    self._hold_for = 0  # not reached: release the rest and hold no more
                    self._arrived.notify_all()
        return True

    def done(self) -> None:
        with self._lock:
            self.in_flight -= 1


@pytest.fixture
def s3_requests(s3_uri: str, monkeypatch: pytest.MonkeyPatch) -> S3Requests:
    """Counts the requests the test S3 server gets for ``s3_uri``'s prefix, each held for 5 ms
    (so that requests sent at once overlap in the server)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    recorder = S3Requests(s3_uri.rsplit("/", 1)[-1], 0.005)
    original = DomainDispatcherApplication.__call__

    def counted(self: object, environ: dict[str, object], start_response: object) -> object:
        if not recorder.record(environ):
            return original(self, environ, start_response)  # type: ignore[arg-type]
        try:
            time.sleep(recorder.delay)
            return original(self, environ, start_response)  # type: ignore[arg-type]
        finally:
            recorder.done()

    monkeypatch.setattr(DomainDispatcherApplication, "__call__", counted)
    return recorder
