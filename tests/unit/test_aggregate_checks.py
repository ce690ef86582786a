"""Tests bound to one case and repeat are checks of one attempt (pure aggregation)."""

from __future__ import annotations

from pytest_nodeval.report.aggregate import aggregate, merge_checks
from pytest_nodeval.report.models import AssertionRecord, AttemptRecord, CaseMeta


def _check(nodeid: str, outcome: str, repeat: int = 1, **fields: object) -> AttemptRecord:
    return AttemptRecord(nodeid=nodeid, case_id="c", repeat=repeat, outcome=outcome, **fields)  # type: ignore[arg-type]


def test_the_attempt_passes_only_if_every_check_passes() -> None:
    merged = merge_checks(
        [_check("b::py", "failed", reason="too long"), _check("a::yaml", "passed", journal="j")]
    )
    assert (merged.outcome, merged.reason, merged.checks, merged.journal) == (
        "failed",
        "too long",
        ["a::yaml", "b::py"],
        "j",
    )


def test_an_error_outranks_a_failure_and_a_check_not_run_outranks_a_pass() -> None:
    assert (
        merge_checks([_check("a", "failed"), _check("b", "error", infra_error=True)]).outcome
        == "error"
    )
    assert merge_checks([_check("a", "passed"), _check("b", "not_run")]).outcome == "not_run"
    assert merge_checks([_check("a", "passed"), _check("b", "skipped")]).outcome == "passed"


def test_the_checks_results_are_pooled() -> None:
    first = _check(
        "a",
        "passed",
        assertions=[AssertionRecord(kind="k", description="d1", status="passed")],
        judged={"x": "pass"},
        reruns=1,
    )
    second = _check(
        "b",
        "passed",
        assertions=[AssertionRecord(kind="k", description="d2", status="passed")],
        judged={"y": "skipped"},
    )
    merged = merge_checks([first, second])
    assert [a.description for a in merged.assertions] == ["d1", "d2"]
    assert merged.judged == {"x": "pass", "y": "skipped"} and merged.reruns == 1


def test_two_checks_at_each_of_three_repeats_are_three_attempts() -> None:
    records = [
        _check(f"{name}[r{r}]", "passed", repeat=r) for r in (1, 2, 3) for name in ("yaml", "py")
    ]
    cases, totals, _ = aggregate(records, {"c": CaseMeta(id="c")})
    assert (totals.attempts, cases[0].stats.attempts, cases[0].stats.passed) == (3, 3, 3)
