"""A real trace viewer: Arize Phoenix on loopback, one server for this module's tests.

First the fixture on its own, without the plugin's exporter: spans the OpenTelemetry SDK
sends over OTLP/HTTP come back through Phoenix's client, in one trace, linked, with their
attributes, span kinds and events. Spans without an `openinference.project.name` resource
attribute land in the project "default"; with one, in the project it names.

Then the seed scenarios' run: `pytest -n 2 --nodeval-otel-endpoint=<phoenix>` replays them and
every worker sends its attempts. The spans are read back through Phoenix's own client: one
trace per attempt, the span kinds Phoenix shows, and token counts equal to report.json's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from pytest_nodeval.report.models import RunReport
from tests.conftest import PYTEST_ADDOPTS
from tests.integration.phoenix import PhoenixServer

REPO = Path(__file__).resolve().parents[2]
PROJECT = "nodeval-seeds"


def test_a_run_shows_up_in_phoenix_as_one_trace_per_attempt(
    phoenix: PhoenixServer, tmp_path: Path
) -> None:
    shutil.copytree(REPO / "scenarios", tmp_path / "scenarios")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
    env["PYTEST_ADDOPTS"] = PYTEST_ADDOPTS + " -p no:cacheprovider"
    # The OpenTelemetry SDK's own variable names the Phoenix project (a resource attribute).
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"openinference.project.name={PROJECT}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "pr",
            "--repeat",
            "2",
            "-n",
            "2",
            "scenarios",
            f"--nodeval-otel-endpoint={phoenix.base_url}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "OpenTelemetry export" not in done.stdout
    report = RunReport.model_validate_json(
        (tmp_path / "reports" / "latest" / "report.json").read_bytes()
    )
    attempts = [a for case in report.cases for a in case.attempts]
    expected_spans = sum(1 + a.llm_calls + a.tool_calls for a in attempts)
    spans = phoenix.spans(PROJECT, at_least=expected_spans, timeout=60)
    assert len(spans) == expected_spans
    traces: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        traces[span["context"]["trace_id"]].append(span)
    assert len(traces) == len(attempts) == 22
    by_attempt = {(a.case_id, a.repeat): a for a in attempts}
    for trace in traces.values():
        (root,) = [s for s in trace if s["parent_id"] is None]
        assert root["span_kind"] == "AGENT" and root["status_code"] == "OK"
        attributes = root["attributes"]
        record = by_attempt.pop((attributes["nodeval.case.id"], attributes["nodeval.repeat"]))
        kinds = sorted(s["span_kind"] for s in trace if s is not root)
        assert kinds == sorted(["LLM"] * record.llm_calls + ["TOOL"] * record.tool_calls)
        llm = [s["attributes"] for s in trace if s["span_kind"] == "LLM"]
        assert sum(a.get("gen_ai.usage.input_tokens", 0) for a in llm) == record.input_tokens
        assert sum(a.get("gen_ai.usage.output_tokens", 0) for a in llm) == record.output_tokens
        assert attributes["gen_ai.usage.input_tokens"] == record.input_tokens
        assert all(s["parent_id"] == root["context"]["span_id"] for s in trace if s is not root)
    assert by_attempt == {}


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
    tracer = provider.get_tracer("tests.integration.test_otel_phoenix")
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
