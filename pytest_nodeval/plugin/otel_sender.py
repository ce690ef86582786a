"""The process's OTLP/HTTP exporter of attempts (plugin/otel.py starts it; the SDK loads here)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from ..report.otel import SCOPE, AttemptIds, AttemptTrace, emit
from ..report.otel_file import provider_for

if TYPE_CHECKING:
    from ..journal.events import Event
    from ..report.models import AttemptRecord, CaseMeta


class OtelSender:
    """One process's exporter: attempts in, traces out, on a thread of its own."""

    def __init__(self, url: str, *, content: bool, run_id: str) -> None:
        self.url, self.content, self.run_id = url, content, run_id
        # The exporter's own log lines would repeat per batch; the one note says it instead.
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
        self._exporter = _Watched(OTLPSpanExporter(endpoint=url, timeout=5), url)
        self._ids = AttemptIds()
        processor = BatchSpanProcessor(self._exporter, schedule_delay_millis=500)
        self._provider = provider_for(processor, self._ids, run_id)
        self._tracer = self._provider.get_tracer(SCOPE)
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="nodeval-otel", daemon=True)
        self._thread.start()

    def send(self, record: AttemptRecord, meta: CaseMeta, events: Sequence[Event]) -> None:
        """Hand one finished attempt over; its trace is made and sent in the background."""
        self._queue.put((record, meta, list(events)))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._exporter.failed:
                continue
            record, meta, events = item
            try:
                emit(
                    self._tracer,
                    self._ids,
                    AttemptTrace(record, meta, events, self.run_id, self.content),
                )
            except Exception as exc:  # a trace that cannot be made must not end the run
                self._exporter.fail(f"the trace of {record.nodeid} could not be made: {exc!r}")

    def close(self) -> str | None:
        """Send what is queued and stop; why the export failed, if it did."""
        self._queue.put(None)
        self._thread.join()
        self._provider.shutdown()
        return self._exporter.problem


class _Watched(SpanExporter):
    """The OTLP exporter, remembering its first failure and not trying again after it."""

    def __init__(self, exporter: SpanExporter, url: str) -> None:
        self._exporter, self._url = exporter, url
        self.problem: str | None = None

    @property
    def failed(self) -> bool:
        return self.problem is not None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.failed:
            return SpanExportResult.FAILURE
        try:
            result = self._exporter.export(spans)
        except Exception as exc:  # a broken exporter must not end the run
            result, why = SpanExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        else:
            why = "no collector answered, or it refused the spans"
        if result is not SpanExportResult.SUCCESS:
            self.fail(why)
        return result

    def fail(self, why: str) -> None:
        self.problem = self.problem or (
            f"OpenTelemetry export to {self._url} failed ({why}); the attempts after it "
            "were not sent. The run's results are not affected."
        )

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))
