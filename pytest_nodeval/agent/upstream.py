"""The recording proxy's HTTP client for a plain-HTTP upstream: the local fake, a model server.

What httpx2's `HTTPTransport` does for the proxy (agent/proxy.py) on `http://`, for a fraction
of its cost per request: httpcore's pool, h11's state machine and the stream wrappers around
them were half of what the proxy added to a model call (benchmarks/proxy_overhead.py). Each
request goes out in one write on a connection kept open between requests (TCP_NODELAY), and
its response is read whole: the status line, the headers, the body by its length, in chunks,
or to the connection's end. The rest stays as it was: the response is an `httpx2.Response`
whose `read()` decodes a content-encoding, under the retries and limits of agent/retries.py and
the journal's recording transport, and a failure raises httpx2's exception for it.

Not for `https://`: a provider's call takes hundreds of milliseconds, and httpx2 knows TLS.
"""

from __future__ import annotations

import re
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

import httpx2

_KEEP_IDLE_S = 5.0  # httpx2's own keep-alive expiry; a server may close an idle one after that
_MAX_LINE = 65536
_MAX_HEADERS = 100
_NO_BODY = frozenset({204, 304})
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")  # not int()'s "-1", "0x10" or "1_0"


class PlainUpstream(httpx2.BaseTransport):
    """HTTP/1.1 over plain TCP, each connection kept for the next request once its response
    is read (one at a time per connection: concurrent requests open more)."""

    def __init__(self) -> None:
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.scheme != "http":
            raise httpx2.UnsupportedProtocol(f"not a plain HTTP URL: {request.url}")
        address = (request.url.host, request.url.port or 80)
        conn = self._checkout(address) or _Connection.open(address, request)
        try:
            response, reusable = conn.exchange(request)
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if reusable and not self._closed:  # one in use as the proxy stopped is not kept
                self._idle.append(conn)
                return response
        conn.close()
        return response

    def _checkout(self, address: tuple[str, int]) -> _Connection | None:
        """An idle connection to `address` that the server has not closed, or None."""
        with self._lock:
            for index in range(len(self._idle) - 1, -1, -1):
                if self._idle[index].address == address:
                    conn = self._idle.pop(index)
                    break
            else:
                return None
        if conn.usable():
            return conn
        conn.close()
        return None

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for conn in idle:
            conn.close()


def _timeouts(request: httpx2.Request) -> dict[str, float | None]:
    timeouts: dict[str, float | None] = request.extensions.get("timeout") or {}
    return timeouts


class _Connection:
    """One TCP connection to the upstream and its buffered reader."""

    def __init__(self, sock: socket.socket, address: tuple[str, int]) -> None:
        self.sock, self.address = sock, address
        self.reader: BinaryIO = sock.makefile("rb")
        self.idle_since = time.monotonic()

    @classmethod
    def open(cls, address: tuple[str, int], request: httpx2.Request) -> _Connection:
        try:
            sock = socket.create_connection(address, _timeouts(request).get("connect"))
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(str(exc) or "timed out", request=request) from exc
        except OSError as exc:
            raise httpx2.ConnectError(str(exc), request=request) from exc
        # A request's one write leaves at once, and a response needs no delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock, address)

    def usable(self) -> bool:
        """Not idle for too long, and not readable: an idle connection with something to read
        has been closed by the server (or sent what no request asked for)."""
        if time.monotonic() - self.idle_since > _KEEP_IDLE_S:
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def exchange(self, request: httpx2.Request) -> tuple[httpx2.Response, bool]:
        """Send one request and read its response whole; whether the connection can carry
        another."""
        timeouts = _timeouts(request)
        body = request.read()
        self.sock.settimeout(timeouts.get("write"))
        try:
            self.sock.sendall(_request_head(request, body) + body)
        except TimeoutError as exc:
            raise httpx2.WriteTimeout(str(exc) or "timed out", request=request) from exc
        except OSError as exc:
            raise httpx2.WriteError(str(exc), request=request) from exc
        self.sock.settimeout(timeouts.get("read"))
        try:
            return self._read_response(request)
        except TimeoutError as exc:
            raise httpx2.ReadTimeout(str(exc) or "timed out", request=request) from exc
        except OSError as exc:
            raise httpx2.ReadError(str(exc), request=request) from exc
        except _Malformed as exc:
            raise httpx2.RemoteProtocolError(str(exc), request=request) from exc

    def _read_response(self, request: httpx2.Request) -> tuple[httpx2.Response, bool]:
        first = True
        while True:
            status, version, reason = _read_status(self.reader, first=first)
            headers = _read_headers(self.reader)
            first = False
            if status >= 200 or status == 101:
                break  # an interim response (100 Continue) is followed by the real one
        fields = _fields(headers)
        connection = fields.get(b"connection", b"").lower()
        keep = b"close" not in connection if version == b"HTTP/1.1" else b"keep-alive" in connection
        if request.method == "HEAD" or status in _NO_BODY or status < 200:
            content = b""
        elif (
            fields.get(b"transfer-encoding", b"").lower().rsplit(b",", 1)[-1].strip() == b"chunked"
        ):
            content = read_chunked(self.reader, _read_exactly, _Malformed)
        elif b"content-length" in fields:
            content = _read_exactly(self.reader, _length(fields[b"content-length"]))
        else:  # delimited by the connection's end
            content, keep = self.reader.read(), False
        self.idle_since = time.monotonic()
        response = httpx2.Response(
            status,
            headers=headers,
            stream=httpx2.ByteStream(content),
            request=request,
            extensions={"http_version": version, "reason_phrase": reason},
        )
        return response, keep

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()


class _Malformed(Exception):
    """A response this client cannot read (httpx2.RemoteProtocolError to the caller)."""


def _request_head(request: httpx2.Request, body: bytes) -> bytes:
    """The request line and headers, as httpcore writes them (the headers as given); a body
    without a stated length gets one, so it needs no chunked framing."""
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    framed = False
    for name, value in request.headers.raw:
        lines.append(name + b": " + value)
        framed = framed or name.lower() in (b"content-length", b"transfer-encoding")
    if body and not framed:
        lines.append(b"Content-Length: %d" % len(body))
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


def _read_status(reader: BinaryIO, *, first: bool) -> tuple[int, bytes, bytes]:
    line = reader.readline(_MAX_LINE + 1)
    if not line:
        raise _Malformed(
            "Server disconnected without sending a response."
            if first
            else "the server closed the connection after an interim response"
        )
    version, _, rest = line.rstrip(b"\r\n").partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or not (len(code) == 3 and code.isdigit()):
        raise _Malformed(f"cannot read the status line {line[:200]!r}")
    return int(code), version, reason


def _read_headers(reader: BinaryIO) -> list[tuple[bytes, bytes]]:
    headers: list[tuple[bytes, bytes]] = []
    while (line := reader.readline(_MAX_LINE + 1)) not in (b"\r\n", b"\n"):
        if not line.endswith(b"\n"):
            raise _Malformed("the response's headers end early or run too long")
        if len(headers) == _MAX_HEADERS:
            raise _Malformed(f"more than {_MAX_HEADERS} response headers")
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise _Malformed(f"cannot read the header line {line[:200]!r}")
        headers.append((name, value.strip()))
    return headers


def _fields(headers: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """The framing headers by their lower-case names (a repeated one's values joined)."""
    fields: dict[bytes, bytes] = {}
    for name, value in headers:
        key = name.lower()
        if key in (b"connection", b"transfer-encoding", b"content-length"):
            fields[key] = fields[key] + b"," + value if key in fields else value
    return fields


def _length(value: bytes) -> int:
    # Repeated, a length must be the same each time (RFC 9110); anything else is not a length.
    lengths = {part.strip() for part in value.split(b",")}
    if len(lengths) != 1 or not (length := lengths.pop()).isdigit():
        raise _Malformed(f"content-length {value[:200]!r} is not a length")
    return int(length)


def read_chunked(
    reader: BinaryIO,
    read_exactly: Callable[[BinaryIO, int], bytes],
    malformed: Callable[[str], Exception],
) -> bytes:
    """A chunked body, whole: a response's here, a program's request in agent/proxy.py, each
    with its own reader of a known length and its own error for bytes that are no chunk."""
    chunks = []
    while True:
        size_line = reader.readline(_MAX_LINE + 1)
        size_text = size_line.split(b";", 1)[0].strip()
        if not _CHUNK_SIZE.fullmatch(size_text):
            raise malformed(f"cannot read the chunk size {size_line[:200]!r}")
        size = int(size_text, 16)
        if size == 0:
            break
        chunks.append(read_exactly(reader, size))
        if reader.readline(_MAX_LINE + 1) not in (b"\r\n", b"\n"):
            raise malformed("a chunk does not end where its size says")
    while reader.readline(_MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
        pass  # trailer fields: nothing the proxy forwards
    return b"".join(chunks)


def _read_exactly(reader: BinaryIO, size: int) -> bytes:
    data = reader.read(size) if size else b""
    if len(data) < size:  # httpcore's words, so a journaled error reads as before
        raise _Malformed(
            "peer closed connection without sending complete message body "
            f"(received {len(data)} bytes, expected {size})"
        )
    return data
