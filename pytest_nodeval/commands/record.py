"""`nodeval record <case-dir>`: run a case live and write its journal/."""

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


def run(args: argparse.Namespace) -> int:
    from ..case import CASE_FILE
    from ..case.directory import load_case
    from ..runner.session import AttemptSettings, run_case

    failed = 0
    for directory in args.case_dirs:
        if not (directory / CASE_FILE).is_file():
            raise NodevalError(f"{directory}: not a case directory (no {CASE_FILE})")
        case = load_case(directory)
        scratch = Path(tempfile.mkdtemp(prefix="nodeval-record-"))
        observed = run_case(case, AttemptSettings(mode="record", world_backend=args.world), scratch / "journal",
                            grade=_grader(case))
        metrics = observed.metrics()
        if observed.status == "ok":
            print(f"recorded {case.journal_dir}: {metrics['llm_calls']} LLM call(s), "
                  f"{metrics['tool_calls']} tool call(s), {len(observed.events)} events")
        else:
            failed += 1
            print(f"not recorded {directory}: the session ended '{observed.status}': {metrics['reason']} "
                  f"(the existing journal is unchanged; the attempt's journal is in {scratch / 'journal'})",
                  file=sys.stderr)
    return 1 if failed else 0


def _grader(case: Any) -> Any:
    """Record grades judge rubrics live, so full mode can reuse the verdicts later."""
    from ..people.judge import make_grader

    rubrics = [a for a in case.assertions if a.kind == "judge"]
    return make_grader(rubrics, None, None, reuse=False) if rubrics else None
