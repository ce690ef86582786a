"""Fixtures for the world backends' tests: real Docker and real bubblewrap.

A backend missing on a developer's machine skips its tests with the reason; in CI
(the CI variable is set) a missing backend fails them, so CI never passes by skipping.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_nodeval.errors import WorldError
from pytest_nodeval.world import World, WorldLimits, select

SANDBOXED = ["docker", "bwrap"]


def unavailable(reason: str) -> None:
    """Skip on a developer machine; fail in CI, where every backend must be present."""
    if os.environ.get("CI"):
        pytest.fail(
            f"{reason} (CI is set, so a missing backend is a failure, not a skip)", pytrace=False
        )
    pytest.skip(reason)


def require_backend(name: str) -> None:
    problem = select.backend_problem(name)
    if problem is not None:
        unavailable(f"{name} world unavailable: {problem}")


@pytest.fixture(scope="session")
def run_id() -> str:
    """One run id per test process, as the plugin gives one per pytest run."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def world_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The world image, built at most once across xdist workers (they share the lock dir)."""
    require_backend("docker")
    from pytest_nodeval.world.image import ensure_image

    try:
        return ensure_image(lock_dir=tmp_path_factory.getbasetemp().parent).tag
    except WorldError as exc:
        unavailable(f"docker world image unavailable: {exc}")
        raise  # unreachable: unavailable() always raises


@pytest.fixture
def seed_dir(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    (seed / "docs").mkdir(parents=True)
    (seed / "hello.txt").write_text("hello from the seed\n")
    (seed / "docs" / "notes.md").write_text("# notes\n")
    return seed


MakeWorld = Callable[..., World]


@pytest.fixture
def make_world(request: pytest.FixtureRequest, run_id: str) -> Iterator[MakeWorld]:
    """make_world(backend, seed_dir=None, limits=None, network=False): closed after the test
    (local: only seed_dir)."""
    opened: list[World] = []

    def make(
        backend: str,
        *,
        seed_dir: Path | None = None,
        limits: WorldLimits | None = None,
        network: bool = False,
    ) -> World:
        world = _open(request, backend, run_id, seed_dir, limits, network)
        opened.append(world)
        return world

    yield make
    for world in opened:
        world.close()


def _open(
    request: pytest.FixtureRequest,
    backend: str,
    run_id: str,
    seed_dir: Path | None,
    limits: WorldLimits | None,
    network: bool,
) -> World:
    require_backend(backend)
    if backend == "local":
        from pytest_nodeval.world.local import LocalWorld

        return LocalWorld(seed_dir)
    if backend == "docker":
        from pytest_nodeval.world.docker import DockerWorld

        image = request.getfixturevalue("world_image")
        return DockerWorld(image, run_id=run_id, seed_dir=seed_dir, limits=limits, network=network)
    from pytest_nodeval.world.bwrap import BwrapWorld

    return BwrapWorld(seed_dir=seed_dir, limits=limits, network=network)


@pytest.fixture(params=SANDBOXED)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def available_backend(backend: str) -> str:
    """`backend`, once it is known to work here (else skipped, or failed in CI)."""
    require_backend(backend)
    return backend


@pytest.fixture
def world(make_world: MakeWorld, backend: str, seed_dir: Path) -> World:
    return make_world(backend, seed_dir=seed_dir)
