"""Wire formats of the four LLM APIs that `fakes.llm` serves.

Each API has three parts here: reading a request into a neutral `RequestView`, rendering a
neutral `Completion` as a JSON body or as the SSE events the official SDK parses, and the
provider's error body. Shapes follow what anthropic 2.14, openai 3.57 and google-genai 3.6
parse (their `types/` and streaming accumulators), not the full public schemas: fields the
SDKs do not read are omitted or given fixed values.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

FIXED_CREATED = 1767225600
"""2026-01-01T00:00:00Z: what every response of the fake says it was created at."""

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

Api = Literal["anthropic", "openai_chat", "openai_responses", "gemini"]

API_PATHS: dict[str, Api] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
}
GEMINI_PATHS = (
    # The model is part of the path; the SDK puts its API version (v1beta, v1) first.
    "/{version}/models/{model}:generateContent",
    "/{version}/models/{model}:streamGenerateContent",
)


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
    """Every prompt token, the cached ones included (OpenAI's convention)."""
    output_tokens: int = 1
    cache_read_tokens: int = 0
    """Of input_tokens, read from the prompt cache (Gemini's cachedContentTokenCount)."""
    cache_write_tokens: int = 0
    """Of input_tokens, written to the prompt cache (only Anthropic reports these)."""
    stop_reason: str | None = None
    created: int = FIXED_CREATED
    """A fixed time, not the clock: a recording of the fake is the same byte for byte each time
    (nodeval record installs only what changed)."""


# ---- reading requests ---------------------------------------------------------------


def read_request(
    api: Api, body: Mapping[str, Any], path_params: Mapping[str, str] | None = None
) -> RequestView:
    """`path_params`: the model and the method, for Gemini, whose body names neither."""
    if api == "gemini":
        return _read_gemini(body, path_params or {})
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
        parts = [
            _text_of(p.get("text", p.get("content", ""))) for p in content if isinstance(p, dict)
        ]
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
    system = [
        _text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    ]
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


def _gemini_text(content: Any) -> str:
    parts = content.get("parts") if isinstance(content, dict) else None
    texts = [
        str(p["text"])
        for p in parts or []
        if isinstance(p, dict) and isinstance(p.get("text"), str)
    ]
    return "\n".join(t for t in texts if t)


def _read_gemini(body: Mapping[str, Any], path_params: Mapping[str, str]) -> RequestView:
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    # Function results come back in user contents too; the user's words are the text parts.
    users = [
        text for c in contents if c.get("role", "user") == "user" and (text := _gemini_text(c))
    ]
    last_parts = contents[-1].get("parts") or [] if contents else []
    declarations = [
        d
        for t in body.get("tools") or []
        if isinstance(t, dict)
        for d in t.get("functionDeclarations") or []
        if isinstance(d, dict)
    ]
    return RequestView(
        api="gemini",
        model=str(path_params.get("model", "")),
        stream=str(path_params.get("method", "")).startswith("stream"),
        include_usage=True,
        system=_gemini_text(body.get("systemInstruction")),
        last_user=users[-1] if users else "",
        tool_names=tuple(str(d.get("name", "")) for d in declarations),
        after_tool_result=any(isinstance(p, dict) and "functionResponse" in p for p in last_parts),
    )


# ---- JSON bodies ---------------------------------------------------------------------


def render_json(api: Api, done: Completion) -> dict[str, Any]:
    renderers = {
        "anthropic": _anthropic_message,
        "openai_chat": _chat_completion,
        "openai_responses": lambda c: _response_object(c, status="completed"),
        "gemini": _gemini_response,
    }
    return renderers[api](done)


def _anthropic_stop_reason(done: Completion) -> str:
    return done.stop_reason or ("tool_use" if done.calls else "end_turn")


def _anthropic_message(done: Completion) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if done.text:
        content.append({"type": "text", "text": done.text})
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in done.calls
    ]
    return {
        "id": done.response_id,
        "type": "message",
        "role": "assistant",
        "model": done.model,
        "content": content,
        "stop_reason": _anthropic_stop_reason(done),
        "stop_sequence": None,
        "usage": _anthropic_usage(done, done.output_tokens),
    }


def _anthropic_usage(done: Completion, output_tokens: int) -> dict[str, int]:
    # Anthropic's input_tokens leaves out the tokens read from or written to the cache.
    return {
        "input_tokens": done.input_tokens - done.cache_read_tokens - done.cache_write_tokens,
        "cache_creation_input_tokens": done.cache_write_tokens,
        "cache_read_input_tokens": done.cache_read_tokens,
        "output_tokens": output_tokens,
    }


def _chat_usage(done: Completion) -> dict[str, Any]:
    return {
        "prompt_tokens": done.input_tokens,
        "completion_tokens": done.output_tokens,
        "total_tokens": done.input_tokens + done.output_tokens,
        "prompt_tokens_details": {"cached_tokens": done.cache_read_tokens},
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
            {
                "index": 0,
                "message": message,
                "finish_reason": _chat_finish_reason(done),
                "logprobs": None,
            }
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
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
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
        "input_tokens_details": {"cached_tokens": done.cache_read_tokens},
        "output_tokens_details": {"reasoning_tokens": 0},
    }


def _gemini_usage(done: Completion, *, partial: bool = False) -> dict[str, int]:
    if partial:  # what a stream's early chunks report: the prompt, before the answer is counted
        return {"promptTokenCount": done.input_tokens, "totalTokenCount": done.input_tokens}
    usage = {
        "promptTokenCount": done.input_tokens,
        "candidatesTokenCount": done.output_tokens,
        "totalTokenCount": done.input_tokens + done.output_tokens,
    }
    if done.cache_read_tokens:
        usage["cachedContentTokenCount"] = done.cache_read_tokens
    return usage


def _gemini_call_parts(done: Completion) -> list[dict[str, Any]]:
    parts = []
    for index, call in enumerate(done.calls):
        function_call: dict[str, Any] = {"name": call.name, "args": call.args}
        if call.id:  # Gemini leaves ids out unless the script gives one
            function_call["id"] = call.id
        part: dict[str, Any] = {"functionCall": function_call}
        if index == 0:
            # Gemini 3 signs the first call of a turn and wants the signature sent back.
            part["thoughtSignature"] = gemini_signature(done.response_id)
        parts.append(part)
    return parts


def gemini_signature(response_id: str) -> str:
    import base64

    return base64.b64encode(f"fake-signature-{response_id}".encode()).decode()


def _gemini_chunk(done: Completion, parts: list[dict[str, Any]], *, last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if last:
        candidate["finishReason"] = done.stop_reason or "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": _gemini_usage(done, partial=not last),
        "modelVersion": done.model,
        "responseId": done.response_id,
    }


def _gemini_response(done: Completion) -> dict[str, Any]:
    parts = [{"text": done.text}] if done.text else []
    return _gemini_chunk(done, parts + _gemini_call_parts(done), last=True)


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
    if api == "gemini":
        return list(_gemini_chunks(done))
    return list(_responses_events(done))


def pieces(text: str, count: int = 3) -> list[str]:
    """Splits text into up to `count` non-empty deltas, as a model streams them."""
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _anthropic_events(done: Completion) -> Iterator[bytes]:
    start = _anthropic_message(done) | {"content": [], "stop_reason": None}
    start["usage"] = _anthropic_usage(done, 1)
    yield sse_event({"type": "message_start", "message": start}, "message_start")
    index = 0
    if done.text:
        yield from _anthropic_block(
            index, {"type": "text", "text": ""}, "text_delta", "text", done.text
        )
        index += 1
    for call in done.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield from _anthropic_block(
            index, block, "input_json_delta", "partial_json", call.args_json
        )
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


def _chat_chunk(
    done: Completion, delta: dict[str, Any], finish: str | None, include_usage: bool
) -> bytes:
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
    yield _chat_chunk(
        done, {"role": "assistant", "content": "", "refusal": None}, None, include_usage
    )
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
    yield event(
        "response.output_item.done", output_index=index, item=_message_item(done, text, "completed")
    )


def _responses_call_events(call: CompletedCall, index: int, event: Any) -> Iterator[bytes]:
    where = {"item_id": f"fc_{call.id}", "output_index": index}
    added = _function_item(call, "", "in_progress")
    yield event("response.output_item.added", output_index=index, item=added)
    for piece in pieces(call.args_json):
        yield event("response.function_call_arguments.delta", **where, delta=piece)
    yield event(
        "response.function_call_arguments.done", **where, name=call.name, arguments=call.args_json
    )
    finished = _function_item(call, call.args_json, "completed")
    yield event("response.output_item.done", output_index=index, item=finished)


def _gemini_chunks(done: Completion) -> Iterator[bytes]:
    """Text in several chunks, then the calls whole (Gemini never splits a call's arguments);
    the last chunk carries the finish reason and the full usage."""
    batches = [[{"text": piece}] for piece in pieces(done.text or "")]
    if done.calls:
        batches.append(_gemini_call_parts(done))
    batches = batches or [[{"text": ""}]]
    for index, parts in enumerate(batches):
        yield sse_event(_gemini_chunk(done, parts, last=index == len(batches) - 1))


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


_GOOGLE_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(api: Api, status: int, message: str) -> dict[str, Any]:
    """The provider's error envelope, so the SDK maps `status` to its own exception class."""
    if api == "gemini":
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _GOOGLE_STATUSES.get(status, "UNKNOWN"),
            }
        }
    if api == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind, code = _OPENAI_ERROR_TYPES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
