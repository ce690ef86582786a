"""An OAuth 2.1 authorization server plus an OAuth-protected MCP server, on loopback.

The `mcp` SDK's own OAuth client (``OAuthClientProvider``, mcp 2.3) completes the real flow
against it with no browser:

* **Authorization server** (its own port; ``fake.issuer``): RFC 8414 metadata at
  ``/.well-known/oauth-authorization-server`` (with ``code_challenge_methods_supported``
  and RFC 9207 ``iss``), RFC 7591 dynamic registration at ``/register``, ``/authorize``
  that approves at once by redirecting to the client's ``redirect_uri`` with
  ``code``/``state``/``iss``, ``/token`` (authorization code with PKCE S256 and the
  RFC 8707 ``resource``; refresh with rotation; client auth by ``client_secret_post``,
  ``client_secret_basic`` or ``none``) and ``/revoke`` (RFC 7009). Errors are RFC 6749
  §5.2 JSON bodies.
* **Resource server** (another port; ``fake.mcp_url``): RFC 9728 metadata at
  ``/.well-known/oauth-protected-resource/mcp`` (and at the root well-known URL) and
  streamable-HTTP MCP at ``/mcp``, served by the SDK's low-level ``Server`` behind a bearer
  gate. No or a bad token: 401 with ``WWW-Authenticate: Bearer … resource_metadata="…"``.
  A token for another audience: 401. A token without a tool's scope: 403
  ``error="insufficient_scope", scope="<all scopes the call needs>"``.

Tools come from the scenario's `MCPScript` (a case's ``input/mcp.yaml``)::

    schema_version: 1
    server_name: files
    base_scopes: [mcp:read]          # every MCP request needs these; advertised in PRM
    access_token_ttl_s: 3600
    tools:
      - name: read_file
        description: Read a file.
        input_schema:
          type: object
          properties: {path: {type: string}}
          required: [path]
        results:                     # first match with uses left; default: empty text
          - when_args: {path: missing.txt}
            text: No such file
            is_error: true
          - text: hello world
      - name: delete_file
        required_scopes: [mcp:write] # beyond base_scopes: calling it steps up
        results: [{text: deleted, structured: {deleted: true}}]

Fault switches, settable while it runs: ``access_token_ttl_s``, ``wrong_audience``,
``deny_consent``, `expire_access_tokens`, `revoke_access_tokens`, `revoke_refresh_tokens`,
`require_scope`, `fail_mcp` (429/5xx on MCP requests). `issue_token` mints a token
without the flow. `events` records every request to either server; `count` queries it.

For clients: `headless_oauth_provider` builds the SDK's ``OAuthClientProvider`` with a
redirect handler that follows ``/authorize`` itself (no browser, nothing listening on the
redirect URI), and `InMemoryTokenStorage` is a ready ``TokenStorage``.

Not covered: OpenID Connect discovery and ID tokens, Client ID Metadata Documents,
pre-registered clients' secrets rotation, JWT access tokens and introspection, private_key_jwt,
the client-credentials grant, a consent UI, and MCP resources/prompts (tools only).
"""

from __future__ import annotations

import functools
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from ._script import ScriptSource, load_script

if TYPE_CHECKING:
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

    from .server import ServedApp

TokenEndpointAuthMethod = Literal[
    "none", "client_secret_post", "client_secret_basic", "private_key_jwt"
]

__all__ = [
    "DEFAULT_REDIRECT_URI",
    "HeadlessAuthorizationError",
    "HeadlessAuthorizer",
    "InMemoryTokenStorage",
    "MCPOAuthFake",
    "MCPScript",
    "MCPToolResult",
    "MCPToolSpec",
    "RecordedOAuthEvent",
    "headless_oauth_provider",
]

DEFAULT_REDIRECT_URI = "http://127.0.0.1:53682/callback"
"""Registered by `headless_oauth_provider`; nothing needs to listen there."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MCPToolResult(_Model):
    when_args: dict[str, Any] | None = None
    """Used only when the call's arguments contain these keys with these values."""
    times: int | None = Field(default=None, ge=1)
    """Maximum uses (omit for unlimited)."""
    text: str = ""
    """Text content of the result."""
    structured: dict[str, Any] | None = None
    """`structuredContent` of the result."""
    is_error: bool = False
    """A tool-level failure (`isError: true`), not a protocol error."""


class MCPToolSpec(_Model):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}
    required_scopes: list[str] = []
    """Scopes needed to call this tool, on top of `base_scopes`."""
    results: list[MCPToolResult] = []


class MCPScript(_Model):
    schema_version: Literal[1] = 1
    server_name: str = "fake-mcp"
    base_scopes: list[str] = ["mcp:read"]
    """Needed for every MCP request; what the resource metadata advertises."""
    access_token_ttl_s: int = Field(default=3600, ge=1)
    tools: list[MCPToolSpec] = []

    @classmethod
    def load(cls, source: ScriptSource) -> MCPScript:
        """From a YAML path, a mapping or a model; raises `ScriptError` naming the field."""
        return load_script(cls, source, what="MCP script")


@dataclass(frozen=True, slots=True)
class RecordedOAuthEvent:
    """One request to the authorization server (``as``) or the resource server (``rs``)."""

    server: Literal["as", "rs"]
    kind: str
    """as: metadata, register, authorize, token, revoke; rs: prm, mcp."""
    status: int
    detail: dict[str, Any] = field(default_factory=dict)
    """E.g. ``grant_type`` for token, ``method``/``tool`` for mcp, ``error`` when refused."""


@dataclass(frozen=True, slots=True)
class _McpFailure:
    status: int
    method: str | None
    retry_after_s: int | None


class MCPOAuthFake:
    """Both servers, their shared token state, the fault switches and the event record."""

    def __init__(self, script: ScriptSource | None = None) -> None:
        self.script = MCPScript.load(script if script is not None else {})
        self.access_token_ttl_s: int = self.script.access_token_ttl_s
        """Lifetime of access tokens minted from now on (sent as `expires_in`)."""
        self.wrong_audience = False
        """Mint tokens bound to another resource, so the MCP server rejects them."""
        self.deny_consent = False
        """`/authorize` redirects back with ``error=access_denied``."""
        self.events: list[RecordedOAuthEvent] = []
        self._tool_scopes = {t.name: list(t.required_scopes) for t in self.script.tools}
        self._mcp_failures: list[_McpFailure] = []
        self._lock = threading.Lock()
        from ._mcp_as import TokenStore

        self.store = TokenStore()
        self._result_uses: dict[tuple[str, int], int] = {}
        self._as: ServedApp | None = None
        self._rs: ServedApp | None = None

    # ---- lifecycle ----

    def start(self) -> MCPOAuthFake:
        from ._mcp_as import build_as_app
        from ._mcp_rs import build_rs_app
        from .server import ServedApp

        self._as = ServedApp(build_as_app(self), name="fake-oauth-as").start()
        try:
            self._rs = ServedApp(build_rs_app(self), name="fake-mcp-rs").start()
        except BaseException:
            self._as.stop()
            raise
        return self

    def stop(self) -> None:
        servers = [s for s in (self._rs, self._as) if s is not None]
        for served in servers:
            served.signal_stop()
        for served in servers:
            served.stop()
        self._as = self._rs = None

    def __enter__(self) -> MCPOAuthFake:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def issuer(self) -> str:
        """The authorization server's issuer (no trailing slash, used verbatim everywhere)."""
        return self._served(self._as).url

    @property
    def resource_url(self) -> str:
        """The resource server's origin."""
        return self._served(self._rs).url

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint, which is also the token audience (RFC 8707 resource)."""
        return f"{self.resource_url}/mcp"

    @staticmethod
    def _served(served: ServedApp | None) -> ServedApp:
        if served is None:
            raise RuntimeError("MCPOAuthFake is not started; use start() or a with block")
        return served

    # ---- fault switches ----

    def expire_access_tokens(self) -> int:
        """Every access token issued so far is expired server-side; returns how many."""
        return self.store.expire_access_tokens()

    def revoke_access_tokens(self) -> int:
        return self.store.revoke_access_tokens()

    def revoke_refresh_tokens(self) -> int:
        """Refresh grants with tokens issued so far fail with ``invalid_grant``."""
        return self.store.revoke_refresh_tokens()

    def require_scope(self, tool: str, *scopes: str) -> None:
        """Calling `tool` needs `scopes` too (on top of the script's); others get a 403."""
        with self._lock:
            self._tool_scopes[tool] = sorted({*self._tool_scopes.get(tool, []), *scopes})

    def fail_mcp(
        self,
        status: int,
        *,
        times: int = 1,
        method: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        """The next `times` authorized MCP requests (of JSON-RPC `method`, e.g. ``tools/call``)
        get HTTP `status` (429 or 5xx) instead of reaching the MCP server."""
        with self._lock:
            self._mcp_failures.extend([_McpFailure(status, method, retry_after_s)] * times)

    def issue_token(
        self,
        scopes: list[str] | None = None,
        *,
        audience: str | None = None,
        ttl_s: int | None = None,
    ) -> str:
        """Mint an access token without the flow (for raw protocol checks or a client given a
        static token); by default for this MCP server with `base_scopes`."""
        from ._mcp_as import Grant

        token = secrets.token_urlsafe(24)
        grant = Grant(
            client_id="issued-directly",
            scopes=tuple(scopes if scopes is not None else self.script.base_scopes),
            resource=audience or self.mcp_url,
            expires_at=time.time() + (ttl_s or self.access_token_ttl_s),
        )
        self.store.put(self.store.access, token, grant)
        return token

    # ---- views ----

    def count(self, kind: str, **detail: Any) -> int:
        """How many recorded events are of `kind` with these detail values."""
        return sum(
            1
            for e in list(self.events)
            if e.kind == kind and all(e.detail.get(k) == v for k, v in detail.items())
        )

    # ---- used by the apps ----

    def required_scopes(self, tool: str | None = None) -> list[str]:
        with self._lock:
            extra = self._tool_scopes.get(tool, []) if tool else []
        return list(dict.fromkeys([*self.script.base_scopes, *extra]))

    def known_scopes(self) -> list[str]:
        with self._lock:
            extra = [s for scopes in self._tool_scopes.values() for s in scopes]
        return list(dict.fromkeys([*self.script.base_scopes, *extra, "offline_access"]))

    def take_mcp_failure(self, methods: list[str]) -> _McpFailure | None:
        with self._lock:
            for i, failure in enumerate(self._mcp_failures):
                if failure.method is None or failure.method in methods:
                    return self._mcp_failures.pop(i)
        return None

    def pick_result(self, tool: MCPToolSpec, arguments: dict[str, Any]) -> MCPToolResult:
        with self._lock:
            for i, result in enumerate(tool.results):
                used = self._result_uses.get((tool.name, i), 0)
                if result.times is not None and used >= result.times:
                    continue
                expected = result.when_args or {}
                if all(k in arguments and arguments[k] == v for k, v in expected.items()):
                    self._result_uses[(tool.name, i)] = used + 1
                    return result
        return MCPToolResult()

    def record(self, server: Literal["as", "rs"], kind: str, status: int, **detail: Any) -> None:
        self.events.append(RecordedOAuthEvent(server, kind, status, detail))


# ---- client side: headless authorization ---------------------------------------------


class HeadlessAuthorizationError(RuntimeError):
    """The authorization endpoint did not redirect back with a code."""


class HeadlessAuthorizer:
    """The redirect and callback handlers of `OAuthClientProvider`, without a browser.

    `redirect` requests the authorization URL itself, on its own HTTP client (reusing the
    provider's authed client would re-enter the provider's lock and deadlock), and keeps
    the ``code``/``state``/``iss`` from the redirect; `callback` hands them back. It works
    with any authorization server that approves without user interaction, like this fake.
    """

    def __init__(self, *, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self.authorizations = 0
        """How many times the flow went through `/authorize`."""
        self._pending: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        import httpx2
        from mcp.shared.auth import AuthorizationCodeResult

        async with httpx2.AsyncClient(
            follow_redirects=False, timeout=self.timeout_s, verify=_tls()
        ) as http:
            response = await http.get(authorization_url)
        self.authorizations += 1
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            raise HeadlessAuthorizationError(
                f"authorization endpoint answered {response.status_code} instead of redirecting "
                "back; headless approval needs a server that approves without a person"
            )
        query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        if "error" in query:
            raise HeadlessAuthorizationError(
                (
                    f"authorization refused: {query['error']}: {query.get('error_description', '')}"
                ).rstrip(": ")
            )
        self._pending = AuthorizationCodeResult(
            code=query.get("code", ""), state=query.get("state"), iss=query.get("iss")
        )

    async def callback(self) -> AuthorizationCodeResult:
        if self._pending is None:
            raise HeadlessAuthorizationError("callback before any authorization redirect")
        result, self._pending = self._pending, None
        return result


@functools.cache
def _tls() -> Any:
    """One default TLS context for all authorizers: building one costs ~80 ms of CPU."""
    import httpx2

    return httpx2.create_ssl_context()


class InMemoryTokenStorage:
    """The SDK's ``TokenStorage`` protocol, kept in memory (one per client identity)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def headless_oauth_provider(
    server_url: str,
    *,
    scopes: str | None = None,
    storage: Any = None,
    client_name: str = "pytest-nodeval",
    redirect_uri: str = DEFAULT_REDIRECT_URI,
    token_endpoint_auth_method: TokenEndpointAuthMethod | None = None,
    authorizer: HeadlessAuthorizer | None = None,
) -> OAuthClientProvider:
    """The mcp SDK's ``OAuthClientProvider`` for `server_url` (an MCP endpoint), wired to
    authorize headless. Use it as the ``auth`` of the ``httpx2.AsyncClient`` given to
    ``streamable_http_client``. `scopes` is a space-separated initial scope request (by
    default the client asks for what the server challenges or advertises)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata
    from pydantic import AnyUrl

    authorizer = authorizer or HeadlessAuthorizer()
    metadata = OAuthClientMetadata(
        client_name=client_name,
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scopes,
        token_endpoint_auth_method=token_endpoint_auth_method,
    )
    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=storage if storage is not None else InMemoryTokenStorage(),
        redirect_handler=authorizer.redirect,
        callback_handler=authorizer.callback,
    )
