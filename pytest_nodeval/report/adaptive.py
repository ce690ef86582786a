"""Adaptive repeats in a run's report: per compared case, the repeats it took and why it stopped.

The decisions are pure (stats/adaptive.py), so the controller replays them from the
attempts as they arrived, in repeat order, and gets what the process that ran the case
decided: the same baseline counts, the same number of compared cases, the same outcomes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..stats.adaptive import AdaptiveDecision, adaptive_design, case_level, first_stop
from ..stats.gate_models import GateName, GatePolicy
from .models import AdaptiveRun, AttemptRecord, CaseAdaptive, CaseReport, RunReport

SKIP_PREFIX = "adaptive:"
"""Every reason an adaptive skip gives starts so (pytest's record of it says "Skipped: " first)."""


def baseline_counts(baseline: RunReport) -> dict[str, tuple[int, int]]:
    """Per case, the baseline's graded (passes, attempts): infrastructure errors left out."""
    counts = {}
    for case in baseline.cases:
        graded = graded_outcomes(case.attempts)
        counts[case.id] = (sum(graded), len(graded))
    return counts


def graded_outcomes(attempts: Iterable[AttemptRecord]) -> list[bool]:
    """Pass (True) or fail per judged attempt, in the order given."""
    return [
        a.outcome == "passed"
        for a in attempts
        if a.outcome in ("passed", "failed") and not a.infra_error
    ]


def compared(case_ids: Iterable[str], counts: Mapping[str, tuple[int, int]]) -> set[str]:
    """The cases a run shares with the baseline, where the baseline has graded attempts."""
    return {case_id for case_id in case_ids if counts.get(case_id, (0, 0))[1] > 0}


def level_for(policy: GatePolicy, cases: int) -> float:
    return case_level(policy.level(GateName.SCENARIO_REGRESSION), cases)


def annotate(
    report: RunReport, counts: Mapping[str, tuple[int, int]], policy: GatePolicy
) -> RunReport:
    """The report with each compared case's adaptive summary and the run's."""
    ids = compared((case.id for case in report.cases), counts)
    level = level_for(policy, len(ids))
    cases = [
        _annotate_case(case, counts[case.id], level, policy.fail_on_scenario_drop)
        if case.id in ids
        else case
        for case in report.cases
    ]
    summaries = [case.adaptive for case in cases if case.adaptive is not None]
    run = AdaptiveRun(
        cases_compared=len(ids),
        case_level=level,
        repeats_run=sum(s.cap - s.skipped for s in summaries),
        repeats_skipped=sum(s.skipped for s in summaries),
    )
    return report.model_copy(update={"cases": cases, "adaptive": run})


def _annotate_case(
    case: CaseReport, baseline: tuple[int, int], level: float, threshold: float
) -> CaseReport:
    cap = max((attempt.repeat for attempt in case.attempts), default=0)
    if cap < 1:
        return case
    graded = graded_outcomes(sorted(case.attempts, key=lambda a: a.repeat))
    decision = first_stop(*baseline, graded, adaptive_design(cap), level, threshold)
    skipped = sum(
        1 for a in case.attempts if a.outcome == "skipped" and SKIP_PREFIX in (a.reason or "")
    )
    summary = CaseAdaptive(
        cap=cap,
        repeats=decision.attempts,
        skipped=skipped,
        stop=decision.stop.value if decision.stop is not None else "undecided",
        reason=_reason(decision),
    )
    return case.model_copy(update={"adaptive": summary})


def _reason(decision: AdaptiveDecision) -> str:
    if decision.stop is None:
        return (
            f"{SKIP_PREFIX} undecided after {decision.attempts} graded repeats "
            "(infrastructure errors or an interrupted run took the rest)"
        )
    return decision.reason
