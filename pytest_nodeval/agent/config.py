"""The engine config under test: a case's `input/config.yaml`.

Unknown keys are errors that name the file and the key, so a typo never silently turns
a setting off.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from ..yamlfiles import load_model, valid_regex


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

    @field_validator("input_matches")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return None if value is None else valid_regex(value)


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


_MOCK_SCRIPT_RULE: JsonDict = {  # what `_script_only_for_mock` refuses, for the JSON Schema
    "allOf": [
        {
            "if": {"properties": {"name": {"const": "mock"}}, "required": ["name"]},
            "then": {"required": ["script"], "properties": {"script": {"minItems": 1}}},
            "else": {"properties": {"script": {"maxItems": 0}}},
        }
    ]
}


class ProviderSpec(_Strict):
    """One provider in the chain; the first that answers is used."""

    model_config = ConfigDict(json_schema_extra=_MOCK_SCRIPT_RULE)

    name: Literal["mock", "anthropic", "openai", "gemini"]
    model: str
    label: str | None = None
    """Name in the journal; defaults to `name` (must be unique in the chain)."""
    base_url: str | None = None
    """Any compatible server, e.g. a local fake or an OpenAI-compatible gateway."""
    api_key_env: str | None = None
    """Environment variable holding the key (default ANTHROPIC_API_KEY / OPENAI_API_KEY;
    gemini: GEMINI_API_KEY, then GOOGLE_API_KEY)."""
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


BUILTIN_TOOLS = ("shell", "file", "code_exec", "ask_user", "web", "pdf")
COMPOSIO_PREFIX = "composio:"
MCP_PREFIX = "mcp:"
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TOOL_NAME_PATTERN = (
    f"^({'|'.join(BUILTIN_TOOLS)}|{COMPOSIO_PREFIX}.+|{MCP_PREFIX}{_SERVER_NAME.pattern[1:-1]})$"
)
"""The tool names config.yaml may give, for its JSON Schema: the validator below refuses the rest,
and an `mcp:` name needs a server of that name (`_section_problem`), which `_SERVER_NAME` limits."""


class ToolSpec(_Strict):
    name: str = Field(
        json_schema_extra={"pattern": TOOL_NAME_PATTERN, "examples": list(BUILTIN_TOOLS)}
    )
    timeout_s: float | None = None
    """Per-call time limit for shell and code_exec (default: limits.tool_timeout_s)."""

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in BUILTIN_TOOLS and not name.startswith(("composio:", "mcp:")):
            raise ValueError(
                f"unknown tool {name!r} (valid: {', '.join(BUILTIN_TOOLS)}, "
                "composio:<ACTION>, mcp:<server>)"
            )
        return name


_URL_OR_FAKE = "^(fake$|https?://)"
"""For the JSON Schemas: what `_url_or_fake` below accepts."""


class ComposioSpec(_Strict):
    """`composio:` where the engine's Composio actions (`tools: [composio:<ACTION>]`) run."""

    base_url: str | None = Field(default=None, json_schema_extra={"pattern": _URL_OR_FAKE})
    """The Composio API; `fake` starts fakes.composio, scripted by input/composio.yaml
    (default: the SDK's)."""
    api_key_env: str = "COMPOSIO_API_KEY"
    """Environment variable holding the API key (not read for `base_url: fake` or in replay)."""
    user_id: str = Field(min_length=1)
    """The Composio user whose connected accounts execute the actions."""
    toolkit_versions: dict[str, str] = Field(default_factory=dict)
    """Pinned toolkit versions, e.g. {github: "20250101_00"}; an unpinned toolkit runs the
    version the API described when the session started (journaled in tool.register)."""

    @field_validator("base_url")
    @classmethod
    def _url_or_fake(cls, url: str | None) -> str | None:
        if url is not None and url != "fake" and not url.startswith(("http://", "https://")):
            raise ValueError("must be an http(s):// URL of the Composio API, or `fake`")
        return url


class McpServerSpec(_Strict):
    """One MCP server reached over streamable HTTP; `mcp:<name>` enables all of its tools."""

    name: str = Field(json_schema_extra={"pattern": _SERVER_NAME.pattern})
    url: str = Field(json_schema_extra={"pattern": _URL_OR_FAKE})
    """The MCP endpoint (http or https), or `fake`: fakes.mcp_oauth, scripted by input/mcp.yaml."""
    scopes: list[str] = Field(default_factory=list)
    """OAuth scopes asked for first (fake only); a tool that needs more steps up when called."""
    token_env: str | None = None
    """Real servers: environment variable holding a bearer token. The engine cannot give
    an OAuth consent for a person, so it never runs the interactive flow against them."""

    @field_validator("name")
    @classmethod
    def _usable_name(cls, name: str) -> str:
        if not _SERVER_NAME.fullmatch(name):
            raise ValueError("must be 1-64 letters, digits, '_' or '-'")
        return name

    @field_validator("url")
    @classmethod
    def _url_or_fake(cls, url: str) -> str:
        if url != "fake" and not url.startswith(("http://", "https://")):
            raise ValueError("must be an http(s):// URL of the MCP endpoint, or `fake`")
        return url

    @model_validator(mode="after")
    def _token_only_for_real_servers(self) -> McpServerSpec:
        if self.url == "fake" and self.token_env is not None:
            raise ValueError("token_env is for real servers; the fake is authorized through OAuth")
        return self


class McpSpec(_Strict):
    """`mcp:` the MCP servers the engine may use."""

    servers: list[McpServerSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> McpSpec:
        names = [s.name for s in self.servers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"two MCP servers are named {duplicates[0]!r}; names must be unique")
        if sum(s.url == "fake" for s in self.servers) > 1:
            raise ValueError(
                "only one MCP server can be `url: fake` (input/mcp.yaml scripts one server)"
            )
        return self

    def server(self, name: str) -> McpServerSpec | None:
        return next((s for s in self.servers if s.name == name), None)


# Either case: the loader lowers a host before it keeps it, and the JSON Schema (which has no
# flags) carries this same pattern.
_HOST = re.compile(
    r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$"
    r"|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$"
)


class WebSpec(_Strict):
    """`web:` what the `web` tool may fetch; with no section (or an empty list) it may fetch nothing."""  # noqa: E501  (the schema's description)

    allow: list[str] = Field(
        default_factory=list,
        json_schema_extra={"items": {"type": "string", "pattern": _HOST.pattern}},
    )
    """Hosts the tool may fetch from: `docs.example.com` (any port), `127.0.0.1:8123` (that port),
    `*.example.com` (its subdomains). Every redirect is checked against this list again."""
    max_bytes: int = Field(default=2_000_000, gt=0, le=1_000_000_000)
    """Bytes of one response body; a larger page is a tool error (reading stops at the limit)."""
    timeout_s: float = Field(default=10.0, gt=0, le=3_600)
    """Connecting plus reading one fetch, redirects included."""
    fake: bool = False
    """Live and record: every fetch goes to fakes.web, which answers from input/web.yaml; the
    URLs and the allow-list stay as written, so a case records with no network."""

    @field_validator("allow")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if not _HOST.fullmatch(host):
                raise ValueError(
                    f"{host!r} is not a host: write `docs.example.com`, `127.0.0.1:8123` "
                    "or `*.example.com` (no scheme, no path)"
                )
        return [host.lower() for host in hosts]


class PdfSpec(_Strict):
    """`pdf:` limits of the `pdf` tool."""

    max_bytes: int = Field(default=20_000_000, gt=0, le=1_000_000_000)
    """Size of the PDF file; a larger file is a tool error (at most 1 GB: the file is read
    whole)."""


class Limits(_Strict):
    max_turns: int = Field(default=10, ge=1, le=10_000)
    """Agent steps (one model call and the tools it asks for) per session."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Input plus output tokens per session."""
    timeout_s: float = Field(default=120.0, gt=0, le=86_400)
    """Wall time per session (at most a day)."""
    tool_timeout_s: float = Field(default=30.0, gt=0, le=86_400)


_ENGINE_ONLY = ("system_prompt", "tools", "skills", "plan", "composio", "mcp", "web", "pdf")
"""The engine's settings, which a `command` agent does not use."""


def _offers(pattern: str) -> dict[str, Any]:
    """A schema: `tools` lists a tool whose name matches, as a bare name or an object."""
    name = {"type": "string", "pattern": pattern}
    tool = {"type": "object", "required": ["name"], "properties": {"name": name}}
    return {"required": ["tools"], "properties": {"tools": {"contains": {"anyOf": [name, tool]}}}}


def _needs_section(tool_pattern: str, section: str) -> dict[str, Any]:
    return {
        "if": _offers(tool_pattern),
        "then": {"required": [section], "properties": {section: {"type": "object"}}},
    }


_NOT_MOCK: JsonDict = {"properties": {"name": {"not": {"const": "mock"}}}}
VARIANT_NAME_PATTERN = "^[A-Za-z0-9._:+-]+$"
"""A `variants:` entry's name: a matrix value (case/variants.py), so a journal directory's."""

# What the model validators below refuse within this one file, for the JSON Schema.
_ENGINE_RULES: JsonDict = {
    "allOf": [
        _needs_section("^web$", "web"),
        _needs_section(f"^{COMPOSIO_PREFIX}", "composio"),
        _needs_section(f"^{MCP_PREFIX}", "mcp"),
        {
            "if": {"required": ["command"], "properties": {"command": {"type": "array"}}},
            "then": {
                "properties": {
                    **dict.fromkeys(_ENGINE_ONLY, False),
                    "providers": {"items": _NOT_MOCK},
                    "variants": {"additionalProperties": _NOT_MOCK},
                }
            },
            "else": {"properties": {"env": {"maxProperties": 0}, "stdio": False}},
        },
    ]
}


class EngineConfig(_Strict):
    """`input/config.yaml`: what the reference engine runs."""

    model_config = ConfigDict(json_schema_extra=_ENGINE_RULES)

    providers: list[ProviderSpec] = Field(min_length=1)
    system_prompt: str = ""
    tools: list[ToolSpec] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    temperature: float | None = None
    composio: ComposioSpec | None = None
    """Needed by `composio:<ACTION>` tools."""
    mcp: McpSpec | None = None
    """Needed by `mcp:<server>` tools."""
    skills: str | None = None
    """A directory of skills (each a directory with a SKILL.md), relative to input/: listed to
    the model at boot, loaded with the `skill` tool."""
    plan: bool = False
    """Have the model write a numbered plan before it acts; the journal records it
    (`plan.created`) and which of its steps were done (`plan.result`)."""
    web: WebSpec | None = None
    """The `web` tool's allow-list and limits (without it the tool may fetch nothing)."""
    pdf: PdfSpec | None = None
    """The `pdf` tool's limits."""
    command: list[str] | None = Field(default=None, min_length=1)
    """Run this program as the agent instead of the engine (docs/command-agents.md): argv,
    started in the world with input/ as its working directory, its model calls through the
    attempt's recording proxy (the providers above say where they go)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Added to the program's environment (with `command`)."""
    stdio: Literal["lines", "jsonl"] = "lines"
    """How the program talks with the user (with `command`): `lines`, every turn on stdin up
    front and each stdout line an answer; `jsonl`, turn by turn in JSON lines, which a persona
    user needs (docs/command-agents.md)."""
    variants: dict[str, ProviderSpec] = Field(
        default_factory=dict,
        json_schema_extra={"propertyNames": {"pattern": VARIANT_NAME_PATTERN}},
    )
    """Provider entries by name, for a matrix's `provider` key (`--nodeval-matrix=provider=a,b`):
    the chosen entry takes the first provider's place. Unused outside a matrix."""

    def offered_tools(self) -> set[str] | None:
        """The tool names the engine offers the model, or None when they are named at run time:
        by outside services (Composio, MCP), or by a `command` program itself."""
        names = {t.name for t in self.tools}
        if self.command is not None or any(
            n.startswith((COMPOSIO_PREFIX, MCP_PREFIX)) for n in names
        ):
            return None  # a program's tools are its own
        return names | ({"skill"} if self.skills else set())

    @field_validator("tools", mode="before")
    @classmethod
    def _names_as_specs(cls, tools: Any) -> Any:
        if isinstance(tools, list):
            return [{"name": t} if isinstance(t, str) else t for t in tools]
        return tools

    @field_validator("variants")
    @classmethod
    def _variant_names(cls, variants: dict[str, ProviderSpec]) -> dict[str, ProviderSpec]:
        bad = next((n for n in variants if not re.fullmatch(VARIANT_NAME_PATTERN, n)), None)
        if bad is not None:
            raise ValueError(
                f"variants: the name {bad!r} is not a matrix value "
                "(letters, digits and . _ : + - only)"
            )
        return variants

    @model_validator(mode="after")
    def _unique_labels(self) -> EngineConfig:
        keys = [p.key for p in self.providers]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(
                f"providers share the name {duplicates[0]!r}; give each a distinct 'label'"
            )
        return self

    @model_validator(mode="after")
    def _command_alone(self) -> EngineConfig:
        if self.command is not None:
            given = [name for name in _ENGINE_ONLY if name in self.model_fields_set]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: the engine's settings, which a `command` agent does "
                    "not use (its prompt and tools are its own); remove them or the command"
                )
            if any(p.name == "mock" for p in [*self.providers, *self.variants.values()]):
                raise ValueError(
                    "providers: the mock has no HTTP API for a `command` program to call; "
                    "use anthropic, openai or gemini, with base_url: fake to record keylessly"
                )
        elif self.env or "stdio" in self.model_fields_set:
            key = "env" if self.env else "stdio"
            raise ValueError(f"{key}: a setting of a `command` agent; there is no command")
        return self

    @model_validator(mode="after")
    def _tool_sections(self) -> EngineConfig:
        for spec in self.tools:
            problem = self._section_problem(spec.name)
            if problem:
                raise ValueError(f"tools: {spec.name!r} {problem}")
        return self

    def _section_problem(self, tool: str) -> str | None:
        if tool == "web" and self.web is None:
            return (
                "needs a `web:` section with the hosts it may fetch, "
                "e.g. web: {allow: [docs.example.com]}"
            )
        if tool.startswith(COMPOSIO_PREFIX):
            if not tool.removeprefix(COMPOSIO_PREFIX):
                return (
                    "names no action (write composio:<ACTION>, "
                    "e.g. composio:GITHUB_STAR_A_REPOSITORY)"
                )
            if self.composio is None:
                return (
                    "needs a `composio:` section, e.g. composio: {user_id: <user>, base_url: fake}"
                )
        if tool.startswith(MCP_PREFIX):
            server = tool.removeprefix(MCP_PREFIX)
            if self.mcp is None:
                return (
                    "needs an `mcp:` section, "
                    f"e.g. mcp: {{servers: [{{name: {server or '<server>'}, url: fake}}]}}"
                )
            if self.mcp.server(server) is None:
                known = ", ".join(s.name for s in self.mcp.servers)
                return f"names no server of the `mcp:` section (servers: {known})"
        return None

    def digest(self) -> str:
        """What the file says, not what this version's defaults add: a key added to the model
        later leaves every journal's `config_digest` as it was (no churn on re-recording)."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def load_config(path: Path) -> EngineConfig:
    return load_model(EngineConfig, path)
