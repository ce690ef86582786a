"""File access performed by the world itself, through `exec`, as the world's own user.

Going through the world rather than around it means symlinks resolve inside the world
and permissions are the agent's, never the harness's. Backends use these when a direct
path is not available (Docker has no "read one file" call that follows symlinks) or not
safe (a bwrap workspace symlink pointing at the host's files).
"""

from __future__ import annotations

import errno
import os
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import ExecResult

# Distinct exit codes (unused by cat/ls/mkdir themselves) tell the cause apart.
_MISSING, _IS_DIR, _NOT_DIR, _DENIED = 71, 72, 73, 74


@dataclass(frozen=True, slots=True)
class RawResult:
    """One command's outcome with its output still in bytes (a read needs the exact bytes)."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    duration_ms: float
    timed_out: bool = False

    def decoded(self) -> ExecResult:
        return ExecResult(
            exit_code=self.exit_code,
            stdout=self.stdout.decode("utf-8", "replace"),
            stderr=self.stderr.decode("utf-8", "replace"),
            duration_ms=self.duration_ms,
            timed_out=self.timed_out,
        )


READ_SCRIPT = '[ -e "$1" ] || exit 71; [ -d "$1" ] && exit 72; exec cat -- "$1"'
LIST_SCRIPT = '[ -e "$1" ] || exit 71; [ -d "$1" ] || exit 73; cd -- "$1" || exit 74; exec ls -1Ap'
WRITE_SCRIPT = (
    'd=$(dirname -- "$1"); mkdir -p -- "$d" 2>/dev/null || exit 74; '
    '[ -d "$1" ] && exit 72; cat > "$1" || exit 74'
)

RunRaw = Callable[[Sequence[str], float, "bytes | None"], RawResult]
"""A backend's way to run argv in the world: run(argv, timeout_s, stdin)."""

FILE_OP_TIMEOUT_S = 60.0


def run_script(run: RunRaw, script: str, path: str, stdin: bytes | None = None) -> RawResult:
    """Run one of the scripts above with `path` as $1 and raise what the exit code means."""
    result = run(["sh", "-c", script, "nodeval", path], FILE_OP_TIMEOUT_S, stdin)
    raise_for_exit(result, path)
    return result


def raise_for_exit(result: RawResult, path: str) -> None:
    """Turn a failed file script into the OSError that `open()` would have raised."""
    if result.exit_code == 0:
        return
    known: dict[int, tuple[type[OSError], int]] = {
        _MISSING: (FileNotFoundError, errno.ENOENT),
        _IS_DIR: (IsADirectoryError, errno.EISDIR),
        _NOT_DIR: (NotADirectoryError, errno.ENOTDIR),
        _DENIED: (PermissionError, errno.EACCES),
    }
    error_class, code = known.get(result.exit_code, (OSError, errno.EIO))
    stderr = result.stderr.decode("utf-8", "replace").strip()
    if "Permission denied" in stderr or "Read-only file system" in stderr:
        error_class, code = PermissionError, errno.EACCES
    reason = stderr or os.strerror(code)
    raise error_class(code, f"{reason} (exit {result.exit_code} in the world)", path)


def parse_listing(stdout: bytes) -> list[str]:
    """`ls -1Ap` output as the World.list contract wants it: sorted, dirs end with '/'."""
    return sorted(line for line in stdout.decode("utf-8", "replace").split("\n") if line)


def absolute(workdir: str, path: str) -> str:
    """`path` as an absolute, normalised path inside a world whose cwd is workdir."""
    return posixpath.normpath(posixpath.join(workdir, path))


def argv_list(argv: Sequence[str]) -> list[str]:
    """The argv as a fresh list of strings, rejecting the easy mistake of passing one string."""
    if isinstance(argv, (str, bytes)):
        raise TypeError(
            "argv must be a sequence of arguments, not one string; use ['sh', '-c', ...]"
        )
    return [str(arg) for arg in argv]
