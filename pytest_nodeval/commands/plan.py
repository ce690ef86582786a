"""`nodeval plan --baseline RUN`: what the gate can detect with these repeats, and what it takes."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..paths import fraction, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline", type=Path, required=True, help="A run directory or report.json to plan from."
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=None,
        help="Repeats per case, at least 1 (default: the baseline's).",
    )
    parser.add_argument(
        "--scenarios",
        type=positive_int,
        default=None,
        help="Cases, at least 1 (default: the baseline's).",
    )
    parser.add_argument(
        "--target-drop",
        type=fraction,
        default=0.05,
        help="Suite drop to detect, above 0 and at most 1 (default 0.05).",
    )


def run(args: argparse.Namespace) -> int:
    from ..errors import NodevalError
    from ..report.baseline import load, samples
    from ..stats.gate import plan

    report = load(args.baseline)
    repeats = args.repeats or report.repeat
    scenarios = args.scenarios or len(report.cases)
    try:
        result = plan(samples(report), repeats, scenarios, args.target_drop, mode=report.mode)
    except ValueError as exc:
        raise NodevalError(str(exc)) from None
    if result.deterministic:
        print(
            f"{scenarios} case(s): the baseline is a deterministic replay, so repeats add nothing. "
            "Every case that fails more often than in the baseline is a regression, and the suite "
            "gate fails on any suite drop of its threshold or more: there is nothing to plan."
        )
        return 0
    print(
        f"{scenarios} case(s) x {repeats} repeat(s): the suite gate detects a drop of "
        f"{result.minimum_detectable_drop * 100:.1f} pp "
        f"(80% power, one-sided level {result.alpha:g}); "
        f"within-case variance {result.within_scenario_variance:.3f} ({result.variance_source})"
    )
    print(
        f"to detect {args.target_drop * 100:.1f} pp: {result.repeats_needed} repeat(s) per case, "
        f"or {result.scenarios_needed} case(s) at {repeats} repeat(s)"
    )
    return 0
