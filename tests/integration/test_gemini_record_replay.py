"""The real google-genai SDK, recorded against the local fake and replayed with sockets blocked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval import AgentContext
from pytest_nodeval.case.directory import load_case
from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.runner.session import AttemptSettings, run_case
from pytest_nodeval_fakes.llm import LLMFake

from ..conftest import write_case
from .test_sdk_record_replay import _agent_case, _run

# Shaped like a real Google API key, so the pattern redactor would catch it anywhere.
GEMINI_KEY = "AIzaSyNodevalTestSecret0123456789abcdefg"
SCRIPT = {
    "responses": [
        {
            "text": "Let me look.",
            "tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1042"}}],
        },
        {
            "text": "Order A-1042 has shipped.",
            "usage": {"input_tokens": 40, "output_tokens": 7, "cached_tokens": 32},
        },
    ]
}


def _declarations() -> Any:
    from google.genai import types

    return [
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name="lookup_order",
                    description="Find an order.",
                    parameters_json_schema={
                        "type": "object",
                        "properties": {"order_id": {"type": "string"}},
                    },
                )
            ]
        )
    ]


def _record_then_replay(
    agent_factory: Any, tmp_path: Path, block_network: Any
) -> tuple[list[Any], list[Any]]:
    case_dir = _agent_case(tmp_path, "sdk-case")
    recorded: list[Any] = []
    with LLMFake(SCRIPT) as fake:
        _run(agent_factory(fake.url, recorded), case_dir, "record", tmp_path / "rec")
    replayed: list[Any] = []
    block_network()  # the fake is stopped; now any socket use fails loudly
    _run(agent_factory("http://127.0.0.1:9", replayed), case_dir, "deterministic", tmp_path / "rep")
    return recorded, replayed


def _answer(response: Any) -> dict[str, Any]:
    # The raw HTTP headers (content-length, date) are the transport's, not the answer's.
    return response.model_dump(exclude={"sdk_http_response"})


def _gemini_agent(url: str, sink: list[Any], *, stream: bool) -> Any:
    from google.genai import types

    def agent(ctx: AgentContext) -> None:
        client = ctx.gemini(api_key=GEMINI_KEY, http_options={"base_url": url})
        config = types.GenerateContentConfig(tools=_declarations(), system_instruction="Be brief.")
        for text in ctx.inputs():
            contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=text)])]
            for _ in range(2):
                if stream:
                    chunks = list(
                        client.models.generate_content_stream(
                            model="gemini-2.5-flash", contents=contents, config=config
                        )
                    )
                    parts = [p for c in chunks for p in c.candidates[0].content.parts]
                    sink.append([_answer(c) for c in chunks])
                else:
                    response = client.models.generate_content(
                        model="gemini-2.5-flash", contents=contents, config=config
                    )
                    parts = response.candidates[0].content.parts
                    sink.append(_answer(response))
                contents.append(types.Content(role="model", parts=parts))
                calls = [p.function_call for p in parts if p.function_call]
                if not calls:
                    ctx.output("".join(p.text or "" for p in parts))
                    break
                contents.append(
                    types.Content(
                        role="user",
                        parts=[
                            types.Part.from_function_response(
                                name=calls[0].name, response={"output": "shipped"}
                            )
                        ],
                    )
                )

    return agent


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_gemini_responses_are_identical_after_replay(
    stream: bool, tmp_path: Path, block_network: Any
) -> None:
    recorded, replayed = _record_then_replay(
        lambda url, sink: _gemini_agent(url, sink, stream=stream), tmp_path, block_network
    )
    assert len(recorded) == 2 and recorded == replayed
    last = recorded[-1][-1] if stream else recorded[-1]
    assert last["usage_metadata"]["cached_content_token_count"] == 32
    journal = read_journal(tmp_path / "sdk-case" / "journal")
    requests = [e.payload for e in journal.of_type("llm.request")]
    assert [r.stream for r in requests] == [stream, stream]
    assert requests[0].api == "gemini.generate_content" and requests[0].path.endswith(
        ":streamGenerateContent" if stream else ":generateContent"
    )
    usage = [e.payload.usage for e in journal.of_type("llm.response")]
    assert (usage[1].input_tokens, usage[1].output_tokens) == (40, 7)
    assert usage[1].cache_read_tokens == 32 and usage[1].model_extra == {}


def test_no_gemini_key_reaches_the_journal(tmp_path: Path) -> None:
    case_dir = _agent_case(tmp_path, "gemini-secret")

    def agent(ctx: AgentContext) -> None:
        client = ctx.gemini(api_key=GEMINI_KEY, http_options={"base_url": fake.url})
        for text in ctx.inputs():
            ctx.output(
                client.models.generate_content(model="gemini-2.5-flash", contents=text).text or ""
            )

    with LLMFake({"responses": [{"text": "ok"}]}, api_key=GEMINI_KEY) as fake:
        _run(agent, case_dir, "record", tmp_path / "rec")
        sent = fake.requests[0]
    assert sent.outcome == "text"  # the fake accepted the key: the SDK really sent it
    written = "".join(p.read_text() for p in (case_dir / "journal").iterdir())
    assert GEMINI_KEY not in written and "x-goog-api-key" not in written.lower()


def test_the_async_gemini_client_records_and_replays(tmp_path: Path, block_network: Any) -> None:
    def factory(url: str, sink: list[Any]) -> Any:
        async def agent(ctx: AgentContext) -> str:
            client = ctx.gemini(api_key=GEMINI_KEY, http_options={"base_url": url}).aio
            text = next(iter(ctx.inputs()))
            response = await client.models.generate_content(model="gemini-2.5-flash", contents=text)
            chunks = [
                c
                async for c in await client.models.generate_content_stream(
                    model="gemini-2.5-flash", contents=text
                )
            ]
            sink.append((response.text, "".join(c.text or "" for c in chunks)))
            return response.text or ""

        return agent

    case_dir = _agent_case(tmp_path, "async-gemini")
    recorded: list[Any] = []
    with LLMFake(
        {"responses": [{"text": "It shipped on Monday."}, {"text": "Streamed: it shipped."}]}
    ) as fake:
        _run(factory(fake.url, recorded), case_dir, "record", tmp_path / "rec")
        assert len(fake.requests) == 2  # through the journaled async client, not aiohttp
    block_network()
    replayed: list[Any] = []
    _run(factory("http://127.0.0.1:9", replayed), case_dir, "deterministic", tmp_path / "rep")
    assert recorded == replayed == [("It shipped on Monday.", "Streamed: it shipped.")]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_reference_engine_records_and_replays_through_gemini(
    stream: bool, tmp_path: Path, block_network: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "responses": [
            {"tool_calls": [{"name": "shell", "args": {"command": "echo 42"}}]},
            {"text": "The answer is 42."},
        ]
    }
    with LLMFake(script) as fake:
        case_dir = write_case(
            tmp_path,
            "engine",
            script=[],
            inputs=["What is the answer?"],
            tools=["shell"],
            record=False,
            providers=[
                {
                    "name": "gemini",
                    "model": "gemini-2.5-flash",
                    "base_url": fake.url,
                    "stream": stream,
                    "max_retries": 0,
                }
            ],
        )
        monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
        live = run_case(
            load_case(case_dir),
            AttemptSettings(mode="record", world_backend="local"),
            tmp_path / "rec",
        )
        monkeypatch.delenv("GEMINI_API_KEY")
        second = fake.requests[1].body
    assert live.status == "ok", live.metrics()
    # The call came without an id; the result goes back by name, with the call's thought signature.
    model_turn, result_turn = second["contents"][1], second["contents"][2]
    assert (
        "id" not in model_turn["parts"][0]["functionCall"]
        and model_turn["parts"][0]["thoughtSignature"]
    )
    assert result_turn["parts"][0]["functionResponse"]["name"] == "shell"
    assert "42" in result_turn["parts"][0]["functionResponse"]["response"]["output"]
    block_network()
    replayed = run_case(
        load_case(case_dir),
        AttemptSettings(mode="deterministic", world_backend="local"),
        tmp_path / "rep",
    )
    assert replayed.divergence is None and replayed.output == live.output == "The answer is 42."
    assert replayed.metrics()["llm_calls"] == 2 and replayed.metrics()["tool_calls"] == 1
    assert GEMINI_KEY not in (case_dir / "journal" / "events.jsonl").read_text()
    assert not os.environ.get("GEMINI_API_KEY")


SEED = Path(__file__).parents[2] / "scenarios" / "gemini-changelog"


def test_the_gemini_seed_scenario_runs_live_against_the_fake(tmp_path: Path) -> None:
    live = run_case(
        load_case(SEED),
        AttemptSettings(mode="live", seed=1, world_backend="local"),
        tmp_path / "live",
    )
    assert live.status == "ok", live.metrics()
    assert (
        live.output == "2.3.0 adds retries with backoff to the HTTP client and drops Python 3.10."
    )


def test_the_gemini_seed_scenario_replays_with_no_network(
    tmp_path: Path, block_network: Any
) -> None:
    attempts = block_network()
    replayed = run_case(load_case(SEED), AttemptSettings(mode="deterministic"), tmp_path / "rep")
    assert replayed.divergence is None and replayed.status == "ok"
    assert attempts == []
    usage = [e.payload.usage for e in replayed.events if e.type == "llm.response"]
    assert [(u.input_tokens, u.output_tokens) for u in usage] == [(96, 18), (171, 22)]
    assert usage[1].cache_read_tokens == 64


def test_a_gemini_persona_and_a_gemini_judge(tmp_path: Path, block_network: Any) -> None:
    import shutil

    from pytest_nodeval.people.judge import make_grader

    case_dir = tmp_path / "persona-refund"
    shutil.copytree(
        SEED.parent / "persona-refund", case_dir, ignore=shutil.ignore_patterns("journal")
    )
    gemini = {"name": "gemini", "model": "gemini-2.5-flash", "base_url": "fake", "max_retries": 0}
    for name, key in (("inputs.yaml", ("user", "provider")), ("config.yaml", ("providers",))):
        path = case_dir / "input" / name
        data = yaml.safe_load(path.read_text())
        if key == ("providers",):
            data["providers"] = [gemini]
        else:
            data["user"]["provider"] = gemini
        path.write_text(yaml.safe_dump(data))
    assertions = yaml.safe_load((case_dir / "assertions.yaml").read_text())
    assertions[-1]["judge"] = {**gemini, "model": "judge-1"}
    (case_dir / "assertions.yaml").write_text(yaml.safe_dump(assertions))
    case = load_case(case_dir)
    rubrics = [a for a in case.assertions if a.kind == "judge"]
    live = run_case(
        case,
        AttemptSettings(mode="record", seed=1),
        tmp_path / "rec",
        grade=make_grader(rubrics, None, None, False),
    )
    assert live.status == "ok" and live.end.user_ending == "done"
    assert [e.payload.source for e in live.events if e.type == "io.input"] == ["persona"]
    assert live.judged["Confirms the refund for the right order"]["verdict"] == "pass"
    assert {e.payload.api for e in live.events if e.type == "llm.request"} == {
        "gemini.generate_content"
    }
    attempts = block_network()
    replayed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "rep"
    )
    assert replayed.divergence is None and replayed.status == "ok" and attempts == []


def test_an_overloaded_gemini_falls_back_to_openai_and_replays_the_same_way(
    tmp_path: Path, block_network: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_dir = write_case(
        tmp_path,
        "fallback",
        script=[],
        inputs=["Status?"],
        tools=[],
        record=False,
        providers=[
            {"name": "gemini", "model": "gemini-2.5-flash", "base_url": "fake", "max_retries": 0},
            {"name": "openai", "model": "gpt-5-mini", "base_url": "fake", "max_retries": 0},
        ],
    )
    (case_dir / "input" / "llm.yaml").write_text(
        yaml.safe_dump(
            {
                "rules": [
                    {"when": {"api": "gemini"}, "respond": {"fault": {"kind": "overloaded"}}},
                    {"when": {"api": "openai_chat"}, "respond": {"text": "All green."}},
                ]
            }
        )
    )
    live = run_case(load_case(case_dir), AttemptSettings(mode="record", seed=1), tmp_path / "rec")
    assert live.status == "ok" and live.output == "All green.", live.metrics()
    statuses = [
        e.payload.status
        for e in live.events
        if e.type == "llm.response" and e.payload.provider == "gemini"
    ]
    assert statuses == [503]
    fallback = next(e.payload for e in live.events if e.type == "provider.fallback")
    assert (fallback.from_provider, fallback.to_provider) == (
        "gemini",
        "openai",
    ) and "503" in fallback.error
    attempts = block_network()
    replayed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "rep"
    )
    assert replayed.divergence is None and replayed.output == "All green." and attempts == []
    assert [e.type for e in replayed.events] == [e.type for e in live.events]


def test_a_retried_request_replays_as_its_final_exchange(
    tmp_path: Path, block_network: Any
) -> None:
    case_dir = write_case(
        tmp_path,
        "retry",
        script=[],
        inputs=["Status?"],
        tools=[],
        record=False,
        providers=[
            {"name": "gemini", "model": "gemini-2.5-flash", "base_url": "fake", "max_retries": 1}
        ],
    )
    (case_dir / "input" / "llm.yaml").write_text(
        yaml.safe_dump({"responses": [{"fault": {"kind": "rate_limit"}}, {"text": "All green."}]})
    )
    live = run_case(load_case(case_dir), AttemptSettings(mode="record", seed=1), tmp_path / "rec")
    assert live.status == "ok" and live.output == "All green.", live.metrics()
    attempts = block_network()
    replayed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "rep"
    )
    assert replayed.divergence is None and replayed.output == "All green." and attempts == []
    # nodeval retried the 429 below the journal: only the final exchange is kept, with the count.
    responses = [e.payload_dict() for e in replayed.events if e.type == "llm.response"]
    assert [(r["status"], r.get("retries")) for r in responses] == [(200, 1)]
    assert live.metrics()["retries"] == 1 and replayed.metrics()["retries"] == 0
