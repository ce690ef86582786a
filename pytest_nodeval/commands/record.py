"""`nodeval record <case-dir>`: run a case live and write its journal/ if the recording passes
the case's assertions (`--force` writes it anyway)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import NodevalError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("case_dirs", nargs="+", type=Path, metavar="CASE_DIR", help="Case directories to record.")
    parser.add_argument("--world", default=None, choices=("docker", "bwrap", "local"),
                        help="World backend (default: the best the machine has).")
    parser.add_argument("--force", action="store_true",
                        help="Write the journal even when the recording fails the case's assertions.")


def run(args: argparse.Namespace) -> int:
    from ..case import CASE_FILE
    from ..case.directory import load_case
    from ..runner.session import AttemptSettings, install_journal, run_case

    failed = 0
    for directory in args.case_dirs:
        if not (directory / CASE_FILE).is_file():
            raise NodevalError(f"{directory}: not a case directory (no {CASE_FILE})")
        case = load_case(directory)
        scratch = Path(tempfile.mkdtemp(prefix="nodeval-record-"))
        settings = AttemptSettings(mode="record", world_backend=args.world, install=False)
        observed = run_case(case, settings, scratch / "journal", grade=_grader(case))
        metrics = observed.metrics()
        problem = _problem(case, observed)
        if problem is None or (args.force and observed.status == "ok"):
            install_journal(scratch / "journal", case.journal_dir)
            forced = f" (forced: {problem})" if problem else ""
            print(f"recorded {case.journal_dir}: {metrics['llm_calls']} LLM call(s), "
                  f"{metrics['tool_calls']} tool call(s), {len(observed.events)} events{forced}")
        else:
            failed += 1
            print(f"not recorded {directory}: {problem} (the existing journal is unchanged; the attempt's "
                  f"journal is in {scratch / 'journal'})", file=sys.stderr)
    return 1 if failed else 0


def _problem(case: Any, observed: Any) -> str | None:
    """Why this recording must not become the golden journal, or None when it passed."""
    from ..checks.assertions import evaluate_all

    if observed.status != "ok":
        return f"the session ended '{observed.status}': {observed.metrics()['reason']}"
    failed = [r for r in evaluate_all(case.assertions, observed.evidence) if r.status == "failed"]
    if failed:
        return (f"the recording failed {len(failed)} assertion(s), first: {failed[0].description}: "
                f"{failed[0].message.splitlines()[0] if failed[0].message else ''} (--force writes it anyway)")
    return None


def _grader(case: Any) -> Any:
    """Record grades judge rubrics live, so full mode can reuse the verdicts later."""
    from ..people.judge import make_grader

    rubrics = [a for a in case.assertions if a.kind == "judge"]
    return make_grader(rubrics, None, None, reuse=False) if rubrics else None
