"""Processes opening one new shared SQLite file at once all get it in WAL mode.

Without the retry in connect_shared, about one opening in twenty-five failed here with
"database is locked" when six processes opened a new file together (SQLite refuses the WAL
switch at once rather than wait where waiting could deadlock): an xdist worker's attempt
then failed on the run's budget.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from pytest_nodeval.shared_db import connect_shared

PROCESSES = 6
ROUNDS = 20


def _open(path: str, barrier: Any, answers: Any) -> None:
    barrier.wait()
    try:
        db = connect_shared(Path(path))
        db.executescript("CREATE TABLE IF NOT EXISTS t (x)")
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
        db.close()
        answers.put(mode)
    except Exception as exc:  # reported, not raised: the parent asserts on every answer
        answers.put(repr(exc))


def test_processes_opening_a_new_file_together_all_succeed(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    answers: list[str] = []
    for round_ in range(ROUNDS):
        path = str(tmp_path / f"shared-{round_}.sqlite")
        barrier, queue = context.Barrier(PROCESSES), context.Queue()
        workers = [
            context.Process(target=_open, args=(path, barrier, queue)) for _ in range(PROCESSES)
        ]
        for worker in workers:
            worker.start()
        answers += [queue.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join(timeout=120)
    assert set(answers) == {"wal"}, [a for a in answers if a != "wal"][:3]
