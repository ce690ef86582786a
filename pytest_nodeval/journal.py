"""The event journal: the durable record of one agent session (schema_version 1).

A journal is a directory with `header.json` and `events.jsonl`. Every event is one JSON
line `{"seq", "ts", "type", "turn", "payload"}` with `seq` strictly increasing from 1.
The writer appends and flushes each event and fsyncs at turn ends, so a killed process
leaves a valid prefix; the reader reports a torn last line by file and line and keeps
what came before it. Unknown event types (from a newer writer) are kept, with a warning.
"""

from __future__ import annotations

import json
import os
import uuid
import warnings
from functools import cached_property
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Annotated, Any, Callable, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError

from .errors import JournalError, NodevalWarning
from .redact import Redactor, secrets_redactor

SCHEMA_VERSION = 1
HEADER_FILE = "header.json"
EVENTS_FILE = "events.jsonl"


class _Payload(BaseModel):
    # Newer writers may add payload fields; keeping them makes old readers lossless.
    model_config = ConfigDict(extra="allow")


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class SessionStart(_Payload):
    engine: str
    version: str
    session_id: str
    mode: str = "live"
    config_digest: str | None = None


class SessionEnd(_Payload):
    status: str
    """"ok", "error" (the agent or a provider failed), "limit" (a budget ran out)."""
    reason: str | None = None
    error_kind: str | None = None
    """What failed: "agent" (a budget ran out), "provider", "harness", "timeout"."""
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
    """"anthropic.messages", "openai.chat", "openai.responses" or "mock"."""
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
    latency_ms: float = 0.0


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


class EvalCandidate(_Payload):
    reason: str
    """"sampled" or "failed"."""
    error: str | None = None


PAYLOADS: dict[str, type[_Payload]] = {
    "session.start": SessionStart,
    "session.end": SessionEnd,
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
}


class _EventBase(BaseModel):
    model_config = ConfigDict(frozen=True)

    seq: int = Field(ge=1)
    ts: str

    def get(self, path: str, default: Any = None) -> Any:
        """A payload value by dotted path ("args.command", "usage.input_tokens")."""
        return dig(self.payload_dict(), path, default)

    def payload_dict(self) -> dict[str, Any]:
        """The payload as plain types (computed once per event; do not mutate it)."""
        return self._payload_dict

    @cached_property
    def _payload_dict(self) -> dict[str, Any]:
        payload = getattr(self, "payload")
        return payload if isinstance(payload, dict) else payload.model_dump()


def _event_model(type_name: str, payload: type[_Payload]) -> type[_EventBase]:
    annotations = {"type": Literal[type_name], "turn": int, "payload": payload}  # type: ignore[valid-type]
    cls_name = "".join(part.capitalize() for part in type_name.replace(".", "_").split("_")) + "Event"
    namespace = {"__annotations__": annotations, "__module__": __name__, "turn": Field(ge=0, default=0)}
    return type(cls_name, (_EventBase,), namespace)


EVENT_MODELS: dict[str, type[_EventBase]] = {t: _event_model(t, p) for t, p in PAYLOADS.items()}


class UnknownEvent(_EventBase):
    """An event type this version does not know; kept as it was read."""

    type: str
    turn: int = Field(ge=0, default=0)
    payload: dict[str, Any] = Field(default_factory=dict)


def _tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in EVENT_MODELS else "unknown"


Event = Annotated[
    Union[tuple(Annotated[m, Tag(t)] for t, m in EVENT_MODELS.items())  # type: ignore[misc]
          + (Annotated[UnknownEvent, Tag("unknown")],)],
    Discriminator(_tag),
]
"""Any journal event: one model per type in a discriminated union, unknown types kept."""

EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


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
    source: Literal["record", "live", "replay", "sample"]
    redaction: list[str] = Field(default_factory=list)
    """Names of the redactors that ran over every event before it was written."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_session_id() -> str:
    return uuid.uuid4().hex


def dig(data: Any, path: str, default: Any = None) -> Any:
    """Walk a dotted path through dicts and lists ("messages.0.content")."""
    current = data
    for part in path.split(".") if path else []:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.lstrip("-").isdigit() and -len(current) <= int(part) < len(current):
            current = current[int(part)]
        else:
            return default
    return current


# Event types after which the writer fsyncs: a turn's work is durable once it has ended.
_DURABLE_AFTER = frozenset({"agent.turn.end", "session.end"})


class JournalWriter:
    """Appends events to `<directory>/events.jsonl`, one flushed line at a time.

    Every payload goes through the redactor before it is serialised, so secrets never
    reach the disk; the events kept in memory (`events`) are the redacted ones too.
    `durable=False` skips the fsyncs: for replayed sessions, which can always be replayed
    again, the flush per event is enough (an fsync costs milliseconds on some disks).
    With `directory=None` the journal lives in memory only and nothing is written: what
    a production session uses, so the sampler decides what (if anything) reaches the disk.
    """

    def __init__(
        self, directory: Path | None, header: JournalHeader, redactor: Redactor | None = None, *,
        durable: bool = True,
    ) -> None:
        self.directory = directory
        self.header = header
        self.events: list[Any] = []
        self._redactor = redactor or secrets_redactor()
        self._durable = durable
        self._turn = 0
        self._file: IO[str] | None = None
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            write_atomic(directory / HEADER_FILE, header.model_dump_json(indent=2) + "\n", durable=durable)
            self._file = open(directory / EVENTS_FILE, "w", encoding="utf-8")

    @property
    def turn(self) -> int:
        return self._turn

    def set_turn(self, turn: int) -> None:
        self._turn = turn

    def emit(self, type_name: str, payload: dict[str, Any], *, turn: int | None = None,
             owned: bool = False) -> Any:
        """Validate, redact, append and return one event.

        `owned=True`: the caller hands the payload over and never touches it again (say, a
        request body it just parsed), so it need not be copied through a JSON round trip.
        """
        if type_name not in PAYLOADS:
            raise ValueError(f"unknown event type {type_name!r}; known: {', '.join(PAYLOADS)}")
        raw = {
            "seq": len(self.events) + 1,
            "ts": now_iso(),
            "type": type_name,
            "turn": self._turn if turn is None else turn,
            "payload": self._redactor(type_name, payload),
        }
        # Serialise first, then validate the very line that is written: the event kept in
        # memory is what a reader will parse, and it shares no objects with the caller (an
        # agent's live message list, say, changes after the call).
        if owned:
            event = EVENT_ADAPTER.validate_python(raw)
        else:
            event = EVENT_ADAPTER.validate_json(json.dumps(raw, ensure_ascii=False, default=str))
        line = event.model_dump_json()  # canonical: every field, defaults included
        if self._file is not None:
            self._append(line, durable=self._durable and type_name in _DURABLE_AFTER)
        self.events.append(event)
        return event

    def _append(self, line: str, *, durable: bool) -> None:
        assert self._file is not None
        self._file.write(line + "\n")
        self._file.flush()
        if durable:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None and not self._file.closed:
            self._file.flush()
            if self._durable:
                os.fsync(self._file.fileno())
            self._file.close()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Journal(BaseModel):
    """A journal read back from disk."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    directory: Path
    header: JournalHeader
    events: list[Any]
    problems: list[str] = Field(default_factory=list)
    """Warnings raised while reading (a torn last line, unknown event types)."""

    def of_type(self, *types: str) -> list[Any]:
        return [e for e in self.events if e.type in types]


def read_journal(directory: Path, *, warn: Callable[[str], None] | None = None) -> Journal:
    """Parse a journal directory once; raise JournalError naming the file for what is unusable."""
    warn = warn or _warn
    header = read_header(directory)
    path = directory / EVENTS_FILE
    if not path.is_file():
        raise JournalError(f"{path}: missing (a journal needs {HEADER_FILE} and {EVENTS_FILE})")
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn_tail = not data.endswith(b"\n") and bool(lines[-1])
    events: list[Any] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last = number == len(lines)
        try:
            event = EVENT_ADAPTER.validate_json(line)
        except ValidationError as exc:
            if last and torn_tail:
                problems.append(f"{path}:{number}: torn last line ignored (the session was cut off); "
                                f"the {len(events)} events before it are used")
                break
            raise JournalError(f"{path}:{number}: invalid event: {_first_error(exc)}") from None
        if events and event.seq <= events[-1].seq:
            raise JournalError(f"{path}:{number}: seq {event.seq} does not follow seq {events[-1].seq}")
        if isinstance(event, UnknownEvent):
            problems.append(f"{path}:{number}: unknown event type '{event.type}' kept as is "
                            "(written by a newer pytest-nodeval?)")
        events.append(event)
    for problem in problems:
        warn(problem)
    return Journal(directory=directory, header=header, events=events, problems=problems)


def read_header(directory: Path) -> JournalHeader:
    if not directory.is_dir():
        raise JournalError(f"{directory}: no journal here; record one with `nodeval record {directory.parent}`")
    path = directory / HEADER_FILE
    try:
        return JournalHeader.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise JournalError(f"{path}: missing") from None
    except ValidationError as exc:
        raise JournalError(f"{path}: {_first_error(exc)} (this reader knows schema_version 1)") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


def _warn(message: str) -> None:
    warnings.warn(NodevalWarning(message), stacklevel=3)


def write_atomic(path: Path, text: str, *, durable: bool = True) -> None:
    """Write a file so that readers see the old or the new content, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        if durable:
            os.fsync(handle.fileno())
    os.replace(tmp, path)


def dump_events(events: list[Any]) -> list[dict[str, Any]]:
    """Events as plain JSON types (for reports and comparisons)."""
    return [json.loads(e.model_dump_json()) for e in events]
