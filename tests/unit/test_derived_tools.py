"""Tool calls and results of a program that runs its own tools, derived from its model traffic
(journal/derived.py): each API, plain and streamed, a conversation of two exchanges."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_nodeval.checks.assertions import ASSERTION, Evidence, evaluate
from pytest_nodeval.journal.derived import ToolTraffic
from pytest_nodeval.journal.events import (
    EVENT_ADAPTER,
    PAYLOADS,
    EngineInfo,
    JournalHeader,
    new_session_id,
    now_iso,
)
from pytest_nodeval.journal.transport import RecordingTransport
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval_fakes.llm import LLMFake

USER = "Where is order A-1042?"
ARGS = {"order_id": "A-1042"}
RESULT_TEXT = '{"status": "shipped"}'  # JSON text: a result keeps it as a string

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:generateContent"
GEMINI_STREAM_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


def request(api: str, path: str, body: Any, *, stream: bool = False) -> dict[str, Any]:
    """An `llm.request` payload, as journal/transport.py's request_payload writes it."""
    return {
        "provider": "p",
        "api": api,
        "method": "POST",
        "path": path,
        "stream": stream,
        "body": body,
    }


def response(body: Any = None, *, sse: str | None = None, status: int = 200) -> dict[str, Any]:
    """An `llm.response` payload, as journal/transport.py's response_payload writes it."""
    content_type = "text/event-stream" if sse is not None else "application/json"
    return {
        "provider": "p",
        "status": status,
        "headers": {"content-type": content_type},
        "body": None if sse is not None else body,
        "sse": sse,
        "usage": None,
        "model": None,
        "latency_ms": 12.5,
        "retries": 0,
    }


def register(tool: str) -> tuple[str, dict[str, Any]]:
    return ("tool.register", {"tool": tool, "side_effects": True, "source": "program"})


def call(tool: str, call_id: str, args: Any) -> tuple[str, dict[str, Any]]:
    return ("tool.call", {"tool": tool, "call_id": call_id, "args": args})


def result(tool: str, call_id: str, value: Any) -> tuple[str, dict[str, Any]]:
    return ("tool.result", {"tool": tool, "call_id": call_id, "ok": True, "result": value})


def failure(tool: str, call_id: str, error: str) -> tuple[str, dict[str, Any]]:
    return ("tool.result", {"tool": tool, "call_id": call_id, "ok": False, "error": error})


def valid(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """The events, each checked against the journal's model of its type."""
    for kind, payload in events:
        PAYLOADS[kind].model_validate(payload)
    return events


def conversation(
    traffic: ToolTraffic,
    exchanges: list[tuple[dict[str, Any], dict[str, Any]]],
    resent: dict[str, Any],
) -> list[list[tuple[str, dict[str, Any]]]]:
    """What each request, each response and the final resent request derive, in order."""
    derived = []
    for asked, answered in exchanges:
        derived.append(valid(traffic.from_request(asked)))
        derived.append(valid(traffic.from_response(asked, answered)))
    derived.append(valid(traffic.from_request(resent)))
    return derived


# ---- Anthropic Messages ---------------------------------------------------------------------

ANTHROPIC_TOOLS = [
    {
        "name": "lookup_order",
        "description": "Find an order.",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    }
]


def anthropic_body(messages: list[Any], *, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        "tools": ANTHROPIC_TOOLS,
        "messages": messages,
    }
    if stream:
        body["stream"] = True
    return body


def anthropic_message(content: list[Any], stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 320, "output_tokens": 40},
    }


def test_anthropic_a_tool_use_block_is_a_call_and_its_tool_result_a_result() -> None:
    first = [{"role": "user", "content": USER}]
    asked_for = [
        {"type": "text", "text": "Let me look that up."},
        {"type": "tool_use", "id": "toolu_01", "name": "lookup_order", "input": ARGS},
    ]
    second = [
        *first,
        {"role": "assistant", "content": asked_for},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": RESULT_TEXT}],
        },
    ]
    answer = [{"type": "text", "text": "Order A-1042 has shipped."}]
    third = [*second, {"role": "assistant", "content": answer}, {"role": "user", "content": "Ta"}]
    derived = conversation(
        ToolTraffic(),
        [
            (
                request("anthropic.messages", "/v1/messages", anthropic_body(first)),
                response(anthropic_message(asked_for, "tool_use")),
            ),
            (
                request("anthropic.messages", "/v1/messages", anthropic_body(second)),
                response(anthropic_message(answer, "end_turn")),
            ),
        ],
        request("anthropic.messages", "/v1/messages", anthropic_body(third)),
    )
    assert derived == [
        [],
        [register("lookup_order"), call("lookup_order", "toolu_01", ARGS)],
        [result("lookup_order", "toolu_01", RESULT_TEXT)],
        [],
        [],  # the same conversation, resent: its result was derived already
    ]


# Written out as the API sends it: `event:` and `data:` lines, a blank line after each event.
ANTHROPIC_TOOL_STREAM = (
    "event: message_start\n"
    'data: {"type":"message_start","message":{"id":"msg_01","type":"message",'
    '"role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,'
    '"stop_sequence":null,"usage":{"input_tokens":320,"output_tokens":1}}}\n'
    "\n"
    "event: content_block_start\n"
    'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n'
    "\n"
    "event: ping\n"
    'data: {"type": "ping"}\n'
    "\n"
    "event: content_block_delta\n"
    'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    '"text":"Let me look."}}\n'
    "\n"
    "event: content_block_stop\n"
    'data: {"type":"content_block_stop","index":0}\n'
    "\n"
    "event: content_block_start\n"
    'data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use",'
    '"id":"toolu_01","name":"lookup_order","input":{}}}\n'
    "\n"
    "event: content_block_delta\n"
    'data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta",'
    '"partial_json":""}}\n'
    "\n"
    "event: content_block_delta\n"
    'data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta",'
    '"partial_json":"{\\"order_id\\": \\"A-"}}\n'
    "\n"
    "event: content_block_delta\n"
    'data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta",'
    '"partial_json":"1042\\"}"}}\n'
    "\n"
    "event: content_block_stop\n"
    'data: {"type":"content_block_stop","index":1}\n'
    "\n"
    "event: content_block_start\n"
    'data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use",'
    '"id":"toolu_02","name":"list_carriers","input":{}}}\n'
    "\n"
    "event: content_block_stop\n"
    'data: {"type":"content_block_stop","index":2}\n'
    "\n"
    "event: message_delta\n"
    'data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},'
    '"usage":{"output_tokens":52}}\n'
    "\n"
    "event: message_stop\n"
    'data: {"type":"message_stop"}\n'
    "\n"
)
ANTHROPIC_TEXT_STREAM = (
    "event: message_start\n"
    'data: {"type":"message_start","message":{"id":"msg_02","type":"message",'
    '"role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,'
    '"stop_sequence":null,"usage":{"input_tokens":400,"output_tokens":1}}}\n'
    "\n"
    "event: content_block_start\n"
    'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n'
    "\n"
    "event: content_block_delta\n"
    'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    '"text":"It has shipped."}}\n'
    "\n"
    "event: content_block_stop\n"
    'data: {"type":"content_block_stop","index":0}\n'
    "\n"
    "event: message_delta\n"
    'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    '"usage":{"output_tokens":6}}\n'
    "\n"
    "event: message_stop\n"
    'data: {"type":"message_stop"}\n'
    "\n"
)


def test_anthropic_streamed_tool_use_input_is_the_joined_json_pieces() -> None:
    first = [{"role": "user", "content": USER}]
    second = [
        *first,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_01", "name": "lookup_order", "input": ARGS},
                {"type": "tool_use", "id": "toolu_02", "name": "list_carriers", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    # a list of text blocks: the texts joined
                    "content": [
                        {"type": "text", "text": "status: shipped"},
                        {"type": "text", "text": "carrier: DHL"},
                    ],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_02",
                    "content": "carrier service unavailable",
                    "is_error": True,
                },
            ],
        },
    ]
    path = "/v1/messages"
    derived = conversation(
        ToolTraffic(),
        [
            (
                request(
                    "anthropic.messages", path, anthropic_body(first, stream=True), stream=True
                ),
                response(sse=ANTHROPIC_TOOL_STREAM),
            ),
            (
                request(
                    "anthropic.messages", path, anthropic_body(second, stream=True), stream=True
                ),
                response(sse=ANTHROPIC_TEXT_STREAM),
            ),
        ],
        request("anthropic.messages", path, anthropic_body(second, stream=True), stream=True),
    )
    assert derived == [
        [],
        [
            register("lookup_order"),
            call("lookup_order", "toolu_01", ARGS),
            register("list_carriers"),
            call("list_carriers", "toolu_02", {}),  # no input_json_delta: no arguments
        ],
        [
            result("lookup_order", "toolu_01", "status: shipped\ncarrier: DHL"),
            failure("list_carriers", "toolu_02", "carrier service unavailable"),
        ],
        [],
        [],
    ]


def test_anthropic_an_is_error_result_is_not_ok_and_its_content_the_error() -> None:
    traffic = ToolTraffic()
    asked_for = [{"type": "tool_use", "id": "toolu_9", "name": "shell", "input": {"cmd": "ls"}}]
    traffic.from_response(
        request("anthropic.messages", "/v1/messages", anthropic_body([])),
        response(anthropic_message(asked_for, "tool_use")),
    )
    messages = [
        {"role": "assistant", "content": asked_for},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_9",
                    "is_error": True,
                    "content": [{"type": "text", "text": "ls: permission denied"}],
                }
            ],
        },
    ]
    derived = traffic.from_request(
        request("anthropic.messages", "/v1/messages", anthropic_body(messages))
    )
    assert valid(derived) == [failure("shell", "toolu_9", "ls: permission denied")]


# ---- OpenAI Chat Completions ----------------------------------------------------------------

CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Find an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]


def chat_body(messages: list[Any], *, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-4.1-mini", "messages": messages, "tools": CHAT_TOOLS}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def chat_completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-01",
        "object": "chat.completion",
        "created": 1760000000,
        "model": "gpt-4.1-mini",
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100},
    }


def chat_tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_chat_tool_calls_are_calls_and_tool_messages_results() -> None:
    asked_for = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [chat_tool_call("call_01", "lookup_order", json.dumps(ARGS))],
    }
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": USER}]
    second = [
        *first,
        asked_for,
        {"role": "tool", "tool_call_id": "call_01", "content": RESULT_TEXT},
    ]
    answer = {"role": "assistant", "content": "It has shipped.", "refusal": None}
    third = [*second, answer, {"role": "user", "content": "Thanks."}]
    derived = conversation(
        ToolTraffic(),
        [
            (
                request("openai", CHAT_PATH, chat_body(first)),
                response(chat_completion(asked_for, "tool_calls")),
            ),
            (
                request("openai", CHAT_PATH, chat_body(second)),
                response(chat_completion(answer, "stop")),
            ),
        ],
        request("openai", CHAT_PATH, chat_body(third)),
    )
    assert derived == [
        [],
        [register("lookup_order"), call("lookup_order", "call_01", ARGS)],
        [result("lookup_order", "call_01", RESULT_TEXT)],
        [],
        [],
    ]


# Written out as the API sends it: `data: <chunk>`, a blank line, and `data: [DONE]` last.
# Two calls in parallel, their argument pieces interleaved, told apart by `index`.
CHAT_TOOL_STREAM = (
    'data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1760000000,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":null,'
    '"refusal":null},"finish_reason":null,"logprobs":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1760000000,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    '"id":"call_01","type":"function","function":{"name":"lookup_order","arguments":""}}]},'
    '"finish_reason":null,"logprobs":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1760000000,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    '"function":{"arguments":"{\\"order_"}}]},"finish_reason":null,"logprobs":null}],'
    '"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1760000000,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,'
    '"id":"call_02","type":"function","function":{"name":"track_parcel",'
    '"arguments":"{\\"parcel\\": "}}]},"finish_reason":null,"logprobs":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1760000000,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    '"function":{"arguments":"id\\": \\"A-1042\\"}"}}]},"finish_reason":null,'
    '"logprobs":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1760000000,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,'
    '"function":{"arguments":"7}"}}]},"finish_reason":null,"logprobs":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1760000000,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls",'
    '"logprobs":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1760000000,'
    '"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":80,"completion_tokens":30,'
    '"total_tokens":110}}\n'
    "\n"
    "data: [DONE]\n"
    "\n"
)
CHAT_TEXT_STREAM = (
    'data: {"id":"chatcmpl-02","object":"chat.completion.chunk","created":1760000001,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},'
    '"finish_reason":null,"logprobs":null}]}\n'
    "\n"
    'data: {"id":"chatcmpl-02","object":"chat.completion.chunk","created":1760000001,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"It has shipped."},'
    '"finish_reason":null,"logprobs":null}]}\n'
    "\n"
    'data: {"id":"chatcmpl-02","object":"chat.completion.chunk","created":1760000001,'
    '"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop",'
    '"logprobs":null}]}\n'
    "\n"
    "data: [DONE]\n"
    "\n"
)


def test_chat_streamed_tool_call_deltas_are_put_together_by_index() -> None:
    first = [{"role": "user", "content": USER}]
    second = [
        *first,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                chat_tool_call("call_01", "lookup_order", json.dumps(ARGS)),
                chat_tool_call("call_02", "track_parcel", '{"parcel": 7}'),
            ],
        },
        # content as a list of text parts: the texts joined
        {"role": "tool", "tool_call_id": "call_01", "content": [{"type": "text", "text": "ok"}]},
        {"role": "tool", "tool_call_id": "call_02", "content": "in transit"},
    ]
    derived = conversation(
        ToolTraffic(),
        [
            (
                request("openai", CHAT_PATH, chat_body(first, stream=True), stream=True),
                response(sse=CHAT_TOOL_STREAM),
            ),
            (
                request("openai", CHAT_PATH, chat_body(second, stream=True), stream=True),
                response(sse=CHAT_TEXT_STREAM),
            ),
        ],
        request("openai", CHAT_PATH, chat_body(second, stream=True), stream=True),
    )
    assert derived == [
        [],
        [
            register("lookup_order"),
            call("lookup_order", "call_01", ARGS),
            register("track_parcel"),
            call("track_parcel", "call_02", {"parcel": 7}),
        ],
        [result("lookup_order", "call_01", "ok"), result("track_parcel", "call_02", "in transit")],
        [],
        [],
    ]


def test_a_tool_is_registered_once_the_first_time_its_name_is_seen() -> None:
    traffic = ToolTraffic()
    asked = request("openai.chat", CHAT_PATH, chat_body([]))
    once = chat_completion(
        {"role": "assistant", "tool_calls": [chat_tool_call("c1", "lookup_order", "{}")]},
        "tool_calls",
    )
    twice = chat_completion(
        {
            "role": "assistant",
            "tool_calls": [
                chat_tool_call("c2", "lookup_order", "{}"),
                chat_tool_call("c3", "track_parcel", "{}"),
                chat_tool_call("c4", "track_parcel", "{}"),
            ],
        },
        "tool_calls",
    )
    assert traffic.from_response(asked, response(once)) == [
        register("lookup_order"),
        call("lookup_order", "c1", {}),
    ]
    assert traffic.from_response(asked, response(twice)) == [
        call("lookup_order", "c2", {}),
        register("track_parcel"),
        call("track_parcel", "c3", {}),
        call("track_parcel", "c4", {}),
    ]


@pytest.mark.parametrize(
    ("arguments", "args"),
    [
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        ('{"order_id": ', '{"order_id": '),  # cut short: kept as it came
        ("not json", "not json"),
        ("", {}),  # no arguments at all
    ],
)
def test_arguments_that_are_json_text_are_parsed_and_others_kept_raw(
    arguments: str, args: Any
) -> None:
    completion = chat_completion(
        {"role": "assistant", "tool_calls": [chat_tool_call("c1", "f", arguments)]}, "tool_calls"
    )
    events = ToolTraffic().from_response(
        request("openai", CHAT_PATH, chat_body([])), response(completion)
    )
    assert events[-1] == call("f", "c1", args)


def test_a_result_of_a_call_never_seen_is_of_an_unknown_tool_unless_the_history_names_it() -> None:
    messages = [
        {"role": "user", "content": USER},
        # a call whose response was not read: the conversation still names its tool
        {"role": "assistant", "tool_calls": [chat_tool_call("call_h", "lookup_order", "{}")]},
        {"role": "tool", "tool_call_id": "call_h", "content": "found"},
        {"role": "tool", "tool_call_id": "call_zz", "content": "orphan"},
    ]
    derived = ToolTraffic().from_request(request("openai", CHAT_PATH, chat_body(messages)))
    assert valid(derived) == [
        result("lookup_order", "call_h", "found"),
        result("unknown", "call_zz", "orphan"),
    ]


# ---- OpenAI Responses -----------------------------------------------------------------------

RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "lookup_order",
        "description": "Find an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    }
]


def responses_body(items: list[Any], **more: Any) -> dict[str, Any]:
    return {"model": "gpt-5-mini", "input": items, "tools": RESPONSES_TOOLS, **more}


def response_object(output: list[Any], response_id: str = "resp_01") -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1760000000,
        "status": "completed",
        "model": "gpt-5-mini",
        "output": output,
        "usage": {"input_tokens": 90, "output_tokens": 25, "total_tokens": 115},
        "error": None,
    }


FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_01",
    "call_id": "call_01",
    "name": "lookup_order",
    "arguments": json.dumps(ARGS),
    "status": "completed",
}
ANSWER_ITEM = {
    "type": "message",
    "id": "msg_01",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "It has shipped.", "annotations": []}],
}


def test_responses_function_call_items_are_calls_and_their_outputs_results() -> None:
    reasoning = {"type": "reasoning", "id": "rs_01", "summary": []}
    first = [{"role": "user", "content": USER}]
    second = [
        *first,
        reasoning,
        FUNCTION_CALL,
        {"type": "function_call_output", "call_id": "call_01", "output": RESULT_TEXT},
    ]
    third = [*second, ANSWER_ITEM, {"role": "user", "content": "Thanks."}]
    derived = conversation(
        ToolTraffic(),
        [
            (
                request("openai", RESPONSES_PATH, responses_body(first)),
                response(response_object([reasoning, FUNCTION_CALL])),
            ),
            (
                request("openai", RESPONSES_PATH, responses_body(second)),
                response(response_object([ANSWER_ITEM], "resp_02")),
            ),
        ],
        request("openai", RESPONSES_PATH, responses_body(third)),
    )
    assert derived == [
        [],
        [register("lookup_order"), call("lookup_order", "call_01", ARGS)],
        [result("lookup_order", "call_01", RESULT_TEXT)],
        [],
        [],
    ]


def responses_event(kind: str, number: int, **fields: Any) -> str:
    data = json.dumps({"type": kind, "sequence_number": number, **fields})
    return f"event: {kind}\ndata: {data}\n\n"


def responses_tool_stream(*, with_item_done: bool = True) -> str:
    in_progress = response_object([]) | {"status": "in_progress", "usage": None}
    added = FUNCTION_CALL | {"arguments": "", "status": "in_progress"}
    where = {"item_id": "fc_01", "output_index": 0}
    events = [
        responses_event("response.created", 0, response=in_progress),
        responses_event("response.in_progress", 1, response=in_progress),
        responses_event("response.output_item.added", 2, output_index=0, item=added),
        responses_event("response.function_call_arguments.delta", 3, **where, delta='{"order_'),
        responses_event(
            "response.function_call_arguments.delta", 4, **where, delta='id": "A-1042"}'
        ),
        responses_event(
            "response.function_call_arguments.done", 5, **where, arguments=json.dumps(ARGS)
        ),
    ]
    if with_item_done:
        events.append(
            responses_event("response.output_item.done", 6, output_index=0, item=FUNCTION_CALL)
        )
    # response.completed carries the whole output again: the call is one call
    events.append(
        responses_event("response.completed", 7, response=response_object([FUNCTION_CALL]))
    )
    return "".join(events)


def responses_text_stream() -> str:
    return "".join(
        [
            responses_event("response.created", 0, response=response_object([], "resp_02")),
            responses_event(
                "response.output_text.delta",
                1,
                item_id="msg_01",
                output_index=0,
                content_index=0,
                delta="It has shipped.",
            ),
            responses_event("response.output_item.done", 2, output_index=0, item=ANSWER_ITEM),
            responses_event(
                "response.completed", 3, response=response_object([ANSWER_ITEM], "resp_02")
            ),
        ]
    )


@pytest.mark.parametrize("with_item_done", [True, False], ids=["item_done", "completed_only"])
def test_responses_streamed_function_calls_are_read_once(with_item_done: bool) -> None:
    first = [{"role": "user", "content": USER}]
    # previous_response_id: the program sends only what is new, not the whole conversation
    second = [{"type": "function_call_output", "call_id": "call_01", "output": "shipped"}]
    chained = {"stream": True, "previous_response_id": "resp_01"}
    derived = conversation(
        ToolTraffic(),
        [
            (
                request("openai", RESPONSES_PATH, responses_body(first, stream=True), stream=True),
                response(sse=responses_tool_stream(with_item_done=with_item_done)),
            ),
            (
                request("openai", RESPONSES_PATH, responses_body(second, **chained), stream=True),
                response(sse=responses_text_stream()),
            ),
        ],
        request("openai", RESPONSES_PATH, responses_body(second, **chained), stream=True),
    )
    assert derived == [
        [],
        [register("lookup_order"), call("lookup_order", "call_01", ARGS)],
        [result("lookup_order", "call_01", "shipped")],
        [],
        [],
    ]


# ---- Gemini ---------------------------------------------------------------------------------

GEMINI_TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "lookup_order",
                "description": "Find an order.",
                "parameters": {"type": "OBJECT", "properties": {"order_id": {"type": "STRING"}}},
            }
        ]
    }
]


def gemini_body(contents: list[Any]) -> dict[str, Any]:
    return {"contents": contents, "tools": GEMINI_TOOLS}


def gemini_chunk(parts: list[Any], *, last: bool = True) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if last:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 50, "totalTokenCount": 50},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    }


def function_call(name: str, args: Any, **more: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args, **more}}


def function_response(name: str, answer: Any, **more: Any) -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": answer, **more}}


def user(*parts: Any) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def model(*parts: Any) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def test_gemini_function_calls_get_ids_in_order_and_responses_pair_with_them() -> None:
    asked_for = [
        {"text": "Checking both."},
        function_call("lookup_order", ARGS) | {"thoughtSignature": "c2lnbmF0dXJl"},
        function_call("lookup_order", {"order_id": "B-7"}),
    ]
    first = [user({"text": USER})]
    second = [
        *first,
        model(*asked_for),
        user(
            function_response("lookup_order", {"status": "shipped"}),
            function_response("lookup_order", {"status": "pending"}),
        ),
    ]
    third = [*second, model({"text": "One shipped."}), user({"text": "Thanks."})]
    derived = conversation(
        ToolTraffic(),
        [
            (
                request("gemini.generate_content", GEMINI_PATH, gemini_body(first)),
                response(gemini_chunk(asked_for)),
            ),
            (
                request("gemini.generate_content", GEMINI_PATH, gemini_body(second)),
                response(gemini_chunk([{"text": "One shipped, one pending."}])),
            ),
        ],
        request("gemini.generate_content", GEMINI_PATH, gemini_body(third)),
    )
    assert derived == [
        [],
        [
            register("lookup_order"),
            call("lookup_order", "lookup_order-1", ARGS),
            call("lookup_order", "lookup_order-2", {"order_id": "B-7"}),
        ],
        [
            # the response object is kept as it is
            result("lookup_order", "lookup_order-1", {"status": "shipped"}),
            result("lookup_order", "lookup_order-2", {"status": "pending"}),
        ],
        [],
        [],
    ]


def gemini_sse(*chunks: dict[str, Any]) -> str:
    # What `:streamGenerateContent?alt=sse` sends: `data:` lines, CRLF line ends.
    return "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks)


def test_gemini_streamed_calls_are_read_from_every_chunk() -> None:
    first = [user({"text": USER})]
    second = [
        *first,
        model(function_call("lookup_order", ARGS), function_call("track_parcel", {"parcel": 7})),
        user(
            function_response("lookup_order", {"status": "shipped"}),
            function_response("track_parcel", {"where": "Lyon"}),
        ),
    ]
    tool_stream = gemini_sse(
        gemini_chunk([{"text": "Let me "}], last=False),
        gemini_chunk([{"text": "check."}], last=False),
        gemini_chunk([function_call("lookup_order", ARGS)], last=False),
        gemini_chunk([function_call("track_parcel", {"parcel": 7})]),
    )
    text_stream = gemini_sse(gemini_chunk([{"text": "Shipped, in Lyon."}]))
    derived = conversation(
        ToolTraffic(),
        [
            (
                request(
                    "gemini.generate_content", GEMINI_STREAM_PATH, gemini_body(first), stream=True
                ),
                response(sse=tool_stream),
            ),
            (
                request(
                    "gemini.generate_content", GEMINI_STREAM_PATH, gemini_body(second), stream=True
                ),
                response(sse=text_stream),
            ),
        ],
        request("gemini.generate_content", GEMINI_STREAM_PATH, gemini_body(second), stream=True),
    )
    assert derived == [
        [],
        [
            register("lookup_order"),
            call("lookup_order", "lookup_order-1", ARGS),
            register("track_parcel"),
            call("track_parcel", "track_parcel-1", {"parcel": 7}),
        ],
        [
            result("lookup_order", "lookup_order-1", {"status": "shipped"}),
            result("track_parcel", "track_parcel-1", {"where": "Lyon"}),
        ],
        [],
        [],
    ]


def test_gemini_ids_count_per_name_across_the_session_and_pair_oldest_first() -> None:
    traffic = ToolTraffic()
    asked = request("gemini.generate_content", GEMINI_PATH, gemini_body([]))

    def answer(*parts: Any) -> list[tuple[str, dict[str, Any]]]:
        return valid(traffic.from_response(asked, response(gemini_chunk(list(parts)))))

    def send(*contents: Any) -> list[tuple[str, dict[str, Any]]]:
        body = gemini_body([user({"text": USER}), *contents])
        return valid(traffic.from_request(request("gemini.generate_content", GEMINI_PATH, body)))

    turn1 = model(function_call("search", {"q": "a"}))
    assert answer(*turn1["parts"]) == [register("search"), call("search", "search-1", {"q": "a"})]
    reply1 = user(function_response("search", {"hits": 1}))
    assert send(turn1, reply1) == [result("search", "search-1", {"hits": 1})]

    turn2 = model(
        function_call("search", {"q": "b"}),
        function_call("fetch", {"url": "u"}),
        function_call("search", {"q": "c"}),
        # an id the model gave is kept, and answers by id
        function_call("fetch", {"url": "v"}, id="fc-9"),
    )
    assert answer(*turn2["parts"]) == [
        call("search", "search-2", {"q": "b"}),
        register("fetch"),
        call("fetch", "fetch-1", {"url": "u"}),
        call("search", "search-3", {"q": "c"}),
        call("fetch", "fc-9", {"url": "v"}),
    ]
    # Results in another order than the calls: each pairs with its tool's oldest waiting call.
    reply2 = user(
        function_response("fetch", {"body": "V"}, id="fc-9"),
        function_response("search", {"hits": 0}),
        function_response("fetch", {"body": "U"}),
        function_response("search", {"hits": 1}),  # the same as reply1's, yet a new result
        # Gemini's convention for a failure: an "error" key and no "output"
        function_response("search", {"error": "quota exceeded"}),
    )
    assert send(turn1, reply1, turn2, reply2) == [
        result("fetch", "fc-9", {"body": "V"}),
        result("search", "search-2", {"hits": 0}),
        result("fetch", "fetch-1", {"body": "U"}),
        result("search", "search-3", {"hits": 1}),
        failure("search", "", "quota exceeded"),  # no call was waiting on it
    ]
    assert send(turn1, reply1, turn2, reply2) == []  # resent: nothing new


# ---- what is not recognised -----------------------------------------------------------------

TOOL_USE = {
    "content": [{"type": "tool_use", "id": "toolu_01", "name": "lookup_order", "input": ARGS}]
}
ANTHROPIC = request("anthropic.messages", "/v1/messages", anthropic_body([]))


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        (ANTHROPIC, response(None)),
        (ANTHROPIC, response("<html>Bad gateway</html>")),  # a body that was not JSON
        (ANTHROPIC, response([TOOL_USE])),
        (ANTHROPIC, response({"content": "tool_use"})),
        (ANTHROPIC, response({"content": [{"type": "tool_use", "id": "t", "name": 5}]})),
        (ANTHROPIC, response({"content": [None, 3, "x", {"type": "tool_use"}]})),
        (ANTHROPIC, response(TOOL_USE, status=500)),  # refused: the model asked for nothing
        (ANTHROPIC, response(TOOL_USE, status=429)),
        (ANTHROPIC, {"provider": "p", "status": 0, "error": "ConnectError: refused"}),
        (ANTHROPIC, {"status": "200", "body": TOOL_USE}),
        (ANTHROPIC, response(sse="data: {not json\n\nevent: x\ndata: [1, 2]\n\n: comment\n")),
        # a tool_use block that never stops (a stream cut short)
        (
            ANTHROPIC,
            response(
                sse='data: {"type":"content_block_start","index":0,"content_block":'
                '{"type":"tool_use","id":"t","name":"f","input":{}}}\n\n'
            ),
        ),
        (request("openai", CHAT_PATH, {}), response({"choices": "nope"})),
        (request("openai", CHAT_PATH, {}), response({"choices": [{"message": {"tool_calls": 1}}]})),
        (
            request("openai", CHAT_PATH, {}),
            response({"choices": [{"message": {"tool_calls": [{"function": "f"}]}}]}),
        ),
        (request("openai", CHAT_PATH, {}), response(sse="data: [DONE]\n\n")),
        (request("openai", RESPONSES_PATH, {}), response({"output": {"type": "function_call"}})),
        (request("gemini.generate_content", GEMINI_PATH, {}), response({"candidates": {}})),
        (
            request("gemini.generate_content", GEMINI_PATH, {}),
            response({"candidates": [{"content": {"parts": "x"}}]}),
        ),
        # not a model call (embeddings, token counting, OpenAI's Assistants), or no API at all
        (request("openai", "/v1/embeddings", {}), response(TOOL_USE)),
        (request("anthropic.messages", "/v1/messages/count_tokens", {}), response(TOOL_USE)),
        (request("openai", "/v1/threads/t_1/messages", {}), response(TOOL_USE)),
        (request("mock", "", {}), response(TOOL_USE)),
        ({"api": None, "path": None}, response(TOOL_USE)),
        ({}, response(TOOL_USE)),
    ],
)
def test_a_response_that_is_not_understood_derives_nothing(
    asked: dict[str, Any], answered: dict[str, Any]
) -> None:
    assert ToolTraffic().from_response(asked, answered) == []


@pytest.mark.parametrize(
    "asked",
    [
        request("anthropic.messages", "/v1/messages", None),
        request("anthropic.messages", "/v1/messages", "not json"),
        request("anthropic.messages", "/v1/messages", {"messages": "x"}),
        request("anthropic.messages", "/v1/messages", {"messages": [{"role": "user"}]}),
        request(
            "anthropic.messages",
            "/v1/messages",
            {"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
        ),
        request("openai", CHAT_PATH, {"messages": [{"role": "tool", "tool_call_id": 7}]}),
        request("openai", RESPONSES_PATH, {"input": "Just text."}),
        request("openai", RESPONSES_PATH, {"input": [{"type": "function_call_output"}]}),
        request(
            "gemini.generate_content",
            GEMINI_PATH,
            {"contents": [{"parts": [{"functionResponse": {"response": {}}}]}]},
        ),
        request("gemini.generate_content", GEMINI_PATH, {"contents": [{"parts": None}]}),
        {"api": "openai", "path": CHAT_PATH},
        {},
    ],
)
def test_a_request_that_is_not_understood_derives_nothing(asked: dict[str, Any]) -> None:
    assert ToolTraffic().from_request(asked) == []


@pytest.mark.parametrize(
    ("api", "path", "understood"),
    [
        ("openai", CHAT_PATH, True),
        ("openai.chat", CHAT_PATH, True),
        ("openai", "/openai/deployments/gpt/chat/completions", True),  # Azure's path
        ("openai.responses", "", False),  # the Responses API: no Chat Completions body
        ("openai.chat", "", True),  # no path: the api name says
        ("custom", CHAT_PATH, True),  # an api name nodeval does not know: the path says
        ("anthropic.messages", CHAT_PATH, False),  # they disagree
        ("openai", RESPONSES_PATH, False),
    ],
)
def test_the_api_is_told_by_the_path_and_checked_against_the_api_name(
    api: str, path: str, understood: bool
) -> None:
    completion = chat_completion(
        {"role": "assistant", "tool_calls": [chat_tool_call("c1", "f", "{}")]}, "tool_calls"
    )
    events = ToolTraffic().from_response(request(api, path, {}), response(completion))
    assert bool(events) is understood


# Any JSON, with the keys and values the readers look for.
KEYS = st.sampled_from(
    [
        *("type", "content", "id", "name", "input", "index", "delta", "partial_json"),
        *("tool_calls", "function", "arguments", "output", "call_id", "item", "response"),
        *("functionCall", "args", "functionResponse", "tool_use_id", "is_error", "error", "text"),
    ]
)
WORDS = st.sampled_from(
    [
        *("tool_use", "tool_result", "content_block_start", "content_block_delta"),
        *("content_block_stop", "input_json_delta", "function_call", "function_call_output"),
        *("response.output_item.done", "response.completed", "tool", "user", "assistant"),
        *("model", "{}", "{", "[DONE]", "toolu_01", "call_01", "lookup_order"),
    ]
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3) | st.text(max_size=4) | WORDS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=3), inner, max_size=5)
    ),
    max_leaves=20,
)


def exchanges() -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """A request carrying a result and a response asking for a call, for each API: the
    response as a body and as a stream."""
    anthropic_turn = [
        {"role": "user", "content": USER},
        {"role": "assistant", "content": TOOL_USE["content"]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "ok"}],
        },
    ]
    chat_call = chat_tool_call("call_01", "lookup_order", json.dumps(ARGS))
    chat_turn = [
        {"role": "user", "content": USER},
        {"role": "assistant", "tool_calls": [chat_call]},
        {"role": "tool", "tool_call_id": "call_01", "content": "ok"},
    ]
    output = {"type": "function_call_output", "call_id": "call_01", "output": "ok"}
    gemini_turn = [
        user({"text": USER}),
        model(function_call("lookup_order", ARGS)),
        user(function_response("lookup_order", {"status": "shipped"})),
    ]
    gemini_answer = gemini_chunk([function_call("lookup_order", ARGS)])
    return [
        (
            request("anthropic.messages", "/v1/messages", anthropic_body(anthropic_turn)),
            anthropic_message(TOOL_USE["content"], "tool_use"),
            ANTHROPIC_TOOL_STREAM,
        ),
        (
            request("openai", CHAT_PATH, chat_body(chat_turn)),
            chat_completion({"role": "assistant", "tool_calls": [chat_call]}, "tool_calls"),
            CHAT_TOOL_STREAM,
        ),
        (
            request("openai", RESPONSES_PATH, responses_body([FUNCTION_CALL, output])),
            response_object([FUNCTION_CALL]),
            responses_tool_stream(),
        ),
        (
            request("gemini.generate_content", GEMINI_PATH, gemini_body(gemini_turn)),
            gemini_answer,
            gemini_sse(gemini_chunk([{"text": "Hm."}], last=False), gemini_answer),
        ),
    ]


EXCHANGES = exchanges()


def mutated(data: st.DataObject, value: Any) -> Any:
    """`value` with one of its parts (or itself) replaced by arbitrary JSON."""
    if isinstance(value, dict | list) and value and data.draw(st.integers(0, 4)) > 0:
        keys = list(value) if isinstance(value, dict) else list(range(len(value)))
        key = data.draw(st.sampled_from(keys))
        copy = value.copy()
        copy[key] = mutated(data, value[key])
        return copy
    return data.draw(JSON)


@pytest.mark.parametrize("exchange", EXCHANGES, ids=["anthropic", "chat", "responses", "gemini"])
def test_each_fuzzed_exchange_derives_events_when_intact(
    exchange: tuple[dict[str, Any], dict[str, Any], str],
) -> None:
    asked, body, sse = exchange
    assert ToolTraffic().from_request(asked)
    assert ToolTraffic().from_response(asked, response(body))
    assert ToolTraffic().from_response(asked, response(sse=sse))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.integers(0, len(EXCHANGES) - 1), cut=st.integers(0, 4000))
def test_no_damaged_traffic_raises(data: st.DataObject, which: int, cut: int) -> None:
    """Each exchange with one part replaced by arbitrary JSON, its stream with one event
    replaced and cut short: whatever comes out is a list of valid events."""
    asked, body, sse = EXCHANGES[which]
    documents = [json.loads(line[5:]) for line in sse.splitlines() if line.startswith("data: {")]
    event = data.draw(st.integers(0, len(documents) - 1))
    documents[event] = mutated(data, documents[event])
    stream = "".join(f"data: {json.dumps(doc)}\n\n" for doc in documents)
    traffic = ToolTraffic()
    for _ in range(2):  # a second time, with the state the first left
        damaged = asked | {"body": mutated(data, asked["body"])}
        valid(traffic.from_request(damaged))
        valid(traffic.from_response(damaged, response(mutated(data, body))))
        valid(traffic.from_response(damaged, response(sse=stream[:cut])))
        valid(traffic.from_response(asked, response(sse=sse[:cut])))


# ---- the real SDKs, recorded against the fake -----------------------------------------------

SCRIPT = {
    "responses": [
        {"text": "Let me look.", "tool_calls": [{"name": "lookup_order", "args": ARGS}]},
        {"text": "Order A-1042 has shipped."},
    ]
}


@pytest.fixture
def fake() -> Iterator[LLMFake]:
    with LLMFake(SCRIPT) as served:
        yield served


def recorder(api: str) -> tuple[JournalWriter, httpx2.Client]:
    header = JournalHeader(
        session_id=new_session_id(),
        created_at=now_iso(),
        engine=EngineInfo(version="test"),
        source="record",
    )
    writer = JournalWriter(None, header)
    return writer, httpx2.Client(transport=RecordingTransport(writer, "program", api))


def anthropic_program(url: str, http: httpx2.Client, stream: bool) -> str:
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, http_client=http)
    messages: list[Any] = [{"role": "user", "content": USER}]
    call_ids = []
    for _ in range(2):
        kwargs: dict[str, Any] = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 256,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
        }
        if stream:
            with client.messages.stream(**kwargs) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**kwargs)
        uses = [b for b in message.content if b.type == "tool_use"]
        if not uses:
            break
        call_ids.append(uses[0].id)
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in message.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": uses[0].id, "content": RESULT_TEXT}
                ],
            },
        ]
    return call_ids[0]


def chat_program(url: str, http: httpx2.Client, stream: bool) -> str:
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, http_client=http)
    messages: list[Any] = [{"role": "user", "content": USER}]
    call_ids = []
    for _ in range(2):
        kwargs: dict[str, Any] = {
            "model": "gpt-4.1-mini",
            "messages": messages,
            "tools": CHAT_TOOLS,
        }
        if stream:
            with client.chat.completions.stream(**kwargs) as events:
                message = events.get_final_completion().choices[0].message
        else:
            message = client.chat.completions.create(**kwargs).choices[0].message
        if not message.tool_calls:
            break
        call_ids.append(message.tool_calls[0].id)
        messages += [
            message.model_dump(exclude_none=True, exclude={"parsed"}),
            {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": RESULT_TEXT},
        ]
    return call_ids[0]


def responses_program(url: str, http: httpx2.Client, stream: bool) -> str:
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, http_client=http)
    items: list[Any] = [{"role": "user", "content": USER}]
    call_ids = []
    for _ in range(2):
        kwargs: dict[str, Any] = {"model": "gpt-5-mini", "input": items, "tools": RESPONSES_TOOLS}
        if stream:
            with client.responses.stream(**kwargs) as events:
                answer = events.get_final_response()
        else:
            answer = client.responses.create(**kwargs)
        calls = [item for item in answer.output if item.type == "function_call"]
        if not calls:
            break
        call_ids.append(calls[0].call_id)
        items += [
            *(item.model_dump(exclude_none=True) for item in answer.output),
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": RESULT_TEXT},
        ]
    return call_ids[0]


def gemini_program(url: str, http: httpx2.Client, stream: bool) -> str:
    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=url, httpx_client=http)
    )
    config = types.GenerateContentConfig(
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name="lookup_order",
                        description="Find an order.",
                        parameters_json_schema=RESPONSES_TOOLS[0]["parameters"],
                    )
                ]
            )
        ]
    )
    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=USER)])]
    for _ in range(2):
        if stream:
            chunks = list(
                client.models.generate_content_stream(
                    model="gemini-2.5-flash", contents=contents, config=config
                )
            )
            parts = [p for c in chunks for p in c.candidates[0].content.parts]  # type: ignore[index, union-attr]
        else:
            answer = client.models.generate_content(
                model="gemini-2.5-flash", contents=contents, config=config
            )
            parts = answer.candidates[0].content.parts  # type: ignore[index, union-attr, assignment]
        calls = [p.function_call for p in parts if p.function_call]
        if not calls:
            break
        contents += [
            types.Content(role="model", parts=parts),
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(
                        name=calls[0].name or "", response={"status": "shipped"}
                    )
                ],
            ),
        ]
    return "lookup_order-1"  # Gemini gave the call no id: the first of its name


PROGRAMS = {
    "anthropic": ("anthropic.messages", anthropic_program, RESULT_TEXT),
    "chat": ("openai", chat_program, RESULT_TEXT),
    "responses": ("openai", responses_program, RESULT_TEXT),
    "gemini": ("gemini.generate_content", gemini_program, {"status": "shipped"}),
}


def derive_from_journal(writer: JournalWriter) -> list[tuple[str, dict[str, Any]]]:
    """The tool events of a recorded session, derived in the order its exchanges happened."""
    traffic = ToolTraffic()
    derived: list[tuple[str, dict[str, Any]]] = []
    asked: dict[str, Any] = {}
    for event in writer.events:
        if event.type == "llm.request":
            asked = event.payload_dict()
            derived += traffic.from_request(asked)
        elif event.type == "llm.response":
            derived += traffic.from_response(asked, event.payload_dict())
    return valid(derived)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("api", list(PROGRAMS))
def test_the_real_sdks_traffic_against_the_fake_derives_the_program_tools(
    api: str, stream: bool, fake: LLMFake
) -> None:
    api_name, program, sent = PROGRAMS[api]
    writer, http = recorder(api_name)
    with http:
        call_id = program(fake.url, http, stream)
    assert [e.payload.stream for e in writer.events if e.type == "llm.request"] == [stream] * 2
    derived = derive_from_journal(writer)
    assert derived == [
        register("lookup_order"),
        call("lookup_order", call_id, ARGS),
        result("lookup_order", call_id, sent),
    ]
    # The journal's assertions read the derived events as they read the engine's.
    events = [
        EVENT_ADAPTER.validate_python(
            {"seq": seq, "ts": "t", "type": kind, "turn": 1, "payload": payload}
        )
        for seq, (kind, payload) in enumerate(derived, start=1)
    ]
    for spec in (
        {"kind": "tool_called", "tool": "lookup_order", "args": ARGS, "times": 1},
        {"kind": "no_errors"},
    ):
        outcome = evaluate(ASSERTION.validate_python(spec), Evidence(events, None))
        assert outcome.ok, outcome.message
