"""Journaled request and response bodies of every API into the GenAI conventions' messages."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_nodeval.report.otel_messages import request_messages, response_messages

CALL = {"type": "tool_call", "id": "c1", "name": "shell", "arguments": {"command": "ls"}}
ANSWER = {"type": "tool_call_response", "id": "c1", "response": "a.txt"}
EXPECTED = [
    {"role": "user", "parts": [{"type": "text", "content": "list"}]},
    {"role": "assistant", "parts": [CALL]},
    {"role": "tool", "parts": [ANSWER]},
]

REQUESTS: dict[str, dict[str, Any]] = {
    "mock": {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "text": "list"},
            {
                "role": "assistant",
                "text": "",
                "tool_calls": [{"id": "c1", "name": "shell", "args": {"command": "ls"}}],
            },
            {"role": "tool", "call_id": "c1", "name": "shell", "content": "a.txt"},
        ],
    },
    "anthropic.messages": {
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "list"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c1", "name": "shell", "input": {"command": "ls"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a.txt"}],
            },
        ],
    },
    "openai.chat": {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "list"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "shell", "arguments": '{"command": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        ],
    },
    "openai.responses": {
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "list"},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "shell",
                "arguments": '{"command": "ls"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        ],
    },
    "gemini.generate_content": {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "list"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": "c1", "name": "shell", "args": {"command": "ls"}}}
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"id": "c1", "name": "shell", "response": "a.txt"}}],
            },
        ],
    },
}


@pytest.mark.parametrize("api", sorted(REQUESTS))
def test_every_api_request_reads_as_the_same_conversation(api: str) -> None:
    system, messages = request_messages(api, REQUESTS[api])
    assert system == [{"type": "text", "content": "Be brief."}]
    assert messages == EXPECTED


RESPONSES: dict[str, dict[str, Any]] = {
    "mock": {
        "text": "Done.",
        "tool_calls": [{"id": "c1", "name": "shell", "args": {"command": "ls"}}],
        "stop_reason": "stop",
    },
    "anthropic.messages": {
        "content": [
            {"type": "text", "text": "Done."},
            {"type": "tool_use", "id": "c1", "name": "shell", "input": {"command": "ls"}},
        ],
        "stop_reason": "stop",
    },
    "openai.chat": {
        "choices": [
            {
                "message": {
                    "content": "Done.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "function": {"name": "shell", "arguments": '{"command": "ls"}'},
                        }
                    ],
                },
                "finish_reason": "stop",
            }
        ]
    },
    "openai.responses": {
        "status": "stop",
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "Done."}]},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "shell",
                "arguments": '{"command": "ls"}',
            },
        ],
    },
    "gemini.generate_content": {
        "candidates": [
            {
                "finishReason": "stop",
                "content": {
                    "parts": [
                        {"text": "Done."},
                        {"functionCall": {"id": "c1", "name": "shell", "args": {"command": "ls"}}},
                    ]
                },
            }
        ]
    },
}


@pytest.mark.parametrize("api", sorted(RESPONSES))
def test_every_api_response_reads_as_one_output_message(api: str) -> None:
    assert response_messages(api, RESPONSES[api], None) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Done."}, CALL],
            "finish_reason": "stop",
        }
    ]


def test_what_is_not_recognised_is_left_out_never_an_error() -> None:
    assert request_messages("openai.chat", "not a body") == ([], [])
    assert request_messages(
        "anthropic.messages",
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
    ) == ([], [])
    assert response_messages("mock", {"unexpected": True}, None) == []
