"""Containers a killed run leaves behind are removed; live runs' containers never are."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from pytest_nodeval.world import World
from pytest_nodeval.world.docker import (
    LABEL_HOST,
    LABEL_MANAGED,
    LABEL_PID,
    LABEL_PID_START,
    LABEL_RUN_ID,
    LABEL_STARTED_AT,
    DockerWorld,
    cleanup_stale,
    docker_client,
    is_stale,
    owner_labels,
    remove_worlds,
)

MakeWorld = Callable[..., World]

# A stand-in for a pytest worker: opens a world, reports it, then waits to be killed.
_KILLED_RUN = textwrap.dedent(
    """
    import sys, time
    from pytest_nodeval.world.docker import DockerWorld
    world = DockerWorld(sys.argv[1], run_id=sys.argv[2])
    print(world.container_id, flush=True)
    time.sleep(600)
    """
)


def container_exists(container_id: str) -> bool:
    from docker.errors import NotFound

    try:
        docker_client().containers.get(container_id)
    except NotFound:
        return False
    return True


@pytest.fixture
def killed_run_container(world_image: str) -> Iterator[str]:
    """The id of a world whose owner was SIGKILLed, as a crashed pytest run leaves it."""
    owner = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, world_image, f"killed-{uuid.uuid4().hex[:8]}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    container_id = owner.stdout.readline().strip()
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert container_id and container_exists(container_id)
    yield container_id
    if container_exists(container_id):  # the test failed before cleaning up: do not leak it
        docker_client().containers.get(container_id).remove(force=True)


def test_worlds_carry_run_and_owner_labels(make_world: MakeWorld, run_id: str) -> None:
    world = make_world("docker")
    assert isinstance(world, DockerWorld)
    labels = docker_client().containers.get(world.container_id).labels
    assert labels[LABEL_MANAGED] == "true"
    assert labels[LABEL_RUN_ID] == run_id
    assert labels[LABEL_PID] == str(os.getpid())
    assert labels[LABEL_HOST] == socket.gethostname()


def test_close_removes_the_container(make_world: MakeWorld) -> None:
    world = make_world("docker")
    assert isinstance(world, DockerWorld)
    world.close()
    assert not container_exists(world.container_id)
    world.close()  # closing twice is harmless


def test_cleanup_removes_a_killed_runs_world_and_keeps_live_ones(
    killed_run_container: str, make_world: MakeWorld, run_id: str, world_image: str
) -> None:
    killed_name = docker_client().containers.get(killed_run_container).name
    mine = make_world("docker")
    assert isinstance(mine, DockerWorld)
    # Another run that is still alive (owned by this very process) must survive too.
    other_live_run = DockerWorld(world_image, run_id=f"other-{uuid.uuid4().hex[:8]}")
    try:
        removed = cleanup_stale(keep_run_id=run_id)
        # A live pytest run elsewhere in the suite cleans up stale worlds host-wide at its
        # start and may have removed it first; either way it must be gone now.
        assert killed_name in removed or killed_name not in _all_world_names()
        # Another run's sweep may still be removing it (gone from the list, not yet from the
        # engine): it must be gone within moments.
        deadline = time.monotonic() + 10
        while container_exists(killed_run_container) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not container_exists(killed_run_container)
        assert container_exists(mine.container_id)
        assert container_exists(other_live_run.container_id)
    finally:
        other_live_run.close()


def test_remove_worlds_of_one_run_leaves_the_rest(make_world: MakeWorld, world_image: str) -> None:
    doomed_run = f"doomed-{uuid.uuid4().hex[:8]}"
    doomed = DockerWorld(world_image, run_id=doomed_run)
    kept = make_world("docker")
    assert isinstance(kept, DockerWorld)
    assert len(remove_worlds(doomed_run)) == 1
    assert not container_exists(doomed.container_id)
    assert container_exists(kept.container_id)
    doomed.close()  # already gone: close stays quiet


# --- the staleness rule itself (no engine needed) ---------------------------------------


def test_this_runs_containers_are_never_stale() -> None:
    labels = {**owner_labels("run-a"), LABEL_PID: "999999999"}
    assert not is_stale(labels, keep_run_id="run-a", now=time.time(), foreign_max_age_s=60)
    assert is_stale(labels, keep_run_id="run-b", now=time.time(), foreign_max_age_s=60)


def test_a_live_owner_on_this_host_keeps_its_container() -> None:
    labels = owner_labels("run-a")  # owned by this live process
    assert not is_stale(labels, keep_run_id="run-b", now=time.time(), foreign_max_age_s=60)


def test_a_reused_pid_does_not_look_alive() -> None:
    labels = {**owner_labels("run-a"), LABEL_PID_START: "1"}  # same pid, other start time
    assert is_stale(labels, keep_run_id=None, now=time.time(), foreign_max_age_s=60)


def test_another_hosts_container_is_stale_only_when_old() -> None:
    labels = {**owner_labels("run-a"), LABEL_HOST: "some-other-ci-machine"}
    started = float(labels[LABEL_STARTED_AT])
    assert not is_stale(labels, keep_run_id=None, now=started + 30, foreign_max_age_s=60)
    assert is_stale(labels, keep_run_id=None, now=started + 120, foreign_max_age_s=60)


def _all_world_names() -> set[str]:
    return {
        c.name
        for c in docker_client().containers.list(
            all=True, filters={"label": "nodeval.managed=true"}
        )
    }


def test_a_zombie_owner_counts_as_gone() -> None:
    """An owner that exited but was never reaped by its parent owns nothing any more."""
    from pathlib import Path

    zombie = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)
        labels = {
            **owner_labels("zombie-run"),
            LABEL_PID: str(zombie.pid),
            LABEL_PID_START: Path(f"/proc/{zombie.pid}/stat")
            .read_text()
            .rsplit(")", 1)[1]
            .split()[19],
        }
        assert is_stale(labels, keep_run_id=None, now=time.time(), foreign_max_age_s=3600)
    finally:
        zombie.wait()
