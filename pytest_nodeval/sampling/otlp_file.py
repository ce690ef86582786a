"""Traces read from OTLP JSON lines, as a Collector, Phoenix or `nodeval export-otel` writes them.

Each line is one `{"resourceSpans": [...]}` object (ExportTraceServiceRequest in OTLP/JSON).
Every problem is one error naming the file and line: a line that is not JSON, not that shape,
or a span without its ids.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import NodevalError


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _KeyValue(_Loose):
    key: str
    value: dict[str, Any] = Field(default_factory=dict)


class _Event(_Loose):
    name: str = ""
    timeUnixNano: int | str = 0
    attributes: list[_KeyValue] = Field(default_factory=list)


class _Span(_Loose):
    traceId: str
    spanId: str
    parentSpanId: str = ""
    name: str = ""
    kind: int | str = 0
    startTimeUnixNano: int | str = 0
    endTimeUnixNano: int | str = 0
    attributes: list[_KeyValue] = Field(default_factory=list)
    events: list[_Event] = Field(default_factory=list)
    status: dict[str, Any] = Field(default_factory=dict)


class _ScopeSpans(_Loose):
    spans: list[_Span] = Field(default_factory=list)


class _ResourceSpans(_Loose):
    scopeSpans: list[_ScopeSpans] = Field(default_factory=list)


class _Document(_Loose):
    resourceSpans: list[_ResourceSpans]


@dataclass(frozen=True)
class Span:
    """One span, its attribute values decoded to Python values."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: bool = False
    where: str = ""
    """The file and line the span was read from."""

    def attr(self, *names: str) -> Any:
        """The first of these attributes the span has (GenAI names first, then OpenInference)."""
        return next((self.attributes[n] for n in names if n in self.attributes), None)


def read_traces(path: Path) -> dict[str, list[Span]]:
    """Every trace in an OTLP JSON lines file: its spans by trace id (lower-case hex)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise NodevalError(f"{path}: no such file (an OTLP JSON lines file)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NodevalError(f"{path}: cannot read it: {exc}") from None
    traces: dict[str, list[Span]] = {}
    for number, line in enumerate(lines, 1):
        if line.strip():
            for span in _spans_of(line, f"{path}:{number}"):
                traces.setdefault(span.trace_id, []).append(span)
    if not traces:
        raise NodevalError(f"{path}: no span in it (an OTLP JSON lines file, one object a line)")
    return traces


def _spans_of(line: str, where: str) -> list[Span]:
    try:
        document = _Document.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        place = ".".join(str(p) for p in first["loc"])
        raise NodevalError(
            f'{where}: not an OTLP JSON object ({{"resourceSpans": [...]}}): '
            f"{place + ': ' if place else ''}{first['msg']}"
        ) from None
    return [
        _span(raw, where)
        for resource in document.resourceSpans
        for scope in resource.scopeSpans
        for raw in scope.spans
    ]


def _span(raw: _Span, where: str) -> Span:
    return Span(
        trace_id=_hex_id(raw.traceId, 32, "traceId", where),
        span_id=_hex_id(raw.spanId, 16, "spanId", where),
        parent_id=_hex_id(raw.parentSpanId, 16, "parentSpanId", where) if raw.parentSpanId else "",
        name=raw.name,
        start_ns=int(raw.startTimeUnixNano),
        end_ns=int(raw.endTimeUnixNano),
        attributes=_attributes(raw.attributes),
        events=[(e.name, _attributes(e.attributes)) for e in raw.events],
        error=raw.status.get("code") in (2, "STATUS_CODE_ERROR"),
        where=where,
    )


def _hex_id(value: str, digits: int, name: str, where: str) -> str:
    """An id as OTLP/JSON writes it (hex); base64, as protobuf's own JSON mapping writes it,
    is read too."""
    text = value.strip().lower()
    if len(text) == digits and all(c in "0123456789abcdef" for c in text):
        return text
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) * 2 == digits:
        return decoded.hex()
    raise NodevalError(f"{where}: {name} {value!r} is not a {digits}-digit hex id")


def _attributes(pairs: list[_KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: dict[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        pairs = (value["kvlistValue"] or {}).get("values", [])
        return {p.get("key"): _value(p.get("value") or {}) for p in pairs}
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def json_attribute(span: Span, *names: str) -> Any:
    """An attribute that holds JSON text (GenAI message lists), parsed; None when absent."""
    value = span.attr(*names)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise NodevalError(
                f"{span.where}: span '{span.name}': {names[0]} is not JSON text"
            ) from None
    return value
