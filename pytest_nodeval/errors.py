"""Errors and warnings raised by pytest-nodeval.

Every error meant for a user names the file, field or value at fault and what would be
valid, so the plugin can show it without a traceback from inside the library.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

import pytest


class NodevalError(Exception):
    """Base class for errors a user can act on (bad input, missing parts)."""

    infrastructure = False
    """True when the machine, a provider or a key is at fault, never the agent: an attempt that
    stops on such an error is an infrastructure error, counted apart from every pass rate."""


class CaseFormatError(NodevalError):
    """A case file (case.yaml, assertions.yaml, input/*.yaml) is malformed."""


class ConfigError(NodevalError):
    """An option, ini key, profile or engine config has a bad value."""


class JournalError(NodevalError):
    """A journal is missing, unreadable or of an unknown schema version."""


class ReplayDivergence(NodevalError):
    """The agent did something the recorded journal did not, so replay cannot continue."""

    def __init__(self, message: str, *, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq
        """The seq of the recorded event the agent did otherwise than, when there is one (a
        request or a tool call that differs); the reports mark that event. The replay numbers
        its events as the recording did up to there."""


class WorldError(NodevalError):
    """An isolated world could not be started or used (no engine, no image, a failed exec)."""

    infrastructure = True


class WorldConfigError(WorldError, ConfigError):
    """A world setting has a bad value: the case's or the command line's mistake."""

    infrastructure = False


class ProviderError(NodevalError):
    """Every provider in the chain failed, a provider (or the judge) cannot be reached, or it
    has no API key."""

    infrastructure = True


class DiskFullError(NodevalError, OSError):
    """A file could not be written for lack of room: a full disk, a quota, a read-only mount.

    The machine's fault, never the agent's: a recording that stops on it is an infrastructure
    error (exit status 7), and the golden journal is left as it was. An OSError too, so code
    that handles a failed write (`except OSError`) still handles this one.
    """

    infrastructure = True


NO_ROOM_LINE = re.compile(
    r"cannot write .*: its (disk is full|disk quota is used up|file system is read-only)"
)
"""How a DiskFullError's message reads: how a parent finds it in a child process's output."""
NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""What writing a file can fail with when the disk, not the file, is at fault."""
_SQLITE_FULL = 13  # sqlite3.SQLITE_FULL, which the sqlite3 module of Python 3.11 lacks
_SQLITE_IOERR = 10  # the primary code of every SQLITE_IOERR_* extended code
_NEARLY_FULL = 1 << 16
"""Free bytes under which a SQLite I/O error is taken for a full disk."""


def no_room(exc: BaseException, path: Path | None = None) -> bool:
    """Whether an error out of writing a file means there is no room to write it (`path`, the
    file: SQLite says "disk I/O error" when its shared-memory file has no room, so for SQLite an
    I/O error on a disk with next to nothing free counts too)."""
    if isinstance(exc, DiskFullError):
        return True
    if isinstance(exc, shutil.Error):  # copytree gathers its files' errors as text
        return any(f"[Errno {code}]" in str(exc) for code in NO_ROOM_ERRNOS)
    if isinstance(exc, OSError):
        return exc.errno in NO_ROOM_ERRNOS
    if type(exc).__module__ == "sqlite3":  # not imported here: most runs never open a database
        code = getattr(exc, "sqlite_errorcode", None) or 0
        if code == _SQLITE_FULL or "disk is full" in str(exc):
            return True
        if code & 0xFF != _SQLITE_IOERR or path is None:
            return False
        free = _free_bytes(path)
        return free is not None and free < _NEARLY_FULL
    return False


def disk_full(
    exc: BaseException, path: Path, needed: int | None = None, *, more: bool = False
) -> DiskFullError:
    """The one-line error for `exc` (see `no_room`): the path, what is wrong, and the space
    needed when known (the size of a journal being installed, say; `more`: at least that, as
    for a journal that filled the disk while it was being written)."""
    if isinstance(exc, DiskFullError):
        return exc
    code = getattr(exc, "errno", None)
    if code == errno.EROFS:
        error = DiskFullError(f"cannot write {path}: its file system is read-only")
    else:
        what = "its disk quota is used up" if code == errno.EDQUOT else "its disk is full"
        free = _free_bytes(path)
        about = "more than" if more else "about"
        room = [f"needs {about} {human_size(needed)}"] if needed else []
        room += [f"{human_size(free)} free"] if free is not None else []
        detail = f" ({', '.join(room)})" if room else ""
        error = DiskFullError(f"cannot write {path}: {what}{detail}; free some space and run again")
    error.errno = code if code in NO_ROOM_ERRNOS else errno.ENOSPC
    return error


def human_size(size: int) -> str:
    """1536 -> '1.5 KB', 195_000_000 -> '195 MB' (decimal units, as `df -H` and file managers)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            break
        value /= 1000
    return f"{value:.0f} {unit}" if unit == "B" or value >= 10 else f"{value:.1f} {unit}"


def _free_bytes(path: Path) -> int | None:
    for candidate in (path, *path.parents):
        if os.path.isdir(candidate):
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None


class NodevalWarning(pytest.PytestWarning):
    """Soft problems: unknown journal events, stale cases, a world that isolates nothing."""
