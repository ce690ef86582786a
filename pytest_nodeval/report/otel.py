"""One attempt as one OpenTelemetry trace in the GenAI semantic conventions.

The attempt is an `invoke_agent` span; each model call a `chat` span and each tool call an
`execute_tool` span under it; user turns, judge verdicts and every assertion's and rubric's
result are events of the attempt's span (`gen_ai.evaluation.result` for the last two).
Message content (the messages, tool arguments and results, user text) is written only when
asked for; it is the journal's, so it is redacted as the journal is.

Spans are made through the OpenTelemetry SDK's own tracer (`emit`), which the live exporter
(plugin/otel.py) and `nodeval export-otel` (report/otel_file.py) hand to their processors.
This module imports the SDK: only code that exports imports it (the plugin does so only when
an endpoint is set).

Times: live and record attempts keep the times their events were journaled at. A replay
runs in a blink, so its spans are laid out from the recording's own latencies instead, one
after another from the session's start, and the attempt lasts as long as the recorded session.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Span, Tracer

from .otel_messages import finish_reasons, request_messages, response_messages

if TYPE_CHECKING:
    from ..journal.events import Event
    from .models import AttemptRecord, CaseMeta

SEMCONV_VERSION: Final = "1.38.0"
"""The OpenTelemetry semantic conventions for generative AI followed here."""
SCOPE: Final = "pytest_nodeval"
_PROVIDERS: Final = {
    "mock": "nodeval.mock",
    "anthropic.messages": "anthropic",
    "openai.chat": "openai",
    "openai.responses": "openai",
    "gemini.generate_content": "gcp.gemini",
}
"""gen_ai.provider.name by the journal's `api` of a call (the conventions' well-known names)."""


@dataclass(frozen=True, slots=True)
class AttemptTrace:
    """What one attempt's trace is made of: its record, its case and its observed events."""

    record: AttemptRecord
    meta: CaseMeta
    events: Sequence[Event]
    run_id: str
    content: bool = False
    """Write message content, tool arguments and results (`--nodeval-otel-content`)."""


class AttemptIds(IdGenerator):
    """The SDK's id generator, with each attempt's trace id set to its journal's session id.

    A journal's session id is 128 random bits, as a trace id is: the same attempt gets the
    same trace id however often it is exported, and its trace can be found from its journal.
    """

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._next_trace: int | None = None
        self.lock = threading.Lock()
        """Held while one attempt's root span starts with its trace id."""

    def generate_span_id(self) -> int:
        return self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        trace, self._next_trace = self._next_trace, None
        return trace if trace else self._random.generate_trace_id()

    def use_next(self, trace_id: int | None) -> None:
        self._next_trace = trace_id


def trace_id_of(events: Sequence[Event]) -> int | None:
    """The session id of the attempt's journal, as a trace id (None when it is not 128 bits)."""
    start = next((e for e in events if e.type == "session.start"), None)
    session = str(start.payload.session_id) if start is not None else ""
    try:
        return int(session, 16) if len(session) == 32 else None
    except ValueError:
        return None


def emit(tracer: Tracer, ids: AttemptIds, attempt: AttemptTrace) -> None:
    """Make the attempt's spans on `tracer` (their processors export them as they end)."""
    clock = _Clock.of(attempt.events)
    with ids.lock:
        ids.use_next(trace_id_of(attempt.events))
        root = tracer.start_span(
            f"invoke_agent {attempt.meta.id}",
            kind=trace.SpanKind.INTERNAL,
            attributes=_attempt_attributes(attempt),
            start_time=clock.start,
        )
    context = trace.set_span_in_context(root)
    for kind, start, end, attributes, failed in _children(attempt, clock):
        span = tracer.start_span(
            _span_name(kind, attributes),
            context=context,
            kind=trace.SpanKind.CLIENT if kind == "chat" else trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start,
        )
        if failed:
            span.set_status(trace.Status(trace.StatusCode.ERROR, failed))
        span.end(end_time=end)
    _add_attempt_events(root, attempt, clock)
    _set_attempt_status(root, attempt.record)
    root.end(end_time=max(clock.end, clock.now))


def _span_name(kind: str, attributes: dict[str, Any]) -> str:
    if kind == "chat":
        return f"chat {attributes.get('gen_ai.request.model', '')}".rstrip()
    return f"execute_tool {attributes.get('gen_ai.tool.name', '')}".rstrip()


# -- the clock ---------------------------------------------------------------------------------


class _Clock:
    """Where each span of an attempt starts and ends, in nanoseconds since the epoch."""

    def __init__(self, start: int, duration_ns: int, real: bool) -> None:
        self.start, self.now, self.real = start, start, real
        self.end = start + duration_ns

    @classmethod
    def of(cls, events: Sequence[Event]) -> _Clock:
        first = events[0] if events else None
        start = _ns(first.ts) if first is not None else 0
        mode = first.get("mode") if first is not None and first.type == "session.start" else None
        ends = [e for e in events if e.type == "session.end"]
        duration = float(ends[-1].payload.duration_ms) if ends else 0.0
        return cls(start, int(duration * 1e6), real=mode in ("live", "record"))

    def span(self, begun: Event, ended: Event | None, latency_ms: float) -> tuple[int, int]:
        """A call's start and end: as journaled (live), else laid after the one before."""
        if self.real:
            start = _ns(begun.ts)
            end = _ns(ended.ts) if ended is not None else start + int(latency_ms * 1e6)
        else:
            start = self.now
            end = start + int(latency_ms * 1e6)
        self.now = max(self.now, end)
        return start, end

    def at(self, event: Event) -> int:
        return _ns(event.ts) if self.real else self.now


def _ns(timestamp: str) -> int:
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


# -- the spans ---------------------------------------------------------------------------------

_Child = tuple[str, int, int, dict[str, Any], str | None]
"""(kind, start, end, attributes, error description or None)."""


def _children(attempt: AttemptTrace, clock: _Clock) -> Iterator[_Child]:
    events = attempt.events
    tools = _tool_definitions(events) if attempt.content else None
    calls: dict[str, Event] = {}
    request: Event | None = None
    for event in events:
        if event.type == "llm.request":
            request = event
        elif event.type == "llm.response" and request is not None:
            start, end = clock.span(request, event, float(event.payload.latency_ms or 0.0))
            yield _chat(request, event, start, end, attempt.content, tools)
            request = None
        elif event.type == "tool.call":
            calls[str(event.payload.call_id)] = event
        elif event.type == "tool.result":
            call = calls.pop(str(event.payload.call_id), None)
            start, end = clock.span(call or event, event, float(event.payload.latency_ms or 0.0))
            yield _tool(call, event, start, end, attempt.content)


def _chat(
    request: Event, response: Event, start: int, end: int, content: bool, tools: str | None
) -> _Child:
    asked, answered = request.payload, response.payload
    api = str(asked.api)
    body = asked.body
    model = body.get("model") if isinstance(body, dict) else None
    if model is None and api.startswith("gemini"):  # Gemini names the model in the path
        model = str(asked.path).rpartition("/models/")[2].partition(":")[0] or None
    output = response_messages(api, answered.body, answered.sse)
    usage = answered.usage
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": _PROVIDERS.get(api, api),
        "nodeval.provider": str(asked.provider),
        "nodeval.api": api,
        "nodeval.seq": request.seq,
        "openinference.span.kind": "LLM",
    }
    if model:
        attributes["gen_ai.request.model"] = attributes["llm.model_name"] = str(model)
    answered_model = answered.model or _response_model(answered.body) or model
    if answered_model:
        attributes["gen_ai.response.model"] = str(answered_model)
    if usage is not None:
        attributes |= {
            "gen_ai.usage.input_tokens": int(usage.input_tokens),
            "gen_ai.usage.output_tokens": int(usage.output_tokens),
            "llm.token_count.prompt": int(usage.input_tokens),
            "llm.token_count.completion": int(usage.output_tokens),
            "llm.token_count.total": int(usage.input_tokens) + int(usage.output_tokens),
        }
    reasons = finish_reasons(output)
    if reasons:
        attributes["gen_ai.response.finish_reasons"] = reasons
    if content:
        system, messages = request_messages(api, body)
        attributes["gen_ai.input.messages"] = _json(messages)
        attributes["gen_ai.output.messages"] = _json(output)
        if system:
            attributes["gen_ai.system_instructions"] = _json(system)
        if tools:
            attributes["gen_ai.tool.definitions"] = tools
    failed = answered.error or (f"HTTP {answered.status}" if answered.status >= 400 else None)
    if failed:
        attributes["error.type"] = str(failed).partition(":")[0]
    return "chat", start, end, attributes, failed


def _response_model(body: Any) -> str | None:
    if isinstance(body, dict):
        model = body.get("model") or body.get("modelVersion")
        return str(model) if model else None
    return None


def _tool(call: Event | None, result: Event, start: int, end: int, content: bool) -> _Child:
    done = result.payload
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": str(done.tool),
        "gen_ai.tool.call.id": str(done.call_id),
        "gen_ai.tool.type": "function",
        "nodeval.seq": (call or result).seq,
        "openinference.span.kind": "TOOL",
        "tool.name": str(done.tool),
    }
    if content:
        if call is not None:
            attributes["gen_ai.tool.call.arguments"] = _json(call.payload.args)
        attributes["gen_ai.tool.call.result"] = _json(
            done.result if done.ok else {"error": done.error}
        )
    failed = None if done.ok else str(done.error or "the tool failed")
    if failed:
        attributes["error.type"] = "tool_error"
    return "execute_tool", start, end, attributes, failed


def _tool_definitions(events: Sequence[Event]) -> str | None:
    tools = [
        {
            "type": "function",
            "name": str(e.payload.tool),
            "description": str(e.payload.description),
            "parameters": e.payload.parameters,
        }
        for e in events
        if e.type == "tool.register"
    ]
    return _json(tools) if tools else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# -- the attempt's span ------------------------------------------------------------------------


def verdict_of(record: AttemptRecord) -> str:
    """passed, failed, diverged, infrastructure_error, error, skipped or not_run."""
    if record.divergence:
        return "diverged"
    if record.outcome == "error" and record.infra_error:
        return "infrastructure_error"
    return str(record.outcome)


def _attempt_attributes(attempt: AttemptTrace) -> dict[str, Any]:
    record, meta = attempt.record, attempt.meta
    start = next((e for e in attempt.events if e.type == "session.start"), None)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": meta.id,
        "gen_ai.usage.input_tokens": record.input_tokens,
        "gen_ai.usage.output_tokens": record.output_tokens,
        "openinference.span.kind": "AGENT",
        "nodeval.run_id": attempt.run_id,
        "nodeval.case.id": meta.id,
        "nodeval.case.name": meta.name,
        "nodeval.repeat": record.repeat,
        "nodeval.nodeid": record.nodeid,
        "nodeval.outcome": verdict_of(record),
        "nodeval.llm_calls": record.llm_calls,
        "nodeval.tool_calls": record.tool_calls,
        "nodeval.turns": record.turns,
    }
    if start is not None:
        attributes["gen_ai.conversation.id"] = str(start.payload.session_id)
        attributes["nodeval.mode"] = str(start.payload.mode)
    optional = {
        "nodeval.status": record.status,
        "nodeval.reason": record.reason,
        "nodeval.cost_usd": record.cost_usd,
        "nodeval.total_cost_usd": record.total_cost_usd,
        "nodeval.live_from_turn": record.live_from_turn,
        "nodeval.divergence_seq": record.divergence_seq,
        "nodeval.world_backend": record.world_backend,
    }
    attributes |= {key: value for key, value in optional.items() if value is not None}
    if meta.tags:
        attributes["nodeval.case.tags"] = list(meta.tags)
    return attributes


def _add_attempt_events(root: Span, attempt: AttemptTrace, clock: _Clock) -> None:
    for event in attempt.events:
        if event.type == "io.input":
            detail = {"gen_ai.user.text": str(event.payload.text)} if attempt.content else {}
            root.add_event(
                "nodeval.user_turn", {"nodeval.turn": event.turn, **detail}, clock.at(event)
            )
        elif event.type == "judge.response":
            root.add_event(
                "nodeval.judge",
                {
                    "nodeval.judge": str(event.payload.judge),
                    "nodeval.criterion": str(event.payload.criterion),
                    "nodeval.verdict": str(event.payload.verdict),
                },
                clock.at(event),
            )
    at = max(clock.end, clock.now)
    for result in attempt.record.assertions:
        root.add_event("gen_ai.evaluation.result", _evaluation(result), at)
    for criterion, verdict in attempt.record.judged.items():
        graded: dict[str, Any] = {
            "gen_ai.evaluation.name": criterion,
            "gen_ai.evaluation.score.label": verdict,
            "nodeval.evaluation.kind": "judge",
        }
        if verdict in ("pass", "fail"):
            graded["gen_ai.evaluation.score.value"] = 1.0 if verdict == "pass" else 0.0
        root.add_event("gen_ai.evaluation.result", graded, at)


def _evaluation(result: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": str(result.kind),
        "gen_ai.evaluation.score.label": str(result.status),
        "nodeval.evaluation.kind": "assertion",
        "nodeval.assertion.description": str(result.description),
    }
    if result.status != "skipped":
        attributes["gen_ai.evaluation.score.value"] = 1.0 if result.status == "passed" else 0.0
    if result.message:
        attributes["gen_ai.evaluation.explanation"] = str(result.message)
    return attributes


def _set_attempt_status(root: Span, record: AttemptRecord) -> None:
    verdict = verdict_of(record)
    if verdict == "passed":
        root.set_status(trace.Status(trace.StatusCode.OK))
    elif verdict not in ("skipped", "not_run"):
        root.set_status(trace.Status(trace.StatusCode.ERROR, record.reason or verdict))
        root.set_attribute("error.type", verdict)
