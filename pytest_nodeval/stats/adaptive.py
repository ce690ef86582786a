"""Adaptive repeats: after each look at a case, decide regressed, no regression, or more repeats.

Described in docs/statistics.md §6. A case compared with a baseline runs in looks at 3, 5,
10, 20, 40 (then doubling) graded attempts, cut at its cap, and stops at the first look
where its comparison is decided:

- **regressed**: the one-sided Boschloo p of the cumulative counts is at most this look's
  share of the case's level, and the drop is at least the per-case gate's practical
  threshold: the gate will FAIL it whatever the other cases do;
- **no regression**: a regression verdict has become implausible: at the lowest rate the
  candidate plausibly has (the one-sided 95% Wilson lower bound of its counts so far), the
  chance that a later look, up to the cap, would find one is under 5% (conditional power).
  A case that no result within its cap could make significant stops at its first look;
- otherwise it gets the next look's repeats, until the cap.

Why a group-sequential design with Bonferroni spending over the looks, not SPRT or a
confidence sequence:

- **Validity is one line.** The looks are planned sample sizes, so at look k the Boschloo p
  is an exact p-value of the counts so far whatever happened before; look k gets the
  share w_k of the case's level, the shares sum to one, and by the union bound the case is
  declared regressed under no change with probability at most its level, for any baseline
  rate and any stopping for "no regression" (that stopping never rejects, so it only
  lowers the error). ``sequential_p`` = min_k p_k / w_k is thus an ordinary p-value, and
  the gate runs the same Holm across cases on it as on a fixed-repeat case's Boschloo p:
  the per-case gate keeps its share of the run's budget (§4.1), with or without adaptive
  cases.
- **The baseline is a sample too.** SPRT and the beta-binomial confidence sequence treat
  the baseline rate as known; with 10-40 baseline attempts it is not, and a known-rate
  test would spend the budget on the baseline's noise. Boschloo is exact for two samples.
- **Looks cost little power.** The shares grow with the square of the look size, so the
  last look keeps most of the level (75% at a cap of 10, 75% at 40), and a case that runs
  to its cap is tested almost as a fixed-repeat one. Early looks get small shares and
  catch only collapses, which is all an early look can catch; their use is to stop the
  cases that are clearly fine. (Shares proportional to n_k itself left about half the
  level to the last look and cost the cap-40 collapse scenario 3 points of detection.)
- **It decides on the worker.** Each decision needs the case's baseline counts, its own
  attempts so far and the number of cases compared, nothing from other cases.

Pure functions over plain values; scipy loads on the first Boschloo test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from statistics import NormalDist

from .significance import boschloo_regression_p

__all__ = [
    "FIRST_LOOKS",
    "AdaptiveDecision",
    "AdaptiveDesign",
    "AdaptiveStop",
    "adaptive_design",
    "case_level",
    "decide_look",
    "first_stop",
    "sequential_p",
]

FIRST_LOOKS = (3, 5, 10, 20, 40)
"""Planned looks, in graded attempts, before the cap; beyond 40 each look doubles."""
# k/n arithmetic: 0.9 - 0.7 == 0.19999999999999996 must still count as a 20 pp drop.
_EPS = 1e-9
# "No regression" when, at the candidate's one-sided 95% lower confidence bound, a later look
# would find a regression with probability under 5%. At 90% / 10% solid cases stopped at 5
# instead of 10 repeats with a cap of 40, but a 0.95 -> 0.5 collapse among 50 cases was
# caught in 92% of runs instead of the 95% that fixed 40 repeats get (benchmarks/README.md).
_FUTILITY_CONFIDENCE = 0.95
_FUTILITY_POWER = 0.05
# Look k's share of the level is n_k ** _SHARE_POWER over the sum of them.
_SHARE_POWER = 2


class AdaptiveStop(StrEnum):
    """Why a case stopped getting repeats."""

    REGRESSED = "regressed"
    NO_REGRESSION = "no regression"
    CAP = "cap"


@dataclass(frozen=True, slots=True)
class AdaptiveDesign:
    """The looks of a case with ``cap`` repeats and each look's share of the case's level."""

    looks: tuple[int, ...]
    shares: tuple[float, ...]

    @property
    def cap(self) -> int:
        return self.looks[-1]


@dataclass(frozen=True, slots=True)
class AdaptiveDecision:
    """What a look decided: stop (and why) or run the next look's repeats."""

    stop: AdaptiveStop | None
    attempts: int
    """Graded attempts the decision saw."""
    p_value: float | None = None
    """This look's Boschloo p (None when the look was not tested)."""

    @property
    def reason(self) -> str:
        if self.stop is None:
            return f"adaptive: undecided after {self.attempts} repeats"
        if self.stop is AdaptiveStop.CAP:
            return f"adaptive: reached the cap of {self.attempts} repeats undecided"
        return f"adaptive: decided after {self.attempts} repeats ({self.stop})"


@lru_cache(maxsize=256)
def adaptive_design(cap: int) -> AdaptiveDesign:
    """Looks at 3, 5, 10, 20, 40, 80, ... below ``cap``, then the cap (docs/statistics.md §6.1).

    Look k's share of the case's level is n_k**2 over the sum of the squares (§6.2).
    """
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    looks: list[int] = []
    size = FIRST_LOOKS[0]
    index = 0
    while size < cap:
        looks.append(size)
        index += 1
        size = FIRST_LOOKS[index] if index < len(FIRST_LOOKS) else size * 2
    looks.append(cap)
    total = sum(n**_SHARE_POWER for n in looks)
    return AdaptiveDesign(looks=tuple(looks), shares=tuple(n**_SHARE_POWER / total for n in looks))


def case_level(gate_level: float, cases: int) -> float:
    """The level a case's looks share: Bonferroni over the cases compared (§6.2).

    Holm at the gate's level rejects every case Bonferroni does, so a case stopped as
    regressed on the worker is one the gate FAILs at the end (with as many cases or fewer).
    """
    return gate_level / max(1, cases)


def sequential_p(
    baseline_passed: int, baseline_attempts: int, outcomes: Sequence[bool], design: AdaptiveDesign
) -> float:
    """min over the looks reached of p_k / w_k: a valid p-value of the whole sequence (§6.4).

    A count that is not a planned look (infra errors cut the case short) is tested as the
    next look, with that look's share; it is a look at a time the outcomes did not choose.
    """
    best = 1.0
    for size, share in _looks_reached(len(outcomes), design):
        passed = sum(1 for outcome in outcomes[:size] if outcome)
        p = boschloo_regression_p(baseline_passed, baseline_attempts, passed, size)
        best = min(best, p / share)
    return min(1.0, best)


def _looks_reached(attempts: int, design: AdaptiveDesign) -> list[tuple[int, float]]:
    looks = list(zip(design.looks, design.shares, strict=True))
    reached = [(n, w) for n, w in looks if n <= attempts]
    following = [w for n, w in looks if n > attempts]
    if attempts and following and (not reached or reached[-1][0] < attempts):
        reached.append((attempts, following[0]))
    return reached


def decide_look(
    baseline_passed: int,
    baseline_attempts: int,
    outcomes: Sequence[bool],
    design: AdaptiveDesign,
    level: float,
    threshold: float,
) -> AdaptiveDecision:
    """The decision after ``outcomes`` (the case's graded attempts, in order; §6.3).

    ``level`` is the case's (``case_level``); ``threshold`` the per-case gate's practical
    drop. Between looks nothing is decided: the case runs on to the next look.
    """
    attempts = len(outcomes)
    if attempts not in design.looks or baseline_attempts == 0:
        return AdaptiveDecision(AdaptiveStop.CAP if attempts >= design.cap else None, attempts)
    look = design.looks.index(attempts)
    passed = sum(1 for outcome in outcomes if outcome)
    p = boschloo_regression_p(baseline_passed, baseline_attempts, passed, attempts)
    dropped = baseline_passed / baseline_attempts - passed / attempts >= threshold - _EPS
    if dropped and p <= design.shares[look] * level:
        return AdaptiveDecision(AdaptiveStop.REGRESSED, attempts, p)
    if attempts >= design.cap:
        return AdaptiveDecision(AdaptiveStop.CAP, attempts, p)
    later = _boundaries(baseline_passed, baseline_attempts, design, look, level, threshold)
    rate = _lower_bound(passed, attempts, _FUTILITY_CONFIDENCE)
    if _conditional_power(passed, attempts, later, rate) < _FUTILITY_POWER:
        return AdaptiveDecision(AdaptiveStop.NO_REGRESSION, attempts, p)
    return AdaptiveDecision(None, attempts, p)


def first_stop(
    baseline_passed: int,
    baseline_attempts: int,
    outcomes: Sequence[bool],
    design: AdaptiveDesign,
    level: float,
    threshold: float,
) -> AdaptiveDecision:
    """The first decision that stopped the case along ``outcomes`` (as the run took them).

    ``stop`` is None when the outcomes ended undecided before the cap (infrastructure
    errors took the rest of its repeats, or the run was cut short).
    """
    for attempts in range(len(outcomes) + 1):
        decision = decide_look(
            baseline_passed, baseline_attempts, outcomes[:attempts], design, level, threshold
        )
        if decision.stop is not None:
            return decision
    return AdaptiveDecision(None, len(outcomes))


def _boundaries(
    baseline_passed: int,
    baseline_attempts: int,
    design: AdaptiveDesign,
    look: int,
    level: float,
    threshold: float,
) -> list[tuple[int, int]]:
    """(look size, most passes that still FAIL there) for each look after ``look``; -1: none do."""
    return [
        (
            size,
            _most_passes_rejected(
                baseline_passed, baseline_attempts, size, share * level, threshold
            ),
        )
        for size, share in zip(design.looks[look + 1 :], design.shares[look + 1 :], strict=True)
    ]


@lru_cache(maxsize=8192)
def _most_passes_rejected(
    baseline_passed: int, baseline_attempts: int, size: int, level: float, threshold: float
) -> int:
    """Largest candidate count at ``size`` attempts that is both a large and a significant drop.

    Boschloo's p grows with the candidate's count, so the rejected counts are 0..answer.
    """
    rate = baseline_passed / baseline_attempts
    high = min(size, math.floor(size * (rate - threshold) + _EPS))
    low = 0
    if high < 0 or boschloo_regression_p(baseline_passed, baseline_attempts, 0, size) > level:
        return -1
    while low < high:  # invariant: low is rejected
        middle = (low + high + 1) // 2
        if boschloo_regression_p(baseline_passed, baseline_attempts, middle, size) <= level:
            low = middle
        else:
            high = middle - 1
    return low


def _lower_bound(passed: int, attempts: int, confidence: float) -> float:
    """One-sided Wilson lower confidence bound of the candidate's pass rate."""
    z = NormalDist().inv_cdf(confidence)
    rate = passed / attempts
    centre = (rate + z * z / (2 * attempts)) / (1 + z * z / attempts)
    half = (
        z
        / (1 + z * z / attempts)
        * math.sqrt(rate * (1 - rate) / attempts + z * z / (4 * attempts * attempts))
    )
    return max(0.0, centre - half)


def _conditional_power(
    passed: int, attempts: int, later: Sequence[tuple[int, int]], rate: float
) -> float:
    """P(some later look's count is at or below its boundary | counts so far, rate ``rate``)."""
    counts = {passed: 1.0}
    found = 0.0
    size = attempts
    for look_size, boundary in later:
        counts = _add_attempts(counts, look_size - size, rate)
        size = look_size
        found += sum(mass for count, mass in counts.items() if count <= boundary)
        counts = {count: mass for count, mass in counts.items() if count > boundary}
    return found


def _add_attempts(counts: dict[int, float], more: int, rate: float) -> dict[int, float]:
    step = [math.comb(more, k) * rate**k * (1 - rate) ** (more - k) for k in range(more + 1)]
    out: dict[int, float] = {}
    for count, mass in counts.items():
        for k, chance in enumerate(step):
            out[count + k] = out.get(count + k, 0.0) + mass * chance
    return out
