"""Many GETs in flight at once from one thread, on kept-alive connections.

The byte ranges of one read of a remote file (the pages of a take, the parts of a large page)
used to be one GET per thread of a pool: each thread sent its request, waited, then received its
body while the others did the same, and every receive of every thread took the GIL back from
the decoding threads. On a take of 33 ranges that was some 1,800 futex calls (GIL and pool
hand-offs) where pylance makes a tenth. Here the thread that wants the ranges sends every
request (at most ``window`` in flight, the next one on the connection of the one that finished)
and receives each answer as its bytes arrive, with one ``select`` for them all: no pool, no
hand-off, one thread receiving.

An answer framed otherwise than by ``Content-Length`` (chunks, the end of the connection) is read
to its end on its own; a kept connection the server had closed is replaced by a fresh one; any
other failure raises :class:`~lance_table.storage.http_get.HttpError` (the caller then reads
through its full client).
"""

from __future__ import annotations

import selectors
import socket
import ssl
from collections import deque
from collections.abc import Mapping, Sequence

from lance_table.storage.http_get import (
    MAX_HEAD,
    Answer,
    Connection,
    HttpError,
    KeptConnections,
    body_buffer,
    body_length,
    parse_head,
    read_body,
    request_head,
)

#: what one receive of an answer's status line and headers asks for: S3's are under 1 KiB, and
#: the body's bytes after them are received straight into its buffer (a large ``recv`` would
#: allocate, and fault in, a fresh block for each answer only to copy most of it out again)
_HEAD_RECV = 4096
# what a non-blocking receive raises when nothing is there yet (TLS: no whole record yet)
_WAIT = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class _Get:
    """One request in flight: what came of its answer so far."""

    __slots__ = ("answer", "conn", "fresh", "got", "head", "index", "into", "keep", "size", "view")

    def __init__(self, index: int, conn: Connection, fresh: bool, into: memoryview | None) -> None:
        self.index = index
        self.conn = conn
        self.fresh = fresh
        self.into = into
        self.head = b""  # the bytes received before the body's buffer exists
        self.answer: Answer | None = None
        self.view: memoryview | None = None
        self.size = 0
        self.got = 0
        self.keep = False


class _Stale(Exception):
    """A kept connection the server had closed before the answer began."""


def get_many(
    http: KeptConnections,
    requests: Sequence[tuple[str, Mapping[str, str], int]],
    window: int,
    pooled: bool = True,
    into: Sequence[memoryview | None] | None = None,
) -> list[Answer]:
    """The answers to GETs of ``(target, headers, limit)`` (as :meth:`KeptConnections.request`
    takes them), in order, with at most ``window`` in flight, all sent and received by this
    thread. ``pooled``: successful bodies are received into kept buffers (see
    :func:`~lance_table.storage.http_get.body_buffer`); ``into``: for each request, a buffer
    that a successful body of exactly its size is received into instead (the answer's ``view``
    is then that buffer), or None.

    Raises:
        HttpError: an answer did not come or was malformed (no request is then in flight).
        ssl.SSLError, socket.gaierror: see :meth:`KeptConnections.get`.
    """
    heads = [request_head("GET", target, headers) for target, headers, _ in requests]
    limits = [limit for _, _, limit in requests]
    answers: list[Answer | None] = [None] * len(requests)
    waiting = deque(range(len(requests)))
    timeout = http.timeouts[1]
    sel = selectors.DefaultSelector()
    flying: dict[int, _Get] = {}

    def send(index: int, conn: Connection | None = None, fresh: bool = False) -> None:
        # (no call of itself: a function that refers to itself is a reference cycle, which
        # would hold ``into``, the buffers received into, until the garbage collector ran)
        if conn is None:
            conn, fresh = http.take()
        while True:
            sock = conn.sock
            try:
                sock.settimeout(timeout)
                sock.sendall(heads[index])
                break
            except (ConnectionError, ssl.SSLEOFError):
                conn.close()
                if fresh:
                    raise HttpError("the server closed a fresh connection") from None
                conn, fresh = http.connect(), True
        sock.setblocking(False)
        get = flying[index] = _Get(index, conn, fresh, into[index] if into is not None else None)
        sel.register(sock, selectors.EVENT_READ, get)

    try:
        while waiting and len(flying) < window:
            send(waiting.popleft())
        while flying:
            events = sel.select(timeout)
            if not events:
                raise HttpError(f"no answer within {timeout} s")
            for key, _ in events:
                get: _Get = key.data
                try:
                    done = _advance(get, limits[get.index], pooled, timeout)
                except _Stale:
                    sel.unregister(get.conn.sock)
                    del flying[get.index]
                    get.conn.close()
                    if get.fresh:
                        raise HttpError("the server closed the connection without answering") from None
                    send(get.index, http.connect(), True)
                    continue
                if not done:
                    continue
                sel.unregister(get.conn.sock)
                del flying[get.index]
                answers[get.index] = get.answer
                conn = get.conn
                if not get.keep:
                    conn.close()
                    if waiting:
                        send(waiting.popleft())
                    continue
                conn.sock.settimeout(timeout)
                if waiting:
                    send(waiting.popleft(), conn)
                else:
                    http.give_back(conn)
    except (OSError, ValueError) as exc:
        if isinstance(exc, (ssl.SSLCertVerificationError, socket.gaierror)):
            raise
        raise HttpError(repr(exc)) from None
    finally:
        for get in flying.values():  # mid-answer: of no use to another request
            get.conn.close()
        sel.close()
    return answers  # type: ignore[return-value]


def _advance(get: _Get, limit: int, pooled: bool, timeout: float) -> bool:
    """Receive what has arrived of ``get``'s answer; whether it is complete (``get.answer``).

    Raises:
        _Stale: a kept connection was closed before any of the answer came.
        ValueError, OSError: the answer is malformed, or the connection failed.
    """
    sock = get.conn.sock
    if get.view is None:
        try:
            while True:
                more = sock.recv(_HEAD_RECV)
                if not more:
                    if not get.head:
                        raise _Stale()
                    raise ValueError("connection closed within the answer's headers")
                get.head += more
                end = get.head.find(b"\r\n\r\n")
                if end >= 0:
                    break
                if len(get.head) > MAX_HEAD:
                    raise ValueError("answer headers too large")
        except _WAIT:
            return False
        except (ConnectionError, ssl.SSLEOFError):
            if get.head:
                raise
            raise _Stale() from None
        data = get.head
        status, headers, keep = parse_head(data, end)
        body = data[end + 4 :]
        size = body_length(status, headers, limit)
        if size is None:  # framed otherwise: read to its end on its own
            sock.settimeout(timeout)
            get.answer, get.keep = read_body(sock, status, headers, body, keep, limit, pooled)
            return True
        target = get.into
        into = target is not None and len(target) == size and 200 <= status < 300
        if len(body) >= size:
            get.keep = keep and len(body) == size
            if into:  # (a small body: in its place all the same)
                assert target is not None
                target[:] = body[:size]
                get.answer = Answer(status, headers, b"", target)
            else:
                get.answer = Answer(status, headers, body[:size])
            return True
        if into:
            assert target is not None
            target[: len(body)] = body
            get.answer, get.view = Answer(status, headers, b"", target), target
        else:
            get.answer, get.view = body_buffer(status, headers, body, size, pooled)
        get.size, get.got, get.keep = size, len(body), keep
    view, size, got = get.view, get.size, get.got
    try:
        while got < size:
            n = sock.recv_into(view[got:], size - got)
            if not n:
                raise ValueError("connection closed within the answer's body")
            got += n
    except _WAIT:
        get.got = got
        return False
    answer = get.answer
    assert answer is not None
    if answer.view is None:  # not pooled: the bytes of the buffer
        get.answer = Answer(answer.status, answer.headers, bytes(view))
    return True
