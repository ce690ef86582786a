"""Compare a run with its baseline and gate CI on the difference (stats.md section 2.3).

Every gate FAILs only when a change is BOTH statistically significant (one-sided) AND at
least as large as its practical threshold. A large change without significance is
INCONCLUSIVE: re-run with more repeats, never pass it silently and never fail it. Pure
functions over plain values; numpy/scipy are imported lazily by ``significance``.

The schema lives in ``gate_models``. Callers import the public API from
``pytest_nodeval.gate``, which also carries the diff table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from fractions import Fraction
from statistics import NormalDist, StatisticsError, correlation, fmean, stdev
from typing import Literal

from .gate_models import (
    CaseDiff,
    CaseSample,
    Diff,
    GateName,
    GatePolicy,
    GateResult,
    LatencyChange,
    Movement,
    Number,
    PassRateChange,
    Plan,
    SuiteComparison,
    TokenChange,
    Verdict,
    worst_verdict,
)
from .significance import (
    benjamini_hochberg,
    boschloo_regression_p,
    mann_whitney_slower_p_values,
    mean_ratio_lower_bound,
    newcombe_interval,
    sign_flip_p_value,
)
from .special import harrell_davis_quantile, t_cdf, t_ppf
from .wording import id_list, limit_pp, percent, pp

__all__ = ["compare", "plan"]

# k/n arithmetic: 0.9 - 0.7 == 0.19999999999999996 must still count as a 20 pp drop.
_EPS = 1e-9
# Up to this many paired scenarios the suite p-value is the exact sign-flip test, not t
# (stats.md G1: small S, or many differences of 0 or +-1/R, break the t approximation).
_SIGN_FLIP_MAX_SCENARIOS = 30
# Power at which the minimum detectable effect (MDE) is reported (stats.md 2.5).
_MDE_POWER = 0.80
# stats.md's planning assumption E[p(1-p)] when the baseline shows no within-case noise.
_DEFAULT_WITHIN_VARIANCE = 0.10


def compare(
    baseline: Sequence[CaseSample], current: Sequence[CaseSample], policy: GatePolicy
) -> Diff:
    """Diff two runs case by case and evaluate every enabled gate."""
    base, cur = _by_id(baseline, "baseline"), _by_id(current, "current")
    pairs = [(base[case_id], cur[case_id]) for case_id in sorted(base.keys() & cur.keys())]
    regression_tests = _regression_tests(pairs, policy)
    slowdown_tests = _slowdown_tests(pairs, policy)
    cases = [
        CaseDiff(
            case_id=b.case_id,
            pass_rate=_pass_rate_change(b, c, regression_tests.get(b.case_id), policy),
            latency=_latency_change(b, c, slowdown_tests.get(b.case_id), policy),
            tokens=_token_change(b, c),
        )
        for b, c in pairs
    ]
    suite = _suite_comparison(pairs, policy)
    gates = [
        _suite_gate(suite, cases, policy),
        _scenario_gate(cases, len(regression_tests), policy),
        _latency_gate(cases, pairs, len(slowdown_tests), policy),
        _tokens_gate(pairs, policy),
    ]
    return Diff(
        policy=asdict(policy),
        cases=cases,
        new_cases=sorted(cur.keys() - base.keys()),
        missing_cases=sorted(base.keys() - cur.keys()),
        suite=suite,
        gates=[gate for gate in gates if gate is not None],
    )


def _by_id(samples: Sequence[CaseSample], run: str) -> dict[str, CaseSample]:
    by_id: dict[str, CaseSample] = {}
    for sample in samples:
        if sample.case_id in by_id:
            raise ValueError(f"case id {sample.case_id!r} appears twice in the {run} run")
        by_id[sample.case_id] = sample
    return by_id


def _rate(sample: CaseSample) -> float:
    return sample.passed / sample.attempts


def _single_attempt(b: CaseSample, c: CaseSample) -> bool:
    """Deterministic replay mode: one attempt per run, so a flip is a real change."""
    return b.attempts == c.attempts == 1


# --- per-case pass rate (G2) -----------------------------------------------------------


def _regression_tests(
    pairs: Sequence[tuple[CaseSample, CaseSample]], policy: GatePolicy
) -> dict[str, tuple[float, float]]:
    """Boschloo p and BH-adjusted p for every case the per-case gate tests."""
    if not policy.fail_on_scenario_drop:
        return {}
    tested = [
        (b, c) for b, c in pairs if b.attempts and c.attempts and not _single_attempt(b, c)
    ]
    raw = [boschloo_regression_p(b.passed, b.attempts, c.passed, c.attempts) for b, c in tested]
    adjusted = benjamini_hochberg(raw)
    return {b.case_id: (p, q) for (b, _), p, q in zip(tested, raw, adjusted)}


def _pass_rate_change(
    b: CaseSample, c: CaseSample, test: tuple[float, float] | None, policy: GatePolicy
) -> PassRateChange | None:
    if not (b.attempts and c.attempts):
        return None
    delta = _rate(c) - _rate(b)
    ci_low, ci_high = newcombe_interval(c.passed, c.attempts, b.passed, b.attempts)
    return PassRateChange(
        baseline_passed=b.passed,
        baseline_attempts=b.attempts,
        current_passed=c.passed,
        current_attempts=c.attempts,
        delta=delta,
        ci_low=ci_low,
        ci_high=ci_high,
        movement=_movement(delta),
        p_value=test[0] if test else None,
        p_value_adjusted=test[1] if test else None,
        verdict=_scenario_verdict(delta, test, _single_attempt(b, c), policy),
    )


def _movement(delta: float) -> Movement:
    if abs(delta) < _EPS:
        return Movement.SAME
    return Movement.DOWN if delta < 0 else Movement.UP


def _scenario_verdict(
    delta: float, test: tuple[float, float] | None, single_attempt: bool, policy: GatePolicy
) -> Verdict:
    threshold = policy.fail_on_scenario_drop
    if not threshold or -delta < threshold - _EPS:
        return Verdict.OK
    if single_attempt:
        return Verdict.FAIL
    assert test is not None, "every multi-attempt case is tested while the gate is on"
    # Raw one-sided p <= alpha AND BH p <= q: with a single case BH is the identity, and
    # stats.md 3.1 calls 9/10 -> 6/10 (p = 0.0755) INCONCLUSIVE, not a FAIL at q = 0.10.
    p_value, p_adjusted = test
    if p_value <= policy.alpha and p_adjusted <= policy.fdr_level:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def _scenario_gate(
    cases: Sequence[CaseDiff], tested: int, policy: GatePolicy
) -> GateResult | None:
    threshold = policy.fail_on_scenario_drop
    if not threshold:
        return None
    changes = sorted(
        ((case.case_id, case.pass_rate) for case in cases if case.pass_rate),
        key=lambda item: item[1].delta,  # largest drop first
    )
    failed = [case_id for case_id, change in changes if change.verdict is Verdict.FAIL]
    unsure = [case_id for case_id, change in changes if change.verdict is Verdict.INCONCLUSIVE]
    flips = sum(1 for _, ch in changes if ch.p_value is None and ch.verdict is Verdict.FAIL)
    size = f">= {limit_pp(threshold)}"
    if failed:
        verdict, reason = Verdict.FAIL, f"{len(failed)} case(s) regressed {size}: {id_list(failed)}"
    elif unsure:
        verdict = Verdict.INCONCLUSIVE
        reason = f"{len(unsure)} case(s) dropped {size}, not significant: re-run with more repeats"
    else:
        verdict, reason = Verdict.OK, f"no case dropped {size}"
    numbers: dict[str, Number] = {
        "threshold": threshold,
        "cases_tested": tested,
        "failed": len(failed),
        "single_attempt_flips": flips,
        "inconclusive": len(unsure),
    }
    return GateResult(
        name=GateName.SCENARIO_REGRESSION,
        verdict=verdict,
        reason=reason,
        numbers=numbers,
        case_ids=failed + unsure,
    )


# --- suite pass rate (G1) --------------------------------------------------------------


def _suite_comparison(
    pairs: Sequence[tuple[CaseSample, CaseSample]], policy: GatePolicy
) -> SuiteComparison:
    graded = [(b, c) for b, c in pairs if b.attempts and c.attempts]
    if not graded:
        return SuiteComparison(
            scenarios=0,
            baseline_pass_rate=None,
            current_pass_rate=None,
            delta=None,
            standard_error=None,
            ci_low=None,
            ci_high=None,
            p_value=None,
            p_value_method=None,
            correlation=None,
            minimum_detectable_drop=None,
        )
    rates_b, rates_c = [_rate(b) for b, _ in graded], [_rate(c) for _, c in graded]
    exact = [Fraction(c.passed, c.attempts) - Fraction(b.passed, b.attempts) for b, c in graded]
    diffs = [float(d) for d in exact]
    n, delta = len(diffs), fmean(diffs)
    se = stdev(diffs) / math.sqrt(n) if n >= 2 else None
    margin = t_ppf(1.0 - policy.alpha, n - 1) * se if se is not None else None
    method: Literal["sign-flip", "t"] = "sign-flip" if n <= _SIGN_FLIP_MAX_SCENARIOS else "t"
    p_value = sign_flip_p_value(exact) if method == "sign-flip" else _t_p_value(delta, se, n)
    z = NormalDist().inv_cdf
    return SuiteComparison(
        scenarios=n,
        baseline_pass_rate=fmean(rates_b),
        current_pass_rate=fmean(rates_c),
        delta=delta,
        standard_error=se,
        ci_low=delta - margin if margin is not None else None,
        ci_high=delta + margin if margin is not None else None,
        p_value=p_value,
        p_value_method=method,
        correlation=_correlation(rates_b, rates_c),
        minimum_detectable_drop=(z(1 - policy.alpha) + z(_MDE_POWER)) * se if se else None,
    )


def _t_p_value(delta: float, se: float | None, n: int) -> float:
    """One-sided p of the one-sample t test of mean(d) < 0."""
    assert se is not None, "callers use t only above the sign-flip range, so n >= 2"
    if se == 0.0:  # every scenario moved by exactly the same amount
        return 0.0 if delta < 0 else 1.0
    return t_cdf(delta / se, n - 1)


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    try:
        return correlation(xs, ys)
    except StatisticsError:  # fewer than two scenarios, or a run with constant rates
        return None


def _suite_gate(
    suite: SuiteComparison, cases: Sequence[CaseDiff], policy: GatePolicy
) -> GateResult | None:
    threshold = policy.fail_on_score_drop
    if not threshold:
        return None
    verdict, reason = _suite_verdict(suite, threshold, policy.alpha)
    down = sorted(
        (case.pass_rate.delta, case.case_id)
        for case in cases
        if case.pass_rate and case.pass_rate.movement is Movement.DOWN
    )
    numbers: dict[str, Number] = {
        "threshold": threshold,
        "scenarios": suite.scenarios,
        "baseline_pass_rate": suite.baseline_pass_rate,
        "current_pass_rate": suite.current_pass_rate,
        "delta": suite.delta,
        "standard_error": suite.standard_error,
        "upper_bound": suite.ci_high,
        "lower_bound": suite.ci_low,
        "p_value": suite.p_value,
        "minimum_detectable_drop": suite.minimum_detectable_drop,
    }
    return GateResult(
        name=GateName.SUITE_PASS_RATE,
        verdict=verdict,
        reason=reason,
        numbers=numbers,
        case_ids=[case_id for _, case_id in down],
    )


def _suite_verdict(suite: SuiteComparison, threshold: float, alpha: float) -> tuple[Verdict, str]:
    if suite.delta is None or suite.p_value is None:
        return Verdict.OK, "no case was graded in both runs"
    rates = f"{percent(suite.baseline_pass_rate)} -> {percent(suite.current_pass_rate)}"
    fell = f"suite pass rate fell {pp(-suite.delta)} ({rates})"
    significant = suite.p_value <= alpha
    if suite.delta <= -threshold + _EPS:
        if significant:
            return Verdict.FAIL, f"{fell}, one-sided p={suite.p_value:.3f}"
        not_significant = f"not significant (p={suite.p_value:.3f})"
        return Verdict.INCONCLUSIVE, f"{fell}, {not_significant}: add repeats or scenarios"
    if significant:
        return Verdict.OK, f"{fell}: significant but under the {limit_pp(threshold)} threshold"
    if suite.ci_low is not None and suite.ci_low > -threshold:
        bound = f"lower bound {pp(suite.ci_low, signed=True)}"
        return Verdict.OK, f"no suite drop of {limit_pp(threshold)} or more ({bound})"
    mde = suite.minimum_detectable_drop
    detectable = f"; 80% power only for drops of {pp(mde)} or more" if mde else ""
    return Verdict.OK, f"no significant suite drop ({rates}){detectable}"


# --- per-case p95 latency (G3) ---------------------------------------------------------


def _slowdown_tests(
    pairs: Sequence[tuple[CaseSample, CaseSample]], policy: GatePolicy
) -> dict[str, tuple[float, float]]:
    """Mann-Whitney p and BH-adjusted p for cases with 2+ latencies in both runs.

    One latency against one can never be significant (p >= 0.5), so replay runs skip the
    test, and with it the scipy import.
    """
    if not policy.fail_on_latency_p95_increase:
        return {}
    tested = [(b, c) for b, c in pairs if min(len(b.latencies_ms), len(c.latencies_ms)) >= 2]
    raw = mann_whitney_slower_p_values([(b.latencies_ms, c.latencies_ms) for b, c in tested])
    adjusted = benjamini_hochberg(raw)
    return {b.case_id: (p, q) for (b, _), p, q in zip(tested, raw, adjusted)}


def _latency_change(
    b: CaseSample, c: CaseSample, test: tuple[float, float] | None, policy: GatePolicy
) -> LatencyChange | None:
    if not (b.latencies_ms and c.latencies_ms):
        return None
    p50_b, p50_c = (harrell_davis_quantile(s.latencies_ms, 0.50) for s in (b, c))
    p95_b, p95_c = (harrell_davis_quantile(s.latencies_ms, 0.95) for s in (b, c))
    ratio = p95_c / p95_b if p95_b > 0 else None
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
        verdict=_latency_verdict(
            ratio, p95_c - p95_b, test, min(len(b.latencies_ms), len(c.latencies_ms)), policy
        ),
    )


def _latency_verdict(
    ratio: float | None,
    increase_ms: float,
    test: tuple[float, float] | None,
    attempts: int,
    policy: GatePolicy,
) -> Verdict:
    threshold = policy.fail_on_latency_p95_increase
    if not threshold or ratio is None:
        return Verdict.OK
    if ratio < 1.0 + threshold - _EPS or increase_ms < policy.latency_min_increase_ms:
        return Verdict.OK
    if test is None:
        return Verdict.WARN  # one latency per run: nothing to test, too few to decide
    # BH at alpha, not fdr_level: under no change BH controls the family-wise error at its
    # level, so the per-case family keeps G3's single-test alpha.
    if test[1] > policy.alpha:
        return Verdict.INCONCLUSIVE
    # A p95 from fewer latencies is too rough to block a merge (stats.md G3: n >= 100).
    return Verdict.FAIL if attempts >= policy.latency_min_attempts else Verdict.WARN


def _latency_gate(
    cases: Sequence[CaseDiff],
    pairs: Sequence[tuple[CaseSample, CaseSample]],
    tested: int,
    policy: GatePolicy,
) -> GateResult | None:
    threshold = policy.fail_on_latency_p95_increase
    if not threshold:
        return None
    changes = [(case.case_id, case.latency) for case in cases if case.latency]
    flagged = sorted(
        ((case_id, change) for case_id, change in changes if change.verdict.severity),
        key=lambda item: (-item[1].verdict.severity, -(item[1].p95_ratio or 0.0)),
    )
    verdict = worst_verdict(change.verdict for _, change in flagged)
    reason = _latency_reason(verdict, [case_id for case_id, _ in flagged], len(changes), policy)
    return GateResult(
        name=GateName.LATENCY_P95,
        verdict=verdict,
        reason=reason,
        numbers=_latency_numbers(pairs, tested, flagged, policy),
        case_ids=[case_id for case_id, _ in flagged],
    )


def _latency_reason(
    verdict: Verdict, case_ids: Sequence[str], compared: int, policy: GatePolicy
) -> str:
    size = f"p95 up >= {policy.fail_on_latency_p95_increase * 100:g}%"
    size += f" and >= {policy.latency_min_increase_ms:g} ms"
    if not compared:
        return "no case has latencies in both runs"
    if verdict is Verdict.OK:
        return f"no case with {size}"
    why = {
        Verdict.FAIL: "significantly",
        Verdict.INCONCLUSIVE: "not significant",
        Verdict.WARN: f"too few latencies to fail on (need {policy.latency_min_attempts}/run)",
    }[verdict]
    return f"{len(case_ids)} case(s) {size}, {why}: {id_list(case_ids)}"


def _latency_numbers(
    pairs: Sequence[tuple[CaseSample, CaseSample]],
    tested: int,
    flagged: Sequence[tuple[str, LatencyChange]],
    policy: GatePolicy,
) -> dict[str, Number]:
    timed = [(b, c) for b, c in pairs if b.latencies_ms and c.latencies_ms]
    pooled_b = [ms for b, _ in timed for ms in b.latencies_ms]
    pooled_c = [ms for _, c in timed for ms in c.latencies_ms]
    return {
        "threshold": policy.fail_on_latency_p95_increase,
        "min_increase_ms": policy.latency_min_increase_ms,
        "min_attempts": policy.latency_min_attempts,
        "cases_compared": len(timed),
        "cases_tested": tested,
        "cases_flagged": len(flagged),
        # Context only: a pooled p95 is dominated by the slowest cases (stats.md G3).
        "pooled_baseline_p95_ms": harrell_davis_quantile(pooled_b, 0.95) if pooled_b else None,
        "pooled_current_p95_ms": harrell_davis_quantile(pooled_c, 0.95) if pooled_c else None,
    }


# --- tokens (G4) -----------------------------------------------------------------------


def _token_change(b: CaseSample, c: CaseSample) -> TokenChange | None:
    if not (b.tokens and c.tokens):
        return None
    mean_b, mean_c = fmean(b.tokens), fmean(c.tokens)
    return TokenChange(
        baseline_mean=mean_b,
        current_mean=mean_c,
        delta=mean_c - mean_b,
        ratio=mean_c / mean_b if mean_b > 0 else None,
    )


def _tokens_gate(
    pairs: Sequence[tuple[CaseSample, CaseSample]], policy: GatePolicy
) -> GateResult | None:
    threshold = policy.fail_on_token_increase
    if not threshold:
        return None
    counted = [(b, c) for b, c in pairs if b.tokens and c.tokens]
    total_b = sum(fmean(b.tokens) for b, _ in counted)
    total_c = sum(fmean(c.tokens) for _, c in counted)
    if not counted or total_b <= 0:
        verdict = Verdict.WARN if total_c > 0 else Verdict.OK
        reason = "baseline recorded no tokens" if total_c > 0 else "no token counts in both runs"
        return GateResult(
            name=GateName.TOKENS, verdict=verdict, reason=reason, numbers={}, case_ids=[]
        )
    # Cost is linear in the mean, so the estimand is the ratio of summed per-case means.
    ratio = total_c / total_b
    lower = mean_ratio_lower_bound(
        [b.tokens for b, _ in counted],
        [c.tokens for _, c in counted],
        policy.alpha,
        policy.bootstrap_iterations,
        policy.bootstrap_seed,
    )
    verdict, reason = _tokens_verdict(ratio, lower, threshold)
    grown = _cases_by_token_growth(counted, threshold)
    numbers: dict[str, Number] = {
        "threshold": threshold,
        "cases_compared": len(counted),
        "ratio": ratio,
        "lower_bound": lower,
        "geometric_mean_ratio": _geometric_mean_ratio(counted),
        "baseline_tokens_per_attempt": total_b / len(counted),
        "current_tokens_per_attempt": total_c / len(counted),
    }
    return GateResult(
        name=GateName.TOKENS, verdict=verdict, reason=reason, numbers=numbers, case_ids=grown
    )


def _tokens_verdict(ratio: float, lower: float, threshold: float) -> tuple[Verdict, str]:
    change = f"tokens per attempt x{ratio:.3f} over the suite (lower bound x{lower:.3f})"
    if ratio < 1.0 + threshold - _EPS:
        return Verdict.OK, change
    if lower > 1.0:
        return Verdict.FAIL, f"{change}, at or above x{1.0 + threshold:g}"
    return Verdict.INCONCLUSIVE, f"{change}, at or above x{1.0 + threshold:g}, not significant"


def _cases_by_token_growth(
    counted: Sequence[tuple[CaseSample, CaseSample]], threshold: float
) -> list[str]:
    growth = [(fmean(c.tokens) / fmean(b.tokens), b.case_id) for b, c in counted if fmean(b.tokens)]
    return [case_id for ratio, case_id in sorted(growth, reverse=True) if ratio >= 1 + threshold]


def _geometric_mean_ratio(counted: Sequence[tuple[CaseSample, CaseSample]]) -> float | None:
    """Robust companion of the total ratio: not driven by a few huge cases (stats.md G4)."""
    logs = [
        math.log(fmean(c.tokens) / fmean(b.tokens))
        for b, c in counted
        if fmean(b.tokens) > 0 and fmean(c.tokens) > 0
    ]
    return math.exp(fmean(logs)) if logs else None


def plan(
    baseline: Sequence[CaseSample],
    repeats: int,
    scenarios: int,
    target_drop: float,
    *,
    alpha: float = 0.05,
    power: float = 0.80,
    change_sd: float = 0.0,
) -> Plan:
    """Power analysis of the paired suite gate (Miller's variance decomposition).

    Var(d_j) = tau^2 + 2 E[sigma^2] / R, and MDE = (z_{1-alpha} + z_{power}) sqrt(Var / S).
    Repeats only shrink the within-scenario term: when S target^2 / (z+z)^2 <= tau^2 no
    number of repeats suffices, and ``repeats_needed`` is None.
    """
    if repeats < 1 or scenarios < 1 or not 0.0 < target_drop <= 1.0:
        raise ValueError("plan needs repeats >= 1, scenarios >= 1 and 0 < target_drop <= 1")
    variance, source = _within_scenario_variance(baseline)
    z_sum = NormalDist().inv_cdf(1.0 - alpha) + NormalDist().inv_cdf(power)
    var_d = change_sd**2 + 2.0 * variance / repeats
    room = scenarios * target_drop**2 / z_sum**2 - change_sd**2
    return Plan(
        scenarios=scenarios,
        repeats=repeats,
        alpha=alpha,
        power=power,
        within_scenario_variance=variance,
        variance_source=source,
        change_sd=change_sd,
        minimum_detectable_drop=z_sum * math.sqrt(var_d / scenarios),
        target_drop=target_drop,
        repeats_needed=math.ceil(2.0 * variance / room - _EPS) if room > 0 else None,
        scenarios_needed=math.ceil(z_sum**2 * var_d / target_drop**2 - _EPS),
    )


def _within_scenario_variance(
    baseline: Sequence[CaseSample],
) -> tuple[float, Literal["baseline", "default"]]:
    """Unbiased p(1-p) R/(R-1), averaged over baseline cases with 2+ attempts."""
    unbiased = [
        _rate(s) * (1.0 - _rate(s)) * s.attempts / (s.attempts - 1)
        for s in baseline
        if s.attempts >= 2
    ]
    estimate = fmean(unbiased) if unbiased else 0.0
    # All-solid (or single-attempt) history shows no noise; planning on 0 would promise
    # that any drop is detectable, so fall back to the spec's assumption instead.
    return (estimate, "baseline") if estimate > 0 else (_DEFAULT_WITHIN_VARIANCE, "default")
