"""Compare a run with its baseline and gate CI on the difference (docs/statistics.md §3).

Between live (or full, or record) runs every gate FAILs only on a change that is BOTH
statistically significant (one-sided, at the gate's share of ``GatePolicy.alpha``) AND at
least as large as its practical threshold; the shares sum to alpha, so an unchanged suite
FAILs at most alpha of the time (docs/statistics.md §4). A large change without
significance is INCONCLUSIVE: never passed silently, never failed.

Between two deterministic replays, or a replay of a record baseline's journals, there is
nothing to estimate (§5): a case that fails more often than in the baseline has regressed at
any repeat count (whatever ``fail_on_scenario_drop`` says), the thresholds are plain
thresholds, and no verdict asks for repeats.

Pure functions over plain values; numpy/scipy are imported lazily by ``significance``.
The schema lives in ``gate_models``; callers import ``pytest_nodeval.gate``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist, StatisticsError, correlation, fmean, stdev
from typing import Literal

from ..modes import MODES
from .adaptive import adaptive_design, sequential_p
from .gate_models import (
    CaseDiff,
    CaseSample,
    Diff,
    GateName,
    GatePolicy,
    GateResult,
    Movement,
    Number,
    PassRateChange,
    PendingGate,
    Plan,
    SuiteComparison,
    TokenChange,
    Verdict,
)
from .latency_gate import latency_change, latency_gate, slowdown_tests
from .significance import (
    RatioBound,
    boschloo_regression_p,
    collapse_repeats_needed,
    holm,
    newcombe_interval,
    ratio_lower_bounds,
    smallest_regression_p,
    stratified_permutation_p_value,
)
from .special import t_ppf
from .wording import id_list, limit_pp, percent, pp

__all__ = ["compare", "plan"]

# k/n arithmetic: 0.9 - 0.7 == 0.19999999999999996 must still count as a 20 pp drop.
_EPS = 1e-9
# Power at which the minimum detectable effect (MDE) is reported (docs/statistics.md §7.1).
_MDE_POWER = 0.80
# Planning assumption E[p(1-p)] when the baseline shows no within-case noise (§7.2).
_DEFAULT_WITHIN_VARIANCE = 0.10
# scipy's Boschloo finds its supremum numerically, so its p may come out a hair under the exact
# one: a case whose exact smallest p is within this factor of the per-case level counts as able
# to reach it, and the per-case gate keeps its share of the budget (§4.1).
_FLOOR_SLACK = 1.01
_DETERMINISTIC = "deterministic"
_RECORD = "record"
Pair = tuple[CaseSample, CaseSample]


def compare(
    baseline: Sequence[CaseSample],
    current: Sequence[CaseSample],
    policy: GatePolicy,
    *,
    baseline_mode: str = "live",
    current_mode: str = "live",
) -> Diff:
    """Diff two runs case by case and evaluate every enabled gate (docs/statistics.md §1.2, §3).

    The modes are those of ``pytest_nodeval.modes``; a deterministic current run against a
    deterministic or record baseline is compared without statistics (§5). A case with no
    graded attempt in a run is not in that run: listed as new or missing, never compared. A
    current run with no graded attempt at all FAILs the suite gate (§3.2), never passes.
    """
    for mode in (baseline_mode, current_mode):
        if mode not in MODES:
            raise ValueError(f"unknown run mode {mode!r}; expected one of {', '.join(MODES)}")
    replay = _replay_rules(baseline_mode, current_mode)
    base, cur = _by_id(baseline, "baseline"), _by_id(current, "current")
    pairs = [(base[case_id], cur[case_id]) for case_id in sorted(base.keys() & cur.keys())]
    regression_tests = {} if replay else _regression_tests(pairs, policy)
    slowdowns = slowdown_tests(pairs, policy, replay)
    cases = [
        CaseDiff(
            case_id=b.case_id,
            pass_rate=_pass_rate_change(b, c, regression_tests.get(b.case_id), policy, replay),
            latency=latency_change(b, c, slowdowns.get(b.case_id), policy, replay),
            tokens=_token_change(b, c),
            cost=_mean_change(b.costs, c.costs),
        )
        for b, c in pairs
    ]
    suite_level = _suite_level(pairs, policy)
    suite = _suite_comparison(pairs, suite_level, policy.bootstrap_seed)
    pending = [
        latency_gate(cases, pairs, policy, replay),
        _tokens_gate(pairs, policy, replay),
        _cost_gate(pairs, policy, replay),
    ]
    gates = [
        _suite_gate(suite, cases, policy, suite_level, replay, empty_run=not cur),
        _scenario_gate(cases, pairs, policy, replay),
        *_with_bounds(pending, policy),
    ]
    return Diff(
        policy=asdict(policy),
        baseline_mode=baseline_mode,
        current_mode=current_mode,
        deterministic=replay,
        notes=_mode_notes(baseline_mode, current_mode, replay),
        cases=cases,
        new_cases=sorted(cur.keys() - base.keys()),
        missing_cases=sorted(base.keys() - cur.keys()),
        suite=suite,
        gates=[gate for gate in gates if gate is not None],
    )


def _with_bounds(
    pending: Sequence[PendingGate | None], policy: GatePolicy
) -> list[GateResult | None]:
    """The gates' results, their bootstrap bounds computed together: gates that resample the
    same cases and attempts share one draw of the resamples (docs/statistics.md §3.4)."""
    asked = [gate.bound for gate in pending if gate is not None and gate.bound is not None]
    bounds = iter(ratio_lower_bounds(asked, policy.bootstrap_iterations, policy.bootstrap_seed))
    return [
        gate.result(None if gate.bound is None else next(bounds)) if gate is not None else None
        for gate in pending
    ]


def _replay_rules(baseline_mode: str, current_mode: str) -> bool:
    """Whether both runs' outcomes are exact, so every difference is real (§5).

    A deterministic run replays its case's golden journal; a record run is the live run that
    wrote that journal. Replaying a record baseline's journals reproduces its attempts
    exactly, so that pair is replay-exact by construction. The reverse is not: a record
    current run called the live model again, and its outcomes are samples.
    """
    return current_mode == _DETERMINISTIC and baseline_mode in (_DETERMINISTIC, _RECORD)


def _mode_notes(baseline_mode: str, current_mode: str, replay: bool) -> list[str]:
    if baseline_mode == current_mode:
        return []
    modes = f"modes differ: baseline {baseline_mode}, current {current_mode}"
    if replay:
        return [
            f"{modes}; the current run replays the journals the baseline recorded, so both "
            "are exact and are compared by the replay rules"
        ]
    why = (
        "; the record run called the live model, so its outcomes are samples"
        if _RECORD in (baseline_mode, current_mode)
        else ""
    )
    note = (
        f"{modes}{why}; compared as live runs with the statistical gates, and part of any "
        "change may be the mode's"
    )
    return [note]


def _by_id(samples: Sequence[CaseSample], run: str) -> dict[str, CaseSample]:
    """The run's cases with a graded attempt: one with none is not in the run (new/missing)."""
    by_id: dict[str, CaseSample] = {}
    seen: set[str] = set()
    for sample in samples:
        if sample.case_id in seen:
            raise ValueError(f"case id {sample.case_id!r} appears twice in the {run} run")
        seen.add(sample.case_id)
        if sample.attempts:
            by_id[sample.case_id] = sample
    return by_id


def _rate(sample: CaseSample) -> float:
    return sample.passed / sample.attempts


# --- per-case pass rate (G2, docs/statistics.md §3.3) -----------------------------------


def _regression_tests(pairs: Sequence[Pair], policy: GatePolicy) -> dict[str, tuple[float, float]]:
    """Boschloo p and Holm-adjusted p for every case graded in both runs."""
    if not policy.fail_on_scenario_drop:
        return {}
    tested = [(b, c) for b, c in pairs if b.attempts and c.attempts]
    raw = [_regression_p(b, c) for b, c in tested]
    return {b.case_id: (p, q) for (b, _), p, q in zip(tested, raw, holm(raw), strict=True)}


def _regression_p(b: CaseSample, c: CaseSample) -> float:
    """One-sided p of a drop: Boschloo, or its sequential form for adaptive repeats (§6.4)."""
    if c.adaptive_cap is not None:
        design = adaptive_design(c.adaptive_cap)
        return sequential_p(b.passed, b.attempts, c.outcomes, design)
    return boschloo_regression_p(b.passed, b.attempts, c.passed, c.attempts)


def _pass_rate_change(
    b: CaseSample,
    c: CaseSample,
    test: tuple[float, float] | None,
    policy: GatePolicy,
    replay: bool,
) -> PassRateChange | None:
    if not (b.attempts and c.attempts):
        return None
    delta = _rate(c) - _rate(b)
    ci_low, ci_high = newcombe_interval(c.passed, c.attempts, b.passed, b.attempts)
    if replay:
        verdict = _replay_case_verdict(delta, policy)
    else:
        verdict = _case_verdict(delta, test, policy)
        if verdict is Verdict.INCONCLUSIVE and c.adaptive_decided:
            verdict = Verdict.OK  # the adaptive design decided "no regression" (stats/adaptive.py)
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
        verdict=verdict,
    )


def _movement(delta: float) -> Movement:
    if abs(delta) < _EPS:
        return Movement.SAME
    return Movement.DOWN if delta < 0 else Movement.UP


def _replay_case_verdict(delta: float, policy: GatePolicy) -> Verdict:
    """Replay is deterministic: any drop is a real change, whatever the repeats and whatever
    ``fail_on_scenario_drop`` says (a threshold against noise, and replay has none)."""
    return Verdict.FAIL if delta < -_EPS else Verdict.OK


def _case_verdict(delta: float, test: tuple[float, float] | None, policy: GatePolicy) -> Verdict:
    threshold = policy.fail_on_scenario_drop
    if not threshold or -delta < threshold - _EPS:
        return Verdict.OK
    assert test is not None, "every case graded in both runs is tested while the gate is on"
    # Holm, not BH: the FAIL decision must control the family-wise error (§4.2).
    if test[1] <= policy.level(GateName.SCENARIO_REGRESSION):
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def _scenario_gate(
    cases: Sequence[CaseDiff], pairs: Sequence[Pair], policy: GatePolicy, replay: bool
) -> GateResult | None:
    """G2, per-case regression: Boschloo per case, Holm across cases (docs/statistics.md §3.3).

    Between deterministic replays any drop of a case FAILs, even with the gate's threshold at
    0: the threshold sizes a drop worth testing against noise, and replay has none (§5).
    """
    threshold = policy.fail_on_scenario_drop
    if not threshold and not replay:
        return None
    changes = sorted(
        ((case.case_id, case.pass_rate) for case in cases if case.pass_rate),
        key=lambda item: item[1].delta,  # largest drop first
    )
    failed = [case_id for case_id, change in changes if change.verdict is Verdict.FAIL]
    unsure = [case_id for case_id, change in changes if change.verdict is Verdict.INCONCLUSIVE]
    level = policy.level(GateName.SCENARIO_REGRESSION)
    numbers: dict[str, Number] = {
        "threshold": threshold,
        "level": None if replay else level,
        "cases_tested": 0 if replay else len(changes),
        "failed": len(failed),
        "inconclusive": len(unsure),
    }
    if replay:
        verdict, reason = _replay_scenario_verdict(failed)
    else:
        floor = collapse_repeats_needed(level / max(1, len(changes)))
        numbers["repeats_to_decide"] = floor
        verdict, reason = _scenario_verdict(failed, unsure, pairs, threshold, floor)
    return GateResult(
        name=GateName.SCENARIO_REGRESSION,
        verdict=verdict,
        reason=reason,
        numbers=numbers,
        case_ids=failed + unsure,
    )


def _replay_scenario_verdict(failed: Sequence[str]) -> tuple[Verdict, str]:
    if failed:
        return Verdict.FAIL, f"replay: {len(failed)} case(s) fail more often: {id_list(failed)}"
    return Verdict.OK, "replay: no case fails more often than in the baseline"


def _scenario_verdict(
    failed: Sequence[str],
    unsure: Sequence[str],
    pairs: Sequence[Pair],
    threshold: float,
    floor: int,
) -> tuple[Verdict, str]:
    size = f">= {limit_pp(threshold)}"
    if failed:
        return Verdict.FAIL, f"{len(failed)} case(s) regressed {size}: {id_list(failed)}"
    if not unsure:
        return Verdict.OK, f"no case dropped {size}"
    repeats = min((min(b.attempts, c.attempts) for b, c in pairs if b.case_id in unsure))
    why = f"{len(unsure)} case(s) dropped {size}, not significant"
    if repeats < floor:
        # Below the floor no result of these cases could FAIL: say what would decide.
        return Verdict.INCONCLUSIVE, (
            f"{why}: with {repeats} attempt(s) per side no drop can be significant; re-run "
            f"them with >= {floor} repeats per side"
        )
    return Verdict.INCONCLUSIVE, f"{why}: re-run them with more repeats"


# --- suite pass rate (G1, docs/statistics.md §3.2) --------------------------------------


def _suite_level(pairs: Sequence[Pair], policy: GatePolicy) -> float:
    """The suite gate's level: its share of the budget, plus the per-case gate's when that gate
    cannot FAIL on these runs whatever their outcomes (docs/statistics.md §4.1).

    The budget holds by the union bound over the gates that can FAIL: one that cannot spends
    none of it. Whether the per-case gate can depends only on each case's attempts and on the
    policy, never on which attempts passed, so the suite test stays exact at its new level.
    """
    level = policy.level(GateName.SUITE_PASS_RATE)
    attempts = [(b.attempts, c.attempts, c.adaptive_cap) for b, c in pairs]
    if _scenario_gate_can_fail(attempts, policy):
        return level
    return level + policy.level(GateName.SCENARIO_REGRESSION)


def _scenario_gate_can_fail(
    attempts: Sequence[tuple[int, int, int | None]], policy: GatePolicy
) -> bool:
    """Whether some result of these cases could FAIL the per-case gate (§3.3): it is on and some
    case can reach Holm's first step, the level / m; an adaptive case always counts as able.
    ``attempts`` holds each compared case's (baseline, current, adaptive cap)."""
    tested = [(b, c, cap) for b, c, cap in attempts if b and c]
    if not policy.fail_on_scenario_drop or not tested:
        return False
    first_step = policy.level(GateName.SCENARIO_REGRESSION) / len(tested)
    return any(
        cap is not None or smallest_regression_p(b, c) <= first_step * _FLOOR_SLACK
        for b, c, cap in tested
    )


def _suite_comparison(pairs: Sequence[Pair], level: float, seed: int) -> SuiteComparison:
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
    diffs = [_exact_difference(b.passed, b.attempts, c.passed, c.attempts) for b, c in graded]
    n, delta = len(diffs), fmean(diffs)
    # delta, SE and interval describe the equal-weighted suite pass rate; the p-value is the
    # stratified permutation test over attempts (§3.2): exact at any S, its floor set by the
    # attempts, and weighting each case's difference by the inverse of its null SD.
    se = stdev(diffs) / math.sqrt(n) if n >= 2 else None
    margin = t_ppf(1.0 - level, n - 1) * se if se is not None else None
    tables = [(b.passed, b.attempts, c.passed, c.attempts) for b, c in graded]
    z = NormalDist().inv_cdf
    null_se = _null_standard_error(tables)
    return SuiteComparison(
        scenarios=n,
        baseline_pass_rate=fmean(rates_b),
        current_pass_rate=fmean(rates_c),
        delta=delta,
        standard_error=se,
        ci_low=delta - margin if margin is not None else None,
        ci_high=delta + margin if margin is not None else None,
        p_value=stratified_permutation_p_value(tables, seed),
        p_value_method="stratified-permutation",
        correlation=_correlation(rates_b, rates_c),
        minimum_detectable_drop=(z(1 - level) + z(_MDE_POWER)) * null_se if null_se else None,
    )


def _null_standard_error(tables: Sequence[tuple[int, int, int, int]]) -> float:
    """SE of the equal-weighted suite difference under the test's null: each case's attempts
    binomial at its rate pooled over both runs (§7.1). 0 when no case has both outcomes."""
    variance = 0.0
    for passed_b, attempts_b, passed_c, attempts_c in tables:
        pooled = (passed_b + passed_c) / (attempts_b + attempts_c)
        variance += pooled * (1.0 - pooled) * (1.0 / attempts_b + 1.0 / attempts_c)
    return math.sqrt(variance) / len(tables)


@lru_cache(maxsize=4096)  # at R repeats only (R + 1)^2 distinct tables
def _exact_difference(passed_b: int, attempts_b: int, passed_c: int, attempts_c: int) -> float:
    return float(Fraction(passed_c, attempts_c) - Fraction(passed_b, attempts_b))


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    try:
        return correlation(xs, ys)
    except StatisticsError:  # fewer than two scenarios, or a run with constant rates
        return None


def _suite_gate(
    suite: SuiteComparison,
    cases: Sequence[CaseDiff],
    policy: GatePolicy,
    level: float,
    replay: bool,
    *,
    empty_run: bool,
) -> GateResult | None:
    """G1, suite pass-rate regression: stratified permutation test at ``level``
    (``_suite_level``) and the practical drop (docs/statistics.md §3.2); a plain threshold
    between deterministic replays (§5).

    A current run with no graded attempt FAILs it, even with the gate off: a run that
    graded nothing has shown nothing, and must not pass as "no drop"."""
    threshold = policy.fail_on_score_drop
    if not threshold and not empty_run:
        return None
    if empty_run:
        verdict, reason = (
            Verdict.FAIL,
            (
                "the current run graded no attempt (no case, or every case with 0 attempts): "
                "nothing to compare with the baseline"
            ),
        )
    elif replay:
        verdict, reason = _replay_suite_verdict(suite, threshold)
    else:
        verdict, reason = _suite_verdict(suite, threshold, level)
    down = sorted(
        (case.pass_rate.delta, case.case_id)
        for case in cases
        if case.pass_rate and case.pass_rate.movement is Movement.DOWN
    )
    numbers: dict[str, Number] = {
        "threshold": threshold,
        "level": None if replay else level,
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


def _replay_suite_verdict(suite: SuiteComparison, threshold: float) -> tuple[Verdict, str]:
    if suite.delta is None:
        return Verdict.OK, "no case was graded in both runs"
    rates = f"{percent(suite.baseline_pass_rate)} -> {percent(suite.current_pass_rate)}"
    if suite.delta <= -threshold + _EPS:
        return Verdict.FAIL, f"replay: suite pass rate fell {pp(-suite.delta)} ({rates})"
    return Verdict.OK, f"replay: suite pass rate {rates}, under a {limit_pp(threshold)} drop"


def _suite_verdict(suite: SuiteComparison, threshold: float, level: float) -> tuple[Verdict, str]:
    if suite.delta is None or suite.p_value is None:
        return Verdict.OK, "no case was graded in both runs"
    rates = f"{percent(suite.baseline_pass_rate)} -> {percent(suite.current_pass_rate)}"
    fell = f"suite pass rate fell {pp(-suite.delta)} ({rates})"
    significant = suite.p_value <= level
    if suite.delta <= -threshold + _EPS:
        if significant:
            return Verdict.FAIL, f"{fell}, one-sided p={suite.p_value:.4f} <= {level:g}"
        not_significant = f"not significant (p={suite.p_value:.4f} > {level:g})"
        return Verdict.INCONCLUSIVE, f"{fell}, {not_significant}: add repeats or scenarios"
    if significant:
        return Verdict.OK, f"{fell}: significant but under the {limit_pp(threshold)} threshold"
    if suite.standard_error == 0.0:
        # Zero width: every scenario moved alike (4 cases at 10/10 twice), which says nothing
        # of how far the suite could drop; such an interval certifies nothing.
        return Verdict.OK, (
            f"no significant suite drop ({rates}); every paired scenario changed by the same "
            "amount, so no interval bounds the drop"
        )
    if suite.ci_low is not None and suite.ci_low > -threshold:
        bound = f"lower bound {pp(suite.ci_low, signed=True)}"
        return Verdict.OK, f"no suite drop of {limit_pp(threshold)} or more ({bound})"
    mde = suite.minimum_detectable_drop
    detectable = f"; 80% power only for drops of {pp(mde)} or more" if mde else ""
    return Verdict.OK, f"no significant suite drop ({rates}){detectable}"


# --- tokens (G4) and cost (docs/statistics.md §3.5 and §3.6) ----------------------------


@dataclass(frozen=True, slots=True)
class _Spend:
    """A per-attempt quantity whose suite mean must not grow: tokens or cost in USD."""

    gate: GateName
    noun: str
    """What the reason lines call it."""
    values: Callable[[CaseSample], Sequence[float]]
    threshold: Callable[[GatePolicy], float]
    per_attempt: str
    """Key of the per-attempt means in the gate's numbers."""


_TOKENS = _Spend(
    GateName.TOKENS,
    "tokens",
    lambda s: s.tokens,
    lambda p: p.fail_on_token_increase,
    "tokens_per_attempt",
)
_COST = _Spend(
    GateName.COST,
    "cost",
    lambda s: s.costs,
    lambda p: p.fail_on_cost_increase,
    "cost_per_attempt_usd",
)


def _token_change(b: CaseSample, c: CaseSample) -> TokenChange | None:
    return _mean_change(b.tokens, c.tokens)


def _mean_change(b: Sequence[float], c: Sequence[float]) -> TokenChange | None:
    if not (b and c):
        return None
    mean_b, mean_c = fmean(b), fmean(c)
    return TokenChange(
        baseline_mean=mean_b,
        current_mean=mean_c,
        delta=mean_c - mean_b,
        ratio=mean_c / mean_b if mean_b > 0 else None,
    )


def _tokens_gate(pairs: Sequence[Pair], policy: GatePolicy, replay: bool) -> PendingGate | None:
    """G4, tokens per attempt over the suite (docs/statistics.md §3.5)."""
    return _spend_gate(_TOKENS, pairs, policy, replay)


def _cost_gate(pairs: Sequence[Pair], policy: GatePolicy, replay: bool) -> PendingGate | None:
    """The cost gate: the token gate's rule on USD per attempt (docs/statistics.md §3.6)."""
    return _spend_gate(_COST, pairs, policy, replay)


def _spend_gate(
    spend: _Spend, pairs: Sequence[Pair], policy: GatePolicy, replay: bool
) -> PendingGate | None:
    """Ratio of summed per-case means with a paired two-stage bootstrap lower bound
    (docs/statistics.md §3.5); a plain threshold between deterministic replays (§5)."""
    threshold = spend.threshold(policy)
    if not threshold:
        return None
    counted = [
        (spend.values(b), spend.values(c), b.case_id)
        for b, c in pairs
        if spend.values(b) and spend.values(c)
    ]
    total_b = sum(fmean(b) for b, _, _ in counted)
    total_c = sum(fmean(c) for _, c, _ in counted)
    if not counted or total_b <= 0:
        verdict = Verdict.WARN if total_c > 0 else Verdict.OK
        reason = (
            f"baseline recorded no {spend.noun}"
            if total_c > 0
            else f"no {spend.noun} figures in both runs"
        )
        empty = GateResult(name=spend.gate, verdict=verdict, reason=reason, numbers={}, case_ids=[])
        return PendingGate(None, lambda _: empty)
    # Money is linear in the mean, so the estimand is the ratio of summed per-case means.
    ratio = total_c / total_b
    level = policy.level(spend.gate)
    bound = None
    if not replay and ratio >= 1.0 + threshold - _EPS:  # the bound only matters for a FAIL
        bound = RatioBound([b for b, _, _ in counted], [c for _, c, _ in counted], level)
    geometric = _geometric_mean_ratio(counted)
    grown = _cases_by_growth(counted, threshold)

    def result(lower: float | None) -> GateResult:
        verdict, reason = _spend_verdict(spend.noun, ratio, lower, threshold, replay)
        numbers: dict[str, Number] = {
            "threshold": threshold,
            "level": None if replay else level,
            "cases_compared": len(counted),
            "ratio": ratio,
            "lower_bound": lower,
            "geometric_mean_ratio": geometric,
            f"baseline_{spend.per_attempt}": total_b / len(counted),
            f"current_{spend.per_attempt}": total_c / len(counted),
        }
        return GateResult(
            name=spend.gate, verdict=verdict, reason=reason, numbers=numbers, case_ids=grown
        )

    return PendingGate(bound, result)


def _spend_verdict(
    noun: str, ratio: float, lower: float | None, threshold: float, replay: bool
) -> tuple[Verdict, str]:
    change = f"{noun} per attempt x{ratio:.3f} over the suite"
    limit = f"x{1.0 + threshold:g}"
    if ratio < 1.0 + threshold - _EPS:
        return Verdict.OK, f"{change}, under {limit}"
    if replay:
        return Verdict.FAIL, f"replay: {change}, at or above {limit}"
    assert lower is not None, "the bound is computed for every ratio at the threshold"
    bounded = f"{change} (lower bound x{lower:.3f}), at or above {limit}"
    if lower > 1.0:
        return Verdict.FAIL, bounded
    return Verdict.INCONCLUSIVE, f"{bounded}, not significant: add repeats"


_Counted = tuple[Sequence[float], Sequence[float], str]


def _cases_by_growth(counted: Sequence[_Counted], threshold: float) -> list[str]:
    growth = [(fmean(c) / fmean(b), case_id) for b, c, case_id in counted if fmean(b)]
    return [case_id for ratio, case_id in sorted(growth, reverse=True) if ratio >= 1 + threshold]


def _geometric_mean_ratio(counted: Sequence[_Counted]) -> float | None:
    """Robust companion of the total ratio: not driven by a few huge cases (§3.5)."""
    logs = [math.log(fmean(c) / fmean(b)) for b, c, _ in counted if fmean(b) > 0 and fmean(c) > 0]
    return math.exp(fmean(logs)) if logs else None


def plan(
    baseline: Sequence[CaseSample],
    repeats: int,
    scenarios: int,
    target_drop: float,
    *,
    alpha: float | None = None,
    power: float = 0.80,
    mode: str = "live",
) -> Plan:
    """Power of the suite gate's test for a uniform drop (§7.2), by the normal approximation
    of its equally weighted statistic: MDE = (z_{1-alpha} + z_{power}) sqrt(2 sigma^2 / (R S)).

    The test conditions on each case's passes, so its noise is the attempts' alone: more
    repeats or more cases both shrink it, and a spread of the true change across cases adds
    none. ``alpha`` defaults to the suite gate's level under the default GatePolicy at these
    repeats and cases (with the per-case gate's share when no case could FAIL that gate). A
    deterministic baseline (``mode``) needs no power: replay sees every drop, and repeats
    add nothing.
    """
    if repeats < 1 or scenarios < 1 or not 0.0 < target_drop <= 1.0:
        raise ValueError("plan needs repeats >= 1, scenarios >= 1 and 0 < target_drop <= 1")
    levels: Sequence[float] = _PLANNED_LEVELS if alpha is None else (alpha,)
    level_at = _planned_level if alpha is None else lambda repeats, scenarios: alpha
    here = level_at(repeats, scenarios)
    if mode == _DETERMINISTIC:
        return _replay_plan(repeats, scenarios, target_drop, here, power)
    variance, source = _within_scenario_variance(baseline)
    z = NormalDist().inv_cdf

    def attempts_needed(level: float) -> float:  # R x S
        return 2.0 * variance * (z(1.0 - level) + z(power)) ** 2 / target_drop**2

    return Plan(
        scenarios=scenarios,
        repeats=repeats,
        alpha=here,
        power=power,
        within_scenario_variance=variance,
        variance_source=source,
        minimum_detectable_drop=(z(1.0 - here) + z(power))
        * math.sqrt(2.0 * variance / (repeats * scenarios)),
        target_drop=target_drop,
        repeats_needed=_fewest(
            lambda level: math.ceil(attempts_needed(level) / scenarios - _EPS),
            lambda needed: level_at(needed, scenarios),
            levels,
        ),
        scenarios_needed=_fewest(
            lambda level: math.ceil(attempts_needed(level) / repeats - _EPS),
            lambda needed: level_at(repeats, needed),
            levels,
        ),
    )


# The suite gate's two levels under the default GatePolicy: its share, and its share with the
# per-case gate's when that gate cannot FAIL (§4.1).
_PLANNED_LEVELS: tuple[float, float] = (
    GatePolicy().level(GateName.SUITE_PASS_RATE),
    GatePolicy().level(GateName.SUITE_PASS_RATE) + GatePolicy().level(GateName.SCENARIO_REGRESSION),
)


def _planned_level(repeats: int, scenarios: int) -> float:
    """The suite gate's level under the default GatePolicy with this many repeats a side for
    every case: the larger one while no case could FAIL the per-case gate (§4.1)."""
    planned = [(repeats, repeats, None)] * scenarios
    return (
        _PLANNED_LEVELS[0] if _scenario_gate_can_fail(planned, GatePolicy()) else _PLANNED_LEVELS[1]
    )


def _fewest(
    count: Callable[[float], int], level_at: Callable[[int], float], levels: Sequence[float]
) -> int:
    """The fewest repeats (or cases) that reach the target at the level the gate would run at
    with them: the larger level holds only while the answer stays below the per-case floor."""
    for level in sorted(levels, reverse=True):
        needed = count(level)
        if level_at(needed) >= level:
            return needed
    return count(min(levels))


def _replay_plan(
    repeats: int, scenarios: int, target_drop: float, alpha: float, power: float
) -> Plan:
    """Replay has no noise: one attempt of one case is the smallest drop, and it is seen."""
    return Plan(
        scenarios=scenarios,
        repeats=repeats,
        alpha=alpha,
        power=power,
        within_scenario_variance=0.0,
        variance_source="baseline",
        minimum_detectable_drop=1.0 / (scenarios * repeats),
        target_drop=target_drop,
        repeats_needed=None,
        scenarios_needed=scenarios,
        deterministic=True,
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
    # that any drop is detectable, so fall back to the planning assumption instead.
    return (estimate, "baseline") if estimate > 0 else (_DEFAULT_WITHIN_VARIANCE, "default")
