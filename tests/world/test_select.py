"""Choosing a backend: auto order, explicit names, clear refusals, the local warning."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pytest_nodeval.errors import NodevalWarning, WorldError
from pytest_nodeval.world import World, WorldLimits, select
from pytest_nodeval.world.local import LocalWorld
from pytest_nodeval.world.select import choose_backend, open_world, warn_local_isolates_nothing


def fake_problems(monkeypatch: pytest.MonkeyPatch, **problems: str | None) -> None:
    """Pretend each named backend has that problem (None: it works)."""
    monkeypatch.setattr(select, "backend_problem", lambda name: problems.get(name))


@pytest.mark.parametrize(
    ("problems", "chosen"),
    [
        ({}, "docker"),
        ({"docker": "no engine"}, "bwrap"),
        ({"docker": "no engine", "bwrap": "no bwrap binary"}, "local"),
    ],
)
def test_auto_prefers_docker_then_bwrap_then_local(
    monkeypatch: pytest.MonkeyPatch, problems: dict[str, str], chosen: str
) -> None:
    fake_problems(monkeypatch, **problems)
    assert choose_backend(None) == chosen
    assert choose_backend("auto") == chosen


def test_an_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(
        WorldError, match=r"unknown world backend 'podman'; valid names: auto, docker, bwrap, local"
    ):
        choose_backend("podman")


def test_an_unavailable_explicit_backend_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_problems(
        monkeypatch, docker="the Docker engine at unix:///var/run/docker.sock did not answer"
    )
    with pytest.raises(WorldError) as caught:
        choose_backend("docker")
    message = str(caught.value)
    assert "'docker' is not available" in message and "did not answer" in message
    assert "auto, docker, bwrap, local" in message


def test_probes_run_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # The module select's lazy import will find: a pytester run in this process may have
    # dropped the one the package attribute still names (`from ..world import bwrap`).
    bwrap = importlib.import_module("pytest_nodeval.world.bwrap")
    calls: list[str] = []
    monkeypatch.setattr(bwrap, "bwrap_problem", lambda: calls.append("probe") or "absent")
    select.backend_problem.cache_clear()
    try:
        assert select.backend_problem("bwrap") == select.backend_problem("bwrap") == "absent"
        assert calls == ["probe"]
    finally:
        select.backend_problem.cache_clear()  # drop the fake answer


def test_the_local_world_warns_once_that_it_isolates_nothing(tmp_path: Path) -> None:
    warn_local_isolates_nothing.cache_clear()
    with pytest.warns(NodevalWarning, match="isolates nothing"):
        first = open_world("local", run_id="r1")
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        second = open_world("local", run_id="r1")
    assert [w for w in later if issubclass(w.category, NodevalWarning)] == []
    for world in (first, second):
        assert isinstance(world, LocalWorld) and isinstance(world, World)
        world.close()


def test_open_world_opens_each_available_backend(
    available_backend: str, seed_dir: Path, run_id: str, request: pytest.FixtureRequest
) -> None:
    image = request.getfixturevalue("world_image") if available_backend == "docker" else None
    world = open_world(available_backend, run_id=run_id, seed_dir=seed_dir, image=image)
    try:
        assert world.backend == available_backend
        assert world.exec(["cat", "hello.txt"], timeout_s=30).stdout == "hello from the seed\n"
    finally:
        world.close()


@pytest.mark.parametrize(("ci", "outcome"), [("", "1 skipped"), ("true", "1 error")])
def test_a_missing_backend_skips_locally_and_fails_in_ci(ci: str, outcome: str) -> None:
    env = {**os.environ, "CI": ci, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    if not ci:
        env.pop("CI")
    test_id = "tests/world/test_isolation.py::test_stdin_reaches_the_command[docker]"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            test_id,
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-rsf",
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
        env=env,
    )
    assert outcome in done.stdout, done.stdout
    assert "docker world unavailable" in done.stdout
    assert (done.returncode != 0) == bool(ci)  # a setup failure fails the CI run


@pytest.mark.parametrize(
    "bad", [{"cpus": 0}, {"memory_mb": -1}, {"pids": 0}, {"exec_timeout_s": 0}]
)
def test_limits_must_be_positive(bad: dict[str, float]) -> None:
    name = next(iter(bad))
    with pytest.raises(WorldError, match=f"world limit {name} must be a positive number"):
        WorldLimits(**bad)


def test_importing_the_world_package_loads_no_docker_code() -> None:
    program = (
        "import sys, pytest_nodeval.world, pytest_nodeval.world.select, "
        "pytest_nodeval.world.docker, pytest_nodeval.world.bwrap, pytest_nodeval.world.image\n"
        "print(sorted(m for m in ('docker', 'testcontainers', 'requests') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[]"
