"""MCP servers' tools as tools of the reference engine, through the `mcp` SDK.

`tools: [mcp:files]` enables every tool of the server named `files` in the config's
`mcp: {servers: [...]}` section. Tools keep the names their server gives them; two
enabled tools with one name are an error naming both sources.

Live: the engine is synchronous and the MCP client is async, so one event loop runs in a
background thread per session (`McpSessions`). Each server's connection is held open by
one task on it (the SDK's transports must be entered and left by the same task); tool
calls are submitted to the loop and waited for with the tool's time limit. The sessions
are closed when the engine's session ends.

Authorization:
* `url: fake`: the SDK's own OAuth client (`OAuthClientProvider`) completes the real
  flow against fakes.mcp_oauth with no browser: discovery, dynamic registration,
  authorization with PKCE, token, refresh, and step-up when a tool needs more scope.
* a real server with `token_env`: the token in that variable is sent as a bearer token.
  The engine does not run the interactive flow against real servers: it would need a
  person to consent. A token that expires or lacks a scope fails the call (a tool error).
* a real server without `token_env`: no credentials; a 401 names `token_env` as the fix.

What the OAuth client did is journaled without any secret, as a list of steps
(`{"step": "challenge" | "resource_metadata" | "authorization_server_metadata" |
"register" | "authorize" | "token" | "bearer_token", ...}`; token steps carry the grant
type, so a refresh is `{"step": "token", "grant_type": "refresh_token"}`):
* the steps of connecting go into the first `tool.register` event of each server, under
  `mcp.auth` (every tool.register of a server carries `mcp.server`);
* the steps a call caused (a refresh, a re-authorization, a step-up) go into that call's
  `tool.result`, under `auth`. Calls that needed none have no `auth` field.

Replay: nothing connects; definitions come from the journal's `tool.register` events and
results from its `tool.result` events (see tools.RecordedTool).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import NodevalError
from .config import McpServerSpec
from .providers import ToolDef
from .tools import ToolContext, ToolOutcome

log = logging.getLogger(__name__)

SSE_READ_TIMEOUT_S = 300.0
"""How long the server may keep a response stream quiet (the SDK's own default)."""
CLOSE_TIMEOUT_S = 10.0


def source_of(server: str) -> str:
    return f"mcp:{server}"


# -- what the OAuth client did -------------------------------------------------------------


class AuthTrail:
    """The authorization steps of one server's connection, read off its HTTP traffic.

    `observe` is an httpx2 response hook: the OAuth provider's own requests (discovery,
    registration, token) pass through the same client as the MCP requests, so they are seen
    as they happen. Tokens, codes and secrets are never kept.
    """

    def __init__(self, endpoint: str) -> None:
        parts = urlsplit(endpoint)
        self._endpoint = (parts.hostname, parts.port, parts.path or "/")
        self._steps: list[dict[str, Any]] = []

    def note(self, step: dict[str, Any]) -> None:
        self._steps.append(step)

    def drain(self) -> list[dict[str, Any]]:
        steps, self._steps = self._steps, []
        return steps

    async def observe(self, response: Any) -> None:
        request = response.request
        if (request.url.host, request.url.port, request.url.path) == self._endpoint:
            if response.status_code in (401, 403):
                self.note(_challenge(response))
            return
        step = await _oauth_step(request, response)
        if step is not None:
            self.note(step)


def _challenge(response: Any) -> dict[str, Any]:
    from mcp.client.auth.utils import extract_field_from_www_auth

    step = {
        "step": "challenge",
        "status": response.status_code,
        "error": extract_field_from_www_auth(response, "error"),
        "scope": extract_field_from_www_auth(response, "scope"),
    }
    return {k: v for k, v in step.items() if v is not None}


async def _oauth_step(request: Any, response: Any) -> dict[str, Any] | None:
    path, status = request.url.path, response.status_code
    if "/.well-known/oauth-protected-resource" in path:
        return {"step": "resource_metadata", "status": status}
    if (
        "/.well-known/oauth-authorization-server" in path
        or "/.well-known/openid-configuration" in path
    ):
        return {"step": "authorization_server_metadata", "status": status}
    if request.method != "POST":
        return None
    content = _body(request)
    form = parse_qs(content.decode("utf-8", "replace"))
    if "grant_type" in form:
        return {
            "step": "token",
            "grant_type": form["grant_type"][0],
            **await _token_summary(response),
        }
    if b"redirect_uris" in content:
        body = await _json(response)
        return {"step": "register", "status": status, "client_id": body.get("client_id")}
    return None


def _body(request: Any) -> bytes:
    try:
        return bytes(request.content)
    except Exception:  # a streamed body (never an OAuth request) cannot be read twice
        return b""


async def _token_summary(response: Any) -> dict[str, Any]:
    body = await _json(response)
    if response.status_code != 200:
        return {"status": response.status_code, "error": body.get("error")}
    return {
        "status": 200,
        "scope": body.get("scope"),
        "expires_in": body.get("expires_in"),
        "refreshable": bool(body.get("refresh_token")),
    }


async def _json(response: Any) -> dict[str, Any]:
    await response.aread()  # cached: the OAuth provider reads the same body afterwards
    try:
        body = json.loads(response.content or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _journaling_authorizer(trail: AuthTrail, fake_url: str) -> Any:
    """fakes.mcp_oauth's headless authorizer, noting each authorization request it makes."""
    from pytest_nodeval_fakes.mcp_oauth import HeadlessAuthorizer

    parts = urlsplit(fake_url)
    origin = f"{parts.scheme}://{parts.netloc}"

    class JournalingAuthorizer(HeadlessAuthorizer):
        async def redirect(self, authorization_url: str) -> None:
            query = {k: v[0] for k, v in parse_qs(urlsplit(authorization_url).query).items()}
            resource = query.get("resource")
            if resource and resource.startswith(origin):
                # The fake's port changes every run: "fake/mcp" keeps the journal the same.
                resource = "fake" + resource.removeprefix(origin)
            trail.note({"step": "authorize", "scope": query.get("scope"), "resource": resource})
            await super().redirect(authorization_url)

    return JournalingAuthorizer()


# -- connections ------------------------------------------------------------------------------


class _Connection:
    """One server's MCP client session, held open by a task on the sessions' loop."""

    def __init__(self, spec: McpServerSpec, url: str, timeout_s: float) -> None:
        self.spec, self.url, self.timeout_s = spec, url, timeout_s
        self.trail = AuthTrail(url)
        self.client: Any = None
        self._closing: asyncio.Event | None = None

    async def hold(self, ready: concurrent.futures.Future[list[Any]]) -> None:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        self._closing = asyncio.Event()
        try:
            async with (
                self._http_client() as http,
                Client(
                    streamable_http_client(self.url, http_client=http),
                    read_timeout_seconds=self.timeout_s,
                ) as client,
            ):
                tools = await _list_all_tools(client)
                self.client = client
                ready.set_result(tools)
                await self._closing.wait()
        except BaseException as exc:  # the SDK raises exception groups from its task groups
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.debug("MCP server %r: error while closing: %r", self.spec.name, exc)

    def close(self) -> None:
        if self._closing is not None:
            self._closing.set()

    def _http_client(self) -> Any:
        import httpx2

        auth, headers = self._credentials()
        # A plain-http fake needs no TLS context
        return httpx2.AsyncClient(
            auth=auth,
            headers=headers,
            trust_env=False,
            event_hooks={"response": [self.trail.observe]},
            timeout=httpx2.Timeout(self.timeout_s, read=SSE_READ_TIMEOUT_S),
            verify=self.url.startswith("https://"),
        )

    def _credentials(self) -> tuple[Any, dict[str, str]]:
        if self.spec.url == "fake":
            from pytest_nodeval_fakes.mcp_oauth import headless_oauth_provider

            scopes = " ".join(self.spec.scopes) or None
            return headless_oauth_provider(
                self.url, scopes=scopes, authorizer=_journaling_authorizer(self.trail, self.url)
            ), {}
        if self.spec.token_env is None:
            return None, {}
        token = os.environ.get(self.spec.token_env)
        if not token:
            raise NodevalError(
                f"MCP server '{self.spec.name}': the environment variable {self.spec.token_env} "
                "(token_env in input/config.yaml) is not set; it must hold a bearer token"
            )
        self.trail.note({"step": "bearer_token", "from_env": self.spec.token_env})
        return None, {"Authorization": f"Bearer {token}"}


async def _list_all_tools(client: Any) -> list[Any]:
    tools, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            return tools


class McpSessions:
    """Every MCP connection of one engine session, on one event loop in a background thread."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="nodeval-mcp", daemon=True
        )
        self._thread.start()
        self._held: list[tuple[_Connection, concurrent.futures.Future[None]]] = []

    def connect(self, spec: McpServerSpec, url: str, timeout_s: float) -> list[McpTool]:
        """Open the server's session and list its tools (one McpTool each)."""
        connection = _Connection(spec, url, timeout_s)
        ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
        self._held.append(
            (connection, asyncio.run_coroutine_threadsafe(connection.hold(ready), self._loop))
        )
        try:
            listed = ready.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            raise NodevalError(
                f"MCP server '{spec.name}' ({url}) did not connect within {timeout_s:g}s"
            ) from None
        except NodevalError:
            raise
        except BaseException as exc:
            raise NodevalError(_connect_failure(connection, exc)) from None
        boot_steps = connection.trail.drain()
        return [
            McpTool(self, connection, tool, boot_steps if i == 0 else None)
            for i, tool in enumerate(listed)
        ]

    def call(
        self, connection: _Connection, name: str, args: dict[str, Any], timeout_s: float
    ) -> ToolOutcome:
        future = asyncio.run_coroutine_threadsafe(
            _call(connection, name, args, timeout_s), self._loop
        )
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return ToolOutcome(
                False,
                None,
                f"MCP server '{connection.spec.name}' did not answer within {timeout_s:g}s",
            )

    def close(self) -> None:
        for connection, _ in self._held:
            self._loop.call_soon_threadsafe(connection.close)
        for connection, held in self._held:
            try:
                held.result(timeout=CLOSE_TIMEOUT_S)
            except BaseException as exc:  # closing must not fail the session it ends
                log.debug("MCP server %r did not close cleanly: %r", connection.spec.name, exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()


async def _call(
    connection: _Connection, name: str, args: dict[str, Any], timeout_s: float
) -> ToolOutcome:
    try:
        result = await connection.client.call_tool(name, args, read_timeout_seconds=timeout_s)
        outcome = outcome_of(result)
    except Exception as exc:  # protocol errors (a refused step-up, a 5xx) are the agent's to handle
        outcome = ToolOutcome(False, None, f"MCP server '{connection.spec.name}': {describe(exc)}")
    steps = connection.trail.drain()
    return ToolOutcome(
        outcome.ok, outcome.result, outcome.error, {"auth": steps} if steps else None
    )


def outcome_of(result: Any) -> ToolOutcome:
    """A CallToolResult as the engine's outcome; `isError` makes it a tool error."""
    texts = [item.text for item in result.content if getattr(item, "type", None) == "text"]
    others = [
        item.model_dump(mode="json", by_alias=True, exclude_none=True)
        for item in result.content
        if getattr(item, "type", None) != "text"
    ]
    payload: dict[str, Any] = {"text": "\n".join(texts)}
    if result.structured_content is not None:
        payload["structured"] = result.structured_content
    if others:
        payload["content"] = others
    if result.is_error:
        return ToolOutcome(
            False, payload, payload["text"] or "the tool reported an error (isError, no text)"
        )
    return ToolOutcome(True, payload)


def describe(exc: BaseException) -> str:
    """The innermost errors of (nested) exception groups, as one line."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def _connect_failure(connection: _Connection, exc: BaseException) -> str:
    spec = connection.spec
    message = f"MCP server '{spec.name}' ({connection.url}): could not connect: {describe(exc)}"
    refused = any(
        s.get("step") == "challenge" and s.get("status") == 401 for s in connection.trail.drain()
    )
    if refused and spec.url != "fake":
        message += (
            "; the server asks for authorization, which the engine cannot give for a person: "
            "set token_env in input/config.yaml to a variable holding an access token for it"
        )
    return message


class McpTool:
    """One tool of an MCP server, called through the held-open session."""

    side_effects = True

    def __init__(
        self,
        sessions: McpSessions,
        connection: _Connection,
        listed: Any,
        boot_steps: list[dict[str, Any]] | None,
    ) -> None:
        self._sessions, self._connection = sessions, connection
        self.source = source_of(connection.spec.name)
        self.definition = ToolDef(
            listed.name, listed.description or "", dict(listed.input_schema or {})
        )
        details: dict[str, Any] = {"server": connection.spec.name}
        if boot_steps is not None:
            details["auth"] = boot_steps
        self.register_extra = {"mcp": details}

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return self._sessions.call(self._connection, self.definition.name, args, ctx.timeout_s)
