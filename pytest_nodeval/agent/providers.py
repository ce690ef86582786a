"""LLM providers of the reference engine and the fallback chain over them.

The engine speaks one neutral message format; each provider translates it to its API.
`mock` is scripted and keyless; `anthropic`, `openai` and `gemini` go through the official SDKs,
whose HTTP traffic passes through a journaling or replaying httpx2 transport (see
`journal/transport.py`), so recording and replay never depend on which provider is used.

Neutral messages:
  {"role": "user", "text": str}
  {"role": "assistant", "text": str, "tool_calls": [{"id", "name", "args"}]}
  {"role": "tool", "call_id": str, "name": str, "content": str, "is_error": bool}
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import ProviderError
from ..journal.events import EngineInfo, JournalHeader, new_session_id, now_iso
from ..journal.replay import ReplayStash
from ..journal.writer import JournalWriter
from ..provider_keys import real_key
from .config import MockStep, ProviderSpec


@dataclass(frozen=True, slots=True)
class ToolDef:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    system: str
    messages: list[dict[str, Any]]
    tools: tuple[ToolDef, ...]
    timeout_s: float
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class ModelReply:
    text: str
    tool_calls: tuple[ToolCallRequest, ...] = ()
    stop_reason: str = "end_turn"
    input_tokens: int = 0
    output_tokens: int = 0


class Provider(Protocol):
    key: str
    errors: tuple[type[BaseException], ...]
    """Exceptions that mean "this provider failed" (and the next in the chain may try)."""

    def complete(self, request: ModelRequest) -> ModelReply: ...

    def close(self) -> None: ...


@dataclass
class Wiring:
    """How providers reach the outside: live (journaled) or from a replay stash."""

    journal: JournalWriter
    stash: ReplayStash | None = None
    api_keys: dict[str, str] = field(default_factory=dict)
    """Keys by provider name, ahead of the environment (e.g. for local fakes)."""
    limits: Any = None
    """The run's shared rate limits (limits.RunLimits); None: no limits, retries only."""
    prefix: ReplayStash | None = None
    """A live attempt's --nodeval-from-turn stash: it answers the turns before N, then hands
    over to the live providers (journal/replay.py)."""

    @property
    def live(self) -> bool:
        return self.stash is None

    def serving(self) -> ReplayStash | None:
        """The stash that answers a model call now: the replay's, or a prefix still serving."""
        if self.stash is not None:
            return self.stash
        return self.prefix if self.prefix is not None and self.prefix.serving else None


def side_wiring(keys: dict[str, str] | None = None, limits: Any = None) -> Wiring:
    """Wiring for model calls outside the agent's session: an in-memory, discarded journal."""
    header = JournalHeader(
        session_id=new_session_id(),
        created_at=now_iso(),
        engine=EngineInfo(version="side"),
        source="live",
    )
    return Wiring(JournalWriter(None, header), None, keys or {}, limits)


# -- mock ---------------------------------------------------------------------------------


class MockProviderError(ProviderError):
    pass


class MockProvider:
    """Scripted replies, journaled like any other provider, replayed from the journal."""

    errors: tuple[type[BaseException], ...] = (MockProviderError,)

    def __init__(self, spec: ProviderSpec, wiring: Wiring) -> None:
        self.key, self._spec, self._wiring = spec.key, spec, wiring
        self._unused = list(spec.script)
        self._calls = 0

    def complete(self, request: ModelRequest) -> ModelReply:
        body = {
            "model": self._spec.model,
            "system": request.system,
            "messages": request.messages,
            "tools": [t.name for t in request.tools],
        }
        payload = {
            "provider": self.key,
            "api": "mock",
            "method": "POST",
            "path": "/mock",
            "stream": False,
            "body": body,
        }
        journal = self._wiring.journal
        start = time.perf_counter()
        stash = self._wiring.serving()
        if stash is not None:
            response = stash.serve_llm(journal, self.key, payload)
            if stash is self._wiring.prefix:
                self._skip_step(request)
        else:
            journal.emit("llm.request", payload)
            response = self._scripted(request, body)
            response["latency_ms"] = round((time.perf_counter() - start) * 1000, 3)
            journal.emit("llm.response", response)
        if response.get("status", 200) >= 400:
            raise MockProviderError(f"mock provider '{self.key}': {response['body']['error']}")
        return _reply_from_mock(response)

    def _scripted(self, request: ModelRequest, body: dict[str, Any]) -> dict[str, Any]:
        self._calls += 1
        step = self._take_step(request)
        if step.error is not None:
            return {"provider": self.key, "status": 500, "body": {"error": step.error}}
        calls = [
            {"id": f"call_{self._calls}_{i}", "name": c.name, "args": c.args}
            for i, c in enumerate(step.tool_calls, start=1)
        ]
        reply = {
            "text": step.text or "",
            "tool_calls": calls,
            "stop_reason": "tool_use" if calls else "end_turn",
        }
        usage = {"input_tokens": _estimate_tokens(body), "output_tokens": _estimate_tokens(reply)}
        return {"provider": self.key, "status": 200, "body": reply, "usage": usage}

    def _skip_step(self, request: ModelRequest) -> None:
        """A reply the --nodeval-from-turn prefix served: its step is used up, as if the script
        had given it, so the live turns go on from where the recording was."""
        self._calls += 1
        with contextlib.suppress(ProviderError):  # a script that was shortened since
            self._take_step(request)

    def _take_step(self, request: ModelRequest) -> MockStep:
        matched = [s for s in self._unused if s.when is not None and _matches(s, request.messages)]
        ordered = [s for s in self._unused if s.when is None]
        if not matched and not ordered:
            raise ProviderError(
                f"mock provider '{self.key}': the script ran out after {self._calls - 1} replies; "
                "add steps to its 'script' in input/config.yaml"
            )
        step = (matched or ordered)[0]
        self._unused.remove(step)
        return step

    def close(self) -> None:
        pass


def _matches(step: MockStep, messages: list[dict[str, Any]]) -> bool:
    assert step.when is not None
    when = step.when
    last_input = next((m["text"] for m in reversed(messages) if m["role"] == "user"), "")
    if when.input_contains is not None and when.input_contains.lower() not in last_input.lower():
        return False
    if when.input_matches is not None and not re.search(when.input_matches, last_input):
        return False
    if when.after_tool is not None:
        last = messages[-1] if messages else {}
        return last.get("role") == "tool" and last.get("name") == when.after_tool
    return True


def _estimate_tokens(value: Any) -> int:
    # Deterministic and roughly the size of what a tokenizer would count (4 chars a token).
    return max(1, len(json.dumps(value, default=str)) // 4)


def _reply_from_mock(response: dict[str, Any]) -> ModelReply:
    body = response["body"]
    usage = response.get("usage") or {}
    calls = tuple(
        ToolCallRequest(c["id"], c["name"], dict(c.get("args") or {}))
        for c in body.get("tool_calls", [])
    )
    return ModelReply(
        body.get("text", ""),
        calls,
        body.get("stop_reason", "end_turn"),
        usage.get("input_tokens", 0),
        usage.get("output_tokens", 0),
    )


# -- SDK providers ------------------------------------------------------------------------


def sdk_http_client(
    wiring: Wiring,
    provider: str,
    api: str,
    *,
    asynchronous: bool = False,
    max_retries: int | None = None,
) -> Any:
    """An httpx2 client whose transport journals (live) or serves the journal (replay).

    Live, the journaling transport sends through the retrying, rate-limited one (see
    agent/retries.py): `max_retries` retries unless a `nodeval_limits` line says otherwise.
    The SDK built on this client must not retry itself (pass it `max_retries=0`).
    """
    transport = sdk_transport(wiring, provider, api, asynchronous, max_retries)
    return http_client_over(transport, asynchronous)


def sdk_transport(
    wiring: Wiring, provider: str, api: str, asynchronous: bool, max_retries: int | None
) -> Any:
    """The transport of `sdk_http_client`: the replay transport when the wiring replays."""
    from ..journal.transport import HandoverTransport, ReplayTransport

    if wiring.stash is not None:
        return ReplayTransport(wiring.journal, wiring.stash, provider, api)
    transport = _recording_transport(wiring, provider, api, asynchronous, max_retries)
    if wiring.prefix is not None:  # the turns before --nodeval-from-turn come from the journal
        replay = ReplayTransport(wiring.journal, wiring.prefix, provider, api)
        transport = HandoverTransport(replay, transport, wiring.prefix)
    return transport


def http_client_over(transport: Any, asynchronous: bool = False) -> Any:
    """An httpx2 client sending through `transport` only."""
    import httpx2

    # trust_env=False: proxy settings from the environment would add real transports.
    client_cls = httpx2.AsyncClient if asynchronous else httpx2.Client
    return client_cls(transport=transport, trust_env=False)


def _recording_transport(
    wiring: Wiring, provider: str, api: str, asynchronous: bool, max_retries: int | None
) -> Any:
    from ..journal.transport import AsyncRecordingTransport, RecordingTransport
    from .retries import DEFAULT_MAX_RETRIES, AsyncLimitedTransport, LimitedTransport, RetryPolicy

    policy = RetryPolicy(max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries)
    family = limits_provider(provider, api)
    if asynchronous:
        return AsyncRecordingTransport(
            wiring.journal, provider, api, AsyncLimitedTransport(family, policy, wiring.limits)
        )
    return RecordingTransport(
        wiring.journal, provider, api, LimitedTransport(family, policy, wiring.limits)
    )


def limits_provider(provider: str, api: str) -> str:
    """The name a `nodeval_limits` line gives a client's traffic: its API's family (anthropic,
    openai) whatever the provider's key, or the name given to a plain `http_client`."""
    family = api.partition(".")[0]
    return provider if family in ("http", "") else family


def sdk_retries(spec: ProviderSpec, wiring: Wiring) -> int:
    """The SDK's own retries: none live (nodeval retries below the journal), as recorded in replay.

    Journals from before nodeval retried on its own hold every try; replaying them needs the
    SDK to retry as it did then. A final exchange says `x-should-retry: false` in replay.
    """
    return 0 if wiring.live else spec.max_retries


def api_key(spec: ProviderSpec, wiring: Wiring, default_env: str, *other_envs: str) -> str:
    """The provider's key: given to the wiring, else from api_key_env, else the default
    variables."""
    if wiring.stash is not None:
        return "nodeval-replay-needs-no-key"
    env = spec.api_key_env or default_env
    envs = (env,) if spec.api_key_env else (default_env, *other_envs)
    key = wiring.api_keys.get(spec.key) or next(
        (os.environ[e] for e in envs if real_key(os.environ.get(e))), None
    )
    if not key:
        raise ProviderError(
            f"provider '{spec.key}': no API key; set the environment variable {env} "
            "(or api_key_env in input/config.yaml), or replay the case's journal "
            "in deterministic mode, which needs no key"
        )
    return key


class AnthropicProvider:
    def __init__(self, spec: ProviderSpec, wiring: Wiring) -> None:
        import anthropic

        self.key, self._spec = spec.key, spec
        self.errors: tuple[type[BaseException], ...] = (anthropic.APIError,)
        self.transport = sdk_transport(
            wiring, spec.key, "anthropic.messages", False, spec.max_retries
        )
        self._client = anthropic.Anthropic(
            api_key=api_key(spec, wiring, "ANTHROPIC_API_KEY"),
            base_url=spec.base_url,
            max_retries=sdk_retries(spec, wiring),
            timeout=spec.timeout_s,
            http_client=http_client_over(self.transport),
        )
        self._messages = Converted(extend_anthropic)

    def complete(self, request: ModelRequest) -> ModelReply:
        kwargs: dict[str, Any] = {
            "model": self._spec.model,
            "max_tokens": self._spec.max_output_tokens,
            "messages": self._messages(request.messages),
            "timeout": min(self._spec.timeout_s, request.timeout_s),
        }
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if self._spec.stream:
            with self._client.messages.stream(**kwargs) as stream:
                message = stream.get_final_message()
        else:
            message = self._client.messages.create(**kwargs)
        return from_anthropic(message)

    def close(self) -> None:
        self._client.close()


class Converted:
    """A conversation in one API's shape, extended as the conversation grows.

    The engine sends its whole conversation on every model call, and only appends to it (a
    message, once in the list, is never changed): the messages converted for the last call are
    not converted again. Any other list, or one whose first messages are no longer equal to
    the ones converted, is converted whole. `extend(out, new)` appends the conversion of `new` to
    `out`, looking back at `out[-1]` at most (where tool results join their user message).
    """

    def __init__(
        self, extend: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]
    ) -> None:
        self._extend = extend
        self._source: list[dict[str, Any]] | None = None
        self._seen: list[dict[str, Any]] = []
        self._out: list[dict[str, Any]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen = self._seen
        # (A list compares its items by identity first: equal at C speed for the engine's.)
        if messages is not self._source or messages[: len(seen)] != seen:
            self._source, seen, self._out = messages, [], []
        self._extend(self._out, messages[len(seen) :])
        self._seen = list(messages)
        # A copy of the outer list: the SDK may keep what it is given; the messages in it are
        # the ones the next call's conversion looks back at, and it only appends to them.
        return list(self._out)

    def forget(self) -> None:
        """Let go of the conversation (a provider kept for another attempt)."""
        self._source, self._seen, self._out = None, [], []


def to_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    extend_anthropic(out, messages)
    return out


def extend_anthropic(out: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    for message in messages:
        if message["role"] == "user":
            out.append({"role": "user", "content": message["text"]})
        elif message["role"] == "assistant":
            blocks: list[dict[str, Any]] = (
                [{"type": "text", "text": message["text"]}] if message["text"] else []
            )
            blocks += [
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
                for c in message.get("tool_calls", [])
            ]
            out.append({"role": "assistant", "content": blocks})
        else:
            block = {
                "type": "tool_result",
                "tool_use_id": message["call_id"],
                "content": message["content"],
                "is_error": message["is_error"],
            }
            # Results of one turn's tool calls travel together in a single user message.
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})


def from_anthropic(message: Any) -> ModelReply:
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = tuple(
        ToolCallRequest(b.id, b.name, dict(b.input or {}))
        for b in message.content
        if b.type == "tool_use"
    )
    usage = message.usage
    # Every prompt token, as the journal counts them: Anthropic reports cached ones apart.
    cached = (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    return ModelReply(
        text,
        calls,
        message.stop_reason or "end_turn",
        usage.input_tokens + cached,
        usage.output_tokens,
    )


class OpenAIProvider:
    def __init__(self, spec: ProviderSpec, wiring: Wiring) -> None:
        import openai

        self.key, self._spec = spec.key, spec
        self.errors: tuple[type[BaseException], ...] = (openai.APIError,)
        api = "openai.responses" if spec.api == "responses" else "openai.chat"
        self.transport = sdk_transport(wiring, spec.key, api, False, spec.max_retries)
        self._client = openai.OpenAI(
            api_key=api_key(spec, wiring, "OPENAI_API_KEY"),
            base_url=spec.base_url,
            max_retries=sdk_retries(spec, wiring),
            timeout=spec.timeout_s,
            http_client=http_client_over(self.transport),
        )

    def complete(self, request: ModelRequest) -> ModelReply:
        if self._spec.api == "responses":
            return self._responses(request)
        kwargs: dict[str, Any] = {
            "model": self._spec.model,
            "messages": to_openai_chat(request.system, request.messages),
            "max_completion_tokens": self._spec.max_output_tokens,
            "timeout": min(self._spec.timeout_s, request.timeout_s),
        }
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if self._spec.stream:
            kwargs["stream_options"] = {"include_usage": True}
            with self._client.chat.completions.stream(**kwargs) as stream:
                completion = stream.get_final_completion()
        else:
            completion = self._client.chat.completions.create(**kwargs)
        return from_openai_chat(completion)

    def _responses(self, request: ModelRequest) -> ModelReply:
        kwargs: dict[str, Any] = {
            "model": self._spec.model,
            "input": to_openai_responses(request.messages),
            "max_output_tokens": self._spec.max_output_tokens,
            "timeout": min(self._spec.timeout_s, request.timeout_s),
        }
        if request.system:
            kwargs["instructions"] = request.system
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if self._spec.stream:
            with self._client.responses.stream(**kwargs) as stream:
                response = stream.get_final_response()
        else:
            response = self._client.responses.create(**kwargs)
        return from_openai_responses(response)

    def close(self) -> None:
        self._client.close()


def to_openai_chat(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message["role"] == "user":
            out.append({"role": "user", "content": message["text"]})
        elif message["role"] == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message["text"] or None}
            if message.get("tool_calls"):
                entry["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
                    }
                    for c in message["tool_calls"]
                ]
            out.append(entry)
        else:
            out.append(
                {"role": "tool", "tool_call_id": message["call_id"], "content": message["content"]}
            )
    return out


def from_openai_chat(completion: Any) -> ModelReply:
    choice = completion.choices[0]
    calls = tuple(
        ToolCallRequest(c.id, c.function.name, _parse_args(c.function.arguments))
        for c in (choice.message.tool_calls or [])
        if c.type == "function"
    )
    usage = completion.usage
    return ModelReply(
        choice.message.content or "",
        calls,
        choice.finish_reason or "stop",
        usage.prompt_tokens if usage else 0,
        usage.completion_tokens if usage else 0,
    )


def to_openai_responses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "user":
            out.append({"role": "user", "content": message["text"]})
        elif message["role"] == "assistant":
            if message["text"]:
                out.append({"role": "assistant", "content": message["text"]})
            out += [
                {
                    "type": "function_call",
                    "call_id": c["id"],
                    "name": c["name"],
                    "arguments": json.dumps(c["args"]),
                }
                for c in message.get("tool_calls", [])
            ]
        else:
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": message["call_id"],
                    "output": message["content"],
                }
            )
    return out


def from_openai_responses(response: Any) -> ModelReply:
    calls = tuple(
        ToolCallRequest(item.call_id, item.name, _parse_args(item.arguments))
        for item in response.output
        if item.type == "function_call"
    )
    usage = response.usage
    return ModelReply(
        response.output_text or "",
        calls,
        "tool_use" if calls else "end_turn",
        usage.input_tokens if usage else 0,
        usage.output_tokens if usage else 0,
    )


class GeminiProvider:
    """Gemini through google-genai; both of its httpx2 clients (sync and `aio`) are ours.

    Two things the neutral message format does not carry live on the provider, which lasts
    one session (and is rebuilt the same way in replay, so requests stay byte for byte equal):
    the ids it made up for function calls that came without one (never sent back to the API)
    and the thought signatures that Gemini 3 wants back with each function call.
    """

    def __init__(self, spec: ProviderSpec, wiring: Wiring) -> None:
        import httpx2
        from google import genai
        from google.genai import errors, types

        self.key, self._spec, self._types = spec.key, spec, types
        # The SDK raises its APIError for HTTP failures and UnknownApiResponseError for a body
        # that is not JSON, but lets httpx2's transport errors (refused connection, timeout,
        # a stream cut short) through unwrapped: all mean "this provider failed".
        self.errors: tuple[type[BaseException], ...] = (
            errors.APIError,
            errors.UnknownApiResponseError,
            httpx2.TransportError,
        )
        self._made_up_ids: set[str] = set()
        self._signatures: dict[str, bytes] = {}
        options = types.HttpOptions(
            base_url=spec.base_url,
            timeout=round(spec.timeout_s * 1000),
            retry_options=gemini_retries(spec.max_retries, replaying=wiring.stash is not None),
            httpx_client=sdk_http_client(
                wiring, spec.key, GEMINI_API, max_retries=spec.max_retries
            ),
            httpx_async_client=sdk_http_client(
                wiring, spec.key, GEMINI_API, asynchronous=True, max_retries=spec.max_retries
            ),
        )
        self._client = genai.Client(
            api_key=api_key(spec, wiring, "GEMINI_API_KEY", "GOOGLE_API_KEY"), http_options=options
        )

    def complete(self, request: ModelRequest) -> ModelReply:
        types = self._types
        config = types.GenerateContentConfig(
            system_instruction=request.system or None,
            max_output_tokens=self._spec.max_output_tokens,
            temperature=request.temperature,
            tools=[
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=t.name,
                            description=t.description,
                            parameters_json_schema=t.parameters,
                        )
                        for t in request.tools
                    ]
                )
            ]
            if request.tools
            else None,
            # The engine runs the tools itself; the SDK must never call Python functions.
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            http_options=types.HttpOptions(
                timeout=round(min(self._spec.timeout_s, request.timeout_s) * 1000)
            ),
        )
        # Content dicts; typed as the SDK's union, which (with Pillow installed) names images too.
        contents: Any = to_gemini(request.messages, self._made_up_ids, self._signatures)
        if self._spec.stream:
            chunks = list(
                self._client.models.generate_content_stream(
                    model=self._spec.model, contents=contents, config=config
                )
            )
        else:
            chunks = [
                self._client.models.generate_content(
                    model=self._spec.model, contents=contents, config=config
                )
            ]
        return self._reply(chunks)

    def _reply(self, chunks: list[Any]) -> ModelReply:
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        finish, usage = None, None
        for chunk in chunks:
            usage = chunk.usage_metadata or usage
            candidate = chunk.candidates[0] if chunk.candidates else None
            if candidate is None:
                continue
            finish = candidate.finish_reason or finish
            for part in (candidate.content.parts or []) if candidate.content else []:
                if part.function_call is not None:
                    calls.append(self._call(part))
                elif part.text and not part.thought:
                    texts.append(part.text)
        stop = "tool_use" if calls else gemini_stop_reason(finish)
        return ModelReply(
            "".join(texts),
            tuple(calls),
            stop,
            (usage.prompt_token_count or 0) if usage else 0,
            gemini_output_tokens(usage),
        )

    def _call(self, part: Any) -> ToolCallRequest:
        call = part.function_call
        call_id = call.id
        if not call_id:
            # Gemini may leave ids out; the engine needs one to pair the call with its result.
            call_id = f"gemini-call-{len(self._made_up_ids) + 1}"
            self._made_up_ids.add(call_id)
        if part.thought_signature:
            self._signatures[call_id] = part.thought_signature
        return ToolCallRequest(call_id, call.name or "", dict(call.args or {}))

    def close(self) -> None:
        self._client.close()


GEMINI_API = "gemini.generate_content"


def gemini_retries(max_retries: int, *, replaying: bool) -> Any:
    """The SDK's retry policy: none live (nodeval retries below the journal); in replay, as
    journals from before were recorded (every try an exchange), without waiting."""
    from google.genai import types

    # Recorded failures are served at once; the recorded backoff is not worth repeating
    if replaying:
        return types.HttpRetryOptions(
            attempts=max_retries + 1, initial_delay=0.0, max_delay=0.0, jitter=0.0
        )
    return types.HttpRetryOptions(attempts=1)


def gemini_stop_reason(finish: Any) -> str:
    name = str(getattr(finish, "value", finish) or "STOP")
    return {"STOP": "end_turn", "MAX_TOKENS": "max_tokens"}.get(name, name.lower())


def gemini_output_tokens(usage: Any) -> int:
    # Thinking tokens are billed as output but not counted in candidates_token_count.
    if usage is None:
        return 0
    return (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)


def to_gemini(
    messages: list[dict[str, Any]],
    made_up_ids: Collection[str] = (),
    signatures: Mapping[str, bytes] | None = None,
) -> list[dict[str, Any]]:
    """Neutral messages as Gemini `contents` (dicts the SDK validates into its types)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "user":
            out.append({"role": "user", "parts": [{"text": message["text"]}]})
        elif message["role"] == "assistant":
            out.append(
                {
                    "role": "model",
                    "parts": _gemini_model_parts(message, made_up_ids, signatures or {}),
                }
            )
        else:
            part = _gemini_result_part(message, made_up_ids)
            # The results of one turn's calls travel together, in one user content.
            if (
                out
                and out[-1]["role"] == "user"
                and all("function_response" in p for p in out[-1]["parts"])
            ):
                out[-1]["parts"].append(part)
            else:
                out.append({"role": "user", "parts": [part]})
    return [content for content in out if content["parts"]]  # a model turn that said nothing


def _gemini_model_parts(
    message: dict[str, Any], made_up_ids: Collection[str], signatures: Mapping[str, bytes]
) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": message["text"]}] if message["text"] else []
    for call in message.get("tool_calls", []):
        function_call: dict[str, Any] = {"name": call["name"], "args": call["args"]}
        if call["id"] not in made_up_ids:
            function_call["id"] = call["id"]
        part: dict[str, Any] = {"function_call": function_call}
        if call["id"] in signatures:
            part["thought_signature"] = signatures[call["id"]]
        parts.append(part)
    return parts


def _gemini_result_part(message: dict[str, Any], made_up_ids: Collection[str]) -> dict[str, Any]:
    response = {"error" if message["is_error"] else "output": message["content"]}
    function_response: dict[str, Any] = {"name": message["name"], "response": response}
    if message["call_id"] not in made_up_ids:
        function_response["id"] = message["call_id"]
    return {"function_response": function_response}


def _parse_args(arguments: str | None) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        # Keep a model's malformed arguments visible to the tool (and the journal).
        return {"_unparsed_arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"_value": parsed}


PROVIDERS: dict[str, Callable[[ProviderSpec, Wiring], Provider]] = {
    "mock": MockProvider,
    "anthropic": AnthropicProvider,
    "openai": OpenAIProvider,
    "gemini": GeminiProvider,
}


class ProviderChain:
    """Tries each provider in order for every call; a failure moves on (`provider.fallback`)."""

    def __init__(
        self,
        providers: list[Provider],
        journal: JournalWriter,
        pool: ReplayedProviders | None = None,
    ) -> None:
        self.providers, self._journal, self._pool = providers, journal, pool

    def complete(self, request: ModelRequest) -> ModelReply:
        failures: list[str] = []
        for index, provider in enumerate(self.providers):
            try:
                return provider.complete(request)
            except provider.errors as exc:
                message = f"{type(exc).__name__}: {exc}"
                failures.append(f"{provider.key}: {message}")
                if index + 1 < len(self.providers):
                    self._journal.emit(
                        "provider.fallback",
                        {
                            "from_provider": provider.key,
                            "to_provider": self.providers[index + 1].key,
                            "error": message[:500],
                        },
                    )
        raise ProviderError("every provider failed: " + "; ".join(failures))

    def close(self) -> None:
        for provider in self.providers:
            if self._pool is None or not self._pool.give(provider):
                provider.close()


def build_chain(specs: list[ProviderSpec], wiring: Wiring) -> ProviderChain:
    pool = REPLAYED if wiring.stash is not None and wiring.prefix is None else None
    providers: list[Provider] = []
    try:
        for spec in specs:
            reused = pool.take(spec, wiring) if pool is not None else None
            providers.append(reused or PROVIDERS[spec.name](spec, wiring))
    except BaseException:
        for provider in providers:
            provider.close()
        raise
    return ProviderChain(providers, wiring.journal, pool)


class ReplayedProviders:
    """SDK providers of replayed attempts, kept for the next attempt with the same spec.

    Building an SDK client costs about as much as a few replayed calls; in replay its only
    inputs are the spec (the key is a placeholder) and its transport's journal and stash,
    which are bound anew for each attempt. A provider is lent to one attempt at a time
    (attempts may run at once in threads), and only stateless ones are kept: Gemini's
    remembers the session's function call ids, the mock its script.
    """

    KEPT = 16
    """Specs kept at most (the least recently returned go first)."""

    def __init__(self) -> None:
        self._idle: dict[str, list[tuple[ProviderSpec, Provider]]] = {}
        self._lock = threading.Lock()

    def take(self, spec: ProviderSpec, wiring: Wiring) -> Provider | None:
        """An idle provider built from an equal spec, bound to this attempt; None if none."""
        if spec.name not in ("anthropic", "openai"):
            return None
        key = spec.model_dump_json()
        with self._lock:
            idle = self._idle.get(key)
            if not idle:
                return None
            built_from, provider = idle.pop()
        assert wiring.stash is not None and built_from == spec  # one JSON, one spec
        provider.transport.bind(wiring.journal, wiring.stash)  # type: ignore[attr-defined]
        return provider

    def give(self, provider: Provider) -> bool:
        """Keep a provider that replayed for the next attempt; False: close it instead."""
        from ..journal.transport import ReplayTransport

        transport = getattr(provider, "transport", None)
        spec = getattr(provider, "_spec", None)
        if not isinstance(transport, ReplayTransport) or not isinstance(spec, ProviderSpec):
            return False
        key = spec.model_dump_json()
        transport.unbind()
        messages = getattr(provider, "_messages", None)
        if isinstance(messages, Converted):
            messages.forget()
        with self._lock:
            idle = self._idle.pop(key, [])  # re-inserted: the most recently returned last
            idle.append((spec, provider))
            self._idle[key] = idle
            evicted = list(self._idle)[: -self.KEPT]
            closing = [p for k in evicted for _, p in self._idle.pop(k)]
        for old in closing:
            old.close()
        return True


REPLAYED = ReplayedProviders()
"""The process's replayed SDK providers (see ReplayedProviders)."""
