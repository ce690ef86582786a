"""Two-run tests and intervals behind the gates (docs/statistics.md §3; library twins: §9).

numpy and scipy are imported inside the functions that need them, so an unchanged rerun or
a deterministic single-attempt replay run never pays for them (scipy.stats takes ~1.5 s).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Protocol

from .run_stats import wilson_interval

if TYPE_CHECKING:  # annotations only; numpy is imported at run time where it is used
    import numpy as np
    from numpy.typing import NDArray

# The weighted suite test enumerates every sign pattern while the scenarios' distinct
# (|difference|, null variance) groups reach at most this many sums; above, it draws this
# many seeded random sign patterns: at the suite gate's default level 0.005 a FAIL then
# needs at most 99 flipped sums at or below the observed one, so the Monte Carlo error
# hardly moves the decision.
_MAX_EXACT_WEIGHTED_SUMS = 1 << 18
_WEIGHTED_FLIPS = 19_999
# Sign patterns drawn and summed per numpy batch (memory, not speed).
_FLIP_BATCH_VALUES = 1 << 20


@lru_cache(maxsize=4096)  # one call per case; at R repeats only (R + 1)^2 distinct tables
def newcombe_interval(
    passed_c: int, attempts_c: int, passed_b: int, attempts_b: int, conf: float = 0.95
) -> tuple[float, float]:
    """Newcombe hybrid score interval for p_c - p_b, built from the two Wilson intervals.

    Equals statsmodels ``confint_proportions_2indep(..., method="newcomb")`` without
    importing statsmodels (docs/statistics.md §3.3 and §9). Use it, not ``method="score"``,
    which fails on small tables.
    """
    low_c, high_c = wilson_interval(passed_c, attempts_c, conf)
    low_b, high_b = wilson_interval(passed_b, attempts_b, conf)
    rate_c, rate_b = passed_c / attempts_c, passed_b / attempts_b
    delta = rate_c - rate_b
    return (
        delta - math.hypot(rate_c - low_c, high_b - rate_b),
        delta + math.hypot(high_c - rate_c, rate_b - low_b),
    )


@lru_cache(maxsize=4096)
def boschloo_regression_p(passed_b: int, attempts_b: int, passed_c: int, attempts_c: int) -> float:
    """One-sided Boschloo exact p-value for H1: the baseline pass rate is higher.

    Exact unconditional, so its size never exceeds alpha, and uniformly more powerful than
    Fisher. Cached: at R repeats there are only (R+1)^2 tables and each costs 5-40 ms.
    """
    if passed_b * attempts_c <= passed_c * attempts_b:
        return 1.0  # the candidate did at least as well: no evidence of a drop, skip the cost
    from scipy.stats import boschloo_exact  # type: ignore[import-untyped]

    # Columns are the two samples, baseline first (docs/statistics.md §3.3 and §9).
    table = [[passed_b, passed_c], [attempts_b - passed_b, attempts_c - passed_c]]
    return min(1.0, float(boschloo_exact(table, alternative="greater").pvalue))


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH-adjusted p-values (step-up), in input order; reject where adjusted <= q."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running_min = 1.0
    for rank in range(m, 0, -1):
        index = order[rank - 1]
        running_min = min(running_min, p_values[index] * m / rank)
        adjusted[index] = running_min
    return adjusted


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in input order; reject where adjusted <= level.

    Controls the family-wise error at the level for any dependence between the tests:
    what a FAIL decision over many cases needs (docs/statistics.md §4.2), where BH's false
    discovery rate would let about q of unchanged runs FAIL when many cases are flaky.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running_max = 0.0
    for rank, index in enumerate(order):
        running_max = max(running_max, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running_max
    return adjusted


def collapse_repeats_needed(level: float) -> int:
    """Fewest repeats R per side at which even a full collapse, R/R -> 0/R, reaches ``level``.

    The one-sided Boschloo p of R/R against 0/R is exactly 0.25**R (the nuisance rate 1/2
    maximizes P(all pass) * P(all fail)), so this is the detection floor of the per-case
    test: with fewer repeats no drop of that case can FAIL.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return max(1, math.ceil(math.log(level) / math.log(0.25) - 1e-9))


def smallest_regression_p(attempts_b: int, attempts_c: int) -> float:
    """The smallest one-sided Boschloo p any table of these attempts can reach: that of every
    baseline attempt passing and every current one failing.

    Only that table is as extreme as itself, so its p is sup_pi pi^R_B (1 - pi)^R_C, reached at
    pi = R_B / (R_B + R_C): 0.25^R with R attempts a side (``collapse_repeats_needed``). Below it
    no result of the case can be significant (docs/statistics.md §4.1, §7.3).
    """
    if attempts_b < 1 or attempts_c < 1:
        raise ValueError("a case needs at least one attempt in each run")
    total = attempts_b + attempts_c
    return math.exp(
        attempts_b * math.log(attempts_b / total) + attempts_c * math.log(attempts_c / total)
    )


def _check_table(passed_b: int, attempts_b: int, passed_c: int, attempts_c: int) -> None:
    """A scenario's (passed, attempts) in both runs, as the suite tests take it."""
    if not (0 <= passed_b <= attempts_b and 0 <= passed_c <= attempts_c):
        raise ValueError(
            f"passes must lie in [0, attempts], got {passed_b}/{attempts_b}, "
            f"{passed_c}/{attempts_c}"
        )
    if attempts_b < 1 or attempts_c < 1:
        raise ValueError("every scenario needs at least one attempt in each run")


def weighted_sign_flip_p_value(tables: Sequence[tuple[int, int, int, int]], seed: int = 0) -> float:
    """One-sided p of the studentized (weighted) paired sign-flip test of a suite drop.

    ``tables`` holds (baseline passed, baseline attempts, current passed, current attempts)
    per scenario. Each difference d_j = p_Cj - p_Bj is divided by its standard deviation
    under no change, sqrt(pbar_j (1 - pbar_j) (1/R_Bj + 1/R_Cj)) with pbar_j the pooled pass
    rate of both runs, and the statistic sum_j d_j / sd_j is referred to the distribution
    of its sign flips. Swapping the run labels of a scenario flips d_j and leaves pbar_j
    alone, so the test is exact under exchangeable attempts (same repeats in both runs);
    weighting a solid case's 10/10 -> 8/10 above a coin-flip case's noise is where the
    power over the plain mean comes from. A scenario with d_j = 0 contributes nothing (with
    pbar_j in {0, 1}, d_j is always 0). Exact enumeration when the distinct groups allow it,
    else ``_WEIGHTED_FLIPS`` sign patterns drawn from ``seed``: the same data (in any order)
    always gives the same p. numpy is imported here, only for a comparison with a baseline.
    """
    groups: Counter[tuple[Fraction, Fraction]] = Counter()
    net: Counter[tuple[Fraction, Fraction]] = Counter()
    # At R repeats there are at most (R + 1)^2 distinct tables: the exact fractions are
    # computed once per table, not once per scenario (10,000 scenarios, issue 29.6).
    for (passed_b, attempts_b, passed_c, attempts_c), count in Counter(tables).items():
        _check_table(passed_b, attempts_b, passed_c, attempts_c)
        difference = Fraction(passed_c, attempts_c) - Fraction(passed_b, attempts_b)
        if difference == 0:
            continue
        pooled = Fraction(passed_b + passed_c, attempts_b + attempts_c)
        variance = pooled * (1 - pooled) * (Fraction(1, attempts_b) + Fraction(1, attempts_c))
        key = (abs(difference), variance)  # variance > 0: d != 0 needs a pass and a fail
        groups[key] += count
        net[key] += count if difference > 0 else -count
    if not groups:
        return 1.0  # nothing moved: no evidence of a drop
    keys = sorted(groups)  # a fixed order, whatever the scenarios' order
    magnitudes = [float(d) / math.sqrt(float(v)) for d, v in keys]
    sizes = [groups[key] for key in keys]
    observed = math.fsum(m * net[key] for m, key in zip(magnitudes, keys, strict=True))
    # Flipped sums equal to the observed one count as at or below it, whatever the rounding.
    tolerance = 1e-9 * math.fsum(m * n for m, n in zip(magnitudes, sizes, strict=True))
    if math.prod(n + 1 for n in sizes) <= _MAX_EXACT_WEIGHTED_SUMS:
        return _weighted_sign_flip_exact(magnitudes, sizes, observed + tolerance)
    return _weighted_sign_flip_monte_carlo(magnitudes, sizes, observed + tolerance, seed)


def _weighted_sign_flip_exact(
    magnitudes: Sequence[float], sizes: Sequence[int], threshold: float
) -> float:
    """P(sum of independent random signs times the magnitudes <= threshold), enumerated.

    A group of n equal magnitudes a sums to a (n - 2k) with k ~ Binomial(n, 1/2) negatives,
    so the states are the product of (n + 1) over the groups, not 2**scenarios.
    """
    import numpy as np

    sums, probabilities = np.zeros(1), np.ones(1)
    for magnitude, n in zip(magnitudes, sizes, strict=True):
        negatives = np.arange(n + 1)
        weights = np.array([math.comb(n, k) for k in range(n + 1)], dtype=float) / 2.0**n
        sums = (sums[:, None] + magnitude * (n - 2 * negatives)[None, :]).ravel()
        probabilities = (probabilities[:, None] * weights[None, :]).ravel()
    return min(1.0, float(probabilities[sums <= threshold].sum()))


def _weighted_sign_flip_monte_carlo(
    magnitudes: Sequence[float], sizes: Sequence[int], threshold: float, seed: int
) -> float:
    """Seeded Monte Carlo of the same tail: (1 + hits) / (flips + 1), as scipy counts it.

    Each flip is one random byte per eight scenarios; a 256-entry table per byte gives the
    sum of the magnitudes its set bits make negative, so a flipped sum costs one lookup per
    eight scenarios instead of a product with a sign matrix.
    """
    import numpy as np

    values = np.repeat(np.asarray(magnitudes), sizes)
    columns = -(-values.size // 8)
    padded = np.zeros(columns * 8)
    padded[: values.size] = values
    byte_bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(float)
    negative_sums = byte_bits @ padded.reshape(columns, 8).T  # (256, columns)
    total = float(values.sum())
    rng = np.random.default_rng(seed)
    batch = max(1, _FLIP_BATCH_VALUES // columns)
    hits = 0
    for start in range(0, _WEIGHTED_FLIPS, batch):
        rows = min(batch, _WEIGHTED_FLIPS - start)
        flips = rng.integers(0, 256, size=(rows, columns), dtype=np.uint8)
        # Each flipped sum is the total minus twice the magnitudes drawn negative.
        drawn = negative_sums[flips, np.arange(columns)].sum(axis=1)
        hits += int(np.count_nonzero(total - 2.0 * drawn <= threshold))
    return (hits + 1) / (_WEIGHTED_FLIPS + 1)


def stratified_permutation_p_value(
    tables: Sequence[tuple[int, int, int, int]], seed: int = 0
) -> float:
    """One-sided p of the same studentized statistic as the weighted sign flip, referred to
    its distribution when each scenario's attempts trade runs at random, its passes fixed.

    Under no change a scenario's attempts of both runs are exchangeable (the assumption the
    sign flip's exactness rests on too), so given its m passes among R_B + R_C attempts the
    current run's passes X are hypergeometric: the exact conditional test of
    Cochran-Mantel-Haenszel's design, with the sign flip's weights. pbar_j = m / (R_B + R_C)
    is fixed by the conditioning, so T = sum_j d_j / sd_j is linear in the X_j, and scenarios
    with the same (R_B, R_C, m) form one group whose sum of X is drawn at once. Its floor is
    set by the attempts, not by 2^-S: five scenarios at 40 repeats can reach any level.
    Exact enumeration when the groups' sums allow it, else ``_WEIGHTED_FLIPS`` seeded draws,
    counted as (hits + 1) / (draws + 1).
    """
    import numpy as np

    groups: Counter[tuple[int, int, int]] = Counter()
    observed = 0.0
    for passed_b, attempts_b, passed_c, attempts_c in tables:
        _check_table(passed_b, attempts_b, passed_c, attempts_c)
        passes = passed_b + passed_c
        if 0 < passes < attempts_b + attempts_c:  # else every arrangement is the same
            groups[(attempts_b, attempts_c, passes)] += 1
            observed += _studentized(attempts_b, attempts_c, passes, passed_c)
    if not groups:
        return 1.0
    keys = sorted(groups)
    values, pmfs = [], []
    for a_b, a_c, m in keys:
        count = groups[(a_b, a_c, m)]
        lowest, pmf = _sum_of_hypergeometrics(a_b, a_c, m, count)
        # T is linear in Y, the group's sum of current passes: intercept + slope * Y.
        slope = _studentized(a_b, a_c, m, 1) - _studentized(a_b, a_c, m, 0)
        values.append(_studentized(a_b, a_c, m, 0) * count + slope * (lowest + np.arange(pmf.size)))
        pmfs.append(pmf)
    tolerance = 1e-9 * (1.0 + math.fsum(float(np.abs(v).max()) for v in values))
    threshold = observed + tolerance
    if math.prod(pmf.size for pmf in pmfs) <= _MAX_EXACT_WEIGHTED_SUMS:
        sums, probabilities = np.zeros(1), np.ones(1)
        for value, pmf in zip(values, pmfs, strict=True):
            sums = (sums[:, None] + value[None, :]).ravel()
            probabilities = (probabilities[:, None] * pmf[None, :]).ravel()
        return min(1.0, float(probabilities[sums <= threshold].sum()))
    rng = np.random.default_rng(seed)
    drawn = np.zeros(_WEIGHTED_FLIPS)
    for value, pmf in zip(values, pmfs, strict=True):
        cumulative = np.cumsum(pmf)
        picks = np.searchsorted(cumulative, rng.random(_WEIGHTED_FLIPS) * cumulative[-1])
        drawn += value[np.minimum(picks, pmf.size - 1)]
    hits = int(np.count_nonzero(drawn <= threshold))
    return (hits + 1) / (_WEIGHTED_FLIPS + 1)


def _studentized(attempts_b: int, attempts_c: int, passes: int, passed_c: int) -> float:
    """d / sd of one scenario with `passes` in all and `passed_c` of them in the current run."""
    pooled = passes / (attempts_b + attempts_c)
    sd = math.sqrt(pooled * (1 - pooled) * (1 / attempts_b + 1 / attempts_c))
    return (passed_c / attempts_c - (passes - passed_c) / attempts_b) / sd


@lru_cache(maxsize=4096)
def _sum_of_hypergeometrics(
    attempts_b: int, attempts_c: int, passes: int, count: int
) -> tuple[int, Any]:
    """(lowest, pmf): the distribution of the current run's passes summed over `count`
    scenarios that each have `passes` among attempts_b + attempts_c attempts, on
    lowest, lowest + 1, ... (only the reachable values: fewer states to enumerate)."""
    import numpy as np

    low, high = max(0, passes - attempts_b), min(passes, attempts_c)
    total = math.comb(attempts_b + attempts_c, attempts_c)
    one = np.array(
        [
            math.comb(passes, x)
            * math.comb(attempts_b + attempts_c - passes, attempts_c - x)
            / total
            for x in range(low, high + 1)
        ]
    )
    if count == 1:
        return low, one
    size = count * (high - low) + 1
    # The count-fold convolution through one FFT; rounding leaves tiny negatives, cut to 0.
    length = 1 << (size - 1).bit_length()
    pmf = np.clip(np.fft.irfft(np.fft.rfft(one, length) ** count, length)[:size], 0.0, None)
    return count * low, pmf / pmf.sum()


def mann_whitney_slower_p_values(
    samples: Sequence[tuple[Sequence[float], Sequence[float]]],
) -> list[float]:
    """One-sided Mann-Whitney p that current attempts take longer, per (baseline, current).

    Same p-values as one ``mannwhitneyu(current, baseline, alternative="greater")`` call per
    case, but batched: scipy's per-call overhead (~7 ms) dwarfs the test itself. Batches are
    grouped by sample sizes and by the method scipy's "auto" would pick for each case, since
    "auto" decides once for a whole batch.
    """
    if not samples:
        return []  # nothing to test: do not pay for the scipy import
    import numpy as np
    from scipy.stats import mannwhitneyu

    batches: dict[tuple[int, int, str], list[int]] = defaultdict(list)
    for index, (baseline, current) in enumerate(samples):
        method = _mann_whitney_method(baseline, current)
        batches[(len(baseline), len(current), method)].append(index)
    p_values = [1.0] * len(samples)
    for (_, _, method), members in batches.items():
        base_rows = np.array([samples[i][0] for i in members], dtype=float)
        current_rows = np.array([samples[i][1] for i in members], dtype=float)
        result = mannwhitneyu(current_rows, base_rows, alternative="greater", axis=1, method=method)
        for index, p_value in zip(members, np.atleast_1d(result.pvalue), strict=True):
            p_values[index] = float(p_value)
    return p_values


def _mann_whitney_method(baseline: Sequence[float], current: Sequence[float]) -> str:
    """scipy's documented "auto" rule: exact for a sample of 8 or fewer without ties."""
    tied = len(set(baseline) | set(current)) < len(baseline) + len(current)
    return "exact" if min(len(baseline), len(current)) <= 8 and not tied else "asymptotic"


@dataclass(frozen=True)
class RatioBound:
    """A one-sided (1 - alpha) bootstrap lower bound a gate asks for (docs/statistics.md §3.4):
    of sum_j mean(current_j) / sum_j mean(baseline_j) when ``quantile`` is None, else of
    HD_quantile(pooled current) / HD_quantile(pooled baseline)."""

    baseline: Sequence[Sequence[float]]
    current: Sequence[Sequence[float]]
    alpha: float
    quantile: float | None = None


def ratio_lower_bounds(requests: Sequence[RatioBound], iterations: int, seed: int) -> list[float]:
    """Each request's bound, the same to the last bit as when it is computed alone.

    Paired two-stage cluster bootstrap: draw scenarios with replacement (the same draw for
    both runs), then resample each drawn scenario's attempts within each run. Seeded, so
    the same data always gives the same verdict; each bound stops after a pilot when its
    decision is already clear (``_SequentialBound``). The random draws depend only on the
    seed and on how many attempts each scenario has in each run, so the requests whose runs
    have the same attempts per scenario (at 10,000 scenarios x 10: the latency, token and
    cost gates') share one draw of every resample instead of drawing it each.
    """
    runs = [(_FlatRun(request.baseline), _FlatRun(request.current)) for request in requests]
    shapes: defaultdict[tuple[bytes, bytes], list[int]] = defaultdict(list)
    for index, (baseline, current) in enumerate(runs):
        shapes[(baseline.sizes.tobytes(), current.sizes.tobytes())].append(index)
    bounds = [math.nan] * len(requests)
    for members in shapes.values():
        paired = [_PairedStatistic(requests[i], *runs[i]) for i in members]
        shared = _shared_lower_bounds(
            paired, [requests[i].alpha for i in members], iterations, seed
        )
        for index, bound in zip(members, shared, strict=True):
            bounds[index] = bound
    return bounds


def mean_ratio_lower_bound(
    baseline: Sequence[Sequence[float]],
    current: Sequence[Sequence[float]],
    alpha: float,
    iterations: int,
    seed: int,
) -> float:
    """One-sided (1 - alpha) lower bound of sum_j mean(current_j) / sum_j mean(baseline_j)
    (``ratio_lower_bounds`` of one request)."""
    return ratio_lower_bounds([RatioBound(baseline, current, alpha)], iterations, seed)[0]


def pooled_quantile_ratio_lower_bound(
    baseline: Sequence[Sequence[float]],
    current: Sequence[Sequence[float]],
    q: float,
    alpha: float,
    iterations: int,
    seed: int,
) -> float:
    """One-sided (1 - alpha) lower bound of HD_q(pooled current) / HD_q(pooled baseline)
    (docs/statistics.md §3.4; ``ratio_lower_bounds`` of one request): each iteration pools the
    resampled attempts of each run and takes their Harrell-Davis quantile."""
    request = RatioBound(baseline, current, alpha, q)
    return ratio_lower_bounds([request], iterations, seed)[0]


# Resamples drawn before the bound is checked for a clear decision (docs/statistics.md §3.5):
# at 10,000 scenarios x 10 one resample of a run costs ~2 ms, and 4,000 of them took most of
# compare().
_PILOT_RESAMPLES = 200
_PILOT_CHUNK = 200  # resamples are drawn in batches that divide this (whatever the pilot)
# How many times the normal reach of the alpha-quantile the pilot's mean must lie above 1 to
# decide early: a tail twice as long as the normal's, or a pilot standard deviation at half
# the bootstrap's, still cannot reach 1.
_CLEAR_MARGIN = 2.0
# Values resampled per numpy batch (memory, not speed): ~8 MB per array.
_BATCH_VALUES = 1 << 20
# Values a run's resample works on at a time inside a batch: arrays that stay in the CPU's
# cache make the bootstraps ~1.6x faster than whole batches. The random stream is the same.
_CHUNK_VALUES = 1 << 17


def _shared_lower_bounds(
    statistics: Sequence[_PairedStatistic], alphas: Sequence[float], iterations: int, seed: int
) -> list[float]:
    """The alpha-quantile of each statistic over ``iterations`` paired scenario draws, or over
    fewer where its ``_SequentialBound`` stops; every statistic sees the same draws, those it
    would draw alone (their runs have the same attempts per scenario: ``ratio_lower_bounds``).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    first = statistics[0]
    scenarios, width = len(first.baseline.sizes), max(first.baseline.width, first.current.width)
    # Batches that divide the pilot: a bound the pilot leaves open continues the same random
    # stream, so it equals the bound of all resamples drawn in one go, for the same seed.
    fits = max(1, _BATCH_VALUES // (scenarios * width))
    batch = max(d for d in range(1, _PILOT_CHUNK + 1) if _PILOT_CHUNK % d == 0 and d <= fits)
    bounds = [_SequentialBound(alpha, iterations) for alpha in alphas]
    buffer = np.empty(batch * scenarios * width, dtype=np.intp)  # the flat indices, reused
    for start in range(0, iterations, batch):
        active = [i for i, bound in enumerate(bounds) if bound.value is None]
        if not active:
            break
        draws = rng.integers(0, scenarios, size=(min(batch, iterations - start), scenarios))
        runs = [[statistics[i].baseline_values for i in active]]
        runs.append([statistics[i].current_values for i in active])
        baseline, current = (_resample_run(rng, draws, values, buffer) for values in runs)
        for i, base, cur in zip(active, baseline, current, strict=True):
            bounds[i].add(_ratio(base, cur))
    return [bound.result() for bound in bounds]


class _SequentialBound:
    """One bootstrap's stopping rule over its batches of ratios: a pilot of
    ``_PILOT_RESAMPLES``, all ``iterations`` when the pilot leaves the decision open
    (``_decided``), fewer when enough ratios are already at or below 1 (``_below_for_sure``).
    ``value`` is the bound once it stops."""

    def __init__(self, alpha: float, iterations: int) -> None:
        self.alpha, self.iterations = alpha, iterations
        self.target = min(iterations, _PILOT_RESAMPLES)
        self.looks = self.target < iterations  # without a pilot (the calibration's check): all
        self.done: list[NDArray[np.float64]] = []
        self.drawn = self.below = 0  # ratios so far, and those at or below 1
        self.value: float | None = None

    def add(self, ratios: NDArray[np.float64]) -> None:
        import numpy as np

        self.done.append(ratios)
        self.drawn += len(ratios)
        self.below += int(np.count_nonzero(ratios <= 1.0))
        after_pilot = self.looks and self.target == self.iterations
        if after_pilot and _below_for_sure(self.below, self.alpha, self.iterations):
            self.value = self._quantile()  # the rest cannot lift the bound above 1
        elif self.drawn >= self.target:
            self._look()

    def _look(self) -> None:
        """At the pilot's end, or at the last resample: stop, or go on to all iterations."""
        import numpy as np

        ratios = np.concatenate(self.done)
        bound = float(np.quantile(ratios, self.alpha))
        final = self.target == self.iterations or not self.looks
        below = _below_for_sure(self.below, self.alpha, self.iterations)
        if final or below or _decided(ratios, bound, self.alpha):
            self.value = bound
        else:
            self.target = self.iterations

    def _quantile(self) -> float:
        import numpy as np

        return float(np.quantile(np.concatenate(self.done), self.alpha))

    def result(self) -> float:
        assert self.value is not None, "every bound stops by its last resample"
        return self.value


def _below_for_sure(below: int, alpha: float, iterations: int) -> bool:
    """Whether ``below`` ratios at or below 1 already put the alpha-quantile of all
    ``iterations`` (numpy's linear interpolation between the order statistics at positions
    floor(h) and floor(h) + 1, h = alpha (iterations - 1)) at or below 1, whatever the rest.

    Exact: the resamples drawn so far are among all of them, so the final count is at least
    ``below``; the quantile of those drawn so far is then at or below 1 as well.
    """
    return below >= math.floor(alpha * (iterations - 1)) + 2


def _decided(ratios: NDArray[np.float64], pilot_bound: float, alpha: float) -> bool:
    """Whether the pilot's ratios put the bootstrap's alpha-quantile clearly on one side of 1.

    The bootstrap distribution of a ratio of sums over many scenarios is close to normal, its
    alpha-quantile z = z_{1-alpha} standard deviations below its mean (3.0 at the latency
    gate's 0.00125). Decided above: the pilot's mean is ``_CLEAR_MARGIN`` z of its standard
    deviations above 1, and so is its own quantile. Decided below: the mean plus one standard
    deviation is under 1 (the alpha-quantile lies below the median). Else all resamples run.
    """
    import numpy as np

    if len(ratios) < 2 or not np.all(np.isfinite(ratios)):
        return False
    mean, sd = float(ratios.mean()), float(ratios.std(ddof=1))
    reach = _CLEAR_MARGIN * NormalDist().inv_cdf(1.0 - alpha) * sd
    return (mean - reach > 1.0 and pilot_bound > 1.0) or mean + sd < 1.0


def _ratio(baseline: NDArray[np.float64], current: NDArray[np.float64]) -> NDArray[np.float64]:
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(baseline > 0, current / baseline, np.inf)


class _FlatRun:
    """One run's per-scenario values laid end to end, for vectorised two-stage resampling.

    A resample of a drawn scenario of n attempts picks n of its attempts with replacement:
    slot k of a scenario drawn in row i holds the flat index offset + floor(u n), and the
    slots past n (scenarios have unequal attempts) hold ``sentinel``, one past the values.
    """

    def __init__(self, groups: Sequence[Sequence[float]]) -> None:
        import numpy as np

        sizes = np.array([len(g) for g in groups], dtype=np.intp)
        if not len(sizes) or sizes.min() < 1:
            raise ValueError("every scenario needs at least one value in each run")
        self.values = np.concatenate([np.asarray(g, dtype=float) for g in groups])
        self.sentinel = len(self.values)
        # Unequal attempts are drawn as 32-bit integers (equal ones by ``codes``); the flat
        # indices they make are intp, with which numpy gathers about twice as fast as with
        # 32-bit ones (no conversion per gather).
        index = np.int32 if self.sentinel < np.iinfo(np.int32).max else np.intp
        self.sizes: NDArray[Any] = sizes.astype(index)
        self.offsets: NDArray[np.intp] = np.cumsum(sizes) - sizes
        self.width = int(sizes.max())
        self.equal_sizes = bool((sizes == self.width).all())
        # A scenario's mean of n resampled attempts sums each pick's value / n; 0 past n.
        self.per_pick = np.append(self.values / np.repeat(sizes, sizes), 0.0)
        self.order = np.argsort(self.values, kind="stable")
        self.ordered = self.values[self.order]
        # Rank of each flat index in sorted order; the sentinel keeps a bin of its own, last.
        self.rank: NDArray[Any] = np.empty(self.sentinel + 1, dtype=index)
        self.rank[self.order], self.rank[self.sentinel] = np.arange(self.sentinel), self.sentinel
        self.codes = _slot_codes(self.width) if self.equal_sizes else None
        self.tail_starts: dict[float, int] = {}
        self.bins_from: dict[int, NDArray[np.intp]] = {}
        self.below_only: dict[int, NDArray[np.bool_]] = {}

    def picks(self, rng: np.random.Generator, draws: NDArray[np.intp]) -> NDArray[Any]:
        """Flat indices of every resampled attempt, one row per scenario draw."""
        flat: NDArray[Any] = self.flat(draws, self.slots(rng, draws)).reshape(len(draws), -1)
        return flat

    def slots(self, rng: np.random.Generator, draws: NDArray[np.intp]) -> NDArray[Any]:
        """(rows, scenarios, width): the attempt each slot of a drawn scenario picks, -1 in the
        slots past the scenario's own attempts."""
        import numpy as np

        shape = (*draws.shape, self.width)
        if self.equal_sizes and self.codes is not None:  # the common case: every slot is drawn
            return self._coded_slots(rng, draws.shape)
        if self.equal_sizes:
            drawn: NDArray[Any] = rng.integers(0, self.width, size=shape, dtype=self.sizes.dtype)
            return drawn
        drawn_sizes = self.sizes[draws][:, :, None]
        padded: NDArray[Any] = (rng.random(shape) * drawn_sizes).astype(self.sizes.dtype)
        padded[np.arange(self.width)[None, None, :] >= drawn_sizes] = -1
        return padded

    def _coded_slots(self, rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray[Any]:
        """(rows, scenarios, n) slots of n attempts each, drawn k at a time (``_slot_codes``):
        a code uniform in [0, n^k) is k independent uniform slots (its base-n digits), looked up
        in ``codes``. A row's codes are drawn together, so chunks of rows continue the stream."""
        import numpy as np

        assert self.codes is not None
        digits = self.codes.dtype.itemsize  # k, the slots per code
        per_row = -(-shape[1] * self.width // digits)
        codes = rng.integers(0, len(self.codes), size=(shape[0], per_row), dtype=np.uint32)
        slots: NDArray[Any] = np.take(self.codes, codes).view(np.uint8)
        return slots[:, : shape[1] * self.width].reshape(*shape, self.width)

    def flat(
        self, draws: NDArray[np.intp], slots: NDArray[Any], out: NDArray[np.intp] | None = None
    ) -> NDArray[np.intp]:
        """Flat indices of the drawn scenarios' slots (into ``out``, shaped as ``slots``, when
        given); ``sentinel`` in the slots past a scenario's attempts."""
        import numpy as np

        flat: NDArray[np.intp] = np.add(self.offsets[draws][..., None], slots, out=out)
        if not self.equal_sizes:
            flat[slots < 0] = self.sentinel
        return flat

    def resampled_mean_totals(
        self, rng: np.random.Generator, draws: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        """Per row, the sum over the drawn scenarios of their resampled means."""
        return _resample_run(rng, draws, [_MeanTotals(self)])[0]

    def chunks(self, draws: NDArray[np.intp]) -> list[slice]:
        """Row slices of ``draws`` of about ``_CHUNK_VALUES`` picks: drawn one after the other,
        their picks continue the random stream as one draw of all the rows would."""
        rows = max(1, _CHUNK_VALUES // (draws.shape[1] * self.width))
        return [slice(start, start + rows) for start in range(0, len(draws), rows)]

    def resampled_pooled_quantiles(
        self, rng: np.random.Generator, draws: NDArray[np.intp], q: float
    ) -> NDArray[np.float64]:
        """Per row, the HD q-quantile of the drawn scenarios' resampled attempts, pooled
        (``_PooledQuantiles``)."""
        return _resample_run(rng, draws, [_PooledQuantiles(self, q)])[0]

    def tail_start(self, q: float) -> int:
        """The sorted position from which values are counted one by one; the picks below it are
        only counted together. Its expected running count lies a whole window below the Beta's
        window (at 10,000 x 10: ~20 bootstrap standard deviations), so the picks below it never
        get a weight, and the counting touches ~13% of the values instead of all."""
        if q not in self.tail_starts:
            low, high, _ = _beta_cdf_window(q, self.sentinel)
            self.tail_starts[q] = max(0, 2 * low - high)
        return self.tail_starts[q]

    def tail_counts(self, flat: NDArray[Any], draws: NDArray[np.intp], start: int) -> NDArray[Any]:
        """``running_counts`` of the picks (``flat``, one row per row of ``draws``) from
        ``start`` on, without looking up the picks of the drawn scenarios whose every attempt
        sorts below ``start`` (at 10,000 x 10 about two thirds): all their attempts are counted
        below it (the same counts, so the same bound)."""
        import numpy as np

        if start not in self.below_only:
            top = np.maximum.reduceat(self.rank[:-1], self.offsets)  # each scenario's top rank
            self.below_only[start] = top < start
        skipped = self.below_only[start][draws]  # (rows, scenarios)
        if not skipped.any():
            return self.running_counts(self.bin_of(start)[flat], start)
        kept = np.flatnonzero(~skipped)  # row-major positions of the kept draws
        row_of = kept // draws.shape[1]  # of each kept draw
        picks = flat.reshape(-1, self.width).take(kept, axis=0)  # (kept draws, width)
        filled = self.running_counts(self.bin_of(start).take(picks), start, row_of, len(draws))
        if self.equal_sizes:
            filled += (np.count_nonzero(skipped, axis=1) * self.width)[:, None]
        else:
            filled += np.where(skipped, self.sizes[draws], 0).sum(axis=1)[:, None]
        return filled

    def bin_of(self, start: int) -> NDArray[np.intp]:
        """Per flat index, its bin in ``running_counts`` from ``start``: 0 for every value that
        sorts below ``start``, then one bin per value in sorted order, the sentinel's last.
        One lookup per pick instead of a rank, a shift and a clip."""
        import numpy as np

        if start not in self.bins_from:
            self.bins_from[start] = np.maximum(self.rank.astype(np.intp) - (start - 1), 0)
        return self.bins_from[start]

    def running_counts(
        self,
        bins_of_picks: NDArray[np.intp],
        start: int,
        row_of: NDArray[np.intp] | None = None,
        rows: int | None = None,
    ) -> NDArray[Any]:
        """Per resample, C_v for the values v = start - 1 .. N - 1 in sorted order: column 0
        holds every pick below ``start`` (C_{-1} = 0 when start is 0), the sentinel none.

        ``bins_of_picks`` holds ``bin_of(start)`` of the picks; its row i belongs to resample
        ``row_of[i]`` of ``rows`` (default: its own).
        """
        import numpy as np

        if row_of is None:
            rows, row_of = len(bins_of_picks), np.arange(len(bins_of_picks))
        assert rows is not None
        bins = self.sentinel - start + 2  # below, start..N-1, the sentinel
        if rows > 1:  # each resample's bins apart (with one, all are its own)
            bins_of_picks = bins_of_picks + (row_of * bins)[:, None]
        counts = np.bincount(bins_of_picks.ravel(), minlength=rows * bins).reshape(rows, bins)
        filled: NDArray[Any] = np.cumsum(counts[:, :-1], axis=1)
        return filled


def _slot_codes(n: int) -> NDArray[Any] | None:
    """Per code c in [0, n^k), its k base-n digits as bytes side by side, one k-byte integer
    each: k = 4 up to n = 16 (a table of at most 65,536 codes), 2 up to n = 256, else None
    (slots drawn one by one). A 32-bit random draw per code instead of per slot: at 10 attempts
    a case, the attempt draws cost about a third as much."""
    import numpy as np

    if n < 2 or n > 256:  # one attempt needs no draw; past 256 a digit needs more than a byte
        return None
    k = 4 if n**4 <= 1 << 16 else 2
    digits = np.stack(np.unravel_index(np.arange(n**k), (n,) * k), axis=1).astype(np.uint8)
    table: NDArray[Any] = np.ascontiguousarray(digits).view(np.uint32 if k == 4 else np.uint16)
    return table.ravel()


def _resample_run(
    rng: np.random.Generator,
    draws: NDArray[np.intp],
    statistics: Sequence[_RunStatistic],
    buffer: NDArray[np.intp] | None = None,
) -> list[NDArray[np.float64]]:
    """Each statistic's value per row of ``draws`` on one resample of its run; the statistics'
    runs have the same attempts per scenario, so one draw of the attempts serves them all.

    The attempts are drawn chunk after chunk of rows (``_FlatRun.chunks``), continuing the
    random stream as one draw of all rows would, and every statistic takes each chunk's flat
    indices while they are in the CPU's cache. The flat indices go to ``buffer`` (at least
    ``draws.size * width`` long) when given: one array reused batch after batch, where a new
    one each time costs a fresh allocation of megabytes and its page faults.
    """
    import numpy as np

    run = statistics[0].run
    fed = _gathered_together(statistics)
    size = draws.size * run.width
    buffer = np.empty(size, dtype=np.intp) if buffer is None else buffer
    batch = buffer[:size].reshape(len(draws), -1)
    for rows in run.chunks(draws):
        slots = run.slots(rng, draws[rows])
        flat = batch[rows]
        run.flat(draws[rows], slots, out=flat.reshape(slots.shape))
        for statistic in fed:
            statistic.take(draws[rows], flat)
    return [statistic.values(draws) for statistic in statistics]


def _gathered_together(statistics: Sequence[_RunStatistic]) -> list[_RunStatistic]:
    """The statistics to hand the chunks to: the mean totals two by two (``_TwoMeanTotals``:
    one gather serves both), the others as they are."""
    means = [statistic for statistic in statistics if isinstance(statistic, _MeanTotals)]
    paired = [_TwoMeanTotals(*pair) for pair in zip(means[0::2], means[1::2], strict=False)]
    return [*paired, *means[len(paired) * 2 :], *(s for s in statistics if s not in means)]


class _RunStatistic(Protocol):
    """A statistic of one run's resamples, taken chunk by chunk of their flat indices."""

    run: _FlatRun

    def take(self, draws: NDArray[np.intp], flat: NDArray[np.intp]) -> None:
        """One chunk: ``flat`` holds row i's picks of the scenarios drawn in ``draws[i]``."""

    def values(self, draws: NDArray[np.intp]) -> NDArray[np.float64]:
        """Per row of the batch ``draws`` whose chunks were taken, the statistic; then reset."""


class _MeanTotals:
    """Per resample, the sum over the drawn scenarios of their resampled means."""

    def __init__(self, run: _FlatRun) -> None:
        self.run = run
        self.parts: list[NDArray[np.float64]] = []
        self.side_by_side: dict[_MeanTotals, NDArray[np.complex128]] = {}  # ``_TwoMeanTotals``

    def take(self, draws: NDArray[np.intp], flat: NDArray[np.intp]) -> None:
        self.parts.append(self.run.per_pick.take(flat).sum(axis=1))

    def values(self, draws: NDArray[np.intp]) -> NDArray[np.float64]:
        import numpy as np

        totals, self.parts = np.concatenate(self.parts), []
        return totals


class _TwoMeanTotals:
    """Two ``_MeanTotals`` of runs with the same attempts per scenario (the token and cost
    gates'), fed by one gather: each pick's two values lie side by side, as one complex
    number, so a pick costs one random access instead of two. Each side is then summed with
    a stride, by the same pairwise summation as its own gather, so to the same bits."""

    def __init__(self, first: _MeanTotals, second: _MeanTotals) -> None:
        import numpy as np

        self.first, self.second, self.run = first, second, first.run
        if second not in first.side_by_side:  # built once per bootstrap, not once per batch
            both = np.stack([first.run.per_pick, second.run.per_pick], axis=1)
            first.side_by_side[second] = both.view(np.complex128).ravel()
        self.table = first.side_by_side[second]

    def take(self, draws: NDArray[np.intp], flat: NDArray[np.intp]) -> None:
        import numpy as np

        picked = self.table.take(flat).view(np.float64)  # per row: first, second, first, ...
        self.first.parts.append(picked[:, 0::2].sum(axis=1))
        self.second.parts.append(picked[:, 1::2].sum(axis=1))

    def values(self, draws: NDArray[np.intp]) -> NDArray[np.float64]:
        raise NotImplementedError("its two statistics give their own values")


class _PooledQuantiles:
    """Per resample, the HD q-quantile of the drawn scenarios' resampled attempts, pooled.

    Counts instead of a sort: each of the run's values, in sorted order, appears c_v times
    in a resample of n values and so fills ranks C_{v-1}+1..C_v (C the running count); HD
    gives it the weight I(C_v / n) - I(C_{v-1} / n), I the Beta(q(n+1), (1-q)(n+1)) CDF.
    The same estimate as sorting the resample, in linear time. The picks below
    ``tail_start`` are only counted; the counting goes by chunks of rows that stay in cache,
    the weighting by the whole batch (whose band of values, and so rounding, it shares).
    """

    def __init__(self, run: _FlatRun, q: float) -> None:
        self.run, self.cdf, self.start = run, _BetaCdfTable(q), run.tail_start(q)
        self.flats: list[NDArray[np.intp]] = []
        self.filled: list[NDArray[Any]] = []

    def take(self, draws: NDArray[np.intp], flat: NDArray[np.intp]) -> None:
        self.flats.append(flat)
        self.filled.append(self.run.tail_counts(flat, draws, self.start))

    def values(self, draws: NDArray[np.intp]) -> NDArray[np.float64]:
        import numpy as np

        counts, start, cdf = np.concatenate(self.filled), self.start, self.cdf
        flats, self.flats, self.filled = self.flats, [], []
        sizes = counts[:, -1]  # one n for all rows when every scenario has n attempts
        groups = [(int(n), sizes == n) for n in np.unique(sizes)]
        if start and not all(cdf.counted_below(counts[same, 0], n) for n, same in groups):
            # A resample with so many picks below the tail that they reach the Beta's window
            # (far beyond 40 of its standard deviations): count every value of the batch.
            counts = self.run.running_counts(self.run.bin_of(0)[np.concatenate(flats)], 0)
            start = 0
        out = np.empty(len(draws))
        for n, same in groups:
            out[same] = cdf.weighted_sum(counts[same], n, self.run.ordered, start - 1)
        return out


class _PairedStatistic:
    """A request's statistic on each of its two runs."""

    def __init__(self, request: RatioBound, baseline: _FlatRun, current: _FlatRun) -> None:
        self.baseline, self.current = baseline, current
        self.baseline_values, self.current_values = (
            _run_statistic(request.quantile, run) for run in (baseline, current)
        )


def _run_statistic(quantile: float | None, run: _FlatRun) -> _RunStatistic:
    return _MeanTotals(run) if quantile is None else _PooledQuantiles(run, quantile)


class _BetaCdfTable:
    """I(k / n) of Harrell-Davis's Beta(q(n+1), (1-q)(n+1)) at integer ranks k.

    For large n the Beta's mass lies within a few sqrt(n q (1-q)) ranks of q n; outside 40 of
    them (plus 20) its CDF is 0 or 1 to double precision, so only that window is computed
    (once per (q, n), ``_beta_cdf_window``), and only the values whose ranks reach into it get
    a weight.
    """

    def __init__(self, q: float) -> None:
        self.q = q

    def counted_below(self, below: NDArray[Any], n: int) -> bool:
        """Whether running counts of ``below`` stay under the window: no weight below them."""
        low, _, _ = _beta_cdf_window(self.q, n)
        return bool(below.max() <= low)

    def weighted_sum(
        self,
        filled: NDArray[Any],
        n: int,
        ordered: NDArray[np.float64],
        first_value: int = -1,
    ) -> NDArray[np.float64]:
        """Per row of running counts C, sum_v ordered_v (I(C_v / n) - I(C_{v-1} / n)).

        Column k of ``filled`` holds C of the value first_value + k (C_{-1} = 0); the columns
        before the window's must all be counted: C_{first_value} <= low unless first_value is
        -1. The band, and so every rounding, is the same whatever first_value.
        """
        import numpy as np

        low, high, table = _beta_cdf_window(self.q, n)
        # Columns whose ranks reach the window: C is sorted along each row.
        first = min(int(np.searchsorted(row, low, side="right")) for row in filled)
        last = max(int(np.searchsorted(row, high, side="left")) for row in filled)
        # The band's values, start .. stop - 1 (sorted positions): the first is only C_{v-1}.
        start = max(0, first_value + first - 1)
        stop = min(len(ordered), first_value + last + 1)
        if start == 0:  # value 0 gets a weight too, against C_{-1} = 0
            band = filled[:, max(0, -first_value - 1) : stop - first_value]
            if first_value == 0:
                band = np.concatenate([np.zeros((len(band), 1), dtype=band.dtype), band], axis=1)
            start = -1
        else:
            band = filled[:, start - first_value : stop - first_value]
        # table[0] = I = 0 below the window, table[-1] = I = 1 above it.
        cdf = table[np.clip(band - low + 1, 0, len(table) - 1)]
        result: NDArray[np.float64] = np.diff(cdf, axis=1) @ ordered[start + 1 : stop]
        return result


@lru_cache(maxsize=64)  # a gate asks for one or two n; the table is ~5,600 incomplete betas
def _beta_cdf_window(q: float, n: int) -> tuple[int, int, NDArray[np.float64]]:
    """(low, high, table): table[k - low + 1] = I(k / n) for low <= k <= high, 0 and 1 at the
    ends, where I is the CDF of Beta(q (n + 1), (1 - q) (n + 1))."""
    import numpy as np
    from scipy.special import betainc  # type: ignore[import-untyped]

    reach = 40.0 * math.sqrt(n * q * (1.0 - q)) + 20.0
    low, high = max(0, math.floor(q * n - reach)), min(n, math.ceil(q * n + reach))
    inside = betainc(q * (n + 1), (1.0 - q) * (n + 1), np.arange(low, high + 1) / n)
    table: NDArray[np.float64] = np.concatenate([[0.0], inside, [1.0]])
    table.flags.writeable = False  # shared between calls
    return low, high, table
