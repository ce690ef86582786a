"""`nodeval history CASE`: a case's results across past runs, from the run history."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import NodevalError
from ..paths import history_problem, positive_int, refuse

if TYPE_CHECKING:
    from ..report.history import CasePoint


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("case_id", metavar="CASE", help="The case id.")
    parser.add_argument(
        "--history",
        type=Path,
        default=Path("reports/history.sqlite"),
        help="The history file (default: reports/history.sqlite).",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=20,
        help="How many runs, newest last (a positive integer; default 20).",
    )


def run(args: argparse.Namespace) -> int:
    if not args.history.exists():
        raise NodevalError(
            f"{args.history}: no run history yet (every pytest run of the scenarios appends to it)"
        )
    refuse("--history", history_problem(args.history))
    points = _read_trend(args.history, args.case_id, args.limit)
    if not points:
        raise NodevalError(f"{args.history}: no runs of case '{args.case_id}'")
    print(
        f"{'run':<22} {'mode':<13} {'passed':>8} {'rate':>5}  {'p95 ms':>8}  {'tokens':>7}  verdict"
    )
    for p in points:
        rate = "-" if p.pass_rate is None else f"{p.pass_rate:.2f}"
        p95 = "-" if p.latency_p95_ms is None else f"{p.latency_p95_ms:.0f}"
        tokens = "-" if p.tokens_mean is None else f"{p.tokens_mean:.0f}"
        print(
            f"{p.run_id:<22} {p.mode:<13} {p.passed:>4}/{p.attempts:<3} {rate:>5}  "
            f"{p95:>8}  {tokens:>7}  {p.verdict}"
        )
    return 0


def _read_trend(path: Path, case_id: str, limit: int) -> list[CasePoint]:
    import sqlite3

    from ..report.history import case_trend

    try:
        return case_trend(path, case_id, limit)
    except sqlite3.Error as exc:  # an SQLite file, but not one a run wrote
        raise NodevalError(f"--history: {path}: not a run history ({exc})") from None
