"""The gate's tests and intervals agree with statsmodels and scipy (docs/statistics.md §9)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats  # type: ignore[import-untyped]
from statsmodels.stats.multitest import multipletests  # type: ignore[import-untyped]
from statsmodels.stats.proportion import confint_proportions_2indep  # type: ignore[import-untyped]

from pytest_nodeval.stats.significance import (
    benjamini_hochberg,
    boschloo_regression_p,
    mann_whitney_slower_p_values,
    mean_ratio_lower_bound,
    newcombe_interval,
)


def test_newcombe_matches_statsmodels_including_boundaries() -> None:
    for n_c, n_b in ((1, 1), (3, 5), (10, 10), (20, 7)):
        for c_c, c_b in itertools.product(range(n_c + 1), range(n_b + 1)):
            expected = confint_proportions_2indep(c_c, n_c, c_b, n_b, method="newcomb")
            assert newcombe_interval(c_c, n_c, c_b, n_b) == pytest.approx(expected, abs=1e-12)


def test_newcombe_reproduces_the_worked_example() -> None:
    assert newcombe_interval(6, 10, 9, 10) == pytest.approx((-0.599, 0.082), abs=5e-4)
    assert newcombe_interval(11, 20, 18, 20) == pytest.approx((-0.570, -0.072), abs=5e-4)


def test_boschloo_one_sided_p_reproduces_the_worked_example() -> None:
    assert boschloo_regression_p(9, 10, 6, 10) == pytest.approx(0.0755, abs=5e-5)
    assert boschloo_regression_p(18, 20, 11, 20) == pytest.approx(0.0084, abs=5e-5)
    assert boschloo_regression_p(10, 10, 7, 10) == pytest.approx(0.0579, abs=5e-5)


def test_boschloo_is_one_when_the_candidate_did_not_drop() -> None:
    assert boschloo_regression_p(6, 10, 9, 10) == 1.0
    assert boschloo_regression_p(5, 10, 10, 20) == 1.0


def test_benjamini_hochberg_matches_statsmodels_fdr_bh() -> None:
    rng = np.random.default_rng(5)
    for m in (1, 2, 7, 50):
        p_values = list(rng.uniform(0, 0.3, m) ** 2)
        expected = multipletests(p_values, alpha=0.10, method="fdr_bh")[1]
        assert benjamini_hochberg(p_values) == pytest.approx(list(expected), abs=1e-15)


def test_boschloo_then_benjamini_hochberg_reproduce_the_twelve_case_example() -> None:
    baseline = [10, 10, 10, 9, 9, 8, 10, 7, 10, 6, 9, 10]
    current = [10, 10, 9, 9, 6, 8, 10, 5, 10, 4, 9, 7]
    raw = [boschloo_regression_p(b, 10, c, 10) for b, c in zip(baseline, current, strict=True)]
    expected = [1, 1, 0.9886, 1, 0.4531, 1, 1, 0.7552, 1, 0.7552, 1, 0.4531]
    assert benjamini_hochberg(raw) == pytest.approx(expected, abs=5e-5)


def test_mean_ratio_lower_bound_is_seeded_and_tracks_the_effect() -> None:
    rng = np.random.default_rng(22)
    scale = np.exp(rng.uniform(np.log(2e3), np.log(4e4), 30))
    base = [list(s * rng.lognormal(0, 0.3, 10)) for s in scale]
    grown = [list(np.array(b) * 1.3) for b in base]
    assert mean_ratio_lower_bound(base, grown, 0.05, 500, 1) == mean_ratio_lower_bound(
        base, grown, 0.05, 500, 1
    )
    # The exact 1.3x scale-up is certain; identical runs cannot look significantly bigger.
    assert 1.2 < mean_ratio_lower_bound(base, grown, 0.05, 500, 1) <= 1.3 + 1e-9
    assert mean_ratio_lower_bound(base, base, 0.05, 500, 1) < 1.0


def test_batched_mann_whitney_equals_one_scipy_call_per_case() -> None:
    rng = np.random.default_rng(8)
    samples: list[tuple[list[float], list[float]]] = []
    for size_b, size_c in [(3, 3), (5, 9), (10, 10), (10, 10), (20, 12)] * 3:
        baseline, current = rng.lognormal(7, 0.4, size_b), rng.lognormal(7.2, 0.4, size_c)
        if len(samples) % 3 == 0:  # ties switch scipy's "auto" to the asymptotic method
            baseline, current = np.round(baseline, -2), np.round(current, -2)
        samples.append((list(baseline), list(current)))
    expected = [
        scipy.stats.mannwhitneyu(current, baseline, alternative="greater").pvalue
        for baseline, current in samples
    ]
    assert mann_whitney_slower_p_values(samples) == pytest.approx(expected, abs=1e-15)
