"""The whole spend (issue 29.5): a simulated persona's and the judge's model calls are priced
like the agent's, from the usage their side journals keep, and shown apart."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_nodeval.agent.config import ProviderSpec
from pytest_nodeval.journal.events import LlmRequest, LlmResponse
from pytest_nodeval.people.inputs import PersonaUserSpec
from pytest_nodeval.people.judge import make_grader
from pytest_nodeval.people.persona import PersonaUser
from pytest_nodeval.plugin.budget import baseline_prior
from pytest_nodeval.report.aggregate import aggregate
from pytest_nodeval.report.models import AttemptRecord, CaseMeta, RunReport
from pytest_nodeval.report.summary_md import markdown
from pytest_nodeval.report.terminal import cost_lines
from pytest_nodeval.runner.cost import attempt_cost, parse_prices, spend_of
from pytest_nodeval.runner.session import journal_header
from pytest_nodeval.stats.run_stats import suite_stats
from pytest_nodeval_fakes.llm import LLMFake

PRICES = parse_prices(
    [
        "agent-1: input=1 output=10",
        "persona-1: input=10 output=100",
        "judge-1: input=5 output=50",
    ]
)


def _call(model: str, input_tokens: int, output_tokens: int, label: str) -> list[Any]:
    request = LlmRequest(provider=label, api="openai.chat", body={"model": model})
    response = LlmResponse(
        provider=label, usage={"input_tokens": input_tokens, "output_tokens": output_tokens}
    )
    return [
        SimpleNamespace(type="llm.request", payload=request),
        SimpleNamespace(type="llm.response", payload=response),
    ]


def test_the_user_and_the_judge_are_priced_apart_with_the_agents_table() -> None:
    agent = _call("agent-1", 100_000, 10_000, "main")  # $0.10 + $0.10
    user = _call("persona-1", 1_000, 100, "user") * 2  # ($0.01 + $0.01) x 2
    judge = _call("judge-1", 2_000, 200, "judge")  # $0.01 + $0.01
    spend = spend_of(agent, user, judge, PRICES)
    assert spend.agent.cost_usd == pytest.approx(0.20)
    assert spend.user.cost_usd == pytest.approx(0.04)
    assert spend.judge.cost_usd == pytest.approx(0.02)
    assert spend.total_usd == pytest.approx(0.26)
    # A replay serves the agent's calls: the run paid for the user's and the judge's only.
    assert spend.paid_usd(agent_live=True) == pytest.approx(0.26)
    assert spend.paid_usd(agent_live=False) == pytest.approx(0.06)


def test_a_judge_model_without_a_price_makes_the_judge_and_the_whole_unknown_never_zero() -> None:
    judge = _call("house-judge", 2_000, 200, "judge")
    spend = spend_of(_call("agent-1", 10, 1, "main"), [], judge, PRICES)
    assert spend.agent.cost_usd is not None and spend.user.cost_usd == 0.0
    assert spend.judge.cost_usd is None and spend.judge.unpriced == ("house-judge",)
    assert spend.total_usd is None and spend.paid_usd(agent_live=True) is None


def test_a_persona_keeps_its_model_calls_for_the_pricing() -> None:
    spec = PersonaUserSpec(
        kind="persona",
        provider=ProviderSpec(name="openai", model="persona-1", base_url="fake"),
        persona="A customer",
        reason="wants a refund",
    )
    replies = [
        {
            "text": "Refund order A-1, please.",
            "usage": {"input_tokens": 1_000, "output_tokens": 100},
        },
        {"text": "Thanks. ###DONE###", "usage": {"input_tokens": 3_000, "output_tokens": 100}},
    ]
    with LLMFake({"responses": replies}) as fake:
        persona = PersonaUser(spec, fake.url)
        assert persona.next_input(None) is not None
        spent = persona.spent_events()
        assert persona.next_input("Refunded.") is None and persona.ending == "done"
    assert spent is persona.spent_events(), "the journal's own list: it grows as the persona talks"
    assert [e.type for e in spent] == ["llm.request", "llm.response"] * 2
    # ($0.01 + $0.01) + ($0.03 + $0.01)
    assert attempt_cost(spent, PRICES).cost_usd == pytest.approx(0.06)


def _rubric(criteria: list[str]) -> Any:
    judge = ProviderSpec(name="anthropic", model="judge-1", base_url="fake", max_retries=0)
    return SimpleNamespace(judge=judge, rubric=criteria, reference=None)


def test_a_grader_keeps_the_calls_of_its_last_grading_for_the_pricing() -> None:
    from pytest_nodeval.journal.writer import JournalWriter

    verdict = {
        "tool_calls": [{"name": "record_verdict", "args": {"verdict": "pass", "reason": "ok"}}],
        "usage": {"input_tokens": 2_000, "output_tokens": 200},
    }
    grader = make_grader([_rubric(["Is polite", "Is right"])], None, None, False)
    assert grader.spent_events() == []
    with LLMFake({"responses": [verdict] * 4}) as fake:
        journal = JournalWriter(None, journal_header("live", None))
        judged = grader(journal, fake.url)
        assert {v["verdict"] for v in judged.values()} == {"pass"}
        # The judge's calls stay out of the attempt's journal; the grader has them.
        assert not [e for e in journal.events if e.type.startswith("llm.")]
        assert attempt_cost(grader.spent_events(), PRICES).cost_usd == pytest.approx(0.04)
        grader(JournalWriter(None, journal_header("live", None)), fake.url)
    # A second attempt's grading is priced alone, not with the first one's.
    assert attempt_cost(grader.spent_events(), PRICES).cost_usd == pytest.approx(0.04)


def _attempt(
    repeat: int,
    agent: float | None,
    user: float | None,
    judge: float | None,
    judge_unpriced: tuple[str, ...] = (),
) -> AttemptRecord:
    parts = (agent, user, judge)
    return AttemptRecord(
        nodeid=f"c[{repeat}]",
        case_id="c",
        repeat=repeat,
        outcome="passed",
        cost_usd=agent,
        user_cost_usd=user,
        judge_cost_usd=judge,
        judge_cost_unpriced=list(judge_unpriced),
        total_cost_usd=None if None in parts else sum(p for p in parts if p is not None),
    )


def test_cases_and_totals_keep_the_agents_cost_and_add_the_user_the_judge_and_the_whole() -> None:
    attempts = [_attempt(1, 0.10, 0.04, 0.02), _attempt(2, 0.30, 0.00, 0.02)]
    cases, totals, _ = aggregate(attempts, {"c": CaseMeta(id="c")})
    case = cases[0]
    assert (case.cost_usd, case.cost_per_attempt_usd) == (pytest.approx(0.40), pytest.approx(0.20))
    assert (case.user_cost_usd, case.judge_cost_usd) == (pytest.approx(0.04), pytest.approx(0.04))
    assert (case.total_cost_usd, case.total_cost_per_attempt_usd) == (
        pytest.approx(0.48),
        pytest.approx(0.24),
    )
    assert (totals.cost_usd, totals.user_cost_usd, totals.judge_cost_usd) == (
        pytest.approx(0.40),
        pytest.approx(0.04),
        pytest.approx(0.04),
    )
    assert totals.total_cost_usd == pytest.approx(0.48)
    unknown = [*attempts, _attempt(3, 0.10, 0.0, None, ("house-judge",))]
    cases, totals, _ = aggregate(unknown, {"c": CaseMeta(id="c")})
    assert cases[0].cost_usd == pytest.approx(0.50), "the agent's cost is still known"
    assert cases[0].judge_cost_usd is None and cases[0].total_cost_usd is None
    assert totals.judge_cost_usd is None and totals.total_cost_usd is None
    assert totals.judge_cost_unpriced_models == ["house-judge"]


def _run(attempts: list[AttemptRecord]) -> RunReport:
    cases, totals, _ = aggregate(attempts, {"c": CaseMeta(id="c")})
    return RunReport(
        run_id="r",
        started_at="",
        finished_at="",
        duration_s=0,
        mode="live",
        repeat=1,
        exit_status=0,
        pytest_exit_status=0,
        totals=totals,
        suite=suite_stats([]),
        cases=cases,
    )


def test_the_budget_estimates_from_the_baselines_whole_spend(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(_run([_attempt(1, 0.10, 0.04, 0.02)]).model_dump_json())
    prior = baseline_prior(path)
    assert prior.by_case["c"] == pytest.approx(0.16) and prior.overall == pytest.approx(0.16)


def test_a_judge_without_a_price_is_said_unknown_in_the_summaries_never_zero() -> None:
    report = _run([_attempt(1, 0.10, 0.04, None, ("house-judge",))])
    assert cost_lines(report) == [
        "cost: unknown (agent $0.1000, user $0.0400, judge unknown)",
        "judge cost: unknown: no price for model(s) house-judge (name them in nodeval_prices)",
    ]
    assert "the judge's calls unknown" in markdown(report)


def test_the_markdown_summary_splits_the_spend() -> None:
    text = markdown(_run([_attempt(1, 0.10, 0.04, 0.02)]))
    assert (
        "the agent's calls $0.1000 over 1 attempt(s) that reported a cost; the simulated "
        "user's calls $0.0400; the judge's calls $0.0200; $0.1600 in all;"
    ) in text


def test_an_agent_alone_keeps_the_one_figure() -> None:
    report = _run([_attempt(1, 0.10, 0.0, 0.0)])
    assert cost_lines(report) == ["cost: $0.1000, $0.1000 per attempt"]
    assert "the simulated user" not in markdown(report)
