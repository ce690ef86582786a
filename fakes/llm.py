"""A scripted fake of the Anthropic, OpenAI and Gemini HTTP APIs, for the official SDKs.

Covered routes (JSON and SSE streaming for each):

* ``POST /v1/messages``: Anthropic Messages. Streams ``message_start``,
  ``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``) /
  ``content_block_stop``, a ``ping``, ``message_delta`` with usage, ``message_stop``.
* ``POST /v1/chat/completions``: OpenAI Chat Completions. Streams ``chat.completion.chunk``
  objects with content and ``tool_calls`` deltas, a finish chunk, and, only when the request
  sets ``stream_options.include_usage``, a final chunk with ``choices: []`` and the usage;
  then ``data: [DONE]``.
* ``POST /v1/responses``: OpenAI Responses. Streams ``response.created`` …
  ``response.output_text.delta`` / ``response.function_call_arguments.delta`` …
  ``response.completed``.
* ``POST /{version}/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``:
  Gemini. A ``GenerateContentResponse`` with text and ``functionCall`` parts (no call ``id``
  unless the script gives one; the first call carries a ``thoughtSignature``, as Gemini 3
  sends), ``finishReason`` and ``usageMetadata``; streamed as text chunks, then the calls
  whole, the last chunk with the finish reason and the full usage. The key is read from
  ``x-goog-api-key`` (or ``?key=``).

Point the SDKs at it with ``anthropic.Anthropic(base_url=fake.url, api_key=...)``,
``openai.OpenAI(base_url=fake.url + "/v1", api_key=...)`` and
``genai.Client(api_key=..., http_options={"base_url": fake.url})``.

What the fake answers is scripted per scenario by an `LLMScript` (YAML or dict)::

    schema_version: 1
    seed: 7                       # draws between `choose` alternatives; override per run
    rules:                        # tried first, in order; the first match with uses left wins
      - when: {last_user_contains: weather}
        respond:
          tool_calls: [{name: get_weather, args: {city: Paris}}]
        times: 1                  # at most once (omit: unlimited)
      - when: {after_tool_result: true}
        choose:                   # one alternative drawn with a seeded random.Random
          - {weight: 3, respond: {text: "It is sunny in Paris."}}
          - {weight: 1, respond: {text: "I could not find out."}}
    responses:                    # used in order when no rule matches
      - fault: {kind: rate_limit, retry_after_s: 0.05}
      - text: Hello!
        usage: {input_tokens: 12, output_tokens: 3}   # also cache_read_tokens, cache_write_tokens

``when`` keys (all optional, all must hold): ``api`` (anthropic | openai_chat |
openai_responses | gemini), ``model``, ``last_user_contains``, ``last_user_regex``,
``system_contains``, ``tools_include`` (names that must all be offered),
``after_tool_result``, ``stream``. Fault kinds: ``rate_limit`` (429, optional Retry-After),
``server_error`` (500), ``overloaded`` (Anthropic 529 ``overloaded_error``; OpenAI and
Gemini 503),
``unavailable`` (503 for every API, optional Retry-After),
``timeout`` (the server stalls ``sleep_s`` seconds, longer than the client waits) and
``malformed_stream`` (``mode: cut`` drops the connection mid-event; ``mode: invalid_json``
sends an event whose data is not JSON). A request that no rule and no remaining response
answers gets a 400 in the provider's error shape that says so.

A burst of faults is a rule with ``times``: ``{respond: {fault: {kind: rate_limit}}, times: 3}``
fails the first three requests; without ``times`` the fault is permanent.

Every request is kept in `LLMFake.requests` (headers with credentials redacted).
`LLMFake.in_flight` counts the requests being answered right now and `max_in_flight` the
most there ever were at once (until the last byte of a stream is sent): what a client-side
concurrency limit must keep low.

Not covered: other endpoints (models, batches, files, embeddings, token counting), images
and documents, extended thinking, citations, structured-output validation, the Assistants
API, and any checking of request bodies beyond reading what rules match on.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._script import ScriptSource, load_script

if TYPE_CHECKING:
    from ._llm_wire import RequestView
    from .server import ServedApp

__all__ = [
    "Alternative",
    "Fault",
    "LLMFake",
    "LLMScript",
    "Match",
    "RecordedLLMRequest",
    "Rule",
    "ScriptedResponse",
    "ScriptedToolCall",
    "Usage",
]

Api = Literal["anthropic", "openai_chat", "openai_responses", "gemini"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Usage(_Model):
    input_tokens: int = Field(ge=0)
    """Prompt tokens reported to the SDK, the cached ones included (Anthropic is sent this
    minus the two cache counts, as its API reports them)."""
    output_tokens: int = Field(ge=0)
    """Completion tokens reported to the SDK."""
    cache_read_tokens: int = Field(default=0, ge=0)
    """Of input_tokens, read from the prompt cache (Anthropic `cache_read_input_tokens`,
    OpenAI `cached_tokens`, Gemini `cachedContentTokenCount`)."""
    cache_write_tokens: int = Field(default=0, ge=0)
    """Of input_tokens, written to the prompt cache (Anthropic `cache_creation_input_tokens`;
    OpenAI and Gemini do not report them)."""
    cached_tokens: int = Field(default=0, ge=0)
    """Gemini's name for cache_read_tokens (`cachedContentTokenCount`); either may be given."""

    @property
    def cache_read(self) -> int:
        return self.cache_read_tokens or self.cached_tokens

    @model_validator(mode="after")
    def _cache_within_input(self) -> Usage:
        if self.cache_read + self.cache_write_tokens > self.input_tokens:
            raise ValueError(
                "cache_read_tokens (cached_tokens) + cache_write_tokens must not exceed "
                "input_tokens (input_tokens counts the cached tokens too)"
            )
        return self


class ScriptedToolCall(_Model):
    name: str
    """Tool name, as offered in the request's `tools`."""
    args: dict[str, Any] = {}
    """Arguments; sent as an object (Anthropic, Gemini) or a JSON string (OpenAI)."""
    id: str | None = None
    """Tool call id; generated (``toolu_fake_…`` / ``call_fake_…``; none for Gemini) when
    omitted."""


class Fault(_Model):
    kind: Literal[
        "rate_limit", "server_error", "overloaded", "unavailable", "timeout", "malformed_stream"
    ]
    """What goes wrong instead of an answer."""
    retry_after_s: float | None = Field(default=None, ge=0)
    """rate_limit/overloaded/unavailable: sent as `retry-after` (whole seconds) and
    `retry-after-ms`."""
    message: str | None = None
    """Error message; a provider-like default when omitted."""
    sleep_s: float = Field(default=30.0, gt=0)
    """timeout: how long the server stalls; must exceed the client's timeout."""
    mode: Literal["cut", "invalid_json"] = "cut"
    """malformed_stream: drop the connection mid-event, or send data that is not JSON."""


class ScriptedResponse(_Model):
    text: str | None = None
    """Assistant text."""
    tool_calls: list[ScriptedToolCall] = []
    """Tool calls, after the text."""
    usage: Usage | None = None
    """Token usage; estimated from the sizes of the request and the answer when omitted."""
    stop_reason: str | None = None
    """Overrides the stop/finish reason (default: tool use if there are calls, else end)."""
    delay_s: float = Field(default=0.0, ge=0)
    """Latency before the first byte."""
    fault: Fault | None = None
    """Fail this request instead of answering."""

    @model_validator(mode="after")
    def _says_something(self) -> ScriptedResponse:
        if self.text is None and not self.tool_calls and self.fault is None:
            raise ValueError("a response needs `text`, `tool_calls` or a `fault`")
        return self


class Alternative(_Model):
    weight: float = Field(gt=0)
    """Relative probability of this alternative."""
    respond: ScriptedResponse
    """The answer when this alternative is drawn."""


class Match(_Model):
    api: Api | None = None
    """Which API the request came to."""
    model: str | None = None
    """Exact model name in the request."""
    last_user_contains: str | None = None
    """Substring of the text of the last user message."""
    last_user_regex: str | None = None
    """`re.search` pattern over the text of the last user message."""
    system_contains: str | None = None
    """Substring of the system prompt (Anthropic `system`, OpenAI system/developer messages
    or Responses `instructions`)."""
    tools_include: list[str] | None = None
    """Every one of these tool names is offered in the request."""
    after_tool_result: bool | None = None
    """The request ends with a tool result (the turn after a tool call)."""
    stream: bool | None = None
    """The request asks for an SSE stream."""

    @field_validator("last_user_regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"not a valid regular expression: {err}") from None
        return pattern


class Rule(_Model):
    when: Match = Match()
    """Conditions on the request; the default matches every request."""
    respond: ScriptedResponse | None = None
    """The answer, every time the rule is used."""
    choose: list[Alternative] | None = None
    """Weighted alternatives, one drawn per use (instead of `respond`)."""
    times: int | None = Field(default=None, ge=1)
    """Maximum uses (omit for unlimited)."""

    @model_validator(mode="after")
    def _one_answer(self) -> Rule:
        if (self.respond is None) == (not self.choose):
            raise ValueError("a rule needs exactly one of `respond` or a non-empty `choose`")
        return self


class LLMScript(_Model):
    schema_version: Literal[1] = 1
    """Format version of this file."""
    seed: int = 0
    """Seed of the random draws among `choose` alternatives."""
    rules: list[Rule] = []
    """Request-matched answers, tried first."""
    responses: list[ScriptedResponse] = []
    """Answers used in order when no rule matches."""

    @classmethod
    def load(cls, source: ScriptSource) -> LLMScript:
        """From a YAML path, a mapping or an `LLMScript`; raises `ScriptError` with the field."""
        return load_script(cls, source, what="LLM script")


@dataclass(frozen=True, slots=True)
class RecordedLLMRequest:
    """One request the fake received and what it chose to do."""

    index: int
    api: Api
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    answered_by: str
    """``rules[i]``, ``rules[i].choose[j]``, ``responses[i]``, ``unscripted`` or ``rejected``."""
    outcome: str
    """``text``, ``tool_calls``, a fault kind, or ``error``."""


@dataclass
class _Plan:
    """The script's consumable state for one session (reset by `LLMFake.reset`)."""

    rng: random.Random
    uses: list[int]
    next_response: int = 0


@dataclass(frozen=True, slots=True)
class _Choice:
    response: ScriptedResponse | None
    answered_by: str


class LLMFake:
    """The scripted LLM fake: an ASGI app plus its served address once started.

    >>> with LLMFake({"responses": [{"text": "hi"}]}) as fake:  # doctest: +SKIP
    ...     Anthropic(base_url=fake.url, api_key="k", max_retries=0)
    """

    def __init__(
        self,
        script: ScriptSource | None = None,
        *,
        seed: int | None = None,
        api_key: str | None = None,
    ) -> None:
        """`script` is a YAML path, a mapping or an `LLMScript` (none: every request gets the
        "unscripted" 400); `seed` overrides the script's seed for the random draws."""
        self.script = LLMScript.load(script if script is not None else {})
        self.api_key = api_key
        """When set, requests without this key get the provider's 401."""
        self.requests: list[RecordedLLMRequest] = []
        self.in_flight = 0
        """Requests being answered right now."""
        self.max_in_flight = 0
        """The most requests ever answered at once (since the start or the last `reset`)."""
        self._counter = 0
        self._plan = self._new_plan(seed)
        self._served: ServedApp | None = None

    # ---- lifecycle ----

    @property
    def url(self) -> str:
        """Base URL; OpenAI clients need ``url + "/v1"``."""
        if self._served is None:
            raise RuntimeError("LLMFake is not started; use start() or a with block")
        return self._served.url

    def start(self) -> LLMFake:
        from .server import ServedApp

        self._served = ServedApp(self.asgi_app(), name="fake-llm").start()
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()
            self._served = None

    def __enter__(self) -> LLMFake:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def reset(self, *, seed: int | None = None) -> None:
        """Start a new session: rule uses, the response cursor and the random draws restart
        (from `seed`, else the script's seed); recorded requests are cleared."""
        self._plan = self._new_plan(seed)
        self.requests.clear()
        self.max_in_flight = self.in_flight

    def _new_plan(self, seed: int | None) -> _Plan:
        rng = random.Random(self.script.seed if seed is None else seed)
        return _Plan(rng=rng, uses=[0] * len(self.script.rules))

    # ---- choosing an answer ----

    def _choose(self, view: RequestView) -> _Choice:
        for i, rule in enumerate(self.script.rules):
            if rule.times is not None and self._plan.uses[i] >= rule.times:
                continue
            if _matches(rule.when, view):
                self._plan.uses[i] += 1
                return self._answer_of(rule, f"rules[{i}]")
        if self._plan.next_response < len(self.script.responses):
            i = self._plan.next_response
            self._plan.next_response += 1
            return _Choice(self.script.responses[i], f"responses[{i}]")
        return _Choice(None, "unscripted")

    def _answer_of(self, rule: Rule, where: str) -> _Choice:
        if rule.respond is not None:
            return _Choice(rule.respond, where)
        alternatives = rule.choose or []
        weights = [a.weight for a in alternatives]
        j = self._plan.rng.choices(range(len(alternatives)), weights=weights)[0]
        return _Choice(alternatives[j].respond, f"{where}.choose[{j}]")

    def _next_id(self) -> int:
        self._counter += 1
        return self._counter

    def asgi_app(self) -> Any:
        """The ASGI app, to serve it some other way than `start()` does."""
        from ._llm_app import build_app

        return build_app(self)


def _matches(when: Match, view: RequestView) -> bool:
    checks = (
        when.api is None or when.api == view.api,
        when.model is None or when.model == view.model,
        when.stream is None or when.stream == view.stream,
        when.last_user_contains is None or when.last_user_contains in view.last_user,
        when.last_user_regex is None or re.search(when.last_user_regex, view.last_user) is not None,
        when.system_contains is None or when.system_contains in view.system,
        when.tools_include is None or set(when.tools_include) <= set(view.tool_names),
        when.after_tool_result is None or when.after_tool_result == view.after_tool_result,
    )
    return all(checks)
