"""Processes on this host: whether an owner is still alive, and killing what a world started.

Linux /proc is read where it exists; elsewhere a pid is trusted alone and no marked
process is found.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

WORLD_MARK_ENV = "NODEVAL_WORLD"
"""Set in every command the local world starts: `<owner pid>:<owner start>:<world id>`.

A command that leaves its process group (setsid, a daemon) keeps its environment, so
this mark is how the world, or whoever watched its owner die, finds it again."""


def process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields after it are plain.
    return stat.rsplit(")", 1)[1].split()


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    fields = process_stat(pid)
    return fields[19] if fields else None


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it is just someone else's
    return True


def process_alive(pid: int, recorded_start: str = "") -> bool:
    """Whether `pid` runs and is the process that had `recorded_start` ("" = any).

    A zombie is dead: it has exited and only waits for its parent to read its status,
    so whatever it owned is abandoned. A reused pid has another start time; without
    /proc the pid alone is trusted.
    """
    if pid <= 0 or not pid_exists(pid):
        return False
    fields = process_stat(pid)
    if fields is None:
        return True
    if fields[0] in ("Z", "X"):  # zombie, or dead and being reaped
        return False
    return recorded_start == "" or recorded_start == fields[19]


def owner_mark(owner_pid: int | None = None) -> str:
    """`<pid>:<start>` of the owner (this process by default): the prefix of its world marks."""
    pid = os.getpid() if owner_pid is None else owner_pid
    return f"{pid}:{process_start(pid) or ''}"


def marked_processes(prefix: str) -> list[int]:
    """Pids whose environment has WORLD_MARK_ENV starting with `prefix`."""
    needle = f"{WORLD_MARK_ENV}={prefix}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            entries = environ.read_bytes().split(b"\0")
        except OSError:
            continue  # ended while we looked, or not ours to read
        if any(entry.startswith(needle) for entry in entries):
            found.append(int(environ.parent.name))
    return [pid for pid in found if pid != os.getpid()]


def kill_marked(prefix: str, rounds: int = 20) -> int:
    """SIGKILL every process marked with `prefix`, again until none is left; how many were killed.

    Several rounds, because a process killed in one may have forked just before it.
    """
    killed: set[int] = set()
    for _ in range(rounds):
        pids = [pid for pid in marked_processes(prefix) if process_alive(pid)]
        if not pids:
            break
        for pid in pids:
            kill(pid)
        killed.update(pids)
    return len(killed)


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal one process; one already gone (or not ours) is left be."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the process group `pid` leads; one already gone (or no group) is left be."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
