"""The readers of the inputs that are still settling: the gate diff and the run history."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_nodeval.report.html_data import gate_view, history_view, regressions

FLAT: dict[str, Any] = {
    "schema_version": "1",
    "baseline": "reports/baseline.json",
    "cases": [
        {
            "case_id": "refund",
            "movement": "regressed",
            "baseline_pass_rate": 1.0,
            "current_pass_rate": 0.4,
            "delta": -0.6,
            "delta_low": -0.85,
            "delta_high": -0.2,
            "p50_ms_delta": 10.0,
            "p95_ms_delta": 300.0,
            "tokens_delta": 42.0,
            "cost_delta": 0.0125,
            "verdict": "FAIL",
        },
        {
            "case_id": "hello",
            "movement": "unchanged",
            "baseline_pass_rate": 1.0,
            "current_pass_rate": 1.0,
            "delta": 0.0,
            "verdict": "OK",
        },
        {
            "case_id": "slow",
            "movement": "unchanged",
            "delta": 0.0,
            "p95_ms_delta": 900.0,
            "verdict": "WARN",
        },
    ],
    "new_cases": ["fresh"],
    "missing_cases": ["gone"],
    "suite": {"baseline_pass_rate": 0.9, "current_pass_rate": 0.8, "delta": -0.1},
    "gates": [
        {
            "name": "scenario_regression",
            "verdict": "FAIL",
            "reason": "refund dropped",
            "cases": ["refund"],
            "numbers": {"q": 0.1},
        }
    ],
    "breached": ["scenario_regression"],
}

# The shape of the statistics branch's `Diff` dump: per-case changes nested by concern.
NESTED: dict[str, Any] = {
    "schema_version": "1",
    "policy": {"fail_on_score_drop": 0.05},
    "cases": [
        {
            "case_id": "refund",
            "pass_rate": {
                "baseline_passed": 10,
                "baseline_attempts": 10,
                "current_passed": 4,
                "current_attempts": 10,
                "delta": -0.6,
                "ci_low": -0.85,
                "ci_high": -0.2,
                "movement": "down",
                "p_value": 0.001,
                "p_value_adjusted": 0.002,
                "verdict": "FAIL",
            },
            "latency": {
                "baseline_p50_ms": 100.0,
                "current_p50_ms": 110.0,
                "baseline_p95_ms": 200.0,
                "current_p95_ms": 500.0,
                "p50_delta_ms": 10.0,
                "p95_delta_ms": 300.0,
                "p95_ratio": 2.5,
                "p_value": None,
                "p_value_adjusted": None,
                "verdict": "WARN",
            },
            "tokens": {"baseline_mean": 100.0, "current_mean": 142.0, "delta": 42.0, "ratio": 1.42},
            "cost": {"baseline_mean": 0.05, "current_mean": 0.0625, "delta": 0.0125, "ratio": 1.25},
        },
        {"case_id": "hello", "pass_rate": None, "latency": None, "tokens": None},
    ],
    "new_cases": ["fresh"],
    "missing_cases": [],
    "suite": {
        "scenarios": 2,
        "baseline_pass_rate": 0.9,
        "current_pass_rate": 0.8,
        "delta": -0.1,
        "standard_error": 0.05,
        "ci_low": -0.2,
        "ci_high": 0.0,
    },
    "gates": [
        {
            "name": "scenario_regression",
            "verdict": "FAIL",
            "reason": "refund dropped",
            "numbers": {"q": 0.1},
            "case_ids": ["refund"],
        },
        {
            "name": "latency_p95",
            "verdict": "WARN",
            "reason": "too few attempts",
            "numbers": {},
            "case_ids": [],
        },
    ],
    "breached": ["scenario_regression"],
    "verdict": "FAIL",
}


def test_the_flat_shape() -> None:
    view = gate_view(FLAT)
    assert view is not None
    assert view["baseline"] == "reports/baseline.json" and view["verdict"] == "FAIL"
    assert view["breached"] == ["scenario_regression"]
    assert view["cases"]["refund"] == {
        "movement": "regressed",
        "baseline_pass_rate": 1.0,
        "current_pass_rate": 0.4,
        "delta": -0.6,
        "delta_low": -0.85,
        "delta_high": -0.2,
        "p50_ms_delta": 10.0,
        "p95_ms_delta": 300.0,
        "tokens_delta": 42.0,
        "cost_delta": 0.0125,
        "verdict": "FAIL",
    }
    assert view["cases"]["fresh"]["movement"] == "new"
    assert view["missing_cases"] == ["gone"]
    assert view["gates"] == [
        {
            "name": "scenario_regression",
            "verdict": "FAIL",
            "reason": "refund dropped",
            "cases": ["refund"],
            "numbers": {"q": 0.1},
        }
    ]


def test_the_nested_shape_reads_the_same() -> None:
    flat, nested = gate_view(FLAT), gate_view(NESTED)
    assert flat is not None and nested is not None
    refund = nested["cases"]["refund"]
    assert refund == {**flat["cases"]["refund"], "current_pass_rate": pytest.approx(0.4)}
    assert nested["cases"]["hello"]["movement"] == "" and nested["cases"]["hello"]["delta"] is None
    assert nested["suite"] == {
        "baseline_pass_rate": 0.9,
        "current_pass_rate": 0.8,
        "delta": -0.1,
        "delta_low": -0.2,
        "delta_high": 0.0,
    }
    assert nested["gates"][0]["cases"] == ["refund"] and nested["verdict"] == "FAIL"


def test_regressions_are_the_dropped_and_the_flagged_worst_first() -> None:
    view = gate_view(FLAT)
    rows = regressions(view, {"refund": "Refund flow"})
    assert [(r["case_id"], r["name"]) for r in rows] == [("refund", "Refund flow")]
    view = gate_view(
        {
            **FLAT,
            "cases": FLAT["cases"]
            + [
                {
                    "case_id": "maybe",
                    "movement": "regressed",
                    "delta": -0.3,
                    "verdict": "INCONCLUSIVE",
                },
                {"case_id": "worse", "movement": "regressed", "delta": -0.9, "verdict": "FAIL"},
            ],
        }
    )
    assert [r["case_id"] for r in regressions(view, {})] == ["worse", "refund", "maybe"]


def test_without_breaches_the_worst_gate_verdict_counts() -> None:
    view = gate_view(
        {"gates": [{"name": "a", "verdict": "OK"}, {"name": "b", "verdict": "INCONCLUSIVE"}]}
    )
    assert view is not None and view["verdict"] == "INCONCLUSIVE" and view["breached"] == []
    assert gate_view({"gates": [{"name": "a", "verdict": "FAIL"}]})["breached"] == ["a"]  # type: ignore[index]


@pytest.mark.parametrize(
    "junk",
    [
        {},
        {"cases": "nope"},
        {"cases": [None, 3, {"no_id": 1}, {"case_id": "x", "delta": "big", "verdict": "MAYBE"}]},
        {
            "cases": [
                {
                    "case_id": "x",
                    "delta": math.nan,
                    "delta_low": math.inf,
                    "pass_rate": "?",
                    "latency": [1],
                }
            ]
        },
        {
            "gates": [None, {"numbers": {"p": math.nan, "q": "text", "r": True}}],
            "breached": "suite",
            "suite": [],
        },
        {"baseline": {"path": "x"}, "new_cases": None, "missing_cases": [None]},
    ],
)
def test_odd_shapes_render_as_unknown_and_never_raise(junk: dict[str, Any]) -> None:
    view = gate_view(junk)
    assert view is not None
    for change in view["cases"].values():
        assert all(v is None or isinstance(v, (str, float)) for v in change.values())
        assert change["verdict"] in ("", "OK", "WARN", "INCONCLUSIVE", "FAIL")
    for gate in view["gates"]:
        assert all(isinstance(v, float) and math.isfinite(v) for v in gate["numbers"].values())
    regressions(view, {})


def test_no_gate_is_none() -> None:
    assert gate_view(None) is None and regressions(None, {}) == []


def test_history_is_sorted_marks_this_run_and_drops_what_cannot_be_drawn() -> None:
    history = {
        "a": [
            {"run_id": "r2", "finished_at": "2026-11-02", "pass_rate": 0.5},
            {"run_id": "r1", "finished_at": "2026-11-01", "pass_rate": 1},
            {"run_id": "r0", "finished_at": "2026-10-31", "pass_rate": None},
            {"run_id": "now", "finished_at": "2026-11-03", "pass_rate": 0.75, "verdict": "failed"},
            "junk",
        ],
        "b": "junk",
    }
    assert history_view(history, "now") == {
        "a": [
            ["2026-11-01", 1.0, "r1", False],
            ["2026-11-02", 0.5, "r2", False],
            ["2026-11-03", 0.75, "now", True],
        ],
        "b": [],
    }
    assert history_view(None, "now") == {} and history_view({"a": None}, "x") == {"a": []}
