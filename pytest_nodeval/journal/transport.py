"""httpx2 transports that journal (record, live) or serve (replay) an SDK's HTTP traffic.

The anthropic, openai, google-genai and mcp SDKs speak httpx2; these transports are handed
to them through `http_client=httpx2.Client(transport=...)` (google-genai: `http_options`'
`httpx_client` and `httpx_async_client`), or put under a client nodeval did not build by
agent/intercept.py, which routes its requests here. Both write the
observed `llm.request` / `llm.response` events, so a replayed session's journal looks
like the recorded one.
"""

from __future__ import annotations

import contextvars
import functools
import json
import ssl
import time
from typing import Any

import httpx2

from .events import PayloadText, RecordedPayload
from .ondisk import GoldenChanged
from .replay import RecordedExchange, ReplayStash
from .writer import JournalWriter

ROUTED: contextvars.ContextVar[bool] = contextvars.ContextVar("nodeval_routed", default=False)
"""True while a request is inside a journal transport (or was let through by agent/intercept.py's
router): httpx2's default transports below it send as usual, and its host lookup is no escape."""

RETRIES_EXTENSION = "nodeval_retries"
"""Set by the retrying transport under the recorder: the failed tries before this exchange."""
# Response headers worth keeping: what the SDKs read (retry policy, request ids, type).
KEPT_HEADERS = (
    "content-type",
    "request-id",
    "x-request-id",
    "retry-after",
    "retry-after-ms",
    "x-should-retry",
)


def request_payload(
    request: httpx2.Request, provider: str, api: str, body: bytes
) -> dict[str, Any]:
    # The path only: a query string may hold a credential (Gemini's `?key=`).
    parsed = _parse_json(body)
    path = request.url.path
    return {
        "provider": provider,
        "api": api,
        "method": request.method,
        "path": path,
        # Gemini says "stream" in the path (`:streamGenerateContent`), the others in the body.
        "stream": bool(isinstance(parsed, dict) and parsed.get("stream"))
        or path.endswith(":streamGenerateContent"),
        "body": parsed,
    }


def response_payload(
    provider: str, response: httpx2.Response, latency_ms: float, requested_model: str | None = None
) -> dict[str, Any]:
    """The final exchange of a request; `retries` counts the tries that failed before it
    (see agent/retries.py), and its presence marks the exchange as final for replay."""
    headers = {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers}
    is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
    sse = response.content.decode("utf-8", "replace") if is_sse else None
    body = None if is_sse else _parse_json(response.content)
    return {
        "provider": provider,
        "status": response.status_code,
        "headers": headers,
        "body": body,
        "sse": sse,
        "usage": extract_usage(body, sse),
        "model": extract_model(body, sse) or requested_model,
        "latency_ms": round(latency_ms, 3),
        "retries": int(response.extensions.get(RETRIES_EXTENSION, 0)),
    }


def scan_text(raw: bytes, *strings: str) -> str | None:
    """What the journal's secret scan may read instead of serialising a payload parsed from
    `raw` (JournalWriter.emit's `text`): the bytes as they came, beside the payload's other
    `strings`. Only when every string of the JSON shows in them verbatim: an escape (a
    backslash) could split a secret, a NUL means a UTF-16 or UTF-32 body; then None, and the
    writer serialises the payload. Most bodies qualify, which spares a dump of each."""
    if b"\\" in raw or b"\0" in raw:
        return None
    try:
        return "\n".join((*strings, raw.decode("utf-8")))
    except UnicodeDecodeError:
        return None


def requested_model(payload: dict[str, Any]) -> str | None:
    body = payload.get("body")
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


def error_payload(provider: str, exc: Exception, latency_ms: float) -> dict[str, Any]:
    return {
        "provider": provider,
        "status": 0,
        "error": f"{type(exc).__name__}: {exc}",
        "latency_ms": round(latency_ms, 3),
        "retries": int(getattr(exc, RETRIES_EXTENSION, 0)),
    }


def extract_usage(body: Any, sse: str | None) -> dict[str, int] | None:
    """Token usage from a Messages / Chat Completions / Responses / Gemini body or event stream.

    `input_tokens` counts every prompt token: Anthropic reports cache reads and writes
    apart from its `input_tokens`, so they are added; OpenAI's prompt tokens include the
    cached ones (`*_tokens_details.cached_tokens`), and Gemini's its `cachedContentTokenCount`:
    both are also counted as cache reads.
    """
    documents = [body] if sse is None else list(_sse_documents(sse))
    found = False
    usage = dict.fromkeys(USAGE_KEYS, 0)
    for doc in documents:
        for candidate in _usage_dicts(doc):
            found = True
            # Streams report usage piecewise and cumulatively: the largest value is the total.
            for key, value in candidate.items():
                usage[key] = max(usage[key], value)
    return usage if found else None


USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _usage_of(candidate: dict[str, Any]) -> dict[str, int]:
    """Anthropic's or OpenAI's `usage` object, as the journal counts it."""
    cache_read = _int(candidate, "cache_read_input_tokens")
    cache_write = _int(candidate, "cache_creation_input_tokens")
    details = candidate.get("prompt_tokens_details") or candidate.get("input_tokens_details")
    if isinstance(details, dict):  # OpenAI: cached tokens are part of the prompt tokens
        cache_read = max(cache_read, _int(details, "cached_tokens"))
        uncounted = 0
    else:  # Anthropic: input_tokens leaves out what was read from or written to the cache
        uncounted = cache_read + cache_write
    return {
        "input_tokens": _int(candidate, "input_tokens", "prompt_tokens") + uncounted,
        "output_tokens": _int(candidate, "output_tokens", "completion_tokens"),
        "cache_read_tokens": cache_read,
        "cache_write_tokens": cache_write,
    }


def extract_model(body: Any, sse: str | None) -> str | None:
    """The model a response names (a stream names it in its first events)."""
    documents = [body] if sse is None else list(_sse_documents(sse))
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        for holder in (doc, doc.get("message"), doc.get("response")):
            if not isinstance(holder, dict):
                continue
            # Gemini names it modelVersion
            model = holder.get("model") or holder.get("modelVersion")
            if isinstance(model, str) and model:
                return model
    return None


def _usage_dicts(doc: Any) -> list[dict[str, int]]:
    """Every usage a document carries, each as the journal counts it (USAGE_KEYS)."""
    if not isinstance(doc, dict):
        return []
    if isinstance(doc.get("usageMetadata"), dict):
        return [_gemini_usage(doc["usageMetadata"])]
    holders = [doc, doc.get("message"), doc.get("response")]
    return [
        _usage_of(h["usage"])
        for h in holders
        if isinstance(h, dict) and isinstance(h.get("usage"), dict)
    ]


def _gemini_usage(metadata: dict[str, Any]) -> dict[str, int]:
    # Thinking is billed as output but counted apart from the answer's tokens; the cached
    # part of the prompt is in promptTokenCount already.
    return {
        "input_tokens": _int(metadata, "promptTokenCount"),
        "output_tokens": _int(metadata, "candidatesTokenCount")
        + _int(metadata, "thoughtsTokenCount"),
        "cache_read_tokens": _int(metadata, "cachedContentTokenCount"),
        "cache_write_tokens": 0,
    }


def _int(usage: dict[str, Any], *keys: str) -> int:
    for key in keys:
        if isinstance(usage.get(key), int):
            return int(usage[key])
    return 0


def _sse_documents(sse: str) -> Any:
    for line in sse.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                parsed = _parse_json(data.encode())
                if parsed is not None:
                    yield parsed


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _rebuilt(response: httpx2.Response, request: httpx2.Request) -> httpx2.Response:
    # The body was read (and decoded) to journal it; hand the SDK the same bytes again.
    headers = [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx2.Response(
        response.status_code,
        headers=headers,
        content=response.content,
        request=request,
        extensions={"http_version": b"HTTP/1.1"},
    )


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every transport of the process that talks to a provider
    (the recording ones here, the retrying ones in agent/retries.py).

    Building one loads the CA bundle, ~70 ms of CPU that each live attempt would pay again,
    holding the GIL, so attempts running in parallel (--nodeval-concurrency) would queue on it.
    A context is safe to share between threads and event loops.
    """
    return httpx2.create_ssl_context()


class RecordingTransport(httpx2.BaseTransport):
    """Forwards to a real transport and journals each exchange (the whole SSE stream too)."""

    def __init__(
        self,
        journal: JournalWriter,
        provider: str,
        api: str,
        inner: httpx2.BaseTransport | None = None,
    ) -> None:
        self._journal, self._provider, self._api = journal, provider, api
        self._inner = inner or httpx2.HTTPTransport(verify=shared_tls_context())

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response, _ = self.exchange(request)
        return _rebuilt(response, request)

    def exchange(
        self, request: httpx2.Request, payload: dict[str, Any] | None = None
    ) -> tuple[httpx2.Response, dict[str, Any]]:
        """handle_request's journaled exchange, for a caller that reads the answer itself
        (agent/proxy.py): the response read whole, not rebuilt for an SDK to read again, and
        its `llm.response` payload, which the journal owns (read it, never change it).

        `payload`: the request's `llm.request` payload (request_payload), when the caller has
        built it to read first; the journal owns it then, so the body is parsed once."""
        body = request.read()
        if payload is None:
            payload = request_payload(request, self._provider, self._api, body)
        asked = _journal_request(self._journal, payload, request, body)
        start = time.perf_counter()
        token = ROUTED.set(True)
        try:
            response = self._inner.handle_request(request)
            response.read()
        except httpx2.TransportError as exc:
            self._journal.emit("llm.response", error_payload(self._provider, exc, _ms(start)))
            raise
        finally:
            ROUTED.reset(token)
        return response, _journal_response(self._journal, self._provider, response, start, asked)

    def close(self) -> None:
        self._inner.close()


class AsyncRecordingTransport(httpx2.AsyncBaseTransport):
    def __init__(
        self,
        journal: JournalWriter,
        provider: str,
        api: str,
        inner: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._journal, self._provider, self._api = journal, provider, api
        self._inner = inner or httpx2.AsyncHTTPTransport(verify=shared_tls_context())

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        payload = request_payload(request, self._provider, self._api, body)
        asked = _journal_request(self._journal, payload, request, body)
        start = time.perf_counter()
        token = ROUTED.set(True)
        try:
            response = await self._inner.handle_async_request(request)
            await response.aread()
        except httpx2.TransportError as exc:
            self._journal.emit("llm.response", error_payload(self._provider, exc, _ms(start)))
            raise
        finally:
            ROUTED.reset(token)
        _journal_response(self._journal, self._provider, response, start, asked)
        return _rebuilt(response, request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _journal_request(
    journal: JournalWriter, payload: dict[str, Any], request: httpx2.Request, body: bytes
) -> str | None:
    """Journal an `llm.request` (the journal owns the payload then); the model it names."""
    asked = requested_model(payload)  # read before the journal owns the payload
    journal.emit("llm.request", payload, owned=True, text=scan_text(body, request.url.path))
    return asked


def _journal_response(
    journal: JournalWriter,
    provider: str,
    response: httpx2.Response,
    start: float,
    asked: str | None,
) -> dict[str, Any]:
    """Journal the `llm.response` of a response read whole; its payload, which the journal
    owns (built afresh here, so it is not copied)."""
    payload = response_payload(provider, response, _ms(start), asked)
    model = payload["model"] if isinstance(payload["model"], str) else ""
    text = scan_text(response.content, provider, model, *payload["headers"].values())
    journal.emit("llm.response", payload, owned=True, text=text)
    return payload


class ReplayTransport(httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    """Serves recorded responses in order; never touches the network.

    A request that differs from the recording stops the replay (see replay.ReplayStopped).
    """

    def __init__(self, journal: JournalWriter, stash: ReplayStash, provider: str, api: str) -> None:
        self._journal, self._stash, self._provider, self._api = journal, stash, provider, api
        self._gave_up: tuple[str, bytes, dict[str, Any]] | None = None
        """A request whose recorded final exchange is a refusal or a transport error: the SDK's
        own retries of it (which the recording never saw: nodeval had retried below) get the
        same answer, and the journal is not read further for them."""

    def bind(self, journal: JournalWriter, stash: ReplayStash) -> None:
        """Serve another attempt (an SDK client kept for the next attempt of its case)."""
        self._journal, self._stash, self._gave_up = journal, stash, None

    def unbind(self) -> None:
        """Let go of the attempt's journal and stash (and with them its golden journal) while
        the transport waits for the next attempt; until then it serves nothing."""
        self._journal = self._stash = None  # type: ignore[assignment]
        self._gave_up = None

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self._serve(request, request.read())

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return self._serve(request, await request.aread())

    def _serve(self, request: httpx2.Request, body: bytes) -> httpx2.Response:
        try:
            return self._served(request, body)
        except GoldenChanged as exc:  # a golden line is read here too: the answer's text
            self._stash.golden_changed(exc)

    def _served(self, request: httpx2.Request, body: bytes) -> httpx2.Response:
        if self._gave_up is not None and self._gave_up[:2] == (request.url.path, body):
            return _answer(self._gave_up[2], request)
        self._gave_up = None
        path = request.url.path
        # Most replayed requests are byte for byte the recorded ones: nothing to parse then,
        # and a plain answer is handed back as the golden journal's text of its body.
        served = self._stash.serve_exact(
            self._journal, self._provider, self._api, request.method, path, body
        )
        if served is not None:
            prepared = _prepared_response(served[0].payload, served[1], request, served[2])
            if prepared is not None:
                return prepared
            recorded = served[0].payload_dict()
        else:
            payload = request_payload(request, self._provider, self._api, body)
            # Freshly parsed (owned: the stash only reads it); a scan reads the body as sent.
            recorded = self._stash.serve_llm(
                self._journal,
                self._provider,
                payload,
                owned=True,
                text=f"{path}\n{body.decode('utf-8', 'replace')}",
            )
        final_failure = recorded.get("error") or recorded.get("status", 200) >= 400
        if final_failure and recorded.get("retries") is not None:
            self._gave_up = (request.url.path, body, recorded)
        return _answer(recorded, request)


class HandoverTransport(httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    """--nodeval-from-turn: the replay transport while its prefix stash serves the turns
    before N, then the live one (recording, over the network or to the local fake)."""

    def __init__(self, replay: ReplayTransport, live: Any, stash: ReplayStash) -> None:
        self._replay, self._live, self._stash = replay, live, stash

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._stash.serving:
            return self._replay.handle_request(request)
        response: httpx2.Response = self._live.handle_request(request)
        return response

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._stash.serving:
            return await self._replay.handle_async_request(request)
        response: httpx2.Response = await self._live.handle_async_request(request)
        return response

    def close(self) -> None:
        self._live.close()

    async def aclose(self) -> None:
        await self._live.aclose()


def _answer(recorded: dict[str, Any], request: httpx2.Request) -> httpx2.Response:
    if recorded.get("error"):
        raise _transport_error(recorded["error"], request)
    return replayed_response(recorded, request)


def _prepared_response(
    payload: Any,
    raw: PayloadText,
    request: httpx2.Request,
    exchange: RecordedExchange | None = None,
) -> httpx2.Response | None:
    """A recorded success answered as the golden journal's text of its body, which the SDK
    parses to what `replayed_response` would send it: the payload is not parsed into a dict
    and its body serialised again. None for anything else (a failure, a stream, a string
    body, a payload whose text is unknown or not laid out as the writer writes it).

    `exchange`: the stash's recorded exchange `raw` is the response text of, which keeps
    where the body was found for the next replay of the same journal."""
    if not raw or payload.status >= 400 or payload.error is not None:
        return None
    headers = payload.headers
    if "body" in headers:  # then `,"body":` could be a header's key, not the payload's
        return None
    span = exchange.body_span if exchange is not None else None
    if span is None:
        span = _body_span(raw, payload)
        if span is None:
            return None
        if exchange is not None:
            exchange.body_span = span
    content = bytes(raw[span[0] : span[1]])
    answered = exchange.answer_headers if exchange is not None else None
    if answered is None:
        answered = dict(headers)
        answered.setdefault("content-type", "application/json")
        if exchange is not None:  # httpx2 copies them: one dict serves every replay
            exchange.answer_headers = answered
    return httpx2.Response(payload.status, headers=answered, content=content, request=request)


_BODY_KEY = b',"body":'
_NO_SSE = b',"sse":null,'


def _body_span(raw: PayloadText, payload: Any) -> tuple[int, int] | None:
    """Where the JSON text of an llm.response payload's body is in the payload's text.

    The writer puts `provider`, `status` and `headers` (string keys and values: no `,"body":`
    once no header is called that) before `body`, and `sse` after it. The last `,"sse":null,`
    is the payload's own key when what follows it parses as an object of its own: one nested
    deeper would leave a closing brace over."""
    # A lazy payload searches its golden line, without a copy (bytes of bytes is no copy).
    text = payload if isinstance(payload, RecordedPayload) else bytes(raw)
    start, end = text.find(_BODY_KEY), text.rfind(_NO_SSE)
    if start == -1 or end <= start:
        return None
    try:
        tail = json.loads(b"{" + bytes(raw[end + 1 :]))
    except ValueError:
        return None
    start += len(_BODY_KEY)
    # A string body is sent as its text, not as JSON (replayed_response).
    string = bytes(raw[start : start + 1]) == b'"'
    return (start, end) if isinstance(tail, dict) and not string else None


def replayed_response(recorded: dict[str, Any], request: httpx2.Request) -> httpx2.Response:
    headers = dict(recorded.get("headers") or {})
    if recorded.get("status", 200) >= 400:
        # The SDK retries as it did when recording; the recorded wait is not worth repeating.
        headers.pop("retry-after", None)
        headers["retry-after-ms"] = "1"
        if recorded.get("retries") is not None:
            # Recorded as the final exchange, after nodeval's own retries: the SDK retried
            # nothing then, so it must not now (journals from before recorded every try).
            headers["x-should-retry"] = "false"
    if recorded.get("sse") is not None:
        content = recorded["sse"].encode()
        headers.setdefault("content-type", "text/event-stream")
    else:
        body = recorded.get("body")
        content = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
        headers.setdefault("content-type", "application/json")
    return httpx2.Response(
        recorded.get("status", 200), headers=headers, content=content, request=request
    )


def _transport_error(error: str, request: httpx2.Request) -> httpx2.TransportError:
    name, _, message = error.partition(": ")
    cls = getattr(httpx2, name, None)
    if not (isinstance(cls, type) and issubclass(cls, httpx2.TransportError)):
        cls = httpx2.ConnectError
    return cls(message or error, request=request)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000
