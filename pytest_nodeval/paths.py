"""Checks of what a command line names, shared by `nodeval` and the pytest options.

Each check returns the problem as a phrase (None when there is none), so the caller can say
which option or ini key named the path: a `nodeval` command raises it as a NodevalError, the
plugin as a pytest.UsageError. They run before anything is written, so that a path which
cannot be used stops the command line at once instead of after the run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a count of repeats, runs, cases)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def fraction(text: str) -> float:
    """An argparse type: a number above 0 and at most 1 (a share, such as a drop to detect)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number above 0 and at most 1, got {text!r}")
    return value


def directory_problem(path: Path) -> str | None:
    """Why `path` cannot be (or be made) a directory to write into."""
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a directory"
    blocker = blocking_file(path)
    if blocker is not None:
        return f"{blocker} is a file, not a directory, so {path} cannot be made"
    return None


def existing_directory_problem(path: Path) -> str | None:
    """Why `path` is not a directory that exists (one read from, never made)."""
    if not path.exists():
        return f"{path}: no such directory"
    return None if path.is_dir() else f"{path} is a file, not a directory"


def output_file_problem(path: Path) -> str | None:
    """Why a file cannot be written at `path` (its directory is made when missing)."""
    if path.is_dir():
        return f"{path} is a directory; name a file"
    blocker = blocking_file(path)
    if blocker is not None:
        return f"{blocker} is a file, not a directory, so {path} cannot be written"
    return None


def history_problem(path: Path) -> str | None:
    """Why `path` cannot be a run history: an SQLite file, or one that can be made there."""
    if path.is_dir():
        return f"{path} is a directory, not a run history (an SQLite file)"
    try:
        foreign = path.is_file() and not is_sqlite(path)
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror or exc}"
    if foreign:
        return f"{path} is not an SQLite file, so it cannot be a run history"
    return output_file_problem(path)


def blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of `path`, when it is a file: no directory can be made
    below it."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def is_sqlite(path: Path) -> bool:
    """Whether the file is an SQLite database (an empty file is one SQLite fills in)."""
    with path.open("rb") as handle:
        head = handle.read(len(SQLITE_HEADER))
    return head in (b"", SQLITE_HEADER)


def refuse(option: str, problem: str | None) -> None:
    """Stop a `nodeval` command on a problem with what `option` names, before it writes."""
    if problem is not None:
        from .errors import NodevalError

        raise NodevalError(f"{option}: {problem}")
