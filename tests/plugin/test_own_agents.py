"""Your own agent without glue (issue 20): the SDK clients find the running fake, and events
carry the turn of the input they answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

FOREIGN = """
import pytest

def agent(ctx):
    anthropic, openai = ctx.anthropic(), ctx.openai()
    for text in ctx.inputs():
        first = anthropic.messages.create(model="claude-test", max_tokens=64,
                                          messages=[{"role": "user", "content": text}])
        second = openai.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": text}])
        ctx.output(first.content[0].text + " / " + second.choices[0].message.content)

@pytest.mark.nodeval_case("foreign")
def test_foreign(nodeval_attempt, nodeval_llm_server):
    observed = nodeval_attempt.run(agent)
    assert observed.status == "ok", observed.metrics()
"""


def _case(project: pytest.Pytester) -> Path:
    case_dir = project.path / "scenarios" / "foreign"
    (case_dir / "input").mkdir(parents=True)
    (case_dir / "case.yaml").write_text("id: foreign\n")
    (case_dir / "assertions.yaml").write_text(yaml.safe_dump([{"kind": "output_contains", "text": "ready"}]))
    (case_dir / "input" / "inputs.yaml").write_text(yaml.safe_dump(
        {"user": {"kind": "scripted", "inputs": ["first?", "second?"]}}))
    (case_dir / "input" / "llm.yaml").write_text(yaml.safe_dump({"responses": [{"text": "ready"}] * 4}))
    (project.path / "scenarios" / "test_foreign.py").write_text(FOREIGN)
    return case_dir


def test_sdk_clients_use_the_running_fake_without_a_key_or_base_url(nodeval_project: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for env in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    case_dir = _case(nodeval_project)
    nodeval_project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=1)
    events = [json.loads(line) for line in (case_dir / "journal" / "events.jsonl").read_text().splitlines()]
    assert [e["payload"]["provider"] for e in events if e["type"] == "llm.request"] == ["anthropic", "openai"] * 2
    nodeval_project.runpytest().assert_outcomes(passed=1)  # and it replays


def test_own_agent_events_carry_the_turn_of_their_input(nodeval_project: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for env in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    case_dir = _case(nodeval_project)
    nodeval_project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=1)
    events = [json.loads(line) for line in (case_dir / "journal" / "events.jsonl").read_text().splitlines()]
    turns = [(e["type"], e["turn"]) for e in events if e["type"] in ("io.input", "llm.request", "io.output")]
    assert turns == [("io.input", 1), ("llm.request", 1), ("llm.request", 1), ("io.output", 1),
                     ("io.input", 2), ("llm.request", 2), ("llm.request", 2), ("io.output", 2)]
