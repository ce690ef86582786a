"""The protected MCP server of `fakes.mcp_oauth`: the SDK's server behind a bearer gate.

The gate is plain ASGI in front of the SDK's streamable-HTTP Starlette app (not a Mount, so
the SDK app's lifespan, which runs its session manager, still reaches it). It checks the
bearer token on every request to ``/mcp``; for POSTs it buffers the body to read the
JSON-RPC method and tool name (for per-tool scopes), then replays it to the SDK app. The
SDK's own ``RequireAuthMiddleware`` is not used: it sends no ``scope=`` in its 403
challenge and knows no per-tool scopes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from .mcp_oauth import MCPOAuthFake

MCP_PATH = "/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource"


def build_rs_app(fake: MCPOAuthFake) -> Any:
    from mcp.server import Server

    server = Server(
        fake.script.server_name, on_list_tools=_list_tools(fake), on_call_tool=_call_tool(fake)
    )

    async def protected_resource_metadata(request: Request) -> Response:
        fake.record("rs", "prm", 200, path=request.url.path)
        return JSONResponse(
            {
                "resource": fake.mcp_url,
                "authorization_servers": [fake.issuer],
                "scopes_supported": list(fake.script.base_scopes),
                "bearer_methods_supported": ["header"],
                "resource_name": fake.script.server_name,
            }
        )

    # Path-based first (what the 401 points to), and the root URL clients fall back to.
    prm_routes = [
        Route(path, protected_resource_metadata) for path in (PRM_PATH + MCP_PATH, PRM_PATH)
    ]
    sdk_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, custom_starlette_routes=prm_routes, host="127.0.0.1"
    )
    return BearerGate(sdk_app, fake)


def _list_tools(fake: MCPOAuthFake) -> Any:
    import mcp_types as types

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        tools = [
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in fake.script.tools
        ]
        return types.ListToolsResult(tools=tools)

    return on_list_tools


def _call_tool(fake: MCPOAuthFake) -> Any:
    import mcp_types as types

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        tool = next((t for t in fake.script.tools if t.name == params.name), None)
        if tool is None:
            text = types.TextContent(type="text", text=f"Unknown tool: {params.name}")
            return types.CallToolResult(content=[text], is_error=True)
        result = fake.pick_result(tool, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            structured_content=result.structured,
            is_error=result.is_error,
        )

    return on_call_tool


class BearerGate:
    """Lets a request to ``/mcp`` through only with a live token, for this audience, with
    the scopes the call needs; everything else passes straight to the wrapped app."""

    def __init__(self, app: Any, fake: MCPOAuthFake) -> None:
        self.app = app
        self.fake = fake

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != MCP_PATH:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive) if scope["method"] == "POST" else b""
        messages = _rpc_messages(body)
        detail = _describe(scope["method"], messages)
        refusal = self._refusal(Request(scope), detail.get("tool"))
        if refusal is None:
            refusal = self._injected_failure(messages)
        if refusal is not None:
            response, error = refusal
            self.fake.record("rs", "mcp", response.status_code, **detail, error=error)
            await response(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), self._recording_send(send, detail))

    def _refusal(self, request: Request, tool: str | None) -> tuple[Response, str] | None:
        needed = self.fake.required_scopes(tool)
        token = _bearer(request)
        if token is None:
            return self._challenge(401, needed, None, "no access token"), "missing_token"
        grant = self.fake.store.access.get(token)
        if grant is None or not grant.live():
            description = "The access token is unknown, expired or revoked"
            return self._challenge(401, needed, "invalid_token", description), "invalid_token"
        if (grant.resource or "").rstrip("/") != self.fake.mcp_url:
            description = "The access token was issued for another resource"
            return self._challenge(401, needed, "invalid_token", description), "wrong_audience"
        if not set(needed) <= set(grant.scopes):
            description = f"This call needs scope {' '.join(needed)}"
            return self._challenge(
                403, needed, "insufficient_scope", description
            ), "insufficient_scope"
        return None

    def _challenge(
        self, status: int, needed: list[str], error: str | None, description: str
    ) -> Response:
        """RFC 6750 §3 challenge, plus RFC 9728's `resource_metadata` and the scope needed."""
        metadata_url = f"{self.fake.resource_url}{PRM_PATH}{MCP_PATH}"
        params = [f'error="{error}"', f'error_description="{description}"'] if error else []
        params += [f'scope="{" ".join(needed)}"', f'resource_metadata="{metadata_url}"']
        body = {"error": error or "invalid_request", "error_description": description}
        challenge = "Bearer " + ", ".join(params)
        return JSONResponse(body, status_code=status, headers={"www-authenticate": challenge})

    def _injected_failure(self, messages: list[dict[str, Any]]) -> tuple[Response, str] | None:
        failure = self.fake.take_mcp_failure([str(m.get("method")) for m in messages])
        if failure is None:
            return None
        headers = (
            {"retry-after": str(failure.retry_after_s)}
            if failure.retry_after_s is not None
            else None
        )
        rpc_id = messages[0].get("id") if len(messages) == 1 else None
        error = {"code": -32000, "message": f"HTTP {failure.status} injected by fakes.mcp_oauth"}
        body = {"jsonrpc": "2.0", "id": rpc_id, "error": error}
        return JSONResponse(
            body, status_code=failure.status, headers=headers
        ), f"injected_{failure.status}"

    def _recording_send(self, send: Any, detail: dict[str, Any]) -> Any:
        async def recording_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.fake.record("rs", "mcp", message["status"], **detail)
            await send(message)

        return recording_send


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """A `receive` that hands the buffered body over once, then defers to the real one."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay_receive() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replay_receive


def _rpc_messages(body: bytes) -> list[dict[str, Any]]:
    try:
        data = json.loads(body) if body else []
    except ValueError:
        return []
    items = data if isinstance(data, list) else [data]
    return [m for m in items if isinstance(m, dict)]


def _describe(http_method: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    methods = [str(m["method"]) for m in messages if "method" in m]
    tools = [
        (m.get("params") or {}).get("name") for m in messages if m.get("method") == "tools/call"
    ]
    detail: dict[str, Any] = {"http": http_method, "method": methods[0] if methods else None}
    if tools:
        detail["tool"] = tools[0]
    return detail
