"""The outside services of a live attempt: local fakes, started per attempt on demand.

A case points its config at a fake by writing `fake` where a URL would go; a live or
record attempt then starts that fake on an ephemeral loopback port, scripted by the
case's input file, and the engine talks to it through the real SDK. Replay never starts
any: the journal answers instead.

    provider `base_url: fake`      ->  fakes.llm, scripted by input/llm.yaml
    `composio: {base_url: fake}`   ->  fakes.composio, catalogue input/composio.yaml
    an `mcp` server `url: fake`    ->  fakes.mcp_oauth, scripted by input/mcp.yaml
    `web: {fake: true}`            ->  fakes.web, pages in input/web.yaml
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from ..agent.config import EngineConfig, ProviderSpec
from ..agent.fake_urls import is_fake, uses_fake_composio, uses_fake_mcp, uses_fake_web
from ..case.directory import Case
from ..errors import CaseFormatError


@dataclass(frozen=True, slots=True)
class _FakeKind:
    input_file: str
    module: str
    cls: str
    used_by: str


FAKES = {
    "llm": _FakeKind(
        "llm.yaml", "pytest_nodeval_fakes.llm", "LLMFake", "a provider with `base_url: fake`"
    ),
    "composio": _FakeKind(
        "composio.yaml",
        "pytest_nodeval_fakes.composio",
        "ComposioFake",
        "`composio: {base_url: fake}`",
    ),
    "mcp": _FakeKind(
        "mcp.yaml",
        "pytest_nodeval_fakes.mcp_oauth",
        "MCPOAuthFake",
        "an MCP server with `url: fake`",
    ),
    "web": _FakeKind(
        "web.yaml", "pytest_nodeval_fakes.web", "WebFake", "the `web` tool with `web: {fake: true}`"
    ),
}


@dataclass(frozen=True, slots=True)
class LiveServices:
    """The fakes running for one live attempt (None: nothing in the case points at it)."""

    llm_url: str | None = None
    composio: Any = None
    """fakes.composio.ComposioFake, when `composio.base_url` is `fake`."""
    mcp: Any = None
    """fakes.mcp_oauth.MCPOAuthFake, when an MCP server's `url` is `fake`."""
    web: Any = None
    """fakes.web.WebFake, when the `web` tool is enabled with `web.fake` on."""


@contextmanager
def live_services(
    case: Case,
    specs: list[ProviderSpec],
    seed: int | None,
    config: EngineConfig | None = None,
    *,
    given: Mapping[str, Any] | None = None,
) -> Iterator[LiveServices]:
    """Start the fakes that the provider specs and the config's tools point at.

    `given`: fakes already running (by kind: llm, composio, mcp, web), e.g. a test's fixtures;
    they are used instead of starting new ones, and left running.
    """
    given = given or {}
    with ExitStack() as stack:

        def running(kind: str, needed: bool) -> Any:
            if not needed:
                return None
            return given.get(kind) or stack.enter_context(make_fake(kind, case, seed=seed))

        llm = running("llm", any(is_fake(spec) for spec in specs))
        yield LiveServices(
            llm_url=llm.url if llm is not None else None,
            composio=running("composio", uses_fake_composio(config)),
            mcp=running("mcp", uses_fake_mcp(config)),
            web=running("web", uses_fake_web(config)),
        )


def make_fake(
    kind: str, case: Case | None, *, seed: int | None = None, required: bool = True
) -> Any:
    """An unstarted fake of `kind`, scripted by the case's input file.

    Without a case (or, when not `required`, without the file) the fake runs its default,
    empty script. A malformed file is a CaseFormatError naming the file and the field.
    """
    from pytest_nodeval_fakes._script import ScriptError

    fake = FAKES[kind]
    script = case.directory / "input" / fake.input_file if case is not None else None
    if script is not None and not script.is_file():
        if required:
            raise CaseFormatError(
                f"{script}: missing; {fake.used_by} is answered by {fake.module}, "
                "scripted by this file"
            )
        script = None
    cls = getattr(importlib.import_module(fake.module), fake.cls)
    try:
        return cls(script, seed=seed) if kind == "llm" else cls(script)
    except ScriptError as exc:
        raise CaseFormatError(str(exc)) from None
