"""The recording proxy's lean client for a plain-HTTP upstream (agent/upstream.py): it reads
what httpx2's own transport reads, the same way, on connections it keeps between requests."""

from __future__ import annotations

import gzip
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx2
import pytest

from pytest_nodeval.agent.upstream import PlainUpstream


@dataclass
class RawServer:
    """Answers each request with the next scripted bytes; `close` after an answer ends its
    connection. Counts connections and keeps each request's head."""

    answers: list[tuple[bytes, bool]]
    sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    connections: int = 0
    closed: int = 0
    heads: list[bytes] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/messages"

    def serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                self._serve(conn)
            self.closed += 1

    def _serve(self, conn: socket.socket) -> None:
        with conn.makefile("rb") as reader:
            while self.answers:
                head = line = reader.readline()
                while line and not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    head += line
                if not line:
                    return  # the client closed the connection
                self.heads.append(head)
                length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                reader.read(int(length[1]) if length else 0)
                answer, close = self.answers.pop(0)
                conn.sendall(answer)
                if close:
                    return


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[RawServer]:
    raw = RawServer(list(request.param))
    thread = threading.Thread(target=raw.serve, daemon=True)
    thread.start()
    yield raw
    raw.sock.close()
    thread.join(5)


def _post(transport: httpx2.BaseTransport, url: str, body: bytes = b'{"a": 1}') -> httpx2.Response:
    request = httpx2.Request("POST", url, content=body)
    response = transport.handle_request(request)
    response.read()
    return response


OK_LENGTH = (
    b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{"a": 1}'
)
OK_CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    b"6\r\ndata: \r\n3;ext=1\r\n{}\n\r\n0\r\nx-trailer: 1\r\n\r\n"
)
GZIPPED = gzip.compress(b'{"zipped": true}')
OK_GZIP = (
    b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(GZIPPED)
    + GZIPPED
)
OK_TO_THE_END = (
    b"HTTP/1.0 200 OK\r\nretry-after: 3\r\nx-twice: 1\r\nx-twice: 2\r\n\r\nuntil the end"
)
CONTINUE_THEN_429 = (
    b"HTTP/1.1 100 Continue\r\n\r\n"
    b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 0\r\ncontent-length: 2\r\n\r\n{}"
)
FRAMINGS = [OK_LENGTH, OK_CHUNKED, OK_GZIP, OK_TO_THE_END, CONTINUE_THEN_429]


@pytest.mark.parametrize("server", [[(a, True)] * 2 for a in FRAMINGS], indirect=True)
def test_a_response_reads_as_httpx2s_own_transport_reads_it(server: RawServer) -> None:
    ours = _post(PlainUpstream(), server.url)
    theirs = _post(httpx2.HTTPTransport(), server.url)
    assert ours.status_code == theirs.status_code
    assert ours.headers.multi_items() == theirs.headers.multi_items()
    assert ours.content == theirs.content
    assert ours.extensions["http_version"] == theirs.extensions["http_version"]
    assert server.heads[0] == server.heads[1]  # and the request went out as httpx2 sends it


@pytest.mark.parametrize("server", [[(OK_LENGTH, False), (OK_CHUNKED, False)]], indirect=True)
def test_one_connection_carries_request_after_request(server: RawServer) -> None:
    upstream = PlainUpstream()
    assert _post(upstream, server.url).json() == {"a": 1}
    assert _post(upstream, server.url).text == "data: {}\n"
    assert server.connections == 1


@pytest.mark.parametrize("server", [[(OK_TO_THE_END, True), (OK_LENGTH, False)]], indirect=True)
def test_a_response_read_to_the_connections_end_is_the_connections_last(server: RawServer) -> None:
    upstream = PlainUpstream()
    assert _post(upstream, server.url).text == "until the end"
    assert _post(upstream, server.url).json() == {"a": 1}
    assert server.connections == 2


@pytest.mark.parametrize("server", [[(OK_LENGTH, True), (OK_LENGTH, True)]], indirect=True)
def test_a_connection_the_server_closed_while_idle_is_not_reused(server: RawServer) -> None:
    upstream = PlainUpstream()
    _post(upstream, server.url)
    while not server.closed:
        time.sleep(0.001)  # the server has answered: the moment it takes to close
    assert _post(upstream, server.url).json() == {"a": 1}
    assert server.connections == 2


@pytest.mark.parametrize(
    ("server", "error"),
    [
        ([(b"", True)], httpx2.RemoteProtocolError),  # closes without an answer
        (
            [(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort", True)],
            httpx2.RemoteProtocolError,
        ),
        ([(b"SMTP ready\r\n\r\n", True)], httpx2.RemoteProtocolError),
        (
            [(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0x5\r\n", True)],
            httpx2.RemoteProtocolError,
        ),
    ],
    indirect=["server"],
)
def test_an_answer_it_cannot_read_is_httpx2s_protocol_error(
    server: RawServer, error: type[Exception]
) -> None:
    with pytest.raises(error):
        _post(PlainUpstream(), server.url)


def test_nothing_listening_is_a_connect_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(httpx2.ConnectError):
        _post(PlainUpstream(), f"http://127.0.0.1:{port}/v1/messages")


def test_https_is_left_to_httpx2() -> None:
    with pytest.raises(httpx2.UnsupportedProtocol):
        _post(PlainUpstream(), "https://127.0.0.1:1/v1/messages")


SHORT = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"


@pytest.mark.parametrize("server", [[(SHORT, True)] * 2], indirect=True)
def test_a_body_cut_short_fails_in_httpx2s_words(server: RawServer) -> None:
    """What the journal's `llm.response` error says is what it said through httpx2."""
    errors = []
    for transport in (PlainUpstream(), httpx2.HTTPTransport()):
        with pytest.raises(httpx2.RemoteProtocolError) as caught:
            _post(transport, server.url)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
