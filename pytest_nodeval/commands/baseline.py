"""`nodeval baseline`: compare a run with a baseline, or bless a run as the new baseline.

    nodeval baseline --against reports/baseline.json [--current reports/<run>]   # the gate
    nodeval baseline --save reports/<run> [--to reports/baseline.json]           # bless

The gate thresholds are the ones the current run was configured with (its ini keys, which
report.json records), so the command and the run agree. Exit status: 0 when no gate FAILED,
6 when one did (as in pytest), 4 for bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import NodevalError
from ..paths import output_file_problem, refuse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument(
        "--against", type=Path, metavar="BASELINE", help="Baseline run directory or report.json."
    )
    action.add_argument(
        "--save", type=Path, metavar="RUN", help="Bless this run (directory or report.json)."
    )
    parser.add_argument(
        "--current",
        type=Path,
        default=Path("reports/latest"),
        help="The run to compare (default: reports/latest).",
    )
    parser.add_argument(
        "--to",
        type=Path,
        default=None,
        help="Where --save writes (default: reports/baseline.json).",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="Also write the diff here (default: diff.json in the current run's directory).",
    )


def run(args: argparse.Namespace) -> int:
    from ..journal.writer import write_atomic
    from ..report.baseline import (
        DEFAULT_BASELINE,
        EXIT_GATE_FAILED,
        compare,
        gate_section,
        load,
        policy_from,
        resolve,
        save,
    )
    from ..report.terminal import format_diff_table

    if args.to is not None:
        refuse("--to", output_file_problem(args.to))
    if args.json is not None:
        refuse("--json", output_file_problem(args.json))
    if args.save is not None:
        target = save(args.save, args.to or DEFAULT_BASELINE)
        print(f"baseline written: {target} (review and commit it)")
        return 0
    current_path = resolve(args.current)
    current = load(current_path)
    # The policy the run was configured with (its ini keys, recorded in report.json): the
    # command and the run's own gate reach the same verdict on the same two runs.
    try:
        policy = policy_from(current.gate_policy)
    except (TypeError, ValueError) as exc:
        raise NodevalError(f"{current_path}: gate_policy: {exc}") from None
    diff = compare(load(args.against), current, policy)
    out = args.json or current_path.parent / "diff.json"
    try:
        write_atomic(out, json.dumps(gate_section(diff, str(args.against)), indent=2) + "\n")
    except OSError as exc:
        raise NodevalError(f"{out}: cannot write the diff: {exc}") from None
    print("\n".join(format_diff_table(diff)))
    print(f"diff written: {out}")
    return EXIT_GATE_FAILED if diff.breached else 0
