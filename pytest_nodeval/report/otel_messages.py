"""A journaled model call's messages as the OpenTelemetry GenAI conventions write them.

`gen_ai.system_instructions`, `gen_ai.input.messages` and `gen_ai.output.messages`
(semantic conventions 1.38) hold one provider-neutral shape, whatever API made the call:

    {"role": "user" | "assistant" | "tool" | "system",
     "parts": [{"type": "text", "content": ...},
               {"type": "tool_call", "id": ..., "name": ..., "arguments": ...},
               {"type": "tool_call_response", "id": ..., "response": ...}],
     "finish_reason": ...}  # output messages only

This module reads the request and response bodies the journal keeps (the mock's, Anthropic
Messages, OpenAI Chat Completions and Responses, Gemini) into that shape. What it does not
recognise (an image, an unknown block) is left out, never an error.
"""

from __future__ import annotations

import json
from typing import Any

from .llm_replies import reply_of

Part = dict[str, Any]
Message = dict[str, Any]


def request_messages(api: str, body: Any) -> tuple[list[Part], list[Message]]:
    """The system instructions and the input messages of a journaled request body."""
    if not isinstance(body, dict):
        return [], []
    reader = _REQUEST_READERS.get(api, _read_mock_request)
    system, messages = reader(body)
    return system, [m for m in messages if m["parts"]]


def response_messages(api: str, body: Any, sse: str | None) -> list[Message]:
    """The output message of a journaled response (one, or none when it holds nothing)."""
    if sse or not isinstance(body, dict):
        text, calls = reply_of(body, sse)
        parts = _text_parts(text) + [_call(None, name, args) for name, args in calls]
        return [_output(parts, None)] if parts else []
    reader = _RESPONSE_READERS.get(api, _read_mock_response)
    parts, finish = reader(body)
    return [_output(parts, finish)] if parts or finish else []


def finish_reasons(messages: list[Message]) -> list[str]:
    return [str(m["finish_reason"]) for m in messages if m.get("finish_reason")]


# -- the parts ---------------------------------------------------------------------------------


def _text_parts(text: Any) -> list[Part]:
    return [{"type": "text", "content": text}] if isinstance(text, str) and text else []


def _call(call_id: Any, name: Any, arguments: Any) -> Part:
    part: Part = {"type": "tool_call", "name": str(name), "arguments": json_or_text(arguments)}
    if call_id is not None:
        part["id"] = str(call_id)
    return part


def _response(call_id: Any, response: Any) -> Part:
    part: Part = {"type": "tool_call_response", "response": response}
    if call_id is not None:
        part["id"] = str(call_id)
    return part


def _message(role: str, parts: list[Part]) -> Message:
    return {"role": role, "parts": parts}


def _output(parts: list[Part], finish: Any) -> Message:
    message = _message("assistant", parts)
    if finish is not None:
        message["finish_reason"] = str(finish)
    return message


def json_or_text(value: Any) -> Any:
    """Arguments some APIs send as JSON text (OpenAI), as the object they stand for."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _block_text(content: Any) -> str:
    """The text of a content given as a string or as a list of text blocks."""
    if isinstance(content, str):
        return content
    return "".join(
        str(block.get("text", ""))
        for block in _dicts(content)
        if block.get("type") in (None, "text", "input_text", "output_text")
    )


# -- requests ----------------------------------------------------------------------------------


def _read_mock_request(body: dict[str, Any]) -> tuple[list[Part], list[Message]]:
    messages = []
    for message in _dicts(body.get("messages")):
        role = str(message.get("role", "user"))
        if role == "tool":
            parts = [_response(message.get("call_id"), message.get("content"))]
        else:
            parts = _text_parts(message.get("text")) + [
                _call(c.get("id"), c.get("name"), c.get("args"))
                for c in _dicts(message.get("tool_calls"))
            ]
        messages.append(_message(role, parts))
    return _text_parts(body.get("system")), messages


def _read_anthropic_request(body: dict[str, Any]) -> tuple[list[Part], list[Message]]:
    messages = []
    for message in _dicts(body.get("messages")):
        content = message.get("content")
        if isinstance(content, str):
            messages.append(_message(str(message.get("role")), _text_parts(content)))
            continue
        parts, responses = [], []
        for block in _dicts(content):
            kind = block.get("type")
            if kind == "text":
                parts += _text_parts(block.get("text"))
            elif kind == "tool_use":
                parts.append(_call(block.get("id"), block.get("name"), block.get("input")))
            elif kind == "tool_result":
                responses.append(_response(block.get("tool_use_id"), block.get("content")))
        if responses:  # Anthropic sends results in a user message: they are the tool's words
            messages.append(_message("tool", responses))
        if parts:
            messages.append(_message(str(message.get("role")), parts))
    return _text_parts(_block_text(body.get("system"))), messages


def _read_chat_request(body: dict[str, Any]) -> tuple[list[Part], list[Message]]:
    system: list[Part] = []
    messages = []
    for message in _dicts(body.get("messages")):
        role = str(message.get("role"))
        text = _block_text(message.get("content"))
        if role in ("system", "developer"):
            system += _text_parts(text)
        elif role == "tool":
            messages.append(_message("tool", [_response(message.get("tool_call_id"), text)]))
        else:
            calls = [
                _call(c.get("id"), (c.get("function") or {}).get("name"), _arguments(c))
                for c in _dicts(message.get("tool_calls"))
            ]
            messages.append(_message(role, _text_parts(text) + calls))
    return system, messages


def _arguments(call: dict[str, Any]) -> Any:
    function = call.get("function")
    return function.get("arguments") if isinstance(function, dict) else None


def _read_responses_request(body: dict[str, Any]) -> tuple[list[Part], list[Message]]:
    items = body.get("input")
    if isinstance(items, str):
        return _text_parts(body.get("instructions")), [_message("user", _text_parts(items))]
    messages = []
    for item in _dicts(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            call = _call(item.get("call_id"), item.get("name"), item.get("arguments"))
            messages.append(_message("assistant", [call]))
        elif kind == "function_call_output":
            messages.append(_message("tool", [_response(item.get("call_id"), item.get("output"))]))
        elif kind == "message":
            text = _block_text(item.get("content"))
            messages.append(_message(str(item.get("role", "user")), _text_parts(text)))
    return _text_parts(body.get("instructions")), messages


def _read_gemini_request(body: dict[str, Any]) -> tuple[list[Part], list[Message]]:
    instruction = body.get("systemInstruction") or body.get("system_instruction") or {}
    system = _text_parts(
        "".join(str(p.get("text", "")) for p in _dicts(instruction.get("parts")))
        if isinstance(instruction, dict)
        else ""
    )
    messages = []
    for content in _dicts(body.get("contents")):
        role = "assistant" if content.get("role") == "model" else "user"
        parts, responses = _gemini_parts(content.get("parts"))
        if responses:
            messages.append(_message("tool", responses))
        if parts:
            messages.append(_message(role, parts))
    return system, messages


def _gemini_parts(raw: Any) -> tuple[list[Part], list[Part]]:
    parts: list[Part] = []
    responses: list[Part] = []
    for part in _dicts(raw):
        call = part.get("functionCall") or part.get("function_call")
        answer = part.get("functionResponse") or part.get("function_response")
        if isinstance(call, dict):
            parts.append(_call(call.get("id"), call.get("name"), call.get("args")))
        elif isinstance(answer, dict):
            responses.append(_response(answer.get("id"), answer.get("response")))
        else:
            parts += _text_parts(part.get("text"))
    return parts, responses


# -- responses ---------------------------------------------------------------------------------


def _read_mock_response(body: dict[str, Any]) -> tuple[list[Part], Any]:
    calls = [
        _call(c.get("id"), c.get("name"), c.get("args")) for c in _dicts(body.get("tool_calls"))
    ]
    return _text_parts(body.get("text")) + calls, body.get("stop_reason")


def _read_anthropic_response(body: dict[str, Any]) -> tuple[list[Part], Any]:
    parts: list[Part] = []
    for block in _dicts(body.get("content")):
        if block.get("type") == "text":
            parts += _text_parts(block.get("text"))
        elif block.get("type") == "tool_use":
            parts.append(_call(block.get("id"), block.get("name"), block.get("input")))
    return parts, body.get("stop_reason")


def _read_chat_response(body: dict[str, Any]) -> tuple[list[Part], Any]:
    choices = _dicts(body.get("choices"))
    if not choices:
        return [], None
    message = choices[0].get("message") or {}
    calls = [
        _call(c.get("id"), (c.get("function") or {}).get("name"), _arguments(c))
        for c in _dicts(message.get("tool_calls"))
    ]
    return _text_parts(_block_text(message.get("content"))) + calls, choices[0].get("finish_reason")


def _read_responses_response(body: dict[str, Any]) -> tuple[list[Part], Any]:
    parts: list[Part] = []
    for item in _dicts(body.get("output")):
        if item.get("type") == "message":
            parts += _text_parts(_block_text(item.get("content")))
        elif item.get("type") == "function_call":
            parts.append(_call(item.get("call_id"), item.get("name"), item.get("arguments")))
    return parts, body.get("status")


def _read_gemini_response(body: dict[str, Any]) -> tuple[list[Part], Any]:
    candidates = _dicts(body.get("candidates"))
    if not candidates:
        return [], None
    content = candidates[0].get("content") or {}
    parts, _ = _gemini_parts(content.get("parts") if isinstance(content, dict) else None)
    return parts, candidates[0].get("finishReason") or candidates[0].get("finish_reason")


_REQUEST_READERS = {
    "mock": _read_mock_request,
    "anthropic.messages": _read_anthropic_request,
    "openai.chat": _read_chat_request,
    "openai.responses": _read_responses_request,
    "gemini.generate_content": _read_gemini_request,
}
_RESPONSE_READERS = {
    "mock": _read_mock_response,
    "anthropic.messages": _read_anthropic_response,
    "openai.chat": _read_chat_response,
    "openai.responses": _read_responses_response,
    "gemini.generate_content": _read_gemini_response,
}
