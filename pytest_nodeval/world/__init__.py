"""The isolated world an agent's tools act on.

`World` is the plug point: the engine's shell, file and code_exec tools only ever talk to
a World, so the same agent runs against a temporary directory, a bubblewrap sandbox or a
Docker container. Paths given to a world are relative to its working directory unless
they are absolute inside the world.
"""

from __future__ import annotations

import base64
import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import WorldConfigError

KILLED_EXIT_CODE = 137
"""The exit code a sandboxed backend reports for a command it killed (128 + SIGKILL)."""

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sandbox_env(home: str) -> dict[str, str]:
    """The whole environment of a sandboxed world's commands (docker, bwrap), and of bwrap
    itself: fixed values only, so no variable of this process (an API key) reaches the world.
    A case's own variables are added by whoever starts its program (runner/command.py)."""
    return {"PATH": SANDBOX_PATH, "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb"}


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What one command did inside a world."""

    exit_code: int
    stdout: str
    stderr: str
    duration_ms: float
    timed_out: bool = False


@dataclass(frozen=True, slots=True)
class WorldLimits:
    """Resources one world may use; each backend enforces what its mechanism allows."""

    cpus: float = 1.0
    """CPU cores (a CFS quota of the container's, or the bwrap world's, cgroup; without a
    cgroup bwrap cannot cap it and says so)."""
    memory_mb: int = 1024
    """Memory, no swap (the cgroup limit; bwrap without a cgroup: RLIMIT_AS of each process)."""
    pids: int = 256
    """Processes and threads at once (the pids cgroup; bwrap without a cgroup: RLIMIT_NPROC,
    which the kernel does not enforce for root). See docs/worlds.md."""
    exec_timeout_s: float = 300.0
    """The longest one exec may run, whatever timeout the caller asks for."""

    def __post_init__(self) -> None:
        for name in ("cpus", "memory_mb", "pids", "exec_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise WorldConfigError(
                    f"world limit {name} must be a positive number, got {value!r}"
                )

    def timeout_for(self, requested_s: float) -> float:
        """The wall time an exec gets: what the caller asked, capped by exec_timeout_s."""
        return min(requested_s, self.exec_timeout_s)


@runtime_checkable
class World(Protocol):
    """A fresh, isolated place for one attempt's side effects."""

    backend: str
    """"local", "bwrap" or "docker"."""

    workdir: str
    """The directory (inside the world) where commands start and relative paths point."""

    def exec(
        self, argv: Sequence[str], *, timeout_s: float, stdin: bytes | None = None
    ) -> ExecResult:
        """Run argv in workdir; kill it after timeout_s and report timed_out."""
        ...

    def read(self, path: str) -> bytes: ...

    def write(self, path: str, data: bytes) -> None: ...

    def list(self, path: str = ".") -> list[str]:
        """Names in a directory, sorted; directories end with '/'."""
        ...

    def close(self) -> None: ...


def encode_file(data: bytes, max_bytes: int) -> dict[str, object]:
    """The payload of one file in a `world.snapshot` event (text when it is UTF-8)."""
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    try:
        content, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(data).decode("ascii"), "base64"
    return {"exists": True, "content": content, "encoding": encoding, "truncated": truncated}


def snapshot(
    world: World, paths: Sequence[str], max_bytes: int = 65536
) -> dict[str, dict[str, object]]:
    """The final state of the watched paths: a file's content, a directory's listing.

    Written into the journal as `world.snapshot` so assertions about the world's final
    state hold in replay, where no world is started.
    """
    return {path: watched_state(world, path, max_bytes) for path in paths}


def watched_state(world: World, path: str, max_bytes: int = 65536) -> dict[str, object]:
    """One watched path's entry in `world.snapshot`.

    A path that is there but cannot be read (the agent made it mode 000; a symlink loop) is
    recorded as unreadable with the reason: what the agent did to its world is the attempt's
    outcome to judge, never a reason to lose the attempt's end.
    """
    try:
        if path.endswith("/"):
            return {"exists": True, "listing": world.list(path)}
        return encode_file(world.read(path), max_bytes)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return {"exists": False}
    except OSError as exc:
        return {"exists": True, "unreadable": True, "reason": _unreadable_reason(exc)}


def _unreadable_reason(exc: OSError) -> str:
    """The error's own words ("Permission denied"), the same on every backend; the world's
    message only when its code says nothing more than EIO (a command inside failed)."""
    if exc.errno and exc.errno != errno.EIO:
        return os.strerror(exc.errno)
    return exc.strerror or str(exc)
