"""Every provider request made during an own-agent attempt goes through its journal, whoever
built the client: the agent, a framework, or a library two levels down.

Where it is decided: in httpx2's own `HTTPTransport.handle_request` and
`AsyncHTTPTransport.handle_async_request`, per request, from the attempt in the caller's
context. Not in the SDKs' constructors, because frameworks build their clients where they
like and often once (a module-level `Agent(...)`, a `cached_property`, a process-wide default
client): a client built before the attempt, or by the attempt before, must still send through
the attempt that runs now. Every anthropic, openai and google-genai client sends through those
two transports unless it was handed one of its own, so patching them catches what patching
three SDKs' constructors would, and the clients built before the attempt too. The attempt is
found through a context variable, so attempts running at once (`--nodeval-concurrency`) in
their threads and event loops never see each other's journal; a thread that does not carry
the context (one started with a bare `threading.Thread`) is served by the attempt when only
one runs in the process.

What is routed:
- a request to a provider's API host (api.anthropic.com, api.openai.com,
  generativelanguage.googleapis.com), whatever its path, except the telemetry paths below;
- a request to any host whose path has the shape of a model API (`/v1/messages`,
  `.../chat/completions`, `.../responses`, `...:generateContent`): a local fake, a gateway, a
  model server on the machine.
Live and record send it on through the journal's recording transport (to the fake LLM
instead of the real host when the test started one); replay answers it from the journal.

What else is watched: a lookup of a provider's host (or of the running fake LLM's address)
by an HTTP library other than httpx2 while an attempt runs would go around the journal. It is
refused with `JournalEscape`, and the attempt fails with that message whatever the agent does
with the exception (see docs/frameworks.md).

Telemetry stays home: while replaying or talking to a fake, the OpenAI Agents SDK's trace
uploads (api.openai.com/v1/traces) are answered here with 204 and dropped, and lookups of
LangSmith's and Logfire's hosts are refused; live against real providers both go where the
user configured them.
"""

from __future__ import annotations

import _socket
import asyncio
import asyncio.base_events
import contextlib
import contextvars
import functools
import socket
import sys
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2

from ..errors import NodevalError
from ..journal.replay import ReplayStash
from ..journal.transport import ROUTED
from ..journal.writer import JournalWriter
from ..provider_keys import KEY_ENVS, PLACEHOLDER_KEY, provide_placeholders
from .providers import GEMINI_API

PROVIDER_HOSTS = {
    "api.anthropic.com": "anthropic",
    "api.openai.com": "openai",
    "generativelanguage.googleapis.com": "gemini",
}
TELEMETRY_HOSTS = frozenset(
    {
        "api.smith.langchain.com",
        "eu.api.smith.langchain.com",
        "logfire-api.pydantic.dev",
        "logfire-us.pydantic.dev",
        "logfire-eu.pydantic.dev",
    }
)
_TELEMETRY_PATHS = ("/v1/traces",)  # the OpenAI Agents SDK's trace ingest, on api.openai.com


class JournalEscape(ConnectionRefusedError):
    """A provider request that went around the attempt's journal."""


@dataclass(frozen=True, slots=True)
class Target:
    provider: str
    """The journal's provider name (and the API family): anthropic, openai or gemini."""
    api: str
    provider_host: bool
    """At the provider's own host: sent to the test's fake LLM instead, when one runs."""


def model_api(path: str) -> str | None:
    """Which provider's API a path has the shape of, whatever the host."""
    if path.endswith(("/v1/messages", "/v1/messages/count_tokens")):
        return "anthropic"
    if path.endswith(("/chat/completions", "/responses")):
        return "openai"
    if "/models/" in path and (path.endswith((":generateContent", ":streamGenerateContent"))):
        return "gemini"
    return None


def target_of(url: httpx2.URL) -> Target | None:
    """Whether a request is a model call the journal must carry, and as which provider."""
    host_family = PROVIDER_HOSTS.get(url.host)
    if host_family is not None and url.path.startswith(_TELEMETRY_PATHS):
        return None
    family = model_api(url.path) or host_family
    if family is None:
        return None
    return Target(family, API_NAMES[family], host_family is not None)


def _telemetry(url: httpx2.URL) -> bool:
    return url.host in TELEMETRY_HOSTS or (
        url.host in PROVIDER_HOSTS and url.path.startswith(_TELEMETRY_PATHS)
    )


API_NAMES = {"anthropic": "anthropic.messages", "openai": "openai", "gemini": GEMINI_API}


class Routes:
    """One attempt's routing: where its model calls go, and what went around the journal."""

    def __init__(
        self,
        journal: JournalWriter,
        stash: ReplayStash | None,
        limits: Any = None,
        fake_url: str | None = None,
        owner: Any = None,
    ) -> None:
        self.journal, self.stash, self.limits = journal, stash, limits
        self.fake = httpx2.URL(fake_url) if fake_url else None
        self.owner = owner
        """The AgentContext these routes belong to (what `@tool` journals through)."""
        self.guard = True
        """Refuse lookups that go around the journal. Off for production sessions
        (sampling/sampler.py): a sample may miss a call, a user's request may not fail."""
        self.refusals: list[tuple[str, str]] = []
        """What was refused, as (kind, message): "escape" (around the journal) or "no_key"
        (the placeholder on its way to a real provider). The first decides the attempt,
        whatever the agent made of the exception."""
        self._replayers: dict[str, Any] = {}
        self._loop_transports: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, httpx2.AsyncHTTPTransport
        ] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    @property
    def home(self) -> bool:
        """Whether nothing this attempt sends may reach a real provider (replay or a fake)."""
        return self.stash is not None or self.fake is not None

    def guarded(self, host: str, port: int | None) -> bool:
        if not self.guard:
            return False
        if host in PROVIDER_HOSTS:
            return True
        return self.fake is not None and (host, port) == (self.fake.host, self.fake.port)

    def refused(self, message: str, kind: str = "escape") -> None:
        with self._lock:
            self.refusals.append((kind, message))

    # -- sending --------------------------------------------------------------------------

    def send(
        self, transport: httpx2.HTTPTransport, request: httpx2.Request, target: Target
    ) -> httpx2.Response:
        if self.stash is not None:
            return self._replayer(target).handle_request(request)  # type: ignore[no-any-return]
        from ..journal.transport import RecordingTransport
        from .retries import LimitedTransport

        refused = self._without_key(request, target)
        if refused is not None:
            return refused
        chain = RecordingTransport(
            self.journal,
            target.provider,
            target.api,
            LimitedTransport(target.provider, _policy(), self.limits, transport),
        )
        return _final(chain.handle_request(self._aimed(request, request.read(), target)))

    async def asend(self, request: httpx2.Request, target: Target) -> httpx2.Response:
        if self.stash is not None:
            replayer = self._replayer(target)
            return await replayer.handle_async_request(request)  # type: ignore[no-any-return]
        from ..journal.transport import AsyncRecordingTransport
        from .retries import AsyncLimitedTransport

        refused = self._without_key(request, target)
        if refused is not None:
            return refused
        chain = AsyncRecordingTransport(
            self.journal,
            target.provider,
            target.api,
            AsyncLimitedTransport(target.provider, _policy(), self.limits, self._loop_transport()),
        )
        aimed = self._aimed(request, await request.aread(), target)
        return _final(await chain.handle_async_request(aimed))

    def _without_key(self, request: httpx2.Request, target: Target) -> httpx2.Response | None:
        """A request on its way to a real provider with nodeval's placeholder for a key would
        only be refused there: it is answered here, with the provider's 401 (which the SDKs do
        not retry) saying which key to set, and never leaves."""
        if not target.provider_host or self.fake is not None:
            return None
        carried = [request.url.query.decode("ascii", "replace"), *request.headers.values()]
        if not any(PLACEHOLDER_KEY in value for value in carried):
            return None
        message = (
            f"a request to {request.url.host} would go to the real provider without a key: "
            f"set {' or '.join(KEY_ENVS[target.provider])} to record against it, or "
            "request the nodeval_llm_server fixture in the test to record against the fake"
        )
        self.refused(message, "no_key")
        body = {"type": "error", "error": {"type": "authentication_error", "message": message}}
        return httpx2.Response(401, headers={"x-should-retry": "false"}, json=body, request=request)

    def _loop_transport(self) -> httpx2.AsyncHTTPTransport:
        """A transport of this attempt's for the running event loop. Not the client's own: a
        client made once (a module-level model) keeps its connections in a pool bound to the
        loop that opened them, and each async attempt runs in a loop of its own."""
        from ..journal.transport import shared_tls_context

        loop = asyncio.get_running_loop()
        with self._lock:
            transport = self._loop_transports.get(loop)
            if transport is None:
                transport = httpx2.AsyncHTTPTransport(verify=shared_tls_context())
                self._loop_transports[loop] = transport
            return transport

    def _replayer(self, target: Target) -> Any:
        from ..journal.transport import ReplayTransport

        assert self.stash is not None
        with self._lock:
            if target.provider not in self._replayers:
                self._replayers[target.provider] = ReplayTransport(
                    self.journal, self.stash, target.provider, target.api
                )
            return self._replayers[target.provider]

    def _aimed(self, request: httpx2.Request, body: bytes, target: Target) -> httpx2.Request:
        """The request, sent to the test's fake LLM instead of the provider when one runs."""
        if self.fake is None or not target.provider_host:
            return request
        url = request.url.copy_with(
            scheme=self.fake.scheme, host=self.fake.host, port=self.fake.port
        )
        headers = request.headers.copy()
        headers["host"] = url.netloc.decode("ascii")
        return httpx2.Request(
            request.method, url, headers=headers, content=body, extensions=request.extensions
        )


def _policy() -> Any:
    from .retries import RetryPolicy

    return RetryPolicy()


def _final(response: httpx2.Response) -> httpx2.Response:
    # nodeval retried below the journal already: the SDK on top must not try again (the
    # anthropic and openai SDKs read this header).
    if response.status_code >= 400:
        response.headers["x-should-retry"] = "false"
    return response


# -- which attempt ----------------------------------------------------------------------------

_ROUTES: contextvars.ContextVar[Routes | None] = contextvars.ContextVar(
    "nodeval_routes", default=None
)
_ACTIVE: list[Routes] = []
_ACTIVE_LOCK = threading.Lock()
_HOME_SEEN = False
"""Once this process ran an attempt that must stay home, telemetry does for the rest of it:
trace exporters flush in background threads, after the attempt that traced has ended."""


def current() -> Routes | None:
    """The attempt the caller runs in: its context's, or the only one running in the process.

    A thread that does not carry the context while several attempts run cannot be told apart:
    NodevalError says how to carry it.
    """
    routes = _ROUTES.get()
    if routes is not None:
        return routes
    with _ACTIVE_LOCK:
        active = list(_ACTIVE)
    if len(active) <= 1:
        return active[0] if active else None
    raise NodevalError(
        f"a model call or @tool call came from a thread that carries no attempt while "
        f"{len(active)} attempts run at once, so nodeval cannot tell whose journal it belongs "
        "to; run the thread's work with contextvars.copy_context().run(...), or use "
        "asyncio.to_thread from the agent's own task"
    )


@contextlib.contextmanager
def activated(routes: Routes) -> Iterator[None]:
    """Route the requests of the calling context (and its tasks and copied threads) to `routes`
    while the block runs."""
    global _HOME_SEEN
    install()
    token = _ROUTES.set(routes)
    if routes.home:
        provide_placeholders()  # kept until the process (or pytest) ends: see provider_keys
    with _ACTIVE_LOCK:
        _ACTIVE.append(routes)
        _HOME_SEEN = _HOME_SEEN or routes.home
    try:
        with _tracing_off(routes.home):
            yield
    finally:
        _ROUTES.reset(token)
        with _ACTIVE_LOCK:
            _ACTIVE.remove(routes)


@contextlib.contextmanager
def _tracing_off(home: bool) -> Iterator[None]:
    """LangSmith's tracing off in this context while the attempt stays home (it posts with
    `requests`, which the transport patch does not see). Only if already imported: nodeval
    imports nothing framework-related."""
    langsmith = sys.modules.get("langsmith.run_helpers") if home else None
    if langsmith is None:
        yield
        return
    with langsmith.tracing_context(enabled=False):
        yield


# -- the patches ------------------------------------------------------------------------------

_INSTALL_LOCK = threading.Lock()


def install() -> None:
    """Patch httpx2's two default transports and the host lookups (at each attempt's start:
    cheap when they are in place, and put back if something replaced them since).

    A patch keeps what it replaced, so a second copy of this module (pytester's in-process
    runs import the package afresh) replaces an earlier copy's patch instead of stacking on
    it. The lookups are patched only over Python's own: a stand-in put there by someone else
    (a test that blocks the network) is left alone, and the lookup patches never call what
    they replaced, so none of them can outlive its stand-in.
    """
    with _INSTALL_LOCK:
        _patch(httpx2.HTTPTransport, "handle_request", _handle_request)
        _patch(httpx2.AsyncHTTPTransport, "handle_async_request", _handle_async_request)
        _patch(socket, "getaddrinfo", _getaddrinfo, own_module="socket")
        _patch(
            asyncio.base_events.BaseEventLoop,
            "getaddrinfo",
            _loop_getaddrinfo,
            own_module="asyncio.base_events",
        )


def _patch(owner: Any, attribute: str, patch: Any, own_module: str | None = None) -> None:
    current = getattr(owner, attribute)
    if current is patch:
        return
    earlier = getattr(current, "_nodeval_original", None)  # another copy's patch
    if own_module is not None and earlier is None and current.__module__ != own_module:
        return
    setattr(patch, "_nodeval_original", earlier or current)  # noqa: B010
    setattr(owner, attribute, patch)


def _original(patch: Any) -> Any:
    return patch._nodeval_original


def _resolve(
    host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
) -> Any:
    """socket.getaddrinfo as Python's own does it (the C lookup, its numbers made enums)."""
    return [
        (_enum(socket.AddressFamily, af), _enum(socket.SocketKind, kind), proto_, name, address)
        for af, kind, proto_, name, address in _socket.getaddrinfo(
            host, port, family, type, proto, flags
        )
    ]


def _enum(cls: Any, value: int) -> Any:
    try:
        return cls(value)
    except ValueError:
        return value


_PASS, _MARKED, _DROP, _ROUTE = range(4)


def _decision(url: httpx2.URL) -> tuple[int, Routes | None, Target | None]:
    """What the patched transports do with a request: pass it untouched (not a model call,
    or a journal transport sends it already), pass it marked as seen (the host lookup below
    it is no escape), drop it (telemetry kept home) or route it through an attempt's journal."""
    if ROUTED.get():
        return _PASS, None, None
    telemetry = _telemetry(url)
    target = None if telemetry else target_of(url)
    if not telemetry and target is None:
        return _PASS, None, None  # whatever runs beside the attempt (a tool's fetch, MCP)
    try:
        routes = current()
    except NodevalError as exc:
        _refused_everywhere(str(exc))
        raise JournalEscape(str(exc)) from None
    if telemetry:
        home = routes.home if routes is not None else _HOME_SEEN
        return (_DROP if home else _MARKED), routes, None
    if routes is None:
        return _PASS, None, None
    return _ROUTE, routes, target


def _handle_request(self: httpx2.HTTPTransport, request: httpx2.Request) -> httpx2.Response:
    original = _original(_handle_request)
    action, routes, target = _decision(request.url)
    if action == _ROUTE:
        assert routes is not None and target is not None
        return routes.send(self, request, target)
    if action == _DROP:
        return httpx2.Response(204, request=request)
    token = ROUTED.set(action == _MARKED or ROUTED.get())
    try:
        return original(self, request)  # type: ignore[no-any-return]
    finally:
        ROUTED.reset(token)


async def _handle_async_request(
    self: httpx2.AsyncHTTPTransport, request: httpx2.Request
) -> httpx2.Response:
    original = _original(_handle_async_request)
    action, routes, target = _decision(request.url)
    if action == _ROUTE:
        assert routes is not None and target is not None
        return await routes.asend(request, target)
    if action == _DROP:
        return httpx2.Response(204, request=request)
    token = ROUTED.set(action == _MARKED or ROUTED.get())
    try:
        return await original(self, request)  # type: ignore[no-any-return]
    finally:
        ROUTED.reset(token)


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    _check_lookup(host, port)
    return _resolve(host, port, *args, **kwargs)


async def _loop_getaddrinfo(
    self: asyncio.AbstractEventLoop,
    host: Any,
    port: Any,
    *,
    family: int = 0,
    type: int = 0,
    proto: int = 0,
    flags: int = 0,
) -> Any:
    # Checked here, in the caller's task; the executor thread that resolves carries no context,
    # so it calls the lookup itself, not the patched one.
    _check_lookup(host, port)
    resolve = functools.partial(_resolve, host, port, family, type, proto, flags)
    return await self.run_in_executor(None, resolve)


def _check_lookup(host: Any, port: Any) -> None:
    if ROUTED.get() or not (_ACTIVE or _HOME_SEEN):
        return
    name = host.decode("idna") if isinstance(host, bytes) else str(host)
    number = _port(port)
    if name in TELEMETRY_HOSTS:
        if _HOME_SEEN:
            raise ConnectionRefusedError(f"nodeval keeps {name} (telemetry) off the network")
        return
    routes = _ROUTES.get()
    with _ACTIVE_LOCK:
        suspects = [routes] if routes is not None else list(_ACTIVE)
    suspects = [r for r in suspects if r.guarded(name, number)]
    if not suspects:
        return
    message = escape_message(f"{name}:{number}" if number else name)
    for routes in suspects:
        routes.refused(message)
    raise JournalEscape(message)


def _refused_everywhere(message: str) -> None:
    with _ACTIVE_LOCK:
        active = list(_ACTIVE)
    for routes in active:
        routes.refused(message)


def escape_message(where: str) -> str:
    return (
        f"a request to {where} went around the attempt's journal: it was sent by an HTTP "
        "library other than httpx2 (the one the anthropic, openai and google-genai SDKs use), "
        "so nodeval can neither record nor replay it. Make the call through one of those SDKs, "
        "or hand the library ctx.http_client() (docs/frameworks.md, 'Going around the journal')"
    )


def _port(port: Any) -> int | None:
    try:
        return int(port) if port is not None else None
    except (TypeError, ValueError):
        return None
