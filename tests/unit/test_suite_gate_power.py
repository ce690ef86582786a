"""The suite gate's (G1) weighted sign-flip test: more power than the t test, still exact.

Issue 14: a uniform -8 pp drop at 50 x 10 on the mixed truth must FAIL in >= 90% of runs
while unchanged runs stay within the budget (docs/statistics.md §3.2, §4). The test weights each
case's difference by the inverse of its standard deviation under no change and refers the
sum to its sign flips; the practical threshold stays on the equal-weighted mean.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
import scipy.stats  # type: ignore[import-untyped]

from pytest_nodeval.gate import CaseSample, GateName, GatePolicy, Verdict, compare
from pytest_nodeval.stats import significance
from pytest_nodeval.stats.significance import weighted_sign_flip_p_value

POLICY = GatePolicy()
LEVEL = POLICY.level(GateName.SUITE_PASS_RATE)  # 0.005


def sample(case_id: str, passed: int, attempts: int = 10) -> CaseSample:
    return CaseSample(case_id, (True,) * passed + (False,) * (attempts - passed))


def runs(groups: list[tuple[int, int, int]]) -> tuple[list[CaseSample], list[CaseSample]]:
    """(cases, baseline passes, current passes) groups of 10-attempt cases."""
    baseline: list[CaseSample] = []
    current: list[CaseSample] = []
    for count, passed_b, passed_c in groups:
        for _ in range(count):
            case_id = f"s{len(baseline):03d}"
            baseline.append(sample(case_id, passed_b))
            current.append(sample(case_id, passed_c))
    return baseline, current


# 50 cases, mixed (docs/statistics.md §4.3): 20 solid unchanged, 10 solid 10/10 -> 8/10, and
# 20 coin-flip cases whose noise goes both ways (10 x 5 -> 2, 10 x 5 -> 7): a 6 pp drop.
SOLID_DROP = [(20, 10, 10), (10, 10, 8), (10, 5, 2), (10, 5, 7)]


def studentized(passed_b: int, passed_c: int, attempts: int = 10) -> float:
    pooled = (passed_b + passed_c) / (2 * attempts)
    return (passed_c - passed_b) / attempts / math.sqrt(pooled * (1 - pooled) * 2 / attempts)


def test_a_solid_drop_among_flaky_noise_fails_where_the_t_test_did_not() -> None:
    baseline, current = runs(SOLID_DROP)
    diff = compare(baseline, current, POLICY)
    differences = [(c.passed - b.passed) / 10 for b, c in zip(baseline, current, strict=True)]
    # Before: the one-sample t test (above 30 cases) gave p = 0.0099 > 0.005, INCONCLUSIVE.
    t_p = scipy.stats.ttest_1samp(differences, 0.0, alternative="less").pvalue
    assert t_p == pytest.approx(0.0099, abs=5e-5)
    # Independent evaluation: k negatives out of each group of 10 equal magnitudes.
    magnitudes = [abs(studentized(10, 8)), abs(studentized(5, 2)), abs(studentized(5, 7))]
    observed = -10 * magnitudes[0] - 10 * magnitudes[1] + 10 * magnitudes[2]
    expected = sum(
        math.prod(math.comb(10, k) for k in ks) / 2.0**30
        for ks in itertools.product(range(11), repeat=3)
        if sum(m * (10 - 2 * k) for m, k in zip(magnitudes, ks, strict=True)) <= observed + 1e-9
    )
    assert diff.suite.p_value_method == "weighted-sign-flip"
    assert diff.suite.p_value == pytest.approx(expected, rel=1e-9)
    assert diff.suite.p_value == pytest.approx(0.00239, abs=5e-6)
    assert diff.suite.delta == pytest.approx(-0.06)
    suite_gate = next(g for g in diff.gates if g.name is GateName.SUITE_PASS_RATE)
    assert suite_gate.verdict is Verdict.FAIL
    assert GateName.SUITE_PASS_RATE in diff.breached


def test_the_practical_threshold_stays_on_the_equal_weighted_mean() -> None:
    # 20 of 50 solid cases lose one attempt in ten: p = 2**-20, but the suite fell 4 pp.
    baseline, current = runs([(20, 10, 9), (30, 10, 10)])
    diff = compare(baseline, current, POLICY)
    assert diff.suite.p_value == pytest.approx(2.0**-20)
    assert diff.suite.delta == pytest.approx(-0.04)
    suite_gate = next(g for g in diff.gates if g.name is GateName.SUITE_PASS_RATE)
    assert suite_gate.verdict is Verdict.OK
    assert "significant but under the 5 pp threshold" in suite_gate.reason


@pytest.mark.parametrize("passes", [10, 0, 4])
def test_no_movement_gives_p_one(passes: int) -> None:
    tables = [(passes, 10, passes, 10)] * 40
    assert weighted_sign_flip_p_value(tables) == 1.0
    baseline, current = runs([(40, passes, passes)])
    diff = compare(baseline, current, POLICY)
    assert diff.suite.p_value == 1.0
    assert next(g for g in diff.gates if g.name is GateName.SUITE_PASS_RATE).verdict is Verdict.OK


def binomial(k: int, n: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


@cache
def null_p_value(cells: tuple[tuple[int, int], ...], repeats: int) -> float:
    return weighted_sign_flip_p_value([(b, repeats, c, repeats) for b, c in cells])


@pytest.mark.parametrize("rates", [(0.5, 0.5, 0.5), (0.3, 0.6, 0.95), (0.9, 0.8, 0.2)])
@pytest.mark.parametrize("repeats", [2, 3])
def test_the_test_is_exact_under_no_change(rates: tuple[float, ...], repeats: int) -> None:
    """Every outcome of a 3-case suite enumerated: P(p <= a) <= a at every level a."""
    outcomes = list(itertools.product(range(repeats + 1), repeat=2))  # (passed_b, passed_c)
    tail: dict[float, float] = {}
    for cells in itertools.product(outcomes, repeat=len(rates)):
        probability = math.prod(
            binomial(b, repeats, p) * binomial(c, repeats, p)
            for (b, c), p in zip(cells, rates, strict=True)
        )
        p_value = null_p_value(cells, repeats)
        tail[p_value] = tail.get(p_value, 0.0) + probability
    levels = sorted(tail)
    assert levels[0] == pytest.approx(1 / 8)  # three moved cases, all down
    cumulative = np.cumsum([tail[level] for level in levels])
    for level, rejected in zip(levels, cumulative, strict=True):
        assert rejected <= level + 1e-12


def test_the_same_data_in_any_order_gives_the_same_monte_carlo_p() -> None:
    rng = np.random.default_rng(5)
    rates = rng.uniform(0.3, 0.95, 200)
    tables = [
        (int(b), 20, int(c), 20)
        for b, c in zip(
            rng.binomial(20, rates), rng.binomial(20, np.clip(rates - 0.02, 0, 1)), strict=True
        )
    ]
    p_value = weighted_sign_flip_p_value(tables, seed=0)
    assert 0.0 < p_value < 1.0
    assert weighted_sign_flip_p_value(tables, seed=0) == p_value
    assert weighted_sign_flip_p_value(tables[::-1], seed=0) == p_value
    shuffled = [tables[i] for i in rng.permutation(len(tables))]
    assert weighted_sign_flip_p_value(shuffled, seed=0) == p_value
    # Another seed is another Monte Carlo draw of the same tail (19,999 flips).
    other = weighted_sign_flip_p_value(tables, seed=1)
    assert other == pytest.approx(p_value, abs=5 * math.sqrt(p_value * (1 - p_value) / 19_999))


def test_the_monte_carlo_estimates_the_exact_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = [(b, 10, c, 10) for count, b, c in SOLID_DROP for _ in range(count)]
    exact = weighted_sign_flip_p_value(tables)
    monkeypatch.setattr(significance, "_MAX_EXACT_WEIGHTED_SUMS", 0)
    estimate = weighted_sign_flip_p_value(tables, seed=3)
    assert estimate != exact
    assert estimate == pytest.approx(exact, abs=5 * math.sqrt(exact / 19_999))
    assert weighted_sign_flip_p_value(tables, seed=3) == estimate


def test_unequal_repeats_use_each_sides_attempts() -> None:
    # 9/10 -> 14/20 (down 20 pp): null variance pooled (1 - pooled) (1/10 + 1/20), pooled
    # 23/30, so its magnitude is 1.22; 7/10 -> 9/10 (up 20 pp) has 1.12. Had the first used
    # 1/10 + 1/10, it would be 1.06 and the p would be 3/4, not 1/2.
    pooled = Fraction(23, 30)
    magnitude = 0.2 / math.sqrt(float(pooled * (1 - pooled) * Fraction(3, 20)))
    other = studentized(7, 9)
    assert magnitude == pytest.approx(1.2209, abs=5e-5)
    assert other == pytest.approx(1.1180, abs=5e-5)
    # Of the four sign patterns, -m + o and -m - o are at or below the observed -m + o.
    assert weighted_sign_flip_p_value([(9, 10, 14, 20), (7, 10, 9, 10)]) == 0.5


def test_bad_tables_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one attempt"):
        weighted_sign_flip_p_value([(0, 0, 1, 1)])
    with pytest.raises(ValueError, match="passes must lie"):
        weighted_sign_flip_p_value([(11, 10, 1, 10)])
