"""The plugin's fixtures. Each is small and delegates; heavy modules load on first use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .keys import ahead_key, attempt_key, case_ref, fakes_key, infra_key, run_id_key, settings_of

if TYPE_CHECKING:
    from pytest_nodeval_fakes.composio import ComposioFake
    from pytest_nodeval_fakes.llm import LLMFake
    from pytest_nodeval_fakes.mcp_oauth import MCPOAuthFake

    from ..case.directory import Case
    from ..runner.session import Observed
    from .attempt import Attempt
    from .settings import Settings


@pytest.fixture(scope="session")
def nodeval_settings(pytestconfig: pytest.Config) -> Settings:
    """The resolved run settings (mode, repeat, match, world, report directory, profile)."""
    return settings_of(pytestconfig)


@pytest.fixture(scope="session")
def nodeval_run_dir(pytestconfig: pytest.Config, nodeval_settings: Settings) -> Path:
    """`reports/<run-id>/`, shared by every worker of the run."""
    return nodeval_settings.report_dir / pytestconfig.stash[run_id_key]


@pytest.fixture
def nodeval_case(request: pytest.FixtureRequest) -> Case:
    """The case under test (parametrized: one test per case x repeat)."""
    ref = getattr(request, "param", None)
    if ref is None:
        pytest.fail(
            "nodeval_case is parametrized by the plugin; bind a Python scenario to a case with "
            "@pytest.mark.nodeval_case('<case-id>')",
            pytrace=False,
        )
    from .collect import load_case_cached

    return load_case_cached(request.config, Path(ref.directory), ref.row, ref.variant)


@pytest.fixture
def nodeval_attempt(
    request: pytest.FixtureRequest,
    nodeval_case: Case,
    nodeval_settings: Settings,
    nodeval_run_dir: Path,
) -> Iterator[Attempt]:
    """This attempt: `.run()` the case in the configured mode, `.check()` its assertions.yaml."""
    # Already started in the pool (plugin/ahead.py)
    attempt = request.node.stash.get(ahead_key, None)
    if attempt is not None:
        # Once: a rerun (pytest-rerunfailures) is a new try, run here
        del request.node.stash[ahead_key]
    else:
        from .attempt import new_attempt
        from .budget import shared_budget

        attempt = new_attempt(request.node, nodeval_case, nodeval_settings, nodeval_run_dir)
        # Shared with the fake fixtures, in any order
        attempt.fakes = request.node.stash.setdefault(fakes_key, {})
        attempt.budget = shared_budget(request.config, nodeval_settings, nodeval_run_dir)
    request.node.stash[attempt_key] = attempt
    attempt.skip_if_current()  # --nodeval-record-mode=missing: a current journal is not recorded
    token = attempt.activate()
    yield attempt
    attempt.deactivate(token)


@pytest.fixture
def nodeval_run(nodeval_attempt: Attempt) -> Observed:
    """The observed session (replayed or live, by mode); fails if the replay diverged."""
    return nodeval_attempt.run()


@pytest.fixture
def nodeval_events(nodeval_run: Observed) -> list[Any]:
    """The observed events, in seq order."""
    return nodeval_run.events


@pytest.fixture
def nodeval_world(
    request: pytest.FixtureRequest, nodeval_settings: Settings, nodeval_run_dir: Path
) -> Iterator[Any]:
    """A fresh isolated world for this test (docker, bwrap or local, as configured).

    When the test also runs a case (nodeval_attempt), the engine's tools act on this world.
    """
    from ..errors import NodevalError
    from ..world.select import open_world

    case = (
        request.getfixturevalue("nodeval_case") if "nodeval_case" in request.fixturenames else None
    )
    spec = case.spec.world if case is not None else None
    backend = (spec.backend if spec else None) or (
        None if nodeval_settings.world == "auto" else nodeval_settings.world
    )
    try:
        world = open_world(
            backend,
            run_id=nodeval_run_dir.name,
            network=bool(spec and spec.network),
            seed_dir=case.directory / "input" / "world" if case is not None else None,
            lock_dir=nodeval_run_dir / "_work",
        )
    except NodevalError as exc:
        _fail(request, exc)
    attempt = request.node.stash.get(attempt_key, None)
    if attempt is not None:
        attempt.world = world
    yield world
    world.close()


@pytest.fixture
def nodeval_llm_server(request: pytest.FixtureRequest) -> Iterator[LLMFake]:
    """A started `fakes.llm.LLMFake` (Anthropic and OpenAI HTTP APIs on a loopback port: `.url`).

    Scripted by the bound case's `input/llm.yaml` when the test runs a case (`nodeval_case`)
    and the file exists, else unscripted (every request gets a 400 saying so). A live
    attempt of this test answers `base_url: fake` providers with it; `.requests` lists what
    it received. Stopped at teardown; one per test, so xdist workers never share it.
    """
    yield from _serve_fake(request, "llm")


@pytest.fixture
def nodeval_composio(request: pytest.FixtureRequest) -> Iterator[ComposioFake]:
    """A started `fakes.composio.ComposioFake` (the Composio API the `composio` SDK calls: `.url`).

    Its catalogue is the bound case's `input/composio.yaml` when the test runs a case and
    the file exists, else an empty one (no tools; the default `api_key`). A live attempt of
    this test sends `composio: {base_url: fake}` to it; `.calls` and `.executions` list
    what it received. Stopped at teardown.
    """
    yield from _serve_fake(request, "composio")


@pytest.fixture
def nodeval_mcp(request: pytest.FixtureRequest) -> Iterator[MCPOAuthFake]:
    """A started `fakes.mcp_oauth.MCPOAuthFake`: an OAuth authorization server (`.issuer`) and
    a protected MCP server (`.mcp_url`).

    Scripted by the bound case's `input/mcp.yaml` when the test runs a case and the file
    exists, else the default script (no tools, base scope `mcp:read`). A live attempt of
    this test connects an MCP server with `url: fake` to it; `.events` records every OAuth
    and MCP request, and its fault switches (`expire_access_tokens`, `require_scope`, ...)
    work while the attempt runs. Stopped at teardown.
    """
    yield from _serve_fake(request, "mcp")


def _serve_fake(request: pytest.FixtureRequest, kind: str) -> Iterator[Any]:
    from ..errors import NodevalError
    from ..runner.services import make_fake

    case = (
        request.getfixturevalue("nodeval_case") if "nodeval_case" in request.fixturenames else None
    )
    ref = case_ref(request.node)
    try:
        fake = make_fake(kind, case, seed=getattr(ref, "repeat", None), required=False)
    except NodevalError as exc:
        _fail(request, exc)
    running = request.node.stash.setdefault(fakes_key, {})
    with fake:
        running[kind] = fake
        try:
            yield fake
        finally:
            running.pop(kind, None)


def _fail(request: pytest.FixtureRequest, exc: Exception) -> NoReturn:
    """Fail the test on a NodevalError, marking it an infrastructure error when the machine is
    at fault."""
    if getattr(exc, "infrastructure", False):
        request.node.stash[infra_key] = str(exc)
    from ..text import printable

    raise pytest.fail.Exception(
        printable(str(exc)), pytrace=False
    ) from None  # the message once, unchained
