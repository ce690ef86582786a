"""The simulated persona and the judge: live against fakes.llm, then replayed offline."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.agent.config import ProviderSpec
from pytest_nodeval.case.directory import load_case
from pytest_nodeval.people.inputs import PersonaUserSpec
from pytest_nodeval.people.judge import make_grader
from pytest_nodeval.people.persona import PersonaUser
from pytest_nodeval.report.models import RunReport
from pytest_nodeval.runner.session import AttemptSettings, Observed, run_case
from pytest_nodeval_fakes.llm import LLMFake

from ..conftest import PROJECT_INI

SEED = Path(__file__).parents[2] / "scenarios" / "persona-refund"


def _copy_case(root: Path) -> Path:
    target = root / "scenarios" / "persona-refund"
    shutil.copytree(SEED, target, ignore=shutil.ignore_patterns("journal"))
    return target


def _record(case_dir: Path, out: Path) -> Observed:
    case = load_case(case_dir)
    rubrics = [a for a in case.assertions if a.kind == "judge"]
    return run_case(
        case,
        AttemptSettings(mode="record", seed=1),
        out,
        grade=make_grader(rubrics, None, None, False),
    )


def _user_turns(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.payload.text, e.payload.source) for e in events if e.type == "io.input"]


def test_a_persona_conversation_records_and_replays_with_no_model_call(
    tmp_path: Path, block_network: Any
) -> None:
    case_dir = _copy_case(tmp_path)
    live = _record(case_dir, tmp_path / "rec")
    assert live.status == "ok" and live.end.user_ending == "done"
    assert _user_turns(live.events) == [
        ("Hi, my order A-1042 arrived damaged. I want a refund.", "persona")
    ]
    assert live.judged["Confirms the refund for the right order"]["verdict"] == "pass"
    attempts = block_network()
    replayed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "rep"
    )
    assert replayed.divergence is None and attempts == []
    assert _user_turns(replayed.events) == _user_turns(live.events)
    assert replayed.end.user_ending == "done"


def test_a_persona_asked_mid_turn_sees_its_own_last_message_before_the_question() -> None:
    spec = PersonaUserSpec(
        kind="persona",
        provider=ProviderSpec(name="anthropic", model="claude-sonnet-4-6", base_url="fake"),
        persona="A customer with a damaged parcel",
        reason="wants a refund",
        first_message="My parcel arrived damaged.",
    )
    with LLMFake({"responses": [{"text": "Order A-1042."}]}) as fake:
        persona = PersonaUser(spec, fake.url)
        opening = persona.next_input(None)
        assert opening is not None and opening.text == "My parcel arrived damaged."
        assert persona.answer("ask_1", "Which order is it?").text == "Order A-1042."
        sent = [(m["role"], m["content"]) for m in fake.requests[0].body["messages"]]
    # The persona's own words are the assistant's side, then the question: roles alternate.
    assert [role for role, _ in sent] == ["user", "assistant", "user"]
    assert "My parcel arrived damaged." in str(sent[1][1])
    assert "Which order is it?" in str(sent[2][1])


def _write_llm_script(case_dir: Path, **changes: Any) -> None:
    path = case_dir / "input" / "llm.yaml"
    script = yaml.safe_load(path.read_text())
    for rule in script["rules"]:
        for needle, respond in changes.items():
            if needle in rule["when"].get("system_contains", "") and (
                needle != "playing a USER"
                or "refund is" in rule["when"].get("last_user_contains", "")
            ):
                rule["respond"] = respond
    path.write_text(yaml.safe_dump(script))


def _run(project: pytest.Pytester, *args: str) -> RunReport:
    project.runpytest(*args)
    return RunReport.model_validate_json((project.path / "reports/latest/report.json").read_bytes())


def test_rubrics_are_skipped_in_deterministic_and_graded_in_full_mode(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(PROJECT_INI)
    case_dir = _copy_case(pytester.path)
    _record(case_dir, pytester.path / "rec")
    deterministic = _run(pytester).case("persona-refund").attempts[0]
    assert (
        deterministic.assertions[-1].kind == "judge"
        and deterministic.assertions[-1].status == "skipped"
    )
    assert deterministic.judged == {}
    full = _run(pytester, "--nodeval-mode", "full").case("persona-refund").attempts[0]
    assert full.assertions[-1].status == "passed"
    assert full.judged == {"Confirms the refund for the right order": "pass"}


def test_a_judge_answering_garbage_is_inconclusive_with_its_raw_answer(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(PROJECT_INI)
    case_dir = _copy_case(pytester.path)
    _record(case_dir, pytester.path / "rec")
    _write_llm_script(case_dir, **{"strict evaluator": {"text": "Hmm, hard to say. Maybe?"}})
    result = pytester.runpytest("--nodeval-mode", "full")
    result.assert_outcomes(passed=1)  # an unsure judge is not the agent failing
    report = RunReport.model_validate_json(
        (pytester.path / "reports/latest/report.json").read_bytes()
    )
    attempt = report.case("persona-refund").attempts[0]
    judge = attempt.assertions[-1]
    assert attempt.judged == {"Confirms the refund for the right order": "inconclusive"}
    assert judge.status == "skipped" and "inconclusive" in judge.message
    assert "raw answer: 'Hmm, hard to say. Maybe?'" in judge.message


def test_a_persona_that_never_says_done_ends_at_the_turn_limit(tmp_path: Path) -> None:
    case_dir = _copy_case(tmp_path)
    _write_llm_script(
        case_dir, **{"playing a USER": {"text": "Hmm, and what else can you tell me?"}}
    )
    observed = run_case(
        load_case(case_dir), AttemptSettings(mode="live", seed=1), tmp_path / "live"
    )
    assert observed.end.user_ending == "turn_limit"
    assert len(_user_turns(observed.events)) == 4  # max_turns in inputs.yaml
