"""Agents built with each framework, written as the framework's docs write them (no client,
base_url or key handed over; only nodeval's `@tool` on the side-effecting function), record
keylessly against the fake LLM, replay with sockets blocked and no key without running the
tool, and diverge loudly when their instructions change (issue 26, docs/frameworks.md).

Each framework gets four cases (notes-1 .. notes-4, each saving its own note), so
`--nodeval-concurrency 4` has four different cases in flight at once.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

CASES = [f"notes-{i}" for i in range(1, 5)]
KEY_ENVS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
INSTRUCTIONS = 'INSTRUCTIONS = os.environ.get("NOTES_INSTRUCTIONS", "You keep the user\'s notes.")'
SAVE_BODY = """
    with open(os.environ["NOTES_FILE"], "a") as out:  # the side effect replay must not repeat
        out.write(text + "\\n")
    return f"saved {text!r}"
"""


@dataclass(frozen=True)
class Framework:
    requires: tuple[str, ...]
    source: str
    final_tool: str | None = None
    """The tool a framework's agent calls to answer (smolagents' final_answer), if any."""
    after_tool: tuple[tuple[str, object], ...] = (("after_tool_result", True),)
    """How the fake tells a request that carries the tool's result (smolagents sends it as
    the user's "Observation: ...")."""


def _agent(source: str) -> str:
    return (
        textwrap.dedent(source)
        .replace("<INSTRUCTIONS>", INSTRUCTIONS)
        .replace("<SAVE_BODY>", SAVE_BODY)
    )


FRAMEWORKS = {
    "openai-agents-sync": Framework(
        ("agents",),
        """
        import os
        from agents import Agent, Runner, function_tool
        from pytest_nodeval import tool
        <INSTRUCTIONS>

        @function_tool
        @tool
        def save_note(text: str) -> str:
            \"\"\"Save a note for the user.\"\"\"<SAVE_BODY>
        assistant = Agent(name="Notes", instructions=INSTRUCTIONS, model="gpt-4.1-mini",
                          tools=[save_note])

        def agent(ctx):
            for text in ctx.inputs():
                ctx.output(Runner.run_sync(assistant, text).final_output)
        """,
    ),
    "openai-agents-async": Framework(
        ("agents",),
        """
        import os
        from agents import Agent, Runner, function_tool
        from pytest_nodeval import tool
        <INSTRUCTIONS>

        @tool
        @function_tool
        async def save_note(text: str) -> str:
            \"\"\"Save a note for the user.\"\"\"<SAVE_BODY>
        assistant = Agent(name="Notes", instructions=INSTRUCTIONS, model="gpt-4.1-mini",
                          tools=[save_note])

        async def agent(ctx):
            for text in ctx.inputs():
                result = await Runner.run(assistant, text)
                ctx.output(result.final_output)
        """,
    ),
    "langgraph-anthropic": Framework(
        ("langchain", "langchain_anthropic"),
        """
        import os
        from langchain.agents import create_agent
        from langchain.tools import tool as langchain_tool
        from langchain_anthropic import ChatAnthropic
        from pytest_nodeval import tool
        <INSTRUCTIONS>

        @langchain_tool
        @tool
        def save_note(text: str) -> str:
            \"\"\"Save a note for the user.\"\"\"<SAVE_BODY>
        graph = create_agent(ChatAnthropic(model="claude-sonnet-4-6"), [save_note],
                             system_prompt=INSTRUCTIONS)

        def agent(ctx):
            for text in ctx.inputs():
                state = graph.invoke({"messages": [{"role": "user", "content": text}]})
                ctx.output(state["messages"][-1].text)
        """,
    ),
    "langgraph-openai": Framework(
        ("langchain", "langchain_openai"),
        """
        import os
        from langchain.agents import create_agent
        from langchain.tools import tool as langchain_tool
        from langchain_openai import ChatOpenAI
        from pytest_nodeval import tool
        <INSTRUCTIONS>

        @tool
        @langchain_tool
        def save_note(text: str) -> str:
            \"\"\"Save a note for the user.\"\"\"<SAVE_BODY>
        graph = create_agent(ChatOpenAI(model="gpt-4.1-mini"), [save_note],
                             system_prompt=INSTRUCTIONS)

        async def agent(ctx):
            for text in ctx.inputs():
                state = await graph.ainvoke({"messages": [{"role": "user", "content": text}]})
                ctx.output(state["messages"][-1].text)
        """,
    ),
    "pydantic-ai": Framework(
        ("pydantic_ai",),
        """
        import os
        from pydantic_ai import Agent, RunContext
        from pytest_nodeval import tool
        <INSTRUCTIONS>

        notes_agent = Agent("anthropic:claude-sonnet-4-6", instructions=INSTRUCTIONS)

        @notes_agent.tool
        @tool
        def save_note(ctx: RunContext[None], text: str) -> str:
            \"\"\"Save a note for the user.\"\"\"<SAVE_BODY>
        def agent(ctx):
            for text in ctx.inputs():
                ctx.output(notes_agent.run_sync(text).output)
        """,
    ),
    "google-genai": Framework(
        ("google.genai",),
        """
        import os
        from google import genai
        from google.genai import types
        from pytest_nodeval import tool
        <INSTRUCTIONS>

        @tool
        def save_note(text: str) -> str:
            \"\"\"Save a note for the user.\"\"\"<SAVE_BODY>
        client = genai.Client()

        def agent(ctx):
            config = types.GenerateContentConfig(system_instruction=INSTRUCTIONS,
                                                 tools=[save_note])
            for text in ctx.inputs():
                response = client.models.generate_content(
                    model="gemini-2.5-flash", contents=text, config=config)
                ctx.output(response.text)
        """,
    ),
    "smolagents": Framework(
        ("smolagents",),
        """
        import os
        from smolagents import OpenAIServerModel, ToolCallingAgent
        from smolagents import tool as smolagents_tool
        from pytest_nodeval import tool
        <INSTRUCTIONS>

        @tool
        @smolagents_tool
        def save_note(text: str) -> str:
            \"\"\"Save a note for the user.

            Args:
                text: The note.
            \"\"\"<SAVE_BODY>
        def agent(ctx):
            runner = ToolCallingAgent(tools=[save_note],
                                      model=OpenAIServerModel(model_id="gpt-4.1-mini"),
                                      instructions=INSTRUCTIONS)
            for text in ctx.inputs():
                ctx.output(str(runner.run(text)))
        """,
        final_tool="final_answer",
        after_tool=(("last_user_contains", "saved 'note"),),
    ),
}

TEST_CASE = """
@pytest.mark.nodeval_case("{case_id}")
def test_{name}(nodeval_attempt, request):
    run(nodeval_attempt, request)
"""
TEST_HEAD = """
import pytest
from notes_agent import agent

def run(nodeval_attempt, request):
    if request.config.getoption("--nodeval-mode") == "record":
        request.getfixturevalue("nodeval_llm_server")
    observed = nodeval_attempt.run(agent)
    assert observed.status == "ok", observed.metrics()
"""


# Replay must reach nothing: every connect in the test process fails (xdist talks over pipes).
NO_NETWORK = """
import socket
import pytest

@pytest.fixture(autouse=True)
def _no_network(monkeypatch, request):
    if request.config.getoption("--nodeval-mode") == "record":
        return
    def refuse(sock, address, *args):
        raise OSError(f"the network is blocked in replay: {address}")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
"""


def _script(note: str, framework: Framework) -> dict[str, object]:
    answer: dict[str, object] = {"text": f"Saved {note}."}
    if framework.final_tool is not None:
        answer = {
            "tool_calls": [{"name": framework.final_tool, "args": {"answer": f"Saved {note}."}}]
        }
    return {
        "rules": [
            {"when": dict(framework.after_tool), "respond": answer},
            {"respond": {"tool_calls": [{"name": "save_note", "args": {"text": note}}]}},
        ]
    }


def _project(pytester: pytest.Pytester, framework: Framework) -> Path:
    pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\nnodeval_cases = ["scenarios"]\npythonpath = ["."]\n'
    )
    pytester.makeconftest(NO_NETWORK)
    (pytester.path / "notes_agent.py").write_text(_agent(framework.source))
    scenarios = pytester.path / "scenarios"
    for index, case_id in enumerate(CASES, 1):
        note = f"note {index}"
        case = scenarios / case_id
        (case / "input").mkdir(parents=True)
        (case / "case.yaml").write_text(f"id: {case_id}\n")
        (case / "assertions.yaml").write_text(
            yaml.safe_dump(
                [
                    {"kind": "tool_called", "tool": "save_note", "args": {"text": note}},
                    {"kind": "output_contains", "text": f"Saved {note}."},
                ]
            )
        )
        (case / "input" / "inputs.yaml").write_text(
            yaml.safe_dump({"user": {"kind": "scripted", "inputs": [f"Remember: {note}"]}})
        )
        (case / "input" / "llm.yaml").write_text(yaml.safe_dump(_script(note, framework)))
    tests = [TEST_CASE.format(case_id=c, name=c.replace("-", "_")) for c in CASES]
    (scenarios / "test_notes.py").write_text(TEST_HEAD + "".join(tests))
    return scenarios


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_a_framework_agent_records_keylessly_and_replays_offline(
    name: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    framework = FRAMEWORKS[name]
    for module in framework.requires:
        pytest.importorskip(module, reason=f"the frameworks extra is not installed ({module})")
    for env in KEY_ENVS:
        monkeypatch.delenv(env, raising=False)
    notes = tmp_path / "notes.txt"
    monkeypatch.setenv("NOTES_FILE", str(notes))
    scenarios = _project(pytester, framework)

    recorded = pytester.runpytest_subprocess("--nodeval-mode", "record", "-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=4)
    assert sorted(notes.read_text().splitlines()) == [f"note {i}" for i in range(1, 5)]
    for case_id in CASES:
        events = (scenarios / case_id / "journal" / "events.jsonl").read_text()
        assert events.count('"llm.request"') >= 2, f"{case_id}: the model calls went unjournaled"
        assert '"args":{"text":"note' in events.replace(" ", ""), "the real parameters"

    before = notes.read_text()
    replayed = pytester.runpytest_subprocess("--repeat", "3", "-n", "2", "-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=12)
    concurrent = pytester.runpytest_subprocess(
        "--nodeval-concurrency", "4", "-p", "no:cacheprovider"
    )
    concurrent.assert_outcomes(passed=4)
    assert notes.read_text() == before, "replay ran the tool's body"

    monkeypatch.setenv("NOTES_INSTRUCTIONS", "You keep notes, briefly.")
    changed = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    changed.assert_outcomes(failed=4)
    changed.stdout.fnmatch_lines(["*replay of 'scenarios/notes-1' diverged from its journal*"])
    changed.stdout.fnmatch_lines(["*You keep notes, briefly.*"])
    assert notes.read_text() == before
