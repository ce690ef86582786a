"""The pure-Python special functions agree with scipy, which they stand in for."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special  # type: ignore[import-untyped]
import scipy.stats  # type: ignore[import-untyped]

from pytest_nodeval.stats.special import harrell_davis_quantile, regularized_beta, t_cdf, t_ppf


@pytest.mark.parametrize("a", [0.05, 0.5, 1.0, 2.5, 30.0, 950.0])
@pytest.mark.parametrize("b", [0.05, 0.5, 1.0, 7.0, 50.0])
@pytest.mark.parametrize("x", [0.0, 1e-6, 0.1, 0.5, 0.93, 0.999, 1.0])
def test_regularized_beta_matches_scipy(a: float, b: float, x: float) -> None:
    assert regularized_beta(a, b, x) == pytest.approx(scipy.special.betainc(a, b, x), abs=1e-12)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 11, 29, 49, 200, 10_000])
def test_t_distribution_matches_scipy(df: int) -> None:
    for p in (0.005, 0.025, 0.05, 0.5, 0.9, 0.95, 0.975, 0.9999):
        assert t_ppf(p, df) == pytest.approx(scipy.stats.t.ppf(p, df), rel=1e-9, abs=1e-12)
    for t in (-40.0, -2.5, -0.3, 0.0, 0.7, 1.96, 8.0):
        assert t_cdf(t, df) == pytest.approx(scipy.stats.t.cdf(t, df), abs=1e-10)


def test_t_ppf_rejects_probabilities_outside_the_open_interval() -> None:
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_ppf(1.0, 5)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 57, 400])
@pytest.mark.parametrize("q", [0.05, 0.5, 0.95, 0.99])
def test_harrell_davis_matches_scipy_quantile(n: int, q: float) -> None:
    values = np.random.default_rng(n).lognormal(7.0, 0.8, n)
    expected = float(scipy.stats.quantile(values, q, method="harrell-davis"))
    assert harrell_davis_quantile(list(values), q) == pytest.approx(expected, rel=1e-12)


def test_harrell_davis_handles_ties_and_rejects_empty_input() -> None:
    assert harrell_davis_quantile([3.0, 3.0, 3.0], 0.95) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="at least one value"):
        harrell_davis_quantile([], 0.5)
