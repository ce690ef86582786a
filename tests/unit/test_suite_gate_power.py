"""The suite gate's (G1) test: exact, with power from the weights and from the attempts.

Issue 14: a uniform -8 pp drop at 50 x 10 on the mixed truth must FAIL in >= 90% of runs
while unchanged runs stay within the budget (docs/statistics.md §3.2, §4). The test weights each
case's difference by the inverse of its standard deviation under no change; the practical
threshold stays on the equal-weighted mean. Issue 29: the sum is referred to its distribution
when each case's attempts trade runs (the stratified permutation), not to its sign flips
across cases, whose floor 2^-S kept suites of 7 or fewer cases from ever failing. The
weighted sign flip stays as the calibration's "before" and is tested here too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
import scipy.stats  # type: ignore[import-untyped]

from pytest_nodeval.gate import CaseSample, GateName, GatePolicy, Verdict, compare
from pytest_nodeval.stats import significance
from pytest_nodeval.stats.significance import (
    stratified_permutation_p_value,
    weighted_sign_flip_p_value,
)

BOTH_TESTS = pytest.mark.parametrize(
    "p_value_of", [weighted_sign_flip_p_value, stratified_permutation_p_value]
)

POLICY = GatePolicy()
LEVEL = POLICY.level(GateName.SUITE_PASS_RATE)  # 0.005


def sample(case_id: str, passed: int, attempts: int = 10) -> CaseSample:
    return CaseSample(case_id, (True,) * passed + (False,) * (attempts - passed))


def runs(
    groups: list[tuple[int, int, int]], attempts: int = 10
) -> tuple[list[CaseSample], list[CaseSample]]:
    """(cases, baseline passes, current passes) groups of cases with `attempts` each."""
    baseline: list[CaseSample] = []
    current: list[CaseSample] = []
    for count, passed_b, passed_c in groups:
        for _ in range(count):
            case_id = f"s{len(baseline):03d}"
            baseline.append(sample(case_id, passed_b, attempts))
            current.append(sample(case_id, passed_c, attempts))
    return baseline, current


# 50 cases, mixed (docs/statistics.md §4.3): 20 solid unchanged, 10 solid 10/10 -> 8/10, and
# 20 coin-flip cases whose noise goes both ways (10 x 5 -> 2, 10 x 5 -> 7): a 6 pp drop.
SOLID_DROP = [(20, 10, 10), (10, 10, 8), (10, 5, 2), (10, 5, 7)]


def studentized(passed_b: int, passed_c: int, attempts: int = 10) -> float:
    pooled = (passed_b + passed_c) / (2 * attempts)
    return (passed_c - passed_b) / attempts / math.sqrt(pooled * (1 - pooled) * 2 / attempts)


def reference_p(tables: list[tuple[int, int, int, int]], draws: int = 400_000) -> float:
    """The permutation p by brute simulation, from the definition: each case's attempts dealt
    to the runs at random (numpy's hypergeometric draws), T = sum of d_j / sd_j recomputed."""
    rng = np.random.default_rng(2029)
    observed, simulated = 0.0, np.zeros(draws)
    for passed_b, attempts_b, passed_c, attempts_c in tables:
        passes, attempts = passed_b + passed_c, attempts_b + attempts_c
        if passes in (0, attempts):
            continue
        pooled = passes / attempts
        sd = math.sqrt(pooled * (1 - pooled) * (1 / attempts_b + 1 / attempts_c))
        observed += (passed_c / attempts_c - passed_b / attempts_b) / sd
        current = rng.hypergeometric(passes, attempts - passes, attempts_c, draws)
        simulated += (current / attempts_c - (passes - current) / attempts_b) / sd
    return float(np.mean(simulated <= observed + 1e-9))


def close_to_reference(p_value: float, reference: float, draws: int = 400_000) -> bool:
    return abs(p_value - reference) <= 5 * math.sqrt(max(reference, 1e-5) / draws)


def test_a_solid_drop_among_flaky_noise_fails_where_the_t_test_did_not() -> None:
    baseline, current = runs(SOLID_DROP)
    diff = compare(baseline, current, POLICY)
    differences = [(c.passed - b.passed) / 10 for b, c in zip(baseline, current, strict=True)]
    # Before: the one-sample t test (above 30 cases) gave p = 0.0099 > 0.005, INCONCLUSIVE.
    t_p = scipy.stats.ttest_1samp(differences, 0.0, alternative="less").pvalue
    assert t_p == pytest.approx(0.0099, abs=5e-5)
    # The weighted sign flip: k negatives out of each group of 10 equal magnitudes.
    magnitudes = [abs(studentized(10, 8)), abs(studentized(5, 2)), abs(studentized(5, 7))]
    observed = -10 * magnitudes[0] - 10 * magnitudes[1] + 10 * magnitudes[2]
    flips = sum(
        math.prod(math.comb(10, k) for k in ks) / 2.0**30
        for ks in itertools.product(range(11), repeat=3)
        if sum(m * (10 - 2 * k) for m, k in zip(magnitudes, ks, strict=True)) <= observed + 1e-9
    )
    tables = [(b.passed, 10, c.passed, 10) for b, c in zip(baseline, current, strict=True)]
    assert weighted_sign_flip_p_value(tables) == pytest.approx(flips, rel=1e-9)
    assert flips == pytest.approx(0.00239, abs=5e-6)
    # The gate's stratified permutation: ten times stronger evidence from the same runs.
    assert diff.suite.p_value_method == "stratified-permutation"
    assert diff.suite.p_value == pytest.approx(0.000193, abs=5e-7)
    assert close_to_reference(diff.suite.p_value, reference_p(tables))
    assert diff.suite.delta == pytest.approx(-0.06)
    suite_gate = next(g for g in diff.gates if g.name is GateName.SUITE_PASS_RATE)
    assert suite_gate.verdict is Verdict.FAIL
    assert GateName.SUITE_PASS_RATE in diff.breached


def test_five_cases_at_forty_repeats_can_fail_the_suite_gate() -> None:
    """Issue 29.1: 5 cases, 38/40 -> 30/40 each. The sign flip's floor is 2^-5 = 0.031."""
    baseline, current = runs([(5, 38, 30)], attempts=40)
    diff = compare(baseline, current, POLICY)
    tables = [(38, 40, 30, 40)] * 5
    assert weighted_sign_flip_p_value(tables) == pytest.approx(1 / 32)
    assert diff.suite.p_value is not None and diff.suite.p_value < 1e-6
    suite_gate = next(g for g in diff.gates if g.name is GateName.SUITE_PASS_RATE)
    assert suite_gate.verdict is Verdict.FAIL
    # One attempt fewer in each case (38 -> 37) is noise the test sees as noise.
    baseline, current = runs([(5, 38, 37)], attempts=40)
    assert compare(baseline, current, POLICY).suite.p_value > 0.05


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
def test_no_movement_is_no_evidence(passes: int) -> None:
    tables = [(passes, 10, passes, 10)] * 40
    assert weighted_sign_flip_p_value(tables) == 1.0
    baseline, current = runs([(40, passes, passes)])
    diff = compare(baseline, current, POLICY)
    # Cases that passed or failed every attempt can be dealt no other way: p = 1. Cases
    # at 4/10 twice sit in the middle of their permutations: p a little over 1/2.
    assert diff.suite.p_value == 1.0 if passes in (0, 10) else 0.5 < diff.suite.p_value < 0.6
    assert next(g for g in diff.gates if g.name is GateName.SUITE_PASS_RATE).verdict is Verdict.OK


def binomial(k: int, n: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


@cache
def null_p_value(
    p_value_of: Callable[..., float], cells: tuple[tuple[int, int], ...], repeats: int
) -> float:
    return p_value_of([(b, repeats, c, repeats) for b, c in cells])


@BOTH_TESTS
@pytest.mark.parametrize("rates", [(0.5, 0.5, 0.5), (0.3, 0.6, 0.95), (0.9, 0.8, 0.2)])
@pytest.mark.parametrize("repeats", [2, 3])
def test_the_test_is_exact_under_no_change(
    p_value_of: Callable[..., float], rates: tuple[float, ...], repeats: int
) -> None:
    """Every outcome of a 3-case suite enumerated: P(p <= a) <= a at every level a."""
    outcomes = list(itertools.product(range(repeats + 1), repeat=2))  # (passed_b, passed_c)
    tail: dict[float, float] = {}
    for cells in itertools.product(outcomes, repeat=len(rates)):
        probability = math.prod(
            binomial(b, repeats, p) * binomial(c, repeats, p)
            for (b, c), p in zip(cells, rates, strict=True)
        )
        p_value = null_p_value(p_value_of, cells, repeats)
        tail[p_value] = tail.get(p_value, 0.0) + probability
    levels = sorted(tail)
    if p_value_of is weighted_sign_flip_p_value:
        assert levels[0] == pytest.approx(1 / 8)  # three moved cases, all down
    else:  # every attempt passed before and failed after: (1 / C(2R, R))^3
        assert levels[0] == pytest.approx(math.comb(2 * repeats, repeats) ** -3)
    cumulative = np.cumsum([tail[level] for level in levels])
    for level, rejected in zip(levels, cumulative, strict=True):
        assert rejected <= level + 1e-12


@BOTH_TESTS
def test_the_same_data_in_any_order_gives_the_same_monte_carlo_p(
    p_value_of: Callable[..., float],
) -> None:
    rng = np.random.default_rng(5)
    rates = rng.uniform(0.3, 0.95, 200)
    tables = [
        (int(b), 20, int(c), 20)
        for b, c in zip(
            rng.binomial(20, rates), rng.binomial(20, np.clip(rates - 0.02, 0, 1)), strict=True
        )
    ]
    p_value = p_value_of(tables, seed=0)
    assert 0.0 < p_value < 1.0
    assert p_value_of(tables, seed=0) == p_value
    assert p_value_of(tables[::-1], seed=0) == p_value
    shuffled = [tables[i] for i in rng.permutation(len(tables))]
    assert p_value_of(shuffled, seed=0) == p_value
    # Another seed is another Monte Carlo draw of the same tail (19,999 draws).
    other = p_value_of(tables, seed=1)
    assert other != p_value
    assert other == pytest.approx(p_value, abs=5 * math.sqrt(p_value * (1 - p_value) / 19_999))


@BOTH_TESTS
def test_the_monte_carlo_estimates_the_exact_tail(
    monkeypatch: pytest.MonkeyPatch, p_value_of: Callable[..., float]
) -> None:
    tables = [(b, 10, c, 10) for count, b, c in [(10, 10, 8), (10, 5, 3), (10, 5, 6)]]
    tables = [t for t in tables for _ in range(4)]
    exact = p_value_of(tables)
    monkeypatch.setattr(significance, "_MAX_EXACT_WEIGHTED_SUMS", 0)
    estimate = p_value_of(tables, seed=3)
    assert estimate != exact
    assert estimate == pytest.approx(exact, abs=5 * math.sqrt(exact / 19_999))
    assert p_value_of(tables, seed=3) == estimate


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


@pytest.mark.parametrize(
    "table", [(10, 10, 5, 10), (8, 10, 3, 10), (3, 5, 1, 5), (9, 10, 14, 20), (2, 7, 0, 3)]
)
def test_one_case_is_fishers_exact_test(table: tuple[int, int, int, int]) -> None:
    passed_b, attempts_b, passed_c, attempts_c = table
    fisher = scipy.stats.fisher_exact(
        [[passed_c, attempts_c - passed_c], [passed_b, attempts_b - passed_b]], alternative="less"
    )
    assert stratified_permutation_p_value([table]) == pytest.approx(fisher.pvalue, rel=1e-12)


def test_the_exact_tail_enumerates_every_dealing() -> None:
    """Three cases with unequal repeats, every dealing of their attempts weighed by scipy."""
    tables = [(3, 4, 1, 5), (5, 6, 4, 6), (2, 3, 2, 4)]
    supports = []
    for passed_b, attempts_b, passed_c, attempts_c in tables:
        passes = passed_b + passed_c
        law = scipy.stats.hypergeom(attempts_b + attempts_c, passes, attempts_c)
        pooled = passes / (attempts_b + attempts_c)
        sd = math.sqrt(pooled * (1 - pooled) * (1 / attempts_b + 1 / attempts_c))
        supports.append(
            [
                ((x / attempts_c - (passes - x) / attempts_b) / sd, law.pmf(x))
                for x in range(attempts_c + 1)
            ]
        )
    observed = sum(
        (c / ac - b / ab)
        / math.sqrt(((b + c) / (ab + ac)) * (1 - (b + c) / (ab + ac)) * (1 / ab + 1 / ac))
        for b, ab, c, ac in tables
    )
    expected = sum(
        math.prod(weight for _, weight in dealing)
        for dealing in itertools.product(*supports)
        if sum(value for value, _ in dealing) <= observed + 1e-9
    )
    assert stratified_permutation_p_value(tables) == pytest.approx(expected, rel=1e-9)


@BOTH_TESTS
def test_bad_tables_are_refused(p_value_of: Callable[..., float]) -> None:
    with pytest.raises(ValueError, match="at least one attempt"):
        p_value_of([(0, 0, 1, 1)])
    with pytest.raises(ValueError, match="passes must lie"):
        p_value_of([(11, 10, 1, 10)])
