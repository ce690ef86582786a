"""compare(), plan(), format_diff_table(): docs/statistics.md §8's examples and the gate rules."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from statistics import fmean
from typing import Any

import numpy as np
import pytest

from pytest_nodeval.gate import (
    ALPHA_SHARES,
    CaseSample,
    Diff,
    GateName,
    GatePolicy,
    GateResult,
    Movement,
    Verdict,
    compare,
    format_diff_table,
    plan,
)

POLICY = GatePolicy()
# docs/statistics.md §8.2 also tests the suite at one-sided 0.05: the suite gate's half of a
# 0.10 budget (the default budget is 0.01, docs/statistics.md §4.1).
SPEC_LEVELS = GatePolicy(alpha=0.10)
# docs/statistics.md §8.2: passes out of 10 per scenario, baseline and candidate.
BASELINE_PASSES = [10, 10, 10, 9, 9, 8, 10, 7, 10, 6, 9, 10]
CURRENT_PASSES = [10, 10, 9, 9, 6, 8, 10, 5, 10, 4, 9, 7]


def sample(
    case_id: str,
    passed: int,
    attempts: int = 10,
    latencies_ms: tuple[float, ...] = (),
    tokens: tuple[int, ...] = (),
) -> CaseSample:
    outcomes = (True,) * passed + (False,) * (attempts - passed)
    return CaseSample(case_id, outcomes, latencies_ms, tokens)


def suite(passes: list[int], attempts: int = 10) -> list[CaseSample]:
    return [sample(f"s{j + 1:02d}", c, attempts) for j, c in enumerate(passes)]


def gate(diff: Diff, name: GateName) -> GateResult:
    return next(result for result in diff.gates if result.name is name)


# --- worked examples (docs/statistics.md §8) -----------------------------------------------


def test_one_scenario_9_of_10_to_6_of_10_is_inconclusive() -> None:
    diff = compare([sample("s", 9)], [sample("s", 6)], POLICY)
    change = diff.cases[0].pass_rate
    assert change is not None
    assert change.p_value == pytest.approx(0.0755, abs=5e-5)
    assert (change.ci_low, change.ci_high) == pytest.approx((-0.599, 0.082), abs=5e-4)
    assert change.verdict is Verdict.INCONCLUSIVE
    assert gate(diff, GateName.SCENARIO_REGRESSION).verdict is Verdict.INCONCLUSIVE
    assert gate(diff, GateName.SCENARIO_REGRESSION).case_ids == ["s"]
    # One scenario cannot prove a suite drop either: re-run, do not fail and do not pass.
    assert gate(diff, GateName.SUITE_PASS_RATE).verdict is Verdict.INCONCLUSIVE
    assert diff.verdict is Verdict.INCONCLUSIVE
    assert diff.breached == []


@pytest.mark.parametrize(
    ("alpha", "verdict"),
    [(0.04, Verdict.FAIL), (0.02, Verdict.INCONCLUSIVE), (0.01, Verdict.INCONCLUSIVE)],
)
def test_pooled_18_of_20_to_11_of_20_fails_only_within_the_scenario_gates_share(
    alpha: float, verdict: Verdict
) -> None:
    # p = 0.0084 against the scenario gate's quarter of alpha: 0.01, 0.005, 0.0025.
    diff = compare([sample("s", 18, 20)], [sample("s", 11, 20)], GatePolicy(alpha=alpha))
    change = diff.cases[0].pass_rate
    assert change is not None
    assert change.p_value == pytest.approx(0.0084, abs=5e-5)
    assert (change.ci_low, change.ci_high) == pytest.approx((-0.570, -0.072), abs=5e-4)
    assert change.verdict is verdict
    assert gate(diff, GateName.SCENARIO_REGRESSION).verdict is verdict


def test_twelve_scenario_suite_fails_the_suite_gate_only_at_a_ten_percent_budget() -> None:
    diff = compare(suite(BASELINE_PASSES), suite(CURRENT_PASSES), SPEC_LEVELS)
    numbers = gate(diff, GateName.SUITE_PASS_RATE).numbers
    assert numbers["delta"] == pytest.approx(-0.0917, abs=5e-5)
    assert numbers["standard_error"] == pytest.approx(0.0358, abs=5e-5)
    assert numbers["upper_bound"] == pytest.approx(-0.0274, abs=5e-5)
    assert numbers["lower_bound"] == pytest.approx(-0.1560, abs=5e-5)
    # The stratified permutation, enumerated exactly (docs/statistics.md §8.2); the sign flip
    # over cases gave 1/32, all five moved cases having dropped.
    assert numbers["p_value"] == pytest.approx(0.015009, abs=5e-7)
    # (z_0.95 + z_0.80) sqrt(sum_j pbar_j (1 - pbar_j) 2/10) / 12, the sum being 0.2385.
    assert numbers["minimum_detectable_drop"] == pytest.approx(0.1012, abs=5e-5)
    assert diff.suite.p_value_method == "stratified-permutation"
    assert diff.suite.correlation == pytest.approx(0.831, abs=5e-4)
    assert gate(diff, GateName.SUITE_PASS_RATE).verdict is Verdict.FAIL
    assert diff.breached == [GateName.SUITE_PASS_RATE]
    # At the default budget (suite level 0.005) the same p = 0.015 is only INCONCLUSIVE.
    default = gate(
        compare(suite(BASELINE_PASSES), suite(CURRENT_PASSES), POLICY), GateName.SUITE_PASS_RATE
    )
    assert default.verdict is Verdict.INCONCLUSIVE


def test_twelve_scenario_suite_has_four_inconclusive_scenarios_and_no_failure() -> None:
    from statsmodels.stats.multitest import multipletests  # type: ignore[import-untyped]

    diff = compare(suite(BASELINE_PASSES), suite(CURRENT_PASSES), POLICY)
    scenario_gate = gate(diff, GateName.SCENARIO_REGRESSION)
    assert scenario_gate.verdict is Verdict.INCONCLUSIVE
    assert sorted(scenario_gate.case_ids) == ["s05", "s08", "s10", "s12"]
    changes = [case.pass_rate for case in diff.cases if case.pass_rate]
    raw = [change.p_value for change in changes]
    holm = multipletests(raw, method="holm")[1]
    assert [change.p_value_adjusted for change in changes] == pytest.approx(list(holm))


def test_the_suite_p_value_is_the_stratified_permutation_test_at_any_size() -> None:
    # 36 cases: docs/statistics.md §8.2's suite twice, then once with the runs swapped (five rises).
    base_passes = BASELINE_PASSES * 2 + CURRENT_PASSES
    cur_passes = CURRENT_PASSES * 2 + BASELINE_PASSES
    diff = compare(suite(base_passes), suite(cur_passes), POLICY)
    # Brute force from the definition: each case's 20 attempts dealt to the runs at random.
    rng = np.random.default_rng(36)
    base, cur = np.array(base_passes), np.array(cur_passes)
    passes = base + cur
    varied = (passes > 0) & (passes < 20)
    pooled = passes[varied] / 20
    sd = np.sqrt(pooled * (1 - pooled) * (2 / 10))
    draws = rng.hypergeometric(
        passes[varied], 20 - passes[varied], 10, (200_000, int(varied.sum()))
    )
    simulated = ((2 * draws - passes[varied]) / 10 / sd).sum(axis=1)
    observed = ((cur - base)[varied] / 10 / sd).sum()
    expected = float(np.mean(simulated <= observed + 1e-9))
    assert diff.suite.p_value_method == "stratified-permutation"
    assert diff.suite.p_value == pytest.approx(expected, abs=5 * np.sqrt(expected / 200_000))


# --- gate rules ------------------------------------------------------------------------


def test_single_attempt_pass_to_fail_flip_in_replay_is_a_regression() -> None:
    baseline = [sample(f"c{j}", 1, 1) for j in range(50)]
    current = [sample("c0", 0, 1), *baseline[1:]]
    diff = compare(
        baseline, current, POLICY, baseline_mode="deterministic", current_mode="deterministic"
    )
    flipped = diff.cases[0].pass_rate
    assert flipped is not None
    assert flipped.verdict is Verdict.FAIL
    assert flipped.movement is Movement.DOWN
    assert flipped.p_value is None  # decided by the replay rule, not by a test
    scenario_gate = gate(diff, GateName.SCENARIO_REGRESSION)
    assert scenario_gate.case_ids == ["c0"]
    assert scenario_gate.numbers["failed"] == 1
    # 1 of 50 is a 2 pp suite drop: under the 5 pp threshold.
    assert gate(diff, GateName.SUITE_PASS_RATE).verdict is Verdict.OK
    assert diff.breached == [GateName.SCENARIO_REGRESSION]


def test_single_attempt_fail_to_pass_flip_is_an_improvement() -> None:
    diff = compare([sample("c", 0, 1)], [sample("c", 1, 1)], POLICY)
    change = diff.cases[0].pass_rate
    assert change is not None
    assert (change.movement, change.verdict) == (Movement.UP, Verdict.OK)
    assert diff.verdict is Verdict.OK


def test_a_flip_among_repeats_is_tested_not_failed() -> None:
    # One failure in 10 is noise at R = 10, and not a 20 pp drop either.
    diff = compare([sample("c", 10)], [sample("c", 9)], POLICY)
    change = diff.cases[0].pass_rate
    assert change is not None
    assert change.verdict is Verdict.OK
    assert change.p_value == pytest.approx(0.4119, abs=5e-5)


def latencies(start: float, attempts: int, step: float = 10.0) -> tuple[float, ...]:
    return tuple(start + step * i for i in range(attempts))


def test_significant_latency_increase_with_too_few_attempts_only_warns() -> None:
    # 3 vs 3 fully separated: exact Mann-Whitney p = 1/20 = 0.05 names the case (BH <= 0.10).
    baseline = [sample("c", 3, 3, latencies(1000, 3))]
    current = [sample("c", 3, 3, latencies(2500, 3))]
    diff = compare(baseline, current, POLICY)
    change = diff.cases[0].latency
    assert change is not None and change.p_value == pytest.approx(0.05)
    latency_gate = gate(diff, GateName.LATENCY_P95)
    assert latency_gate.verdict is Verdict.WARN
    assert latency_gate.case_ids == ["c"]
    assert "need 100 latencies/run, have 3" in latency_gate.reason
    assert diff.breached == []


def test_a_single_latency_per_run_cannot_be_tested_and_only_warns() -> None:
    diff = compare([sample("c", 1, 1, (1000.0,))], [sample("c", 1, 1, (3000.0,))], POLICY)
    change = diff.cases[0].latency
    assert change is not None
    assert (change.p_value, change.verdict) == (None, Verdict.OK)  # no per-case test
    assert gate(diff, GateName.LATENCY_P95).verdict is Verdict.WARN  # 1 latency, not 100


def test_large_significant_latency_increase_fails_with_enough_attempts() -> None:
    baseline = [sample("c", 12, 12, latencies(1000, 12))]
    current = [sample("c", 12, 12, latencies(2000, 12))]
    diff = compare(baseline, current, GatePolicy(latency_min_attempts=12))
    change = diff.cases[0].latency
    assert change is not None
    assert change.p95_ratio == pytest.approx(1.9, abs=0.05)
    assert change.p95_delta_ms == pytest.approx(1000.0)
    assert change.p50_delta_ms == pytest.approx(1000.0)
    assert change.verdict is Verdict.WARN  # the case is named; the pooled p95 decides
    assert gate(diff, GateName.LATENCY_P95).verdict is Verdict.FAIL
    assert diff.breached == [GateName.LATENCY_P95]
    # With the default 100 latencies per run, the same evidence only warns.
    assert gate(compare(baseline, current, POLICY), GateName.LATENCY_P95).verdict is Verdict.WARN


def test_one_slow_case_of_two_is_named_but_cannot_prove_a_suite_slowdown() -> None:
    # The slow case alone has exact p = 0.05; BH over two cases gives 0.10 <= fdr_level: named.
    # The pooled bootstrap draws only the unchanged case a quarter of the time: its lower
    # bound is about 1, so the suite-wide slowdown is not significant.
    baseline = [sample("slow", 3, 3, latencies(1000, 3)), sample("same", 3, 3, latencies(900, 3))]
    current = [sample("slow", 3, 3, latencies(2500, 3)), sample("same", 3, 3, latencies(900, 3))]
    diff = compare(baseline, current, GatePolicy(latency_min_attempts=3))
    slow = diff.cases[1].latency
    assert slow is not None and diff.cases[1].case_id == "slow"
    assert slow.p_value_adjusted == pytest.approx(0.10)
    assert slow.verdict is Verdict.WARN
    result = gate(diff, GateName.LATENCY_P95)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.numbers["lower_bound"] is not None and result.numbers["lower_bound"] <= 1.0
    assert result.case_ids == ["slow"]


@pytest.mark.parametrize("slower_ms", [300.0, 1000.0])
def test_latency_increase_below_either_threshold_is_ok(slower_ms: float) -> None:
    # +300 ms is a 30% rise but under 500 ms; +1000 ms on a 9 s case is only ~11%.
    start = 1000.0 if slower_ms < 500 else 9000.0
    baseline = [sample("c", 12, 12, latencies(start, 12))]
    current = [sample("c", 12, 12, latencies(start + slower_ms, 12))]
    assert gate(compare(baseline, current, POLICY), GateName.LATENCY_P95).verdict is Verdict.OK


def realistic_run(seed: int, token_scale: float = 1.0) -> list[CaseSample]:
    rng = np.random.default_rng(seed)
    return [
        CaseSample(
            f"case-{j:02d}",
            tuple(bool(x) for x in rng.random(10) < 0.9),
            tuple(float(x) for x in 3000 * rng.lognormal(0, 0.3, 10)),
            tuple(int(token_scale * x) for x in rng.integers(2000, 3000, 10)),
        )
        for j in range(20)
    ]


def test_an_unchanged_rerun_passes_every_gate() -> None:
    run = realistic_run(seed=1)
    diff = compare(run, run, POLICY)
    assert [result.name for result in diff.gates] == list(GateName)
    assert {result.verdict for result in diff.gates} == {Verdict.OK}
    assert [result.case_ids for result in diff.gates] == [[], [], [], [], []]
    assert diff.breached == []
    assert all(case.pass_rate and case.pass_rate.movement is Movement.SAME for case in diff.cases)
    assert (diff.new_cases, diff.missing_cases) == ([], [])


def test_token_growth_fails_only_when_large_and_significant() -> None:
    baseline = realistic_run(seed=1)
    grown = [
        CaseSample(s.case_id, s.outcomes, s.latencies_ms, tuple(int(t * 1.3) for t in s.tokens))
        for s in baseline
    ]
    slightly = [
        CaseSample(s.case_id, s.outcomes, s.latencies_ms, tuple(int(t * 1.05) for t in s.tokens))
        for s in baseline
    ]
    failed = gate(compare(baseline, grown, POLICY), GateName.TOKENS)
    assert failed.verdict is Verdict.FAIL
    assert failed.numbers["ratio"] == pytest.approx(1.3, abs=1e-3)
    assert len(failed.case_ids) == 20
    assert gate(compare(baseline, slightly, POLICY), GateName.TOKENS).verdict is Verdict.OK


def test_token_growth_from_noisy_cases_is_inconclusive() -> None:
    baseline = [sample("a", 3, 3, tokens=(100, 5000, 200)), sample("b", 3, 3, tokens=(1000,) * 3)]
    current = [sample("a", 3, 3, tokens=(100, 9000, 200)), sample("b", 3, 3, tokens=(1000,) * 3)]
    result = gate(compare(baseline, current, POLICY), GateName.TOKENS)
    assert result.numbers["ratio"] == pytest.approx((9300 / 3 + 1000) / (5300 / 3 + 1000))
    assert result.verdict is Verdict.INCONCLUSIVE


def test_the_token_bootstrap_is_reproducible_and_follows_the_seed() -> None:
    baseline, current = realistic_run(seed=1), realistic_run(seed=2, token_scale=1.3)
    first = gate(compare(baseline, current, POLICY), GateName.TOKENS).numbers["lower_bound"]
    again = gate(compare(baseline, current, POLICY), GateName.TOKENS).numbers["lower_bound"]
    other = gate(compare(baseline, current, GatePolicy(bootstrap_seed=7)), GateName.TOKENS)
    assert first == again
    assert other.numbers["lower_bound"] != first


def priced(
    run: list[CaseSample], scale: float = 1.0, noise_seed: int | None = None
) -> list[CaseSample]:
    """The run with a cost per attempt: its tokens at $3 per million, scaled, with noise if
    seeded."""
    rng = np.random.default_rng(noise_seed)
    return [
        dataclasses.replace(
            s,
            costs=tuple(
                scale * t * 3e-6 * (rng.lognormal(0, 0.3) if noise_seed is not None else 1.0)
                for t in s.tokens
            ),
        )
        for s in run
    ]


def test_cost_growth_fails_only_when_large_and_significant() -> None:
    baseline = priced(realistic_run(seed=1), noise_seed=3)
    dearer = priced(realistic_run(seed=1), 1.3, noise_seed=4)
    noise = priced(realistic_run(seed=1), 1.0, noise_seed=5)
    failed = gate(compare(baseline, dearer, POLICY), GateName.COST)
    assert failed.verdict is Verdict.FAIL
    assert failed.numbers["ratio"] is not None and 1.2 < failed.numbers["ratio"] < 1.4
    assert failed.numbers["level"] == pytest.approx(0.01 * ALPHA_SHARES[GateName.COST])
    assert failed.numbers["baseline_cost_per_attempt_usd"] == pytest.approx(
        sum(fmean(s.costs) for s in baseline) / len(baseline)
    )
    unchanged = gate(compare(baseline, noise, POLICY), GateName.COST)
    assert unchanged.verdict is Verdict.OK and "cost per attempt" in unchanged.reason
    # The tokens did not move: the token gate says nothing about money.
    assert gate(compare(baseline, dearer, POLICY), GateName.TOKENS).verdict is Verdict.OK


def test_cost_growth_from_one_noisy_case_is_inconclusive() -> None:
    baseline = [
        dataclasses.replace(sample("a", 3, 3), costs=(0.01, 0.50, 0.02)),
        dataclasses.replace(sample("b", 3, 3), costs=(0.10,) * 3),
    ]
    current = [dataclasses.replace(sample("a", 3, 3), costs=(0.01, 0.90, 0.02)), baseline[1]]
    result = gate(compare(baseline, current, POLICY), GateName.COST)
    assert result.numbers["ratio"] == pytest.approx((0.93 / 3 + 0.1) / (0.53 / 3 + 0.1))
    assert result.verdict is Verdict.INCONCLUSIVE
    assert compare(baseline, current, POLICY).cases[0].cost is not None


def test_the_cost_gate_is_a_plain_threshold_between_replays() -> None:
    baseline = priced(realistic_run(seed=1))
    replay = {"baseline_mode": "deterministic", "current_mode": "deterministic"}
    assert (
        gate(
            compare(baseline, priced(realistic_run(seed=1), 1.2), POLICY, **replay), GateName.COST
        ).verdict
        is Verdict.FAIL
    )
    assert (
        gate(
            compare(baseline, priced(realistic_run(seed=1), 1.1), POLICY, **replay), GateName.COST
        ).verdict
        is Verdict.OK
    )


def test_a_free_baseline_only_warns_about_a_run_that_costs() -> None:
    free = priced(realistic_run(seed=1), 0.0)  # a mock provider's calls cost nothing
    result = gate(compare(free, priced(realistic_run(seed=1)), POLICY), GateName.COST)
    assert (result.verdict, result.reason) == (Verdict.WARN, "baseline recorded no cost")
    # A baseline written before costs existed has none: nothing to compare, nothing to say.
    older = gate(
        compare(realistic_run(seed=1), priced(realistic_run(seed=1)), POLICY), GateName.COST
    )
    assert (older.verdict, older.reason) == (Verdict.OK, "no cost figures in both runs")


def test_new_and_missing_cases_are_listed_and_left_out_of_the_pairing() -> None:
    baseline = [sample("kept", 9), sample("gone-b", 10), sample("gone-a", 0)]
    current = [sample("kept", 9), sample("new", 0)]
    diff = compare(baseline, current, POLICY)
    assert diff.new_cases == ["new"]
    assert diff.missing_cases == ["gone-a", "gone-b"]
    assert [case.case_id for case in diff.cases] == ["kept"]
    assert diff.suite.scenarios == 1
    assert diff.verdict is Verdict.OK


def test_a_case_without_graded_attempts_is_not_in_that_run() -> None:
    # Issue 29.3: a case with 0 attempts is listed as new (or missing), never paired.
    diff = compare([sample("c", 0, 0)], [sample("c", 5)], POLICY)
    assert diff.cases == [] and diff.new_cases == ["c"] and diff.missing_cases == []
    assert diff.suite.scenarios == 0
    assert gate(diff, GateName.SUITE_PASS_RATE).verdict is Verdict.OK


def test_a_significant_drop_under_the_threshold_is_ok() -> None:
    # Every scenario lost exactly 1 of 10: a certain 10 pp drop; with a 20 pp bar it is OK.
    diff = compare(suite([10] * 40), suite([9] * 40), GatePolicy(fail_on_score_drop=0.2))
    result = gate(diff, GateName.SUITE_PASS_RATE)
    assert result.verdict is Verdict.OK
    assert "significant but under the 20 pp threshold" in result.reason
    failed = compare(suite([10] * 40), suite([9] * 40), POLICY)
    assert gate(failed, GateName.SUITE_PASS_RATE).verdict is Verdict.FAIL


@pytest.mark.parametrize(
    ("field", "name"),
    [
        ("fail_on_score_drop", GateName.SUITE_PASS_RATE),
        ("fail_on_scenario_drop", GateName.SCENARIO_REGRESSION),
        ("fail_on_latency_p95_increase", GateName.LATENCY_P95),
        ("fail_on_token_increase", GateName.TOKENS),
        ("fail_on_cost_increase", GateName.COST),
    ],
)
def test_a_zero_threshold_disables_its_gate(field: str, name: GateName) -> None:
    disabled: dict[str, Any] = {field: 0.0}
    policy = dataclasses.replace(POLICY, **disabled)
    diff = compare(suite(BASELINE_PASSES), suite(CURRENT_PASSES), policy)
    assert name not in [result.name for result in diff.gates]
    assert len(diff.gates) == len(GateName) - 1


@pytest.mark.parametrize(
    ("field", "value"),
    [("fail_on_score_drop", 1.5), ("alpha", 0.0), ("fdr_level", 1.0), ("latency_min_attempts", 0)],
)
def test_invalid_policy_values_name_the_field(field: str, value: float) -> None:
    invalid: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=rf"GatePolicy\.{field} must be .*, got {value!r}"):
        dataclasses.replace(POLICY, **invalid)


def test_duplicate_case_ids_are_rejected() -> None:
    with pytest.raises(ValueError, match="'a' appears twice in the current run"):
        compare([sample("a", 1)], [sample("a", 1), sample("a", 2)], POLICY)


def test_diff_round_trips_through_json_with_its_verdicts() -> None:
    diff = compare(realistic_run(seed=1), realistic_run(seed=3), POLICY)
    payload = json.loads(diff.model_dump_json())
    assert next(iter(payload)) == "schema_version"
    assert payload["schema_version"] == "1"
    assert payload["breached"] == [str(name) for name in diff.breached]
    assert payload["verdict"] == str(diff.verdict)
    assert payload["policy"]["bootstrap_seed"] == 0
    assert Diff.model_validate_json(diff.model_dump_json()) == diff


def test_a_deterministic_replay_comparison_imports_neither_scipy_nor_statsmodels() -> None:
    code = (
        "import sys\n"
        "from pytest_nodeval.gate import CaseSample, GatePolicy, compare\n"
        "b = [CaseSample(f'c{j}', (True,) * 2, (1000.0,) * 2, (100,) * 2) for j in range(30)]\n"
        "c = [CaseSample(f'c{j}', (j != 3,) * 2, (2000.0,) * 2, (200,) * 2) for j in range(30)]\n"
        "modes = {'baseline_mode': 'deterministic', 'current_mode': 'deterministic'}\n"
        "assert len(compare(b, c, GatePolicy(), **modes).breached) == 3\n"
        "print(','.join(m for m in ('scipy', 'statsmodels') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


# --- plan ------------------------------------------------------------------------------

# A baseline at 9/10 everywhere has unbiased within-case variance 0.9 * 0.1 * 10/9 = 0.10,
# the E[p(1-p)] behind the MDE table of docs/statistics.md §7.2.
NOISY_BASELINE = [sample(f"s{j}", 9) for j in range(50)]


@pytest.mark.parametrize(
    ("scenarios", "repeats", "mde_pp"),
    [(20, 1, 24.9), (20, 10, 7.9), (50, 3, 9.1), (50, 10, 5.0), (100, 5, 5.0), (100, 20, 2.5)],
)
def test_plan_reproduces_the_mde_table(scenarios: int, repeats: int, mde_pp: float) -> None:
    result = plan(NOISY_BASELINE, repeats, scenarios, target_drop=0.05, alpha=0.05)
    assert result.within_scenario_variance == pytest.approx(0.10)
    assert result.variance_source == "baseline"
    assert result.minimum_detectable_drop * 100 == pytest.approx(mde_pp, abs=0.05)


def test_plan_gives_repeats_and_scenarios_for_a_target_drop() -> None:
    result = plan(NOISY_BASELINE, repeats=10, scenarios=50, target_drop=0.05, alpha=0.05)
    assert result.repeats_needed == 10  # 2 * 0.10 * 2.486^2 / (50 * 0.05^2) = 9.9
    assert result.scenarios_needed == 50  # 2.486^2 * 0.02 / 0.05^2 = 49.4
    assert plan(NOISY_BASELINE, 10, 50, target_drop=0.03, alpha=0.05).repeats_needed == 28
    # At the suite gate's default level, 0.005: (2.576 + 0.842)^2 * 0.2 / (50 * 0.0025) = 18.7
    assert plan(NOISY_BASELINE, 10, 50, target_drop=0.05).repeats_needed == 19


def test_plan_trades_repeats_for_cases() -> None:
    # The test's noise is the attempts': 2 * 0.10 * 3.418^2 / 0.05^2 = 934.6 attempts a side.
    result = plan(NOISY_BASELINE, repeats=10, scenarios=20, target_drop=0.05)
    assert result.repeats_needed == 47
    assert result.scenarios_needed == 94
    assert result.minimum_detectable_drop == pytest.approx(0.1081, abs=5e-5)


def test_plan_falls_back_to_the_spec_variance_when_the_baseline_shows_none() -> None:
    result = plan([sample(f"s{j}", 10) for j in range(50)], 10, 50, target_drop=0.05)
    assert result.variance_source == "default"
    assert result.within_scenario_variance == pytest.approx(0.10)


# --- table -----------------------------------------------------------------------------


def test_table_shows_verdicts_then_regressions_first_within_88_columns() -> None:
    baseline = [*suite(BASELINE_PASSES), sample("a-very-long-case-identifier-that-overflows", 5)]
    current = [*suite(CURRENT_PASSES), sample("a-very-long-case-identifier-that-overflows", 4)]
    baseline.append(sample("only-in-baseline", 3))
    current.append(sample("only-in-current", 3))
    lines = format_diff_table(compare(baseline, current, SPEC_LEVELS))
    assert lines[0] == "nodeval gate: FAIL (breached: suite_pass_rate)"
    assert max(len(line) for line in lines) <= 88
    text = "\n".join(lines)
    for name in GateName:
        assert name in text
    case_rows = [line.split()[0] for line in lines if line.startswith("  s") or "~" in line]
    # Verdict severity first, then the largest drop, then the id.
    assert case_rows == ["s05", "s12", "s08", "s10", "a-very-long-case-iden~", "s03"]
    assert "new cases (1): only-in-current" in text
    assert "missing cases (1): only-in-baseline" in text


def test_table_lists_flagged_latency_cases() -> None:
    baseline = [sample("slow", 12, 12, latencies(1000, 12))]
    current = [sample("slow", 12, 12, latencies(2000, 12))]
    lines = format_diff_table(compare(baseline, current, GatePolicy(latency_min_attempts=12)))
    assert "latency p95 moves:" in lines
    row = next(line for line in lines if line.startswith("  slow"))
    assert "WARN" in row and "+9" in row  # +9x% on the p95, named in the detail
