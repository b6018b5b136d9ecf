"""The minimal GET client of direct S3 reads, one GET at a time and many from one thread
(``http_many``), against a small real HTTP server on a socket."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from lance_table.storage.http_get import HttpError, KeptConnections
from lance_table.storage.http_many import get_many

Reply = Callable[[bytes], tuple[bytes, bool]]  # request -> (answer bytes, close after it)


class Server:
    """Answers each request on a connection with ``reply``; counts connections accepted."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.requests: list[bytes] = []
        self.clients: list[KeptConnections] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    more = conn.recv(4096)
                    if not more:
                        return
                    data += more
                request, _, data = data.partition(b"\r\n\r\n")
                self.requests.append(request)
                answer, close = self.reply(request)
                conn.sendall(answer)
                if close:
                    return


@pytest.fixture
def serve() -> Iterator[Callable[[Reply], Server]]:
    servers: list[Server] = []

    def start(reply: Reply) -> Server:
        servers.append(Server(reply))
        return servers[-1]

    yield start
    for s in servers:
        for client in s.clients:
            client.close()
        s.sock.close()


def _client(server: Server) -> KeptConnections:
    client = KeptConnections("http", server.host, (2.0, 2.0), keep=4)
    server.clients.append(client)
    return client


def test_kept_connection_serves_many_gets(serve) -> None:  # type: ignore[no-untyped-def]
    body = bytes(range(256)) * 300  # larger than one recv
    server = serve(
        lambda req: (b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\n\r\n" % len(body) + body, False)
    )
    client = _client(server)
    for _ in range(3):
        answer = client.get("/b/k", {"host": server.host, "range": "bytes=0-9"})
        assert (answer.status, answer.data) == (206, body)
    assert server.connections == 1
    assert server.requests[0].split(b"\r\n") == [
        b"GET /b/k HTTP/1.1",
        b"host: " + server.host.encode(),
        b"range: bytes=0-9",
    ]


def test_bodies_framed_by_chunks_or_by_the_connection_end(serve) -> None:  # type: ignore[no-untyped-def]
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n"
    )
    server = serve(lambda req: (chunked, False))
    client = _client(server)
    assert [client.get("/", {}).data for _ in range(2)] == [b"abcde", b"abcde"]
    assert server.connections == 1
    server = serve(lambda req: (b"HTTP/1.0 200 OK\r\nX-A: 1\r\n\r\nall of it", True))
    client = _client(server)
    answer = client.get("/", {})
    assert (answer.data, answer.headers) == (b"all of it", {"x-a": "1"})
    assert client.get("/", {}).data == b"all of it"
    assert server.connections == 2  # the body ended with its connection: a new one for the next


def test_connection_close_and_a_stale_kept_connection(serve) -> None:  # type: ignore[no-untyped-def]
    n = iter(range(100))

    def reply(req: bytes) -> tuple[bytes, bool]:  # every other answer closes the connection
        i = next(n)
        close = i % 2 == 1
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n%s\r\n%d" % (
            b"Connection: close\r\n" if close else b"",
            i % 10,
        ), False

    server = serve(reply)
    client = _client(server)
    assert [client.get("/", {}).data for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    assert server.connections == 2
    # a server that drops the connection after each answer without saying so: the kept connection
    # is found closed at the next GET, which is sent again on a fresh one
    server = serve(lambda req: (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", True))
    client = _client(server)
    assert [client.get("/", {}).data for _ in range(3)] == [b"ok"] * 3
    assert server.connections == 3


def test_malformed_answers_are_http_errors(serve) -> None:  # type: ignore[no-untyped-def]
    for answer in (
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",  # closed within the headers
    ):
        server = serve(lambda req, answer=answer: (answer, True))
        with pytest.raises(HttpError):
            _client(server).get("/", {})
    with socket.socket() as closed:  # nothing listens: refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(HttpError):
        KeptConnections("http", f"127.0.0.1:{port}", (1.0, 1.0), keep=1).get("/", {})


def test_a_body_longer_than_the_range_asked_for_is_refused(serve) -> None:  # type: ignore[no-untyped-def]
    for answer in (
        b"HTTP/1.1 206 Partial\r\nContent-Length: 1000000000000\r\n\r\nabc",  # never allocated
        b"HTTP/1.1 206 Partial\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n0\r\n\r\n",
        b"HTTP/1.0 206 Partial\r\n\r\nabcdefgh",  # ended by the connection
        b"HTTP/1.1 206 Partial\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 100_000,  # no size line end
    ):
        server = serve(lambda req, answer=answer: (answer, True))
        with pytest.raises(HttpError):
            _client(server).get("/", {}, limit=4)
    server = serve(lambda req: (b"HTTP/1.1 206 Partial\r\nContent-Length: 4\r\n\r\nabcd", False))
    assert _client(server).get("/", {}, limit=4).data == b"abcd"


def test_an_error_answer_longer_than_the_range_is_read(serve) -> None:  # type: ignore[no-untyped-def]
    # S3's NoSuchKey document (some 300 bytes) answers a GET of a few bytes of a deleted file:
    # it is the answer, so the missing file is named at once, after one GET
    from lance_table.storage.s3_direct import DirectS3

    error = b"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>" + b" " * 250
    answer = b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(error), error)
    server = serve(lambda req: (answer, False))
    got = _client(server).get("/", {}, limit=16)
    assert (got.status, got.data) == (404, error)
    assert len(server.requests) == 1
    direct = DirectS3("http", server.host, "us-east-1", False, None, timeouts=(2.0, 2.0))
    with pytest.raises(FileNotFoundError):
        direct.get("bucket", "data/gone.lance", 0, 16, "s3://bucket/data/gone.lance")
    assert len(server.requests) == 2 and direct.usable
    # a success answer is still held to the range asked for
    server = serve(lambda req: (b"HTTP/1.1 206 Partial\r\nContent-Length: 300\r\n\r\n" + b"x" * 300, False))
    with pytest.raises(HttpError):
        _client(server).get("/", {}, limit=16)


BLOB = np.random.default_rng(5).integers(0, 256, 600_000, dtype=np.uint8).tobytes()


def _ranges_of_blob(req: bytes) -> tuple[bytes, bool]:
    """A 206 of the range a request asks for, of :data:`BLOB`."""
    lo, hi = (int(v) for v in re.search(rb"range: bytes=(\d+)-(\d+)", req).groups())  # type: ignore[union-attr]
    body = BLOB[lo : hi + 1]
    return b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\n\r\n" % len(body) + body, False


def _gets(server: Server, ranges: list[tuple[int, int]]) -> list[tuple[str, dict[str, str], int]]:
    return [("/b/k", {"host": server.host, "range": f"bytes={o}-{o + n - 1}"}, n) for o, n in ranges]


def test_random_range_sets_come_back_exactly_with_a_bounded_window(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(_ranges_of_blob)
    client = _client(server)
    rng = np.random.default_rng(11)
    asked = 0
    for window in (1, 3, 32):
        for _ in range(3):
            count = int(rng.integers(1, 12))
            lengths = rng.choice([1, 7, 4096, 70_000, 300_000], count)
            ranges = [(int(rng.integers(0, len(BLOB) - n + 1)), int(n)) for n in lengths]
            answers = get_many(client, _gets(server, ranges), window)
            assert [bytes(a.body) for a in answers] == [BLOB[o : o + n] for o, n in ranges]
            assert {a.status for a in answers} == {206}
            asked += count
        if window < 32:  # never more connections than the window: each is reused for the next GET
            assert server.connections <= window
    assert len(server.requests) == asked  # one GET per range


def test_other_framings_closes_and_stale_connections(serve) -> None:  # type: ignore[no-untyped-def]
    n = iter(range(1000))

    def reply(req: bytes) -> tuple[bytes, bool]:
        i = next(n) % 4
        if i == 0:
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", False
        if i == 1:
            return b"HTTP/1.1 206 Partial\r\nContent-Length: 3\r\nConnection: close\r\n\r\ndef", True
        if i == 2:  # the server drops the kept connection after answering, without saying so
            return b"HTTP/1.1 206 Partial\r\nContent-Length: 3\r\n\r\nghi", True
        return b"HTTP/1.0 200 OK\r\n\r\njkl", True  # ended by the connection

    server = serve(reply)
    client = _client(server)
    for window in (1, 2):
        answers = get_many(client, [("/", {}, 3)] * 8, window)
        bodies = sorted(bytes(a.body) for a in answers)
        assert bodies == sorted([b"abc", b"def", b"ghi", b"jkl"] * 2)
    # a stale kept connection (its server closed it after the last answer) is replaced
    server = serve(lambda req: (b"HTTP/1.1 206 Partial\r\nContent-Length: 2\r\n\r\nok", True))
    client = _client(server)
    for _ in range(3):
        assert [bytes(a.body) for a in get_many(client, [("/", {}, 2)] * 3, 2)] == [b"ok"] * 3


def test_failures_are_http_errors_and_leave_no_connection_in_flight(serve) -> None:  # type: ignore[no-untyped-def]
    for bad in (
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 206 Partial\r\nContent-Length: 10\r\n\r\nshort",  # closed within the body
        b"HTTP/1.1 206 Partial\r\nContent-Length: 99\r\n\r\n",  # longer than the range asked for
    ):
        server = serve(lambda req, bad=bad: (bad, True))
        client = _client(server)
        with pytest.raises(HttpError):
            get_many(client, [("/", {}, 10)] * 4, 2)
        assert len(client._idle) <= 2
    server = serve(_ranges_of_blob)  # the client still works afterwards
    client = _client(server)
    assert bytes(get_many(client, _gets(server, [(5, 5)]), 4)[0].body) == BLOB[5:10]
    with pytest.raises(HttpError):  # nothing listens
        get_many(KeptConnections("http", "127.0.0.1:1", (1.0, 1.0), keep=1), [("/", {}, 1)], 2)


def test_bodies_are_received_into_the_buffers_given(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(_ranges_of_blob)
    client = _client(server)
    whole = memoryview(bytearray(300_000))
    into = [whole[:100_000], whole[100_000:], memoryview(bytearray(5))]  # the last: not its size
    ranges = [(1000, 100_000), (101_000, 200_000), (7, 3)]
    answers = get_many(client, _gets(server, ranges), 2, into=into)
    assert answers[0].body is into[0] and answers[1].body is into[1]
    assert bytes(whole) == BLOB[1000:301_000]
    assert bytes(answers[2].body) == BLOB[7:10] and bytes(into[2]) == bytes(5)
