"""The reference engine with Composio and MCP tools: live through the real SDKs against the
fakes, replayed from the journal with none of them running."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from pytest_nodeval.case.directory import load_case
from pytest_nodeval.errors import CaseFormatError
from pytest_nodeval.runner.session import AttemptSettings, Observed, run_case
from pytest_nodeval_fakes.mcp_oauth import MCPOAuthFake

from ..conftest import write_case

SCENARIO = Path(__file__).parents[2] / "scenarios" / "ops-all-fakes"
STAR = "GITHUB_STAR_A_REPOSITORY"
CATALOGUE = {
    "schema_version": 1,
    "tools": [
        {
            "slug": STAR,
            "toolkit": "github",
            "description": "Star a repository.",
            "input_parameters": {
                "type": "object",
                "required": ["owner", "repo"],
                "properties": {"owner": {"type": "string"}, "repo": {"type": "string"}},
            },
            "results": [
                {
                    "when_args": {"repo": "missing"},
                    "successful": False,
                    "error": "Repository not found",
                },
                {"data": {"starred": True}},
            ],
        }
    ],
}
MCP_SCRIPT = {
    "schema_version": 1,
    "server_name": "files",
    "base_scopes": ["files:read"],
    "tools": [
        {"name": "read_file", "results": [{"text": "hello"}]},
        {
            "name": "delete_file",
            "required_scopes": ["files:write"],
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
            "results": [{"text": "deleted", "structured": {"deleted": True}}],
        },
    ],
}
COMPOSIO_SECTION = {
    "base_url": "fake",
    "user_id": "alice",
    "toolkit_versions": {"github": "20250101_00"},
}
MCP_SECTION = {"servers": [{"name": "files", "url": "fake", "scopes": ["files:read"]}]}


def _case(
    root: Path,
    case_id: str,
    *,
    script: list[dict[str, Any]],
    tools: list[str],
    sections: dict[str, Any],
    inputs: dict[str, Any],
) -> Path:
    """A mock-provider case using outside services: config sections plus their input files."""
    directory = write_case(root, case_id, script=script, inputs=["go"], tools=[], record=False)
    config_path = directory / "input" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config_path.write_text(yaml.safe_dump({**config, "tools": tools, **sections}, sort_keys=False))
    for name, content in inputs.items():
        (directory / "input" / name).write_text(yaml.safe_dump(content, sort_keys=False))
    return directory


def _run(directory: Path, mode: str, out: Path, **kwargs: Any) -> Observed:
    observed = run_case(
        load_case(directory),
        AttemptSettings(mode=mode, world_backend="local"),  # type: ignore[arg-type]
        out,
        **kwargs,
    )
    assert observed.divergence is None, observed.divergence
    assert observed.status == "ok", observed.metrics()
    return observed


def _of(observed: Observed, kind: str, tool: str) -> Any:
    return next(
        e.payload_dict() for e in observed.events if e.type == kind and e.payload.tool == tool
    )


def _fake_threads() -> list[str]:
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith(("fake-", "nodeval-mcp")) and t.is_alive()
    ]


def _tool_events(events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e.type, e.payload_dict())
        for e in events
        if e.type in ("tool.register", "tool.call", "tool.result")
    ]


def test_a_live_session_with_all_three_fakes_replays_with_none_running(
    tmp_path: Path, block_network: Any
) -> None:
    case_dir = tmp_path / "ops-all-fakes"
    shutil.copytree(SCENARIO, case_dir, ignore=shutil.ignore_patterns("journal"))
    recorded = _run(case_dir, "record", tmp_path / "record")
    assert _fake_threads() == [], "the fakes and the MCP loop must be stopped when the session ends"
    register = _of(recorded, "tool.register", "read_file")
    assert [s["step"] for s in register["mcp"]["auth"]][-2:] == ["authorize", "token"]
    assert _of(recorded, "tool.result", "GITHUB_CREATE_AN_ISSUE")["result"] == {
        "number": 42,
        "state": "open",
    }

    attempts = block_network()
    replayed = _run(case_dir, "deterministic", tmp_path / "replay")
    assert attempts == [], "replay tried to open a connection"
    golden = _tool_events(load_case(case_dir).journal().events)
    assert {p["source"] for kind, p in golden if kind == "tool.register"} == {
        "mcp:files",
        "composio",
    }
    assert _tool_events(replayed.events) == golden
    assert replayed.output == recorded.output


def test_a_failing_composio_action_is_a_tool_error_the_agent_sees(tmp_path: Path) -> None:
    script = [
        {"tool_calls": [{"name": STAR, "args": {"owner": "octo", "repo": "missing"}}]},
        {"when": {"after_tool": STAR}, "text": "That repository does not exist."},
    ]
    directory = _case(
        tmp_path,
        "star-missing",
        script=script,
        tools=[f"composio:{STAR}"],
        sections={"composio": COMPOSIO_SECTION},
        inputs={"composio.yaml": CATALOGUE},
    )
    observed = _run(directory, "live", tmp_path / "live")
    result = _of(observed, "tool.result", STAR)
    assert (result["ok"], result["error"]) == (False, "Repository not found")
    last_request = [e for e in observed.events if e.type == "llm.request"][-1]
    seen = last_request.payload.body["messages"][-1]
    assert (seen["role"], seen["is_error"], seen["content"]) == (
        "tool",
        True,
        "error: Repository not found",
    )
    register = _of(observed, "tool.register", STAR)
    assert register["composio"] == {
        "toolkit": "github",
        "version": "20250101_00",
        "user_id": "alice",
    }


def test_an_mcp_tool_needing_more_scope_steps_up_and_succeeds_live(tmp_path: Path) -> None:
    script = [
        {"tool_calls": [{"name": "delete_file", "args": {"path": "old.log"}}]},
        {"when": {"after_tool": "delete_file"}, "text": "Deleted old.log."},
    ]
    directory = _case(
        tmp_path,
        "delete",
        script=script,
        tools=["mcp:files"],
        sections={"mcp": MCP_SECTION},
        inputs={"mcp.yaml": MCP_SCRIPT},
    )
    with MCPOAuthFake(MCP_SCRIPT) as fake:
        observed = _run(directory, "record", tmp_path / "live", fakes={"mcp": fake})
        refused = fake.count("mcp", error="insufficient_scope")
    result = _of(observed, "tool.result", "delete_file")
    assert result["ok"] and result["result"]["structured"] == {"deleted": True}
    challenge, authorize, token = result["auth"]
    assert (challenge["status"], challenge["error"]) == (403, "insufficient_scope")
    assert {"files:read", "files:write"} <= set(authorize["scope"].split())
    assert token["grant_type"] == "authorization_code" and "files:write" in token["scope"].split()
    assert refused == 1
    assert "auth" not in _of(observed, "tool.register", "delete_file")["mcp"], (
        "boot steps go on the first tool only"
    )
    replayed = _run(directory, "deterministic", tmp_path / "replay")
    assert _of(replayed, "tool.result", "delete_file") == result, (
        "replay re-emits the journaled auth steps"
    )


def test_a_composio_or_mcp_tool_without_its_section_is_an_error_naming_the_file(
    tmp_path: Path,
) -> None:
    directory = _case(
        tmp_path, "no-section", script=[{"text": "hi"}], tools=["mcp:files"], sections={}, inputs={}
    )
    with pytest.raises(
        CaseFormatError,
        match=r"no-section/input/config\.yaml: .*'mcp:files' needs an `mcp:` section",
    ):
        load_case(directory)


def test_a_fake_without_its_input_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    directory = _case(
        tmp_path,
        "no-catalogue",
        script=[{"text": "hi"}],
        tools=[f"composio:{STAR}"],
        sections={"composio": COMPOSIO_SECTION},
        inputs={},
    )
    with pytest.raises(CaseFormatError, match=r"no-catalogue/input/composio\.yaml: missing"):
        run_case(load_case(directory), AttemptSettings(mode="live"), tmp_path / "live")


FIXTURE_TESTS = """
import json
from pathlib import Path

import httpx2
import pytest

URLS = Path(__file__).parent.parent / "urls.json"


def test_unbound_fakes_run_default_scripts(nodeval_llm_server, nodeval_composio, nodeval_mcp):
    with httpx2.Client(verify=False, timeout=5) as http:
        tools = http.get(
            nodeval_composio.url + "/api/v3.1/tools",
            headers={"x-api-key": nodeval_composio.api_key},
        )
        prm = http.get(nodeval_mcp.resource_url + "/.well-known/oauth-protected-resource/mcp")
        llm = http.post(
            nodeval_llm_server.url + "/v1/messages",
            json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        )
    assert tools.json()["items"] == [] and prm.status_code == 200 and llm.status_code == 400
    urls = [nodeval_llm_server.url, nodeval_composio.url, nodeval_mcp.issuer, nodeval_mcp.mcp_url]
    URLS.write_text(json.dumps(urls))


@pytest.mark.nodeval_case("star")
def test_a_bound_fake_is_scripted_by_the_case_and_used_by_its_attempt(
    nodeval_composio, nodeval_attempt
):
    assert [t.slug for t in nodeval_composio.catalogue.tools] == ["GITHUB_STAR_A_REPOSITORY"]
    assert nodeval_attempt.run().status == "ok"
    executed = [c.body["arguments"] for c in nodeval_composio.executions]
    assert executed == [{"owner": "octo", "repo": "hello"}]
"""


def test_the_fixtures_start_and_stop_their_fakes(nodeval_project: pytest.Pytester) -> None:
    script = [
        {"tool_calls": [{"name": STAR, "args": {"owner": "octo", "repo": "hello"}}]},
        {"when": {"after_tool": STAR}, "text": "Starred."},
    ]
    _case(
        nodeval_project.path / "scenarios",
        "star",
        script=script,
        tools=[f"composio:{STAR}"],
        sections={"composio": COMPOSIO_SECTION},
        inputs={"composio.yaml": CATALOGUE},
    )
    (nodeval_project.path / "scenarios" / "test_fixtures.py").write_text(FIXTURE_TESTS)
    result = nodeval_project.runpytest("--nodeval-mode", "live", "scenarios/test_fixtures.py")
    result.assert_outcomes(passed=2)
    urls = json.loads((nodeval_project.path / "urls.json").read_text())
    assert len(set(urls)) == 4 and _fake_threads() == []
    for url in urls:
        parts = urlsplit(url)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((parts.hostname, parts.port), timeout=2).close()


def test_a_real_mcp_server_gets_the_bearer_token_from_token_env_or_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_nodeval.agent.config import McpServerSpec
    from pytest_nodeval.agent.mcp_tools import McpSessions
    from pytest_nodeval.errors import NodevalError

    sessions = McpSessions()
    with MCPOAuthFake(
        MCP_SCRIPT
    ) as fake:  # addressed by its URL: the engine treats it as a real server
        try:
            with pytest.raises(NodevalError, match="asks for authorization.*set token_env"):
                sessions.connect(McpServerSpec(name="files", url=fake.mcp_url), fake.mcp_url, 10)
            monkeypatch.setenv("FILES_MCP_TOKEN", fake.issue_token(["files:read"]))
            spec = McpServerSpec(name="files", url=fake.mcp_url, token_env="FILES_MCP_TOKEN")
            read_file, _ = sessions.connect(spec, fake.mcp_url, 10)
        finally:
            sessions.close()
    assert read_file.register_extra["mcp"]["auth"] == [
        {"step": "bearer_token", "from_env": "FILES_MCP_TOKEN"}
    ]
    assert fake.count("register") == 0, "no OAuth flow runs against a real server"
