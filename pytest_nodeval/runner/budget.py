"""A run's money budget, shared by every process of the run (xdist workers, a pool's threads).

State lives in one small SQLite file under the run directory (`_shared/budget.sqlite`, WAL,
short transactions): what finished attempts cost, and an estimate for each attempt in
flight. Before an attempt starts, `reserve()` says whether the run's spend plus what is in
flight plus this attempt's estimate stays within the limit, and if so holds the estimate;
afterwards `settle()` swaps the estimate for the actual cost.

An attempt's estimate is the mean cost of its case's finished attempts, else of the
baseline's attempts of that case, else of the run's finished attempts, else of the
baseline's. With none of those, the run's first attempt starts at an estimate of 0 and
the others wait for it to finish (then the run's mean estimates them); once attempts have
finished without a known cost (a model with no price), the estimate is 0.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..shared_db import connect_shared, written
from ..world.processes import process_alive

if TYPE_CHECKING:
    from .pool import Job

BUDGET_FILE = Path("_shared") / "budget.sqlite"
_CENT_FRACTION = 1e-9
"""Float sums of prices (0.1 + 0.2) must not refuse an attempt that fits to the cent."""
_WAIT_S = 0.05
"""How often an attempt waiting for the run's first cost looks again."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS in_flight (
    id INTEGER PRIMARY KEY, case_id TEXT NOT NULL, estimate REAL NOT NULL, pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS finished (case_id TEXT NOT NULL, cost REAL);
"""


@dataclass(frozen=True, slots=True)
class Prior:
    """Mean cost per attempt from a baseline run: by case, and over the run."""

    by_case: Mapping[str, float] = field(default_factory=dict)
    overall: float | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    allowed: bool
    case_id: str
    estimate: float
    spent: float
    """USD the run's finished attempts cost when this was decided."""
    in_flight: float
    """USD held for attempts running then (this one excluded)."""
    limit: float
    id: int | None = None
    """The held row; None when refused."""

    def refusal(self) -> str:
        """One line for the report: why the attempt did not start."""
        return (
            f"the run spent ${self.spent:.4f} with ${self.in_flight:.4f} in flight, "
            "and this attempt "
            f"(about ${self.estimate:.4f}) would pass --nodeval-max-cost ${self.limit:g}"
        )


class Budget:
    """The budget of the run whose directory is `run_dir`; cheap to make, safe to share by path."""

    def __init__(self, run_dir: Path, limit_usd: float, prior: Prior | None = None) -> None:
        self.path, self.limit, self.prior = run_dir / BUDGET_FILE, limit_usd, prior or Prior()

    def reserve(self, case_id: str) -> Reservation:
        """Decide whether an attempt of `case_id` may start, holding its estimate if so.

        While nothing has finished and nothing estimates a cost, an attempt waits for the one
        in flight: started together at a 0 estimate, N attempts could pass the limit N-fold.
        """
        while (decision := self._decide(case_id)) is None:
            time.sleep(_WAIT_S)
        return decision

    def _decide(self, case_id: str) -> Reservation | None:
        """A decision, or None when this attempt has no estimate yet and must wait (see reserve)."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # one decision at a time across processes
            self._forget_dead(db)
            spent = _scalar(db, "SELECT COALESCE(SUM(cost), 0) FROM finished")
            in_flight = _scalar(db, "SELECT COALESCE(SUM(estimate), 0) FROM in_flight")
            estimate = self._estimate(db, case_id)
            if estimate is None:
                if _scalar(db, "SELECT COUNT(*) FROM in_flight") and not _scalar(
                    db, "SELECT COUNT(*) FROM finished"
                ):
                    return None
                estimate = 0.0
            within = spent + in_flight + estimate <= self.limit + _CENT_FRACTION
            decision = Reservation(within, case_id, estimate, spent, in_flight, self.limit)
            if decision.allowed:
                cursor = db.execute(
                    "INSERT INTO in_flight (case_id, estimate, pid) VALUES (?, ?, ?)",
                    (case_id, estimate, os.getpid()),
                )
                decision = Reservation(
                    True, case_id, estimate, spent, in_flight, self.limit, cursor.lastrowid
                )
            db.execute("COMMIT")
        return decision

    def settle(self, reservation: Reservation, cost_usd: float | None) -> None:
        """The attempt ended: its actual cost replaces its estimate (None: unknown, not counted)."""
        if reservation.id is None:
            return
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM in_flight WHERE id = ?", (reservation.id,))
            db.execute(
                "INSERT INTO finished (case_id, cost) VALUES (?, ?)",
                (reservation.case_id, cost_usd),
            )
            db.execute("COMMIT")

    def spent(self) -> tuple[float, int]:
        """(USD the finished attempts cost, how many of them had no known cost)."""
        if not self.path.exists():
            return 0.0, 0
        with self._connect() as db:
            return (
                _scalar(db, "SELECT COALESCE(SUM(cost), 0) FROM finished"),
                int(_scalar(db, "SELECT COUNT(*) FROM finished WHERE cost IS NULL")),
            )

    def _estimate(self, db: sqlite3.Connection, case_id: str) -> float | None:
        own = db.execute(
            "SELECT AVG(cost) FROM finished WHERE case_id = ? AND cost IS NOT NULL", (case_id,)
        )
        run = db.execute("SELECT AVG(cost) FROM finished WHERE cost IS NOT NULL")
        for guess in (
            own.fetchone()[0],
            self.prior.by_case.get(case_id),
            run.fetchone()[0],
            self.prior.overall,
        ):
            if guess is not None:
                return float(guess)
        return None

    def _forget_dead(self, db: sqlite3.Connection) -> None:
        """A crashed worker's attempts are no longer in flight."""
        for pid in [row[0] for row in db.execute("SELECT DISTINCT pid FROM in_flight")]:
            if pid != os.getpid() and not process_alive(pid):
                db.execute("DELETE FROM in_flight WHERE pid = ?", (pid,))

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = connect_shared(self.path)
        try:
            with written(self.path):
                db.executescript(_SCHEMA)
                yield db
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
            db.close()


class BudgetGate:
    """The budget as a pool's start gate (runner/pool.py `StartGate`): an attempt started ahead
    holds its estimate just before it starts, in its pool thread, exactly as an inline one does.

    `refused` prefixes the refusal (the report's "not run (budget)"); `cost_of` turns a
    finished job's result into USD (None: unknown, not counted).
    """

    def __init__(
        self, budget: Budget, cost_of: Callable[[Any], float | None], refused: str
    ) -> None:
        self.budget, self.cost_of, self.refused = budget, cost_of, refused
        self._held: dict[str, Reservation] = {}
        self._lock = threading.Lock()

    def reserve(self, job: Job) -> str | None:
        reservation = self.budget.reserve(job.case_id)
        if not reservation.allowed:
            return f"{self.refused}: {reservation.refusal()}"
        with self._lock:
            self._held[job.key] = reservation
        return None

    def settle(self, job: Job, result: Any, error: BaseException | None) -> None:
        with self._lock:
            reservation = self._held.pop(job.key)
        self.budget.settle(reservation, None if error is not None else self.cost_of(result))


def _scalar(db: sqlite3.Connection, sql: str) -> float:
    """The one number a query such as `SELECT SUM(...)` answers."""
    return float(db.execute(sql).fetchone()[0])
