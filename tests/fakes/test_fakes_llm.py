"""Contract tests: the official anthropic and openai SDKs against `fakes.llm` on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from pytest_nodeval_fakes import ScriptError
from pytest_nodeval_fakes.llm import LLMFake, LLMScript

TOOL_REPLY = {
    "text": "Let me check.",
    "tool_calls": [{"name": "shell", "args": {"command": "du -sh .", "timeout": 5}}],
    "usage": {"input_tokens": 21, "output_tokens": 9},
}
SHELL_TOOL_ANTHROPIC = {"name": "shell", "description": "Run", "input_schema": {"type": "object"}}
SHELL_TOOL_CHAT = {
    "type": "function",
    "function": {"name": "shell", "parameters": {"type": "object"}},
}
SHELL_TOOL_RESPONSES = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
USER = [{"role": "user", "content": "How big is the workspace?"}]


@pytest.fixture
def llm(request: pytest.FixtureRequest) -> Iterator[LLMFake]:
    marker = request.node.get_closest_marker("llm_script")
    script = marker.args[0] if marker else {"rules": [{"respond": TOOL_REPLY}]}
    with LLMFake(script) as fake:
        yield fake


def anthropic_client(fake: LLMFake, **options: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.url, api_key="test-key", **{"timeout": 5.0, **options})


def openai_client(fake: LLMFake, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=fake.url + "/v1", api_key="test-key", **{"timeout": 5.0, **options}
    )


def ask_claude(fake: LLMFake, *, stream: bool = False, **options: Any) -> Any:
    """One Messages call with retries off, so the first failure surfaces."""
    client = anthropic_client(fake, **{"max_retries": 0, **options})
    if not stream:
        return client.messages.create(model="c", max_tokens=5, messages=USER)
    with client.messages.stream(model="c", max_tokens=5, messages=USER) as events:
        return events.get_final_message()


def one_fault(kind: str, **fields: Any) -> pytest.MarkDecorator:
    return pytest.mark.llm_script({"responses": [{"fault": {"kind": kind, **fields}}]})


# ---- answers ----------------------------------------------------------------------------


def test_anthropic_message_has_text_tool_use_and_usage(llm: LLMFake) -> None:
    message = anthropic_client(llm).messages.create(
        model="claude-test", max_tokens=100, messages=USER, tools=[SHELL_TOOL_ANTHROPIC]
    )
    text, tool_use = message.content
    assert text.type == "text" and text.text == "Let me check."
    assert tool_use.type == "tool_use" and tool_use.name == "shell"
    assert tool_use.input == {"command": "du -sh .", "timeout": 5}
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (21, 9)
    assert message.model == "claude-test"


def test_anthropic_stream_events_accumulate_into_the_same_message(llm: LLMFake) -> None:
    client = anthropic_client(llm)
    with client.messages.stream(model="claude-test", max_tokens=100, messages=USER) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert {
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
    } <= set(kinds)
    assert message.content[0].text == "Let me check."
    assert message.content[1].input == {"command": "du -sh .", "timeout": 5}
    assert message.usage.output_tokens == 9 and message.stop_reason == "tool_use"


def test_anthropic_raw_stream_has_text_and_input_json_deltas(llm: LLMFake) -> None:
    events = list(
        anthropic_client(llm).messages.create(
            model="claude-test", max_tokens=100, messages=USER, stream=True
        )
    )
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert "".join(d.text for d in deltas if d.type == "text_delta") == "Let me check."
    arguments = "".join(d.partial_json for d in deltas if d.type == "input_json_delta")
    assert json.loads(arguments) == {"command": "du -sh .", "timeout": 5}
    assert len(deltas) > 2, "text and arguments should arrive in several deltas"


def test_openai_chat_completion_has_tool_calls_and_usage(llm: LLMFake) -> None:
    completion = openai_client(llm).chat.completions.create(
        model="gpt-test", messages=USER, tools=[SHELL_TOOL_CHAT]
    )
    choice = completion.choices[0]
    assert choice.message.content == "Let me check."
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "shell"
    assert json.loads(call.function.arguments) == {"command": "du -sh .", "timeout": 5}
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (21, 9)


def test_openai_chat_stream_reports_usage_only_when_asked(llm: LLMFake) -> None:
    client = openai_client(llm)
    plain = list(client.chat.completions.create(model="gpt-test", messages=USER, stream=True))
    assert all(chunk.usage is None for chunk in plain)
    with client.chat.completions.stream(
        model="gpt-test", messages=USER, stream_options={"include_usage": True}
    ) as stream:
        completion = stream.get_final_completion()
    call = completion.choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"command": "du -sh .", "timeout": 5}
    assert completion.choices[0].message.content == "Let me check."
    assert completion.usage is not None and completion.usage.total_tokens == 30


def test_openai_responses_plain_and_streamed(llm: LLMFake) -> None:
    client = openai_client(llm)
    response = client.responses.create(
        model="gpt-test", input="How big?", tools=[SHELL_TOOL_RESPONSES]
    )
    with client.responses.stream(model="gpt-test", input="How big?") as stream:
        streamed = stream.get_final_response()
    for result in (response, streamed):
        assert result.output_text == "Let me check."
        call = next(item for item in result.output if item.type == "function_call")
        assert call.name == "shell" and json.loads(call.arguments)["command"] == "du -sh ."
        assert result.usage is not None and result.usage.output_tokens == 9


def test_async_clients_stream_and_answer(llm: LLMFake) -> None:
    async def run() -> tuple[str, str]:
        async with (
            anthropic.AsyncAnthropic(base_url=llm.url, api_key="k", timeout=5.0) as claude,
            openai.AsyncOpenAI(base_url=llm.url + "/v1", api_key="k", timeout=5.0) as gpt,
        ):
            async with claude.messages.stream(model="c", max_tokens=10, messages=USER) as stream:
                message = await stream.get_final_message()
            completion = await gpt.chat.completions.create(model="g", messages=USER)
        return message.content[0].text, completion.choices[0].message.content or ""

    assert asyncio.run(asyncio.wait_for(run(), 10)) == ("Let me check.", "Let me check.")


# ---- scripting ---------------------------------------------------------------------------


@pytest.mark.llm_script(
    {
        "rules": [
            {
                "when": {"last_user_regex": "^weather in \\w+$", "api": "anthropic"},
                "respond": {"text": "Sunny."},
            },
            {"when": {"system_contains": "pirate"}, "respond": {"text": "Arr."}, "times": 1},
            {"when": {"after_tool_result": True}, "respond": {"text": "Done."}},
        ],
        "responses": [{"text": "first"}, {"text": "second"}],
    }
)
def test_rules_match_before_ordered_responses_and_run_out(llm: LLMFake) -> None:
    client = anthropic_client(llm, max_retries=0)

    def ask(content: Any, system: str = "") -> str:
        messages = [{"role": "user", "content": content}]
        extra = {"system": system} if system else {}
        return (
            client.messages.create(model="c", max_tokens=5, messages=messages, **extra)
            .content[0]
            .text
        )

    tool_result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]
    assert ask("weather in Paris") == "Sunny."
    assert ask("hello", system="Talk like a pirate") == "Arr."
    assert ask("hello", system="Talk like a pirate") == "first"  # the rule is used up
    assert ask(tool_result) == "Done."
    assert ask("hello") == "second"
    with pytest.raises(anthropic.BadRequestError, match="no rule matched"):
        ask("hello")
    assert [r.answered_by for r in llm.requests] == [
        "rules[0]",
        "rules[1]",
        "responses[0]",
        "rules[2]",
        "responses[1]",
        "unscripted",
    ]


FLAKY = {
    "rules": [
        {
            "choose": [
                {"weight": 1, "respond": {"text": "pass"}},
                {"weight": 1, "respond": {"text": "fail"}},
            ]
        }
    ]
}


@pytest.mark.llm_script(FLAKY)
def test_seeded_choices_repeat_with_the_seed_and_vary_without_it(llm: LLMFake) -> None:
    client = openai_client(llm)

    def run_session(seed: int) -> list[str]:
        llm.reset(seed=seed)
        return [
            client.chat.completions.create(model="g", messages=USER).choices[0].message.content
            or ""
            for _ in range(12)
        ]

    first, again, other = run_session(1), run_session(1), run_session(2)
    assert first == again
    assert first != other
    assert set(first) == {"pass", "fail"}


def test_llm_script_loads_from_yaml_and_names_bad_fields(tmp_path: Path) -> None:
    good = tmp_path / "llm.yaml"
    good.write_text(
        "schema_version: 1\nresponses:\n"
        "  - text: hi\n    usage: {input_tokens: 1, output_tokens: 2}\n"
    )
    assert LLMScript.load(good).responses[0].usage.output_tokens == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("responses:\n  - fault: {kind: explode}\n")
    with pytest.raises(ScriptError) as err:
        LLMScript.load(bad)
    assert str(bad) in str(err.value) and "responses.0.fault.kind" in str(err.value)
    assert "rate_limit" in str(err.value), "the message should list the valid fault kinds"


def test_api_key_is_checked_when_configured() -> None:
    with LLMFake({"rules": [{"respond": {"text": "ok"}}]}, api_key="right") as fake:
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(base_url=fake.url, api_key="wrong", max_retries=0).messages.create(
                model="c", max_tokens=5, messages=USER
            )
        answer = openai.OpenAI(base_url=fake.url + "/v1", api_key="right").chat.completions.create(
            model="g", messages=USER
        )
        assert answer.choices[0].message.content == "ok"
        # anthropic 2.x sends the key as `Authorization: Bearer`, not `x-api-key`.
        assert fake.requests[0].headers["authorization"] == "<redacted>"
        assert [r.outcome for r in fake.requests] == ["error", "text"]


# ---- faults ----------------------------------------------------------------------------


@one_fault("rate_limit", retry_after_s=0.05)
def test_rate_limit_raises_each_sdks_rate_limit_error(llm: LLMFake) -> None:
    with pytest.raises(anthropic.RateLimitError) as err:
        ask_claude(llm)
    assert err.value.body["error"]["type"] == "rate_limit_error"
    assert err.value.response.headers["retry-after"] == "1"
    llm.reset()
    with pytest.raises(openai.RateLimitError) as err2:
        openai_client(llm, max_retries=0).chat.completions.create(model="g", messages=USER)
    assert err2.value.code == "rate_limit_exceeded"


@pytest.mark.llm_script(
    {
        "responses": [
            {"fault": {"kind": "rate_limit", "retry_after_s": 0.05}},
            {"fault": {"kind": "overloaded", "retry_after_s": 0.05}},
            {"text": "finally"},
        ]
    }
)
def test_default_retries_pass_over_429_and_529_transparently(llm: LLMFake) -> None:
    message = anthropic_client(llm).messages.create(model="c", max_tokens=5, messages=USER)
    assert message.content[0].text == "finally"
    assert [r.outcome for r in llm.requests] == ["rate_limit", "overloaded", "text"]
    assert [r.headers["x-stainless-retry-count"] for r in llm.requests] == ["0", "1", "2"]
    llm.reset()
    completion = openai_client(llm).chat.completions.create(model="g", messages=USER)
    assert completion.choices[0].message.content == "finally" and len(llm.requests) == 3


@one_fault("server_error")
def test_server_error_raises_internal_server_error(llm: LLMFake) -> None:
    with pytest.raises(anthropic.InternalServerError) as err:
        ask_claude(llm)
    assert err.value.status_code == 500
    llm.reset()
    with pytest.raises(openai.InternalServerError):
        openai_client(llm, max_retries=0).responses.create(model="g", input="hi", stream=True)


@one_fault("overloaded")
def test_overloaded_is_anthropic_529_and_openai_503(llm: LLMFake) -> None:
    with pytest.raises(anthropic.OverloadedError) as err:
        ask_claude(llm, stream=True)
    assert err.value.status_code == 529 and isinstance(err.value, anthropic.InternalServerError)
    llm.reset()
    with pytest.raises(openai.InternalServerError) as err2:
        openai_client(llm, max_retries=0).chat.completions.create(model="g", messages=USER)
    assert err2.value.status_code == 503


@one_fault("timeout", sleep_s=10)
def test_stalled_server_raises_api_timeout_error(llm: LLMFake) -> None:
    with pytest.raises(anthropic.APITimeoutError):
        ask_claude(llm, timeout=0.3)
    llm.reset()
    with pytest.raises(openai.APITimeoutError):
        client = openai_client(llm, max_retries=0, timeout=0.3)
        client.chat.completions.create(model="g", messages=USER, stream=True)


@one_fault("malformed_stream", mode="cut")
def test_stream_cut_mid_event(llm: LLMFake) -> None:
    # openai wraps transport errors met while streaming; anthropic 2.14 lets httpx2's through.
    with pytest.raises(openai.APIConnectionError):
        list(
            openai_client(llm, max_retries=0).chat.completions.create(
                model="g", messages=USER, stream=True
            )
        )
    llm.reset()
    with pytest.raises(httpx2.RemoteProtocolError):
        ask_claude(llm, stream=True)
    llm.reset()
    with pytest.raises(anthropic.APIConnectionError):
        ask_claude(llm)


@one_fault("malformed_stream", mode="invalid_json")
def test_stream_event_with_invalid_json(llm: LLMFake) -> None:
    # Neither SDK wraps a JSON error inside a stream: the agent sees json.JSONDecodeError.
    with pytest.raises(json.JSONDecodeError):
        ask_claude(llm, stream=True)
    llm.reset()
    with pytest.raises(json.JSONDecodeError):
        list(openai_client(llm, max_retries=0).responses.create(model="g", input="hi", stream=True))


CACHED = {
    "text": "Cached.",
    "usage": {
        "input_tokens": 1000,
        "output_tokens": 50,
        "cache_read_tokens": 600,
        "cache_write_tokens": 300,
    },
}


@pytest.mark.llm_script({"rules": [{"respond": CACHED}]})
@pytest.mark.parametrize("stream", [False, True])
def test_cache_tokens_reach_each_sdk_as_its_api_reports_them(llm: LLMFake, stream: bool) -> None:
    client = anthropic_client(llm)
    if stream:
        with client.messages.stream(model="c", max_tokens=5, messages=USER) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model="c", max_tokens=5, messages=USER)
    usage = message.usage  # Anthropic's input_tokens leaves the cached ones out
    assert (
        usage.input_tokens,
        usage.cache_read_input_tokens,
        usage.cache_creation_input_tokens,
    ) == (100, 600, 300)
    chat = openai_client(llm).chat.completions.create(model="g", messages=USER)
    assert chat.usage is not None and chat.usage.prompt_tokens == 1000
    assert (
        chat.usage.prompt_tokens_details is not None
        and chat.usage.prompt_tokens_details.cached_tokens == 600
    )
    response = openai_client(llm).responses.create(model="g", input="How big?")
    assert response.usage is not None and response.usage.input_tokens == 1000
    assert response.usage.input_tokens_details.cached_tokens == 600


def test_cache_counts_beyond_the_input_are_refused() -> None:
    with pytest.raises(ValueError, match="must not exceed input_tokens"):
        LLMScript.model_validate(
            {
                "responses": [
                    {
                        "text": "x",
                        "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_tokens": 11},
                    }
                ]
            }
        )
