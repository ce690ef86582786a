"""Issue 29.6: the pooled-quantile bootstrap's tail counting and the exact early stop below 1.

docs/statistics.md §3.4, "The bootstraps at scale". Each fast path is checked against a direct
computation: sorting each resample and taking its Harrell-Davis quantile, and counting every
value (the tail's start at 0), which must give the same bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_nodeval.stats import significance
from pytest_nodeval.stats.significance import _FlatRun


def staggered_run(sizes: list[int]) -> _FlatRun:
    """Scenario j's latencies lie in [j, j + 1] ms: the first scenarios sort wholly below the
    tail, as most of a real suite's cases sort below its pooled p95."""
    rng = np.random.default_rng(5)
    return _FlatRun([rng.uniform(j, j + 1, n).tolist() for j, n in enumerate(sizes)])


def sorted_hd(run: _FlatRun, picks: Any, q: float) -> list[float]:
    from scipy.stats import quantile  # type: ignore[import-untyped]

    values = np.append(run.values, np.nan)  # the sentinel pads unequal scenarios
    return [
        float(quantile(values[row][row < run.sentinel], q, method="harrell-davis")) for row in picks
    ]


@pytest.mark.parametrize("sizes", [[10] * 120, [3, 7, 5, 10, 4, 9] * 20])
def test_tail_counting_skips_the_fast_scenarios_and_equals_sorting_each_resample(
    sizes: list[int],
) -> None:
    run = staggered_run(sizes)
    start = run.tail_start(0.95)
    assert start > 0  # the tail is counted from inside the sample
    draws = np.random.default_rng(1).integers(0, len(sizes), size=(7, len(sizes)))
    got = run.resampled_pooled_quantiles(np.random.default_rng(8), draws, 0.95)
    assert run.below_only[start][draws].any()  # some drawn scenarios were only counted
    picks = run.picks(np.random.default_rng(8), draws)
    assert got == pytest.approx(sorted_hd(run, picks, 0.95), rel=1e-12)
    # Counting every value one by one gives the same bits.
    everything = _FlatRun(
        [run.values[o : o + n].tolist() for o, n in zip(run.offsets, sizes, strict=True)]
    )
    everything.tail_starts[0.95] = 0
    assert np.array_equal(
        everything.resampled_pooled_quantiles(np.random.default_rng(8), draws, 0.95), got
    )


def test_a_tail_that_starts_inside_the_window_falls_back_to_counting_every_value() -> None:
    run = staggered_run([10] * 120)
    low, high, _ = significance._beta_cdf_window(0.95, run.sentinel)
    run.tail_starts[0.95] = high  # past the Beta's window: the picks below it need weights
    draws = np.random.default_rng(2).integers(0, 120, size=(5, 120))
    got = run.resampled_pooled_quantiles(np.random.default_rng(3), draws, 0.95)
    picks = run.picks(np.random.default_rng(3), draws)
    assert got == pytest.approx(sorted_hd(run, picks, 0.95), rel=1e-12)


def test_a_bound_that_cannot_end_above_1_stops_before_all_resamples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows: list[int] = []
    resample = significance._FlatRun.resampled_pooled_quantiles

    def counted(self: Any, rng: Any, draws: Any, q: float) -> Any:
        rows.append(len(draws))
        return resample(self, rng, draws, q)

    monkeypatch.setattr(significance._FlatRun, "resampled_pooled_quantiles", counted)
    rng = np.random.default_rng(3)
    base = [rng.lognormal(7, 0.3, 10).tolist() for _ in range(400)]
    # x1.04: a bound just below 1 (x0.992 from all 4,000), beyond what the pilot decides.
    slower = [(1.04 * rng.lognormal(7, 0.3, 10)).tolist() for _ in range(400)]
    bound = significance.pooled_quantile_ratio_lower_bound(base, slower, 0.95, 0.00125, 4000, 0)
    drawn = sum(rows) // 2
    assert 200 < drawn < 4000 and bound <= 1.0
    monkeypatch.setattr(significance, "_PILOT_RESAMPLES", 4000)  # all of them, no looks
    rows.clear()
    full = significance.pooled_quantile_ratio_lower_bound(base, slower, 0.95, 0.00125, 4000, 0)
    assert sum(rows) == 2 * 4000 and full <= 1.0 and full != bound


@pytest.mark.parametrize(("alpha", "needed"), [(0.00125, 6), (0.000625, 4), (0.05, 201)])
def test_the_count_that_puts_the_quantile_of_all_resamples_at_or_below_1(
    alpha: float, needed: int
) -> None:
    # numpy's linear quantile of 4,000 sits between order statistics floor(h) and floor(h) + 1
    # (0-based), h = alpha * 3999: once floor(h) + 2 ratios are at or below 1, so is it.
    assert not significance._below_for_sure(needed - 1, alpha, 4000)
    assert significance._below_for_sure(needed, alpha, 4000)
    worst = np.concatenate([np.full(needed, 1.0), np.full(4000 - needed, 9.0)])
    assert np.quantile(worst, alpha) <= 1.0
    barely = np.concatenate([np.full(needed - 1, 1.0), np.full(4001 - needed, 9.0)])
    assert np.quantile(barely, alpha) > 1.0
