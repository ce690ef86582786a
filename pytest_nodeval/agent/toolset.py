"""Which tools an engine session gets: built-ins, Composio actions and MCP servers' tools.

Live, outside services describe their own tools (see composio_tools.py, mcp_tools.py).
In replay they are rebuilt from the journal's `tool.register` events, so the model is
offered exactly what it was offered when the journal was recorded, and nothing is
imported or contacted. Tools keep the config's order; within an MCP server, the
server's (live) or the journal's (replay) order.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from ..errors import NodevalError
from ..journal.replay import ReplayStash
from .config import COMPOSIO_PREFIX, MCP_PREFIX, EngineConfig
from .fake_urls import FAKE
from .tools import BUILTINS, Tool, ToolSetup, recorded_tools


def build_tools(
    config: EngineConfig,
    *,
    stash: ReplayStash | None = None,
    services: Any = None,
    resources: ExitStack | None = None,
) -> dict[str, Tool]:
    """The tools by name.

    `stash`: replay; outside services' tools come from the journal.
    `services`: the running fakes (runner/services.LiveServices) that `fake` addresses mean.
    `resources`: closes what the tools hold open (MCP sessions); needed for MCP tools live.
    """
    outside = _replayed(config, stash) if stash is not None else _live(config, services, resources)
    setup = ToolSetup(config, web_fake_url=_web_fake_url(services))
    tools: dict[str, Tool] = {}
    for spec in config.tools:
        for tool in [BUILTINS[spec.name](setup)] if spec.name in BUILTINS else outside[spec.name]:
            _add(tools, tool)
    return tools


def _add(tools: dict[str, Tool], tool: Tool) -> None:
    name = tool.definition.name
    other = tools.get(name)
    if other is not None:
        raise NodevalError(
            f"two tools are named {name!r} (from {other.source} and from {tool.source}); "
            "the model could not tell them apart: enable only one of them in input/config.yaml"
        )
    tools[name] = tool


def _web_fake_url(services: Any) -> str | None:
    fake = getattr(services, "web", None)
    return fake.url if fake is not None else None


def _outside_specs(config: EngineConfig) -> list[str]:
    return [spec.name for spec in config.tools if spec.name not in BUILTINS]


def _replayed(config: EngineConfig, stash: ReplayStash) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for name in _outside_specs(config):
        if name.startswith(COMPOSIO_PREFIX):
            tools = recorded_tools(
                stash.registered, "composio", [name.removeprefix(COMPOSIO_PREFIX)]
            )
        else:
            tools = recorded_tools(stash.registered, name)
        if not tools:
            stash.stop(
                f"input/config.yaml enables the tool {name!r}, which the journal never registered "
                "(it was added after recording, or its service offered no tools then)"
            )
        found[name] = tools
    return found


def _live(config: EngineConfig, services: Any, resources: ExitStack | None) -> dict[str, list[Any]]:
    names = _outside_specs(config)
    found = _composio_actions(config, names, services)
    servers = [name.removeprefix(MCP_PREFIX) for name in names if name.startswith(MCP_PREFIX)]
    if servers:
        found.update(_mcp_tools(config, servers, services, resources))
    return found


def _composio_actions(
    config: EngineConfig, names: list[str], services: Any
) -> dict[str, list[Any]]:
    slugs = [
        name.removeprefix(COMPOSIO_PREFIX) for name in names if name.startswith(COMPOSIO_PREFIX)
    ]
    if not slugs:
        return {}
    from .composio_tools import live_actions

    spec = config.composio
    assert spec is not None  # the config validates that composio tools have their section
    fake = (
        _running_fake(services, "composio", "composio.base_url") if spec.base_url == FAKE else None
    )
    actions = live_actions(spec, slugs, fake=fake, timeout_s=config.limits.tool_timeout_s)
    return {COMPOSIO_PREFIX + action.definition.name: [action] for action in actions}


def _mcp_tools(
    config: EngineConfig, servers: list[str], services: Any, resources: ExitStack | None
) -> dict[str, list[Any]]:
    if resources is None:
        raise NodevalError(
            "build_tools: MCP tools hold their server sessions open; pass resources= "
            "(an ExitStack that closes them when the engine's session ends)"
        )
    from .mcp_tools import McpSessions

    assert config.mcp is not None  # the config validates that mcp tools have their section
    sessions = McpSessions()
    resources.callback(sessions.close)
    found = {}
    for name in servers:
        spec = config.mcp.server(name)
        assert spec is not None
        url = (
            _running_fake(services, "mcp", f"mcp server '{name}' url").mcp_url
            if spec.url == FAKE
            else spec.url
        )
        found[MCP_PREFIX + name] = sessions.connect(spec, url, config.limits.tool_timeout_s)
    return found


def _running_fake(services: Any, kind: str, field: str) -> Any:
    fake = getattr(services, kind, None)
    if fake is None:
        raise NodevalError(
            f"{field} is `fake`, and no fake is running here: a case's live or record "
            f"attempt starts it from input/{kind}.yaml"
        )
    return fake
