"""Issue 29.3, 29.4 and 29.6: bad data is refused, the rule corners decide, bootstraps scale.

docs/statistics.md §1.2 (what a CaseSample may hold, cases with no attempt), §3.2 (an empty
current run, a zero-width interval), §3.4-§3.5 (the bootstraps' pilot) and §5 (which pairs of
modes are compared by the replay rules).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_nodeval.errors import NodevalError
from pytest_nodeval.gate import CaseSample, Diff, GateName, GatePolicy, GateResult, Verdict, compare

POLICY = GatePolicy()


def sample(case_id: str, passed: int, attempts: int = 10, **fields: Any) -> CaseSample:
    return CaseSample(case_id, (True,) * passed + (False,) * (attempts - passed), **fields)


def gate(diff: Diff, name: GateName) -> GateResult:
    return next(result for result in diff.gates if result.name is name)


# --- CaseSample refuses data no gate can use (29.3) -----------------------------------------


@pytest.mark.parametrize(
    ("field", "values", "shown"),
    [
        ("latencies_ms", (100.0, math.nan), "latencies_ms[1] is nan"),
        ("latencies_ms", (math.inf,), "latencies_ms[0] is inf"),
        ("latencies_ms", (-5.0,), "latencies_ms[0] is -5.0"),
        ("tokens", (10, math.nan), "tokens[1] is nan"),
        ("tokens", (-1,), "tokens[0] is -1"),
        ("costs", (0.01, -1.0), "costs[1] is -1.0"),
        ("costs", (math.nan,), "costs[0] is nan"),
        ("costs", (True,), "costs[0] is True"),
    ],
)
def test_a_sample_refuses_values_that_are_not_finite_amounts(
    field: str, values: tuple[float, ...], shown: str
) -> None:
    with pytest.raises(ValueError, match=r"case 'refunds': ") as error:
        sample("refunds", 2, **{field: values})
    assert shown in str(error.value) and "expected a finite number >= 0" in str(error.value)


def test_a_sample_refuses_outcomes_that_are_not_booleans() -> None:
    with pytest.raises(ValueError, match=r"case 'c': outcomes\[1\] is 1; expected True"):
        CaseSample("c", (True, 1, False))  # type: ignore[arg-type]


def test_a_sample_refuses_more_latencies_than_outcomes() -> None:
    with pytest.raises(ValueError, match=r"case 'c': 3 latencies_ms for 2 outcomes"):
        sample("c", 2, 2, latencies_ms=(1.0, 2.0, 3.0))


def test_numpy_numbers_are_amounts() -> None:
    ok = sample("c", 1, 1, latencies_ms=(np.float64(3.5),), tokens=(np.int64(7),))
    assert ok.passed == 1


def test_one_negative_cost_can_no_longer_hide_a_cost_rise() -> None:
    # The case: x3 the cost, hidden by one -$1 attempt in the current run.
    baseline = [sample(f"c{j}", 10, costs=(0.10,) * 10) for j in range(20)]
    with pytest.raises(ValueError, match=r"case 'c0': costs\[9\] is -1.0"):
        [sample(f"c{j}", 10, costs=(0.30,) * 9 + (-1.0 if j == 0 else 0.3,)) for j in range(20)]
    current = [sample(f"c{j}", 10, costs=(0.30,) * 10) for j in range(20)]
    assert gate(compare(baseline, current, POLICY), GateName.COST).verdict is Verdict.FAIL


# --- an empty current run is never OK; cases with 0 attempts are missing (29.3) ------------


@pytest.mark.parametrize("current", [[], [sample("a", 0, 0), sample("b", 0, 0)]])
@pytest.mark.parametrize("score_drop", [0.05, 0.0])
def test_a_current_run_that_graded_nothing_fails(
    current: list[CaseSample], score_drop: float
) -> None:
    baseline = [sample("a", 10), sample("b", 9)]
    diff = compare(baseline, current, GatePolicy(fail_on_score_drop=score_drop))
    assert diff.verdict is Verdict.FAIL
    suite = gate(diff, GateName.SUITE_PASS_RATE)
    assert suite.verdict is Verdict.FAIL and "graded no attempt" in suite.reason
    assert diff.missing_cases == ["a", "b"] and diff.cases == []


def test_a_case_with_no_attempt_in_the_current_run_is_missing() -> None:
    diff = compare([sample("a", 10), sample("b", 10)], [sample("a", 10), sample("b", 0, 0)], POLICY)
    assert diff.missing_cases == ["b"]
    assert [case.case_id for case in diff.cases] == ["a"]


# --- rule corners (29.4) --------------------------------------------------------------------

REPLAY = {"baseline_mode": "deterministic", "current_mode": "deterministic"}


def test_a_replay_flip_fails_even_with_the_scenario_threshold_off() -> None:
    baseline = [sample(f"c{j}", 1, 1) for j in range(10)]
    current = [sample("c0", 0, 1), *baseline[1:]]
    diff = compare(baseline, current, GatePolicy(fail_on_scenario_drop=0.0), **REPLAY)
    scenario = gate(diff, GateName.SCENARIO_REGRESSION)
    assert scenario.verdict is Verdict.FAIL and scenario.case_ids == ["c0"]


def test_a_record_baseline_and_a_replay_are_compared_by_the_replay_rules() -> None:
    baseline = [sample(f"c{j}", 1, 1) for j in range(10)]
    current = [sample("c0", 0, 1), *baseline[1:]]
    diff = compare(baseline, current, POLICY, baseline_mode="record", current_mode="deterministic")
    assert diff.deterministic
    assert gate(diff, GateName.SCENARIO_REGRESSION).verdict is Verdict.FAIL
    assert "replay rules" in diff.notes[0]


def test_a_record_current_run_is_a_sample_and_the_note_says_why() -> None:
    baseline = [sample(f"c{j}", 1, 1) for j in range(10)]
    current = [sample("c0", 0, 1), *baseline[1:]]
    diff = compare(baseline, current, POLICY, baseline_mode="deterministic", current_mode="record")
    assert not diff.deterministic
    assert gate(diff, GateName.SCENARIO_REGRESSION).verdict is Verdict.INCONCLUSIVE
    assert "called the live model" in diff.notes[0]


def test_a_zero_width_interval_certifies_nothing() -> None:
    runs = [sample(f"c{j}", 10) for j in range(4)]
    suite = gate(compare(runs, runs, POLICY), GateName.SUITE_PASS_RATE)
    assert suite.verdict is Verdict.OK
    assert "no suite drop of" not in suite.reason and "lower bound" not in suite.reason
    assert "no interval bounds the drop" in suite.reason


# --- a baseline file with bad data is one error naming file, case and field (29.3) ---------


def test_a_baseline_with_a_nan_latency_is_an_error_naming_file_case_and_field(
    tmp_path: Path,
) -> None:
    from pytest_nodeval.report.baseline import load
    from tests.html.synthetic import build_run

    report = build_run(tmp_path, cases=2, repeats=2, gate=False).report
    data = json.loads(report.model_dump_json())
    data["cases"][1]["attempts"][0]["latency_ms"] = math.nan
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(data))  # json writes NaN, as a buggy writer would
    case_id = data["cases"][1]["id"]
    with pytest.raises(NodevalError) as error:
        load(path)
    assert str(error.value) == (
        f"{path}: not usable by the gate: case {case_id!r}: latencies_ms[0] is nan; "
        "expected a finite number >= 0 (milliseconds)"
    )


# --- the bootstraps at scale (29.6) ---------------------------------------------------------


def test_the_pooled_quantile_by_counts_equals_sorting_the_resample() -> None:
    from scipy.stats import quantile  # type: ignore[import-untyped]

    from pytest_nodeval.stats.significance import _FlatRun

    rng = np.random.default_rng(4)
    run = _FlatRun([rng.lognormal(0, 0.5, n) for n in (3, 7, 5, 4, 9)])
    draws = rng.integers(0, 5, size=(6, 5))
    got = run.resampled_pooled_quantiles(np.random.default_rng(8), draws, 0.95)
    picks = run.picks(np.random.default_rng(8), draws)
    values = np.append(run.values, np.nan)
    expected = [
        quantile(values[row][row < run.sentinel], 0.95, method="harrell-davis") for row in picks
    ]
    assert got == pytest.approx(expected, rel=1e-12)


def test_a_clear_slowdown_stops_after_the_pilot_and_a_borderline_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_nodeval.stats import significance

    rows: list[int] = []
    resample = significance._resample_run

    def counted(rng: Any, draws: Any, *rest: Any) -> Any:
        rows.append(len(draws))  # one call per run and batch
        return resample(rng, draws, *rest)

    monkeypatch.setattr(significance, "_resample_run", counted)
    rng = np.random.default_rng(3)
    base = [rng.lognormal(7, 0.3, 10) for _ in range(400)]
    clear = significance.pooled_quantile_ratio_lower_bound(
        base, [2.0 * b for b in base], 0.95, 0.00125, 4000, 0
    )
    assert clear > 1.5 and sum(rows) == 2 * 200  # both runs, the pilot only
    rows.clear()
    # x1.06 on fresh draws: a bound just above 1 (x1.011), which only all 4,000 can place.
    noisy = [1.06 * rng.lognormal(7, 0.3, 10) for _ in range(400)]
    open_bound = significance.pooled_quantile_ratio_lower_bound(base, noisy, 0.95, 0.00125, 4000, 0)
    assert 1.0 < open_bound < 1.05 and sum(rows) == 2 * 4000
    # A bound the pilot leaves open is the bound of all 4,000 resamples, for the same seed.
    monkeypatch.setattr(significance, "_PILOT_RESAMPLES", 4000)
    assert open_bound == significance.pooled_quantile_ratio_lower_bound(
        base, noisy, 0.95, 0.00125, 4000, 0
    )
