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
"""

from __future__ import annotations

import functools
import json
import socketserver
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2

from ..errors import ReplayDivergence
from ..journal.derived import ToolTraffic
from ..journal.replay import ReplayStash, ReplayStopped
from ..journal.transport import KEPT_HEADERS
from ..journal.writer import JournalWriter
from ..provider_keys import PLACEHOLDER_KEY
from .intercept import API_NAMES, PROVIDER_HOSTS

UPSTREAMS = {family: f"https://{host}" for host, family in PROVIDER_HOSTS.items()}
"""Where live and record forward each provider's requests unless told otherwise."""
_AUTH_HEADERS = {"anthropic": "x-api-key", "openai": "authorization", "gemini": "x-goog-api-key"}
_NOT_FORWARDED = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "accept-encoding"}
    | set(_AUTH_HEADERS.values())
)


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
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the recording proxy is not started")
        if isinstance(self._server, _UnixServer):
            raise RuntimeError("a proxy on a Unix socket has no URL of its own (see start)")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self, unix_path: Path | None = None) -> RecordingProxy:
        """Listen on loopback, or on a Unix socket (for a world whose network is its own: a
        relay inside forwards to it; `url` is then the relay's to fill in)."""
        if unix_path is not None:
            server: Any = _UnixServer(str(unix_path), _Handler)
            unix_path.chmod(0o777)  # the world's user is not this process's
        else:
            server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.proxy = self
        # Stopping waits for the loop to look again: at the default 0.5 s, every attempt would.
        serve = functools.partial(server.serve_forever, poll_interval=0.01)
        threading.Thread(target=serve, name="nodeval-proxy", daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for transport in self._transports.values():
            transport.close()

    def __enter__(self) -> RecordingProxy:
        return self if self._server is not None else self.start()

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
        request = httpx2.Request(method, url, headers=sent, content=body)
        seen = {"api": API_NAMES[family], "path": path, "body": _parsed(body)}
        try:
            self._derive(self.traffic.from_request(seen))
            response = self._transport(family).handle_request(request)
        except ReplayStopped as stop:
            self.stopped = stop.divergence
            return _error(500, "nodeval_divergence", str(stop.divergence))
        except httpx2.TransportError as exc:
            return _error(502, "nodeval_upstream", f"{type(exc).__name__}: {exc}")
        self._derive(self.traffic.from_response(seen, _answer_view(response)))
        kept = {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers}
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
        from ..journal.transport import RecordingTransport, ReplayTransport
        from .retries import LimitedTransport, RetryPolicy

        api = API_NAMES[family]
        if self.stash is not None:
            return ReplayTransport(self.journal, self.stash, family, api)
        limited = LimitedTransport(family, RetryPolicy(), self.limits)
        return RecordingTransport(self.journal, family, api, limited)


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


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    def get_request(self) -> tuple[Any, Any]:
        request, _ = super().get_request()
        return request, ("unix", 0)  # http.server reads a (host, port) client address


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a program's SDK reuses its connection
    # Headers and body go out in two writes: without this, the second waits for the client's
    # delayed ACK (40 ms a call on Linux). Not on a Unix socket, which has no such option.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        if isinstance(self.server, _UnixServer):
            self.disable_nagle_algorithm = False  # type: ignore[misc]
        super().setup()

    def do_POST(self) -> None:
        proxy: RecordingProxy = self.server.proxy  # type: ignore[attr-defined]
        family, _, rest = self.path.lstrip("/").partition("/")
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        if family not in proxy.upstreams:
            names = ", ".join(f"/{name}" for name in proxy.upstreams)
            status, headers, content = _error(
                404,
                "nodeval_proxy",
                f"no provider at {self.path}; this proxy serves {names} (the providers of "
                "the case's input/config.yaml)",
            )
        else:
            status, headers, content = proxy.exchange(
                family, self.command, "/" + rest, dict(self.headers.items()), body
            )
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST
    do_DELETE = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the journal is the log
