"""The engine config under test: a case's `input/config.yaml`.

Unknown keys are errors that name the file and the key, so a typo never silently turns
a setting off.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .loading import load_model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MockToolCall(_Strict):
    name: str
    """Tool to call."""
    args: dict[str, Any] = Field(default_factory=dict)


class MockWhen(_Strict):
    """A condition on the conversation so far; every given key must hold."""

    input_contains: str | None = None
    """The latest user input contains this text (case-insensitive)."""
    input_matches: str | None = None
    """The latest user input matches this regular expression."""
    after_tool: str | None = None
    """The previous message is the result of this tool."""


class MockStep(_Strict):
    """One scripted reply of the mock provider."""

    text: str | None = None
    tool_calls: list[MockToolCall] = Field(default_factory=list)
    when: MockWhen | None = None
    """Input-matched step: used (once) by the first call whose conversation matches."""
    error: str | None = None
    """Fail this call with a provider error (exercises the fallback chain)."""

    @model_validator(mode="after")
    def _says_something(self) -> MockStep:
        if self.text is None and not self.tool_calls and self.error is None:
            raise ValueError("a mock step needs text, tool_calls or error")
        return self


class ProviderSpec(_Strict):
    """One provider in the chain; the first that answers is used."""

    name: Literal["mock", "anthropic", "openai"]
    model: str
    label: str | None = None
    """Name in the journal; defaults to `name` (must be unique in the chain)."""
    base_url: str | None = None
    """Any compatible server, e.g. a local fake or an OpenAI-compatible gateway."""
    api_key_env: str | None = None
    """Environment variable holding the key (default ANTHROPIC_API_KEY / OPENAI_API_KEY)."""
    api: Literal["chat", "responses"] = "chat"
    """OpenAI only: Chat Completions or the Responses API."""
    stream: bool = False
    max_retries: int = Field(default=2, ge=0)
    timeout_s: float = Field(default=60.0, gt=0)
    max_output_tokens: int = Field(default=1024, gt=0)
    script: list[MockStep] = Field(default_factory=list)
    """Mock only: the replies, in order, with input-matched steps taking precedence."""

    @property
    def key(self) -> str:
        return self.label or self.name

    @model_validator(mode="after")
    def _script_only_for_mock(self) -> ProviderSpec:
        if self.script and self.name != "mock":
            raise ValueError("'script' is only valid for the mock provider")
        if self.name == "mock" and not self.script:
            raise ValueError("the mock provider needs a 'script' of replies")
        return self


BUILTIN_TOOLS = ("shell", "file", "code_exec", "ask_user")


class ToolSpec(_Strict):
    name: str
    timeout_s: float | None = None
    """Per-call time limit for shell and code_exec (default: limits.tool_timeout_s)."""

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in BUILTIN_TOOLS and not name.startswith(("composio:", "mcp:")):
            raise ValueError(f"unknown tool {name!r} (valid: {', '.join(BUILTIN_TOOLS)}, "
                             "composio:<ACTION>, mcp:<server>)")
        return name


class Limits(_Strict):
    max_turns: int = Field(default=10, ge=1)
    """Agent steps (one model call and the tools it asks for) per session."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Input plus output tokens per session."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Wall time per session."""
    tool_timeout_s: float = Field(default=30.0, gt=0)


class EngineConfig(_Strict):
    """`input/config.yaml`: what the reference engine runs."""

    providers: list[ProviderSpec] = Field(min_length=1)
    system_prompt: str = ""
    tools: list[ToolSpec] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    temperature: float | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _names_as_specs(cls, tools: Any) -> Any:
        if isinstance(tools, list):
            return [{"name": t} if isinstance(t, str) else t for t in tools]
        return tools

    @model_validator(mode="after")
    def _unique_labels(self) -> EngineConfig:
        keys = [p.key for p in self.providers]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"providers share the name {duplicates[0]!r}; give each a distinct 'label'")
        return self

    def digest(self) -> str:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def load_config(path: Path) -> EngineConfig:
    return load_model(EngineConfig, path)
