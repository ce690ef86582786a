"""The SQLite files that every process of a run shares: the money budget, the rate limits.

They run in WAL mode, so readers never wait for the one writer. Turning a file to WAL takes
an exclusive lock for a moment, and when several processes open a new file at once SQLite may
answer "database is locked" straight away, without waiting out its busy timeout (it does so
where waiting could deadlock). Seen when xdist workers opened the budget together: the attempt
failed. So the switch is retried here, within the same timeout.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import disk_full, no_room

BUSY_TIMEOUT_S = 60.0
_RETRY_S = 0.01


def connect_shared(path: Path, timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A connection in autocommit mode (callers BEGIN IMMEDIATE themselves) to a WAL file.

    A disk with no room for the file (or its WAL) raises DiskFullError naming it: the
    machine's fault, which fails the attempt as an infrastructure error, not the agent's.
    """
    try:
        return _connect_wal(path, timeout_s)
    except (sqlite3.Error, OSError) as exc:
        if no_room(exc, path):
            raise disk_full(exc, path) from None
        raise


@contextmanager
def written(path: Path) -> Iterator[None]:
    """Around a transaction on a shared file: a disk that fills up after the file was opened
    raises DiskFullError naming it, as opening does, not SQLite's "database or disk is full"
    as though the attempt had failed."""
    try:
        yield
    except sqlite3.Error as exc:
        if no_room(exc, path):
            raise disk_full(exc, path) from None
        raise


def _connect_wal(path: Path, timeout_s: float) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return db
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                db.close()
                raise
            time.sleep(_RETRY_S)
