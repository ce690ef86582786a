"""`nodeval promote <sample> --id <case-id>`: make a reviewable case directory from a sample."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import directory_problem, refuse

if TYPE_CHECKING:  # the command table imports this module for --help: keep it light
    from ..sampling.promote import Promoted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sample",
        metavar="SAMPLE",
        help="A sample directory, or the id of one in --samples-dir (see `nodeval samples`).",
    )
    parser.add_argument(
        "--id",
        dest="case_id",
        required=True,
        metavar="CASE_ID",
        help="Id of the new case: lower case letters, digits, '.', '_' and '-'.",
    )
    parser.add_argument(
        "--cases-dir",
        type=Path,
        default=Path("scenarios"),
        metavar="DIR",
        help="Where case directories live (default: scenarios).",
    )
    parser.add_argument(
        "--owner", default=None, help="case.yaml owner (default: git config user.name, else $USER)."
    )
    parser.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=[],
        metavar="TAG",
        help="Add a tag (a pytest marker) besides 'promoted'; repeat for more.",
    )
    parser.add_argument(
        "--freshness",
        default="90d",
        help="Warn when the journal is older than this (default: 90d).",
    )
    parser.add_argument(
        "--force", action="store_true", help="Replace an existing case directory of that id."
    )
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="Do not replay the new case once to check that it is green.",
    )
    parser.add_argument(
        "--samples-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="Where to look up a sample given by id (default: ~/.nodeval/samples).",
    )


def run(args: argparse.Namespace) -> int:
    from ..sampling.promote import PromoteOptions, promote, resolve_sample
    from ..sampling.store import DEFAULT_SAMPLES_DIR

    refuse("--cases-dir", directory_problem(args.cases_dir))
    sample = resolve_sample(args.sample, args.samples_dir or DEFAULT_SAMPLES_DIR)
    options = PromoteOptions(
        case_id=args.case_id,
        cases_dir=args.cases_dir,
        owner=args.owner,
        tags=tuple(args.tags),
        freshness=args.freshness,
        force=args.force,
        verify=args.verify,
    )
    promoted = promote(sample, options)
    print(f"promoted {sample} -> {promoted.case_dir}/")
    print(
        f"  journal/ copied ({promoted.events} events); "
        f"assertions.yaml proposes: {', '.join(promoted.assertions)}"
    )
    for note in promoted.notes:
        print(f"  note: {note}")
    _report_replay(promoted, args.case_id)
    return 0


def _report_replay(promoted: Promoted, case_id: str) -> None:
    problems, failure = promoted.replay_problems, promoted.failure
    if problems is None:
        print(f"  review assertions.yaml, then: pytest -k {case_id}")
        return
    if not problems:
        print(
            "  replay check: green in deterministic mode. "
            f"Review assertions.yaml, then: pytest -k {case_id}"
        )
        return
    if failure:
        print(
            f"  the captured session failed ({failure}); "
            "the case fails until a person decides what correct "
            "behaviour is (see the comment at the top of assertions.yaml):",
            file=sys.stderr,
        )
    else:
        print("  replay check: NOT green; what fails:", file=sys.stderr)
    for problem in problems:
        print("    - " + problem.replace("\n", "\n      "), file=sys.stderr)
