"""`nodeval promote --from-otel FILE --trace ID`: one traced session into a case directory.

The trace's `chat` spans (GenAI conventions, or OpenInference LLM spans) give the model
exchanges: their input and output messages become the journal's requests and responses, in
the API the spans name (`nodeval.api`, else the provider: Anthropic Messages, OpenAI Chat
Completions, or nodeval's mock). Its `execute_tool` spans give the tool calls and results, the
first user message the scripted input. The journal is written through the sampler's
redactor, then promoted as a captured sample is (sampling/promote.py): the same files, review
summary and replay check.

Where the engine can replay the session itself (a provider it has, builtin tools only), the
case gets an `input/config.yaml` (a mock provider gets the session's replies as its script);
otherwise it is a case for your own agent, as a sample of one is.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..agent.config import BUILTIN_TOOLS
from ..errors import NodevalError
from ..journal.events import JournalHeader, now_iso
from ..journal.redact import pii_redactor
from ..journal.writer import JournalWriter
from ..report.otel_messages import json_or_text
from .otlp_file import Span, json_attribute, read_traces
from .promote import Promoted, PromoteOptions, promote

_APIS = {
    "anthropic": "anthropic.messages",
    "openai": "openai.chat",
    "nodeval.mock": "mock",
}
"""The journal API of a trace's calls, by gen_ai.provider.name (OpenInference: llm.provider)."""
_ENGINE_PROVIDER = {"mock": "mock", "anthropic.messages": "anthropic", "openai.chat": "openai"}
_ENGINE_TOOLS = frozenset(BUILTIN_TOOLS) - {"web"}
"""Builtin tools a config.yaml may list bare; `web` also needs the hosts it may fetch, which a
trace does not say."""
_CONTENT_HINT = (
    "export with --nodeval-otel-content, or have your instrumentation capture message content"
)


def promote_trace(path: Path, trace_id: str, options: PromoteOptions) -> Promoted:
    """Promote trace `trace_id` of the OTLP JSON lines file `path` (see the module doc)."""
    spans = _one_trace(path, trace_id)
    session = Session.of(spans, path)
    with tempfile.TemporaryDirectory(prefix="nodeval-otel-") as scratch:
        sample = Path(scratch) / f"trace-{trace_id.lower()[:16]}"
        write_sample(session, sample)
        return promote(sample, options)


def _one_trace(path: Path, trace_id: str) -> list[Span]:
    traces = read_traces(path)
    wanted = trace_id.strip().lower()
    if wanted not in traces:
        known = ", ".join(sorted(traces)[:5]) + (" ..." if len(traces) > 5 else "")
        raise NodevalError(f"{path}: no trace {trace_id} in it ({len(traces)} trace(s): {known})")
    spans = traces[wanted]
    ids = {s.span_id for s in spans}
    for span in spans:
        if span.parent_id and span.parent_id not in ids:
            raise NodevalError(
                f"{span.where}: span '{span.name}' ({span.span_id}) names parent "
                f"{span.parent_id}, which is not in trace {wanted}: the trace is incomplete"
            )
    return sorted(spans, key=lambda s: (s.start_ns, s.end_ns))


# -- what the spans say ------------------------------------------------------------------------


@dataclass
class Exchange:
    """One model call: the conversation it was sent, what it answered, what it cost."""

    span: Span
    system: str
    messages: list[dict[str, Any]]
    """The engine's own message shape (agent/engine.py): user, assistant, tool."""
    reply_text: str
    reply_calls: list[dict[str, Any]]
    finish: str | None
    model: str
    input_tokens: int
    output_tokens: int


@dataclass
class Session:
    """The one agent session a trace holds."""

    api: str
    provider: str
    model: str
    exchanges: list[Exchange]
    tools: dict[str, Span]
    """execute_tool spans by call id."""
    tool_defs: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0

    @classmethod
    def of(cls, spans: list[Span], path: Path) -> Session:
        _refuse_interleaved(spans, path)
        # A call that failed answered nothing the agent saw: the session is the calls that did.
        chats = [s for s in spans if _kind(s) == "chat" and not s.error]
        if not chats:
            raise NodevalError(
                f"{path}: trace {spans[0].trace_id} has no chat span that answered "
                "(gen_ai.operation.name 'chat', or openinference.span.kind 'LLM'): "
                "no model exchange to replay"
            )
        api = _api_of(chats[0], path)
        other = next((s for s in chats if _api_of(s, path) != api), None)
        if other is not None:
            raise NodevalError(
                f"{other.where}: span '{other.name}' calls {_api_of(other, path)} where the "
                f"session's first call used {api}: a trace is promoted when its calls share one API"
            )
        tools = {
            str(s.attr("gen_ai.tool.call.id", "tool_call.id") or s.span_id): s
            for s in spans
            if _kind(s) == "tool"
        }
        exchanges = [_exchange(span, tools) for span in chats]
        return cls(
            api=api,
            provider=str(chats[0].attr("nodeval.provider") or _ENGINE_PROVIDER.get(api, api)),
            model=exchanges[0].model,
            exchanges=exchanges,
            tools=tools,
            tool_defs=_tool_definitions(chats[0]),
            duration_ms=(max(s.end_ns for s in spans) - min(s.start_ns for s in spans)) / 1e6,
        )


def _kind(span: Span) -> str | None:
    operation = span.attr("gen_ai.operation.name")
    kind = str(span.attr("openinference.span.kind") or "").upper()
    if operation in ("chat", "text_completion", "generate_content") or kind == "LLM":
        return "chat"
    if operation == "execute_tool" or kind == "TOOL":
        return "tool"
    if operation == "invoke_agent" or kind == "AGENT":
        return "agent"
    return None


def _refuse_interleaved(spans: list[Span], path: Path) -> None:
    roots = [s for s in spans if not s.parent_id]
    agents = [s for s in roots if _kind(s) == "agent"]
    conversations = {
        str(c) for s in spans if (c := s.attr("gen_ai.conversation.id", "session.id")) is not None
    }
    if len(agents) > 1 or len(conversations) > 1:
        seen = conversations or {s.span_id for s in agents}
        raise NodevalError(
            f"{path}: trace {spans[0].trace_id} holds {len(seen)} interleaved sessions "
            f"({', '.join(sorted(seen))}); promote one session's trace at a time"
        )


def _api_of(span: Span, path: Path) -> str:
    named = span.attr("nodeval.api")
    provider = str(span.attr("gen_ai.provider.name", "gen_ai.system", "llm.provider") or "")
    api = str(named) if named in _ENGINE_PROVIDER else _APIS.get(provider.lower())
    if api is None:
        raise NodevalError(
            f"{span.where}: span '{span.name}': provider {provider or '(none)'!r} "
            f"(gen_ai.provider.name): a trace is promoted for {', '.join(sorted(_APIS))} calls"
        )
    return api


def _exchange(span: Span, tools: dict[str, Span]) -> Exchange:
    inputs = json_attribute(span, "gen_ai.input.messages")
    outputs = json_attribute(span, "gen_ai.output.messages")
    system = json_attribute(span, "gen_ai.system_instructions") or []
    if inputs is None:
        inputs, outputs, system = _openinference_messages(span)
    if inputs is None:
        raise NodevalError(
            f"{span.where}: span '{span.name}' has no message content (gen_ai.input.messages, "
            f"or OpenInference llm.input_messages.*): {_CONTENT_HINT}"
        )
    messages = _engine_messages(_list(inputs), tools)
    reply = next((m for m in _list(outputs) if isinstance(m, dict)), {})
    calls = [p for p in _list(reply.get("parts")) if _is(p, "tool_call")]
    return Exchange(
        span=span,
        system="".join(_texts(_list(system))),
        messages=messages,
        reply_text="".join(_texts(_list(reply.get("parts")))),
        reply_calls=[
            {"id": str(c.get("id") or ""), "name": str(c.get("name")), "args": c.get("arguments")}
            for c in calls
        ],
        finish=reply.get("finish_reason"),
        model=str(span.attr("gen_ai.request.model", "llm.model_name") or "unknown"),
        input_tokens=int(span.attr("gen_ai.usage.input_tokens", "llm.token_count.prompt") or 0),
        output_tokens=int(
            span.attr("gen_ai.usage.output_tokens", "llm.token_count.completion") or 0
        ),
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is(part: Any, kind: str) -> bool:
    return isinstance(part, dict) and part.get("type") == kind


def _texts(parts: list[Any]) -> Iterator[str]:
    for part in parts:
        if _is(part, "text"):
            yield str(part.get("content", ""))


def _engine_messages(messages: list[Any], tools: dict[str, Span]) -> list[dict[str, Any]]:
    """GenAI messages in the engine's shape; a tool result gets its call's name and error."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in (m for m in messages if isinstance(m, dict)):
        parts = _list(message.get("parts"))
        role = message.get("role")
        if role == "assistant":
            calls = [
                {"id": str(p.get("id")), "name": str(p.get("name")), "args": p.get("arguments")}
                for p in parts
                if _is(p, "tool_call")
            ]
            names |= {c["id"]: c["name"] for c in calls}
            out.append({"role": "assistant", "text": "".join(_texts(parts)), "tool_calls": calls})
        elif role == "tool":
            for part in (p for p in parts if _is(p, "tool_call_response")):
                call_id = str(part.get("id"))
                response = part.get("response")
                content = response if isinstance(response, str) else json.dumps(response)
                span = tools.get(call_id)
                out.append(
                    {
                        "role": "tool",
                        "call_id": call_id,
                        "name": names.get(
                            call_id, str(span.attr("gen_ai.tool.name")) if span else "unknown"
                        ),
                        "content": content,
                        "is_error": bool(span and span.error),
                    }
                )
        elif role == "user":
            out.append({"role": "user", "text": "".join(_texts(parts))})
    return out


def _openinference_messages(span: Span) -> tuple[Any, Any, Any]:
    """(input, output, system) in the GenAI shape from OpenInference's flattened attributes."""
    inputs = _indexed(span.attributes, "llm.input_messages")
    if not inputs:
        return None, None, None
    system = [
        {"type": "text", "content": m.get("message.content", "")}
        for m in inputs
        if m.get("message.role") == "system"
    ]
    converted = [_oi_message(m) for m in inputs if m.get("message.role") != "system"]
    outputs = [_oi_message(m) for m in _indexed(span.attributes, "llm.output_messages")]
    return converted, outputs, system


def _oi_message(message: dict[str, Any]) -> dict[str, Any]:
    role = str(message.get("message.role", "user"))
    text = message.get("message.content")
    if role == "tool":
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.get("message.tool_call_id"),
                    "response": text,
                }
            ],
        }
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    for call in _indexed(message, "message.tool_calls"):
        arguments = json_or_text(call.get("tool_call.function.arguments"))
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("tool_call.id"),
                "name": call.get("tool_call.function.name"),
                "arguments": arguments,
            }
        )
    return {"role": "assistant" if role in ("assistant", "model") else role, "parts": parts}


def _indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`prefix.0.rest` ... flattened keys as a list of {rest: value}."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if key.startswith(prefix + "."):
            index, _, rest = key[len(prefix) + 1 :].partition(".")
            if index.isdigit() and rest:
                found.setdefault(int(index), {})[rest] = value
    return [found[i] for i in sorted(found)]


def _tool_definitions(span: Span) -> list[dict[str, Any]]:
    defined = json_attribute(span, "gen_ai.tool.definitions")
    return [d for d in _list(defined) if isinstance(d, dict) and d.get("name")]


# -- the sample it becomes ---------------------------------------------------------------------


def write_sample(session: Session, sample: Path) -> None:
    """The session as a captured sample: `journal/` and, when the engine can run it,
    `input/config.yaml` (what sampling/promote.py makes a case of)."""
    from .. import __version__
    from ..journal.events import EngineInfo, new_session_id

    shutil.rmtree(sample, ignore_errors=True)
    session_id = new_session_id()
    header = JournalHeader(
        session_id=session_id,
        created_at=now_iso(),
        engine=EngineInfo(version=__version__),
        source="sample",
        redaction=["pii"],
    )
    writer = JournalWriter(sample / "journal", header, redactor=pii_redactor)
    try:
        _write_events(writer, session, session_id, __version__)
    finally:
        writer.close()
    config = engine_config(session)
    if config is not None:
        (sample / "input").mkdir(parents=True, exist_ok=True)
        (sample / "input" / "config.yaml").write_text(
            yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=100),
            encoding="utf-8",
        )


def _write_events(writer: JournalWriter, session: Session, session_id: str, version: str) -> None:
    emit = writer.emit
    emit(
        "session.start",
        {"engine": "pytest-nodeval", "version": version, "session_id": session_id, "mode": "live"},
        turn=0,
    )
    for tool in _registered(session):
        emit("tool.register", tool, turn=0)
    users_seen = 0
    totals = {"input_tokens": 0, "output_tokens": 0}
    for turn, exchange in enumerate(session.exchanges, 1):
        users = [m for m in exchange.messages if m["role"] == "user"]
        for message in users[users_seen:]:
            emit("io.input", {"text": message["text"]}, turn=turn)
        users_seen = max(users_seen, len(users))
        emit("agent.turn.start", {}, turn=turn)
        emit("llm.request", _request(session, exchange), turn=turn)
        emit("llm.response", _response(session, exchange, turn), turn=turn)
        totals["input_tokens"] += exchange.input_tokens
        totals["output_tokens"] += exchange.output_tokens
        for call in exchange.reply_calls:
            emit(
                "tool.call",
                {"tool": call["name"], "call_id": call["id"], "args": call["args"]},
                turn=turn,
            )
            result = _result(session, call, turn)
            if call["name"] == "ask_user":  # the engine's question to the user, and the answer
                _emit_ask(writer, call, result, turn)
            emit("tool.result", result, turn=turn)
        stop = "tool_use" if exchange.reply_calls else "end_turn"
        emit("agent.turn.end", {"stop_reason": stop}, turn=turn)
        if not exchange.reply_calls:
            emit("io.output", {"text": exchange.reply_text}, turn=turn)
    emit(
        "session.end",
        {
            "status": "ok",
            "duration_ms": round(session.duration_ms, 3),
            "usage": totals,
            "turns": len(session.exchanges),
        },
        turn=len(session.exchanges),
    )


def _emit_ask(
    writer: JournalWriter, call: dict[str, Any], result: dict[str, Any], turn: int
) -> None:
    args, answer = call["args"], result["result"]
    question = args.get("question", "") if isinstance(args, dict) else ""
    text = answer.get("answer", "") if isinstance(answer, dict) else str(answer or "")
    writer.emit("io.ask", {"call_id": call["id"], "question": str(question)}, turn=turn)
    writer.emit("io.ask.response", {"call_id": call["id"], "text": str(text)}, turn=turn)


def _registered(session: Session) -> list[dict[str, Any]]:
    if session.tool_defs:
        return [
            {
                "tool": str(d["name"]),
                "description": str(d.get("description") or ""),
                "parameters": d.get("parameters") or {},
            }
            for d in session.tool_defs
        ]
    names = dict.fromkeys(c["name"] for e in session.exchanges for c in e.reply_calls)
    return [{"tool": name, "description": "", "parameters": {}} for name in names]


def _request(session: Session, exchange: Exchange) -> dict[str, Any]:
    from ..agent.providers import to_anthropic, to_openai_chat

    tools = _registered(session)
    body: dict[str, Any]
    if session.api == "mock":
        path = "/mock"
        body = {
            "model": exchange.model,
            "system": exchange.system,
            "messages": exchange.messages,
            "tools": [t["tool"] for t in tools],
        }
    elif session.api == "anthropic.messages":
        path = "/v1/messages"
        body = {
            "max_tokens": 1024,
            "messages": to_anthropic(exchange.messages),
            "model": exchange.model,
        }
        if exchange.system:
            body["system"] = exchange.system
        if tools:
            body["tools"] = [
                {
                    "name": t["tool"],
                    "description": t["description"],
                    "input_schema": t["parameters"],
                }
                for t in tools
            ]
    else:
        path = "/v1/chat/completions"
        body = {
            "model": exchange.model,
            "messages": to_openai_chat(exchange.system, exchange.messages),
        }
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["tool"],
                        "description": t["description"],
                        "parameters": t["parameters"],
                    },
                }
                for t in tools
            ]
    return {
        "provider": session.provider,
        "api": session.api,
        "method": "POST",
        "path": path,
        "stream": False,
        "body": body,
    }


def _response(session: Session, exchange: Exchange, turn: int) -> dict[str, Any]:
    usage = {"input_tokens": exchange.input_tokens, "output_tokens": exchange.output_tokens}
    calls = exchange.reply_calls
    stop = exchange.finish or ("tool_use" if calls else "end_turn")
    body: dict[str, Any]
    if session.api == "mock":
        body = {"text": exchange.reply_text, "tool_calls": calls, "stop_reason": stop}
    elif session.api == "anthropic.messages":
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": exchange.reply_text}] if exchange.reply_text else []
        )
        blocks += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
            for c in calls
        ]
        body = {
            "id": f"msg_otel_{turn}",
            "type": "message",
            "role": "assistant",
            "model": exchange.model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
    else:
        message: dict[str, Any] = {"role": "assistant", "content": exchange.reply_text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
                }
                for c in calls
            ]
        body = {
            "id": f"chatcmpl-otel-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": exchange.model,
            "choices": [{"index": 0, "message": message, "finish_reason": stop}],
            "usage": {
                "prompt_tokens": exchange.input_tokens,
                "completion_tokens": exchange.output_tokens,
                "total_tokens": exchange.input_tokens + exchange.output_tokens,
            },
        }
    latency = (exchange.span.end_ns - exchange.span.start_ns) / 1e6
    return {
        "provider": session.provider,
        "status": 200,
        "body": body,
        "usage": usage,
        "model": exchange.model,
        "latency_ms": round(latency, 3),
    }


def _result(session: Session, call: dict[str, Any], turn: int) -> dict[str, Any]:
    """A tool call's result: from its execute_tool span, else from the next request's
    tool message (what the agent was told)."""
    span = session.tools.get(call["id"])
    told = _told(session, call["id"])
    ok = not (span.error if span is not None else bool(told and told["is_error"]))
    result: Any = None
    if span is not None and span.attr("gen_ai.tool.call.result", "output.value") is not None:
        result = json_or_text(span.attr("gen_ai.tool.call.result", "output.value"))
    elif told is not None:
        result = json_or_text(told["content"])
    if span is None and told is None:
        raise NodevalError(
            f"{session.exchanges[0].span.where}: the trace has no result of tool call "
            f"{call['id']} ({call['name']}) at turn {turn}: neither an execute_tool span nor a "
            f"later request says what it returned ({_CONTENT_HINT})"
        )
    latency = (span.end_ns - span.start_ns) / 1e6 if span is not None else 0.0
    error = None if ok else str(result.get("error") if isinstance(result, dict) else result)
    return {
        "tool": call["name"],
        "call_id": call["id"],
        "ok": ok,
        "result": result if ok else None,
        "error": error,
        "latency_ms": round(latency, 3),
    }


def _told(session: Session, call_id: str) -> dict[str, Any] | None:
    for exchange in session.exchanges:
        for message in exchange.messages:
            if message["role"] == "tool" and message["call_id"] == call_id:
                return message
    return None


def engine_config(session: Session) -> dict[str, Any] | None:
    """input/config.yaml for the reference engine, or None when it cannot run this session
    (a tool it does not have): the case is then for your own agent."""
    names = [t["tool"] for t in _registered(session)]
    if any(name not in _ENGINE_TOOLS for name in names):
        return None
    provider: dict[str, Any] = {"name": _ENGINE_PROVIDER[session.api], "model": session.model}
    if session.api == "mock":
        provider["script"] = [_mock_step(e) for e in session.exchanges]
    config: dict[str, Any] = {"providers": [provider]}
    if session.exchanges[0].system:
        config["system_prompt"] = session.exchanges[0].system
    config["tools"] = names
    config["limits"] = {"max_turns": len(session.exchanges) + 2}
    return config


def _mock_step(exchange: Exchange) -> dict[str, Any]:
    step: dict[str, Any] = {}
    if exchange.reply_text:
        step["text"] = exchange.reply_text
    if exchange.reply_calls:
        step["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in exchange.reply_calls]
    return step or {"text": ""}
