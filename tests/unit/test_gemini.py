"""The pure parts of Gemini support: message conversion, usage, timeline text, matching,
redaction."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from google.genai import errors, types

from pytest_nodeval.agent.adapter import infrastructure_failure
from pytest_nodeval.agent.config import ProviderSpec
from pytest_nodeval.agent.providers import GeminiProvider, side_wiring, to_gemini
from pytest_nodeval.journal.redact import REDACTED, secrets_redactor
from pytest_nodeval.journal.replay import _matched_part
from pytest_nodeval.journal.transport import extract_usage, request_payload
from pytest_nodeval.people.judge import parse_judge_spec
from pytest_nodeval.report.llm_replies import reply_of
from pytest_nodeval.report.timeline import event_views

CALLS = [
    {"id": "gemini-call-1", "name": "shell", "args": {"command": "ls"}},
    {"id": "fc-7", "name": "file", "args": {"path": "a"}},
]
CONVERSATION = [
    {"role": "user", "text": "List it."},
    {"role": "assistant", "text": "Looking.", "tool_calls": CALLS},
    {
        "role": "tool",
        "call_id": "gemini-call-1",
        "name": "shell",
        "content": "a b",
        "is_error": False,
    },
    {
        "role": "tool",
        "call_id": "fc-7",
        "name": "file",
        "content": "no such file",
        "is_error": True,
    },
    {"role": "assistant", "text": "", "tool_calls": []},
    {"role": "user", "text": "Thanks."},
]


def test_a_conversation_becomes_gemini_contents() -> None:
    contents = to_gemini(
        CONVERSATION, made_up_ids={"gemini-call-1"}, signatures={"gemini-call-1": b"sig"}
    )
    assert [c["role"] for c in contents] == [
        "user",
        "model",
        "user",
        "user",
    ]  # the empty model turn is dropped
    text, made_up, given = contents[1]["parts"]
    assert text == {"text": "Looking."}
    # An id Gemini never sent is not sent back; the signature it sent is.
    assert made_up == {
        "function_call": {"name": "shell", "args": {"command": "ls"}},
        "thought_signature": b"sig",
    }
    assert given == {"function_call": {"name": "file", "args": {"path": "a"}, "id": "fc-7"}}
    # Both results of the turn travel in one content; an error is the response's "error".
    assert contents[2]["parts"] == [
        {"function_response": {"name": "shell", "response": {"output": "a b"}}},
        {
            "function_response": {
                "name": "file",
                "response": {"error": "no such file"},
                "id": "fc-7",
            }
        },
    ]
    types.Content.model_validate(contents[1])  # the SDK takes them as they are


def _provider() -> GeminiProvider:
    return GeminiProvider(
        ProviderSpec(name="gemini", model="gemini-2.5-flash"), side_wiring({"gemini": "k" * 20})
    )


def test_a_reply_skips_thoughts_names_unnamed_calls_and_counts_thinking_as_output() -> None:
    response = types.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {
                    "finish_reason": "STOP",
                    "content": {
                        "role": "model",
                        "parts": [
                            {"text": "pondering", "thought": True},
                            {"text": "Here."},
                            {
                                "function_call": {"name": "shell", "args": {"command": "ls"}},
                                "thought_signature": b"sig",
                            },
                            {"function_call": {"name": "file", "args": {}, "id": "fc-1"}},
                        ],
                    },
                }
            ],
            "usage_metadata": {
                "prompt_token_count": 30,
                "candidates_token_count": 5,
                "thoughts_token_count": 12,
            },
        }
    )
    provider = _provider()
    reply = provider._reply([response])
    assert reply.text == "Here." and reply.stop_reason == "tool_use"
    assert [(c.id, c.name) for c in reply.tool_calls] == [
        ("gemini-call-1", "shell"),
        ("fc-1", "file"),
    ]
    assert (reply.input_tokens, reply.output_tokens) == (30, 17)
    assert provider._signatures == {"gemini-call-1": b"sig"} and provider._made_up_ids == {
        "gemini-call-1"
    }


@pytest.mark.parametrize(
    ("finish", "expected"),
    [("STOP", "end_turn"), ("MAX_TOKENS", "max_tokens"), ("SAFETY", "safety")],
)
def test_finish_reasons_are_the_engines_stop_reasons(finish: str, expected: str) -> None:
    response = types.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {"finish_reason": finish, "content": {"role": "model", "parts": [{"text": "x"}]}}
            ]
        }
    )
    assert _provider()._reply([response]).stop_reason == expected


def test_a_blocked_prompt_is_an_empty_reply_not_a_crash() -> None:
    blocked = types.GenerateContentResponse.model_validate(
        {"prompt_feedback": {"block_reason": "SAFETY"}}
    )
    assert _provider()._reply([blocked]).text == ""


def test_usage_of_a_gemini_body_and_stream() -> None:
    body = {
        "candidates": [],
        "usageMetadata": {
            "promptTokenCount": 40,
            "candidatesTokenCount": 7,
            "thoughtsTokenCount": 3,
            "cachedContentTokenCount": 32,
        },
    }
    assert extract_usage(body, None) == {
        "input_tokens": 40,
        "output_tokens": 10,
        "cache_read_tokens": 32,
        "cache_write_tokens": 0,
    }
    stream = "".join(
        f"data: {json.dumps(d)}\r\n\r\n"
        for d in [
            {"usageMetadata": {"promptTokenCount": 40, "totalTokenCount": 40}},
            {"usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 7}},
        ]
    )
    assert extract_usage(None, stream) == {
        "input_tokens": 40,
        "output_tokens": 7,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }


def test_a_gemini_stream_request_says_so_in_its_path_and_drops_the_query() -> None:
    request = httpx2.Request(
        "POST", "http://g.test/v1beta/models/m:streamGenerateContent?alt=sse&key=secret-key-123"
    )
    payload = request_payload(request, "gemini", "gemini.generate_content", b'{"contents": []}')
    assert payload["stream"] is True and payload["path"] == "/v1beta/models/m:streamGenerateContent"
    assert "secret-key-123" not in json.dumps(payload)


def test_the_timeline_reads_gemini_replies_and_the_model_in_the_path() -> None:
    body = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"text": "pondering", "thought": True},
                        {"text": "Hi."},
                        {"functionCall": {"name": "shell", "args": {"c": 1}}},
                    ]
                }
            }
        ]
    }
    assert reply_of(body, None) == ("Hi.", [("shell", {"c": 1})])
    stream = "".join(
        f"data: {json.dumps(d)}\n\n"
        for d in [
            {"candidates": [{"content": {"parts": [{"text": "He"}]}}]},
            {"candidates": [{"content": {"parts": [{"text": "llo"}]}}]},
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [
                                {"functionCall": {"name": "a", "args": {}}},
                                {"functionCall": {"name": "b", "args": {"x": 1}}},
                            ]
                        }
                    }
                ]
            },
        ]
    )
    assert reply_of(None, stream) == ("Hello", [("a", "{}"), ("b", '{"x": 1}')])
    views = event_views(
        [
            {
                "seq": 1,
                "ts": "t",
                "type": "llm.request",
                "turn": 1,
                "payload": {
                    "provider": "gemini",
                    "path": "/v1beta/models/gemini-2.5-flash:generateContent",
                    "body": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
                },
            },
            {
                "seq": 2,
                "ts": "t",
                "type": "llm.response",
                "turn": 1,
                "payload": {"provider": "gemini", "body": body},
            },
        ]
    )
    fields = [dict(v["fields"]) for v in views]
    assert (
        fields[0]["model"] == fields[1]["model"] == "gemini-2.5-flash"
        and fields[0]["messages"] == "1"
    )
    assert fields[1]["text"] == "Hi."


def test_default_matching_compares_gemini_contents_and_tool_names_not_generation_settings() -> None:
    def body(temperature: float, description: str) -> dict[str, Any]:
        return {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [
                {
                    "functionDeclarations": [
                        {"name": "shell", "description": description},
                        {"name": "file"},
                    ]
                }
            ],
            "generationConfig": {"temperature": temperature},
        }

    assert _matched_part(body(0.2, "Run")) == _matched_part(body(0.9, "Run a command"))
    assert _matched_part(body(0.2, "Run"))["tools"] == ["file", "shell"]
    changed = body(0.2, "Run")
    changed["contents"][0]["parts"][0]["text"] = "hello"
    assert _matched_part(changed) != _matched_part(body(0.2, "Run"))


GOOGLE_KEY = "AIzaSyA1234567890abcdefghijklmnopqrstu"


@pytest.mark.parametrize(
    "text",
    [
        f"key {GOOGLE_KEY} end",
        json.dumps({"s": f"line\n{GOOGLE_KEY}"}),
        "GET https://g.test/v1beta/models/m:streamGenerateContent"
        f"?alt=sse&key={GOOGLE_KEY[4:]} failed",
    ],
)
def test_the_journal_redactor_removes_google_keys_and_keys_in_urls(text: str) -> None:
    redacted = secrets_redactor()("llm.response", {"error": text})["error"]
    assert GOOGLE_KEY[4:] not in redacted and REDACTED in redacted
    assert secrets_redactor()("llm.request", {"headers": {"X-Goog-Api-Key": "plain-secret"}}) == {
        "headers": {"X-Goog-Api-Key": REDACTED}
    }


@pytest.mark.parametrize(
    ("exc", "infra"),
    [
        (errors.ClientError(429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}), True),
        (errors.ClientError(401, {"error": {"code": 401, "status": "UNAUTHENTICATED"}}), True),
        (errors.ClientError(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT"}}), False),
        (errors.ServerError(503, {"error": {"code": 503, "status": "UNAVAILABLE"}}), True),
        (httpx2.ConnectError("refused"), True),
        (ValueError("the agent's own bug"), False),
    ],
)
def test_gemini_failures_out_of_an_own_agent_are_infrastructure_or_not(
    exc: BaseException, infra: bool
) -> None:
    assert infrastructure_failure(exc) is infra


def test_a_gemini_judge_can_be_named_in_the_ini() -> None:
    spec = parse_judge_spec("gemini gemini-2.5-flash", "ini")
    assert spec is not None and (spec.name, spec.model, spec.key) == (
        "gemini",
        "gemini-2.5-flash",
        "judge",
    )


def test_replay_retries_without_the_recorded_backoff() -> None:
    from pytest_nodeval.agent.providers import gemini_retries

    replay, live = gemini_retries(2, replaying=True), gemini_retries(2, replaying=False)
    assert replay.attempts == 3  # journals from before nodeval retried hold every try
    assert (replay.initial_delay, replay.max_delay, replay.jitter) == (0.0, 0.0, 0.0)
    assert live.attempts == 1  # live, nodeval retries below the journal (agent/retries.py)
