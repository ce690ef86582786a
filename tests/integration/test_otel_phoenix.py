"""The seed scenarios' run shows up in a real trace viewer: Arize Phoenix, on loopback.

`pytest -n 2 --nodeval-otel-endpoint=<phoenix>` replays the seed scenarios; every worker
sends its attempts. The spans are read back through Phoenix's own client: one trace per
attempt, the span kinds Phoenix shows, and token counts equal to report.json's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
