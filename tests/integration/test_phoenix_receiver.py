"""The Phoenix fixture on its own, without the plugin's exporter: spans the OpenTelemetry SDK
sends it over OTLP/HTTP come back through Phoenix's client, in one trace, linked, with their
attributes, span kinds and events.

Spans without an `openinference.project.name` resource attribute land in the project
"default"; with one, in the project it names (the second half of the test).
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.integration.phoenix import PhoenixServer

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "probe"}
CHAT: dict[str, str | int] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "mock-1",
    "gen_ai.usage.input_tokens": 7,
    "gen_ai.usage.output_tokens": 3,
}
CHOICE: dict[str, str | int] = {"index": 0, "finish_reason": "stop"}


def _send(phoenix: PhoenixServer, resource: dict[str, str], root: str) -> None:
    """A parent span and its child, with GenAI attributes and one event, flushed to Phoenix."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create(resource))
    exporter = OTLPSpanExporter(endpoint=phoenix.otlp_traces_url, timeout=10)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.integration.test_phoenix_receiver")
    with (
        tracer.start_as_current_span(root, attributes=AGENT),
        tracer.start_as_current_span("chat mock-1", attributes=CHAT) as child,
    ):
        child.add_event("gen_ai.choice", CHOICE)
    provider.shutdown()  # SimpleSpanProcessor sent each span as it ended; this waits for all


def _only(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    named = [span for span in spans if span["name"] == name]
    assert len(named) == 1, [span["name"] for span in spans]
    return named[0]


def test_spans_sent_over_otlp_http_come_back_through_the_phoenix_client(
    phoenix: PhoenixServer,
) -> None:
    root = f"attempt {uuid.uuid4().hex}"  # this test's own spans, whatever else is stored
    _send(phoenix, {"service.name": "pytest-nodeval-tests"}, root)

    spans = phoenix.spans(at_least=2)
    parent = _only(spans, root)
    child = _only(spans, "chat mock-1")
    assert child["context"]["trace_id"] == parent["context"]["trace_id"]
    assert child["parent_id"] == parent["context"]["span_id"]
    assert parent["parent_id"] is None
    # Flat, under the keys sent (Phoenix adds the llm.* attributes it derives from them).
    assert child["attributes"].items() >= CHAT.items()
    assert child["attributes"]["llm.token_count.prompt"] == 7
    # Phoenix derives its span kinds from gen_ai.operation.name.
    assert (parent["span_kind"], child["span_kind"]) == ("AGENT", "LLM")
    [event] = child["events"]
    assert (event["name"], event["attributes"]) == ("gen_ai.choice", CHOICE)

    _send(phoenix, {"openinference.project.name": "elsewhere"}, root)
    elsewhere = phoenix.spans("elsewhere", at_least=2)
    assert sorted(span["name"] for span in elsewhere) == sorted([root, "chat mock-1"])
    assert len(phoenix.spans()) == len(spans)  # nothing more in "default"
