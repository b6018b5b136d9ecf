"""A moto S3 server that delays every request by a fixed latency and counts requests by kind.

Run as a script it serves on 127.0.0.1 (a free port, printed as ``PORT <n>`` on stdout) until its
stdin closes; :class:`SlowS3` starts it in a subprocess so that the server's Python never competes
with the client's for a GIL. ``GET /_requests`` answers the counts as JSON (not delayed, not
counted), ``GET /_bytes`` the bytes of the answers' bodies by kind; ``GET /_requests?reset`` also
zeroes both, ``GET /_requests?latency=0.05`` sets the latency.

    python benchmarks/slow_s3.py --latency 0.02
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

COUNTS_PATH = "/_requests"
BYTES_PATH = "/_bytes"


def request_kind(method: str, path: str, query: str) -> str:
    """``LIST`` for a bucket listing, else the HTTP method (``GET`` of a key, ``HEAD``, ``PUT``...)."""
    parts = path.strip("/").split("/", 1)
    if method == "GET" and (len(parts) < 2 or not parts[1]):
        return "LIST"
    return method


class Slowed:
    """WSGI middleware: sleep ``latency`` seconds before each request, count requests by kind."""

    def __init__(self, app: Callable[..., Iterable[bytes]], latency: float) -> None:
        self.app = app
        self.latency = latency
        self.counts: Counter[str] = Counter()
        #: bytes of the answers' bodies by kind of request (their Content-Length)
        self.bytes: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        query = environ.get("QUERY_STRING", "")
        if path in (COUNTS_PATH, BYTES_PATH):
            with self._lock:
                body = json.dumps(dict(self.counts if path == COUNTS_PATH else self.bytes)).encode()
                if "reset" in query:
                    self.counts.clear()
                    self.bytes.clear()
                if query.startswith("latency="):
                    self.latency = float(query.split("=", 1)[1])
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        kind = request_kind(environ["REQUEST_METHOD"], path, query)
        with self._lock:
            self.counts[kind] += 1
        if self.latency:
            time.sleep(self.latency)
        ranged = _ranged_get(environ, path, query) if kind == "GET" else None
        if ranged is not None:
            status, headers, body = ranged
            with self._lock:
                self.bytes[kind] += len(body)
            start_response(status, headers)
            return [body]

        def counted(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            for name, value in headers:
                if name.lower() == "content-length" and kind != "HEAD":
                    with self._lock:
                        self.bytes[kind] += int(value)
            return start_response(status, headers, exc_info)

        return self.app(environ, counted)


_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def _ranged_get(
    environ: dict[str, Any], path: str, query: str
) -> tuple[str, list[tuple[str, str]], bytes] | None:
    """The answer to a GET of a byte range of an object (path-style), read from moto's store
    without moto's request handling, or None (moto answers). moto reads the whole object for every
    GET (``FakeKey.value`` copies it under the key's lock), so each range request of a 38 MB file
    would cost the server a 38 MB copy, one request at a time: the wall time of a take of 30 ranges
    was the server's, not the clients'. Here a range costs the server its own bytes."""
    match = _RANGE.fullmatch(environ.get("HTTP_RANGE", "").strip())
    bucket, _, key = path.lstrip("/").partition("/")
    if match is None or query or not key:
        return None
    try:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        obj = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(bucket, unquote(key))
    except Exception:
        return None
    if obj is None:
        return None
    start, end = int(match.group(1)), int(match.group(2))
    size = obj.size
    if start >= size or end < start:
        return None  # (moto answers 416)
    end = min(end, size - 1)
    with obj.lock:
        obj._value_buffer.seek(start)
        body = obj._value_buffer.read(end - start + 1)
    headers = [
        ("Content-Type", "binary/octet-stream"),
        ("Content-Range", f"bytes {start}-{end}/{size}"),
        ("Content-Length", str(len(body))),
        ("Accept-Ranges", "bytes"),
        ("ETag", obj.etag),
        ("Last-Modified", obj.last_modified_RFC1123),
    ]
    return "206 Partial Content", headers, body


def serve(latency: float, keep_alive: bool = True) -> None:
    """Serve until stdin closes; ``keep_alive``: connections stay open between requests, as S3
    keeps them (werkzeug's server closes each after one response, so that every request of a
    client would also pay for a new connection)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = Slowed(DomainDispatcherApplication(create_backend_app), latency)
    if keep_alive:
        server: Any = _keep_alive_server(app)
    else:
        server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    sys.stdin.read()
    server.shutdown()


def _keep_alive_server(app: Callable[..., Iterable[bytes]]) -> Any:
    """A threaded HTTP/1.1 server of ``app`` whose connections stay open: each request's body is
    read whole before the application runs, and each response is sent with its length."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    class Handler(WSGIRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def handle(self) -> None:
            self.close_connection = False
            while not self.close_connection:
                self._one()

        def _one(self) -> None:
            self.raw_requestline = self.rfile.readline(65537)
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():  # answers "100 Continue" to an Expect header
                return
            length = int(self.headers.get("Content-Length") or 0)
            environ = self.get_environ()
            body = self.rfile.read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            environ.update(
                {
                    "wsgi.version": (1, 0),
                    "wsgi.url_scheme": "http",
                    "wsgi.errors": sys.stderr,
                    "wsgi.multithread": True,
                    "wsgi.multiprocess": False,
                    "wsgi.run_once": False,
                }
            )
            answer: list[Any] = []

            def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
                answer[:] = [status, headers]
                return lambda data: None

            chunks = app(environ, start_response)
            try:
                data = b"".join(chunks)
            finally:
                if hasattr(chunks, "close"):
                    chunks.close()
            status, headers = answer
            self.send_response_only(int(status.split()[0]), status.split(" ", 1)[1])
            drop = {"content-length", "connection", "transfer-encoding"}
            declared = None
            for name, value in headers:
                if name.lower() == "content-length":
                    declared = value
                if name.lower() not in drop:
                    self.send_header(name, value)
            head = self.command == "HEAD"
            self.send_header("Content-Length", declared if head and declared else str(len(data)))
            self._headers_buffer.append(b"\r\n")
            # the head and the body in one write, as a real server sends them: two small writes
            # would hold the body back until the client acknowledges the head (Nagle's algorithm
            # against a delayed ACK: 40 ms for clients that do not acknowledge at once)
            self.wfile.write(b"".join(self._headers_buffer) + (b"" if head else data))
            self._headers_buffer = []
            self.wfile.flush()

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    server.set_app(app)
    return server


class SlowS3:
    """The slowed server in a subprocess; a context manager. ``endpoint`` is its URL."""

    def __init__(self, latency: float, keep_alive: bool = True) -> None:
        env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
        flags = [] if keep_alive else ["--close"]
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--latency", str(latency), *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"the S3 server did not start: {line!r}")
        self.endpoint = f"http://127.0.0.1:{int(line.split()[1])}"

    @property
    def storage_options(self) -> dict[str, str]:
        """The storage options both libraries open the server's buckets with."""
        return {
            "aws_access_key_id": "bench",
            "aws_secret_access_key": "bench",
            "aws_endpoint": self.endpoint,
            "aws_region": "us-east-1",
            "allow_http": "true",
        }

    def counts(self, reset: bool = False) -> Counter[str]:
        """Requests by kind since the last reset."""
        url = f"{self.endpoint}{COUNTS_PATH}{'?reset' if reset else ''}"
        with urllib.request.urlopen(url) as answer:
            return Counter(json.loads(answer.read()))

    def bytes_sent(self) -> Counter[str]:
        """Bytes of the answers' bodies by kind of request since the last reset of the counts."""
        with urllib.request.urlopen(f"{self.endpoint}{BYTES_PATH}") as answer:
            return Counter(json.loads(answer.read()))

    def set_latency(self, latency: float) -> None:
        """Change the delay of every request from now on (e.g. none while building datasets)."""
        with urllib.request.urlopen(f"{self.endpoint}{COUNTS_PATH}?latency={latency}"):
            pass

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> SlowS3:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--close", action="store_true", help="close each connection after a response")
    args = parser.parse_args()
    serve(args.latency, keep_alive=not args.close)
