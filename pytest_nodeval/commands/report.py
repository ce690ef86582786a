"""`nodeval report <run dir>`: render a run's report.html again from its report.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import NodevalError
from ..paths import existing_directory_problem, history_problem, refuse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN_DIR",
        help="A run directory (reports/<run-id>, or reports/latest) holding report.json.",
    )
    parser.add_argument(
        "--rootdir",
        type=Path,
        default=None,
        help="The project directory the cases' paths are relative to, for the golden journals "
        "(default: the current directory if the cases are there, else two levels above RUN_DIR).",
    )
    parser.add_argument(
        "--history",
        type=Path,
        default=None,
        help=(
            "The run history for the trend charts (default: history.sqlite beside RUN_DIR, if any)."
        ),
    )


def run(args: argparse.Namespace) -> int:
    from ..report.html import read_history, write_html
    from ..report.models import load_report

    run_dir = args.run_dir
    if not (run_dir / "report.json").is_file():
        raise NodevalError(f"{run_dir}: not a run directory (no report.json)")
    _check_options(args)
    report = load_report(run_dir)
    rootdir = args.rootdir or guess_rootdir(run_dir, [c.directory for c in report.cases])
    history = read_history(
        args.history or run_dir.parent / "history.sqlite", [c.id for c in report.cases]
    )
    path = write_html(report, run_dir, rootdir=rootdir, history=history)
    print(f"wrote {path}")
    return 0


def _check_options(args: argparse.Namespace) -> None:
    """The paths given to read from: one that does not exist is a mistake, not "no history"."""
    if args.rootdir is not None:
        refuse("--rootdir", existing_directory_problem(args.rootdir))
    if args.history is not None:
        missing = None if args.history.exists() else f"{args.history}: no such run history"
        refuse("--history", missing or history_problem(args.history))


def guess_rootdir(run_dir: Path, case_dirs: list[str]) -> Path | None:
    """Where the cases are: here, or the project holding reports/<run-id> (the default layout)."""
    probe = next((d for d in case_dirs if d), None)
    for candidate in (Path.cwd(), run_dir.resolve().parent.parent):
        if probe is not None and (candidate / probe).is_dir():
            return candidate
    return None
