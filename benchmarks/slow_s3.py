"""A moto S3 server that delays every request by a fixed latency and counts requests by kind.

Run as a script it serves on 127.0.0.1 (a free port, printed as ``PORT <n>`` on stdout) until its
stdin closes; :class:`SlowS3` starts it in a subprocess so that the server's Python never competes
with the client's for a GIL. ``GET /_requests`` answers the counts as JSON (not delayed, not
counted); ``GET /_requests?reset`` also zeroes them, ``GET /_requests?latency=0.05`` sets the latency.

    python benchmarks/slow_s3.py --latency 0.02
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

COUNTS_PATH = "/_requests"


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
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        query = environ.get("QUERY_STRING", "")
        if path == COUNTS_PATH:
            with self._lock:
                body = json.dumps(dict(self.counts)).encode()
                if "reset" in query:
                    self.counts.clear()
                if query.startswith("latency="):
                    self.latency = float(query.split("=", 1)[1])
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        with self._lock:
            self.counts[request_kind(environ["REQUEST_METHOD"], path, query)] += 1
        if self.latency:
            time.sleep(self.latency)
        return self.app(environ, start_response)


def serve(latency: float) -> None:
    """Serve until stdin closes."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = Slowed(DomainDispatcherApplication(create_backend_app), latency)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    sys.stdin.read()
    server.shutdown()


class SlowS3:
    """The slowed server in a subprocess; a context manager. ``endpoint`` is its URL."""

    def __init__(self, latency: float) -> None:
        env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--latency", str(latency)],
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

    def counts(self, reset: bool = False) -> Counter[str]:
        """Requests by kind since the last reset."""
        url = f"{self.endpoint}{COUNTS_PATH}{'?reset' if reset else ''}"
        with urllib.request.urlopen(url) as answer:
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
    serve(parser.parse_args().latency)
