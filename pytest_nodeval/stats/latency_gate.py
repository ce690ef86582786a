"""The p95 latency gate, G3 (docs/statistics.md §3.4; between replays §5).

Between live runs the gate decides on the suite: the Harrell-Davis p95 of all latencies
pooled per run, and a paired two-stage cluster bootstrap of the ratio. It FAILs when the
ratio's one-sided lower bound is above 1, the ratio and the increase reach the thresholds,
and each run has ``latency_min_attempts`` latencies. Per-case Mann-Whitney tests (BH) only
name slower cases; per case they would need far more attempts than runs have.

Between deterministic replays the journal's latencies are fixed: each case's p95 is
compared with the plain threshold, and a case over it FAILs.
"""

from __future__ import annotations

from collections.abc import Sequence

from .gate_models import (
    CaseDiff,
    CaseSample,
    GateName,
    GatePolicy,
    GateResult,
    LatencyChange,
    Number,
    PendingGate,
    Verdict,
)
from .significance import RatioBound, benjamini_hochberg, mann_whitney_slower_p_values
from .special import harrell_davis_quantile
from .wording import id_list

__all__ = ["latency_change", "latency_gate", "slowdown_tests"]

_EPS = 1e-9
_P95 = 0.95
Pair = tuple[CaseSample, CaseSample]


def slowdown_tests(
    pairs: Sequence[Pair], policy: GatePolicy, deterministic: bool
) -> dict[str, tuple[float, float]]:
    """Mann-Whitney p and BH-adjusted p for cases with 2+ latencies in both live runs (§3.4).

    Replays have fixed latencies, and one latency against one is never significant
    (p >= 0.5): both skip the test, and with it the scipy import.
    """
    if deterministic or not policy.fail_on_latency_p95_increase:
        return {}
    tested = [(b, c) for b, c in pairs if min(len(b.latencies_ms), len(c.latencies_ms)) >= 2]
    raw = mann_whitney_slower_p_values([(b.latencies_ms, c.latencies_ms) for b, c in tested])
    adjusted = benjamini_hochberg(raw)
    return {b.case_id: (p, q) for (b, _), p, q in zip(tested, raw, adjusted, strict=True)}


def latency_change(
    b: CaseSample,
    c: CaseSample,
    test: tuple[float, float] | None,
    policy: GatePolicy,
    deterministic: bool,
) -> LatencyChange | None:
    if not (b.latencies_ms and c.latencies_ms):
        return None
    p50_b, p50_c = (harrell_davis_quantile(s.latencies_ms, 0.50) for s in (b, c))
    p95_b, p95_c = (harrell_davis_quantile(s.latencies_ms, _P95) for s in (b, c))
    ratio = p95_c / p95_b if p95_b > 0 else None
    verdict = (
        _replay_case_verdict(ratio, policy)
        if deterministic
        else _live_case_verdict(ratio, p95_c - p95_b, test, policy)
    )
    return LatencyChange(
        baseline_p50_ms=p50_b,
        current_p50_ms=p50_c,
        baseline_p95_ms=p95_b,
        current_p95_ms=p95_c,
        p50_delta_ms=p50_c - p50_b,
        p95_delta_ms=p95_c - p95_b,
        p95_ratio=ratio,
        p_value=test[0] if test else None,
        p_value_adjusted=test[1] if test else None,
        verdict=verdict,
    )


def _replay_case_verdict(ratio: float | None, policy: GatePolicy) -> Verdict:
    threshold = policy.fail_on_latency_p95_increase
    if not threshold or ratio is None or ratio < 1.0 + threshold - _EPS:
        return Verdict.OK
    return Verdict.FAIL


def _live_case_verdict(
    ratio: float | None, increase_ms: float, test: tuple[float, float] | None, policy: GatePolicy
) -> Verdict:
    """WARN names a case materially and significantly slower; detail, never FAIL."""
    if not _material(ratio, increase_ms, policy) or test is None:
        return Verdict.OK
    return Verdict.WARN if test[1] <= policy.fdr_level else Verdict.OK


def _material(ratio: float | None, increase_ms: float, policy: GatePolicy) -> bool:
    threshold = policy.fail_on_latency_p95_increase
    if not threshold or ratio is None:
        return False
    return ratio >= 1.0 + threshold - _EPS and increase_ms >= policy.latency_min_increase_ms


def latency_gate(
    cases: Sequence[CaseDiff], pairs: Sequence[Pair], policy: GatePolicy, deterministic: bool
) -> PendingGate | None:
    """G3: the pooled p95 between live runs (docs/statistics.md §3.4), each case's p95 against
    the plain threshold between deterministic replays (§5); None while the gate is off."""
    if not policy.fail_on_latency_p95_increase:
        return None
    flagged = _flagged_cases(cases)
    if deterministic:
        replayed = _replay_gate(cases, flagged, policy)
        return PendingGate(None, lambda _: _gate_result(*replayed, flagged))
    return _pooled_gate(pairs, flagged, policy)


def _gate_result(
    verdict: Verdict, reason: str, numbers: dict[str, Number], flagged: list[str]
) -> GateResult:
    return GateResult(
        name=GateName.LATENCY_P95,
        verdict=verdict,
        reason=reason,
        numbers=numbers,
        case_ids=flagged,
    )


def _flagged_cases(cases: Sequence[CaseDiff]) -> list[str]:
    changes = [(case.case_id, case.latency) for case in cases if case.latency]
    flagged = sorted(
        ((case_id, change) for case_id, change in changes if change.verdict.severity),
        key=lambda item: (-item[1].verdict.severity, -(item[1].p95_ratio or 0.0)),
    )
    return [case_id for case_id, _ in flagged]


def _replay_gate(
    cases: Sequence[CaseDiff], flagged: Sequence[str], policy: GatePolicy
) -> tuple[Verdict, str, dict[str, Number]]:
    """Replay: a case whose p95 rose by the threshold FAILs (docs/statistics.md §5)."""
    compared = sum(1 for case in cases if case.latency)
    size = f"p95 up >= {policy.fail_on_latency_p95_increase * 100:g}%"
    numbers: dict[str, Number] = {
        "threshold": policy.fail_on_latency_p95_increase,
        "cases_compared": compared,
        "cases_flagged": len(flagged),
    }
    if not compared:
        return Verdict.OK, "no case has latencies in both runs", numbers
    if not flagged:
        return Verdict.OK, f"replay: no case with {size}", numbers
    return Verdict.FAIL, f"replay: {len(flagged)} case(s) with {size}: {id_list(flagged)}", numbers


def _pooled_gate(pairs: Sequence[Pair], flagged: list[str], policy: GatePolicy) -> PendingGate:
    """Live: pooled Harrell-Davis p95 ratio and its bootstrap bound (docs/statistics.md §3.4)."""
    timed = [(b, c) for b, c in pairs if b.latencies_ms and c.latencies_ms]
    level = policy.level(GateName.LATENCY_P95)
    numbers: dict[str, Number] = {
        "threshold": policy.fail_on_latency_p95_increase,
        "min_increase_ms": policy.latency_min_increase_ms,
        "min_attempts": policy.latency_min_attempts,
        "level": level,
        "cases_compared": len(timed),
        "cases_flagged": len(flagged),
    }
    if not timed:
        none = Verdict.OK, "no case has latencies in both runs", numbers
        return PendingGate(None, lambda _: _gate_result(*none, flagged))
    pooled_b = [ms for b, _ in timed for ms in b.latencies_ms]
    pooled_c = [ms for _, c in timed for ms in c.latencies_ms]
    p95_b, p95_c = harrell_davis_quantile(pooled_b, _P95), harrell_davis_quantile(pooled_c, _P95)
    ratio = p95_c / p95_b if p95_b > 0 else None
    bound = None
    if _material(ratio, p95_c - p95_b, policy):  # the bootstrap only matters for a FAIL
        bound = RatioBound(
            [b.latencies_ms for b, _ in timed], [c.latencies_ms for _, c in timed], level, _P95
        )
    attempts = min(len(pooled_b), len(pooled_c))
    numbers |= {
        "pooled_baseline_p95_ms": p95_b,
        "pooled_current_p95_ms": p95_c,
        "ratio": ratio,
    }

    def result(lower: float | None) -> GateResult:
        verdict, reason = _pooled_verdict(ratio, lower, attempts, p95_b, p95_c, policy)
        if verdict is Verdict.OK and flagged:
            verdict = Verdict.WARN
            reason += f"; {len(flagged)} case(s) significantly slower alone: {id_list(flagged)}"
        bounded = numbers | {"lower_bound": lower, "latencies_per_run": attempts}
        return _gate_result(verdict, reason, bounded, flagged)

    return PendingGate(bound, result)


def _pooled_verdict(
    ratio: float | None,
    lower: float | None,
    attempts: int,
    p95_b: float,
    p95_c: float,
    policy: GatePolicy,
) -> tuple[Verdict, str]:
    change = f"pooled p95 {p95_b:.0f} -> {p95_c:.0f} ms"
    if ratio is not None:
        change += f" (x{ratio:.2f})"
    if lower is None:
        size = f"x{1.0 + policy.fail_on_latency_p95_increase:g}"
        return Verdict.OK, f"{change}: under {size} or +{policy.latency_min_increase_ms:g} ms"
    bound = f"lower bound x{lower:.2f}"
    if lower <= 1.0:
        return Verdict.INCONCLUSIVE, f"{change}, not significant ({bound}): add repeats"
    if attempts < policy.latency_min_attempts:
        need = f"need {policy.latency_min_attempts} latencies/run, have {attempts}"
        return Verdict.WARN, f"{change}, significant ({bound}) but too few to fail on ({need})"
    return Verdict.FAIL, f"{change}, significant ({bound})"
