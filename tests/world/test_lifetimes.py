"""No world outlives its attempt, whichever entry point opened it and however it ended.

Each test runs an entry point (pytest, `nodeval record`, `nodeval inspect-mode`) as a
process whose agent starts commands tagged with a unique marker, one of them detached
with `setsid`; afterwards it counts what is left of them on this host: processes
carrying the marker (a container's or sandbox's processes are host processes too),
world containers labelled with the owner's pid, and world cgroups named after it.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import PYTEST_ADDOPTS

from ..conftest import PROJECT_INI, write_case
from .conftest import require_backend

BACKENDS = ["docker", "bwrap", "local"]
CLI = [sys.executable, "-m", "pytest_nodeval.cli"]
START_TIMEOUT_S = 180  # a busy machine may need long to start an interpreter and a world


@pytest.fixture(params=BACKENDS)
def any_backend(request: pytest.FixtureRequest) -> str:
    require_backend(str(request.param))
    return str(request.param)


@pytest.fixture
def marker() -> str:
    """A sleep duration no other test uses: its command line tells our processes apart."""
    return f"7{random.randrange(10**8):08d}"


def agent_commands(marker: str, *, foreground: bool) -> str:
    """A detached background sleep, and (if foreground) one the command waits on."""
    detached = f"setsid sleep {marker} >/dev/null 2>&1 < /dev/null &"
    return f"{detached} sleep {marker}" if foreground else f"{detached} echo started"


def project_with_case(root: Path, marker: str, *, foreground: bool) -> Path:
    project = root / "project"
    write_case(
        project / "scenarios",
        "lingering",
        tools=["shell"],
        inputs=["go"],
        record=False,
        assertions=[],
        script=[
            {
                "tool_calls": [
                    {
                        "name": "shell",
                        "args": {"command": agent_commands(marker, foreground=foreground)},
                    }
                ]
            },
            {"text": "done"},
        ],
    )
    (project / "pytest.ini").write_text(PROJECT_INI)
    return project


def entry_command(entry: str, backend: str) -> list[str]:
    if entry == "pytest":
        return [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--nodeval-mode",
            "live",
            "--nodeval-world",
            backend,
        ]
    return [*CLI, "record", "scenarios/lingering", "--force", "--world", backend]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    return {**env, "PYTEST_ADDOPTS": PYTEST_ADDOPTS}


# -- what is left ------------------------------------------------------------------------


def marked_pids(marker: str) -> dict[int, str]:
    """Processes whose command line runs our marked sleep, by pid."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if f"sleep {marker}" in text:
            found[int(cmdline.parent.name)] = text.strip()
    return found


def marked_processes(marker: str) -> list[str]:
    return sorted(marked_pids(marker).values())


def world_things_of(owner_pid: int) -> list[str]:
    """World containers and cgroups process `owner_pid` made that still exist."""
    from pytest_nodeval.world import cgroup
    from pytest_nodeval.world.select import backend_problem

    things = [
        f"cgroup {d}"
        for d in cgroup._all_world_dirs()
        if (cgroup._owner(d) or (0, ""))[0] == owner_pid
    ]
    if backend_problem("docker") is None:
        import docker

        client = docker.from_env()
        labels = ["nodeval.managed=true", f"nodeval.pid={owner_pid}"]
        things += [
            f"container {c.name}"
            for c in client.containers.list(all=True, filters={"label": labels})
        ]
        client.close()
    return things


def leftovers(marker: str, owner_pids: list[int], within_s: float = 5.0) -> list[str]:
    """What is still there; killed processes may take a moment to be reaped, so look again
    briefly."""
    deadline = time.monotonic() + within_s
    while True:
        left = marked_processes(marker) + [t for pid in owner_pids for t in world_things_of(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def wait_for_marker(proc: subprocess.Popen[bytes], marker: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not marked_processes(marker):
        assert proc.poll() is None, (
            f"the entry point ended (exit {proc.returncode}) before its command started"
        )
        assert time.monotonic() < deadline, "the agent's command never started"
        time.sleep(0.1)


def descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        for children in Path(f"/proc/{queue.pop()}/task").glob("*/children"):
            try:
                kids = [int(p) for p in children.read_text().split()]
            except OSError:
                continue
            found += kids
            queue += kids
    return found


@pytest.fixture
def reap_on_failure(marker: str) -> Iterator[None]:
    """Whatever a failing test leaves is killed, so one failure does not slow the rest."""
    yield
    for pid in marked_pids(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# -- pytest and nodeval record -------------------------------------------------------------


# Both entry points close worlds through run_case; `nodeval record` once, with the local
# world, whose detached commands only `close` kills; pytest with every backend.
ENDED = [("pytest", "docker"), ("pytest", "bwrap"), ("pytest", "local"), ("record", "local")]
# SIGTERM: each entry point's own process gets it.
TERMINATED = [
    ("pytest", "docker"),
    ("pytest", "bwrap"),
    ("pytest", "local"),
    ("record", "docker"),
    ("record", "local"),
]


@pytest.mark.parametrize(("entry", "backend"), ENDED, ids=[f"{e}-{b}" for e, b in ENDED])
def test_an_attempt_that_ends_leaves_nothing(
    entry: str, backend: str, marker: str, tmp_path: Path, reap_on_failure: None
) -> None:
    require_backend(backend)
    project = project_with_case(tmp_path, marker, foreground=False)
    proc = subprocess.Popen(
        entry_command(entry, backend),
        cwd=project,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out.decode()[-3000:]
    assert leftovers(marker, [proc.pid]) == []


@pytest.mark.parametrize(("entry", "backend"), TERMINATED, ids=[f"{e}-{b}" for e, b in TERMINATED])
def test_sigterm_mid_attempt_leaves_nothing(
    entry: str, backend: str, marker: str, tmp_path: Path, reap_on_failure: None
) -> None:
    require_backend(backend)
    project = project_with_case(tmp_path, marker, foreground=True)
    proc = subprocess.Popen(
        entry_command(entry, backend),
        cwd=project,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_marker(proc, marker)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGTERM  # the signal still ends the process as it would have
    assert leftovers(marker, [proc.pid]) == []


# -- inspect-mode ---------------------------------------------------------------------------


def inspect_request(tmp_path: Path, marker: str, timeout_s: float) -> bytes:
    import json

    config = {
        "providers": [
            {
                "name": "mock",
                "model": "mock-1",
                "script": [
                    {
                        "tool_calls": [
                            {
                                "name": "shell",
                                "args": {"command": agent_commands(marker, foreground=True)},
                            }
                        ]
                    },
                    {"text": "done"},
                ],
            }
        ],
        "system_prompt": "You run commands.",
        "tools": ["shell"],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return json.dumps(
        {"schema": 1, "config_path": str(path), "user_input": "go", "timeout_s": timeout_s}
    ).encode()


def start_inspect(
    tmp_path: Path, marker: str, backend: str, timeout_s: float
) -> subprocess.Popen[bytes]:
    (tmp_path / "request.json").write_bytes(inspect_request(tmp_path, marker, timeout_s))
    with (tmp_path / "request.json").open("rb") as stdin:
        return subprocess.Popen(
            [*CLI, "inspect-mode"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**clean_env(), "NODEVAL_WORLD": backend},
        )


def test_an_inspect_mode_timeout_leaves_nothing(
    any_backend: str, marker: str, tmp_path: Path, reap_on_failure: None
) -> None:
    # Long enough for a busy machine to start the worker, a world and the command in it.
    nodeval = start_inspect(tmp_path, marker, any_backend, timeout_s=25)
    wait_for_marker(nodeval, marker)
    workers = descendants(nodeval.pid)
    out, _ = nodeval.communicate(timeout=300)
    assert b'"timeout"' in out, out[-2000:]
    assert leftovers(marker, [nodeval.pid, *workers]) == []


def test_sigterm_to_inspect_mode_leaves_nothing(
    any_backend: str, marker: str, tmp_path: Path, reap_on_failure: None
) -> None:
    nodeval = start_inspect(tmp_path, marker, any_backend, timeout_s=600)
    wait_for_marker(nodeval, marker)
    workers = descendants(nodeval.pid)
    nodeval.send_signal(signal.SIGTERM)
    nodeval.wait(timeout=120)
    assert nodeval.returncode == -signal.SIGTERM
    assert leftovers(marker, [nodeval.pid, *workers]) == []
