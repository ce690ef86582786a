"""The Starlette app behind `fakes.llm.LLMFake`: routing, key checks, faults, recording."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from . import _llm_wire as wire
from .llm import RecordedLLMRequest, ScriptedResponse

if TYPE_CHECKING:
    from .llm import Fault, LLMFake

_ID_PREFIX = {
    "anthropic": "msg_fake_",
    "openai_chat": "chatcmpl-fake-",
    "openai_responses": "resp_fake_",
    "gemini": "gemini-fake-",
}
# Gemini's function calls carry no id unless the script gives one.
_CALL_PREFIX = {
    "anthropic": "toolu_fake_",
    "openai_chat": "call_fake_",
    "openai_responses": "call_fake_",
}
_SSE_HEADERS = {"cache-control": "no-cache"}


class DeliberateDisconnect(Exception):
    """Raised inside a response to drop the connection mid-body (a `malformed_stream` fault)."""


class _QuietDeliberateDisconnects(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" record for a deliberate cut only."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DeliberateDisconnect)


def _install_log_filter() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDeliberateDisconnects) for f in logger.filters):
        logger.addFilter(_QuietDeliberateDisconnects())


def build_app(fake: LLMFake) -> ASGIApp:
    _install_log_filter()

    async def endpoint(request: Request) -> Response:
        return await _handle(fake, request)

    routes = [
        Route(path, endpoint, methods=["POST"]) for path in (*wire.API_PATHS, *wire.GEMINI_PATHS)
    ]
    return _counting_in_flight(fake, Starlette(routes=routes))


def _counting_in_flight(fake: LLMFake, app: ASGIApp) -> ASGIApp:
    """Counts the requests being answered at once (until the last byte of a stream is sent)."""

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        # One event loop serves the fake: these updates never interleave.
        fake.in_flight += 1
        fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            await app(scope, receive, send)
        finally:
            fake.in_flight -= 1

    return counted


def _api_and_params(request: Request) -> tuple[Any, dict[str, str]]:
    if "model" not in request.path_params:
        return wire.API_PATHS[request.url.path], {}
    method = request.url.path.rpartition(":")[2]
    return "gemini", {"model": request.path_params["model"], "method": method}


async def _handle(fake: LLMFake, request: Request) -> Response:
    api, path_params = _api_and_params(request)
    body = await _json_object(request)
    if body is None:
        return _error(api, 400, "fakes.llm: the request body is not a JSON object")
    headers = redact_headers(request.headers)
    if not _key_ok(fake, api, request):
        _record(fake, api, request, headers, body, "rejected", "error")
        return _error(api, 401, "fakes.llm: invalid API key")
    view = wire.read_request(api, body, path_params)
    choice = fake._choose(view)
    # Recorded before answering, so a test sees requests whose client gave up waiting.
    _record(fake, api, request, headers, body, choice.answered_by, _outcome(choice.response))
    if choice.response is None:
        return _error(api, 400, _unscripted_message(fake, view))
    return await _answer(fake, api, view, choice.response, body, request)


async def _answer(
    fake: LLMFake,
    api: Any,
    view: wire.RequestView,
    response: ScriptedResponse,
    body: dict[str, Any],
    request: Request,
) -> Response:
    if response.delay_s and not await stall(request, response.delay_s):
        return Response(status_code=499)  # the client hung up; nobody reads this
    if response.fault is not None:
        return await _fault(api, view, response.fault, request)
    done = _completion(fake, api, view, response, body)
    if view.stream:
        return _sse(wire.render_sse(api, done, include_usage=view.include_usage))
    return JSONResponse(wire.render_json(api, done), headers=_request_id(done.response_id))


async def _json_object(request: Request) -> dict[str, Any] | None:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _key_ok(fake: LLMFake, api: str, request: Request) -> bool:
    if fake.api_key is None:
        return True
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    if api == "gemini":
        # Gemini's key travels in a header; the REST API also takes it as `?key=`.
        return fake.api_key in (
            request.headers.get("x-goog-api-key"),
            request.query_params.get("key"),
        )
    sent = request.headers.get("x-api-key") if api == "anthropic" else None
    return fake.api_key in (sent, bearer)


def _record(
    fake: LLMFake,
    api: Any,
    request: Request,
    headers: dict[str, str],
    body: dict[str, Any],
    answered_by: str,
    outcome: str,
) -> None:
    entry = RecordedLLMRequest(
        index=len(fake.requests),
        api=api,
        path=request.url.path,
        headers=headers,
        body=body,
        answered_by=answered_by,
        outcome=outcome,
    )
    fake.requests.append(entry)


def _outcome(response: ScriptedResponse | None) -> str:
    if response is None:
        return "error"
    if response.fault is not None:
        return response.fault.kind
    return "tool_calls" if response.tool_calls else "text"


def _unscripted_message(fake: LLMFake, view: wire.RequestView) -> str:
    used = len(fake.script.responses)
    return (
        f"fakes.llm: no rule matched request #{len(fake.requests) - 1} and all {used} scripted "
        f"responses are used up (model {view.model!r}, last user message {view.last_user[:80]!r}); "
        "add a rule or a response to the scenario's LLM script"
    )


def _completion(
    fake: LLMFake, api: Any, view: wire.RequestView, response: ScriptedResponse, body: Any
) -> wire.Completion:
    n = fake._next_id()
    calls = tuple(
        wire.CompletedCall(id=c.id or _call_id(api, n, i), name=c.name, args=dict(c.args))
        for i, c in enumerate(response.tool_calls)
    )
    usage = response.usage
    return wire.Completion(
        response_id=f"{_ID_PREFIX[api]}{n:04d}",
        model=view.model or "fake-model",
        text=response.text,
        calls=calls,
        input_tokens=usage.input_tokens if usage else estimate_tokens(body),
        output_tokens=usage.output_tokens if usage else _answer_tokens(response),
        cache_read_tokens=usage.cache_read if usage else 0,
        cache_write_tokens=usage.cache_write_tokens if usage else 0,
        stop_reason=response.stop_reason,
    )


def _call_id(api: str, n: int, i: int) -> str:
    return f"{_CALL_PREFIX[api]}{n:04d}_{i}" if api in _CALL_PREFIX else ""


def _answer_tokens(response: ScriptedResponse) -> int:
    calls = [[c.name, c.args] for c in response.tool_calls]
    return estimate_tokens((response.text or "") + (json.dumps(calls) if calls else ""))


def _request_id(response_id: str) -> dict[str, str]:
    # Both SDKs surface these as `_request_id` / `request_id` on results and errors.
    return {"request-id": f"req_{response_id}", "x-request-id": f"req_{response_id}"}


def _error(
    api: Any, status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = wire.error_body(api, status, message)
    return JSONResponse(body, status_code=status, headers=headers)


_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie"})


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: ("<redacted>" if k.lower() in _SECRET_HEADERS else v) for k, v in headers.items()}


def estimate_tokens(data: Any) -> int:
    """A rough, deterministic token count (4 characters a token) for unscripted usage."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return max(1, len(text) // 4)


async def stall(request: Any, seconds: float) -> bool:
    """Waits up to `seconds`; returns False as soon as the client has hung up."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        if await request.is_disconnected():
            return False
        await asyncio.sleep(min(0.02, max(0.0, deadline - loop.time())))
    return True


# ---- faults --------------------------------------------------------------------------


def _fault_status(kind: str, api: str) -> int:
    if kind == "overloaded":
        # Anthropic's own 529 (the SDK's OverloadedError); OpenAI and Gemini answer 503.
        return 529 if api == "anthropic" else 503
    return {"rate_limit": 429, "server_error": 500, "unavailable": 503}[kind]


_DEFAULT_MESSAGES = {
    429: "Rate limit exceeded (fakes.llm)",
    500: "Internal server error (fakes.llm)",
    503: "The server is overloaded, please try again later (fakes.llm)",
    504: "The request timed out (fakes.llm)",
    529: "Overloaded (fakes.llm)",
}


async def _fault(api: Any, view: wire.RequestView, fault: Fault, request: Request) -> Response:
    if fault.kind == "timeout":
        if not await stall(request, fault.sleep_s):
            return Response(status_code=499)
        return _error(api, 504, fault.message or _DEFAULT_MESSAGES[504])
    if fault.kind == "malformed_stream":
        return _malformed(api, view, fault)
    status = _fault_status(fault.kind, api)
    return _error(api, status, fault.message or _DEFAULT_MESSAGES[status], _retry_headers(fault))


def _retry_headers(fault: Fault) -> dict[str, str] | None:
    if fault.retry_after_s is None:
        return None
    # `retry-after` is whole seconds by the standard; the SDKs read `retry-after-ms` first.
    return {
        "retry-after": str(math.ceil(fault.retry_after_s)),
        "retry-after-ms": str(round(fault.retry_after_s * 1000)),
    }


def _malformed(api: Any, view: wire.RequestView, fault: Fault) -> Response:
    model = view.model or "fake-model"
    done = wire.Completion(response_id="malformed", model=model, text="Hello there, world")
    if not view.stream:
        good = json.dumps(wire.render_json(api, done)).encode()
        if fault.mode == "invalid_json":
            return Response(good[: len(good) // 2], media_type="application/json")
        return _CutBody(good[: len(good) // 2], total=len(good))
    events = wire.render_sse(api, done, include_usage=view.include_usage)
    at = _first_content_delta(api, events)
    head, target = events[:at], events[at]
    if fault.mode == "invalid_json":
        return _sse([*head, _invalid_json_event(target)])
    return _sse([*head, target[: len(target) // 2]], cut=True)


def _first_content_delta(api: str, events: list[bytes]) -> int:
    """Where to break the stream: the first event that carries generated text.

    Breaking an event the SDK skips (an Anthropic `ping`) would go unnoticed.
    """
    if api == "openai_chat":
        return 1  # the first chunk after the role-only opening chunk
    if api == "gemini":
        return 0  # every Gemini chunk carries content
    marker = {
        "anthropic": b"event: content_block_delta",
        "openai_responses": b"event: response.output_text.delta",
    }[api]
    return next(i for i, event in enumerate(events) if event.startswith(marker))


def _invalid_json_event(event: bytes) -> bytes:
    """The event with its data line truncated mid-JSON but still framed as an SSE event."""
    lines = event.decode().rstrip("\n").split("\n")
    data = lines[-1]
    lines[-1] = data[: max(len("data: ") + 2, len(data) // 2)]
    return ("\n".join(lines) + "\n\n").encode()


def _sse(events: list[bytes], *, cut: bool = False) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for event in events:
            yield event
        if cut:
            raise DeliberateDisconnect("malformed_stream fault: connection dropped mid-event")

    return StreamingResponse(body(), media_type="text/event-stream", headers=_SSE_HEADERS)


class _CutBody(Response):
    """Announces `total` bytes, sends `partial`, then drops the connection."""

    def __init__(self, partial: bytes, *, total: int) -> None:
        super().__init__(status_code=200, media_type="application/json")
        self._partial = partial
        self.headers["content-length"] = str(total)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self._partial, "more_body": True})
        raise DeliberateDisconnect("malformed_stream fault: connection dropped mid-body")
