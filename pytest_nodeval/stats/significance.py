"""Two-run tests and intervals behind the gates (docs/statistics.md §3; library twins: §9).

numpy and scipy are imported inside the functions that need them, so an unchanged rerun or
a deterministic single-attempt replay run never pays for them (scipy.stats takes ~1.5 s).
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

from .run_stats import wilson_interval

if TYPE_CHECKING:  # annotations only; numpy is imported at run time where it is used
    import numpy as np
    from numpy.typing import NDArray

# Exact sign-flip enumeration keeps one counter per reachable sum; above this many
# states (only with oddly mixed repeat counts) a seeded Monte Carlo is used instead.
_MAX_EXACT_STATES = 1 << 18
_MONTE_CARLO_FLIPS = 9_999
# The weighted suite test enumerates every sign pattern while the scenarios' distinct
# (|difference|, null variance) groups reach at most this many sums; above, it draws this
# many seeded random sign patterns: at the suite gate's default level 0.005 a FAIL then
# needs at most 99 flipped sums at or below the observed one, so the Monte Carlo error
# hardly moves the decision.
_MAX_EXACT_WEIGHTED_SUMS = 1 << 18
_WEIGHTED_FLIPS = 19_999
# Sign patterns drawn and summed per numpy batch (memory, not speed).
_FLIP_BATCH_VALUES = 1 << 20


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


def sign_flip_p_value(differences: Sequence[Fraction], seed: int = 0) -> float:
    """One-sided (mean < 0) paired sign-flip permutation p-value over scenarios.

    The unweighted form of the suite test (docs/statistics.md §3.2), exact under
    exchangeability of the run labels within a scenario. The differences are exact fractions
    c/R - c'/R', so the null distribution of their sum is enumerated exactly by counting; no
    resampling noise and no scipy import.
    """
    if not differences:
        raise ValueError("sign_flip_p_value needs at least one difference")
    scale = math.lcm(*(d.denominator for d in differences))
    steps = [int(d * scale) for d in differences]
    states = min(1 << len(steps), 2 * sum(abs(s) for s in steps) + 1)
    if states > _MAX_EXACT_STATES:
        return _sign_flip_monte_carlo(steps, seed)
    return _sign_flip_exact(steps)


def _sign_flip_exact(steps: Sequence[int]) -> float:
    ways: dict[int, int] = {0: 1}
    for step in steps:
        following: dict[int, int] = defaultdict(int)
        for total, count in ways.items():
            following[total + step] += count
            following[total - step] += count
        ways = following
    observed = sum(steps)
    return sum(count for total, count in ways.items() if total <= observed) / (1 << len(steps))


def _sign_flip_monte_carlo(steps: Sequence[int], seed: int) -> float:
    rng = random.Random(seed)
    observed = sum(steps)
    hits = sum(
        1
        for _ in range(_MONTE_CARLO_FLIPS)
        if sum(s if rng.random() < 0.5 else -s for s in steps) <= observed
    )
    return (hits + 1) / (_MONTE_CARLO_FLIPS + 1)  # counts the observed labelling, as scipy does


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
    for passed_b, attempts_b, passed_c, attempts_c in tables:
        if not (0 <= passed_b <= attempts_b and 0 <= passed_c <= attempts_c):
            raise ValueError(
                f"passes must lie in [0, attempts], got {passed_b}/{attempts_b}, "
                f"{passed_c}/{attempts_c}"
            )
        if attempts_b < 1 or attempts_c < 1:
            raise ValueError("every scenario needs at least one attempt in each run")
        difference = Fraction(passed_c, attempts_c) - Fraction(passed_b, attempts_b)
        if difference == 0:
            continue
        pooled = Fraction(passed_b + passed_c, attempts_b + attempts_c)
        variance = pooled * (1 - pooled) * (Fraction(1, attempts_b) + Fraction(1, attempts_c))
        key = (abs(difference), variance)  # variance > 0: d != 0 needs a pass and a fail
        groups[key] += 1
        net[key] += 1 if difference > 0 else -1
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


def mean_ratio_lower_bound(
    baseline: Sequence[Sequence[float]],
    current: Sequence[Sequence[float]],
    alpha: float,
    iterations: int,
    seed: int,
) -> float:
    """One-sided (1 - alpha) lower bound of sum_j mean(current_j) / sum_j mean(baseline_j).

    Paired two-stage cluster bootstrap: draw scenarios with replacement (the same draw for
    both runs), then resample each drawn scenario's attempts within each run. Seeded, so
    the same data always gives the same verdict.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    scenarios = len(baseline)
    draws = rng.integers(0, scenarios, size=(iterations, scenarios))
    # For each scenario, the iterations that drew it (once per drawn copy): one sort, shared
    # by both runs because the scenario draw is paired.
    order = np.argsort(draws, axis=None, kind="stable")
    boundaries = np.cumsum(np.bincount(draws.ravel(), minlength=scenarios))[:-1]
    drawn_in = np.split(order // scenarios, boundaries)
    totals_b = _resampled_mean_totals(baseline, drawn_in, iterations, rng)
    totals_c = _resampled_mean_totals(current, drawn_in, iterations, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(totals_b > 0, totals_c / totals_b, np.inf)
    return float(np.quantile(ratios, alpha))


def _resampled_mean_totals(
    groups: Sequence[Sequence[float]],
    drawn_in: Sequence[NDArray[np.intp]],
    iterations: int,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """For each bootstrap iteration, the sum over drawn scenarios of a resampled mean."""
    import numpy as np

    totals = np.zeros(iterations)
    for values, rows in zip(groups, drawn_in, strict=True):
        if rows.size:
            sample = np.asarray(values, dtype=float)
            picks = rng.integers(0, sample.size, size=(rows.size, sample.size))
            np.add.at(totals, rows, sample[picks].mean(axis=1))
    return totals


def pooled_quantile_ratio_lower_bound(
    baseline: Sequence[Sequence[float]],
    current: Sequence[Sequence[float]],
    q: float,
    alpha: float,
    iterations: int,
    seed: int,
) -> float:
    """One-sided (1 - alpha) lower bound of HD_q(pooled current) / HD_q(pooled baseline).

    Paired two-stage cluster bootstrap (docs/statistics.md §3.4). Each iteration draws
    scenarios with replacement (the same draw for both runs), resamples each drawn scenario's
    attempts within each run, pools them and takes the Harrell-Davis quantile. Seeded.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(baseline), size=(iterations, len(baseline)))
    quantiles_b = _resampled_pooled_quantiles(baseline, draws, q, rng)
    quantiles_c = _resampled_pooled_quantiles(current, draws, q, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(quantiles_b > 0, quantiles_c / quantiles_b, np.inf)
    return float(np.quantile(ratios, alpha))


# Bootstrap rows are sorted in batches of at most this many values (memory, not speed).
_BATCH_VALUES = 1 << 21


def _resampled_pooled_quantiles(
    groups: Sequence[Sequence[float]],
    draws: NDArray[np.intp],
    q: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Per iteration, the HD q-quantile of the drawn scenarios' resampled attempts, pooled."""
    import numpy as np

    sizes = np.array([len(g) for g in groups])
    width = int(sizes.max())
    padded = np.full((len(groups), width), np.nan)
    for j, values in enumerate(groups):
        padded[j, : len(values)] = values
    drawn_sizes = sizes[draws][:, :, None]  # (iterations, scenarios, 1)
    out = np.empty(len(draws))
    batch = max(1, _BATCH_VALUES // (draws.shape[1] * width))
    for start in range(0, len(draws), batch):
        rows = slice(start, start + batch)
        # Attempt k of a drawn scenario of size n picks attempt floor(u * n); slots k >= n stay NaN.
        picks = (rng.random((*draws[rows].shape, width)) * drawn_sizes[rows]).astype(np.intp)
        pooled = padded[draws[rows][:, :, None], picks]
        pooled[np.arange(width)[None, None, :] >= drawn_sizes[rows]] = np.nan
        out[rows] = _harrell_davis_rows(np.sort(pooled.reshape(len(pooled), -1), axis=1), q)
    return out


def _harrell_davis_rows(ordered: NDArray[np.float64], q: float) -> NDArray[np.float64]:
    """HD quantile of each row of sorted values; NaN padding sorts last and is left out."""
    import numpy as np
    from scipy.special import betainc  # type: ignore[import-untyped]

    counts = (~np.isnan(ordered)).sum(axis=1)
    out = np.empty(len(ordered))
    for n in np.unique(counts):
        rows = counts == n
        a, b = q * (n + 1), (1.0 - q) * (n + 1)
        weights = np.diff(betainc(a, b, np.arange(n + 1) / n))
        out[rows] = ordered[rows, :n] @ weights
    return out
