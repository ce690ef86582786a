"""The authorization server of `fakes.mcp_oauth`: token state and the Starlette app."""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from .mcp_oauth import MCPOAuthFake

AUTH_METHODS = ("client_secret_post", "client_secret_basic", "none")
OTHER_AUDIENCE = "http://127.0.0.1:1/another-mcp-server"
_CODE_TTL_S = 300
_NO_STORE = {"cache-control": "no-store", "pragma": "no-cache"}


@dataclass(frozen=True, slots=True)
class Client:
    client_id: str
    secret: str | None
    auth_method: str
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Grant:
    """What a code, access token or refresh token stands for."""

    client_id: str
    scopes: tuple[str, ...]
    resource: str | None
    expires_at: float | None = None
    revoked: bool = False
    redirect_uri: str = ""
    code_challenge: str = ""

    def live(self) -> bool:
        return not self.revoked and (self.expires_at is None or time.time() < self.expires_at)


@dataclass
class TokenStore:
    """Clients, codes and tokens, shared by both servers (each on its own thread)."""

    clients: dict[str, Client] = field(default_factory=dict)
    codes: dict[str, Grant] = field(default_factory=dict)
    access: dict[str, Grant] = field(default_factory=dict)
    refresh: dict[str, Grant] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def put(self, table: dict[str, Any], key: str, value: Any) -> None:
        with self.lock:
            table[key] = value

    def pop(self, table: dict[str, Any], key: str) -> Any:
        with self.lock:
            return table.pop(key, None)

    def _mark_all(self, table: dict[str, Grant], **changes: Any) -> int:
        with self.lock:
            for key, grant in table.items():
                table[key] = replace(grant, **changes)
            return len(table)

    def expire_access_tokens(self) -> int:
        return self._mark_all(self.access, expires_at=0.0)

    def revoke_access_tokens(self) -> int:
        return self._mark_all(self.access, revoked=True)

    def revoke_refresh_tokens(self) -> int:
        return self._mark_all(self.refresh, revoked=True)


class OAuthError(Exception):
    """An RFC 6749 §5.2 error: rendered as JSON with `status`."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error, self.description, self.status = error, description, status

    def response(self) -> JSONResponse:
        body = {"error": self.error, "error_description": self.description}
        return JSONResponse(body, status_code=self.status, headers=_NO_STORE)


def build_as_app(fake: MCPOAuthFake) -> Starlette:
    def bind(
        handler: Callable[[MCPOAuthFake, Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(fake, request)

        return endpoint

    return Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", bind(_metadata), methods=["GET"]),
            Route("/register", bind(_register), methods=["POST"]),
            Route("/authorize", bind(_authorize), methods=["GET"]),
            Route("/token", bind(_token), methods=["POST"]),
            Route("/revoke", bind(_revoke), methods=["POST"]),
        ]
    )


async def _metadata(fake: MCPOAuthFake, request: Request) -> Response:
    issuer = fake.issuer
    fake.record("as", "metadata", 200)
    return JSONResponse(
        {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
            "revocation_endpoint": f"{issuer}/revoke",
            "scopes_supported": fake.known_scopes(),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
            "revocation_endpoint_auth_methods_supported": list(AUTH_METHODS),
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
        }
    )


# ---- registration (RFC 7591) ---------------------------------------------------------


async def _register(fake: MCPOAuthFake, request: Request) -> Response:
    try:
        body = await request.json()
        client = _new_client(fake, body if isinstance(body, dict) else {})
    except ValueError:
        fake.record("as", "register", 400, error="invalid_client_metadata")
        return OAuthError(
            "invalid_client_metadata", "the request body is not a JSON object"
        ).response()
    except OAuthError as err:
        fake.record("as", "register", err.status, error=err.error)
        return err.response()
    fake.store.put(fake.store.clients, client.client_id, client)
    fake.record("as", "register", 201, client_id=client.client_id)
    info = {
        **body,
        "client_id": client.client_id,
        "client_id_issued_at": int(time.time()),
        "token_endpoint_auth_method": client.auth_method,
    }
    if client.secret is not None:
        info |= {"client_secret": client.secret, "client_secret_expires_at": 0}
    return JSONResponse(info, status_code=201, headers=_NO_STORE)


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _new_client(fake: MCPOAuthFake, body: dict[str, Any]) -> Client:
    redirect_uris = body.get("redirect_uris")
    if (
        not isinstance(redirect_uris, list)
        or not redirect_uris
        or not all(map(_is_text, redirect_uris))
    ):
        raise OAuthError("invalid_redirect_uri", "redirect_uris must be a non-empty list of URLs")
    method = body.get("token_endpoint_auth_method") or "client_secret_post"
    if method not in AUTH_METHODS:
        valid = list(AUTH_METHODS)
        raise OAuthError(
            "invalid_client_metadata", f"token_endpoint_auth_method must be one of {valid}"
        )
    grant_types = tuple(body.get("grant_types") or ("authorization_code", "refresh_token"))
    if "authorization_code" not in grant_types:
        raise OAuthError("invalid_client_metadata", "grant_types must include authorization_code")
    unknown = set(str(body.get("scope") or "").split()) - set(fake.known_scopes())
    if unknown:
        raise OAuthError("invalid_client_metadata", f"unknown scopes {sorted(unknown)}")
    secret = None if method == "none" else secrets.token_hex(32)
    return Client(
        # Numbered, not random: a recording that registers a client is the same every time.
        f"client_{len(fake.store.clients) + 1:04d}",
        secret,
        method,
        tuple(redirect_uris),
        grant_types,
    )


# ---- authorization endpoint ----------------------------------------------------------


async def _authorize(fake: MCPOAuthFake, request: Request) -> Response:
    query = request.query_params
    client = fake.store.clients.get(query.get("client_id", ""))
    redirect_uri = query.get("redirect_uri", "")
    if client is None or redirect_uri not in client.redirect_uris:
        # Never redirect to an unverified URI (RFC 6749 §4.1.2.1): answer directly.
        fake.record("as", "authorize", 400, error="invalid_request")
        return OAuthError(
            "invalid_request", "unknown client_id or unregistered redirect_uri"
        ).response()
    refusal = _authorization_refusal(fake, query)
    if refusal is not None:
        fake.record("as", "authorize", 302, error=refusal[0])
        return _redirect(
            redirect_uri, {"error": refusal[0], "error_description": refusal[1]}, query, fake
        )
    code = secrets.token_urlsafe(24)
    grant = Grant(
        client_id=client.client_id,
        scopes=_requested_scopes(fake, query.get("scope")),
        resource=query.get("resource"),
        expires_at=time.time() + _CODE_TTL_S,
        redirect_uri=redirect_uri,
        code_challenge=query.get("code_challenge", ""),
    )
    fake.store.put(fake.store.codes, code, grant)
    fake.record("as", "authorize", 302, scope=" ".join(grant.scopes), resource=grant.resource)
    return _redirect(redirect_uri, {"code": code}, query, fake)


def _authorization_refusal(fake: MCPOAuthFake, query: Any) -> tuple[str, str] | None:
    if query.get("response_type") != "code":
        return "unsupported_response_type", "only response_type=code is supported"
    if not query.get("code_challenge") or query.get("code_challenge_method") != "S256":
        return "invalid_request", "PKCE with code_challenge_method=S256 is required"
    unknown = set((query.get("scope") or "").split()) - set(fake.known_scopes())
    if unknown:
        return "invalid_scope", f"unknown scopes {sorted(unknown)}"
    if fake.deny_consent:
        return "access_denied", "the user declined (deny_consent is set)"
    return None


def _requested_scopes(fake: MCPOAuthFake, scope: str | None) -> tuple[str, ...]:
    return tuple(scope.split()) if scope else tuple(fake.script.base_scopes)


def _redirect(
    redirect_uri: str, params: dict[str, str], query: Any, fake: MCPOAuthFake
) -> Response:
    params = {**params, "iss": fake.issuer}
    if query.get("state") is not None:
        params["state"] = query["state"]
    separator = "&" if "?" in redirect_uri else "?"
    location = f"{redirect_uri}{separator}{urlencode(params)}"
    return RedirectResponse(location, status_code=302, headers=_NO_STORE)


# ---- token endpoint ------------------------------------------------------------------


async def _token(fake: MCPOAuthFake, request: Request) -> Response:
    form = dict(await request.form())
    grant_type = str(form.get("grant_type", ""))
    try:
        client = _authenticate(fake, request, form)
        handler = _GRANTS.get(grant_type)
        if handler is None or grant_type not in client.grant_types:
            raise OAuthError(
                "unsupported_grant_type", f"grant_type {grant_type!r} is not available"
            )
        body = handler(fake, client, form)
    except OAuthError as err:
        fake.record("as", "token", err.status, grant_type=grant_type, error=err.error)
        return err.response()
    fake.record("as", "token", 200, grant_type=grant_type, scope=body["scope"])
    return JSONResponse(body, headers=_NO_STORE)


def _authenticate(fake: MCPOAuthFake, request: Request, form: dict[str, Any]) -> Client:
    client_id, secret = form.get("client_id"), form.get("client_secret")
    basic = request.headers.get("authorization", "")
    if basic.lower().startswith("basic "):
        try:
            decoded = base64.b64decode(basic[6:], validate=True).decode()
        except ValueError:
            raise OAuthError("invalid_client", "malformed Basic credentials", status=401) from None
        client_id, _, secret = (unquote(part) for part in decoded.partition(":"))
    client = fake.store.clients.get(str(client_id or ""))
    if client is None:
        raise OAuthError("invalid_client", "unknown client", status=401)
    if client.auth_method != "none" and not secrets.compare_digest(
        str(secret or ""), client.secret or ""
    ):
        raise OAuthError("invalid_client", "client authentication failed", status=401)
    return client


def _exchange_code(fake: MCPOAuthFake, client: Client, form: dict[str, Any]) -> dict[str, Any]:
    grant = fake.store.pop(fake.store.codes, str(form.get("code", "")))
    if grant is None or not grant.live() or grant.client_id != client.client_id:
        raise OAuthError("invalid_grant", "authorization code does not exist or has expired")
    if form.get("redirect_uri") != grant.redirect_uri:
        raise OAuthError("invalid_request", "redirect_uri does not match the authorization request")
    if _s256(str(form.get("code_verifier", ""))) != grant.code_challenge:
        raise OAuthError("invalid_grant", "incorrect code_verifier")
    if form.get("resource") not in (None, grant.resource):
        raise OAuthError("invalid_target", "resource differs from the authorization request")
    return _mint(fake, grant)


def _exchange_refresh(fake: MCPOAuthFake, client: Client, form: dict[str, Any]) -> dict[str, Any]:
    token = str(form.get("refresh_token", ""))
    grant = fake.store.refresh.get(token)
    if grant is None or not grant.live() or grant.client_id != client.client_id:
        raise OAuthError(
            "invalid_grant", "refresh token does not exist, has expired or was revoked"
        )
    scopes = tuple(str(form["scope"]).split()) if form.get("scope") else grant.scopes
    if not set(scopes) <= set(grant.scopes):
        raise OAuthError("invalid_scope", "cannot widen the scope on refresh")
    if form.get("resource") not in (None, grant.resource):
        raise OAuthError("invalid_target", "resource differs from the original grant")
    fake.store.pop(fake.store.refresh, token)  # rotation: a refresh token works once
    return _mint(fake, replace(grant, scopes=scopes))


_GRANTS = {"authorization_code": _exchange_code, "refresh_token": _exchange_refresh}


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _mint(fake: MCPOAuthFake, grant: Grant) -> dict[str, Any]:
    ttl = fake.access_token_ttl_s
    audience = OTHER_AUDIENCE if fake.wrong_audience else grant.resource
    access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    fake.store.put(
        fake.store.access, access, replace(grant, resource=audience, expires_at=time.time() + ttl)
    )
    fake.store.put(fake.store.refresh, refresh, replace(grant, expires_at=None))
    return {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ttl,
        "scope": " ".join(grant.scopes),
        "refresh_token": refresh,
    }


# ---- revocation (RFC 7009) -----------------------------------------------------------


async def _revoke(fake: MCPOAuthFake, request: Request) -> Response:
    token = str((await request.form()).get("token", ""))
    store = fake.store
    for table in (store.access, store.refresh):
        with store.lock:
            if token in table:
                table[token] = replace(table[token], revoked=True)
    # 200 even for unknown tokens, so revocation reveals nothing (RFC 7009 §2.2).
    fake.record("as", "revoke", 200)
    return Response(status_code=200)
