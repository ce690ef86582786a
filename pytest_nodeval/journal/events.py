"""The journal's format: the durable record of one agent session (schema_version 1).

A journal is a directory with `header.json` and `events.jsonl`. Every event is one JSON
line `{"seq", "ts", "type", "turn", "payload"}` with `seq` strictly increasing from 1.
Each event type is a pydantic model in one discriminated union; unknown types (from a
newer writer) parse as `UnknownEvent` and are kept. `writer.py` and `reader.py` move
events to and from disk.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeAlias, TypeVar, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    model_serializer,
)

from .ondisk import DiskSlice

SCHEMA_VERSION: Final = 1
_M = TypeVar("_M", bound=BaseModel)
HEADER_FILE = "header.json"
EVENTS_FILE = "events.jsonl"


class _Payload(BaseModel):
    # Newer writers may add payload fields; keeping them makes old readers lossless.
    model_config = ConfigDict(extra="allow")


class Usage(BaseModel):
    # Counts a newer writer adds ride along (journals recorded before the cache counts were
    # fields carry Gemini's `cache_read_tokens` this way too).
    model_config = ConfigDict(extra="allow")

    input_tokens: int = 0
    """Every prompt token, cached or not: Anthropic's three input counts summed, OpenAI's and
    Gemini's prompt tokens as reported (they already include the cached ones)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """Of input_tokens, those read from the provider's prompt cache (billed cheaper)."""
    cache_write_tokens: int = 0
    """Of input_tokens, those written to the prompt cache (Anthropic bills them dearer)."""


class SessionStart(_Payload):
    engine: str
    version: str
    session_id: str
    mode: str = "live"
    config_digest: str | None = None


class SessionEnd(_Payload):
    status: str
    """"ok", "error" (the agent or a provider failed), "limit" (a budget ran out),
    "divergence" (replay stopped where the agent did what the journal did not record)."""
    reason: str | None = None
    error_kind: str | None = None
    """What failed: "agent" (a budget ran out), "provider", "harness", "timeout"; for an own
    agent also "escape" (a model call sent around the journal), "no_key" (nodeval's placeholder
    key on its way to a real provider) and "no_model_call" (a recording without one)."""
    infra: bool = False
    """True when the failure is the infrastructure's (provider 5xx, connection), not the agent's."""
    duration_ms: float = 0.0
    """How long the agent took; in replay, the recorded session's duration."""
    usage: Usage = Field(default_factory=Usage)
    turns: int = 0
    user_ending: str | None = None
    """How a simulated persona ended the conversation: done, transfer, out_of_scope, turn_limit."""


class IoInput(_Payload):
    text: str
    source: str = "scripted"


class IoOutput(_Payload):
    text: str


class IoAsk(_Payload):
    call_id: str
    question: str


class IoAskResponse(_Payload):
    call_id: str
    text: str
    source: str = "scripted"


class AgentTurnStart(_Payload):
    pass


class AgentTurnEnd(_Payload):
    stop_reason: str = "end_turn"


class LlmRequest(_Payload):
    provider: str
    """Name of the provider in the chain (or of the client an adapted agent uses)."""
    api: str
    """"anthropic.messages", "openai.chat", "openai.responses", "gemini.generate_content" or
    "mock"."""
    method: str = "POST"
    path: str = ""
    stream: bool = False
    body: Any = None


class LlmResponse(_Payload):
    provider: str
    status: int = 200
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None
    sse: str | None = None
    """The whole server-sent-event stream of a streaming call, as received."""
    error: str | None = None
    """A transport failure (no HTTP response at all), e.g. "ConnectError: ..."."""
    usage: Usage | None = None
    model: str | None = None
    """The model that answered, as the response names it (else as the request asked): prices it."""
    latency_ms: float = 0.0
    # `retries` (an extra field, written only by the HTTP recorder): the tries of this request
    # that failed (429, 5xx, connection) before this final exchange. Absent from journals
    # written before nodeval retried on its own, where each try is an exchange of its own.


class ToolRegister(_Payload):
    tool: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    side_effects: bool = True
    source: str = "builtin"


class ToolCall(_Payload):
    tool: str
    call_id: str
    args: Any = None


class ToolResult(_Payload):
    tool: str
    call_id: str
    ok: bool
    result: Any = None
    error: str | None = None
    latency_ms: float = 0.0


class ProviderFallback(_Payload):
    from_provider: str
    to_provider: str
    error: str


class WorldSnapshot(_Payload):
    backend: str
    files: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per watched path (world.snapshot): {exists: false}; a file's {exists, content, encoding,
    truncated}; a directory's {exists, listing}; or, for a path there but unreadable (mode 000,
    a symlink loop), {exists: true, unreadable: true, reason}."""


class JudgeRequest(_Payload):
    judge: str
    criterion: str
    body: Any = None


class JudgeResponse(_Payload):
    judge: str
    criterion: str
    verdict: str
    """"pass", "fail" or "inconclusive"."""
    reason: str = ""
    raw: Any = None


class SkillDiscover(_Payload):
    skills: list[dict[str, Any]] = Field(default_factory=list)
    """Each skill found at boot: name, description, path (its directory under the skills root)."""


class PlanCreated(_Payload):
    text: str
    steps: list[str] = Field(default_factory=list)


class PlanResult(_Payload):
    steps: list[dict[str, Any]] = Field(default_factory=list)
    """Each step: text, tool (the tool it names, or None) and done (None when it names no tool)."""
    done: int = 0
    checkable: int = 0
    """Steps that name a tool, so the journal can tell whether they were done."""
    followed: bool = False
    """Every step that names a tool was done, in the plan's order."""


class SessionLiveFrom(_Payload):
    """Where an attempt run with `--nodeval-from-turn` stops replaying its journal and goes live.

    Every event before this one was served from (or answered by) the golden journal's first
    `turn - 1` user turns; from here on the agent talks to real providers or the local fakes.
    """

    turn: int = Field(ge=1)
    """The first user turn run live (N of --nodeval-from-turn)."""
    replayed_session: str | None = None
    """The session id of the journal the earlier turns were replayed from."""


class EvalCandidate(_Payload):
    reason: str
    """"sampled" or "failed"."""
    error: str | None = None


PAYLOADS: dict[str, type[_Payload]] = {
    "session.start": SessionStart,
    "session.end": SessionEnd,
    "session.live_from": SessionLiveFrom,
    "io.input": IoInput,
    "io.output": IoOutput,
    "io.ask": IoAsk,
    "io.ask.response": IoAskResponse,
    "agent.turn.start": AgentTurnStart,
    "agent.turn.end": AgentTurnEnd,
    "llm.request": LlmRequest,
    "llm.response": LlmResponse,
    "tool.register": ToolRegister,
    "tool.call": ToolCall,
    "tool.result": ToolResult,
    "provider.fallback": ProviderFallback,
    "world.snapshot": WorldSnapshot,
    "judge.request": JudgeRequest,
    "judge.response": JudgeResponse,
    "eval.candidate": EvalCandidate,
    "skill.discover": SkillDiscover,
    "plan.created": PlanCreated,
    "plan.result": PlanResult,
}


LAZY_FIELDS: Final[dict[str, frozenset[str]]] = {
    "llm.request": frozenset({"body"}),
    "llm.response": frozenset({"body", "sse"}),
}
"""The payload fields that hold most of a golden journal's bytes (a request carries the whole
conversation so far): `RecordedPayload` keeps them as text and parses them when read."""


class RecordedPayload:
    """A golden journal's payload kept as the line the journal has it, parsed when read.

    Replay compares a request with the recorded one byte for byte and writes both back as
    they were, so it needs the text; parsed beside it, each model call would take the journal's
    memory twice and more (issue 28). Its small fields (provider, api, path, usage, ...) are
    kept parsed; the `LAZY_FIELDS` are parsed from the line each time they are read and never
    kept. It answers what code reads of a payload model: attributes, `model_extra`,
    `model_dump()`, equality.

    The line is kept whole and the payload's text is a view into it (`raw`), not a slice of
    it: a copy per line, freed and allocated around the parse, fragments the heap of a process
    reading a big journal by about the journal's size again. A line of megabytes is not kept
    at all but left in the file (`ondisk.DiskSlice`), and read from it when it is used.
    """

    __slots__ = ("_end", "_head", "_lazy", "_line", "_start")

    def __init__(
        self,
        payload: _Payload,
        line: bytes | DiskSlice,
        span: tuple[int, int],
        lazy: frozenset[str],
    ) -> None:
        """`payload`: the model just parsed from `line`, taken over (its lazy fields are
        dropped); `span`: where its text is in `line`."""
        self._line = line
        self._start, self._end = span
        self._lazy = lazy
        # The payload just parsed from `line`, which nothing else holds: its lazy fields are
        # dropped in place (a copy of the model costs about 1 KB per event).
        self._head = payload
        for name in lazy:
            payload.__dict__[name] = None
        share_fields_set(payload)  # never assigned to: only read through __getattr__

    @property
    def raw(self) -> memoryview | DiskSlice:
        """The payload's JSON text, as the journal's line has it (a view, not a copy)."""
        if isinstance(self._line, DiskSlice):
            return self._line.sub(self._start, self._end)
        return memoryview(self._line)[self._start : self._end]

    def find(self, text: bytes, start: int = 0) -> int:
        """Where `text` is in `raw` from `start` on, or -1 (bytes.find, without a copy)."""
        size = self._end - self._start
        begin = self._start + (start if start >= 0 else max(0, size + start))
        found = self._line.find(text, begin, self._end)
        return found - self._start if found != -1 else -1

    def rfind(self, text: bytes) -> int:
        """Where `text` last is in `raw`, or -1 (bytes.rfind, without a copy)."""
        found = self._line.rfind(text, self._start, self._end)
        return found - self._start if found != -1 else -1

    def parsed(self) -> _Payload:
        """The whole payload model, parsed now (the caller drops it when done)."""
        payload: _Payload = EVENT_ADAPTER.validate_json(bytes(self._line)).payload
        return payload

    def model_dump(self) -> dict[str, Any]:
        return self.parsed().model_dump()

    def __getattr__(self, name: str) -> Any:
        # Only names the slots do not hold reach here; none of a payload's starts with "_".
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._lazy:
            return getattr(self.parsed(), name)
        return getattr(self._head, name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordedPayload):
            return _same_text(self.raw, other.raw) or self.parsed() == other.parsed()
        return self.parsed() == other if isinstance(other, _Payload) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like the models it stands for

    def __repr__(self) -> str:
        return f"RecordedPayload({type(self._head).__name__}, {self._end - self._start} bytes)"


PayloadText: TypeAlias = bytes | memoryview | DiskSlice
"""A payload's JSON text as a golden journal has it: in memory, or left in the file."""


def _same_text(one: memoryview | DiskSlice, other: memoryview | DiskSlice) -> bool:
    if isinstance(one, memoryview) and isinstance(other, memoryview):
        return one == other
    return len(one) == len(other) and bytes(one) == bytes(other)


def constructed(model: type[_M], values: dict[str, Any], fields_set: set[str]) -> _M:
    """A model around `values` (taken over: every field, in declaration order), which are what
    validation would make of them: the project's own, built from validated parts.

    What `model_construct` does for a model without aliases, private attributes or
    `model_post_init`, without its look-ups field by field: the journal writer constructs an
    event and its payload for every small event it writes.
    """
    built = model.__new__(model)
    object.__setattr__(built, "__dict__", values)
    # BaseModel's slots set through their descriptors: half the cost of object.__setattr__.
    _SET_FIELDS_SET(built, fields_set)
    _SET_EXTRA(built, {} if model.model_config.get("extra") == "allow" else None)
    _SET_PRIVATE(built, None)
    return built


_SET_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__


_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


def share_fields_set(model: BaseModel) -> None:
    """Let `model` share the set of the fields it was given with every model given the same.

    Pydantic keeps one such set per model, about 700 bytes: as much again as a small event, in
    a journal of many thousands (issue 28). Only for a model nothing assigns to (an event is
    frozen), since an assignment would add to the shared set.
    """
    given = model.__pydantic_fields_set__
    shared = _FIELDS_SETS.setdefault(frozenset(given), given)
    object.__setattr__(model, "__pydantic_fields_set__", shared)


class _EventBase(BaseModel):
    model_config = ConfigDict(frozen=True)

    seq: int = Field(ge=1)
    ts: str

    if TYPE_CHECKING:
        # Declared by each event model (_event_model, UnknownEvent); said here for the checker.
        type: str
        turn: int
        payload: Any  # one payload model per event type (PAYLOADS); a dict when unknown

    def get(self, path: str, default: Any = None) -> Any:
        """A payload value by dotted path ("args.command", "usage.input_tokens")."""
        return dig(self.payload_dict(), path, default)

    def payload_dict(self) -> dict[str, Any]:
        """The payload as plain types (computed once per event; do not mutate it).

        A golden journal's model payload (`RecordedPayload`) is parsed anew at each call and
        never kept: kept, it would hold the journal twice (its text and its parse).
        """
        payload = self.payload
        if isinstance(payload, RecordedPayload):
            return payload.model_dump()
        return self._payload_dict

    @cached_property
    def _payload_dict(self) -> dict[str, Any]:
        payload = self.payload
        return payload if isinstance(payload, dict) else payload.model_dump()


def _event_model(type_name: str, payload: type[_Payload]) -> type[_EventBase]:
    annotations = {"type": Literal[type_name], "turn": int, "payload": payload}
    cls_name = (
        "".join(part.capitalize() for part in type_name.replace(".", "_").split("_")) + "Event"
    )
    namespace = {
        "__annotations__": annotations,
        "__module__": __name__,
        "turn": Field(ge=0, default=0),
    }
    return type(cls_name, (_EventBase,), namespace)


EVENT_MODELS: dict[str, type[_EventBase]] = {t: _event_model(t, p) for t, p in PAYLOADS.items()}


class UnknownEvent(_EventBase):
    """An event type this version does not know; kept as it was read."""

    type: str
    turn: int = Field(ge=0, default=0)
    payload: dict[str, Any] = Field(default_factory=dict)


def _tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    # Not a string (a list, say): "unknown", whose model then says what is wrong with it.
    return kind if isinstance(kind, str) and kind in EVENT_MODELS else "unknown"


if TYPE_CHECKING:
    # To a type checker every event is an _EventBase (UnknownEvent included); the union
    # below is built at run time from PAYLOADS, which no checker can follow.
    Event: TypeAlias = _EventBase
else:
    Event = Annotated[
        Union[  # noqa: UP007  (a runtime-built tuple: `|` cannot spread it)
            tuple(Annotated[m, Tag(t)] for t, m in EVENT_MODELS.items())
            + (Annotated[UnknownEvent, Tag("unknown")],)
        ],
        Discriminator(_tag),
    ]
"""Any journal event: one model per type in a discriminated union, unknown types kept."""

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


class EngineInfo(BaseModel):
    name: str = "pytest-nodeval"
    version: str


class JournalHeader(BaseModel):
    """`header.json` of a journal."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    session_id: str
    created_at: str
    engine: EngineInfo
    config_digest: str | None = None
    case_digests: dict[str, str] | None = None
    """A recording's case files by name relative to the case directory (case.yaml,
    assertions.yaml, everything under input/), each with the sha256 of its bytes: what
    `--nodeval-record-mode=missing` compares to tell a current journal from a stale one
    (case/digests.py). Absent from journals made before it existed and from other sources."""
    source: Literal["record", "live", "replay", "sample"]
    redaction: list[str] = Field(default_factory=list)
    """Names of the redactors that ran over every event before it was written."""

    @model_serializer(mode="wrap")
    def _absent_digests_unwritten(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Only a recording has case digests: every other header is written as before it
        # existed, byte for byte.
        data = handler(self)
        if isinstance(data, dict) and data.get("case_digests") is None:
            data.pop("case_digests", None)
        return data


def same_json(recorded: Any, actual: Any) -> bool:
    """Whether two JSON values serialise alike: equal, with the same types (1, 1.0 and True
    are equal in Python) and the same key order."""
    if type(recorded) is not type(actual):
        return False
    if isinstance(recorded, dict):
        return list(recorded) == list(actual) and all(
            same_json(value, actual[key]) for key, value in recorded.items()
        )
    if isinstance(recorded, list):
        return len(recorded) == len(actual) and all(map(same_json, recorded, actual))
    return bool(recorded == actual)


def now_iso() -> str:
    return iso_of_ns(time.time_ns())


_SECOND: tuple[int, str] = (-1, "")
"""The last second formatted and its text: every event is stamped, mostly within one second."""


def iso_of_ns(ns: int) -> str:
    """`datetime.now(UTC).isoformat(timespec="microseconds")` with a Z, for the system clock
    read as `ns` (datetime floors it to the microsecond too), at a third of its cost: the
    date and time of day are formatted once per second."""
    global _SECOND
    second, micro = divmod(ns // 1000, 1_000_000)
    cached = _SECOND  # one read: another thread may replace it, never change it
    if cached[0] != second:
        day = datetime.fromtimestamp(second, UTC)
        cached = _SECOND = (second, day.isoformat(timespec="seconds").removesuffix("+00:00"))
    return f"{cached[1]}.{micro:06d}Z"


def new_session_id() -> str:
    return uuid.uuid4().hex


def dig(data: Any, path: str, default: Any = None) -> Any:
    """Walk a dotted path through dicts and lists ("messages.0.content")."""
    current = data
    for part in path.split(".") if path else []:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif (
            isinstance(current, list)
            and part.lstrip("-").isdigit()
            and -len(current) <= int(part) < len(current)
        ):
            current = current[int(part)]
        else:
            return default
    return current
