"""Every attempt lands in exactly one place: passed, failed, diverged, infra error, not run
or skipped (issue 14). Each test here failed on the main of 2026-12-01."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_nodeval.report.models import RunReport

from ..conftest import write_case

ANSWER = [{"text": "Hello there."}]


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json((project.path / "reports" / "latest" / "report.json").read_bytes())


# -- own agents: a divergence fails the test ------------------------------------------------

OWN_AGENT = """
import pytest
from pytest_nodeval import tool

@tool
def lookup(order_id: str) -> str:
    return "shipped"

def agent(ctx):
    for text in ctx.inputs():
        ctx.output(lookup(ORDER))

ORDER = {order!r}

@pytest.mark.nodeval_case("orders")
def test_only_runs(nodeval_attempt):
    nodeval_attempt.run(agent)

@pytest.mark.nodeval_case("orders")
def test_runs_then_expects(nodeval_attempt):
    from pytest_nodeval import expect
    observed = nodeval_attempt.run(agent)
    expect(observed).tool_called("lookup", times=1)

@pytest.mark.nodeval_case("orders")
def test_swallows_what_run_raises(nodeval_attempt):
    try:
        nodeval_attempt.run(agent)
    except BaseException:
        pass
"""


def _own_agent_case(project: pytest.Pytester) -> Path:
    case_dir = project.path / "scenarios" / "orders"
    (case_dir / "input").mkdir(parents=True)
    (case_dir / "case.yaml").write_text("id: orders\n")
    (case_dir / "input" / "inputs.yaml").write_text(yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["where?"]}}))
    (project.path / "scenarios" / "test_orders.py").write_text(OWN_AGENT.format(order="A-1"))
    recorded = project.runpytest("scenarios/test_orders.py::test_only_runs", "--nodeval-mode", "record")
    recorded.assert_outcomes(passed=1)
    assert (case_dir / "journal" / "events.jsonl").is_file()
    return case_dir


def test_an_own_agent_that_diverges_fails_whatever_the_test_does_after_run(nodeval_project: pytest.Pytester) -> None:
    _own_agent_case(nodeval_project)
    (nodeval_project.path / "scenarios" / "test_orders.py").write_text(OWN_AGENT.format(order="B-2"))
    result = nodeval_project.runpytest("scenarios/test_orders.py")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*replay of *orders* diverged from its journal: at seq 4 (tool.call lookup-1):*", "*at args.order_id: recorded *A-1*, now *B-2*", "*re-record the journal: nodeval record *orders*"])
    assert "observed 0" not in result.stdout.str()
    attempts = _report(nodeval_project).case("orders").attempts
    assert {(a.outcome, a.status) for a in attempts} == {("failed", "divergence")}
