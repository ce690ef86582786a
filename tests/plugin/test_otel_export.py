"""--nodeval-otel-endpoint: one trace per attempt, sent by the real OTLP exporter as runs go.

The receiver (tests/otlp_receiver.py) decodes what arrives with OpenTelemetry's own protobuf
messages; the test against a real trace viewer is tests/integration/test_otel_phoenix.py.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import xdist  # noqa: F401  (the runs below use -n)

from pytest_nodeval.report.models import RunReport
from pytest_nodeval.sampling.otlp_file import Span

from ..conftest import write_case
from ..otlp_receiver import otlp_receiver

SECRET = "sk-ant-api03-" + "x" * 40


def _cases(root: Path) -> None:
    write_case(
        root,
        "shell",
        script=[{"tool_calls": [{"name": "shell", "args": {"command": "echo 1"}}]}, {"text": "1"}],
        inputs=[f"count, my key is {SECRET}"],
        assertions=[{"kind": "tool_called", "tool": "shell"}],
    )
    write_case(
        root,
        "wrong",
        script=[{"text": "No."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "yes"}],
    )


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


def _root(spans: list[Span]) -> Span:
    (root,) = [s for s in spans if not s.parent_id]
    return root


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_each_attempt_is_one_trace_whose_tokens_match_the_report(
    nodeval_project: pytest.Pytester, tmp_path: Path, workers: list[str]
) -> None:
    _cases(nodeval_project.path / "scenarios")
    with otlp_receiver() as receiver:
        result = nodeval_project.runpytest(
            "--repeat", "2", f"--nodeval-otel-endpoint={receiver.url}", *workers
        )
    result.assert_outcomes(passed=2, failed=2)
    assert set(receiver.paths) == {"/v1/traces"}
    traces = receiver.traces(tmp_path)
    report = _report(nodeval_project)
    attempts = {(a.case_id, a.repeat): a for c in report.cases for a in c.attempts}
    assert len(traces) == len(attempts) == 4
    for trace_id, spans in traces.items():
        root = _root(spans)
        key = (root.attributes["nodeval.case.id"], root.attributes["nodeval.repeat"])
        record = attempts.pop(key)
        journal = nodeval_project.path / "reports" / "latest" / str(record.journal)
        session = json.loads((journal / "header.json").read_text())["session_id"]
        assert trace_id == session  # the trace is found from its journal, and back
        assert root.name == f"invoke_agent {key[0]}"
        assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert root.attributes["nodeval.outcome"] == record.outcome
        assert root.error == (record.outcome != "passed")
        chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
        tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
        assert len(chats) == record.llm_calls and len(tools) == record.tool_calls
        assert all(s.parent_id == root.span_id for s in chats + tools)
        assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == record.input_tokens
        assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats) == (
            record.output_tokens
        )
        evaluations = [e for e in root.events if e[0] == "gen_ai.evaluation.result"]
        assert [e[1]["gen_ai.evaluation.score.label"] for e in evaluations] == [
            a.status for a in record.assertions
        ]
        # No content unless asked for.
        assert not any("gen_ai.input.messages" in s.attributes for s in chats)
    assert attempts == {}


def test_content_is_sent_only_when_asked_and_redacted_as_the_journal_is(
    nodeval_project: pytest.Pytester, tmp_path: Path
) -> None:
    _cases(nodeval_project.path / "scenarios")
    with otlp_receiver() as receiver:
        result = nodeval_project.runpytest(
            f"--nodeval-otel-endpoint={receiver.url}", "--nodeval-otel-content", "-k", "shell"
        )
    result.assert_outcomes(passed=1)
    (spans,) = receiver.traces(tmp_path).values()
    chat = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat")
    messages = json.loads(chat.attributes["gen_ai.input.messages"])
    assert (
        messages[0]["role"] == "user" and "count, my key is" in messages[0]["parts"][0]["content"]
    )
    tool = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"command": "echo 1"}
    assert SECRET not in "".join(receiver.lines)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_collector_that_is_down_costs_one_note_and_no_result(
    nodeval_project: pytest.Pytester, workers: list[str]
) -> None:
    _cases(nodeval_project.path / "scenarios")
    url = f"http://127.0.0.1:{_closed_port()}"
    result = nodeval_project.runpytest("--repeat", "2", f"--nodeval-otel-endpoint={url}", *workers)
    result.assert_outcomes(passed=2, failed=2)
    notes = [line for line in result.outlines if "OpenTelemetry export" in line]
    assert notes == [
        f"nodeval: OpenTelemetry export to {url}/v1/traces failed (no collector answered, or "
        "it refused the spans); the attempts after it were not sent. The run's results are "
        "not affected."
    ]
    assert _report(nodeval_project).totals.attempts == 4


def test_the_environment_names_the_collector_and_a_bad_url_is_a_usage_error(
    nodeval_project: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cases(nodeval_project.path / "scenarios")
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        nodeval_project.runpytest("-k", "wrong").assert_outcomes(failed=1)
    assert len(receiver.traces(tmp_path)) == 1
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    result = nodeval_project.runpytest("--nodeval-otel-endpoint=localhost:4318")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--nodeval-otel-endpoint='localhost:4318': not an OTLP/HTTP URL; give one such as "
            "http://localhost:4318*"
        ]
    )
