"""Contract tests: the official google-genai SDK against `fakes.llm` on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from pytest_nodeval_fakes.llm import LLMFake

TOOL_REPLY = {
    "text": "Let me check.",
    "tool_calls": [{"name": "shell", "args": {"command": "du -sh .", "timeout": 5}}],
    "usage": {"input_tokens": 21, "output_tokens": 9, "cached_tokens": 16},
}
SHELL = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="shell", description="Run", parameters_json_schema={"type": "object"}
        )
    ]
)
USER = "How big is the workspace?"


@pytest.fixture
def llm(request: pytest.FixtureRequest) -> Iterator[LLMFake]:
    marker = request.node.get_closest_marker("llm_script")
    script = marker.args[0] if marker else {"rules": [{"respond": TOOL_REPLY}]}
    with LLMFake(script) as fake:
        yield fake


def gemini(
    fake: LLMFake, *, attempts: int = 1, timeout_s: float = 5.0, key: str = "test-key"
) -> genai.Client:
    retry = types.HttpRetryOptions(
        attempts=attempts, initial_delay=0.01, max_delay=0.05, jitter=0.0
    )
    return genai.Client(
        api_key=key,
        http_options=types.HttpOptions(
            base_url=fake.url, timeout=round(timeout_s * 1000), retry_options=retry
        ),
    )


def stream(client: genai.Client) -> list[types.GenerateContentResponse]:
    # `client` stays referenced while the stream is read: an unreferenced genai.Client closes
    # the httpx client it made itself when it is garbage collected.
    return list(client.models.generate_content_stream(model="gemini-test", contents=USER))


def ask(client: genai.Client, contents: Any = USER, **config: Any) -> types.GenerateContentResponse:
    return client.models.generate_content(
        model="gemini-test", contents=contents, config=types.GenerateContentConfig(**config)
    )


def one_fault(kind: str, **fields: Any) -> pytest.MarkDecorator:
    return pytest.mark.llm_script({"responses": [{"fault": {"kind": kind, **fields}}]})


# ---- answers ----------------------------------------------------------------------------


def test_generate_content_has_text_function_call_and_usage(llm: LLMFake) -> None:
    response = ask(gemini(llm), tools=[SHELL])
    text, call = response.candidates[0].content.parts
    assert text.text == "Let me check."
    assert call.function_call.name == "shell" and call.function_call.args == {
        "command": "du -sh .",
        "timeout": 5,
    }
    assert call.function_call.id is None, "Gemini gives no call id unless the script does"
    assert call.thought_signature, "the first call of a turn is signed, as Gemini 3 does"
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    usage = response.usage_metadata
    assert (
        usage.prompt_token_count,
        usage.candidates_token_count,
        usage.cached_content_token_count,
    ) == (21, 9, 16)
    assert response.model_version == "gemini-test"
    assert (
        llm.requests[0].path == "/v1/models/gemini-test:generateContent"
        and llm.requests[0].api == "gemini"
    )


def test_stream_gives_text_in_pieces_then_the_call_whole_then_usage(llm: LLMFake) -> None:
    chunks = stream(gemini(llm))
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    assert "".join(p.text or "" for p in parts) == "Let me check." and len(chunks) > 2
    calls = [p.function_call for p in parts if p.function_call]
    assert len(calls) == 1 and calls[0].args == {"command": "du -sh .", "timeout": 5}
    assert [c.candidates[0].finish_reason for c in chunks][-1] == types.FinishReason.STOP
    assert all(c.candidates[0].finish_reason is None for c in chunks[:-1])
    assert chunks[-1].usage_metadata.candidates_token_count == 9
    assert llm.requests[0].path.endswith(":streamGenerateContent")


def test_a_scripted_call_id_is_sent(llm: LLMFake) -> None:
    llm.script = llm.script.model_validate(
        {"responses": [{"tool_calls": [{"name": "shell", "id": "call-7"}]}]}
    )
    llm.reset()
    assert ask(gemini(llm)).function_calls[0].id == "call-7"


def test_the_async_client_answers_through_an_httpx2_client(llm: LLMFake) -> None:
    async def run() -> str:
        client = genai.Client(
            api_key="k",
            http_options=types.HttpOptions(
                base_url=llm.url, httpx_async_client=httpx2.AsyncClient(timeout=5.0)
            ),
        )
        response = await client.aio.models.generate_content(model="gemini-test", contents=USER)
        return response.text or ""

    assert asyncio.run(asyncio.wait_for(run(), 10)) == "Let me check."


# ---- scripting ---------------------------------------------------------------------------


@pytest.mark.llm_script(
    {
        "rules": [
            {"when": {"api": "anthropic"}, "respond": {"text": "wrong api"}},
            {"when": {"api": "gemini", "after_tool_result": True}, "respond": {"text": "Done."}},
            {
                "when": {"system_contains": "pirate", "tools_include": ["shell"]},
                "respond": {"text": "Arr."},
            },
            {
                "when": {
                    "last_user_regex": "^weather in \\w+$",
                    "model": "gemini-test",
                    "stream": False,
                },
                "respond": {"text": "Sunny."},
            },
        ],
    }
)
def test_rules_read_gemini_requests(llm: LLMFake) -> None:
    client = gemini(llm)
    assert ask(client, "weather in Paris").text == "Sunny."
    assert (
        ask(client, "hello", system_instruction="Talk like a pirate", tools=[SHELL]).text == "Arr."
    )
    tool_turn = [
        types.Content(role="user", parts=[types.Part(text="weather in Paris")]),
        types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(name="shell", args={}))],
        ),
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="shell", response={"output": "ok"})],
        ),
    ]
    assert ask(client, tool_turn).text == "Done."
    with pytest.raises(errors.ClientError, match="no rule matched") as err:
        ask(client, "hello")
    assert (err.value.code, err.value.status) == (400, "INVALID_ARGUMENT")
    assert [r.answered_by for r in llm.requests] == [
        "rules[3]",
        "rules[2]",
        "rules[1]",
        "unscripted",
    ]


def test_the_key_is_read_from_x_goog_api_key() -> None:
    with LLMFake({"rules": [{"respond": {"text": "ok"}}]}, api_key="right-key") as fake:
        with pytest.raises(errors.ClientError) as err:
            ask(gemini(fake, key="wrong-key"))
        assert (err.value.code, err.value.status) == (401, "UNAUTHENTICATED")
        assert ask(gemini(fake, key="right-key")).text == "ok"
        by_query = httpx2.post(
            f"{fake.url}/v1beta/models/m:generateContent?key=right-key", json={"contents": []}
        )
        assert by_query.status_code == 200
    assert fake.requests[0].headers["x-goog-api-key"] == "<redacted>"
    assert [r.outcome for r in fake.requests] == ["error", "text", "text"]


# ---- faults ----------------------------------------------------------------------------


@one_fault("rate_limit")
def test_rate_limit_is_a_429_resource_exhausted(llm: LLMFake) -> None:
    with pytest.raises(errors.ClientError) as err:
        ask(gemini(llm))
    assert (err.value.code, err.value.status) == (429, "RESOURCE_EXHAUSTED")


@pytest.mark.llm_script(
    {
        "responses": [
            {"fault": {"kind": "rate_limit"}},
            {"fault": {"kind": "overloaded"}},
            {"text": "finally"},
        ]
    }
)
def test_the_sdks_retries_pass_over_429_and_503(llm: LLMFake) -> None:
    assert ask(gemini(llm, attempts=3)).text == "finally"
    assert [r.outcome for r in llm.requests] == ["rate_limit", "overloaded", "text"]


@one_fault("overloaded")
def test_overloaded_is_a_503_server_error(llm: LLMFake) -> None:
    with pytest.raises(errors.ServerError) as err:
        stream(gemini(llm))
    assert (err.value.code, err.value.status) == (503, "UNAVAILABLE")


@one_fault("server_error")
def test_server_error_is_a_500(llm: LLMFake) -> None:
    with pytest.raises(errors.ServerError) as err:
        ask(gemini(llm))
    assert (err.value.code, err.value.status) == (500, "INTERNAL")


@one_fault("timeout", sleep_s=10)
def test_a_stalled_server_times_the_client_out(llm: LLMFake) -> None:
    # google-genai lets httpx2's timeout through unwrapped.
    with pytest.raises(httpx2.TimeoutException):
        ask(gemini(llm, timeout_s=0.3))


@one_fault("malformed_stream", mode="cut")
def test_stream_cut_mid_event(llm: LLMFake) -> None:
    with pytest.raises(httpx2.RemoteProtocolError):
        stream(gemini(llm))


@one_fault("malformed_stream", mode="invalid_json")
def test_stream_event_with_invalid_json(llm: LLMFake) -> None:
    # Unlike anthropic and openai, google-genai wraps the JSON error in its own.
    with pytest.raises(errors.UnknownApiResponseError, match="Failed to parse"):
        stream(gemini(llm))
