"""A cgroup of its own for a bwrap world: caps its processes, memory and CPU as Docker's do.

It is made below the cgroup this process is in (a delegated subtree): in the pids,
memory and cpu hierarchies under cgroup v1, or in the unified hierarchy under v2, where
the parent must already delegate those controllers (an unprivileged user gets that from
systemd's `Delegate=yes`; a v2 cgroup that holds processes cannot start delegating).
Each limit that cannot be set is reported with the reason, never silently dropped.

Directories are named `nodeval-<owner pid>-<owner start>-<id>`, so the worlds of a
killed process are found and removed later (`remove_cgroups_of`, `sweep_stale`).
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import WorldLimits
from .processes import kill, process_alive, process_start

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "nodeval-"
CPU_PERIOD_US = 100_000
LIMITS = ("pids", "memory", "cpus")
_V1_CONTROLLER = {"pids": "pids", "memory": "memory", "cpus": "cpu"}


@dataclass
class WorldCgroup:
    """The cgroup directories of one world (one per v1 hierarchy, or one v2 directory)."""

    dirs: list[Path] = field(default_factory=list)
    enforced: dict[str, str] = field(default_factory=dict)
    """limit name -> how it is enforced (for the world's description)."""
    problems: dict[str, str] = field(default_factory=dict)
    """limit name -> why this cgroup could not set it."""

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for directory in self.dirs:
            try:
                found.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
            except OSError:
                continue
        return found

    def kill_all(self, rounds: int = 50) -> None:
        """SIGKILL everything inside, again until it is empty (a fork may race a kill)."""
        for _ in range(rounds):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                kill(pid)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for directory in self.dirs:
            _rmdir_when_empty(directory)


def open_cgroup(limits: WorldLimits) -> WorldCgroup:
    """A new cgroup with the limits set where the machine allows; `.problems` says where not."""
    name = f"{PREFIX}{os.getpid()}-{process_start(os.getpid()) or 0}-{uuid.uuid4().hex[:8]}"
    if (CGROUP_ROOT / "cgroup.controllers").is_file():
        return _open_v2(name, limits)
    if (CGROUP_ROOT / "pids" / "cgroup.procs").is_file() or (
        CGROUP_ROOT / "memory" / "cgroup.procs"
    ).is_file():
        return _open_v1(name, limits)
    reason = f"no cgroup hierarchy is mounted at {CGROUP_ROOT}"
    return WorldCgroup(problems={limit: reason for limit in LIMITS})


def _open_v1(name: str, limits: WorldLimits) -> WorldCgroup:
    cgroup = WorldCgroup()
    for limit in LIMITS:
        controller = _V1_CONTROLLER[limit]
        base = _own_cgroup_dir(CGROUP_ROOT / controller, _v1_paths().get(controller))
        if base is None:
            cgroup.problems[limit] = f"the cgroup v1 {controller} controller is not mounted"
            continue
        directory = base / name
        try:
            directory.mkdir()
            _write_v1_limit(directory, limit, limits)
        except OSError as exc:
            cgroup.problems[limit] = f"cannot set up {directory}: {exc.strerror or exc}"
            _rmdir_when_empty(directory)
            continue
        cgroup.dirs.append(directory)
        cgroup.enforced[limit] = f"cgroup v1 {controller}"
    return cgroup


def _write_v1_limit(directory: Path, limit: str, limits: WorldLimits) -> None:
    if limit == "pids":
        (directory / "pids.max").write_text(str(limits.pids))
    elif limit == "memory":
        memory = str(limits.memory_mb * 1024 * 1024)
        (directory / "memory.limit_in_bytes").write_text(memory)
        swap = directory / "memory.memsw.limit_in_bytes"
        if swap.exists():  # memory + swap equal to memory: no swap on top, as in Docker
            swap.write_text(memory)
    else:
        (directory / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (directory / "cpu.cfs_quota_us").write_text(str(int(limits.cpus * CPU_PERIOD_US)))


def _open_v2(name: str, limits: WorldLimits) -> WorldCgroup:
    base = _own_cgroup_dir(CGROUP_ROOT, _v1_paths().get(""))
    if base is None:
        return WorldCgroup(
            problems={
                limit: "this process's cgroup v2 directory is not visible" for limit in LIMITS
            }
        )
    directory = base / name
    try:
        directory.mkdir()
        delegated = set((directory / "cgroup.controllers").read_text().split())
    except OSError as exc:
        reason = (
            f"cannot make a cgroup below {base}: {exc.strerror or exc} "
            "(run under a delegated cgroup, e.g. systemd-run --user --scope -p Delegate=yes)"
        )
        return WorldCgroup(problems={limit: reason for limit in LIMITS})
    cgroup = WorldCgroup(dirs=[directory])
    files = {
        "pids": {"pids.max": str(limits.pids)},
        "memory": {"memory.max": str(limits.memory_mb * 1024 * 1024), "memory.swap.max": "0"},
        "cpus": {"cpu.max": f"{int(limits.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}"},
    }
    for limit, writes in files.items():
        controller = _V1_CONTROLLER[limit]
        if controller not in delegated:
            cgroup.problems[limit] = (
                f"the {controller} controller is not delegated to {base} "
                "(its cgroup.subtree_control)"
            )
            continue
        try:
            for file_name, value in writes.items():
                if (directory / file_name).exists():
                    (directory / file_name).write_text(value)
        except OSError as exc:
            cgroup.problems[limit] = (
                f"cannot write {file_name} in {directory}: {exc.strerror or exc}"
            )
            continue
        cgroup.enforced[limit] = f"cgroup v2 {controller}"
    return cgroup


def _v1_paths() -> dict[str, str]:
    """This process's cgroup path per controller ("" is the v2 unified hierarchy)."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _own_cgroup_dir(mount: Path, path: str | None) -> Path | None:
    """This process's cgroup under a mount; the mount itself when the path is not visible
    there (a cgroup namespace, or a container that mounts only its own subtree)."""
    if not (mount / "cgroup.procs").is_file():
        return None
    own = mount / (path or "/").lstrip("/")
    return own if (own / "cgroup.procs").is_file() else mount


def _rmdir_when_empty(directory: Path, tries: int = 100) -> None:
    """rmdir fails with EBUSY while killed tasks are still exiting; wait for them briefly."""
    for _ in range(tries):
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def _world_bases() -> list[Path]:
    """The directories world cgroups are made in (see open_cgroup)."""
    paths = _v1_paths()
    if (CGROUP_ROOT / "cgroup.controllers").is_file():
        bases = [_own_cgroup_dir(CGROUP_ROOT, paths.get(""))]
    else:
        bases = [
            _own_cgroup_dir(CGROUP_ROOT / c, paths.get(c))
            for c in sorted(set(_V1_CONTROLLER.values()))
        ]
    return [base for base in bases if base is not None]


def _all_world_dirs() -> list[Path]:
    return sorted(d for base in _world_bases() for d in base.glob(PREFIX + "*") if d.is_dir())


def _owner(directory: Path) -> tuple[int, str] | None:
    parts = directory.name[len(PREFIX) :].split("-")
    if len(parts) != 3 or not parts[0].isdigit():
        return None
    return int(parts[0]), parts[1]


def remove_cgroups_of(owner_pid: int, owner_start: str) -> list[str]:
    """Empty and remove the world cgroups process `owner_pid` made; their names."""
    removed = []
    for directory in _all_world_dirs():
        if _owner(directory) == (owner_pid, owner_start):
            WorldCgroup(dirs=[directory]).remove()
            removed.append(f"cgroup {directory}")
    return removed


def sweep_stale() -> list[str]:
    """Remove the world cgroups whose owner process is gone (a killed run's)."""
    removed = []
    for directory in _all_world_dirs():
        owner = _owner(directory)
        if owner is not None and not process_alive(owner[0], owner[1]):
            WorldCgroup(dirs=[directory]).remove()
            removed.append(f"cgroup {directory}")
    return removed
