"""input/config.yaml's `command` form (issue 27): what it refuses beside it, by name."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pytest_nodeval.agent.config import EngineConfig

ANTHROPIC = {"name": "anthropic", "model": "claude-sonnet-4-6", "base_url": "fake"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"command": ["./agent"], "providers": [ANTHROPIC], "system_prompt": "hi"},
            "system_prompt: the engine's settings, which a `command` agent does not use",
        ),
        (
            {
                "command": ["./agent"],
                "providers": [{"name": "mock", "model": "m", "script": [{"text": "hi"}]}],
            },
            "the mock has no HTTP API for a `command` program to call",
        ),
        (
            {"providers": [ANTHROPIC], "env": {"A": "b"}},
            "env: a setting of a `command` agent; there is no command",
        ),
        (
            {"providers": [ANTHROPIC], "stdio": "jsonl"},
            "stdio: a setting of a `command` agent; there is no command",
        ),
        (
            {"command": ["./agent"], "providers": [ANTHROPIC], "stdio": "json"},
            "stdio.*'lines' or 'jsonl'",
        ),
        ({"command": [], "providers": [ANTHROPIC]}, "command"),
        (
            {
                "command": ["./agent"],
                "providers": [ANTHROPIC],
                "variants": {"m": {"name": "mock", "model": "m", "script": [{"text": "hi"}]}},
            },
            "the mock has no HTTP API for a `command` program to call",
        ),
        (
            {"providers": [ANTHROPIC], "variants": {"a/b": ANTHROPIC}},
            "variants: the name 'a/b' is not a matrix value",
        ),
    ],
)
def test_what_a_command_config_refuses_is_named(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match="(?s)" + message.replace("`", ".")):
        EngineConfig.model_validate(config)


def test_a_command_config_offers_no_tool_list_of_its_own() -> None:
    config = EngineConfig.model_validate({"command": ["./agent"], "providers": [ANTHROPIC]})
    assert config.offered_tools() is None  # the program names its tools at run time
