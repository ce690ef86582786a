"""Adaptive repeats (issue 16.5, docs/statistics.md §6): the pure decision and its gate.

Counts only, from seeded simulations: a clear regression stops early, an unchanged case
stops early without one, and declaring regressions never exceeds the level it was given.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pytest_nodeval.gate import (
    AdaptiveStop,
    CaseSample,
    GateName,
    GatePolicy,
    Verdict,
    adaptive_design,
    case_level,
    compare,
    decide_look,
    sequential_p,
)
from pytest_nodeval.stats.adaptive import first_stop
from pytest_nodeval.stats.significance import boschloo_regression_p

POLICY = GatePolicy()
DROP = POLICY.fail_on_scenario_drop


def take(
    baseline: tuple[int, int], draws: list[bool], cap: int, level: float, threshold: float = DROP
):
    """Run one case as the plugin does: ask before every attempt; return (taken, decision)."""
    design = adaptive_design(cap)
    taken: list[bool] = []
    while True:
        decision = decide_look(*baseline, taken, design, level, threshold)
        if decision.stop is not None:
            return taken, decision
        taken.append(draws[len(taken)])


def test_looks_run_to_the_cap_and_their_shares_spend_the_whole_level() -> None:
    assert adaptive_design(10).looks == (3, 5, 10)
    assert adaptive_design(40).looks == (3, 5, 10, 20, 40)
    assert adaptive_design(100).looks == (3, 5, 10, 20, 40, 80, 100)
    assert adaptive_design(7).looks == (3, 5, 7)
    assert adaptive_design(3).looks == (3,) and adaptive_design(1).looks == (1,)
    for cap in (3, 7, 10, 40, 100):
        shares = adaptive_design(cap).shares
        assert sum(shares) == pytest.approx(1.0)
        assert list(shares) == sorted(shares)  # later looks keep more of the level
    with pytest.raises(ValueError, match="cap must be >= 1"):
        adaptive_design(0)


def test_a_clear_regression_stops_early_as_regressed() -> None:
    level = case_level(POLICY.level(GateName.SCENARIO_REGRESSION), 1)
    taken, decision = take((40, 40), [False] * 40, cap=40, level=level)
    assert decision.stop is AdaptiveStop.REGRESSED
    assert len(taken) <= 5
    assert decision.reason == f"adaptive: decided after {len(taken)} repeats (regressed)"


def test_an_unchanged_solid_case_stops_early_without_a_regression() -> None:
    level = case_level(POLICY.level(GateName.SCENARIO_REGRESSION), 50)
    taken, decision = take((40, 40), [True] * 40, cap=40, level=level)
    assert decision.stop is AdaptiveStop.NO_REGRESSION
    assert len(taken) <= 10
    assert decision.reason == f"adaptive: decided after {len(taken)} repeats (no regression)"


def test_a_case_that_stays_unclear_runs_to_its_cap() -> None:
    # 0.95 -> about 0.6: worth looking at every time, never significant at this level.
    draws = [True, False, True, True, False] * 8
    level = case_level(POLICY.level(GateName.SCENARIO_REGRESSION), 50)
    taken, decision = take((38, 40), draws, cap=40, level=level)
    assert (len(taken), decision.stop) == (40, AdaptiveStop.CAP)


def test_no_baseline_attempts_means_no_comparison_and_every_repeat() -> None:
    taken, decision = take((0, 0), [True] * 10, cap=10, level=0.01)
    assert (len(taken), decision.stop) == (10, AdaptiveStop.CAP)


def test_between_looks_nothing_is_decided() -> None:
    design = adaptive_design(10)
    assert decide_look(10, 10, [False] * 4, design, 0.5, DROP).stop is None


def test_sequential_p_is_the_smallest_look_p_over_its_share() -> None:
    design = adaptive_design(10)
    outcomes = [True, False, False, True, False, False, True, False, True, False]
    expected = min(
        boschloo_regression_p(9, 10, sum(outcomes[:n]), n) / share
        for n, share in zip(design.looks, design.shares, strict=True)
    )
    assert sequential_p(9, 10, outcomes, design) == pytest.approx(min(1.0, expected))
    # one look: the design is the fixed one, and so is its p
    assert sequential_p(9, 10, outcomes[:3], adaptive_design(3)) == boschloo_regression_p(
        9, 10, 1, 3
    )
    # a count cut short between looks is tested with the next look's share
    cut = sequential_p(9, 10, outcomes[:7], design)
    assert cut == pytest.approx(
        min(
            1.0,
            min(
                boschloo_regression_p(9, 10, sum(outcomes[:n]), n) / share
                for n, share in (
                    (3, design.shares[0]),
                    (5, design.shares[1]),
                    (7, design.shares[2]),
                )
            ),
        )
    )


def test_first_stop_replays_the_run_decisions() -> None:
    level = case_level(POLICY.level(GateName.SCENARIO_REGRESSION), 50)
    taken, decision = take((40, 40), [True] * 40, cap=40, level=level)
    assert first_stop(40, 40, taken, adaptive_design(40), level, DROP) == decision
    short = first_stop(38, 40, [True, False, True, True], adaptive_design(40), level, DROP)
    assert short.stop is None and short.attempts == 4


@pytest.mark.parametrize("rate", [0.5, 0.8, 0.95])
def test_unchanged_cases_are_declared_regressed_at_most_at_the_level(rate: float) -> None:
    """Seeded A/A: with no practical threshold (significance alone decides) the looks
    together reject no more often than the case's level, the union bound's promise."""
    rng = np.random.default_rng(16)
    level, runs = 0.05, 1500
    regressed = 0
    for _ in range(runs):
        baseline = int((rng.random(20) < rate).sum())
        _, decision = take(
            (baseline, 20), (rng.random(20) < rate).tolist(), cap=20, level=level, threshold=0.0
        )
        regressed += decision.stop is AdaptiveStop.REGRESSED
    assert regressed <= level * runs


def test_unchanged_adaptive_runs_fail_at_most_one_percent_through_compare() -> None:
    """Seeded A/A of whole runs through compare(), every gate on: FAILs counted, not timed."""
    rng = np.random.default_rng(5)
    rates = np.concatenate([rng.uniform(0.95, 1.0, 12), rng.uniform(0.5, 0.95, 8)])
    level = case_level(POLICY.level(GateName.SCENARIO_REGRESSION), len(rates))
    runs, failed, attempts = 300, 0, 0
    for _ in range(runs):
        baseline, current = [], []
        for j, rate in enumerate(rates):
            base = CaseSample(f"c{j}", tuple((rng.random(10) < rate).tolist()))
            taken, decision = take(
                (base.passed, base.attempts), (rng.random(10) < rate).tolist(), 10, level
            )
            baseline.append(base)
            current.append(
                CaseSample(
                    f"c{j}",
                    tuple(taken),
                    adaptive_cap=10,
                    adaptive_decided=decision.stop is not AdaptiveStop.CAP,
                )
            )
            attempts += len(taken)
        failed += compare(baseline, current, POLICY).verdict is Verdict.FAIL
    assert failed <= 0.01 * runs
    assert attempts <= 0.5 * runs * len(rates) * 10  # and it took at most half the attempts


def test_compare_tests_an_adaptive_case_with_its_sequential_p() -> None:
    outcomes = (False,) * 5
    baseline = [CaseSample("a", (True,) * 40)]
    fixed = compare(baseline, [CaseSample("a", outcomes)], POLICY).cases[0].pass_rate
    adaptive = (
        compare(
            baseline, [CaseSample("a", outcomes, adaptive_cap=40, adaptive_decided=True)], POLICY
        )
        .cases[0]
        .pass_rate
    )
    assert fixed is not None and adaptive is not None
    assert fixed.p_value == boschloo_regression_p(40, 40, 0, 5)
    assert adaptive.p_value == sequential_p(40, 40, outcomes, adaptive_design(40))
    assert adaptive.p_value > fixed.p_value  # the looks' spending costs level
    assert adaptive.verdict is Verdict.FAIL


def test_a_decided_adaptive_case_is_not_inconclusive_an_undecided_one_is() -> None:
    baseline = [CaseSample("a", (True,) * 10)]
    dropped = (True, False, True)  # -33 pp, far from significant among 1 case at 3 attempts
    decided = compare(
        baseline, [CaseSample("a", dropped, adaptive_cap=10, adaptive_decided=True)], POLICY
    )
    undecided = compare(baseline, [CaseSample("a", dropped, adaptive_cap=10)], POLICY)
    assert decided.cases[0].pass_rate.verdict is Verdict.OK
    assert undecided.cases[0].pass_rate.verdict is Verdict.INCONCLUSIVE


def test_the_report_page_and_terminal_say_how_many_repeats_a_case_took() -> None:
    from pytest_nodeval.report.html_data import case_row
    from pytest_nodeval.report.models import AttemptRecord, CaseAdaptive, CaseReport
    from pytest_nodeval.report.terminal import case_lines
    from pytest_nodeval.stats.run_stats import case_stats

    attempts = [
        AttemptRecord(
            nodeid=f"n{r}", case_id="c", repeat=r, outcome="passed" if r <= 3 else "skipped"
        )
        for r in range(1, 11)
    ]
    adaptive = CaseAdaptive(
        cap=10,
        repeats=3,
        skipped=7,
        stop="no regression",
        reason="adaptive: decided after 3 repeats (no regression)",
    )
    case = CaseReport(
        id="c",
        verdict="passed",
        stats=case_stats([True] * 3, [], [0] * 3),
        attempts=attempts,
        adaptive=adaptive,
    )
    assert (
        case_row(0, case, None, [], "b", [None] * 10)["adaptive"]
        == "3 of 10 repeats, no regression"
    )
    assert (
        case_row(0, case.model_copy(update={"adaptive": None}), None, [], "b", [None] * 10)[
            "adaptive"
        ]
        is None
    )
    from pytest_nodeval.report.models import Totals

    report = SimpleNamespace(cases=[case], totals=Totals())
    assert case_lines(report)[1].endswith("passed (adaptive: 3 of 10 repeats, no regression)")  # type: ignore[arg-type]
