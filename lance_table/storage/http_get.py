"""GETs over kept-alive HTTP/1.1 connections, with as little Python per request as possible.

A scan of hundreds of small remote files sends hundreds of GETs, each for a few kilobytes, from
threads that then decode what they got while holding the GIL. urllib3 and ``http.client`` spend
about 0.3 ms of CPU on each (connection pool bookkeeping, header objects, an e-mail parser for
the answer's headers); this client writes the request in one ``sendall`` and reads the answer
with a few ``recv_into`` calls: about 0.08 ms.

It knows only what a GET of an object store needs: a status line, headers, and a body framed by
``Content-Length``, by chunks, or by the end of the connection. Anything else (an answer that is
not HTTP/1.x, headers larger than :data:`MAX_HEAD`) raises :class:`HttpError`, as does a
connection that fails again on a fresh connection; the caller then reads through its full client.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
from collections.abc import Mapping

from lance_table._buffers import reusable

#: the most bytes the status line and headers of an answer may take
MAX_HEAD = 64 * 1024
#: the most bytes the body of an answer that is not a success may take, whatever range was
#: asked for (an object store's error document: S3's NoSuchKey is some 300 bytes)
MAX_ERROR_BODY = 64 * 1024
_RECV = 64 * 1024


class HttpError(Exception):
    """A GET that brought no well-formed answer (the connection failed, or the answer is not
    HTTP/1.x as this client reads it)."""


class Answer:
    """A status, the headers (lowercase names) and the whole body of one answer: ``data``, or
    ``view`` where a request asked for a pooled body (see :meth:`KeptConnections.request`)."""

    __slots__ = ("data", "headers", "status", "view")

    def __init__(
        self, status: int, headers: dict[str, str], data: bytes, view: memoryview | None = None
    ) -> None:
        self.status = status
        self.headers = headers
        self.data = data
        self.view = view

    @property
    def body(self) -> bytes | memoryview:
        """The body, wherever it was received."""
        return self.data if self.view is None else self.view


class _Stale(Exception):
    """A kept-alive connection the server had closed before the answer began."""


class Connection:
    """An open connection (its socket)."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class KeptConnections:
    """GETs to one ``scheme://host[:port]`` from any thread, on at most ``keep`` idle connections
    kept between requests (more may be open while more threads ask at once).

    Args:
        scheme: ``http`` or ``https``.
        host: the host name, with ``:port`` where not the scheme's default.
        timeouts: connect and read timeouts in seconds.
        ca_bundle: certificates to verify the server's with (else the system's).
    """

    def __init__(
        self, scheme: str, host: str, timeouts: tuple[float, float], keep: int, ca_bundle: str | None = None
    ) -> None:
        name, _, port = host.rpartition(":") if host.rsplit(":", 1)[-1].isdigit() else (host, "", "")
        if name.startswith("[") and name.endswith("]"):
            name = name[1:-1]  # an IPv6 address
        self.address = (name, int(port) if port else (443 if scheme == "https" else 80))
        self.host = host
        self.timeouts = timeouts
        self.keep = keep
        self._tls: ssl.SSLContext | None = None
        if scheme == "https":
            self._tls = ssl.create_default_context(cafile=ca_bundle)
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def get(self, target: str, headers: Mapping[str, str], limit: int | None = None) -> Answer:
        """The answer to ``GET target`` (a path and query) with ``headers`` (``host`` among them);
        a successful answer's body longer than ``limit`` bytes (the size of the range asked for)
        is refused before it is read (another answer's, longer than :data:`MAX_ERROR_BODY`).

        Raises:
            HttpError: no well-formed answer came, on a kept connection nor on a fresh one.
            ssl.SSLError: the TLS handshake failed (e.g. the server's certificate was refused).
            socket.gaierror: the host name has no address.
        """
        return self.request("GET", target, headers, b"", limit)

    def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes,
        limit: int | None = None,
        pooled: bool = False,
    ) -> Answer:
        """The answer to ``method target`` with ``headers`` (its ``content-length`` among them
        where there is a body) and ``body``, as :meth:`get`. A request is sent again on a fresh
        connection when a kept one failed: an object store answers a PUT sent twice as it
        answers it once (a conditional one may then find the object there: its caller compares
        the bytes), and a GET reads the same bytes.

        ``pooled``: a successful answer's body longer than one receive goes to the answer's
        ``view``, received straight into a buffer of the C heap (see :func:`body_buffer`)
        (a fresh ``bytes`` of megabytes is mapped and faulted in page by page, then copied).

        Raises:
            HttpError, ssl.SSLError, socket.gaierror: see :meth:`get`.
        """
        head = request_head(method, target, headers)
        request = head + body if body else head
        for _ in range(3):  # a kept connection may have been closed by the server meanwhile
            try:
                conn, fresh = self.take()
            except OSError as exc:
                if isinstance(exc, (ssl.SSLError, socket.gaierror)):
                    raise
                raise HttpError(repr(exc)) from None
            try:
                answer, keep = self._exchange(conn, request, limit, pooled)
            except _Stale:
                conn.close()
                if fresh:
                    raise HttpError("the server closed the connection without answering") from None
                continue
            except (OSError, ValueError) as exc:
                conn.close()
                if isinstance(exc, (ssl.SSLCertVerificationError, socket.gaierror)):
                    raise
                if fresh:
                    raise HttpError(repr(exc)) from None
                continue
            if keep:
                self.give_back(conn)
            else:
                conn.close()
            return answer
        raise HttpError("kept connections kept failing")

    def close(self) -> None:
        """Close the idle connections (those in use close when their GET is done with them)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __del__(self) -> None:
        for conn in getattr(self, "_idle", ()):
            conn.close()

    def take(self) -> tuple[Connection, bool]:
        """A kept connection, else a fresh one; whether it is fresh.

        Raises:
            OSError: see :meth:`connect`.
        """
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's connections are not its own
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop(), False
        return self.connect(), True

    def connect(self) -> Connection:
        """A fresh connection (blocking, with the read timeout).

        Raises:
            OSError: it could not be made (ssl.SSLError, socket.gaierror among them).
        """
        sock = socket.create_connection(self.address, timeout=self.timeouts[0])
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self.address[0])
            sock.settimeout(self.timeouts[1])
        except BaseException:
            sock.close()
            raise
        return Connection(sock)

    def give_back(self, conn: Connection) -> None:
        """Keep ``conn`` (blocking, with the read timeout) for another request, or close it."""
        with self._lock:
            if len(self._idle) < self.keep and self._pid == os.getpid():
                self._idle.append(conn)
                return
        conn.close()

    def _exchange(
        self, conn: Connection, request: bytes, limit: int | None, pooled: bool = False
    ) -> tuple[Answer, bool]:
        """Send ``request`` and read the answer (a body of at most ``limit`` bytes); whether the
        connection can serve another."""
        sock = conn.sock
        try:
            sock.sendall(request)
            data = sock.recv(_RECV)
        except (ConnectionError, ssl.SSLEOFError):
            raise _Stale() from None
        if not data:
            raise _Stale()
        end = data.find(b"\r\n\r\n")
        while end < 0:
            if len(data) > MAX_HEAD:
                raise ValueError("answer headers too large")
            more = sock.recv(_RECV)
            if not more:
                raise ValueError("connection closed within the answer's headers")
            data += more
            end = data.find(b"\r\n\r\n")
        status, headers, keep = parse_head(data, end)
        return read_body(sock, status, headers, data[end + 4 :], keep, limit, pooled)


def request_head(method: str, target: str, headers: Mapping[str, str]) -> bytes:
    """The request line and headers of a request, as sent."""
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return f"{method} {target} HTTP/1.1\r\n{lines}\r\n".encode("latin-1")


def parse_head(data: bytes, end: int) -> tuple[int, dict[str, str], bool]:
    """The status, the headers (lowercase names) and whether the connection stays open, of an
    answer whose status line and headers are ``data[:end]``.

    Raises:
        ValueError: the answer is not HTTP/1.x, or a header line is malformed.
    """
    lines = data[:end].decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x answer: {lines[0][:40]!r}")
    status = int(rest[:3])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line[:40]!r}")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    tokens = headers.get("connection", "").lower()
    keep = "close" not in tokens and (version != "HTTP/1.0" or "keep-alive" in tokens)
    return status, headers, keep


def body_length(status: int, headers: Mapping[str, str], limit: int | None) -> int | None:
    """The length of an answer's body framed by ``Content-Length`` (0 for an answer without a
    body), or None for other framings (chunks, the end of the connection).

    Raises:
        ValueError: the answer is interim, or its body is longer than ``limit`` bytes (an error
            document's: :data:`MAX_ERROR_BODY`).
    """
    if status < 200:
        raise ValueError(f"interim answer {status}")  # no Expect is sent: none should come
    if status in (204, 304):
        return 0
    if status >= 300:  # an error document: as long as the store makes it, not the range
        limit = MAX_ERROR_BODY
    encoding = headers.get("transfer-encoding", "").lower()
    length = headers.get("content-length")
    if (encoding and encoding != "identity") or length is None:
        return None
    size = int(length)
    if size < 0 or size > _bound(limit):
        raise ValueError(f"an answer's body of {size} bytes, where {limit} were asked for")
    return size


def read_body(
    sock: socket.socket,
    status: int,
    headers: dict[str, str],
    body: bytes,
    keep: bool,
    limit: int | None,
    pooled: bool,
) -> tuple[Answer, bool]:
    """The answer whose body begins with ``body`` (the bytes received after its headers), read
    to its end from ``sock`` (a blocking socket); whether the connection can serve another.

    Raises:
        ValueError: the answer is malformed or longer than ``limit`` (see :func:`body_length`).
        OSError: the connection failed.
    """
    size = body_length(status, headers, limit)
    if status >= 300:
        limit = MAX_ERROR_BODY
    if size is None:
        encoding = headers.get("transfer-encoding", "").lower()
        if encoding and encoding != "identity":
            if encoding != "chunked":
                raise ValueError(f"transfer encoding {encoding!r}")
            payload, extra = _read_chunked(sock, body, _bound(limit))
            return Answer(status, headers, payload), keep and not extra
        parts, got = [body], len(body)  # the body ends with the connection
        while got <= _bound(limit) and (more := sock.recv(_RECV)):
            parts.append(more)
            got += len(more)
        if got > _bound(limit):
            raise ValueError(f"an answer's body is longer than the {limit} bytes asked for")
        return Answer(status, headers, b"".join(parts)), False
    if len(body) >= size:
        return Answer(status, headers, body[:size]), keep and len(body) == size
    answer, view = body_buffer(status, headers, body, size, pooled)
    got = len(body)
    while got < size:
        n = sock.recv_into(view[got:], min(size - got, 1 << 20))
        if not n:
            raise ValueError("connection closed within the answer's body")
        got += n
    return answer if answer.view is not None else Answer(status, headers, bytes(view)), keep


def body_buffer(
    status: int, headers: dict[str, str], body: bytes, size: int, pooled: bool
) -> tuple[Answer, memoryview]:
    """A buffer for a body of ``size`` bytes that begins with ``body``, and the answer that will
    hold it (its ``view`` where the body is received into a kept buffer: ``pooled`` and a
    success; else the caller makes the answer's bytes from the buffer once it is full).

    A kept buffer is an uninitialized array from :func:`~lance_table._buffers.reusable`, which
    hands out again the large buffers of earlier reads that nothing refers to any more (fresh
    memory, whether from the C heap or Arrow's pool, has its pages cleared by the kernel as they
    are first written: a 2.0 take of 1000 rows receiving 36 MB paid some 2,000 page faults a
    take; a 2.2 scan of a 19 MB page of vectors two thirds of its CPU time)."""
    pooled = pooled and 200 <= status < 300
    out = reusable(size) if pooled else bytearray(size)
    view = memoryview(out)  # type: ignore[arg-type]
    view[: len(body)] = body
    return Answer(status, headers, b"", view if pooled else None), view


def _bound(limit: int | None) -> float:
    return float("inf") if limit is None else limit


def _read_chunked(sock: socket.socket, data: bytes, limit: float) -> tuple[bytes, bytes]:
    """A chunked body (``data``: its bytes received so far) of at most ``limit`` bytes, and any
    bytes received beyond it."""
    parts: list[bytes] = []
    got = 0
    while True:
        while (eol := data.find(b"\r\n")) < 0:
            if len(data) > MAX_HEAD:
                raise ValueError("a chunk's size line is too long")
            data += _more(sock)
        size = int(data[:eol].split(b";", 1)[0], 16)
        got += size
        if size < 0 or got > limit:
            raise ValueError(f"an answer's body is longer than the {limit} bytes asked for")
        data = data[eol + 2 :]
        if size == 0:  # trailers, then an empty line
            while (end := data.find(b"\r\n")) != 0:
                if end < 0:
                    if len(data) > MAX_HEAD:
                        raise ValueError("an answer's trailers are too long")
                    data += _more(sock)
                else:
                    data = data[end + 2 :]
            return b"".join(parts), data[2:]
        while len(data) < size + 2:
            data += _more(sock)
        parts.append(data[:size])
        data = data[size + 2 :]


def _more(sock: socket.socket) -> bytes:
    more = sock.recv(_RECV)
    if not more:
        raise ValueError("connection closed within a chunked body")
    return more
