"""Contract tests: the `composio` SDK (0.30) against `fakes.composio` on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import composio_client
import httpx2
import pytest
from composio import Composio
from composio.exceptions import (
    ComposioError,
    ComposioMultipleConnectedAccountsError,
    ToolNotFoundError,
)

from pytest_nodeval_fakes import ScriptError
from pytest_nodeval_fakes.composio import ComposioCatalogue, ComposioFake

KEY = "test-composio-key"
STAR = "GITHUB_STAR_A_REPOSITORY"
CATALOGUE: dict[str, Any] = {
    "schema_version": 1,
    "api_key": KEY,
    "tools": [
        {
            "slug": STAR,
            "toolkit": "github",
            "name": "Star a repository",
            "description": "Star a repository for the authenticated user.",
            "input_parameters": {
                "type": "object",
                "properties": {"owner": {"type": "string"}, "repo": {"type": "string"}},
                "required": ["owner", "repo"],
            },
            "results": [
                {
                    "when_args": {"repo": "missing"},
                    "successful": False,
                    "error": "Repository not found",
                },
                {"data": {"starred": True}},
            ],
        },
        {
            "slug": "SLACK_SEND_MESSAGE",
            "toolkit": "slack",
            "description": "Send a message to a channel.",
        },
    ],
    "auth_configs": [{"id": "ac_github", "toolkit": "github"}],
    "connected_accounts": [{"id": "ca_1", "user_id": "alice", "auth_config_id": "ac_github"}],
}


@pytest.fixture
def composio_fake() -> Iterator[ComposioFake]:
    with ComposioFake(CATALOGUE) as fake:
        yield fake


def sdk(fake: ComposioFake, **options: Any) -> Composio:
    # allow_tracking=False: otherwise a background thread posts telemetry to the real service.
    defaults = {"toolkit_versions": {"github": "20250101_00"}, "timeout": 5.0}
    return Composio(base_url=fake.url, api_key=KEY, allow_tracking=False, **{**defaults, **options})


def test_tools_get_returns_provider_schemas_from_the_catalogue(composio_fake: ComposioFake) -> None:
    client = sdk(composio_fake)
    [tool] = client.tools.get("alice", tools=[STAR])
    assert tool["type"] == "function"
    assert tool["function"]["name"] == STAR
    assert tool["function"]["parameters"]["required"] == ["owner", "repo"]
    found = client.tools.get("alice", toolkits=["slack"], search="message")
    assert [t["function"]["name"] for t in found] == ["SLACK_SEND_MESSAGE"]
    first = composio_fake.calls[0]
    assert (first.prefix, first.path, first.query["tool_slugs"]) == ("/api/v3.1", "/tools", STAR)


def test_execute_returns_data_and_tool_failure_is_not_an_exception(
    composio_fake: ComposioFake,
) -> None:
    client = sdk(composio_fake)
    ok = client.tools.execute(STAR, {"owner": "octo", "repo": "hello"}, user_id="alice")
    failed = client.tools.execute(STAR, {"owner": "octo", "repo": "missing"}, user_id="alice")
    assert ok == {"data": {"starred": True}, "error": None, "successful": True}
    assert failed == {"data": {}, "error": "Repository not found", "successful": False}
    # The schema is fetched once (GET /tools/{slug}) and cached for the second call.
    assert [c.path for c in composio_fake.calls] == [f"/tools/{STAR}"] + [
        f"/tools/execute/{STAR}"
    ] * 2
    assert composio_fake.executions[0].body == {
        "user_id": "alice",
        "version": "20250101_00",
        "arguments": {"owner": "octo", "repo": "hello"},
    }


def test_unknown_tool_raises_tool_not_found(composio_fake: ComposioFake) -> None:
    with pytest.raises(ToolNotFoundError):
        sdk(composio_fake).tools.execute(
            "GITHUB_NOPE",
            {},
            user_id="alice",
            version="latest",
            dangerously_skip_version_check=True,
        )
    assert composio_fake.calls[-1].status == 404


def test_bad_api_key_raises_the_sdks_authentication_error(composio_fake: ComposioFake) -> None:
    client = Composio(base_url=composio_fake.url, api_key="ak_wrong_key_1234", allow_tracking=False)
    with pytest.raises(composio_client.AuthenticationError) as err:
        client.tools.get("alice", tools=[STAR])
    assert isinstance(err.value, ComposioError)
    assert err.value.status_code == 401 and "Invalid API key" in str(err.value)
    assert err.value.details is not None and err.value.details["code"] == 801


def test_both_api_prefixes_are_served(composio_fake: ComposioFake, http: httpx2.Client) -> None:
    for prefix in ("/api/v3", "/api/v3.1"):
        response = http.get(f"{composio_fake.url}{prefix}/tools/{STAR}", headers={"x-api-key": KEY})
        assert response.status_code == 200 and response.json()["toolkit"]["slug"] == "github"
    assert http.get(f"{composio_fake.url}/api/v3/tools").status_code == 401


def test_connected_accounts_list_link_and_status(
    composio_fake: ComposioFake, http: httpx2.Client
) -> None:
    client = sdk(composio_fake)
    [existing] = client.connected_accounts.list(user_ids=["alice"], statuses=["ACTIVE"]).items
    assert (existing.id, existing.status, existing.toolkit.slug) == ("ca_1", "ACTIVE", "github")
    with pytest.raises(ComposioMultipleConnectedAccountsError):
        client.connected_accounts.link("alice", "ac_github")
    request = client.connected_accounts.link(
        "bob", "ac_github", callback_url="http://127.0.0.1:9/done"
    )
    assert request.status == "INITIATED"
    assert client.connected_accounts.get(request.id).status == "INITIATED"
    # Visiting the link stands in for the user completing the provider's consent screen.
    visit = http.get(request.redirect_url)
    assert visit.status_code == 302 and visit.headers["location"].startswith(
        "http://127.0.0.1:9/done?"
    )
    assert request.wait_for_connection(timeout=5).status == "ACTIVE"
    assert {a.user_id for a in client.connected_accounts.list(statuses=["ACTIVE"]).items} == {
        "alice",
        "bob",
    }


def test_required_connected_account_is_enforced() -> None:
    strict = {**CATALOGUE, "require_connected_account": True}
    with ComposioFake(strict) as fake:
        client = sdk(fake)
        assert client.tools.execute(STAR, {"owner": "o", "repo": "r"}, user_id="alice")[
            "successful"
        ]
        with pytest.raises(composio_client.BadRequestError) as err:
            client.tools.execute(STAR, {"owner": "o", "repo": "r"}, user_id="carol")
    assert err.value.details is not None and err.value.details["code"] == 1812


def test_injected_rate_limit_on_execute_is_not_retried(composio_fake: ComposioFake) -> None:
    client = sdk(composio_fake)
    client.tools.get("alice", tools=[STAR])
    composio_fake.fail_next(
        429, "Rate limit exceeded", path_contains="/tools/execute/", retry_after_s=0
    )
    with pytest.raises(composio_client.RateLimitError):
        client.tools.execute(STAR, {"owner": "o", "repo": "r"}, user_id="alice")
    assert len(composio_fake.executions) == 1
    assert client.tools.execute(STAR, {"owner": "o", "repo": "r"}, user_id="alice")["successful"]


def test_catalogue_loads_from_yaml_and_names_bad_references(tmp_path: Path) -> None:
    good = tmp_path / "composio.yaml"
    good.write_text(
        "schema_version: 1\ntools:\n  - {slug: A_B, toolkit: a, results: [{data: {x: 1}}]}\n"
    )
    assert ComposioCatalogue.load(good).tools[0].results[0].data == {"x": 1}
    bad = tmp_path / "bad.yaml"
    bad.write_text("connected_accounts:\n  - {id: ca, user_id: u, auth_config_id: ac_missing}\n")
    with pytest.raises(
        ScriptError, match=r"bad\.yaml.*\n.*auth_config_id: 'ac_missing' is not one of"
    ):
        ComposioCatalogue.load(bad)
