"""The recording proxy: the providers' HTTP APIs on loopback, every exchange through a journal.

A program in any language reaches its model through this proxy instead of the provider
(`program_env` gives it the base URLs its SDKs read). Each provider has a path prefix of its
own (`/anthropic`, `/openai`, `/gemini`), so a request names its API without guessing; the
prefix is dropped before the request is journaled, so a program's journal reads like a Python
agent's. Live and record forward each request through the journal's recording transport (to
the configured upstream: the provider, or the fake LLM), with nodeval's retries and the run's
limits below the journal; replay answers from the journal, and a request that differs from the
recording gets a 500 naming the divergence (`stopped` keeps it, for the session to report).

The program's tools run inside it: the proxy derives them from the traffic, each tool call a
response asks for and each result the next request carries (journal/derived.py), journaled as
`tool.call` / `tool.result` between the model calls.

Streams are answered whole: the recording transport reads a response to its end before it
journals it, so a streaming call gets the provider's event stream at once, as replay does.

A plain-HTTP upstream (the fake, a model server on this machine) is reached through a lean
client of the proxy's own (agent/upstream.py) instead of httpx2's transport, whose pool and
HTTP state machine were half of what the proxy added to a call; TLS stays with httpx2.

The server is a small HTTP/1.1 one of its own (`_Listener`), not http.server, whose parsing
and writes cost more than the rest of a proxied call (benchmarks/proxy_overhead.py).
"""

from __future__ import annotations

import contextlib
import functools
import json
import selectors
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO

import httpx2

from ..errors import ReplayDivergence
from ..journal.derived import ToolTraffic
from ..journal.replay import ReplayStash, ReplayStopped
from ..journal.transport import KEPT_HEADERS, RecordingTransport, request_payload
from ..journal.writer import JournalWriter
from ..provider_keys import PLACEHOLDER_KEY
from .intercept import API_NAMES, PROVIDER_HOSTS
from .upstream import PlainUpstream, read_chunked

UPSTREAMS = {family: f"https://{host}" for host, family in PROVIDER_HOSTS.items()}
"""Where live and record forward each provider's requests unless told otherwise."""
_AUTH_HEADERS = {"anthropic": "x-api-key", "openai": "authorization", "gemini": "x-goog-api-key"}
_NOT_FORWARDED = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "accept-encoding"}
    | {"expect"}  # the proxy has answered it itself, and holds the whole body
    | set(_AUTH_HEADERS.values())
)
_SERVED_METHODS = frozenset({"GET", "POST", "DELETE"})
_MAX_LINE = 65536  # http.server's limits on a request's line and header count
_MAX_HEADERS = 100


def program_env(url: str) -> dict[str, str]:
    """What a program's SDKs read to send here, with a placeholder for every key: the real keys
    stay with the proxy. The official Python, TypeScript, Go and Java SDKs read these names."""
    return {
        "ANTHROPIC_BASE_URL": f"{url}/anthropic",
        "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
        "OPENAI_BASE_URL": f"{url}/openai/v1",
        "OPENAI_API_KEY": PLACEHOLDER_KEY,
        "GOOGLE_GEMINI_BASE_URL": f"{url}/gemini",
        "GEMINI_API_KEY": PLACEHOLDER_KEY,
        "GOOGLE_API_KEY": PLACEHOLDER_KEY,
    }


class RecordingProxy:
    """One attempt's proxy: start it, hand `program_env(proxy.url)` to the program, stop it."""

    def __init__(
        self,
        journal: JournalWriter,
        stash: ReplayStash | None,
        *,
        upstreams: Mapping[str, str] | None = None,
        keys: Mapping[str, str] | None = None,
        limits: Any = None,
    ) -> None:
        self.journal, self.stash, self.limits = journal, stash, limits
        self.upstreams = dict(upstreams) if upstreams is not None else dict(UPSTREAMS)
        """The providers served, and where live and record send each one's requests."""
        self.keys = dict(keys or {})
        """Each provider's key, sent upstream in place of the program's placeholder."""
        self.stopped: ReplayDivergence | None = None
        self.traffic = ToolTraffic()
        """The program's own tools, read from its model traffic (journal/derived.py)."""
        self._transports: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._listener: _Listener | None = None

    @property
    def url(self) -> str:
        if self._listener is None:
            raise RuntimeError("the recording proxy is not started")
        if self._listener.sock.family == socket.AF_UNIX:
            raise RuntimeError("a proxy on a Unix socket has no URL of its own (see start)")
        host, port = self._listener.sock.getsockname()[:2]
        return f"http://{host!s}:{port}"

    def start(self, unix_path: Path | None = None) -> RecordingProxy:
        """Listen on loopback, or on a Unix socket (for a world whose network is its own: a
        relay inside forwards to it; `url` is then the relay's to fill in)."""
        if unix_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(str(unix_path))
                unix_path.chmod(0o777)  # the world's user is not this process's
                sock.listen()
            except OSError:
                sock.close()
                raise
        else:
            sock = socket.create_server(("127.0.0.1", 0))
        self._listener = _Listener(sock, self).start()
        return self

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for transport in self._transports.values():
            transport.close()

    def __enter__(self) -> RecordingProxy:
        return self if self._listener is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one exchange ---------------------------------------------------------------------

    def exchange(
        self, family: str, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request of the program's on (live, record) or answer it (replay)."""
        url = self.upstreams[family].rstrip("/") + path
        sent = {k: v for k, v in headers.items() if k.lower() not in _NOT_FORWARDED}
        key = self.keys.get(family)
        if key is not None:
            sent[_AUTH_HEADERS[family]] = f"Bearer {key}" if family == "openai" else key
        request = _upstream_request(method, url, sent, body)
        try:
            return self._send(family, request, body)
        except ReplayStopped as stop:
            self.stopped = stop.divergence
            return _error(500, "nodeval_divergence", str(stop.divergence))
        except httpx2.TransportError as exc:
            return _error(502, "nodeval_upstream", f"{type(exc).__name__}: {exc}")

    def _send(
        self, family: str, request: httpx2.Request, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """The answer, with the tool results the request carries journaled before it and the
        tool calls the response asks for after it."""
        transport = self._transport(family)
        if isinstance(transport, RecordingTransport):
            # The traffic is read from the journal's own payloads: each body is parsed once.
            seen = request_payload(request, family, API_NAMES[family], body)
            self._derive(self.traffic.from_request(seen))
            response, answer = transport.exchange(request, seen)
            kept: dict[str, str] = answer["headers"]  # KEPT_HEADERS, as the journal keeps them
        else:
            seen = {"api": API_NAMES[family], "path": request.url.path, "body": _parsed(body)}
            self._derive(self.traffic.from_request(seen))
            response = transport.handle_request(request)
            answer = _answer_view(response)
            kept = {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers}
        self._derive(self.traffic.from_response(seen, answer))
        return response.status_code, kept, response.content

    def _derive(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """Journal the tool calls and results the traffic shows; in replay, the recording's
        own are accounted for as the program makes them again (its tools run in every mode)."""
        for kind, payload in events:
            self.journal.emit(kind, payload)
            if kind == "tool.result" and self.stash is not None:
                self.stash.account_tool(payload["call_id"], payload["tool"])

    def _transport(self, family: str) -> Any:
        with self._lock:
            if family not in self._transports:
                self._transports[family] = self._new_transport(family)
            return self._transports[family]

    def _new_transport(self, family: str) -> Any:
        from ..journal.transport import ReplayTransport
        from .retries import LimitedTransport, RetryPolicy

        api = API_NAMES[family]
        if self.stash is not None:
            return ReplayTransport(self.journal, self.stash, family, api)
        # Plain HTTP (the fake, a local model server): a lean client; TLS is httpx2's.
        plain = self.upstreams[family].startswith("http://")
        limited = LimitedTransport(
            family, RetryPolicy(), self.limits, PlainUpstream() if plain else None
        )
        return RecordingTransport(self.journal, family, api, limited)


def _upstream_request(
    method: str, url: str, headers: Mapping[str, str], body: bytes
) -> httpx2.Request:
    """What `httpx2.Request(method, url, headers=headers, content=body)` builds (Host first,
    then the headers, then the body's length), in half the time: the headers are encoded
    once, here, instead of normalised twice by httpx2. Latin-1, as they were read."""
    target = _url(url)
    raw = [(b"Host", target.netloc)]
    raw += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
    if body or method in ("POST", "PUT", "PATCH"):
        raw.append((b"Content-Length", str(len(body)).encode()))
    return httpx2.Request(method, target, headers=raw, stream=httpx2.ByteStream(body))


@functools.lru_cache(maxsize=256)
def _url(url: str) -> httpx2.URL:
    """A URL parsed once: a program calls the same few endpoints (an httpx2.URL is immutable)."""
    return httpx2.URL(url)


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _answer_view(response: httpx2.Response) -> dict[str, Any]:
    """A response as derived.ToolTraffic reads it (the shape the journal stores)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return {"status": response.status_code, "body": None, "sse": response.text}
    return {"status": response.status_code, "body": _parsed(response.content), "sse": None}


def _error(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return status, {"content-type": "application/json", "x-should-retry": "false"}, body


class _BadRequest(Exception):
    """A request this server cannot read; answered 400, and the connection closed."""


@dataclass(frozen=True, slots=True)
class _Request:
    """One request as read off a connection: its line, its headers, its whole body."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


def _read_request(reader: BinaryIO, conn: socket.socket) -> _Request | None:
    """The next request on a connection, or None once the client has closed it."""
    line = reader.readline(_MAX_LINE + 1)
    while line in (b"\r\n", b"\n"):  # RFC 9112: a server ignores empty lines before a request
        line = reader.readline(_MAX_LINE + 1)
    if not line:
        return None
    words = line.decode("latin-1").split()
    if len(line) > _MAX_LINE or len(words) != 3 or words[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise _BadRequest(f"cannot read the request line {line[:200]!r}")
    method, target, version = words
    headers = _read_headers(reader)
    lowered = {name.lower(): value for name, value in headers.items()}
    # HTTP/1.1 keeps a connection open unless told not to; HTTP/1.0 closes it unless asked.
    connection = lowered.get("connection", "").lower()
    keep_alive = "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
    if lowered.get("expect", "").lower() == "100-continue" and version == "HTTP/1.1":
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl asks before a large body
    return _Request(method, target, headers, _read_body(reader, lowered), keep_alive)


def _read_headers(reader: BinaryIO) -> dict[str, str]:
    lines: list[bytes] = []
    while (line := reader.readline(_MAX_LINE + 1)) not in (b"\r\n", b"\n"):
        if not line.endswith(b"\n"):
            if len(line) > _MAX_LINE:
                raise _BadRequest(f"a header line longer than {_MAX_LINE} bytes")
            raise ConnectionResetError("the client closed the connection inside a request")
        if len(lines) == _MAX_HEADERS:
            raise _BadRequest(f"more than {_MAX_HEADERS} headers")
        lines.append(line)
    headers: dict[str, str] = {}
    # Decoded and split at once: a request's twenty-odd lines one by one cost twice as much.
    for text in b"".join(lines).decode("latin-1").split("\n")[:-1]:
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            raise _BadRequest(f"cannot read the header line {text[:200]!r}")
        headers[name] = value.strip()
    return headers


def _read_body(reader: BinaryIO, headers: Mapping[str, str]) -> bytes:
    """The body by its length, or chunk by chunk (a client streaming its upload says neither
    length nor end in advance); a request with neither has none."""
    coding = headers.get("transfer-encoding", "").lower()
    if coding:
        if coding.rsplit(",", 1)[-1].strip() != "chunked":
            raise _BadRequest(f"cannot read a body sent as {coding!r}")
        return read_chunked(reader, _read_exactly, _BadRequest)
    length = headers.get("content-length", "0")
    if not (length.isascii() and length.isdigit()):
        raise _BadRequest(f"content-length {length!r} is not a length")
    return _read_exactly(reader, int(length))


def _read_exactly(reader: BinaryIO, size: int) -> bytes:
    data = reader.read(size) if size else b""
    if len(data) < size:
        raise ConnectionResetError("the client closed the connection inside a request body")
    return data


def _response(status: int, headers: Mapping[str, str], content: bytes, *, close: bool) -> bytes:
    """A whole response in one piece, so it leaves in one write (see _Listener._serve)."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"content-length: {len(content)}")
    if close:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + content


def _answer(proxy: RecordingProxy, request: _Request) -> tuple[int, dict[str, str], bytes]:
    if request.method not in _SERVED_METHODS:
        return _error(501, "nodeval_proxy", f"the proxy does not serve {request.method} requests")
    family, _, rest = request.target.lstrip("/").partition("/")
    if family not in proxy.upstreams:
        names = ", ".join(f"/{name}" for name in proxy.upstreams)
        return _error(
            404,
            "nodeval_proxy",
            f"no provider at {request.target}; this proxy serves {names} (the providers of "
            "the case's input/config.yaml)",
        )
    return proxy.exchange(family, request.method, "/" + rest, request.headers, request.body)


class _Listener:
    """Accepts a program's connections and serves each on a thread of its own, request after
    request (keep-alive: an SDK reuses its connection) until the client closes it.

    Not http.server: its email-based header parsing, its headers and body sent in two writes
    and its polling accept loop cost more than the rest of a proxied call. This reads what the
    SDKs send (a length-delimited or chunked body), answers each request in one write, and
    sleeps until a connection comes or `close` wakes it, so a waiting proxy costs nothing and
    stops at once.
    """

    def __init__(self, sock: socket.socket, proxy: RecordingProxy) -> None:
        self.sock, self._proxy = sock, proxy
        self._closing = False
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="nodeval-proxy", daemon=True)

    def start(self) -> _Listener:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing = True
        self._wake_writer.send(b"\0")
        self._thread.join()
        for sock in (self.sock, self._wake_reader, self._wake_writer):
            sock.close()
        with self._lock:
            idle = list(self._open)
        for conn in idle:  # a kept-alive connection would hold its thread until the client left
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.sock, selectors.EVENT_READ)
            selector.register(self._wake_reader, selectors.EVENT_READ)
            while not self._closing:
                selector.select()
                if self._closing:
                    return
                try:
                    conn, _ = self.sock.accept()
                except OSError:  # the client gave up before it was accepted
                    continue
                with self._lock:
                    self._open.add(conn)
                threading.Thread(
                    target=self._serve, args=(conn,), name="nodeval-proxy-connection", daemon=True
                ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn, conn.makefile("rb") as reader:
                if conn.family != socket.AF_UNIX:
                    # Or a response longer than a segment waits for the client's delayed ACK.
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                while not self._closing and self._serve_one(conn, reader):
                    pass
        except OSError:
            pass  # the client went away, or the proxy stopped under it
        finally:
            with self._lock:
                self._open.discard(conn)

    def _serve_one(self, conn: socket.socket, reader: BinaryIO) -> bool:
        """Answer one request; whether the connection stays open for the next."""
        try:
            request = _read_request(reader, conn)
        except _BadRequest as bad:
            conn.sendall(_response(*_error(400, "nodeval_proxy", str(bad)), close=True))
            return False
        if request is None:
            return False
        status, headers, content = _answer(self._proxy, request)
        conn.sendall(_response(status, headers, content, close=not request.keep_alive))
        return request.keep_alive
