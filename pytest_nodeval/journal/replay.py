"""Replay: serve a recorded session back to a live agent, and stop loudly where it differs.

The coordinator (`ReplayStash`) is seeded from a journal with first-in-first-out stashes
of what the outside world answered: `llm.response` per provider, `tool.result` per call id,
`io.ask.response` per call id, and the `io.input` turns in order. The agent runs live
against them; whatever it asks is compared with what was recorded at that point.

A prefix stash (`live_from`, for --nodeval-from-turn N) holds only the first N-1 user turns
and serves them in order without comparing requests (a new system prompt must not stop it);
once the user is asked for turn N it hands over (`hand_over`) and the attempt goes live.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import ReplayDivergence
from ..modes import MatchLevel
from .events import PayloadText, RecordedPayload
from .ondisk import DiskSlice, GoldenChanged
from .reader import Journal
from .writer import GoldenEvents

if TYPE_CHECKING:
    from .events import Event
    from .writer import JournalWriter

# In "default" matching these request keys must agree; the rest (temperature, metadata,
# max_tokens, stream options) may change without invalidating the recorded answers.
_MATCHED_KEYS = (
    "model",
    "system",
    "instructions",
    "messages",
    "input",
    "tools",
    "tool_choice",
    # Gemini (its model is in the path, which always has to match)
    "contents",
    "systemInstruction",
    "toolConfig",
)


class ReplayStopped(BaseException):
    """Carries a ReplayDivergence through code that catches Exception.

    The SDKs wrap any Exception raised by a transport into a retryable connection error,
    and an agent may catch broad exceptions; neither may turn a divergence into a retry,
    a provider fallback or a live call. So the stop travels as a BaseException and is
    turned back into the ReplayDivergence by the session.
    """

    def __init__(self, divergence: ReplayDivergence) -> None:
        super().__init__(str(divergence))
        self.divergence = divergence


@dataclass(slots=True)
class RecordedExchange:
    request_event: Event
    response_event: Event
    """The recorded llm.response event (its payload is served verbatim)."""
    raw_request: PayloadText = b""
    """The request payload's JSON text as the golden journal has it ("" when unknown)."""
    raw_response: PayloadText = b""
    """The same for the response payload."""
    body_span: tuple[int, int] | None = None
    """Where the response body's JSON text is in `raw_response`, once the replay transport
    has found it (the exchange is shared by every replay of its journal, see `_Seed`)."""
    answer_headers: dict[str, str] | None = None
    """The headers the replay transport answers with, once it has made them (the same)."""
    _body_start: int | None = None
    """Where `raw_body` starts in `raw_request` (-1: nowhere), once looked for."""

    @property
    def raw_body(self) -> memoryview | DiskSlice:
        """The request body's JSON text: the payload's last field, as the writer orders them.

        A view into the payload's text, not a copy of it (a body may be many megabytes); the
        file's bytes, not read yet, for a line left in it."""
        raw, payload = self.raw_request, self.request_event.payload
        if not raw or payload.model_extra:
            return memoryview(b"")
        start = self._body_start
        if start is None:
            find = raw.find if isinstance(raw, bytes) else payload.find
            start = self._body_start = find(b',"body":', find(b',"stream":'))
        if start == -1:
            return memoryview(b"")
        if isinstance(raw, DiskSlice):
            return raw.sub(start + 8, len(raw) - 1)
        return memoryview(raw)[start + 8 : -1]

    def sent_as_recorded(self, body: bytes) -> bool:
        """Whether an SDK sent this body byte for byte as the recorded request's."""
        raw_body = self.raw_body
        if isinstance(raw_body, DiskSlice):
            return bool(raw_body) and raw_body.same_as(body)
        # bytes.startswith compares with memcmp; `!=` on a memoryview goes byte by byte
        # (about as long as the SDK's whole call, for a 40 KB request).
        return bool(raw_body) and len(raw_body) == len(body) and body.startswith(raw_body)

    @property
    def seq(self) -> int:
        return self.request_event.seq

    @property
    def request(self) -> dict[str, Any]:
        return self.request_event.payload_dict()

    @property
    def response(self) -> dict[str, Any]:
        return self.response_event.payload_dict()


@dataclass(frozen=True, slots=True)
class _Seed:
    """What a stash starts from, sorted out of a journal's events: the stash copies each
    collection it consumes, so one seed serves every attempt replaying the journal."""

    inputs: tuple[Event, ...]
    snapshots: tuple[Event, ...]
    recorded_end: Event | None
    judge_responses: tuple[Event, ...]
    registered: tuple[Event, ...]
    llm: dict[str, tuple[RecordedExchange, ...]]
    tools: dict[str, tuple[Event, Event]]
    asks: dict[str, Event]
    golden: GoldenEvents
    """The whole journal's events, as its replays' writers look up the engine's own."""

    @classmethod
    def of(cls, journal: Journal, events: list[Event]) -> _Seed:
        """`events`: the journal's own, or the turns a prefix stash serves (the snapshots,
        the end, the judge's answers and the tools registered are the whole journal's)."""
        llm: dict[str, list[RecordedExchange]] = {}
        tools: dict[str, tuple[Event, Event]] = {}
        asks: dict[str, Event] = {}
        pending_llm: dict[str, Event] = {}
        calls: dict[str, Event] = {}
        raw_payloads = journal.raw_payloads
        # Payload attributes, not payload_dict(): dumping every recorded request body to a
        # dict would cost more than the replay itself.
        for event in events:
            kind, payload = event.type, event.payload
            if kind == "llm.request":
                pending_llm[payload.provider] = event
            elif kind == "llm.response":
                request = pending_llm.pop(payload.provider, None)
                if request is not None:
                    llm.setdefault(payload.provider, []).append(
                        RecordedExchange(
                            request,
                            event,
                            raw_payloads.get(request.seq) or _raw_text(request),
                            raw_payloads.get(event.seq) or _raw_text(event),
                        )
                    )
            elif kind == "tool.call":
                calls[payload.call_id] = event
            elif kind == "tool.result" and payload.call_id in calls:
                tools[payload.call_id] = (calls.pop(payload.call_id), event)
            elif kind == "io.ask.response":
                asks[payload.call_id] = event
        return cls(
            inputs=tuple(e for e in events if e.type == "io.input"),
            snapshots=tuple(journal.of_type("world.snapshot")),
            recorded_end=next(iter(journal.of_type("session.end")), None),
            judge_responses=tuple(journal.of_type("judge.response")),
            registered=tuple(journal.of_type("tool.register")),
            llm={provider: tuple(queue) for provider, queue in llm.items()},
            tools=tools,
            asks=asks,
            golden=GoldenEvents(journal.events),
        )


class ReplayStash:
    def __init__(
        self,
        journal: Journal,
        *,
        case: str,
        match: MatchLevel = "default",
        ignore: Sequence[re.Pattern[str]] = (),
        live_from: int | None = None,
    ) -> None:
        self.case = case
        self.match = match
        self.ignore = tuple(ignore)
        """Text a request carries that is not compared (case.yaml's `match_ignore`)."""
        self.live_from = live_from
        """--nodeval-from-turn N: only the turns before N are served, their requests never
        compared; None: the whole journal, every request compared."""
        self.serving = True
        """False once a prefix stash has handed over to the live attempt (`hand_over`)."""
        if live_from is None:
            # The whole journal: sorted out once per journal read, every attempt copies it
            # (the recorded events and exchanges are shared, only the queues are its own).
            seed = journal._replay_seed
            if seed is None:
                seed = journal._replay_seed = _Seed.of(journal, journal.events)
        else:
            seed = _Seed.of(journal, events_before_turn(journal, live_from))
        self.inputs: deque[Any] = deque(seed.inputs)
        self.snapshots = list(seed.snapshots)
        self.recorded_end = seed.recorded_end
        self.judge_responses = list(seed.judge_responses)
        self._registered = seed.registered
        self._llm: dict[str, deque[RecordedExchange]] = {p: deque(q) for p, q in seed.llm.items()}
        self._tools: dict[str, tuple[Event, Event]] = dict(seed.tools)
        self._asks: dict[str, Event] = dict(seed.asks)
        self.golden = seed.golden
        """The whole journal's events, for the writer of this replay (JournalWriter's
        `golden`); held while the stash lives, the journal cache finds a big journal again
        through them (case.directory.JournalCache) instead of reading a second copy."""
        self.stopped: ReplayDivergence | None = None
        self.golden_error: GoldenChanged | None = None
        """Set when the golden journal changed on disk under the replay (`golden_changed`)."""
        self.path = journal.directory / "events.jsonl"
        self._served_llm: dict[str, int] = {}
        """The seq of the last recorded response served per provider (named in a divergence)."""

    @cached_property
    def registered(self) -> list[dict[str, Any]]:
        """The recorded tool.register payloads: replay rebuilds outside services' tools from
        them (made when first asked: most replays have none to rebuild)."""
        return [e.payload_dict() for e in self._registered]

    # -- what the agent asks for -------------------------------------------------------

    def serve_llm(
        self,
        journal: JournalWriter,
        provider: str,
        request: dict[str, Any],
        *,
        owned: bool = False,
        text: str | None = None,
    ) -> dict[str, Any]:
        """Journal this request and the recorded response to it; return the response payload.

        A request equal to the recorded one is journaled as the recorded event (no copy, no
        second scan); one that differs (as the default match level allows) as it was sent,
        and one that diverges is journaled before the replay stops.
        """
        try:
            try:
                exchange = self._next_exchange(provider, request)
            except GoldenChanged as exc:
                self.golden_changed(exc)
        except ReplayStopped:
            journal.emit("llm.request", request, owned=owned, text=text)
            raise
        try:
            if _same_payload(exchange.request_event.payload, request):
                journal.emit_recorded(exchange.request_event, raw_payload=exchange.raw_request)
            else:
                journal.emit("llm.request", request, owned=owned, text=text)
            return journal.emit_recorded(
                exchange.response_event, raw_payload=exchange.raw_response
            ).payload_dict()
        except GoldenChanged as exc:
            self.golden_changed(exc)

    def serve_llm_exact(
        self, journal: JournalWriter, provider: str, api: str, method: str, path: str, body: bytes
    ) -> dict[str, Any] | None:
        """The fast path of `serve_llm`: a request whose body is byte for byte the recorded one.

        Nothing is parsed, copied or scanned: both events are journaled from the golden
        journal's own text. None when the bytes differ (or are unknown): parse and compare.
        """
        served = self.serve_exact(journal, provider, api, method, path, body)
        return None if served is None else served[0].payload_dict()

    def serve_exact(
        self, journal: JournalWriter, provider: str, api: str, method: str, path: str, body: bytes
    ) -> tuple[Event, PayloadText, RecordedExchange] | None:
        """`serve_llm_exact` for a caller that reads the response itself (the replay
        transport): the journaled llm.response event, its payload's JSON text as the golden
        journal has it (b"" when unknown), so the answer need not be parsed into a dict, and
        the recorded exchange (where the caller may keep what it found in that text)."""
        self._raise_if_stopped()
        queue = self._llm.get(provider)
        if not queue:
            return None
        head = queue[0]
        recorded = head.request_event.payload
        try:
            if (
                recorded.api != api
                or recorded.method != method
                or recorded.path != path
                or not head.sent_as_recorded(body)
            ):
                return None
            queue.popleft()
            self._served_llm[provider] = head.response_event.seq
            journal.emit_recorded(head.request_event, raw_payload=head.raw_request)
            served = journal.emit_recorded(head.response_event, raw_payload=head.raw_response)
        except GoldenChanged as exc:
            self.golden_changed(exc)
        # A writer with a stricter redactor journals (and so answers) its own redaction.
        verbatim = served.payload is head.response_event.payload
        return served, head.raw_response if verbatim else b"", head

    def _next_exchange(self, provider: str, request: dict[str, Any]) -> RecordedExchange:
        self._raise_if_stopped()
        queue = self._llm.get(provider)
        if not queue:
            self._stop(self._extra_call_message(provider, request))
        head = queue[0]
        if self.live_from is None and not self._same_request(head.request_event.payload, request):
            # Concurrent calls of an async agent may arrive in another order: serve an
            # exact match further on before calling it a divergence.
            for exchange in list(queue)[1:]:
                if exchange.request_event.payload.body == request.get("body"):
                    queue.remove(exchange)
                    self._served_llm[provider] = exchange.response_event.seq
                    return exchange
            self._stop(self._request_diff(head, request), seq=head.seq)
        queue.popleft()
        self._served_llm[provider] = head.response_event.seq
        return head

    def tool_result_event(self, tool: str, call_id: str, args: Any) -> Event:
        """The recorded tool.result event for this call (its payload is served verbatim)."""
        return self.tool_exchange(tool, call_id, args)[1]

    def tool_exchange(self, tool: str, call_id: str, args: Any) -> tuple[Event, Event]:
        """The recorded tool.call and tool.result events of this call, once the call is found
        equal to the recorded one."""
        self._raise_if_stopped()
        recorded = self._tools.pop(call_id, None)
        if recorded is None:
            known = (
                ", ".join(f"{c.payload.tool}({k})" for k, (c, _) in list(self._tools.items())[:5])
                or "none left"
            )
            self._stop(
                f"the agent called tool '{tool}' (call {call_id}) with {_short(args)}, "
                f"which the journal does not have (recorded calls still unused: {known})"
            )
        call, result = recorded
        expected = {"tool": call.payload.tool, "args": call.payload.args}
        actual = {"tool": tool, "args": args}
        if expected != actual:
            self._stop(
                f"at seq {call.seq} (tool.call {call_id}):\n" + _json_diff(expected, actual),
                seq=call.seq,
            )
        return call, result

    def ask_response(self, call_id: str, question: str) -> dict[str, Any]:
        self._raise_if_stopped()
        recorded = self._asks.pop(call_id, None)
        if recorded is None:
            self._stop(
                f"the agent asked the user {_short(question)} (call {call_id}), "
                "which the journal has no answer for"
            )
        return recorded.payload_dict()

    def next_input(self) -> Any | None:
        return self.inputs.popleft() if self.inputs else None

    def hand_over(self) -> None:
        """A prefix stash's turns are done: from now on the attempt's calls go live."""
        self.serving = False

    def leftovers(self) -> str | None:
        """What the recording did that this replay never asked for, if anything."""
        llm = sum(len(q) for q in self._llm.values())
        parts = []
        if llm:
            first = min((q[0] for q in self._llm.values() if q), key=lambda e: e.seq)
            parts.append(
                f"{llm} recorded LLM call(s) were never made (the first at seq {first.seq})"
            )
        if self._tools:
            parts.append(
                f"{len(self._tools)} recorded tool call(s) were never made "
                f"({', '.join(c.payload.tool for c, _ in self._tools.values())})"
            )
        if self.inputs:
            parts.append(f"{len(self.inputs)} recorded user input(s) were never consumed")
        return "; ".join(parts) or None

    def account_tool(self, call_id: str, tool: str) -> None:
        """A recorded tool call that ran again (a program's own tool, seen in its traffic):
        nothing to serve, but no longer missing. A call the recording never made is left to
        the model traffic to tell: the next request differs."""
        recorded = self._tools.get(call_id)
        if recorded is not None and recorded[0].payload.tool == tool:
            del self._tools[call_id]

    def check_complete(self) -> None:
        missing = self.leftovers()
        if missing:
            self._stop(f"the agent finished early: {missing}")

    # -- divergence ---------------------------------------------------------------------

    def stop(self, detail: str) -> NoReturn:
        """Stop the replay as diverged (e.g. the config enables a tool the journal never
        registered)."""
        self._stop(detail)

    def _same_request(self, recorded: Any, actual: dict[str, Any]) -> bool:
        """`recorded`: the journaled llm.request payload (a model; its body is plain JSON types)."""
        if recorded.path != actual.get("path") or recorded.method != actual.get("method"):
            return False
        expected, now = self._masked(recorded.body), self._masked(actual.get("body"))
        if self.match == "strict" or expected == now:
            return bool(expected == now)
        return bool(_matched_part(expected) == _matched_part(now))

    def _masked(self, body: Any) -> Any:
        return _masked(body, self.ignore) if self.ignore else body

    def _request_diff(self, head: RecordedExchange, request: dict[str, Any]) -> str:
        expected: Any = {k: head.request.get(k) for k in ("method", "path")}
        actual: Any = {k: request.get(k) for k in ("method", "path")}
        if expected == actual:
            expected = self._masked(head.request.get("body"))
            actual = self._masked(request.get("body"))
            if self.match == "default":
                expected, actual = _matched_part(expected), _matched_part(actual)
        return (
            f"at seq {head.seq} (llm.request to '{head.request.get('provider')}') "
            f"the request differs from the recording:\n" + _json_diff(expected, actual)
        )

    def _extra_call_message(self, provider: str, request: dict[str, Any]) -> str:
        last = self._served_llm.get(provider)
        where = (
            f"after its last recorded response to '{provider}' (seq {last})"
            if last is not None
            else f"which has no call to '{provider}'"
        )
        return (
            f"the agent made an LLM call to '{provider}' that the journal does not have, {where} "
            "(recorded providers with calls left: "
            f"{', '.join(k for k, q in self._llm.items() if q) or 'none'}); "
            f"request body starts {_short(request.get('body'), 160)}"
        )

    def _stop(self, detail: str, seq: int | None = None) -> NoReturn:
        """`seq`: the recorded event the agent did otherwise than, when one is known."""
        if self.live_from is not None:
            self.stopped = ReplayDivergence(
                f"the replayed {replayed_turns(self.live_from)} of '{self.case}' went beyond its "
                f"journal ({self.path}): {detail}\nContinue from an earlier turn "
                f"(--nodeval-from-turn), or re-record the journal: nodeval record {self.case}",
                seq=seq,
            )
            raise ReplayStopped(self.stopped)
        self.stopped = ReplayDivergence(
            f"replay of '{self.case}' diverged from its journal ({self.path}): {detail}\n"
            f"If the change is intended, re-record the journal: nodeval record {self.case}",
            seq=seq,
        )
        raise ReplayStopped(self.stopped)

    def golden_changed(self, exc: GoldenChanged) -> NoReturn:
        """A golden line left in its file, which has changed since, stops the replay with that
        one line: as a plain error it would reach the SDK, which retries a connection error.
        The session raises it once the agent has stopped (`raise_if_golden_changed`): the
        attempt is an infrastructure error, not a divergence of the agent's."""
        self.golden_error = exc
        self.stopped = ReplayDivergence(str(exc))
        raise ReplayStopped(self.stopped) from None

    def raise_if_golden_changed(self) -> None:
        if self.golden_error is not None:
            raise self.golden_error

    def _raise_if_stopped(self) -> None:
        if self.stopped is not None:
            raise ReplayStopped(self.stopped)


def replayed_turns(turn: int) -> str:
    """What --nodeval-from-turn `turn` replays, in words: "turns 1-6", "turn 1", "no turn"."""
    return "no turn" if turn <= 1 else "turn 1" if turn == 2 else f"turns 1-{turn - 1}"


def user_turns(journal: Journal) -> int:
    """How many user turns (`io.input` events) a journal holds."""
    return len(journal.of_type("io.input"))


def events_before_turn(journal: Journal, turn: int) -> list[Event]:
    """The journal's events before its `turn`-th user input (1-based): the turns a
    --nodeval-from-turn attempt replays. Every event when the journal has fewer inputs."""
    inputs = journal.of_type("io.input")
    if turn > len(inputs):
        return list(journal.events)
    first_live = inputs[turn - 1].seq
    return [e for e in journal.events if e.seq < first_live]


def _raw_text(event: Event) -> PayloadText:
    """A golden journal's payload text (`RecordedPayload`), b"" for a payload read parsed."""
    payload = event.payload
    return payload.raw if isinstance(payload, RecordedPayload) else b""


def _same_payload(recorded: Any, actual: dict[str, Any]) -> bool:
    """Whether a journaled payload (a model) equals this payload dict, field for field."""
    if isinstance(recorded, RecordedPayload):
        recorded = recorded.parsed()  # dropped once compared
    fields = type(recorded).model_fields
    if recorded.model_extra or actual.keys() != fields.keys():
        return False
    return all(getattr(recorded, name) == actual[name] for name in fields)


IGNORED = "<ignored>"


def _masked(value: Any, patterns: tuple[re.Pattern[str], ...]) -> Any:
    """The value with every match of the patterns in its strings replaced by IGNORED."""
    if isinstance(value, str):
        for pattern in patterns:
            value = pattern.sub(IGNORED, value)
        return value
    if isinstance(value, dict):
        return {key: _masked(item, patterns) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item, patterns) for item in value]
    return value


def _matched_part(body: Any) -> Any:
    if not isinstance(body, dict):
        return body
    part = {k: body[k] for k in _MATCHED_KEYS if k in body}
    if "tools" in part and isinstance(part["tools"], list):
        part["tools"] = sorted(name for t in part["tools"] for name in _tool_names(t))
    return part


def _tool_names(tool: Any) -> list[str]:
    if not isinstance(tool, dict):
        return [str(tool)]
    # Gemini: one tool declares many functions
    if isinstance(tool.get("functionDeclarations"), list):
        return [
            str(d.get("name") if isinstance(d, dict) else d) for d in tool["functionDeclarations"]
        ]
    return [str(tool.get("name") or tool.get("function", {}).get("name"))]


def first_difference(expected: Any, actual: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first path (in document order) where two JSON values differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in list(expected) + [k for k in actual if k not in expected]:
            found = first_difference(
                expected.get(key, _MISSING), actual.get(key, _MISSING), f"{path}.{key}"
            )
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for index in range(max(len(expected), len(actual))):
            left = expected[index] if index < len(expected) else _MISSING
            right = actual[index] if index < len(actual) else _MISSING
            found = first_difference(left, right, f"{path}[{index}]")
            if found:
                return found
        return None
    return None if expected == actual else (path.lstrip(".") or "(whole value)", expected, actual)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _json_diff(expected: Any, actual: Any, context: int = 2, limit: int = 24) -> str:
    found = first_difference(expected, actual)
    head = ""
    if found:
        path, left, right = found
        head = f"  at {path}: recorded {_short(left)}, now {_short(right)}\n"
    left_lines = json.dumps(expected, indent=1, sort_keys=False, default=str).splitlines()
    right_lines = json.dumps(actual, indent=1, sort_keys=False, default=str).splitlines()
    diff = list(
        difflib.unified_diff(left_lines, right_lines, "recorded", "now", n=context, lineterm="")
    )
    if len(diff) > limit:
        diff = diff[:limit] + [f"... ({len(diff) - limit} more diff lines)"]
    return head + "\n".join("  " + line for line in diff)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value) if isinstance(value, (str, _Missing)) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
