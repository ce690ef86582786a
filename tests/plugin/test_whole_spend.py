"""The whole spend through real runs (issue 29.5): a persona case graded by a judge, live
against fakes.llm. The persona's and the judge's calls are priced apart from the agent's, shown
in report.json, summary.txt and report.html, and counted by --nodeval-max-cost."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from pytest_nodeval.report.models import RunReport

from ..conftest import PROJECT_INI
from ..html.pagetools import parse

SEED = Path(__file__).parents[2] / "scenarios" / "persona-refund"
PRICES = (
    "nodeval_prices =\n"
    "    claude-sonnet-4-6: input=3 output=15\n"
    "    gpt-5-mini: input=10 output=100\n"
    "    judge-1: input=5 output=50\n"
)
# The agent answers once (60 in, 16 out at $3 / $15 per million): $0.00042.
AGENT = (60 * 3 + 16 * 15) / 1e6
# The persona speaks twice (its opening, then its done token), 1,000 in and 100 out each at
# $10 / $100 per million: 2 x ($0.01 + $0.01).
USER = 0.04
# The judge grades one criterion: 2,000 in and 200 out at $5 / $50 per million.
JUDGE = 0.02
PERSONA_USAGE = {"input_tokens": 1_000, "output_tokens": 100}
JUDGE_USAGE = {"input_tokens": 2_000, "output_tokens": 200}


@pytest.fixture
def persona_project(nodeval_project: pytest.Pytester) -> pytest.Pytester:
    nodeval_project.makeini(PROJECT_INI + PRICES)
    case_dir = nodeval_project.path / "scenarios" / "persona-refund"
    shutil.copytree(SEED, case_dir, ignore=shutil.ignore_patterns("journal"))
    script_path = case_dir / "input" / "llm.yaml"
    script = yaml.safe_load(script_path.read_text())
    for rule in script["rules"]:
        system = rule["when"].get("system_contains", "")
        if "playing a USER" in system:
            rule["respond"]["usage"] = PERSONA_USAGE
        elif "strict evaluator" in system:
            rule["respond"]["usage"] = JUDGE_USAGE
    script_path.write_text(yaml.safe_dump(script, sort_keys=False))
    return nodeval_project


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


def test_the_persona_and_the_judge_are_priced_apart_in_every_report(
    persona_project: pytest.Pytester,
) -> None:
    result = persona_project.runpytest(
        "--nodeval-mode",
        "live",
        "--nodeval-world",
        "local",
        "--nodeval-progress",
        "plain",
        "-o",
        "nodeval_progress_interval=0",
        "--junitxml=junit.xml",
    )
    result.assert_outcomes(passed=1)
    report = _report(persona_project)
    attempt = report.case("persona-refund").attempts[0]
    assert attempt.judged == {"Confirms the refund for the right order": "pass"}
    assert attempt.cost_usd == pytest.approx(AGENT), "cost_usd stays the agent's"
    assert attempt.user_cost_usd == pytest.approx(USER)
    assert attempt.judge_cost_usd == pytest.approx(JUDGE)
    assert attempt.total_cost_usd == pytest.approx(AGENT + USER + JUDGE)
    case, totals = report.case("persona-refund"), report.totals
    assert (case.cost_usd, case.user_cost_usd, case.judge_cost_usd) == (
        pytest.approx(AGENT),
        pytest.approx(USER),
        pytest.approx(JUDGE),
    )
    assert case.total_cost_per_attempt_usd == pytest.approx(AGENT + USER + JUDGE)
    assert (totals.cost_usd, totals.user_cost_usd, totals.judge_cost_usd) == (
        pytest.approx(AGENT),
        pytest.approx(USER),
        pytest.approx(JUDGE),
    )
    assert totals.total_cost_usd == pytest.approx(AGENT + USER + JUDGE)
    line = "cost: $0.0604 (agent $0.0004, user $0.0400, judge $0.0200), $0.0604 per attempt"
    result.stdout.fnmatch_lines(
        ["nodeval: 1/1 attempts*, $0.06*", "*persona-refund*$0.0604*passed*", line]
    )
    run_dir = persona_project.path / "reports" / "latest"
    assert line in (run_dir / "summary.txt").read_text()
    data = parse((run_dir / "report.html").read_text()).data()
    assert data["run"]["cost"]["total"] == "$0.0604"
    assert "agent $0.0004" in data["run"]["cost"]["detail"]
    assert "user $0.0400 · judge $0.0200" in data["run"]["cost"]["detail"]
    (row,) = data["cases"]
    assert row["cost"] == pytest.approx(AGENT + USER + JUDGE)
    assert row["attempts"][0]["cost_split"] == "agent $0.0004 · user $0.0400 · judge $0.0200"
    junit = (persona_project.path / "junit.xml").read_text()
    assert '<property name="nodeval_user_cost_usd" value="0.04"' in junit
    assert '<property name="nodeval_judge_cost_usd" value="0.02"' in junit


@pytest.mark.parametrize("ahead", [[], ["--nodeval-concurrency", "3"]], ids=["inline", "ahead"])
def test_max_cost_stops_the_run_on_what_the_persona_and_the_judge_spend(
    persona_project: pytest.Pytester, ahead: list[str]
) -> None:
    # The agent alone costs $0.00042 an attempt: three would fit $0.05 many times over. With
    # the persona and the judge, an attempt costs $0.06042: the first starts (nothing to
    # estimate from) and spends past the limit, so the others do not start.
    result = persona_project.runpytest(
        "--nodeval-mode",
        "live",
        "--repeat",
        "3",
        "--nodeval-world",
        "local",
        "--nodeval-max-cost",
        "0.05",
        *ahead,
    )
    result.assert_outcomes(passed=1, skipped=2)
    report = _report(persona_project)
    attempts = report.case("persona-refund").attempts
    assert [a.outcome for a in attempts] == ["passed", "not_run", "not_run"]
    assert all(
        (a.reason or "").startswith("not run (budget): the run spent $0.0604") for a in attempts[1:]
    )
    assert report.totals.not_run_budget == 2
    result.stdout.fnmatch_lines(["--nodeval-max-cost $0.0500: 2 attempt(s) not run (budget)*"])


def test_a_full_run_pays_for_its_judge_alone_and_its_budget_counts_that(
    persona_project: pytest.Pytester,
) -> None:
    persona_project.runpytest(
        "--nodeval-mode", "record", "--nodeval-world", "local"
    ).assert_outcomes(passed=1)
    # The agent and the persona replay; the judge grades live at $0.02 an attempt: the first
    # starts, a second would pass $0.03.
    result = persona_project.runpytest(
        "--nodeval-mode", "full", "--repeat", "3", "--nodeval-max-cost", "0.03"
    )
    result.assert_outcomes(passed=1, skipped=2)
    report = _report(persona_project)
    attempts = report.case("persona-refund").attempts
    assert [a.outcome for a in attempts] == ["passed", "not_run", "not_run"]
    assert (attempts[0].user_cost_usd, attempts[0].judge_cost_usd) == (0.0, pytest.approx(JUDGE))
    assert all(
        (a.reason or "").startswith("not run (budget): the run spent $0.0200") for a in attempts[1:]
    )
    assert report.totals.cost_recorded
    result.stdout.fnmatch_lines(
        [
            "cost: $0.0204 (agent $0.0004 as recorded: this replay spent nothing on it, "
            "user $0.0000, judge $0.0200), $0.0204 per attempt",
            "--nodeval-max-cost $0.0300: 2 attempt(s) not run (budget)*",
        ]
    )
