"""`nodeval export-otel` then `nodeval promote --from-otel`: traces into cases that replay green.

The traces are made by the real SDK from real runs of the seed scenarios; one is written
by hand in OpenInference's attribute names (Phoenix's own instrumentations), as a production
trace from another stack would be.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.cli import main
from pytest_nodeval.sampling.otlp_file import read_traces

REPO = Path(__file__).resolve().parents[2]
LIST_ARGS = '{"op": "list", "path": "reports"}'
SEEDS = ("hello-answer", "disk-usage", "multi-turn-refund", "ask-clarification")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The seed scenarios replayed once, exported with content: the file and case -> trace."""
    project = tmp_path_factory.mktemp("run")
    for seed in SEEDS:
        shutil.copytree(REPO / "scenarios" / seed, project / "scenarios" / seed)
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = scenarios\n")
    assert (
        pytest.main(
            [
                "-q",
                "-p",
                "no:cacheprovider",
                "--rootdir",
                str(project),
                "-c",
                str(project / "pytest.ini"),
                str(project / "scenarios"),
                f"--nodeval-report-dir={project / 'reports'}",
            ]
        )
        == 0
    )
    target = project / "run.jsonl"
    assert (
        main(["export-otel", str(project / "reports" / "latest"), "--to", str(target), "--content"])
        == 0
    )
    traces = {
        next(s for s in spans if not s.parent_id).attributes["nodeval.case.id"]: trace
        for trace, spans in read_traces(target).items()
    }
    return target, traces


@pytest.mark.parametrize("seed", SEEDS)
def test_an_exported_seed_scenario_promotes_into_a_case_that_replays_green(
    exported: tuple[Path, dict[str, str]],
    tmp_path: Path,
    seed: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target, traces = exported
    cases = tmp_path / "scenarios"
    cases.mkdir()
    code = main(
        [
            "promote",
            "--from-otel",
            str(target),
            "--trace",
            traces[seed],
            "--case-id",
            f"{seed}-otel",
            "--cases-dir",
            str(cases),
            "--owner",
            "qa",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "replay check: green in deterministic mode" in out
    case = cases / f"{seed}-otel"
    assert (case / "input" / "config.yaml").is_file()
    assert json.loads((case / "journal" / "header.json").read_text())["redaction"] == ["pii"]
    # And pytest replays it green, with no key and no network.
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = scenarios\n")
    assert (
        pytest.main(
            [
                "-q",
                "-p",
                "no:cacheprovider",
                "--rootdir",
                str(tmp_path),
                "-c",
                str(tmp_path / "pytest.ini"),
                str(cases),
                f"--nodeval-report-dir={tmp_path / 'reports'}",
            ]
        )
        == 0
    )


def _span(
    span_id: str,
    parent: str,
    name: str,
    start: int,
    attributes: dict[str, Any],
    trace: str = "ab" * 16,
) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": str(v)}

    return {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_000_000),
        "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()],
    }


def _write(path: Path, spans: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n")
    return path


def _openinference_trace() -> list[dict[str, Any]]:
    """An OpenAI agent that lists files, as OpenInference's instrumentations write it."""
    call = {
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You list files.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "What is in reports/?",
    }
    first = {
        "openinference.span.kind": "LLM",
        "llm.provider": "openai",
        "llm.model_name": "gpt-5-mini",
        "llm.token_count.prompt": 30,
        "llm.token_count.completion": 12,
        **call,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_a",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "file",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": LIST_ARGS,
    }
    second = {
        "openinference.span.kind": "LLM",
        "llm.provider": "openai",
        "llm.model_name": "gpt-5-mini",
        "llm.token_count.prompt": 50,
        "llm.token_count.completion": 9,
        **call,
        "llm.input_messages.2.message.role": "assistant",
        "llm.input_messages.2.message.tool_calls.0.tool_call.id": "call_a",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "file",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": LIST_ARGS,
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.3.message.tool_call_id": "call_a",
        "llm.input_messages.3.message.content": '{"entries": ["q3.txt"]}',
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "reports/ holds q3.txt.",
    }
    return [
        _span("a" * 16, "", "agent", 1_000, {"openinference.span.kind": "AGENT"}),
        _span("b" * 16, "a" * 16, "ChatCompletion", 2_000, first),
        _span(
            "c" * 16,
            "a" * 16,
            "file",
            3_000_000,
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "file",
                "input.value": '{"op": "list", "path": "reports"}',
                "output.value": '{"entries": ["q3.txt"]}',
            },
        ),
        _span("d" * 16, "a" * 16, "ChatCompletion", 5_000_000, second),
    ]


def test_an_openinference_trace_promotes_into_an_engine_case_that_replays_green(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _write(tmp_path / "phoenix.jsonl", _openinference_trace())
    cases = tmp_path / "scenarios"
    cases.mkdir()
    code = main(
        [
            "promote",
            "--from-otel",
            str(source),
            "--trace",
            "AB" * 16,
            "--case-id",
            "list-reports",
            "--cases-dir",
            str(cases),
            "--owner",
            "qa",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "replay check: green in deterministic mode" in out, out
    config = (cases / "list-reports" / "input" / "config.yaml").read_text()
    assert "name: openai" in config and "gpt-5-mini" in config and "- file" in config
    inputs = (cases / "list-reports" / "input" / "inputs.yaml").read_text()
    assert "What is in reports/?" in inputs


@pytest.mark.parametrize(
    ("lines", "trace", "message"),
    [
        (["not json"], "ab" * 16, "{file}:1: not an OTLP JSON object"),
        (
            [json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "1"}]}]}]})],
            "ab" * 16,
            '{file}:1: not an OTLP JSON object ({{"resourceSpans": [...]}}): '
            "resourceSpans.0.scopeSpans.0.spans.0.traceId: Field required",
        ),
        (None, "cd" * 16, "{file}: no trace " + "cd" * 16 + " in it (1 trace(s): " + "ab" * 16),
        (
            "orphan",
            "ab" * 16,
            "span 'ChatCompletion' ("
            + "b" * 16
            + ") names parent "
            + "9" * 16
            + ", which is not in trace "
            + "ab" * 16
            + ": the trace is incomplete",
        ),
        ("interleaved", "ab" * 16, "holds 2 interleaved sessions"),
        (
            "no-content",
            "ab" * 16,
            "span 'ChatCompletion' has no message content "
            "(gen_ai.input.messages, or OpenInference llm.input_messages.*): export with "
            "--nodeval-otel-content",
        ),
    ],
    ids=["not-json", "not-otlp", "unknown-trace", "orphan", "interleaved", "no-content"],
)
def test_bad_traces_are_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: Any, trace: str, message: str
) -> None:
    spans = _openinference_trace()
    if lines == "orphan":
        spans[1]["parentSpanId"] = "9" * 16
    elif lines == "interleaved":
        spans.append(_span("e" * 16, "", "agent", 4_000, {"openinference.span.kind": "AGENT"}))
    elif lines == "no-content":
        spans[1]["attributes"] = [
            a for a in spans[1]["attributes"] if not a["key"].startswith("llm.input_messages")
        ]
    source = tmp_path / "trace.jsonl"
    if isinstance(lines, list):
        source.write_text("\n".join(lines) + "\n")
    else:
        _write(source, spans)
    cases = tmp_path / "scenarios"
    cases.mkdir()
    code = main(
        [
            "promote",
            "--from-otel",
            str(source),
            "--trace",
            trace,
            "--case-id",
            "x",
            "--cases-dir",
            str(cases),
        ]
    )
    err = capsys.readouterr().err
    assert code == 4
    assert len(err.strip().splitlines()) == 1, err
    assert message.format(file=source) in err
    assert list(cases.iterdir()) == []


def test_export_otel_refuses_what_is_not_a_run_or_not_a_file_in_one_line(
    tmp_path: Path, exported: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = exported[0].parent / "reports" / "latest"
    assert main(["export-otel", str(tmp_path), "--to", str(tmp_path / "t.jsonl")]) == 4
    assert f"{tmp_path}: not a run directory (no report.json)" in capsys.readouterr().err
    assert main(["export-otel", str(run_dir), "--to", str(tmp_path)]) == 4
    assert f"--to: {tmp_path} is a directory; name the file to write" in capsys.readouterr().err
    missing = tmp_path / "no" / "t.jsonl"
    assert main(["export-otel", str(run_dir), "--to", str(missing)]) == 4
    assert f"--to: {missing.parent}: no such directory" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
