"""The real anthropic and openai SDKs, recorded against a local fake and replayed with it
stopped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval import AgentContext, tool
from pytest_nodeval.case.directory import load_case
from pytest_nodeval.runner.session import AttemptSettings, Observed, run_agent_case, run_case
from pytest_nodeval_fakes.llm import LLMFake

from ..conftest import write_case

SECRET = "sk-ant-api03-nodeval-test-secret-0123456789"
TOOL_CALL = {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1042"}}]}
SCRIPT = {
    "responses": [
        TOOL_CALL,
        {"text": "Order A-1042 has shipped.", "usage": {"input_tokens": 40, "output_tokens": 7}},
    ]
}
TOOLS_ANTHROPIC = [
    {
        "name": "lookup_order",
        "description": "Find an order.",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    }
]
TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Find an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]


def _agent_case(root: Path, case_id: str) -> Path:
    directory = root / case_id
    (directory / "input").mkdir(parents=True)
    (directory / "case.yaml").write_text(f"id: {case_id}\n")
    (directory / "assertions.yaml").write_text("[]\n")  # none on purpose: the tests check it
    (directory / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["Where is A-1042?"]}})
    )
    return directory


def _run(agent: Any, case_dir: Path, mode: str, out: Path) -> Observed:
    observed = run_agent_case(agent, load_case(case_dir), AttemptSettings(mode=mode), out)  # type: ignore[arg-type]
    assert observed.divergence is None, observed.divergence
    return observed


def _record_then_replay(
    agent_factory: Any, tmp_path: Path, no_network_fixture: Any
) -> tuple[list[Any], list[Any]]:
    case_dir = _agent_case(tmp_path, "sdk-case")
    recorded: list[Any] = []
    with LLMFake(SCRIPT) as fake:
        _run(agent_factory(fake.url, recorded), case_dir, "record", tmp_path / "rec")
    replayed: list[Any] = []
    no_network_fixture()  # the fake is stopped; now any socket use fails loudly
    _run(agent_factory("http://127.0.0.1:9", replayed), case_dir, "deterministic", tmp_path / "rep")
    return recorded, replayed


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_anthropic_objects_are_identical_after_replay(
    stream: bool, tmp_path: Path, block_network: Any
) -> None:
    def factory(url: str, sink: list[Any]) -> Any:
        def agent(ctx: AgentContext) -> None:
            client = ctx.anthropic(base_url=url, api_key=SECRET, max_retries=0)
            for text in ctx.inputs():
                messages: list[Any] = [{"role": "user", "content": text}]
                for _ in range(2):
                    kwargs = {
                        "model": "claude-sonnet-4-6",
                        "max_tokens": 256,
                        "messages": messages,
                        "tools": TOOLS_ANTHROPIC,
                    }
                    if stream:
                        with client.messages.stream(**kwargs) as events:
                            message = events.get_final_message()
                    else:
                        message = client.messages.create(**kwargs)
                    sink.append(message)
                    messages = messages + [
                        {"role": "assistant", "content": [b.model_dump() for b in message.content]}
                    ]
                    uses = [b for b in message.content if b.type == "tool_use"]
                    if not uses:
                        ctx.output(message.content[0].text)
                        break
                    messages.append(
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": uses[0].id,
                                    "content": "shipped",
                                }
                            ],
                        }
                    )

        return agent

    recorded, replayed = _record_then_replay(factory, tmp_path, block_network)
    assert len(recorded) == 2 and recorded == replayed
    assert recorded[0].content[-1].input == {"order_id": "A-1042"}
    assert recorded[1].usage.output_tokens == 7


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_openai_objects_are_identical_after_replay(
    stream: bool, tmp_path: Path, block_network: Any
) -> None:
    def factory(url: str, sink: list[Any]) -> Any:
        def agent(ctx: AgentContext) -> None:
            client = ctx.openai(
                base_url=url + "/v1", api_key="sk-proj-nodevaltestsecret0123456789", max_retries=0
            )
            for text in ctx.inputs():
                kwargs: dict[str, Any] = {
                    "model": "gpt-5-mini",
                    "messages": [{"role": "user", "content": text}],
                    "tools": TOOLS_OPENAI,
                }
                if stream:
                    kwargs["stream_options"] = {"include_usage": True}
                    with client.chat.completions.stream(**kwargs) as events:
                        completion = events.get_final_completion()
                else:
                    completion = client.chat.completions.create(**kwargs)
                sink.append(completion)
                ctx.output(completion.choices[0].message.content or "")

        return agent

    recorded, replayed = _record_then_replay(factory, tmp_path, block_network)
    assert len(recorded) == 1 and recorded == replayed
    assert recorded[0].choices[0].message.tool_calls[0].function.name == "lookup_order"


def test_no_secret_the_sdks_send_reaches_the_journal(tmp_path: Path) -> None:
    case_dir = _agent_case(tmp_path, "secret-case")

    def agent(ctx: AgentContext) -> None:
        client = ctx.anthropic(
            base_url=fake.url,
            api_key=SECRET,
            max_retries=0,
            default_headers={"Authorization": f"Bearer {SECRET}", "Cookie": "session=abc123secret"},
        )
        for text in ctx.inputs():
            ctx.output(
                client.messages.create(
                    model="claude-sonnet-4-6",
                    max_tokens=64,
                    messages=[{"role": "user", "content": f"{text} my key is {SECRET}"}],
                )
                .content[0]
                .text
            )

    with LLMFake({"responses": [{"text": "ok"}]}) as fake:
        _run(agent, case_dir, "record", tmp_path / "rec")
        sent = fake.requests[0]
    assert sent.headers  # the SDK really sent its headers to the server...
    written = "".join(p.read_text() for p in (case_dir / "journal").iterdir())
    assert SECRET not in written and "abc123secret" not in written  # ...and none reached the disk
    assert "[REDACTED]" in written


# -- agents that are not the reference engine ------------------------------------------------

RUNS: list[str] = []


@tool
def lookup_order(order_id: str) -> dict[str, str]:
    """A local side effect: replay must not run it."""
    RUNS.append(order_id)
    return {"order_id": order_id, "status": "shipped"}


def test_an_anthropic_agent_with_a_local_tool_replays_without_running_it(
    tmp_path: Path, block_network: Any
) -> None:
    def factory(url: str, sink: list[Any]) -> Any:
        def agent(ctx: AgentContext) -> None:
            client = ctx.anthropic(base_url=url, api_key=SECRET, max_retries=0)
            for text in ctx.inputs():
                first = client.messages.create(
                    model="claude-sonnet-4-6",
                    max_tokens=256,
                    tools=TOOLS_ANTHROPIC,
                    messages=[{"role": "user", "content": text}],
                )
                use = next(b for b in first.content if b.type == "tool_use")
                result = lookup_order(**use.input)
                sink.append(result)
                final = client.messages.create(
                    model="claude-sonnet-4-6",
                    max_tokens=256,
                    tools=TOOLS_ANTHROPIC,
                    messages=[
                        {"role": "user", "content": text},
                        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": use.id,
                                    "content": str(result),
                                }
                            ],
                        },
                    ],
                )
                ctx.output(final.content[0].text)

        return agent

    RUNS.clear()
    recorded, replayed = _record_then_replay(factory, tmp_path, block_network)
    assert RUNS == ["A-1042"]  # it ran once, while recording
    assert replayed == recorded == [{"order_id": "A-1042", "status": "shipped"}]


def test_an_async_openai_agent_records_and_replays(tmp_path: Path, block_network: Any) -> None:
    def factory(url: str, sink: list[Any]) -> Any:
        async def agent(ctx: AgentContext) -> str:
            async with ctx.async_openai(
                base_url=url + "/v1", api_key="sk-proj-nodevaltestsecret0123456789", max_retries=0
            ) as client:
                answers = []
                for text in ctx.inputs():
                    calls = [
                        client.chat.completions.create(
                            model="gpt-5-mini", messages=[{"role": "user", "content": text}]
                        )
                    ]
                    completions = await asyncio.gather(*calls)
                    sink.extend(completions)
                    answers.append(completions[0].choices[0].message.content or "")
                return answers[-1]

        return agent

    case_dir = _agent_case(tmp_path, "async-case")
    recorded: list[Any] = []
    with LLMFake({"responses": [{"text": "It shipped on Monday."}]}) as fake:
        first = _run(factory(fake.url, recorded), case_dir, "record", tmp_path / "rec")
    block_network()
    replayed: list[Any] = []
    second = _run(
        factory("http://127.0.0.1:9", replayed), case_dir, "deterministic", tmp_path / "rep"
    )
    assert recorded == replayed and second.output == first.output == "It shipped on Monday."


def test_the_reference_engine_records_and_replays_through_both_sdks(
    tmp_path: Path, block_network: Any
) -> None:
    script = {
        "responses": [
            {"tool_calls": [{"name": "shell", "args": {"command": "echo 42"}}]},
            {"text": "The answer is 42."},
        ]
    }
    for provider, stream in (("anthropic", True), ("openai", False)):
        with LLMFake(script) as fake:
            base = fake.url if provider == "anthropic" else fake.url + "/v1"
            case_dir = write_case(
                tmp_path / provider,
                "engine",
                script=[],
                inputs=["What is the answer?"],
                providers=[
                    {
                        "name": provider,
                        "model": "m-1",
                        "base_url": base,
                        "stream": stream,
                        "api_key_env": "NODEVAL_TEST_KEY",
                        "max_retries": 0,
                    }
                ],
                tools=["shell"],
                record=False,
            )
            import os

            os.environ["NODEVAL_TEST_KEY"] = SECRET
            try:
                live = run_case(
                    load_case(case_dir), AttemptSettings(mode="record"), tmp_path / provider / "rec"
                )
            finally:
                del os.environ["NODEVAL_TEST_KEY"]
        assert live.status == "ok", live.metrics()
        replayed = run_case(
            load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / provider / "rep"
        )
        assert replayed.divergence is None and replayed.output == live.output == "The answer is 42."
        assert replayed.metrics()["llm_calls"] == 2 and replayed.metrics()["tool_calls"] == 1
