"""Your own agent without glue (issue 20): the SDK clients find the running fake, and events
carry the turn of the input they answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

FOREIGN = """
import pytest

def agent(ctx):
    anthropic, openai = ctx.anthropic(), ctx.openai()
    for text in ctx.inputs():
        first = anthropic.messages.create(model="claude-test", max_tokens=64,
                                          messages=[{"role": "user", "content": text}])
        second = openai.chat.completions.create(model="gpt-test",
                                                messages=[{"role": "user", "content": text}])
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
    (case_dir / "assertions.yaml").write_text(
        yaml.safe_dump([{"kind": "output_contains", "text": "ready"}])
    )
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["first?", "second?"]}})
    )
    (case_dir / "input" / "llm.yaml").write_text(
        yaml.safe_dump({"responses": [{"text": "ready"}] * 4})
    )
    (project.path / "scenarios" / "test_foreign.py").write_text(FOREIGN)
    return case_dir


def _recorded_events(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, Any]]:
    """The foreign case recorded with no key and no base_url: the clients find the running fake."""
    for env in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    case_dir = _case(project)
    project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=1)
    return [
        json.loads(line)
        for line in (case_dir / "journal" / "events.jsonl").read_text().splitlines()
    ]


def test_sdk_clients_use_the_running_fake_and_events_carry_their_turn(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _recorded_events(nodeval_project, monkeypatch)
    assert [e["payload"]["provider"] for e in events if e["type"] == "llm.request"] == [
        "anthropic",
        "openai",
    ] * 2
    turns = [
        (e["type"], e["turn"])
        for e in events
        if e["type"] in ("io.input", "llm.request", "io.output")
    ]
    assert turns == [
        ("io.input", 1),
        ("llm.request", 1),
        ("llm.request", 1),
        ("io.output", 1),
        ("io.input", 2),
        ("llm.request", 2),
        ("llm.request", 2),
        ("io.output", 2),
    ]
    nodeval_project.runpytest().assert_outcomes(passed=1)  # and it replays


# -- the foreign-agent worked example (README): written against the SDKs, not for nodeval ----------

SHOP = '''
"""A foreign agent: its own tool loop on the anthropic SDK, and a streaming async OpenAI helper."""
import json
from pathlib import Path
from typing import Any

CALLS = Path(__file__).with_name("refund-calls.txt")


def refund(order_id):
    with CALLS.open("a") as out:  # a side effect the replay must never repeat
        out.write(order_id + "\\n")
    return {"order_id": order_id, "refunded": True}


TOOLS = [{"name": "refund", "description": "Refund an order.",
          "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}}}]


class Bot:
    def __init__(self, client):
        self.client = client

    def reply(self, text):
        messages = [{"role": "user", "content": text}]
        while True:
            answer = self.client.messages.create(model="claude-test", max_tokens=256, tools=TOOLS,
                                                 messages=messages)
            calls = [b for b in answer.content if b.type == "tool_use"]
            if not calls:
                return "".join(b.text for b in answer.content if b.type == "text")
            messages.append({"role": "assistant",
                             "content": [b.model_dump() for b in answer.content]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c.id,
                 "content": json.dumps(refund(**c.input))} for c in calls]})


async def summarise(client, text):
    stream = await client.chat.completions.create(model="gpt-test", stream=True,
                                                  messages=[{"role": "user", "content": text}])
    return "".join(
        [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    )
'''

WORKED = """
import pytest
import shop
from pytest_nodeval import tool

shop.refund = tool(shop.refund)  # the foreign code looks it up by name


def agent(ctx):
    bot = shop.Bot(ctx.anthropic())
    for text in ctx.inputs():
        ctx.output(bot.reply(text))


async def streaming_agent(ctx):
    client = ctx.async_openai()
    for text in ctx.inputs():
        ctx.output(await shop.summarise(client, text))


@pytest.mark.nodeval_case("refunds")
def test_refunds(nodeval_attempt, nodeval_llm_server):
    observed = nodeval_attempt.run(agent)
    assert observed.status == "ok", observed.metrics()


@pytest.mark.nodeval_case("summaries")
def test_summaries(nodeval_attempt, nodeval_llm_server):
    observed = nodeval_attempt.run(streaming_agent)
    assert observed.status == "ok", observed.metrics()
"""


def _worked_case(root: Path, case_id: str, script: dict, expected: str) -> None:
    case_dir = root / case_id
    (case_dir / "input").mkdir(parents=True)
    (case_dir / "case.yaml").write_text(f"id: {case_id}\n")
    (case_dir / "assertions.yaml").write_text(
        yaml.safe_dump([{"kind": "output_contains", "text": expected}])
    )
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["Please refund order A-1042."]}})
    )
    (case_dir / "input" / "llm.yaml").write_text(yaml.safe_dump(script))


def test_the_foreign_agent_example_records_against_the_fake_and_replays_offline(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, block_network: Any
) -> None:
    for env in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    root = nodeval_project.path / "scenarios"
    (root / "shop.py").write_text(SHOP)
    (root / "test_worked.py").write_text(WORKED)
    _worked_case(
        root,
        "refunds",
        {
            "rules": [
                {
                    "when": {"after_tool_result": True},
                    "respond": {"text": "Order A-1042 is refunded."},
                },
                {
                    "when": {"last_user_contains": "refund"},
                    "respond": {"tool_calls": [{"name": "refund", "args": {"order_id": "A-1042"}}]},
                },
            ]
        },
        "refunded",
    )
    _worked_case(
        root,
        "summaries",
        {"responses": [{"text": "A refund was asked for order A-1042."}]},
        "A-1042",
    )
    nodeval_project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=2)
    calls = root / "refund-calls.txt"
    assert calls.read_text() == "A-1042\n", "the tool ran once, live"
    events = [
        json.loads(line)
        for line in (root / "summaries" / "journal" / "events.jsonl").read_text().splitlines()
    ]
    assert any(e["type"] == "llm.response" and e["payload"].get("sse") for e in events), "streamed"
    block_network()
    nodeval_project.runpytest().assert_outcomes(passed=2)
    assert calls.read_text() == "A-1042\n", "replay served the tool's result and never ran it"


PERSONA_AGENT = """
import pytest

def agent(ctx):
    client = ctx.anthropic()
    for text in ctx.inputs():
        reply = client.messages.create(model="claude-test", max_tokens=64,
                                       messages=[{"role": "user", "content": text}])
        ctx.output(reply.content[0].text)

@pytest.mark.nodeval_case("talk")
def test_talk(nodeval_attempt, nodeval_llm_server):
    nodeval_attempt.run(agent)
"""


def test_an_own_agents_persona_ending_is_kept_in_its_session_end(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    case_dir = nodeval_project.path / "scenarios" / "talk"
    (case_dir / "input").mkdir(parents=True)
    (case_dir / "case.yaml").write_text("id: talk\n")
    (case_dir / "assertions.yaml").write_text("[]\n")
    persona = {
        "kind": "persona",
        "provider": {"name": "anthropic", "model": "claude-test", "base_url": "fake"},
        "persona": "A customer.",
        "reason": "Has a question.",
        "first_message": "Hello?",
        "max_turns": 1,
    }
    (case_dir / "input" / "inputs.yaml").write_text(yaml.safe_dump({"user": persona}))
    (case_dir / "input" / "llm.yaml").write_text(yaml.safe_dump({"responses": [{"text": "Hi"}]}))
    (nodeval_project.path / "scenarios" / "test_talk.py").write_text(PERSONA_AGENT)
    # The bound test is the verdict of an own agent; the ending is there for it and the report.
    nodeval_project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=1)
    lines = (case_dir / "journal" / "events.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["payload"]["user_ending"] == "turn_limit"
