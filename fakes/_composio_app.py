"""The Starlette app behind `fakes.composio.ComposioFake`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from .composio import ApiErrorSpec, RecordedComposioCall, tool_json

if TYPE_CHECKING:
    from .composio import ComposioFake

PREFIXES = ("/api/v3", "/api/v3.1")
Handler = Callable[["ComposioFake", Request, Any], Awaitable[Response]]


def build_app(fake: ComposioFake) -> Starlette:
    routes = [
        Route(prefix + path, _api_endpoint(fake, prefix, handler), methods=[method])
        for prefix in PREFIXES
        for method, path, handler in _API_ROUTES
    ]
    routes.append(Route("/link/{token}", _link_page_endpoint(fake), methods=["GET"]))
    return Starlette(routes=routes)


Endpoint = Callable[[Request], Awaitable[Response]]


def _api_endpoint(fake: ComposioFake, prefix: str, handler: Handler) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        body = await _json_body(request)
        refused = _auth_error(fake, request) or _injected(fake, request)
        response = refused or await handler(fake, request, body)
        _record(fake, request, prefix, body, response.status_code)
        return response

    return endpoint


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {"_unparsed": raw.decode("utf-8", "replace")}


def _record(fake: ComposioFake, request: Request, prefix: str, body: Any, status: int) -> None:
    path = request.url.path.removeprefix(prefix)
    fake.calls.append(
        RecordedComposioCall(
            method=request.method,
            path=path,
            prefix=prefix,
            query=dict(request.query_params),
            body=body,
            status=status,
        )
    )


def error(status: int, message: str, *, code: int, slug: str | None = None) -> JSONResponse:
    """Composio's error envelope; the SDK raises `f"{status} {message}"` as its class."""
    body = {
        "error": {
            "message": message,
            "code": code,
            "slug": slug,
            "status": status,
            "request_id": "req_fake",
            "suggested_fix": "",
            "errors": [],
        }
    }
    return JSONResponse(body, status_code=status)


def _spec_error(spec: ApiErrorSpec) -> JSONResponse:
    if spec.status == 429:
        # The documented platform rate limit uses a bare body, not the envelope.
        headers = (
            {"retry-after": str(spec.retry_after_s)} if spec.retry_after_s is not None else None
        )
        return JSONResponse({"message": spec.message}, status_code=429, headers=headers)
    return error(spec.status, spec.message, code=spec.code, slug=spec.slug)


def _auth_error(fake: ComposioFake, request: Request) -> Response | None:
    key = request.headers.get("x-api-key")
    if not key:
        return error(401, "No API key provided", code=906, slug="Auth_NoAuthProvided")
    if key != fake.api_key:
        masked = f"{key[:3]}**{key[-4:]}" if len(key) > 8 else "**"
        return error(401, f"Invalid API key: {masked}", code=801, slug="APIKey_InvalidAPIKey")
    return None


def _injected(fake: ComposioFake, request: Request) -> Response | None:
    spec = fake._take_failure(request.url.path)
    return _spec_error(spec) if spec is not None else None


def _csv(request: Request, name: str) -> list[str]:
    """Array query values; the SDK comma-joins them, other clients repeat the key."""
    values = request.query_params.getlist(name) + request.query_params.getlist(f"{name}[]")
    return [item for value in values for item in value.split(",") if item]


def _page(items: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse(
        {
            "items": items,
            "next_cursor": None,
            "total_pages": 1,
            "current_page": 1,
            "total_items": len(items),
        }
    )


# ---- tools ---------------------------------------------------------------------------


async def _list_tools(fake: ComposioFake, request: Request, _: Any) -> Response:
    slugs = {s.upper() for s in _csv(request, "tool_slugs")}
    toolkits = {s.lower() for s in _csv(request, "toolkit_slug")}
    query = (request.query_params.get("query") or "").lower()
    tools = [
        t
        for t in fake.catalogue.tools
        if (not slugs or t.slug.upper() in slugs)
        and (not toolkits or t.toolkit.lower() in toolkits)
        and (not query or query in f"{t.slug} {t.name or ''} {t.description}".lower())
    ]
    limit = request.query_params.get("limit")
    if limit and limit.isdigit():
        tools = tools[: int(limit)]
    return _page([tool_json(t) for t in tools])


def _tool_not_found(slug: str) -> JSONResponse:
    # Code made up: the real service's code for an unknown slug is not documented.
    return error(404, f"Tool {slug} not found", code=4041, slug="Tool_ToolNotFound")


async def _get_tool(fake: ComposioFake, request: Request, _: Any) -> Response:
    slug = request.path_params["slug"]
    tool = fake._tool(slug)
    return JSONResponse(tool_json(tool)) if tool else _tool_not_found(slug)


async def _execute_tool(fake: ComposioFake, request: Request, body: Any) -> Response:
    slug = request.path_params["slug"]
    tool = fake._tool(slug)
    if tool is None:
        return _tool_not_found(slug)
    body = body if isinstance(body, dict) else {}
    arguments = body.get("arguments") or {}
    refused = _account_problem(fake, tool, body)
    if refused is not None:
        return refused
    result = fake._pick_result(tool, arguments)
    if result.http_error is not None:
        return _spec_error(result.http_error)
    successful = result.error is None if result.successful is None else result.successful
    return JSONResponse(
        {
            "data": result.data,
            "error": result.error,
            "successful": successful,
            "log_id": fake._next_id("log_fake_"),
            "session_info": None,
        }
    )


def _account_problem(fake: ComposioFake, tool: Any, body: dict[str, Any]) -> Response | None:
    """With `require_connected_account`, a tool that needs auth needs an ACTIVE account."""
    if not fake.catalogue.require_connected_account or tool.no_auth:
        return None
    user_id, account_id = body.get("user_id"), body.get("connected_account_id")
    active = [
        a
        for a in fake.accounts.values()
        if a["status"] == "ACTIVE"
        and a["toolkit"]["slug"] == tool.toolkit
        and (account_id is None or a["id"] == account_id)
    ]
    if not active:
        return error(400, "No connected account found", code=1803, slug="ConnectedAccount_NotFound")
    if user_id is not None and all(a["user_id"] != user_id for a in active):
        message = "Connected account user ID does not match the provided user ID."
        return error(400, message, code=1812, slug="ActionExecute_ConnectedAccountEntityIdMismatch")
    return None


# ---- auth configs and connected accounts ---------------------------------------------


async def _list_auth_configs(fake: ComposioFake, request: Request, _: Any) -> Response:
    toolkit = request.query_params.get("toolkit_slug")
    items = [
        {
            "id": c.id,
            "name": c.name or c.id,
            "toolkit": {"slug": c.toolkit, "logo": ""},
            "auth_scheme": c.auth_scheme,
            "is_composio_managed": True,
            "status": "ENABLED",
        }
        for c in fake.catalogue.auth_configs
        if toolkit is None or c.toolkit == toolkit
    ]
    return _page(items)


async def _list_accounts(fake: ComposioFake, request: Request, _: Any) -> Response:
    filters = {
        "user_id": set(_csv(request, "user_ids")),
        "status": set(_csv(request, "statuses")),
        "toolkit": set(_csv(request, "toolkit_slugs")),
        "auth_config": set(_csv(request, "auth_config_ids")),
    }
    items = [a for a in list(fake.accounts.values()) if _account_matches(a, filters)]
    return _page(items)


def _account_matches(account: dict[str, Any], filters: dict[str, set[str]]) -> bool:
    values = {
        "user_id": account["user_id"],
        "status": account["status"],
        "toolkit": account["toolkit"]["slug"],
        "auth_config": account["auth_config"]["id"],
    }
    return all(not wanted or values[key] in wanted for key, wanted in filters.items())


async def _get_account(fake: ComposioFake, request: Request, _: Any) -> Response:
    account = fake.accounts.get(request.path_params["account_id"])
    return (
        JSONResponse(account) if account else _account_not_found(request.path_params["account_id"])
    )


async def _delete_account(fake: ComposioFake, request: Request, _: Any) -> Response:
    account = fake.accounts.pop(request.path_params["account_id"], None)
    if account is None:
        return _account_not_found(request.path_params["account_id"])
    return JSONResponse({"success": True})


def _account_not_found(account_id: str) -> JSONResponse:
    # Code made up, as for tools.
    message = f"Connected account {account_id} not found"
    return error(404, message, code=4042, slug="ConnectedAccount_NotFound")


def _new_account(fake: ComposioFake, user_id: Any, config_id: Any) -> dict[str, Any] | Response:
    """The new account, or the error response that refuses it."""
    if not isinstance(user_id, str) or not isinstance(config_id, str):
        message = "user_id and auth_config id are required"
        return error(400, message, code=10400, slug="Validation_Error")
    if fake._auth_config(config_id) is None:
        # Code made up: the real code for an unknown auth config is not documented.
        return error(
            404, f"Auth config {config_id} not found", code=4043, slug="AuthConfig_NotFound"
        )
    account = fake._add_account(fake._next_id("ca_fake_"), user_id, config_id, "INITIATED")
    return account


def _link_url(request: Request, token: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/link/{token}"


async def _create_link(fake: ComposioFake, request: Request, body: Any) -> Response:
    body = body if isinstance(body, dict) else {}
    account = _new_account(fake, body.get("user_id"), body.get("auth_config_id"))
    if isinstance(account, Response):
        return account
    token = fake._register_link(account["id"], body.get("callback_url"))
    return JSONResponse(
        {
            "connected_account_id": account["id"],
            "link_token": token,
            "redirect_url": _link_url(request, token),
            "expires_at": "2099-01-01T00:00:00Z",
        },
        status_code=201,
    )


async def _initiate_legacy(fake: ComposioFake, request: Request, body: Any) -> Response:
    body = body if isinstance(body, dict) else {}
    config_id = (body.get("auth_config") or {}).get("id")
    connection = body.get("connection") or {}
    account = _new_account(fake, connection.get("user_id"), config_id)
    if isinstance(account, Response):
        return account
    token = fake._register_link(account["id"], connection.get("callback_url"))
    redirect_url = _link_url(request, token)
    val = {"status": "INITIATED", "redirectUrl": redirect_url}
    return JSONResponse(
        {
            "id": account["id"],
            "status": "INITIATED",
            "redirect_url": redirect_url,
            "connection_data": {"authScheme": account["auth_config"]["auth_scheme"], "val": val},
        },
        status_code=201,
    )


def _link_page_endpoint(fake: ComposioFake) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        link = fake._links.get(request.path_params["token"])
        account = fake.accounts.get(link[0]) if link else None
        _record(fake, request, "", None, 404 if account is None else 200)
        if link is None or account is None:
            return HTMLResponse("<p>This link is not valid.</p>", status_code=404)
        fake.complete_link(account["id"])
        callback = link[1]
        if callback:
            query = urlencode({"status": "success", "connected_account_id": account["id"]})
            return RedirectResponse(
                f"{callback}{'&' if '?' in callback else '?'}{query}", status_code=302
            )
        return HTMLResponse(f"<p>Connected account {account['id']} is {account['status']}.</p>")

    return endpoint


_API_ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/tools", _list_tools),
    ("GET", "/tools/{slug}", _get_tool),
    ("POST", "/tools/execute/{slug}", _execute_tool),
    ("GET", "/auth_configs", _list_auth_configs),
    ("GET", "/connected_accounts", _list_accounts),
    ("POST", "/connected_accounts", _initiate_legacy),
    ("POST", "/connected_accounts/link", _create_link),
    ("GET", "/connected_accounts/{account_id}", _get_account),
    ("DELETE", "/connected_accounts/{account_id}", _delete_account),
]
