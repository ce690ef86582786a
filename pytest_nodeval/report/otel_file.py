"""A finished run as OTLP JSON lines: `nodeval export-otel RUN_DIR --to FILE`.

The file is the OpenTelemetry Collector's file format: one `{"resourceSpans": [...]}` object a
line, here one line per attempt. The spans are made by the SDK (report/otel.py) and encoded by
the OTLP exporter's own protobuf encoder; the protobuf JSON mapping is then put in OTLP/JSON's
terms (trace and span ids as hex, enums as integers), as the OTLP specification asks.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .. import __version__
from ..errors import NodevalError
from ..journal.reader import read_journal
from .models import RunReport, load_report
from .otel import SCOPE, SEMCONV_VERSION, AttemptIds, AttemptTrace, emit


def provider_for(processor: SpanProcessor, ids: AttemptIds, run_id: str) -> TracerProvider:
    """A tracer provider whose spans say they come from nodeval's run `run_id`."""
    resource = Resource.create(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME") or "nodeval",
            "nodeval.run_id": run_id,
            "nodeval.version": __version__,
            "nodeval.semconv": SEMCONV_VERSION,
        }
    )
    provider = TracerProvider(resource=resource, id_generator=ids, shutdown_on_exit=False)
    provider.add_span_processor(processor)
    return provider


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """`{"resourceSpans": [...]}` for spans, as OTLP/JSON writes them."""
    document: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
    return document


def attempts_of_run(report: RunReport, run_dir: Path, content: bool) -> Iterator[AttemptTrace]:
    """Each attempt of the run that has an observed journal, with its events."""
    for case in report.cases:
        meta = case.meta()
        for record in case.attempts:
            if record.journal:
                journal = read_journal(run_dir / record.journal, warn=lambda message: None)
                yield AttemptTrace(record, meta, journal.events, report.run_id, content)


def export_run(run_dir: Path, target: Path, *, content: bool = False) -> tuple[int, int]:
    """Write the run's attempts to `target` as OTLP JSON lines: (attempts, spans) written."""
    import json

    from ..journal.writer import write_atomic

    report = load_report(run_dir)
    if not any(record.journal for case in report.cases for record in case.attempts):
        raise NodevalError(f"{run_dir}: no attempt of this run has a journal to export")
    exporter = InMemorySpanExporter()
    ids = AttemptIds()
    provider = provider_for(SimpleSpanProcessor(exporter), ids, report.run_id)
    tracer = provider.get_tracer(SCOPE, __version__)
    lines, spans = [], 0
    for attempt in attempts_of_run(report, run_dir, content):
        emit(tracer, ids, attempt)
        finished = exporter.get_finished_spans()
        exporter.clear()
        spans += len(finished)
        lines.append(json.dumps(otlp_json(finished), separators=(",", ":")))
    provider.shutdown()
    write_atomic(target, "".join(line + "\n" for line in lines))
    return len(lines), spans
