"""The plugin's fixtures. Each is small and delegates; heavy modules load on first use."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import pytest

from .plugin import attempt_key, cases_key, load_case_cached, run_id_key, settings_key

if TYPE_CHECKING:
    from .attempt import Attempt
    from .case import Case
    from .session import Observed
    from .settings import Settings


@pytest.fixture(scope="session")
def nodeval_settings(pytestconfig: pytest.Config) -> Settings:
    """The resolved run settings (mode, repeat, match, world, report directory, profile)."""
    return pytestconfig.stash[settings_key]


@pytest.fixture(scope="session")
def nodeval_run_dir(pytestconfig: pytest.Config, nodeval_settings: Settings) -> Path:
    """`reports/<run-id>/`, shared by every worker of the run."""
    return nodeval_settings.report_dir / pytestconfig.stash[run_id_key]


@pytest.fixture
def nodeval_case(request: pytest.FixtureRequest) -> Case:
    """The case under test (parametrized: one test per case x repeat)."""
    ref = getattr(request, "param", None)
    if ref is None:
        pytest.fail("nodeval_case is parametrized by the plugin; bind a Python scenario to a case with "
                    "@pytest.mark.nodeval_case('<case-id>')", pytrace=False)
    cases = request.config.stash[cases_key]
    return cases.get(ref.directory) or load_case_cached(request.config, Path(ref.directory))


@pytest.fixture
def nodeval_attempt(request: pytest.FixtureRequest, nodeval_case: Case, nodeval_settings: Settings,
                    nodeval_run_dir: Path) -> Iterator[Attempt]:
    """This attempt: `.run()` the case in the configured mode, `.check()` its assertions.yaml."""
    from .attempt import Attempt

    ref = request.node.callspec.params["nodeval_case"]
    attempt = Attempt(nodeval_case, ref, nodeval_settings, nodeval_run_dir, request.config.rootpath)
    request.node.stash[attempt_key] = attempt
    token = attempt.activate()
    yield attempt
    attempt.deactivate(token)


@pytest.fixture
def nodeval_run(nodeval_attempt: Attempt) -> Observed:
    """The observed session (replayed or live, by mode); fails if the replay diverged."""
    observed = nodeval_attempt.run()
    if observed.divergence:
        pytest.fail(observed.divergence, pytrace=False)
    return observed


@pytest.fixture
def nodeval_events(nodeval_run: Observed) -> list[Any]:
    """The observed events, in seq order."""
    return nodeval_run.events


@pytest.fixture
def nodeval_world(request: pytest.FixtureRequest, nodeval_settings: Settings, nodeval_run_dir: Path) -> Iterator[Any]:
    """A fresh isolated world for this test (docker, bwrap or local, as configured).

    When the test also runs a case (nodeval_attempt), the engine's tools act on this world.
    """
    from .errors import NodevalError
    from .world.select import open_world

    case = request.getfixturevalue("nodeval_case") if "nodeval_case" in request.fixturenames else None
    spec = case.spec.world if case is not None else None
    backend = (spec.backend if spec else None) or (None if nodeval_settings.world == "auto" else nodeval_settings.world)
    try:
        world = open_world(backend, run_id=nodeval_run_dir.name, network=bool(spec and spec.network),
                           seed_dir=case.directory / "input" / "world" if case is not None else None,
                           lock_dir=nodeval_run_dir / "_work")
    except NodevalError as exc:
        pytest.fail(str(exc), pytrace=False)
    attempt = request.node.stash.get(attempt_key, None)
    if attempt is not None:
        attempt.world = world
    yield world
    world.close()
