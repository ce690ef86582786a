"""What an LLM call returned, read from a journaled response of any provider API.

The journal keeps responses as the provider sent them: the mock's `{text, tool_calls}`,
Anthropic Messages, OpenAI Chat Completions and Responses, Gemini GenerateContent bodies,
or the whole event stream of a streaming call. `reply_of` reduces each to its text and tool
calls, as far as it can; anything it does not recognise gives an empty reply, never an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

Reply = tuple[str, list[tuple[str, Any]]]
"""The text, and the tool calls as (name, arguments)."""


def reply_of(body: Any, sse: str | None) -> Reply:
    """The text and tool calls (name, arguments) of a mock, Anthropic, OpenAI or Gemini response."""
    if sse:
        return _reply_of_stream(sse)
    if not isinstance(body, dict):
        return _as_text(body), []
    for extract in (
        _reply_mock,
        _reply_anthropic,
        _reply_openai_chat,
        _reply_openai_responses,
        _reply_gemini,
    ):
        found = extract(body)
        if found is not None:
            return found
    return "", []


def _reply_mock(body: dict[str, Any]) -> Reply | None:
    if "tool_calls" not in body and not isinstance(body.get("text"), str):
        return None
    calls = _list(body.get("tool_calls"))
    return str(body.get("text") or ""), [(str(_dig(c, "name")), _dig(c, "args")) for c in calls]


def _reply_anthropic(body: dict[str, Any]) -> Reply | None:
    blocks = body.get("content")
    if not isinstance(blocks, list):
        return None
    texts = [
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    ]
    calls = [
        (str(b.get("name")), b.get("input"))
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    return "".join(texts), calls


def _reply_openai_chat(body: dict[str, Any]) -> Reply | None:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return None
    message = _dig(choices[0], "message") or {}
    calls = _list(message.get("tool_calls"))
    return str(message.get("content") or ""), [
        (str(_dig(c, "function", "name")), _dig(c, "function", "arguments")) for c in calls
    ]


def _reply_openai_responses(body: dict[str, Any]) -> Reply | None:
    items = body.get("output")
    if not isinstance(items, list):
        return None
    texts, calls = [], []
    for item in (i for i in items if isinstance(i, dict)):
        if item.get("type") == "function_call":
            calls.append((str(item.get("name")), item.get("arguments")))
        elif item.get("type") == "message" and isinstance(item.get("content"), list):
            texts += [
                str(c.get("text", ""))
                for c in item["content"]
                if isinstance(c, dict) and "text" in c
            ]
    return "".join(texts), calls


def _reply_gemini(body: dict[str, Any]) -> Reply | None:
    candidates = body.get("candidates")
    if not isinstance(candidates, list):
        return None
    parts = _list(_dig(candidates[0], "content", "parts")) if candidates else []
    texts = [
        str(p["text"])
        for p in parts
        if isinstance(p, dict) and "text" in p and not p.get("thought")
    ]
    calls = [
        (str(_dig(p, "functionCall", "name")), _dig(p, "functionCall", "args"))
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)
    ]
    return "".join(texts), calls


def _reply_of_stream(sse: str) -> Reply:
    """Text and tool calls reassembled from a recorded event stream (best effort)."""
    texts: list[str] = []
    calls: dict[str, list[Any]] = {}  # key -> [name, argument fragments]
    for doc in _sse_documents(sse):
        if _dig(doc, "type") == "response.completed" and isinstance(_dig(doc, "response"), dict):
            return _reply_openai_responses(doc["response"]) or ("", [])
        # Gemini: every chunk is a whole response with a piece of the answer
        if "candidates" in doc:
            text, whole_calls = _reply_gemini(doc) or ("", [])
            texts.append(text)
            for name, args in whole_calls:
                calls[f"g{len(calls)}"] = [name, json.dumps(args)]
            continue
        texts.append(_stream_text(doc))
        _collect_stream_call(doc, calls)
    return "".join(texts), [(name, "".join(parts)) for name, *parts in calls.values()]


def _sse_documents(sse: str) -> Iterable[dict[str, Any]]:
    for line in sse.splitlines():
        data = line[5:].strip() if line.startswith("data:") else ""
        if data and data != "[DONE]":
            doc = _parse(data)
            if doc is not None:
                yield doc


def _stream_text(doc: dict[str, Any]) -> str:
    delta = _dig(doc, "delta")
    if isinstance(delta, dict) and delta.get("type") == "text_delta":  # Anthropic
        return str(delta.get("text", ""))
    choices = doc.get("choices")
    if isinstance(choices, list) and choices:  # OpenAI chat
        return str(_dig(choices[0], "delta", "content") or "")
    if doc.get("type") == "response.output_text.delta":  # OpenAI Responses
        return str(doc.get("delta", ""))
    return ""


def _collect_stream_call(doc: dict[str, Any], calls: dict[str, list[Any]]) -> None:
    block = _dig(doc, "content_block")
    # Anthropic: start, then JSON deltas
    if isinstance(block, dict) and block.get("type") == "tool_use":
        calls[f"a{doc.get('index')}"] = [str(block.get("name"))]
    delta = _dig(doc, "delta")
    if (
        isinstance(delta, dict)
        and delta.get("type") == "input_json_delta"
        and f"a{doc.get('index')}" in calls
    ):
        calls[f"a{doc.get('index')}"].append(str(delta.get("partial_json", "")))
    choices = doc.get("choices")
    for call in (
        (_dig(choices[0], "delta", "tool_calls") or [])
        if isinstance(choices, list) and choices
        else []
    ):
        entry = calls.setdefault(
            f"o{_dig(call, 'index')}", [str(_dig(call, "function", "name") or "")]
        )
        entry.append(str(_dig(call, "function", "arguments") or ""))


def _as_text(body: Any) -> str:
    """A body that is not a JSON object (an error page, a bare string) is its own text."""
    if body is None or isinstance(body, str):
        return body or ""
    return json.dumps(body, ensure_ascii=False, default=str)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _parse(text: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
