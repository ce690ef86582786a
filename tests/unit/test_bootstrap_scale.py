"""Issue 29.6: the pooled-quantile bootstrap's tail counting, the exact early stop below 1,
one draw of the resamples for every gate that resamples the same attempts, and the attempts
drawn four (or two) per random code.

docs/statistics.md §3.4, "The bootstraps at scale". Each fast path is checked against a direct
computation: sorting each resample and taking its Harrell-Davis quantile, counting every
value (the tail's start at 0), and each bound computed alone, which must give the same bits.
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
    resample = significance._resample_run

    def counted(rng: Any, draws: Any, *rest: Any) -> Any:
        rows.append(len(draws))  # one call per run and batch
        return resample(rng, draws, *rest)

    monkeypatch.setattr(significance, "_resample_run", counted)
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


def spend_and_latency_runs(scenarios: int, growth: float, seed: int) -> list[Any]:
    """Latencies, tokens and costs of one baseline and one current run of 10 attempts a case;
    a last request whose cases have 3 attempts, which cannot share their draws."""
    rng = np.random.default_rng(seed)
    scale = rng.lognormal(7, 0.5, scenarios)

    def run(factor: float, n: int = 10) -> tuple[list[Any], list[Any], list[Any]]:
        latencies = [rng.lognormal(np.log(s), 0.3, n) * factor for s in scale]
        tokens = [rng.poisson(2000 * factor, n).astype(float) for _ in scale]
        return latencies, tokens, [t * 1e-5 for t in tokens]

    (lat_b, tok_b, cost_b), (lat_c, tok_c, cost_c) = run(1.0), run(growth)
    (_, few_b, _), (_, few_c, _) = run(1.0, 3), run(growth, 3)
    bound = significance.RatioBound
    return [
        bound(lat_b, lat_c, 0.00125, 0.95),
        bound(tok_b, tok_c, 0.000625),
        bound(cost_b, cost_c, 0.000625),
        bound(few_b, few_c, 0.05),
    ]


def alone(request: Any) -> float:
    if request.quantile is None:
        return significance.mean_ratio_lower_bound(
            request.baseline, request.current, request.alpha, 4000, 7
        )
    return significance.pooled_quantile_ratio_lower_bound(
        request.baseline, request.current, request.quantile, request.alpha, 4000, 7
    )


@pytest.mark.parametrize("pilot", [200, 4000])
@pytest.mark.parametrize("growth", [1.02, 1.3])
def test_bounds_asked_together_are_each_bound_alone_to_the_last_bit(
    monkeypatch: pytest.MonkeyPatch, pilot: int, growth: float
) -> None:
    # x1.3: the pilot decides every bound; x1.02: they stop at different resamples (or not).
    monkeypatch.setattr(significance, "_PILOT_RESAMPLES", pilot)
    requests = spend_and_latency_runs(60, growth, seed=11)
    together = significance.ratio_lower_bounds(requests, 4000, 7)
    assert together == [alone(request) for request in requests]


def test_the_gates_with_the_same_attempts_share_one_draw_of_each_resample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(significance, "_PILOT_RESAMPLES", 4000)  # every bound draws all 4,000
    drawn: list[int] = []
    resample = significance._resample_run

    def counted(rng: Any, draws: Any, statistics: Any, *rest: Any) -> Any:
        drawn.append(len(draws) * len(statistics))  # resamples served per call
        return resample(rng, draws, statistics, *rest)

    monkeypatch.setattr(significance, "_resample_run", counted)
    requests = spend_and_latency_runs(60, 1.02, seed=11)
    significance.ratio_lower_bounds(requests, 4000, 7)
    # Two runs x 4,000 resamples for each request; one call per run and batch for the three
    # that have 10 attempts a case, another for the one with 3.
    assert sum(drawn) == 2 * 4000 * 4
    assert len(drawn) == 2 * (4000 // 200) * 2  # batches of 200 at 60 cases x 10


@pytest.mark.parametrize(("n", "per_code"), [(2, 4), (10, 4), (16, 4), (17, 2), (256, 2)])
def test_a_slot_code_holds_its_base_n_digits(n: int, per_code: int) -> None:
    codes = significance._slot_codes(n)
    assert codes is not None and len(codes) == n**per_code
    digits = codes.view(np.uint8).reshape(len(codes), per_code)
    # Code c's digits, most significant first: c = sum_i digit_i n^(k - 1 - i).
    weights = n ** np.arange(per_code - 1, -1, -1)
    assert np.array_equal(digits.astype(np.int64) @ weights, np.arange(len(codes)))


def test_one_attempt_or_more_than_256_draws_each_attempt_alone() -> None:
    assert significance._slot_codes(1) is None and significance._slot_codes(257) is None
    assert _FlatRun([[1.0, 2.0, 3.0]] * 4).codes is not None
    assert _FlatRun([[1.0, 2.0], [3.0]]).codes is None  # unequal attempts: drawn as before


def test_coded_slots_are_uniform_independent_and_continue_the_stream_row_by_row() -> None:
    run = _FlatRun([[float(v) for v in range(10)]] * 7)  # 70 slots a row: not a multiple of 4
    draws = np.zeros((3000, 7), dtype=np.intp)
    slots = run.slots(np.random.default_rng(4), draws)
    assert slots.shape == (3000, 7, 10) and slots.max() == 9
    rng = np.random.default_rng(4)  # the same rows drawn in chunks continue the same stream
    chunked = np.concatenate([run.slots(rng, draws[i : i + 7]) for i in range(0, 3000, 7)])
    assert np.array_equal(chunked, slots)
    # Each slot uniform on 0..9, and pairs of neighbours (within a code and across two codes)
    # uniform on the 100 pairs: chi-square against its 0.999 quantile.
    from scipy.stats import chi2

    flat = slots.reshape(-1).astype(np.int64)
    for counts, cells in (
        (np.bincount(flat, minlength=10), 10),
        (np.bincount(flat[:-1] * 10 + flat[1:], minlength=100), 100),
        (np.bincount(flat[3::4][:-1] * 10 + flat[4::4], minlength=100), 100),
    ):
        expected = counts.sum() / cells
        assert ((counts - expected) ** 2 / expected).sum() < chi2.ppf(0.999, cells - 1)
