"""The world through the plugin: a live case's final state replays with no world, and a
killed run's containers are gone after the next run starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_nodeval.report.models import RunReport
from tests.conftest import PYTEST_ADDOPTS

from ..conftest import write_case
from .conftest import require_backend

WRITER = [
    {
        "tool_calls": [
            {
                "name": "shell",
                "args": {"command": "echo 'built 3 widgets' > out.txt && cat out.txt"},
            }
        ]
    },
    {"text": "Done: out.txt says how many widgets were built."},
]


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_live_recording_replays_world_assertions_with_no_world(
    backend: str, nodeval_project: pytest.Pytester
) -> None:
    require_backend(backend)
    write_case(
        nodeval_project.path / "scenarios",
        "widgets",
        script=WRITER,
        inputs=["Build the widgets."],
        tools=["shell"],
        case={"world": {"watch": ["out.txt"]}},
        record=False,
        assertions=[{"kind": "world_file_contains", "path": "out.txt", "text": "3 widgets"}],
    )
    recorded = nodeval_project.runpytest("--nodeval-mode", "record", "--nodeval-world", backend)
    recorded.assert_outcomes(passed=1)
    live = RunReport.model_validate_json(
        (nodeval_project.path / "reports/latest/report.json").read_bytes()
    )
    assert live.case("widgets").attempts[0].world_backend == backend
    replayed = nodeval_project.runpytest()  # deterministic: no world is started
    replayed.assert_outcomes(passed=1)
    report = RunReport.model_validate_json(
        (nodeval_project.path / "reports/latest/report.json").read_bytes()
    )
    assert report.case("widgets").attempts[0].world_backend is None
    assert report.case("widgets").attempts[0].assertions[0].status == "passed"


def _run_ids_of_world_containers(owner_pid: int) -> set[str]:
    """Run ids of the world containers that process `owner_pid` started.

    Filtered by owner because other tests of the suite (on other xdist workers) have live
    world containers of their own at the same time, which no cleanup may remove.
    """
    import docker

    client = docker.from_env()
    containers = client.containers.list(
        all=True, filters={"label": ["nodeval.managed=true", f"nodeval.pid={owner_pid}"]}
    )
    return {c.labels.get("nodeval.run-id", "") for c in containers}


def test_a_killed_run_leaves_no_container_after_the_next_run(tmp_path: Path) -> None:
    require_backend("docker")
    project = tmp_path / "project"
    write_case(
        project / "scenarios",
        "sleepy",
        tools=["shell"],
        inputs=["wait"],
        record=False,
        assertions=[],
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": "sleep 120"}}]},
            {"text": "done"},
        ],
    )
    (project / "pytest.ini").write_text(
        "[pytest]\ntestpaths = scenarios\naddopts = -p no:hypothesispytest\n"
    )
    env = {**os.environ, "PYTEST_ADDOPTS": PYTEST_ADDOPTS}
    first = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--nodeval-mode", "live", "--nodeval-world", "docker"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    before = set()
    while time.monotonic() < deadline and not before:
        time.sleep(0.5)
        before = _run_ids_of_world_containers(first.pid)
    assert before, "the first run never started its world container"
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert before <= _run_ids_of_world_containers(first.pid)  # SIGKILL left the container behind
    write_case(
        project / "scenarios",
        "sleepy",
        tools=["shell"],
        inputs=["wait"],
        record=False,
        assertions=[],
        script=[{"text": "nothing to do"}],
    )
    second = subprocess.run(
        [sys.executable, "-m", "pytest", "--nodeval-mode", "live", "--nodeval-world", "docker"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Other tests of the suite (live runs, the cleanup tests) may clean up stale worlds too,
    # so which run removed it is not checked: only that it is gone once this one has started.
    assert second.returncode == 0, second.stdout[-2000:]
    assert not (before & _run_ids_of_world_containers(first.pid))
