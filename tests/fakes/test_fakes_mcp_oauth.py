"""Contract tests: the `mcp` SDK's OAuth client and MCP client against `fakes.mcp_oauth`."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from pytest_nodeval_fakes import ScriptError
from pytest_nodeval_fakes.mcp_oauth import (
    HeadlessAuthorizationError,
    HeadlessAuthorizer,
    InMemoryTokenStorage,
    MCPOAuthFake,
    MCPScript,
    headless_oauth_provider,
)

T = TypeVar("T")
SCRIPT: dict[str, Any] = {
    "schema_version": 1,
    "server_name": "files",
    "base_scopes": ["mcp:read"],
    "tools": [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
            "results": [
                {"when_args": {"path": "missing.txt"}, "text": "No such file", "is_error": True},
                {"text": "hello world"},
            ],
        },
        {
            "name": "delete_file",
            "required_scopes": ["mcp:write"],
            "results": [{"text": "deleted", "structured": {"deleted": True}}],
        },
    ],
}


@pytest.fixture
def mcp_fake() -> Iterator[MCPOAuthFake]:
    with MCPOAuthFake(SCRIPT) as fake:
        yield fake


def run_session(
    fake: MCPOAuthFake,
    body: Callable[[Client], Awaitable[T]],
    *,
    storage: InMemoryTokenStorage | None = None,
    authorizer: HeadlessAuthorizer | None = None,
) -> T:
    """One MCP session through the SDK's OAuth provider, bounded so a bug cannot hang."""

    async def session() -> T:
        provider = headless_oauth_provider(
            fake.mcp_url, storage=storage or InMemoryTokenStorage(), authorizer=authorizer
        )
        # verify=False: the fake is plain http, and a TLS context costs ~80 ms of CPU to build.
        async with (
            httpx2.AsyncClient(auth=provider, timeout=10.0, verify=False) as http,
            Client(streamable_http_client(fake.mcp_url, http_client=http)) as client,
        ):
            return await body(client)

    return asyncio.run(asyncio.wait_for(session(), 20))


def leaves(error: BaseException) -> list[BaseException]:
    """The non-group exceptions inside (nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


async def read(client: Client, path: str = "notes.txt") -> str:
    result = await client.call_tool("read_file", {"path": path})
    return result.content[0].text


def test_full_flow_without_a_browser_then_list_and_call(mcp_fake: MCPOAuthFake) -> None:
    async def body(client: Client) -> tuple[list[str], str, Any, Any]:
        listed = await client.list_tools()
        missing = await client.call_tool("read_file", {"path": "missing.txt"})
        return (
            [t.name for t in listed.tools],
            await read(client),
            missing,
            listed.tools[0].input_schema,
        )

    storage = InMemoryTokenStorage()
    names, text, missing, schema = run_session(mcp_fake, body, storage=storage)
    assert names == ["read_file", "delete_file"]
    assert text == "hello world"
    assert missing.is_error and missing.content[0].text == "No such file"
    assert schema["required"] == ["path"]
    assert [mcp_fake.count(k) for k in ("register", "authorize", "prm", "metadata")] == [1, 1, 1, 1]
    assert mcp_fake.count("token", grant_type="authorization_code") == 1
    authorize = next(e for e in mcp_fake.events if e.kind == "authorize")
    assert authorize.detail["resource"] == mcp_fake.mcp_url
    assert storage.tokens is not None and "mcp:read" in (storage.tokens.scope or "").split()
    assert storage.client_info is not None and storage.client_info.client_id.startswith("client_")


def test_expired_access_token_is_refreshed_without_reauthorizing(mcp_fake: MCPOAuthFake) -> None:
    mcp_fake.access_token_ttl_s = 1
    authorizer = HeadlessAuthorizer()

    async def body(client: Client) -> tuple[str, str]:
        first = await read(client)
        await asyncio.sleep(1.1)  # the client tracks expiry from expires_in and refreshes first
        return first, await read(client)

    assert run_session(mcp_fake, body, authorizer=authorizer) == ("hello world", "hello world")
    assert mcp_fake.count("token", grant_type="refresh_token", error=None) >= 1
    assert authorizer.authorizations == 1


def test_revoked_refresh_token_leads_to_full_reauthorization(mcp_fake: MCPOAuthFake) -> None:
    mcp_fake.access_token_ttl_s = 1
    authorizer = HeadlessAuthorizer()

    async def body(client: Client) -> str:
        await read(client)
        mcp_fake.revoke_refresh_tokens()
        await asyncio.sleep(1.1)
        return await read(client)

    assert run_session(mcp_fake, body, authorizer=authorizer) == "hello world"
    assert mcp_fake.count("token", grant_type="refresh_token", error="invalid_grant") == 1
    assert authorizer.authorizations == 2
    assert mcp_fake.count("register") == 1, "the registered client should be reused"


@pytest.mark.parametrize("fault", ["expire_access_tokens", "revoke_access_tokens"])
def test_server_side_invalid_token_gets_401_and_reauthorization(
    mcp_fake: MCPOAuthFake, fault: str
) -> None:
    async def body(client: Client) -> str:
        await read(client)
        assert getattr(mcp_fake, fault)() == 1
        return await read(client)

    assert run_session(mcp_fake, body) == "hello world"
    assert mcp_fake.count("mcp", error="invalid_token") == 1
    assert mcp_fake.count("authorize") == 2


def test_insufficient_scope_steps_up_to_the_challenged_scope(mcp_fake: MCPOAuthFake) -> None:
    async def body(client: Client) -> tuple[Any, str]:
        deleted = await client.call_tool("delete_file", {"path": "notes.txt"})
        mcp_fake.require_scope("read_file", "files:admin")  # switched on at runtime
        return deleted, await read(client)

    deleted, text = run_session(mcp_fake, body)
    assert deleted.structured_content == {"deleted": True} and text == "hello world"
    assert mcp_fake.count("mcp", error="insufficient_scope") == 2
    scopes = [set(e.detail["scope"].split()) for e in mcp_fake.events if e.kind == "authorize"]
    assert scopes[0] == {"mcp:read", "offline_access"}
    assert scopes[1] >= {"mcp:read", "mcp:write"}
    assert scopes[2] >= {"mcp:read", "mcp:write", "files:admin"}


def test_challenges_name_the_scope_metadata_and_audience(
    mcp_fake: MCPOAuthFake, http: httpx2.Client
) -> None:
    token = mcp_fake.issue_token(["mcp:read"])
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "delete_file"}}
    response = http.post(mcp_fake.mcp_url, json=call, headers=_mcp_headers(token))
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="mcp:read mcp:write"' in challenge
    metadata_url = f"{mcp_fake.resource_url}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata_url}"' in challenge
    foreign = mcp_fake.issue_token(["mcp:read", "mcp:write"], audience="http://127.0.0.1:9/other")
    rejected = http.post(mcp_fake.mcp_url, json=call, headers=_mcp_headers(foreign))
    assert (
        rejected.status_code == 401
        and 'error="invalid_token"' in rejected.headers["www-authenticate"]
    )
    assert mcp_fake.count("mcp", error="wrong_audience") == 1


def test_wrong_audience_token_is_rejected(mcp_fake: MCPOAuthFake) -> None:
    mcp_fake.wrong_audience = True
    with pytest.raises(BaseException) as err:
        run_session(mcp_fake, read)
    assert any(isinstance(e, MCPError) for e in leaves(err.value)), err.value
    assert mcp_fake.count("mcp", error="wrong_audience") >= 2  # rejected again after re-authorizing
    assert mcp_fake.count("mcp", method="tools/call") == 0


def test_rate_limit_and_server_errors_surface_as_mcp_errors(mcp_fake: MCPOAuthFake) -> None:
    async def body(client: Client) -> list[str]:
        outcomes = []
        for status in (429, 503):
            mcp_fake.fail_mcp(status, method="tools/call", retry_after_s=1)
            try:
                await read(client)
                outcomes.append("ok")
            except MCPError as error:
                outcomes.append(f"MCPError {error}")
        return [*outcomes, await read(client)]

    first, second, after = run_session(mcp_fake, body)
    assert "HTTP 429" in first and "HTTP 503" in second  # no retry: Retry-After is ignored
    assert after == "hello world"
    assert mcp_fake.count("mcp", error="injected_429") == 1


def test_stored_tokens_are_reused_by_a_new_client(mcp_fake: MCPOAuthFake) -> None:
    storage = InMemoryTokenStorage()
    run_session(mcp_fake, read, storage=storage)
    assert run_session(mcp_fake, read, storage=storage) == "hello world"
    assert (mcp_fake.count("register"), mcp_fake.count("authorize")) == (1, 1)


def test_declined_consent_raises_a_clear_error(mcp_fake: MCPOAuthFake) -> None:
    mcp_fake.deny_consent = True
    with pytest.raises(BaseException) as err:
        run_session(mcp_fake, read)
    [refusal] = [e for e in leaves(err.value) if isinstance(e, HeadlessAuthorizationError)]
    assert "access_denied" in str(refusal)


def test_authorization_server_checks_pkce_and_client(
    mcp_fake: MCPOAuthFake, http: httpx2.Client
) -> None:
    issuer = mcp_fake.issuer
    metadata = http.get(f"{issuer}/.well-known/oauth-authorization-server").json()
    assert metadata["issuer"] == issuer and metadata["code_challenge_methods_supported"] == ["S256"]
    prm = http.get(f"{mcp_fake.resource_url}/.well-known/oauth-protected-resource/mcp").json()
    assert prm == {**prm, "resource": mcp_fake.mcp_url, "authorization_servers": [issuer]}
    unauthenticated = http.post(
        mcp_fake.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
    )
    assert unauthenticated.status_code == 401
    challenge = unauthenticated.headers["www-authenticate"]
    # No error= without a token
    assert challenge.startswith('Bearer scope="mcp:read", resource_metadata=')

    client = http.post(
        f"{issuer}/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"]}
    ).json()
    verifier = "v" * 64
    code = _authorize(http, mcp_fake, client["client_id"], verifier)
    exchange = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": "http://127.0.0.1:9/cb",
        "client_id": client["client_id"],
        "resource": mcp_fake.mcp_url,
    }
    exchange["code_verifier"] = verifier
    wrong_secret = http.post(f"{issuer}/token", data={**exchange, "client_secret": "no"})
    assert (wrong_secret.status_code, wrong_secret.json()["error"]) == (401, "invalid_client")
    exchange["client_secret"] = client["client_secret"]
    bad_pkce = http.post(f"{issuer}/token", data={**exchange, "code_verifier": "x" * 64})
    assert (bad_pkce.status_code, bad_pkce.json()["error"]) == (400, "invalid_grant")
    assert bad_pkce.headers["cache-control"] == "no-store"


def test_mcp_script_yaml_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text("tools:\n  - name: t\n    results: [{text: ok, times: 0}]\n")
    with pytest.raises(ScriptError, match=r"tools\.0\.results\.0\.times"):
        MCPScript.load(path)
    path.write_text("schema_version: 1\ntools: [{name: t, required_scopes: [a:b]}]\n")
    assert MCPScript.load(path).tools[0].required_scopes == ["a:b"]


# ---- helpers for the raw-HTTP checks --------------------------------------------------


def _mcp_headers(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}


def _authorize(http: httpx2.Client, fake: MCPOAuthFake, client_id: str, verifier: str) -> str:
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    )
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": "http://127.0.0.1:9/cb",
        "state": "s1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": fake.mcp_url,
        "scope": "mcp:read",
    }
    response = http.get(f"{fake.issuer}/authorize", params=params)
    assert response.status_code == 302
    query = parse_qs(urlsplit(response.headers["location"]).query)
    assert query["state"] == ["s1"] and query["iss"] == [fake.issuer]
    return query["code"][0]
