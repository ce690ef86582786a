"""Tool calls and results of a program that runs its own tools, read out of its model traffic.

An agent that is a separate program talks to the model through the recording proxy, so nodeval
sees its tools only in the journaled exchanges: a response asks for calls (Anthropic `tool_use`
blocks, Chat Completions `tool_calls`, Responses `function_call` items, Gemini `functionCall`
parts) and a later request carries their results. `ToolTraffic` reads each exchange as the
`tool.register`, `tool.call` and `tool.result` payloads the engine would have written, so the
assertions on tools read a program's session as they read the engine's.

A program resends the whole conversation with every request: a result is derived once, from the
first request that carries it. Gemini calls usually have no id: such a call is named
`<tool>-<n>` (the n-th id-less call of that tool in the session), and a result without an id
answers the oldest unanswered call of its tool. What is not recognised (another API or
endpoint, a malformed body, a refused request) yields no events, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Literal, NamedTuple

__all__ = ["ToolTraffic"]

Events = list[tuple[str, dict[str, Any]]]
_Api = Literal["anthropic", "chat", "responses", "gemini"]

_FAMILY: dict[_Api, str] = {
    "anthropic": "anthropic",
    "chat": "openai",
    "responses": "openai",
    "gemini": "gemini",
}
# What an `api` name says when the request has no path to tell.
_API_NAMES: dict[str, _Api] = {
    "anthropic.messages": "anthropic",
    "openai.chat": "chat",
    "openai.responses": "responses",
    "gemini.generate_content": "gemini",
}
UNKNOWN_TOOL = "unknown"
"""The tool of a result whose call was never seen."""


class _Call(NamedTuple):
    call_id: str | None
    """None: the model gave the call no id (Gemini), one is made up."""
    name: str
    args: Any


class _Result(NamedTuple):
    call_id: str | None
    """None: the result names no call (Gemini), it answers the oldest call of its tool."""
    name: str | None
    """The tool the result itself names (Gemini's do); else the call's name is used."""
    ok: bool
    value: Any
    """The result, or the error text when not ok."""
    identity: Hashable
    """What tells this result from the conversation's others, request after request."""


class ToolTraffic:
    """Tool calls and results read out of a program's model traffic, one exchange at a time."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        """Call id -> the tool it calls."""
        self._registered: set[str] = set()
        self._derived: set[tuple[Hashable, int]] = set()
        """The results derived so far: identity and its rank among equal ones in a request."""
        self._named: dict[str, int] = {}
        """Tool -> id-less calls of it named so far."""
        self._unanswered: dict[str, list[str]] = {}
        """Tool -> the ids of its calls no result has answered yet, oldest first."""

    def from_response(
        self, request: dict[str, Any], response: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        """The events a response implies: for each tool call the model asked for, a
        `tool.register` the first time that tool name is seen (payload: {"tool": name,
        "side_effects": True, "source": "program"}) and a `tool.call` ({"tool", "call_id",
        "args"})."""
        api = _api_of(request)
        if api is None or not isinstance(response, dict) or not _answered(response):
            return []
        sse = response.get("sse")
        if isinstance(sse, str):
            calls = _STREAM_CALLS[api](_sse_documents(sse))
        else:
            calls = _BODY_CALLS[api](response.get("body"))
        events: Events = []
        for call in calls:
            call_id = call.call_id if call.call_id is not None else self._new_id(call.name)
            self._names[call_id] = call.name
            self._unanswered.setdefault(call.name, []).append(call_id)
            if call.name not in self._registered:
                self._registered.add(call.name)
                register = {"tool": call.name, "side_effects": True, "source": "program"}
                events.append(("tool.register", register))
            events.append(("tool.call", {"tool": call.name, "call_id": call_id, "args": call.args}))
        return events

    def from_request(self, request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The `tool.result` events ({"tool", "call_id", "ok", "result" or "error"}) for tool
        results the request carries that no earlier request carried (a program resends the
        whole conversation each time: each result is derived once)."""
        api = _api_of(request)
        body = request.get("body") if isinstance(request, dict) else None
        if api is None or not isinstance(body, dict):
            return []
        # The calls the conversation holds name the tools of results whose response was not
        # read (a refused or cut one, or a session joined midway); a response's name wins.
        for call_id, name in _HISTORY_CALLS[api](body):
            self._names.setdefault(call_id, name)
        events: Events = []
        ranks: dict[Hashable, int] = {}
        for result in _RESULTS[api](body):
            # Equal results in one conversation (the same id twice, or two Gemini results
            # alike) are told apart by their rank among their equals.
            rank = ranks.get(result.identity, 0)
            ranks[result.identity] = rank + 1
            if (result.identity, rank) in self._derived:
                continue
            self._derived.add((result.identity, rank))
            tool, call_id = self._answer(result)
            payload: dict[str, Any] = {"tool": tool, "call_id": call_id, "ok": result.ok}
            payload["result" if result.ok else "error"] = result.value
            events.append(("tool.result", payload))
        return events

    def _new_id(self, name: str) -> str:
        count = self._named.get(name, 0) + 1
        self._named[name] = count
        return f"{name}-{count}"

    def _answer(self, result: _Result) -> tuple[str, str]:
        """The tool and the call id of a result, and its call marked answered."""
        if result.call_id is not None:
            tool = self._names.get(result.call_id) or result.name or UNKNOWN_TOOL
            waiting = self._unanswered.get(tool, [])
            if result.call_id in waiting:
                waiting.remove(result.call_id)
            return tool, result.call_id
        tool = result.name or UNKNOWN_TOOL
        waiting = self._unanswered.get(tool, [])
        # A result of a tool no call is waiting on answers no call: its id stays empty.
        return tool, waiting.pop(0) if waiting else ""


# ---- telling the APIs apart ---------------------------------------------------------------


def _api_of(request: Any) -> _Api | None:
    """The API of a request, by its path (the endpoint: no count_tokens or batches), checked
    against the provider its `api` names; "openai" alone covers both of OpenAI's APIs."""
    if not isinstance(request, dict):
        return None
    api = _str(request.get("api")) or ""
    path = (_str(request.get("path")) or "").rstrip("/")
    kind = _api_of_path(path) if path else _API_NAMES.get(api)
    if kind is None:
        return None
    family = api.partition(".")[0]
    if family in ("anthropic", "openai", "gemini") and family != _FAMILY[kind]:
        return None  # OpenAI's /threads/{id}/messages is no Anthropic endpoint
    return kind


def _api_of_path(path: str) -> _Api | None:
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    # .../models/{model}:generateContent (Gemini API and Vertex alike)
    method = path.rpartition("/")[2].partition(":")[2]
    if method in ("generateContent", "streamGenerateContent"):
        return "gemini"
    return None


def _answered(response: dict[str, Any]) -> bool:
    """Whether the model answered: not a refusal (status >= 400) nor a transport error."""
    status = response.get("status", 200)
    return (
        isinstance(status, int)
        and not isinstance(status, bool)
        and 0 < status < 400
        and not response.get("error")
    )


# ---- calls: Anthropic Messages ------------------------------------------------------------


def _anthropic_calls(body: Any) -> list[_Call]:
    calls = []
    for block in _dicts(_dict(body).get("content")):
        name = _str(block.get("name"))
        if block.get("type") == "tool_use" and name:
            calls.append(_Call(_id(block.get("id")), name, _args(block.get("input"))))
    return calls


def _anthropic_stream_calls(documents: list[Any]) -> list[_Call]:
    """`content_block_start` opens a tool_use block, its `input_json_delta` pieces are the
    arguments' JSON, parsed at `content_block_stop` (a block that never stops is left out)."""
    open_blocks: dict[int, tuple[_Call, list[str]]] = {}
    calls = []
    for doc in _dicts(documents):
        index = doc.get("index")
        if not isinstance(index, int):
            continue
        kind = doc.get("type")
        if kind == "content_block_start":
            block = _dict(doc.get("content_block"))
            name = _str(block.get("name"))
            if block.get("type") == "tool_use" and name:
                start = _Call(_id(block.get("id")), name, block.get("input"))
                open_blocks[index] = (start, [])
        elif kind == "content_block_delta" and index in open_blocks:
            delta = _dict(doc.get("delta"))
            piece = _str(delta.get("partial_json"))
            if delta.get("type") == "input_json_delta" and piece is not None:
                open_blocks[index][1].append(piece)
        elif kind == "content_block_stop" and index in open_blocks:
            start, pieces = open_blocks.pop(index)
            text = "".join(pieces)
            calls.append(start._replace(args=_args(text if text.strip() else start.args)))
    return calls


def _anthropic_results(body: dict[str, Any]) -> list[_Result]:
    results = []
    for message in _dicts(body.get("messages")):
        if message.get("role") != "user":
            continue
        for block in _dicts(message.get("content")):
            call_id = _id(block.get("tool_use_id"))
            if block.get("type") == "tool_result" and call_id is not None:
                ok = block.get("is_error") is not True
                text = _text(block.get("content"))
                results.append(_Result(call_id, None, ok, text, ("id", call_id)))
    return results


def _anthropic_history(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for message in _dicts(body.get("messages")):
        if message.get("role") == "assistant":
            for call in _anthropic_calls(message):
                if call.call_id:
                    yield call.call_id, call.name


# ---- calls: OpenAI Chat Completions -------------------------------------------------------


def _chat_calls(body: Any) -> list[_Call]:
    choices = _dicts(_dict(body).get("choices"))
    message = _dict(choices[0].get("message")) if choices else {}
    return _chat_message_calls(message)


def _chat_message_calls(message: dict[str, Any]) -> list[_Call]:
    calls = []
    for call in _dicts(message.get("tool_calls")):
        function = _dict(call.get("function"))
        name = _str(function.get("name"))
        if name:
            calls.append(_Call(_id(call.get("id")), name, _args(function.get("arguments"))))
    return calls


def _chat_stream_calls(documents: list[Any]) -> list[_Call]:
    """Deltas of the first choice's `tool_calls`, put together by their `index`: the id and
    the name come once, the arguments' JSON in pieces."""
    ids: dict[int, str] = {}
    names: dict[int, str] = {}
    pieces: dict[int, list[str]] = {}
    for doc in _dicts(documents):
        for choice in _dicts(doc.get("choices")):
            if choice.get("index", 0) != 0:
                continue
            deltas = _dicts(_dict(choice.get("delta")).get("tool_calls"))
            for position, delta in enumerate(deltas):
                index = delta.get("index")
                index = index if isinstance(index, int) else position
                function = _dict(delta.get("function"))
                if (call_id := _id(delta.get("id"))) is not None:
                    ids.setdefault(index, call_id)
                if name := _str(function.get("name")):
                    names.setdefault(index, name)
                piece = _str(function.get("arguments"))
                pieces.setdefault(index, []).extend([piece] if piece is not None else [])
    return [
        _Call(ids.get(index), name, _args("".join(pieces.get(index, []))))
        for index, name in sorted(names.items())
    ]


def _chat_results(body: dict[str, Any]) -> list[_Result]:
    results = []
    for message in _dicts(body.get("messages")):
        call_id = _id(message.get("tool_call_id"))
        if message.get("role") == "tool" and call_id is not None:
            text = _text(message.get("content"))
            results.append(_Result(call_id, None, True, text, ("id", call_id)))
    return results


def _chat_history(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for message in _dicts(body.get("messages")):
        if message.get("role") == "assistant":
            for call in _chat_message_calls(message):
                if call.call_id:
                    yield call.call_id, call.name


# ---- calls: OpenAI Responses --------------------------------------------------------------


def _function_call(item: dict[str, Any]) -> _Call | None:
    name = _str(item.get("name"))
    if item.get("type") != "function_call" or not name:
        return None
    call_id = _id(item.get("call_id")) or _id(item.get("id"))
    return _Call(call_id, name, _args(item.get("arguments")))


def _responses_calls(body: Any) -> list[_Call]:
    calls = [_function_call(item) for item in _dicts(_dict(body).get("output"))]
    return [call for call in calls if call is not None]


def _responses_stream_calls(documents: list[Any]) -> list[_Call]:
    """Each `response.output_item.done` function_call item, then those of the final
    `response.completed` output no such event carried."""
    items = []
    for doc in _dicts(documents):
        if doc.get("type") == "response.output_item.done":
            items.append(_dict(doc.get("item")))
        elif doc.get("type") == "response.completed":
            items += _dicts(_dict(doc.get("response")).get("output"))
    calls: dict[Hashable, _Call] = {}
    for position, item in enumerate(items):
        call = _function_call(item)
        if call is not None:
            calls.setdefault(call.call_id or position, call)
    return list(calls.values())


def _responses_results(body: dict[str, Any]) -> list[_Result]:
    results = []
    for item in _dicts(body.get("input")):
        call_id = _id(item.get("call_id"))
        if item.get("type") == "function_call_output" and call_id is not None:
            text = _text(item.get("output"))
            results.append(_Result(call_id, None, True, text, ("id", call_id)))
    return results


def _responses_history(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for item in _dicts(body.get("input")):
        call = _function_call(item)
        if call is not None and call.call_id:
            yield call.call_id, call.name


# ---- calls: Gemini generateContent --------------------------------------------------------


def _gemini_part(part: dict[str, Any], camel: str, snake: str) -> dict[str, Any]:
    # The API speaks camelCase; a hand-written client may send snake_case, which it accepts.
    return _dict(part.get(camel, part.get(snake)))


def _gemini_content_calls(content: dict[str, Any]) -> list[_Call]:
    calls = []
    for part in _dicts(content.get("parts")):
        call = _gemini_part(part, "functionCall", "function_call")
        name = _str(call.get("name"))
        if name:
            calls.append(_Call(_id(call.get("id")), name, _args(call.get("args"))))
    return calls


def _gemini_calls(body: Any) -> list[_Call]:
    # streamGenerateContent without `alt=sse` answers a JSON array of the chunks
    return _gemini_stream_calls(body if isinstance(body, list) else [body])


def _gemini_stream_calls(documents: list[Any]) -> list[_Call]:
    """The function calls of each chunk's first candidate (Gemini never splits a call)."""
    calls = []
    for doc in _dicts(documents):
        candidates = _dicts(doc.get("candidates"))
        if candidates:
            calls += _gemini_content_calls(_dict(candidates[0].get("content")))
    return calls


def _gemini_results(body: dict[str, Any]) -> list[_Result]:
    results = []
    for content in _dicts(body.get("contents")):
        for part in _dicts(content.get("parts")):
            answer = _gemini_part(part, "functionResponse", "function_response")
            name = _str(answer.get("name"))
            if not name:
                continue
            call_id = _id(answer.get("id"))
            response = answer.get("response")
            identity = ("id", call_id) if call_id else ("gemini", name, _dumps(response))
            # Gemini's convention: an "error" key (and no "output") reports a failure.
            if isinstance(response, dict) and "error" in response and "output" not in response:
                error = response["error"]
                value = error if isinstance(error, str) else _dumps(error)
                results.append(_Result(call_id, name, False, value, identity))
            else:
                results.append(_Result(call_id, name, True, response, identity))
    return results


def _gemini_history(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for content in _dicts(body.get("contents")):
        if content.get("role") == "model":
            for call in _gemini_content_calls(content):
                if call.call_id:
                    yield call.call_id, call.name


_BODY_CALLS: dict[_Api, Callable[[Any], list[_Call]]] = {
    "anthropic": _anthropic_calls,
    "chat": _chat_calls,
    "responses": _responses_calls,
    "gemini": _gemini_calls,
}
_STREAM_CALLS: dict[_Api, Callable[[list[Any]], list[_Call]]] = {
    "anthropic": _anthropic_stream_calls,
    "chat": _chat_stream_calls,
    "responses": _responses_stream_calls,
    "gemini": _gemini_stream_calls,
}
_RESULTS: dict[_Api, Callable[[dict[str, Any]], list[_Result]]] = {
    "anthropic": _anthropic_results,
    "chat": _chat_results,
    "responses": _responses_results,
    "gemini": _gemini_results,
}
_HISTORY_CALLS: dict[_Api, Callable[[dict[str, Any]], Iterator[tuple[str, str]]]] = {
    "anthropic": _anthropic_history,
    "chat": _chat_history,
    "responses": _responses_history,
    "gemini": _gemini_history,
}


# ---- reading untrusted JSON ---------------------------------------------------------------


class _Invalid:
    """What `_loads` returns for text that is not JSON."""


_INVALID = _Invalid()


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _INVALID


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (ValueError, TypeError, RecursionError):
        return repr(type(value))


def _sse_documents(sse: str) -> list[Any]:
    """The JSON data of each server-sent event (the `[DONE]` sentinel and anything else that
    is not JSON is skipped); an event's data lines are joined as the SSE format says."""
    documents = []
    data: list[str] = []
    for line in [*sse.splitlines(), ""]:
        if not line:
            if data:
                document = _loads("\n".join(data))
                if document is not _INVALID:
                    documents.append(document)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return documents


def _args(value: Any) -> Any:
    """Call arguments: a JSON string parsed (kept raw when it is not JSON), none as {}."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        parsed = _loads(value)
        return value if parsed is _INVALID else parsed
    return value


def _text(content: Any) -> str:
    """A result's content as text: a string as it is, the texts of a list of blocks or parts
    joined by newlines (JSON text is not parsed)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        texts = [t for block in _dicts(content) if (t := _str(block.get("text"))) is not None]
        return "\n".join(texts)
    return _dumps(content)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _id(value: Any) -> str | None:
    """A call id: a string, not empty."""
    return value if isinstance(value, str) and value else None
