"""Per-case and per-suite statistics of repeated agent runs (docs/statistics.md §2).

Pure functions over plain values, and the pydantic models they report. Nothing here
imports numpy, scipy or statsmodels: every run computes these numbers, including runs
without repeats, and those must not pay 0.7-2 s of imports for them.

Unit of analysis: the scenario (= case). Its repeats are resamples of one scenario, so
suite uncertainty is computed from per-scenario rates, never from attempts as if iid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, fmean, stdev

from pydantic import BaseModel, ConfigDict

from .special import harrell_davis_quantile, t_ppf

__all__ = [
    "CaseStats",
    "SuiteStats",
    "case_stats",
    "pass_at_k",
    "pass_hat_k",
    "percentile",
    "suite_stats",
    "wilson_interval",
]


class _ReportModel(BaseModel):
    # defer_build: validators are built on first use, not at import (~0.1 s CPU saved);
    # the plugin imports these modules in runs that may never build a report.
    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, defer_build=True
    )


def _check_counts(passed: int, attempts: int) -> None:
    if not 0 <= passed <= attempts:
        raise ValueError(f"need 0 <= passed <= attempts, got passed={passed}, attempts={attempts}")


def wilson_interval(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Two-sided Wilson score interval for k passes in n attempts.

    Suited to small n (docs/statistics.md §2.1): never degenerate at 0/n or n/n, always in
    [0, 1].
    With no attempts there is no information, so the interval is [0, 1].
    """
    _check_counts(k, n)
    if not 0.0 < conf < 1.0:
        raise ValueError(f"conf must be in (0, 1), got {conf}")
    if n == 0:
        return (0.0, 1.0)
    return _wilson_bounds(k / n, n, conf)


def _wilson_bounds(rate: float, n: int, conf: float) -> tuple[float, float]:
    """Wilson interval of an observed rate over n units (the rate need not be k/n)."""
    z = NormalDist().inv_cdf(0.5 + conf / 2.0)
    shrink = 1.0 + z * z / n
    center = (rate + z * z / (2.0 * n)) / shrink
    half_width = z / shrink * math.sqrt(rate * (1.0 - rate) / n + z * z / (4.0 * n * n))
    # At rate 0 and 1 the bound is exactly 0 or 1; pin it so rounding cannot leak out.
    low = 0.0 if rate <= 0.0 else max(0.0, center - half_width)
    high = 1.0 if rate >= 1.0 else min(1.0, center + half_width)
    return (low, high)


def _check_k(n: int, k: int) -> None:
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the number of attempts ({n}), got {k}")


def pass_hat_k(c: int, n: int, k: int) -> float:
    """pass^k: unbiased estimate that k fresh attempts ALL pass, C(c,k)/C(n,k) (tau-bench).

    Product form, exact and overflow-free. Not the plug-in (c/n)**k, which is biased upward.
    """
    _check_counts(c, n)
    _check_k(n, k)
    if c < k:
        return 0.0
    return math.prod((c - i) / (n - i) for i in range(k))


def pass_at_k(c: int, n: int, k: int) -> float:
    """pass@k: unbiased estimate that at least one of k attempts passes (Chen et al. 2021).

    The numerically stable product form of human-eval: 1 - prod_{i=n-c+1}^{n} (1 - k/i).
    """
    _check_counts(c, n)
    _check_k(n, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0 < q < 1) by Harrell-Davis, as for latency (docs/statistics.md §2.3).

    None when there are no values; a single value is its own quantile.
    """
    if not values:
        return None
    return harrell_davis_quantile(values, q)


class CaseStats(_ReportModel):
    """Statistics of one case (scenario) over its repeated attempts in one run."""

    attempts: int
    """Attempts that reached a verdict (passed + failed): the pass-rate denominator."""
    passed: int
    """Attempts whose checks passed."""
    failed: int
    """Attempts whose checks failed (agent failures; infra errors are not counted here)."""
    infra_errors: int
    """Attempts lost to the harness or provider (timeouts, 5xx); excluded from every rate."""
    pass_rate: float | None
    """passed / attempts; None when no attempt reached a verdict."""
    wilson_low: float
    """Lower end of the two-sided 95% Wilson interval of the pass rate."""
    wilson_high: float
    """Upper end of the two-sided 95% Wilson interval of the pass rate."""
    flaky: bool
    """True when the case both passed and failed in this run (0 < passed < attempts)."""
    pass_hat_k: dict[int, float]
    """pass^k for k = 1..attempts: estimated chance that k fresh attempts all pass."""
    pass_at_k: dict[int, float]
    """pass@k for k = 1..attempts: estimated chance that at least one of k attempts passes."""
    latency_p50_ms: float | None
    """Median attempt latency in milliseconds (Harrell-Davis); None without latencies."""
    latency_p95_ms: float | None
    """95th-percentile attempt latency in milliseconds (Harrell-Davis); None without latencies."""
    tokens_mean: float | None
    """Mean tokens per attempt; None without token counts."""


def case_stats(
    outcomes: Sequence[bool],
    latencies_ms: Sequence[float] = (),
    tokens: Sequence[int] = (),
    infra_errors: int = 0,
) -> CaseStats:
    """Summarize one case: ``outcomes`` holds one pass/fail per graded attempt.

    Infra errors are passed as a count, not as outcomes, so they cannot leak into the
    pass rate. Give latencies and tokens of graded attempts only, for the same reason.
    """
    if infra_errors < 0:
        raise ValueError(f"infra_errors must be >= 0, got {infra_errors}")
    n = len(outcomes)
    c = sum(1 for outcome in outcomes if outcome)
    low, high = wilson_interval(c, n)
    ks = range(1, n + 1)
    return CaseStats(
        attempts=n,
        passed=c,
        failed=n - c,
        infra_errors=infra_errors,
        pass_rate=c / n if n else None,
        wilson_low=low,
        wilson_high=high,
        flaky=0 < c < n,
        pass_hat_k={k: pass_hat_k(c, n, k) for k in ks},
        pass_at_k={k: pass_at_k(c, n, k) for k in ks},
        latency_p50_ms=percentile(latencies_ms, 0.50),
        latency_p95_ms=percentile(latencies_ms, 0.95),
        tokens_mean=fmean(tokens) if tokens else None,
    )


class SuiteStats(_ReportModel):
    """Suite-level pass rate of one run, scenarios weighted equally (docs/statistics.md §2.4)."""

    scenarios: int
    """Scenarios with at least one graded attempt; these make up the suite pass rate."""
    unscored_scenarios: int
    """Scenarios whose every attempt was an infra error; left out of the suite pass rate."""
    attempts: int
    """Graded attempts over all scenarios."""
    infra_errors: int
    """Infra errors over all scenarios."""
    infra_error_rate: float | None
    """infra_errors / (attempts + infra_errors); None when nothing ran."""
    flaky_scenarios: int
    """Scenarios that both passed and failed in this run."""
    pass_rate: float | None
    """Mean of the per-scenario pass rates; None when no scenario was graded."""
    standard_error: float | None
    """Scenario-clustered standard error, sd(per-scenario rates) / sqrt(scenarios); needs 2+."""
    ci_low: float | None
    """Lower end of the 95% interval: the hull of the clustered t interval (scenarios - 1 df)
    and a Wilson interval over the scenarios (n = scenarios, successes = scenarios x rate),
    so it never has zero width; None when no scenario was graded."""
    ci_high: float | None
    """Upper end of that 95% interval, within [0, 1]."""


def _suite_interval(
    mean: float | None, se: float | None, scenarios: int
) -> tuple[float | None, float | None]:
    """Hull of the clustered t interval and a scenario-level Wilson (docs/statistics.md §2.4).

    The t interval alone collapses to [1, 1] when every scenario passes every attempt (its
    SE is 0: the Wald-at-10/10 flaw one level up); Wilson over the S scenarios does not.
    With real spread between scenarios the t interval is the wider and wins.
    """
    if mean is None:
        return None, None
    low, high = _wilson_bounds(mean, scenarios, 0.95)
    if se is not None:
        half_width = t_ppf(0.975, scenarios - 1) * se
        low, high = min(low, mean - half_width), max(high, mean + half_width)
    return max(0.0, low), min(1.0, high)


def suite_stats(cases: Sequence[CaseStats]) -> SuiteStats:
    """Aggregate per-case stats into the suite pass rate with a scenario-clustered interval.

    The mean of per-scenario rates estimates the suite rate with scenarios weighted
    equally; its SE over scenarios is the clustered SE (Miller 2024), which the iid SE
    over all attempts understates.
    """
    rates = [case.pass_rate for case in cases if case.pass_rate is not None]
    attempts = sum(case.attempts for case in cases)
    infra = sum(case.infra_errors for case in cases)
    mean = fmean(rates) if rates else None
    se = stdev(rates) / math.sqrt(len(rates)) if len(rates) >= 2 else None
    ci_low, ci_high = _suite_interval(mean, se, len(rates))
    return SuiteStats(
        scenarios=len(rates),
        unscored_scenarios=len(cases) - len(rates),
        attempts=attempts,
        infra_errors=infra,
        infra_error_rate=infra / (attempts + infra) if attempts + infra else None,
        flaky_scenarios=sum(1 for case in cases if case.flaky),
        pass_rate=mean,
        standard_error=se,
        ci_low=ci_low,
        ci_high=ci_high,
    )
