"""Pure aggregation: attempts (one per collected case x repeat) into per-case and run results."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Literal

from ..stats.run_stats import SuiteStats, case_stats, suite_stats
from .models import BUDGET_REASON, AttemptRecord, CaseMeta, CaseReport, JudgeAgreement, Totals

# Which check decides an attempt's outcome: any error (it could not be judged), then any
# failure, then a check that never ran (the attempt is incomplete), then a pass.
_CHECK_PRIORITY = ("error", "failed", "not_run", "passed", "skipped")


def merge_checks(checks: list[AttemptRecord]) -> AttemptRecord:
    """One attempt from the records of every test bound to the same case and repeat."""
    checks = sorted(checks, key=lambda r: r.nodeid)
    if len(checks) == 1:
        only = checks[0]
        return only if only.checks else only.model_copy(update={"checks": [only.nodeid]})
    decisive = min(checks, key=lambda r: _CHECK_PRIORITY.index(r.outcome))
    measured = next((r for r in checks if r.journal is not None), decisive)
    judged: dict[str, str] = {}
    for record in checks:
        judged.update(record.judged)
    return measured.model_copy(
        update={
            "nodeid": checks[0].nodeid,
            "checks": [r.nodeid for r in checks],
            "outcome": decisive.outcome,
            "reason": decisive.reason,
            "infra_error": any(r.infra_error for r in checks),
            "reruns": max(r.reruns for r in checks),
            "assertions": [a for r in checks for a in r.assertions],
            "judged": judged,
        }
    )


def attempts_of(records: Iterable[AttemptRecord]) -> list[AttemptRecord]:
    """Per case and repeat, one attempt: the tests bound to it are its checks, not extra
    attempts."""
    grouped: dict[tuple[str, int], list[AttemptRecord]] = defaultdict(list)
    for record in records:
        grouped[(record.case_id, record.repeat)].append(record)
    return [merge_checks(checks) for _, checks in sorted(grouped.items())]


def case_verdict(attempts: list[AttemptRecord], min_pass_rate: float | None) -> str:
    outcomes = [a.outcome for a in attempts]
    if all(o == "skipped" for o in outcomes):
        return "skipped"
    if "error" in outcomes or any(a.infra_error for a in attempts):
        return "error"
    if all(o in ("skipped", "not_run") for o in outcomes):
        return "not_run"
    ran = [o for o in outcomes if o in ("passed", "failed")]
    failed = ran.count("failed")
    if failed == 0:
        return "passed"
    if min_pass_rate is not None and (len(ran) - failed) / len(ran) >= min_pass_rate:
        return "tolerated"
    return "failed"


def build_case(meta: CaseMeta, attempts: list[AttemptRecord]) -> CaseReport:
    attempts = sorted(attempts, key=lambda a: (a.repeat, a.nodeid))
    judged = [a for a in attempts if a.outcome in ("passed", "failed") and not a.infra_error]
    stats = case_stats(
        [a.outcome == "passed" for a in judged],
        [a.latency_ms for a in judged if a.latency_ms is not None],
        [a.tokens for a in judged],
        infra_errors=sum(1 for a in attempts if a.infra_error),
    )
    total, per_attempt = cost_of(attempts)
    whole, whole_per_attempt = total_cost_of(attempts)
    return CaseReport(
        id=meta.id,
        name=meta.name,
        tags=meta.tags,
        directory=meta.directory,
        dataset=meta.dataset,
        variant=meta.variant,
        min_pass_rate=meta.min_pass_rate,
        verdict=case_verdict(attempts, meta.min_pass_rate),  # type: ignore[arg-type]
        stats=stats,
        judge_agreement=judge_agreement(attempts),
        cost_usd=total,
        cost_per_attempt_usd=per_attempt,
        user_cost_usd=cost_of(attempts, "user")[0],
        judge_cost_usd=cost_of(attempts, "judge")[0],
        total_cost_usd=whole,
        total_cost_per_attempt_usd=whole_per_attempt,
        attempts=attempts,
    )


def cost_of(
    attempts: Iterable[AttemptRecord], party: Literal["agent", "user", "judge"] = "agent"
) -> tuple[float | None, float | None]:
    """(total, per attempt) in USD of one party's calls (the agent's: cost_usd; the simulated
    user's; the judge's) over the attempts with a cost; None if one's is unknown.

    An attempt that never called a model (never ran, or failed before) adds nothing; one
    whose model has no price makes the whole figure unknown rather than too low.
    """
    prefix = "" if party == "agent" else f"{party}_"
    attempts = list(attempts)
    if any(getattr(a, f"{prefix}cost_unpriced") for a in attempts):
        return None, None
    known: list[float] = [
        cost for a in attempts if (cost := getattr(a, f"{prefix}cost_usd")) is not None
    ]
    return _sum_and_mean(known)


def total_cost_of(attempts: Iterable[AttemptRecord]) -> tuple[float | None, float | None]:
    """(total, per attempt) in USD of the agent's, the user's and the judge's calls together;
    None as cost_of. An attempt recorded before the user and the judge were priced counts its
    agent's cost."""
    attempts = list(attempts)
    if any(a.cost_unpriced or a.user_cost_unpriced or a.judge_cost_unpriced for a in attempts):
        return None, None
    known = [
        a.total_cost_usd if a.total_cost_usd is not None else a.cost_usd
        for a in attempts
        if a.cost_usd is not None
    ]
    return _sum_and_mean([cost for cost in known if cost is not None])


def _sum_and_mean(known: list[float]) -> tuple[float | None, float | None]:
    if not known:
        return None, None
    return round(sum(known), 9), round(sum(known) / len(known), 9)


def judge_agreement(attempts: list[AttemptRecord]) -> dict[str, JudgeAgreement]:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for attempt in attempts:
        for criterion, verdict in attempt.judged.items():
            counts[criterion][verdict] += 1
    result = {}
    for criterion, verdicts in sorted(counts.items()):
        graded = verdicts["pass"] + verdicts["fail"]
        agreement = max(verdicts["pass"], verdicts["fail"]) / graded if graded else None
        result[criterion] = JudgeAgreement(
            verdicts=dict(sorted(verdicts.items())), agreement=agreement
        )
    return result


def aggregate(
    attempts: Iterable[AttemptRecord], metas: dict[str, CaseMeta]
) -> tuple[list[CaseReport], Totals, SuiteStats]:
    by_case: dict[str, list[AttemptRecord]] = defaultdict(list)
    for attempt in attempts_of(attempts):
        by_case[attempt.case_id].append(attempt)
    cases = [
        build_case(metas.get(cid) or CaseMeta(id=cid), by_case[cid]) for cid in sorted(by_case)
    ]
    return (
        cases,
        totals_of(cases),
        suite_stats([c.stats for c in cases if c.verdict not in ("skipped", "not_run")]),
    )


def totals_of(cases: list[CaseReport]) -> Totals:
    totals = Totals(cases=len(cases))
    for case in cases:
        for attempt in case.attempts:
            totals.attempts += 1
            if attempt.infra_error:
                totals.infra_errors += 1
            if attempt.outcome == "passed":
                totals.passed += 1
            elif attempt.outcome == "failed":
                totals.failed += 1
            elif attempt.outcome == "error":
                totals.errors += 1
            elif attempt.outcome == "not_run":
                totals.not_run += 1
            else:
                totals.skipped += 1
        if case.verdict == "tolerated":
            totals.tolerated_failures += sum(1 for a in case.attempts if a.outcome == "failed")
    _add_costs(totals, [a for case in cases for a in case.attempts])
    return totals


def _add_costs(totals: Totals, attempts: list[AttemptRecord]) -> None:
    totals.not_run_budget = sum(1 for a in attempts if a.outcome == "not_run" and is_budget_stop(a))
    totals.cost_usd, totals.cost_per_attempt_usd = cost_of(attempts)
    totals.cost_priced_usd = round(sum(a.cost_usd for a in attempts if a.cost_usd is not None), 9)
    totals.cost_unpriced_attempts = sum(1 for a in attempts if a.cost_unpriced)
    totals.cost_unpriced_models = sorted({m for a in attempts for m in a.cost_unpriced})
    totals.user_cost_usd = cost_of(attempts, "user")[0]
    totals.user_cost_unpriced_models = sorted({m for a in attempts for m in a.user_cost_unpriced})
    totals.judge_cost_usd = cost_of(attempts, "judge")[0]
    totals.judge_cost_unpriced_models = sorted({m for a in attempts for m in a.judge_cost_unpriced})
    totals.total_cost_usd, totals.total_cost_per_attempt_usd = total_cost_of(attempts)


def is_budget_stop(attempt: AttemptRecord) -> bool:
    return (attempt.reason or "").startswith(BUDGET_REASON)
