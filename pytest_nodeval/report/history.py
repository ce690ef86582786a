"""Run history: every run appends its summary to an SQLite file, so trends can be read back.

Nothing in the gate depends on it; it feeds `nodeval history <case>` and the HTML trend
charts. The file is written by the controller only (never by xdist workers); SQLite's own
locking keeps concurrent runs on one machine from tearing it.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .models import RunReport

DEFAULT_FILE = "history.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    finished_at TEXT NOT NULL,
    mode TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    cases INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    suite_pass_rate REAL,
    exit_status INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS case_results (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    case_id TEXT NOT NULL,
    verdict TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    infra_errors INTEGER NOT NULL,
    pass_rate REAL,
    latency_p50_ms REAL,
    latency_p95_ms REAL,
    tokens_mean REAL,
    PRIMARY KEY (run_id, case_id)
);
CREATE INDEX IF NOT EXISTS case_results_by_case ON case_results(case_id);
"""


@dataclass(frozen=True, slots=True)
class CasePoint:
    run_id: str
    finished_at: str
    mode: str
    verdict: str
    passed: int
    attempts: int
    pass_rate: float | None
    latency_p95_ms: float | None
    tokens_mean: float | None

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=30)
    connection.executescript(_SCHEMA)
    return connection


def append(path: Path, report: RunReport) -> None:
    with closing(_connect(path)) as db, db:
        db.execute(
            "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                report.run_id,
                report.finished_at,
                report.mode,
                report.repeat,
                report.totals.cases,
                report.totals.attempts,
                report.suite.pass_rate,
                report.exit_status,
            ),
        )
        db.executemany(
            "INSERT OR REPLACE INTO case_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    report.run_id,
                    c.id,
                    c.verdict,
                    c.stats.attempts,
                    c.stats.passed,
                    c.stats.failed,
                    c.stats.infra_errors,
                    c.stats.pass_rate,
                    c.stats.latency_p50_ms,
                    c.stats.latency_p95_ms,
                    c.stats.tokens_mean,
                )
                for c in report.cases
            ],
        )


def case_trend(path: Path, case_id: str, limit: int = 50) -> list[CasePoint]:
    """A case's results across runs, oldest first."""
    if not path.is_file():
        return []
    with closing(_connect(path)) as db:
        rows = db.execute(
            "SELECT r.run_id, r.finished_at, r.mode, c.verdict, c.passed, c.attempts, c.pass_rate, "
            "c.latency_p95_ms, c.tokens_mean FROM case_results c JOIN runs r USING (run_id) "
            "WHERE c.case_id = ? ORDER BY r.finished_at DESC LIMIT ?",
            (case_id, limit),
        ).fetchall()
    return [CasePoint(*row) for row in reversed(rows)]


def trends(path: Path, case_ids: list[str], limit: int = 20) -> dict[str, list[dict[str, Any]]]:
    """Trends of several cases, as JSON types (for the HTML report)."""
    return {
        case_id: [p.to_json() for p in case_trend(path, case_id, limit)] for case_id in case_ids
    }
