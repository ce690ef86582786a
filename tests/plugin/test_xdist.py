"""The same results with and without pytest-xdist, and nothing lost when a worker dies."""

from __future__ import annotations

from typing import Any

import pytest
import xdist  # noqa: F401  (the pytester runs below use -n)

from pytest_nodeval.report.models import RunReport

from ..conftest import write_case

VOLATILE_RUN = {"run_id", "started_at", "finished_at", "duration_s", "environment"}
VOLATILE_ATTEMPT = {"wall_ms", "worker"}


def _stable(report: RunReport) -> dict[str, Any]:
    data = report.model_dump(mode="json", exclude=VOLATILE_RUN)
    data["summary"].pop("duration_s")
    for case in data["cases"]:
        for attempt in case["attempts"]:
            for key in VOLATILE_ATTEMPT:
                attempt.pop(key)
    return data


def _run(project: pytest.Pytester, *args: str) -> RunReport:
    project.runpytest(*args)
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


def test_n2_and_n0_write_the_same_report(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "answer",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    write_case(
        root,
        "shell",
        script=[{"tool_calls": [{"name": "shell", "args": {"command": "echo 1"}}]}, {"text": "1"}],
        inputs=["count"],
        assertions=[{"kind": "tool_called", "tool": "shell"}],
    )
    write_case(
        root,
        "wrong",
        script=[{"text": "No."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "yes"}],
    )
    serial = _run(nodeval_project, "--repeat", "2", "-p", "no:randomly")
    parallel = _run(nodeval_project, "--repeat", "2", "-n", "2")
    assert serial.totals.attempts == 6
    assert {a.worker for c in parallel.cases for a in c.attempts} == {"gw0", "gw1"}
    assert _stable(serial) == _stable(parallel)


CRASH = """
import os
import pytest

@pytest.mark.nodeval_case("answer")
def test_crash(nodeval_run, request):
    if request.node.callspec.params["nodeval_case"].repeat == 2:
        os._exit(1)   # the worker dies in the middle of this attempt
"""


def test_a_worker_killed_mid_attempt_is_counted_not_lost(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "answer", script=[{"text": "Hello."}], inputs=["hi"], assertions=[])
    (root / "test_crash.py").write_text(CRASH)
    result = nodeval_project.runpytest("scenarios/test_crash.py", "--repeat", "3", "-n", "2")
    assert result.ret == 7, (
        "a crashed worker is the infrastructure's: its own exit status, not the agent's 1"
    )
    report = RunReport.model_validate_json(
        (nodeval_project.path / "reports" / "latest" / "report.json").read_bytes()
    )
    case = report.case("answer")
    assert len(case.attempts) == 3
    crashed = [a for a in case.attempts if a.repeat == 2]
    assert crashed[0].outcome == "error" and crashed[0].infra_error
    assert "crashed" in (crashed[0].reason or "")
    assert case.stats.infra_errors == 1 and case.stats.passed == 2
    assert report.totals.infra_errors == 1
