"""Per-case and suite statistics: the worked examples of docs/statistics.md §8, and cross-checks."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats  # type: ignore[import-untyped]
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from pytest_nodeval.stats.run_stats import (
    CaseStats,
    case_stats,
    pass_at_k,
    pass_hat_k,
    percentile,
    suite_stats,
    wilson_interval,
)

# docs/statistics.md §8.2: passes out of 10 per scenario.
BASELINE_PASSES = [10, 10, 10, 9, 9, 8, 10, 7, 10, 6, 9, 10]


def outcomes(passed: int, attempts: int) -> list[bool]:
    return [True] * passed + [False] * (attempts - passed)


@pytest.mark.parametrize("conf", [0.80, 0.90, 0.95, 0.99])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 20, 37, 100])
def test_wilson_matches_statsmodels(n: int, conf: float) -> None:
    for k in range(n + 1):
        expected = proportion_confint(k, n, alpha=1 - conf, method="wilson")
        assert wilson_interval(k, n, conf) == pytest.approx(expected, abs=1e-12)


def test_wilson_reproduces_the_worked_example() -> None:
    assert wilson_interval(9, 10) == pytest.approx((0.596, 0.982), abs=5e-4)
    assert wilson_interval(6, 10) == pytest.approx((0.313, 0.832), abs=5e-4)
    # A healthy scenario at 10/10 still gets an informative lower bound, and exactly 1 above.
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7224672001371106, abs=1e-12)
    assert high == 1.0
    assert wilson_interval(0, 10)[0] == 0.0


def test_wilson_without_attempts_is_uninformative_and_bad_counts_are_rejected() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="passed=11, attempts=10"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="conf"):
        wilson_interval(1, 2, conf=1.0)


@pytest.mark.parametrize(
    ("c", "k", "hat", "at"),
    [  # docs/statistics.md §8.1, n = 10
        (9, 1, 0.9000, 0.9000),
        (9, 2, 0.8000, 1.0000),
        (9, 3, 0.7000, 1.0000),
        (9, 5, 0.5000, 1.0000),
        (9, 10, 0.0000, 1.0000),
        (6, 1, 0.6000, 0.6000),
        (6, 2, 0.3333, 0.8667),
        (6, 3, 0.1667, 0.9667),
        (6, 5, 0.0238, 1.0000),
        (6, 10, 0.0000, 1.0000),
    ],
)
def test_pass_hat_k_and_pass_at_k_reproduce_the_worked_example(
    c: int, k: int, hat: float, at: float
) -> None:
    assert pass_hat_k(c, 10, k) == pytest.approx(hat, abs=5e-5)
    assert pass_at_k(c, 10, k) == pytest.approx(at, abs=5e-5)


def test_pass_k_estimators_equal_their_binomial_definitions() -> None:
    for n in range(1, 16):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_hat_k(c, n, k) == pytest.approx(math.comb(c, k) / math.comb(n, k))
                expected_at = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(c, n, k) == pytest.approx(expected_at, abs=1e-12)


def test_pass_hat_k_is_not_the_biased_plug_in() -> None:
    assert pass_hat_k(6, 10, 3) == pytest.approx(1 / 6)
    assert pass_hat_k(6, 10, 3) < 0.6**3


@pytest.mark.parametrize("k", [0, 11])
def test_pass_k_rejects_k_outside_1_to_n(k: int) -> None:
    with pytest.raises(ValueError, match="k must be between 1"):
        pass_hat_k(5, 10, k)
    with pytest.raises(ValueError, match="k must be between 1"):
        pass_at_k(5, 10, k)


def test_case_stats_keeps_infra_errors_out_of_the_pass_rate() -> None:
    stats = case_stats(outcomes(6, 10), infra_errors=3)
    assert (stats.attempts, stats.passed, stats.failed, stats.infra_errors) == (10, 6, 4, 3)
    assert stats.pass_rate == pytest.approx(0.6)
    assert (stats.wilson_low, stats.wilson_high) == pytest.approx(wilson_interval(6, 10))
    assert stats.flaky


def test_case_stats_reports_pass_k_for_every_k_up_to_the_attempts() -> None:
    stats = case_stats(outcomes(9, 10))
    assert sorted(stats.pass_hat_k) == list(range(1, 11))
    assert sorted(stats.pass_at_k) == list(range(1, 11))
    assert stats.pass_hat_k[3] == pytest.approx(0.7)
    assert stats.pass_at_k[1] == pytest.approx(0.9)


def test_case_stats_latency_percentiles_are_harrell_davis() -> None:
    latencies = list(np.random.default_rng(3).lognormal(7.5, 0.4, 10))
    stats = case_stats(outcomes(10, 10), latencies, [100, 200, 300] * 3 + [400])
    for field, q in (("latency_p50_ms", 0.5), ("latency_p95_ms", 0.95)):
        expected = float(scipy.stats.quantile(np.array(latencies), q, method="harrell-davis"))
        assert getattr(stats, field) == pytest.approx(expected, rel=1e-12)
    # Not the linear sample quantile: that would be a different estimator.
    assert stats.latency_p95_ms != pytest.approx(float(np.quantile(latencies, 0.95)), rel=1e-6)
    assert stats.tokens_mean == pytest.approx(220.0)


def test_case_stats_with_one_or_no_graded_attempt() -> None:
    single = case_stats([False], [1234.0], [50])
    assert single.pass_rate == 0.0
    assert not single.flaky
    assert single.latency_p95_ms == single.latency_p50_ms == 1234.0
    assert single.pass_hat_k == {1: 0.0}
    nothing = case_stats([], infra_errors=2)
    assert nothing.pass_rate is None
    assert nothing.pass_hat_k == {}
    assert (nothing.wilson_low, nothing.wilson_high) == (0.0, 1.0)
    assert nothing.latency_p50_ms is None and nothing.tokens_mean is None
    assert percentile([], 0.5) is None


def test_case_stats_round_trips_through_json_with_documented_fields() -> None:
    stats = case_stats(outcomes(7, 10), [900.0] * 10, [10] * 10, infra_errors=1)
    assert CaseStats.model_validate_json(stats.model_dump_json()) == stats
    properties = CaseStats.model_json_schema()["properties"]
    assert all(spec.get("description") for spec in properties.values())


def wilson_like(rate: float, n: int) -> tuple[float, float]:
    """Wilson 95% interval with a non-integer success count, from statsmodels."""
    from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

    low, high = proportion_confint(rate * n, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def test_suite_stats_reproduces_the_clustered_standard_error_of_the_twelve_case_example() -> None:
    suite = suite_stats([case_stats(outcomes(c, 10)) for c in BASELINE_PASSES])
    assert suite.pass_rate == pytest.approx(0.9)
    assert suite.standard_error == pytest.approx(0.0389, abs=5e-5)
    rates = np.array(BASELINE_PASSES) / 10
    half_width = scipy.stats.t.ppf(0.975, 11) * rates.std(ddof=1) / math.sqrt(12)
    # The hull with Wilson over 12 scenarios (docs/statistics.md §2.4): Wilson is the wider here.
    wilson_low, wilson_high = wilson_like(0.9, 12)
    assert wilson_low < 0.9 - half_width
    assert suite.ci_low == pytest.approx(wilson_low)
    assert suite.ci_high == pytest.approx(max(wilson_high, min(1.0, 0.9 + half_width)))
    # Flaky: the six scenarios at 9, 9, 8, 7, 6 and 9 out of 10.
    assert (suite.scenarios, suite.attempts, suite.flaky_scenarios) == (12, 120, 6)


def test_suite_standard_error_equals_statsmodels_cluster_robust_ols() -> None:
    import statsmodels.api as sm  # type: ignore[import-untyped]

    passes = [3, 10, 7, 9, 0, 10, 5]
    y = np.concatenate([outcomes(c, 10) for c in passes]).astype(float)
    groups = np.repeat(np.arange(len(passes)), 10)
    ols = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    suite = suite_stats([case_stats(outcomes(c, 10)) for c in passes])
    assert suite.standard_error == pytest.approx(float(ols.bse[0]), rel=1e-9)


def test_suite_stats_weights_scenarios_equally_and_skips_unscored_ones() -> None:
    cases = [
        case_stats(outcomes(1, 1)),
        case_stats(outcomes(0, 9), infra_errors=1),
        case_stats([], infra_errors=4),
    ]
    suite = suite_stats(cases)
    assert suite.pass_rate == pytest.approx(0.5)  # not 1/10 pooled over attempts
    assert (suite.scenarios, suite.unscored_scenarios, suite.infra_errors) == (2, 1, 5)
    assert suite.infra_error_rate == pytest.approx(5 / 15)


def test_suite_stats_of_a_single_scenario_has_only_the_wilson_interval() -> None:
    one = suite_stats([case_stats(outcomes(4, 5))])
    assert one.pass_rate == pytest.approx(0.8)
    assert one.standard_error is None
    # No clustered SE from one scenario: the interval is Wilson's, n = 1 (docs/statistics.md §2.4).
    assert (one.ci_low, one.ci_high) == pytest.approx(wilson_like(0.8, 1))
    empty = suite_stats([])
    assert empty.ci_low is None and empty.ci_high is None
    assert empty.pass_rate is None and empty.infra_error_rate is None


def test_stats_module_imports_no_numeric_libraries() -> None:
    # Runs without repeats use this module too; they must not pay for numpy/scipy/statsmodels.
    code = (
        "import sys\n"
        "from pytest_nodeval.stats.run_stats import case_stats, suite_stats\n"
        "cases = [case_stats([True, False] * 5, [float(i) for i in range(10)], [7] * 10)] * 3\n"
        "suite_stats(cases)\n"
        "loaded = sorted(m for m in ('numpy', 'scipy', 'statsmodels') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
