"""--nodeval-from-turn (issue 30): a live attempt replays the first N-1 user turns from the
case's journal, requests not compared, and calls the model only from turn N on, counted at
the LLM fake that answers it.

The case is scenarios/multi-turn-refund with its mock provider swapped for Anthropic's API
on the local fake, scripted alike, so the fake sees every model call the attempt makes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.case.directory import load_case
from pytest_nodeval.errors import NodevalError
from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.runner.session import (
    AttemptSettings,
    Observed,
    from_turn_problem,
    run_agent_case,
    run_case,
)
from pytest_nodeval_fakes.llm import LLMFake

SEED = Path(__file__).parents[2] / "scenarios" / "multi-turn-refund"
SHIPPED = "Order A-1042 has shipped, so it qualifies for a refund. Shall I go ahead?"
# The mock script of multi-turn-refund, as the LLM fake's rules.
SCRIPT = {
    "rules": [
        {"when": {"after_tool_result": True}, "respond": {"text": SHIPPED}},
        {
            "when": {"last_user_contains": "refund"},
            "respond": {"text": "I can help with that. What is the order number?"},
        },
        {
            "when": {"last_user_contains": "A-1042"},
            "respond": {
                "tool_calls": [{"name": "code_exec", "args": {"code": "print('shipped')"}}]
            },
        },
        {
            "when": {"last_user_contains": "Yes"},
            "respond": {"text": "Done: refund for order A-1042 is on its way."},
        },
    ]
}


@pytest.fixture
def case_dir(tmp_path: Path) -> Path:
    """multi-turn-refund on the Anthropic API of the LLM fake, recorded against it."""
    directory = tmp_path / "multi-turn-refund"
    shutil.copytree(SEED, directory, ignore=shutil.ignore_patterns("journal"))
    config_path = directory / "input" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["providers"] = [
        {"name": "anthropic", "model": "claude-sonnet-4-6", "base_url": "fake", "max_retries": 0}
    ]
    config_path.write_text(yaml.safe_dump(config))
    (directory / "input" / "llm.yaml").write_text(yaml.safe_dump(SCRIPT))
    with LLMFake(SCRIPT) as fake:
        recorded = _run(directory, "record", tmp_path / "recorded", fake)
    assert recorded.status == "ok", recorded.metrics()
    assert len(fake.requests) == 4  # turns 1 and 3 one call each, turn 2 two (a tool call)
    return directory


def _run(
    directory: Path, mode: str, out: Path, fake: Any, from_turn: int | None = None
) -> Observed:
    settings = AttemptSettings(mode=mode, world_backend="local", from_turn=from_turn)  # type: ignore[arg-type]
    return run_case(load_case(directory), settings, out, fakes={"llm": fake})


def _last_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "(tool result)"


@pytest.mark.parametrize(("turn", "calls"), [(3, 1), (2, 3), (1, 4)])
def test_model_calls_start_at_the_turn_counted_at_the_fake(
    case_dir: Path, tmp_path: Path, turn: int, calls: int
) -> None:
    with LLMFake(SCRIPT) as fake:
        observed = _run(case_dir, "live", tmp_path / "live", fake, from_turn=turn)
    assert observed.status == "ok", observed.metrics()
    assert len(fake.requests) == calls
    asked = [_last_user_text(r.body) for r in fake.requests]
    inputs = ["I want a refund.", "The order is A-1042.", "Yes, please go ahead."]
    assert asked[0] == inputs[turn - 1]
    # The live turn's request carries the whole conversation, the replayed turns included.
    assert len(fake.requests[0].body["messages"]) == 1 + 2 * (turn - 1) + (2 if turn == 3 else 0)
    # Assertions see the whole session: every input and output, replayed or live.
    assert [e.payload.text for e in observed.events if e.type == "io.input"] == inputs
    assert observed.output == "Done: refund for order A-1042 is on its way."
    assert observed.live_from_turn == turn


def test_the_journal_marks_where_live_begins(case_dir: Path, tmp_path: Path) -> None:
    with LLMFake(SCRIPT) as fake:
        observed = _run(case_dir, "live", tmp_path / "live", fake, from_turn=3)
    events = read_journal(tmp_path / "live").events
    marks = [e for e in events if e.type == "session.live_from"]
    assert len(marks) == 1
    golden = load_case(case_dir).journal().header.session_id
    assert marks[0].payload_dict() == {"turn": 3, "replayed_session": golden}
    after = [e.type for e in events if e.seq > marks[0].seq]
    assert after[0] == "io.input" and "llm.request" in after
    # Before the mark: the recorded answers, served; after it: the fake's, live.
    assert [e.seq for e in observed.live_events][0] == marks[0].seq
    assert sum(e.type == "llm.request" for e in observed.live_events) == 1


def test_a_new_system_prompt_does_not_stop_the_replayed_turns(
    case_dir: Path, tmp_path: Path
) -> None:
    config_path = case_dir / "input" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["system_prompt"] = "You are a terse support agent. Confirm before any refund."
    config_path.write_text(yaml.safe_dump(config))
    with LLMFake(SCRIPT) as fake:
        observed = _run(case_dir, "live", tmp_path / "live", fake, from_turn=3)
    assert observed.divergence is None and observed.status == "ok", observed.metrics()
    assert [r.body["system"] for r in fake.requests] == [config["system_prompt"]]
    # The replayed requests are journaled as the agent sent them now, with the recorded answers.
    requests = [e for e in observed.events if e.type == "llm.request"]
    assert {r.payload.body["system"] for r in requests} == {config["system_prompt"]}


def test_record_mode_installs_the_whole_session(case_dir: Path, tmp_path: Path) -> None:
    with LLMFake(SCRIPT) as fake:
        _run(case_dir, "record", tmp_path / "rerecorded", fake, from_turn=3)
    assert len(fake.requests) == 1
    installed = load_case(case_dir).journal().events
    assert [e.payload.text for e in installed if e.type == "io.input"] == [
        "I want a refund.",
        "The order is A-1042.",
        "Yes, please go ahead.",
    ]
    assert sum(e.type == "llm.request" for e in installed) == 4
    assert [e.payload.turn for e in installed if e.type == "session.live_from"] == [3]


def test_cases_that_cannot_continue_from_the_turn_are_refused(
    case_dir: Path, tmp_path: Path
) -> None:
    case = load_case(case_dir)
    assert from_turn_problem(case, 3) is None
    assert "has 3 user turn(s) (3 in its journal, 3 in input/inputs.yaml)" in str(
        from_turn_problem(case, 4)
    )
    shutil.rmtree(case_dir / "journal")
    assert "has no journal" in str(from_turn_problem(load_case(case_dir), 2))


def test_an_own_agent_is_refused_in_one_line(case_dir: Path, tmp_path: Path) -> None:
    settings = AttemptSettings(mode="live", from_turn=2)
    with pytest.raises(NodevalError, match="it is run by your own agent"):
        run_agent_case(lambda ctx: None, load_case(case_dir), settings, tmp_path / "own")
