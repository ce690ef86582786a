"""Wire formats of the three LLM APIs that `fakes.llm` serves.

Each API has three parts here: reading a request into a neutral `RequestView`, rendering a
neutral `Completion` as a JSON body or as the SSE events the official SDK parses, and the
provider's error body. Shapes follow what anthropic 2.14 and openai 3.57 parse (their
`types/` and `lib/streaming/` accumulators), not the full public schemas: fields the SDKs
do not read are omitted or given fixed values.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "API_PATHS",
    "Api",
    "Completion",
    "CompletedCall",
    "RequestView",
    "error_body",
    "read_request",
    "render_json",
    "render_sse",
    "sse_event",
]

Api = Literal["anthropic", "openai_chat", "openai_responses"]

API_PATHS: dict[str, Api] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
}


@dataclass(frozen=True, slots=True)
class RequestView:
    """What the script's rules can match on, read the same way for every API."""

    api: Api
    model: str
    stream: bool
    include_usage: bool
    system: str
    last_user: str
    tool_names: tuple[str, ...]
    after_tool_result: bool


@dataclass(frozen=True, slots=True)
class CompletedCall:
    id: str
    name: str
    args: dict[str, Any]

    @property
    def args_json(self) -> str:
        return json.dumps(self.args, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Completion:
    """One resolved answer, independent of the API it is rendered for."""

    response_id: str
    model: str
    text: str | None
    calls: tuple[CompletedCall, ...] = ()
    input_tokens: int = 1
    output_tokens: int = 1
    stop_reason: str | None = None
    created: int = field(default_factory=lambda: int(time.time()))


# ---- reading requests ---------------------------------------------------------------


def read_request(api: Api, body: Mapping[str, Any]) -> RequestView:
    readers = {
        "anthropic": _read_anthropic,
        "openai_chat": _read_openai_chat,
        "openai_responses": _read_openai_responses,
    }
    return readers[api](body)


def _text_of(content: Any) -> str:
    """Joins the text parts of a content value (a string or a list of blocks/parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_text_of(p.get("text", p.get("content", ""))) for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if p)
    return ""


def _has_block(content: Any, block_type: str) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == block_type for b in content
    )


def _read_anthropic(body: Mapping[str, Any]) -> RequestView:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    last = messages[-1] if messages else {}
    return RequestView(
        api="anthropic",
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        include_usage=True,
        system=_text_of(body.get("system", "")),
        last_user=_text_of(users[-1].get("content")) if users else "",
        tool_names=tuple(str(t.get("name", "")) for t in body.get("tools") or []),
        after_tool_result=last.get("role") == "user"
        and _has_block(last.get("content"), "tool_result"),
    )


def _read_openai_chat(body: Mapping[str, Any]) -> RequestView:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = [_text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")]
    users = [m for m in messages if m.get("role") == "user"]
    return RequestView(
        api="openai_chat",
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        system="\n".join(system),
        last_user=_text_of(users[-1].get("content")) if users else "",
        tool_names=tuple(
            str((t.get("function") or {}).get("name", "")) for t in body.get("tools") or []
        ),
        after_tool_result=bool(messages) and messages[-1].get("role") == "tool",
    )


def _read_openai_responses(body: Mapping[str, Any]) -> RequestView:
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    items = [i for i in items if isinstance(i, dict)]
    users = [i for i in items if i.get("role") == "user"]
    system = [_text_of(i.get("content")) for i in items if i.get("role") in ("system", "developer")]
    return RequestView(
        api="openai_responses",
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        include_usage=True,
        system="\n".join([str(body.get("instructions") or ""), *system]).strip(),
        last_user=_text_of(users[-1].get("content")) if users else "",
        tool_names=tuple(str(t.get("name", "")) for t in body.get("tools") or []),
        after_tool_result=bool(items) and items[-1].get("type") == "function_call_output",
    )


# ---- JSON bodies ---------------------------------------------------------------------


def render_json(api: Api, done: Completion) -> dict[str, Any]:
    renderers = {
        "anthropic": _anthropic_message,
        "openai_chat": _chat_completion,
        "openai_responses": lambda c: _response_object(c, status="completed"),
    }
    return renderers[api](done)


def _anthropic_stop_reason(done: Completion) -> str:
    return done.stop_reason or ("tool_use" if done.calls else "end_turn")


def _anthropic_message(done: Completion) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if done.text:
        content.append({"type": "text", "text": done.text})
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in done.calls]
    return {
        "id": done.response_id,
        "type": "message",
        "role": "assistant",
        "model": done.model,
        "content": content,
        "stop_reason": _anthropic_stop_reason(done),
        "stop_sequence": None,
        "usage": {"input_tokens": done.input_tokens, "output_tokens": done.output_tokens},
    }


def _chat_usage(done: Completion) -> dict[str, int]:
    return {
        "prompt_tokens": done.input_tokens,
        "completion_tokens": done.output_tokens,
        "total_tokens": done.input_tokens + done.output_tokens,
    }


def _chat_finish_reason(done: Completion) -> str:
    return done.stop_reason or ("tool_calls" if done.calls else "stop")


def _chat_tool_calls(done: Completion) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.args_json}}
        for c in done.calls
    ]


def _chat_completion(done: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": done.text, "refusal": None}
    if done.calls:
        message["tool_calls"] = _chat_tool_calls(done)
    return {
        "id": done.response_id,
        "object": "chat.completion",
        "created": done.created,
        "model": done.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": _chat_finish_reason(done), "logprobs": None}
        ],
        "usage": _chat_usage(done),
    }


def _responses_items(done: Completion) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if done.text is not None:
        items.append(_message_item(done, done.text, "completed"))
    items += [_function_item(c, c.args_json, "completed") for c in done.calls]
    return items


def _message_item(done: Completion, text: str | None, status: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    content = [] if text is None else [part]
    return {
        "type": "message",
        "id": f"msg_{done.response_id}",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _function_item(call: CompletedCall, arguments: str, status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call.id}",
        "call_id": call.id,
        "name": call.name,
        "arguments": arguments,
        "status": status,
    }


def _response_object(done: Completion, *, status: str) -> dict[str, Any]:
    finished = status == "completed"
    return {
        "id": done.response_id,
        "object": "response",
        "created_at": done.created,
        "status": status,
        "model": done.model,
        "output": _responses_items(done) if finished else [],
        "usage": _responses_usage(done) if finished else None,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
    }


def _responses_usage(done: Completion) -> dict[str, Any]:
    return {
        "input_tokens": done.input_tokens,
        "output_tokens": done.output_tokens,
        "total_tokens": done.input_tokens + done.output_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }


# ---- SSE streams ---------------------------------------------------------------------


def sse_event(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def render_sse(api: Api, done: Completion, *, include_usage: bool) -> list[bytes]:
    """The complete, well-formed event stream for `done`, one bytes item per event."""
    if api == "anthropic":
        return list(_anthropic_events(done))
    if api == "openai_chat":
        return list(_chat_chunks(done, include_usage=include_usage))
    return list(_responses_events(done))


def pieces(text: str, count: int = 3) -> list[str]:
    """Splits text into up to `count` non-empty deltas, as a model streams them."""
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _anthropic_events(done: Completion) -> Iterator[bytes]:
    start = _anthropic_message(done) | {"content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": done.input_tokens, "output_tokens": 1}
    yield sse_event({"type": "message_start", "message": start}, "message_start")
    index = 0
    if done.text:
        yield from _anthropic_block(index, {"type": "text", "text": ""}, "text_delta", "text", done.text)
        index += 1
    for call in done.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield from _anthropic_block(index, block, "input_json_delta", "partial_json", call.args_json)
        index += 1
    delta = {"stop_reason": _anthropic_stop_reason(done), "stop_sequence": None}
    usage = {"output_tokens": done.output_tokens}
    yield sse_event({"type": "message_delta", "delta": delta, "usage": usage}, "message_delta")
    yield sse_event({"type": "message_stop"}, "message_stop")


def _anthropic_block(
    index: int, block: dict[str, Any], delta_type: str, delta_key: str, text: str
) -> Iterator[bytes]:
    start = {"type": "content_block_start", "index": index, "content_block": block}
    yield sse_event(start, "content_block_start")
    if index == 0:
        # The real API interleaves keep-alive pings; the SDK must skip them.
        yield sse_event({"type": "ping"}, "ping")
    for piece in pieces(text):
        delta = {"type": delta_type, delta_key: piece}
        event = {"type": "content_block_delta", "index": index, "delta": delta}
        yield sse_event(event, "content_block_delta")
    yield sse_event({"type": "content_block_stop", "index": index}, "content_block_stop")


def _chat_chunk(done: Completion, delta: dict[str, Any], finish: str | None, include_usage: bool) -> bytes:
    chunk: dict[str, Any] = {
        "id": done.response_id,
        "object": "chat.completion.chunk",
        "created": done.created,
        "model": done.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    if include_usage:
        # With include_usage every chunk carries `usage: null` until the final usage chunk.
        chunk["usage"] = None
    return sse_event(chunk)


def _chat_chunks(done: Completion, *, include_usage: bool) -> Iterator[bytes]:
    yield _chat_chunk(done, {"role": "assistant", "content": "", "refusal": None}, None, include_usage)
    for piece in pieces(done.text or ""):
        yield _chat_chunk(done, {"content": piece}, None, include_usage)
    for index, call in enumerate(done.calls):
        function = {"name": call.name, "arguments": ""}
        head = {"index": index, "id": call.id, "type": "function", "function": function}
        yield _chat_chunk(done, {"tool_calls": [head]}, None, include_usage)
        for piece in pieces(call.args_json):
            more = {"index": index, "function": {"arguments": piece}}
            yield _chat_chunk(done, {"tool_calls": [more]}, None, include_usage)
    yield _chat_chunk(done, {}, _chat_finish_reason(done), include_usage)
    if include_usage:
        final = {
            "id": done.response_id,
            "object": "chat.completion.chunk",
            "created": done.created,
            "model": done.model,
            "choices": [],
            "usage": _chat_usage(done),
        }
        yield sse_event(final)
    yield sse_event("[DONE]")


def _responses_events(done: Completion) -> Iterator[bytes]:
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse_event({"type": kind, "sequence_number": next(seq), **fields}, kind)

    yield event("response.created", response=_response_object(done, status="in_progress"))
    yield event("response.in_progress", response=_response_object(done, status="in_progress"))
    index = 0
    if done.text is not None:
        yield from _responses_message_events(done, index, event)
        index += 1
    for call in done.calls:
        yield from _responses_call_events(call, index, event)
        index += 1
    yield event("response.completed", response=_response_object(done, status="completed"))


def _responses_message_events(done: Completion, index: int, event: Any) -> Iterator[bytes]:
    item_id = f"msg_{done.response_id}"
    text = done.text or ""
    empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    added = _message_item(done, None, "in_progress")
    yield event("response.output_item.added", output_index=index, item=added)
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    yield event("response.content_part.added", **where, part=empty_part)
    for piece in pieces(text):
        yield event("response.output_text.delta", **where, delta=piece, logprobs=[])
    yield event("response.output_text.done", **where, text=text, logprobs=[])
    yield event("response.content_part.done", **where, part=empty_part | {"text": text})
    yield event("response.output_item.done", output_index=index, item=_message_item(done, text, "completed"))


def _responses_call_events(call: CompletedCall, index: int, event: Any) -> Iterator[bytes]:
    where = {"item_id": f"fc_{call.id}", "output_index": index}
    added = _function_item(call, "", "in_progress")
    yield event("response.output_item.added", output_index=index, item=added)
    for piece in pieces(call.args_json):
        yield event("response.function_call_arguments.delta", **where, delta=piece)
    yield event("response.function_call_arguments.done", **where, name=call.name, arguments=call.args_json)
    finished = _function_item(call, call.args_json, "completed")
    yield event("response.output_item.done", output_index=index, item=finished)


# ---- errors --------------------------------------------------------------------------

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "unknown_url"),
    429: ("requests", "rate_limit_exceeded"),
}


def error_body(api: Api, status: int, message: str) -> dict[str, Any]:
    """The provider's error envelope, so the SDK maps `status` to its own exception class."""
    if api == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind, code = _OPENAI_ERROR_TYPES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
