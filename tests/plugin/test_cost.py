"""Cost in money through real runs: live attempts against fakes.llm, priced by a known table
(issue 16.3). The figures are checked to the cent per attempt, per case and per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import xdist  # noqa: F401  (the pytester runs below use -n)
import yaml

from pytest_nodeval.report.models import RunReport

from ..conftest import PROJECT_INI
from ..html.pagetools import parse, visible_text

PRICES = (
    "nodeval_prices =\n    house-model: input=3.00 output=15.00 cache_read=0.30 cache_write=3.75\n"
)
# Two calls an attempt (two user turns). Per million tokens: $3 uncached input, $0.30 cache
# read, $3.75 cache write, $15 output.
#   call 1: 2,000 uncached + 6,000 read + 2,000 written, 1,000 out = 0.006 + 0.0018 + 0.0075 + 0.015
#   call 2: 8,000 uncached + 12,000 read, 2,000 out               = 0.024 + 0.0036 + 0.030
HOUSE_CALLS = [
    {
        "text": "First.",
        "usage": {
            "input_tokens": 10_000,
            "output_tokens": 1_000,
            "cache_read_tokens": 6_000,
            "cache_write_tokens": 2_000,
        },
    },
    {
        "text": "Second.",
        "usage": {"input_tokens": 20_000, "output_tokens": 2_000, "cache_read_tokens": 12_000},
    },
]
HOUSE_ATTEMPT = 0.0303 + 0.0576
# claude-sonnet-4-6 from genai-prices' table ($3 in, $15 out): 1,000 in, 100 out.
TABLE_ATTEMPT = (1000 * 3 + 100 * 15) / 1e6


def _case(
    root: Path, case_id: str, model: str, calls: list[dict[str, Any]], api: str = "anthropic"
) -> Path:
    directory = root / "scenarios" / case_id
    (directory / "input").mkdir(parents=True)
    _dump(directory / "case.yaml", {"id": case_id, "name": case_id})
    _dump(
        directory / "input" / "config.yaml",
        {
            "providers": [{"name": api, "model": model, "base_url": "fake", "max_retries": 0}],
            "system_prompt": "Be brief.",
            "tools": [],
            "limits": {"max_turns": 3, "timeout_s": 30},
        },
    )
    _dump(
        directory / "input" / "inputs.yaml",
        {"user": {"kind": "scripted", "inputs": [f"Question {i}" for i in range(len(calls))]}},
    )
    _dump(directory / "input" / "llm.yaml", {"schema_version": 1, "responses": calls})
    _dump(directory / "assertions.yaml", [{"kind": "output_contains", "text": calls[-1]["text"]}])
    return directory


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture
def priced_project(nodeval_project: pytest.Pytester) -> pytest.Pytester:
    nodeval_project.makeini(PROJECT_INI + PRICES)
    _case(nodeval_project.path, "house", "house-model", HOUSE_CALLS)
    _case(
        nodeval_project.path,
        "table",
        "claude-sonnet-4-6",
        [{"text": "Hi.", "usage": {"input_tokens": 1000, "output_tokens": 100}}],
    )
    return nodeval_project


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


def _cents(value: float | None) -> float:
    assert value is not None
    return round(value * 100, 6)


def test_live_costs_are_right_to_the_cent_per_attempt_case_and_run(
    priced_project: pytest.Pytester,
) -> None:
    result = priced_project.runpytest(
        "--nodeval-mode", "live", "--repeat", "2", "--nodeval-world", "local"
    )
    result.assert_outcomes(passed=4)
    report = _report(priced_project)
    house, table = report.case("house"), report.case("table")
    for attempt in house.attempts:
        assert _cents(attempt.cost_usd) == pytest.approx(_cents(HOUSE_ATTEMPT))  # 8.79 cents
        assert (attempt.input_tokens, attempt.cache_read_tokens, attempt.cache_write_tokens) == (
            30_000,
            18_000,
            2_000,
        )
    assert [_cents(a.cost_usd) for a in table.attempts] == [pytest.approx(0.45)] * 2
    assert _cents(house.cost_usd) == pytest.approx(17.58) and _cents(
        house.cost_per_attempt_usd
    ) == pytest.approx(8.79)
    assert _cents(table.cost_usd) == pytest.approx(0.9)
    totals = report.totals
    assert _cents(totals.cost_usd) == pytest.approx(18.48) and _cents(
        totals.cost_per_attempt_usd
    ) == pytest.approx(4.62)
    assert not totals.cost_recorded and totals.cost_unpriced_attempts == 0
    result.stdout.fnmatch_lines(
        ["*house*$0.0879*passed*", "*table*$0.0045*passed*", "cost: $0.1848, $0.0462 per attempt"]
    )
    run_dir = priced_project.path / "reports" / "latest"
    assert "cost: $0.1848, $0.0462 per attempt" in (run_dir / "summary.txt").read_text()
    page = parse((run_dir / "report.html").read_text())
    data = page.data()
    assert data["run"]["cost"]["total"] == "$0.1848"
    assert "$0.1848" in visible_text(page.html)
    rows = {row["id"]: row for row in data["cases"]}
    assert rows["house"]["cost"] == pytest.approx(HOUSE_ATTEMPT)
    assert [a["cost"] for a in rows["house"]["attempts"]] == [pytest.approx(HOUSE_ATTEMPT)] * 2


def test_a_replay_reports_the_recorded_cost_and_says_so(priced_project: pytest.Pytester) -> None:
    priced_project.runpytest(
        "--nodeval-mode", "record", "--nodeval-world", "local"
    ).assert_outcomes(passed=2)
    result = priced_project.runpytest()  # deterministic replay: fakes.llm is not started
    result.assert_outcomes(passed=2)
    report = _report(priced_project)
    assert report.totals.cost_recorded
    assert _cents(report.case("house").cost_usd) == pytest.approx(8.79)
    assert _cents(report.totals.cost_usd) == pytest.approx(8.79 + 0.45)
    result.stdout.fnmatch_lines(
        ["cost as recorded (this replay spent nothing): $0.0924, $0.0462 per attempt"]
    )


def test_a_model_without_a_price_is_unknown_and_said(nodeval_project: pytest.Pytester) -> None:
    _case(nodeval_project.path, "house", "house-model", HOUSE_CALLS)
    result = nodeval_project.runpytest("--nodeval-mode", "live", "--nodeval-world", "local")
    result.assert_outcomes(passed=1)
    report = _report(nodeval_project)
    attempt = report.case("house").attempts[0]
    assert attempt.cost_usd is None and attempt.cost_unpriced == ["house-model"]
    assert report.totals.cost_usd is None and report.totals.cost_unpriced_models == ["house-model"]
    unknown = (
        "cost: unknown: no price for model(s) house-model "
        "(1 attempt(s); name them in nodeval_prices)*"
    )
    result.stdout.fnmatch_lines(["*house*unknown*passed*", unknown])


def test_max_cost_stops_starting_attempts_and_the_rest_are_not_run(
    priced_project: pytest.Pytester,
) -> None:
    (priced_project.path / "scenarios" / "table" / "case.yaml").unlink()
    (priced_project.path / "scenarios" / "table" / "input" / "config.yaml").unlink()
    # $0.0879 an attempt: the first starts (nothing to estimate from), the second fits
    # ($0.1758), a third would reach $0.2637.
    result = priced_project.runpytest(
        "--nodeval-mode",
        "live",
        "--repeat",
        "5",
        "--nodeval-world",
        "local",
        "--nodeval-max-cost",
        "0.20",
    )
    result.assert_outcomes(passed=2, skipped=3)
    report = _report(priced_project)
    house = report.case("house")
    assert [a.outcome for a in house.attempts] == [
        "passed",
        "passed",
        "not_run",
        "not_run",
        "not_run",
    ]
    assert all(
        (a.reason or "").startswith("not run (budget): the run spent $0.1758")
        for a in house.attempts[2:]
    )
    # In no rate
    assert (house.stats.passed, house.stats.attempts, house.stats.pass_rate) == (
        2,
        2,
        1.0,
    )
    assert report.totals.not_run_budget == 3 and report.max_cost_usd == 0.2
    assert _cents(report.totals.cost_usd) == pytest.approx(17.58)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "house*2/2*$0.0879*passed (3 not run (budget))",
            "*5 attempt(s): 2 passed*3 not run (3 for the budget)*",
            "--nodeval-max-cost $0.2000: 3 attempt(s) not run (budget), in no rate",
        ]
    )


def test_attempts_run_ahead_hold_the_budget_as_serial_ones_do(
    priced_project: pytest.Pytester,
) -> None:
    (priced_project.path / "scenarios" / "table" / "case.yaml").unlink()
    result = priced_project.runpytest(
        "--nodeval-mode",
        "live",
        "--repeat",
        "5",
        "--nodeval-world",
        "local",
        "--nodeval-max-cost",
        "0.20",
        "--nodeval-concurrency",
        "4",
    )
    result.assert_outcomes(passed=2, skipped=3)
    report = _report(priced_project)
    # The first attempt starts alone (nothing to estimate from); the second at its mean; the
    # third would pass $0.20 with the second in flight, and so would the rest.
    assert [a.outcome for a in report.case("house").attempts] == [
        "passed",
        "passed",
        "not_run",
        "not_run",
        "not_run",
    ]
    assert report.totals.not_run_budget == 3 and _cents(report.totals.cost_usd) == pytest.approx(
        17.58
    )


def test_the_budget_is_shared_by_the_xdist_workers_of_a_run(
    priced_project: pytest.Pytester,
) -> None:
    (priced_project.path / "scenarios" / "table" / "case.yaml").unlink()
    result = priced_project.runpytest(
        "-n",
        "2",
        "--nodeval-mode",
        "live",
        "--repeat",
        "6",
        "--nodeval-world",
        "local",
        "--nodeval-max-cost",
        "0.20",
    )
    report = _report(priced_project)
    attempts = report.case("house").attempts
    ran = [a for a in attempts if a.outcome == "passed"]
    assert {a.worker for a in attempts} == {"gw0", "gw1"}, "both workers took attempts"
    # Each worker alone would start two ($0.1758 of its own spend); one shared budget starts
    # two (a worker's first attempt waits for the run's first cost).
    assert len(ran) == 2 and report.totals.not_run_budget == 4
    assert _cents(report.totals.cost_usd) == pytest.approx(8.79 * len(ran))
    assert (priced_project.path / "reports" / "latest" / "_shared" / "budget.sqlite").is_file()
    assert result.ret == 0


@pytest.mark.parametrize(
    ("ini", "args", "message"),
    [
        (
            "nodeval_prices =\n    house-model: input=3.00 output=lots\n",
            [],
            "*nodeval_prices (*): 'house-model: input=3.00 output=lots': "
            "output='lots' is not a price*",
        ),
        (
            "nodeval_prices =\n    house-model input=3 output=15\n",
            [],
            "*nodeval_prices (*): 'house-model input=3 output=15' "
            "is not 'model: input=USD output=USD*",
        ),
        (
            "",
            ["--nodeval-max-cost", "-1"],
            "*--nodeval-max-cost must be a positive amount in USD*got '-1'*",
        ),
        (
            "nodeval_max_cost = free\n",
            [],
            "*nodeval_max_cost (*) must be a positive amount in USD*got 'free'*",
        ),
    ],
)
def test_bad_prices_and_budgets_are_usage_errors(
    nodeval_project: pytest.Pytester, ini: str, args: list[str], message: str
) -> None:
    nodeval_project.makeini(PROJECT_INI + ini)
    result = nodeval_project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()
