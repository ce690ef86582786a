"""The baseline gate inside pytest: regression exit code, unchanged reruns, bad baselines,
blessing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_nodeval.report.baseline import EXIT_GATE_FAILED
from pytest_nodeval.report.models import RunReport

from ..conftest import write_case

# Fails the attempts whose repeat number is listed in FAILING (a file the test rewrites).
FLAKY = """
import json, pathlib, pytest

FAILING = json.loads((pathlib.Path(__file__).parent / "failing.json").read_text())

@pytest.mark.nodeval_case("refunds")
def test_refunds(nodeval_run, request):
    repeat = request.node.callspec.params["nodeval_case"].repeat
    assert repeat not in FAILING, f"attempt {repeat} gave the wrong refund"
"""


@pytest.fixture
def project(nodeval_project: pytest.Pytester) -> pytest.Pytester:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "refunds",
        script=[{"text": "Refunded."}],
        inputs=["refund"],
        assertions=[],
        case={"min_pass_rate": 0.4},
    )
    (root / "test_refunds.py").write_text(FLAKY)
    (root / "failing.json").write_text("[]")
    return nodeval_project


def _run(project: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, RunReport]:
    result = project.runpytest("scenarios/test_refunds.py", "--repeat", "10", *args)
    report = RunReport.model_validate_json(
        (project.path / "reports/latest/report.json").read_bytes()
    )
    return result, report


def _bless(project: pytest.Pytester) -> Path:
    _run(project, "--nodeval-update-baseline")
    baseline = project.path / "reports" / "baseline.json"
    assert baseline.is_file()
    return baseline


def test_a_real_regression_fails_with_the_gate_exit_code_and_names_the_case(
    project: pytest.Pytester,
) -> None:
    _bless(project)  # 10/10
    # Now 4/10, tolerated (>= 0.4)
    (project.path / "scenarios" / "failing.json").write_text("[1, 2, 3, 4, 5, 6]")
    result, report = _run(project, "--nodeval-baseline=reports/baseline.json")
    assert result.ret == EXIT_GATE_FAILED
    result.stdout.fnmatch_lines(
        ["nodeval gate: FAIL (breached: *scenario_regression*)", "*refunds*"]
    )
    assert report.exit_status == EXIT_GATE_FAILED and report.gate is not None
    assert "scenario_regression" in report.gate["breached"]
    moved = {c["case_id"]: c for c in report.gate["cases"]}
    assert moved["refunds"]["pass_rate"]["delta"] == pytest.approx(-0.6)


def test_an_unchanged_rerun_passes_the_gate(project: pytest.Pytester) -> None:
    _bless(project)
    result, report = _run(project, "--nodeval-baseline=reports/baseline.json")
    assert result.ret == 0
    assert (
        report.gate is not None and report.gate["breached"] == [] and report.gate["verdict"] == "OK"
    )


def test_a_missing_baseline_is_an_error_naming_it_before_anything_runs(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("--nodeval-baseline=reports/nope.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --nodeval-baseline: *reports/nope.json: no such report or run directory*"]
    )
    assert (
        "passed" not in result.stdout.str() and not (project.path / "reports" / "latest").exists()
    )


def test_a_corrupt_baseline_is_an_error_naming_it(project: pytest.Pytester) -> None:
    bad = project.path / "reports" / "bad.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"schema_version": "1", "run_id": 3')
    result = project.runpytest("--nodeval-baseline=reports/bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*reports/bad.json: not a valid report.json (schema_version 1)*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_new_and_missing_cases_are_listed(project: pytest.Pytester) -> None:
    baseline = _bless(project)
    data = json.loads(baseline.read_text())
    data["cases"][0]["id"] = "retired-case"
    for attempt in data["cases"][0]["attempts"]:
        attempt["case_id"] = "retired-case"
    baseline.write_text(json.dumps(data))
    result, report = _run(project, "--nodeval-baseline=reports/baseline.json")
    assert report.gate is not None
    assert report.gate["new_cases"] == ["refunds"] and report.gate["missing_cases"] == [
        "retired-case"
    ]
    result.stdout.fnmatch_lines(["*new cases (1): refunds*", "*missing cases (1): retired-case*"])


def test_an_interrupted_run_is_never_blessed(project: pytest.Pytester) -> None:
    (project.path / "scenarios" / "conftest.py").write_text(
        "import pytest\n\ndef pytest_runtest_call(item):\n"
        "    if item.callspec.params['nodeval_case'].repeat == 3:\n"
        "        pytest.exit('stopped by the operator')\n"
    )
    result = project.runpytest(
        "scenarios/test_refunds.py", "--repeat", "10", "--nodeval-update-baseline"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert not (project.path / "reports" / "baseline.json").exists()
    result.stdout.fnmatch_lines(
        ["*--nodeval-update-baseline: *refusing to bless it as the baseline*"]
    )


def test_the_command_line_compares_and_blesses(project: pytest.Pytester) -> None:
    _run(project)
    run_dir = (project.path / "reports" / "latest").resolve()
    nodeval = [sys.executable, "-m", "pytest_nodeval.cli"]
    saved = subprocess.run(
        [*nodeval, "baseline", "--save", str(run_dir), "--to", "base.json"],
        cwd=project.path,
        capture_output=True,
        text=True,
    )
    assert saved.returncode == 0, saved.stderr
    compared = subprocess.run(
        [*nodeval, "baseline", "--against", "base.json", "--current", str(run_dir)],
        cwd=project.path,
        capture_output=True,
        text=True,
    )
    assert compared.returncode == 0 and "nodeval gate: OK" in compared.stdout
    assert json.loads((run_dir / "diff.json").read_text())["verdict"] == "OK"
    listing = subprocess.run(
        [*nodeval, "baseline", "--against", "reports"],
        cwd=project.path,
        capture_output=True,
        text=True,
    )
    assert (
        listing.returncode == 4
        and "holds" in listing.stderr
        and "name one of them" in listing.stderr
    )


def test_history_keeps_every_run(project: pytest.Pytester) -> None:
    _run(project)
    (project.path / "scenarios" / "failing.json").write_text("[1]")
    _run(project)
    from pytest_nodeval.report.history import case_trend

    points = case_trend(project.path / "reports" / "history.sqlite", "refunds")
    assert [(p.passed, p.attempts) for p in points] == [(10, 10), (9, 10)]
