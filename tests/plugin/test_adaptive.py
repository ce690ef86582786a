"""Adaptive repeats in a pytest run: decided cases skip their remaining repeats, with and
without -n.

Live runs against the keyless mock provider: a baseline of 10 repeats per case, then a
run with --nodeval-adaptive where one case is unchanged and one now fails every attempt.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import xdist  # noqa: F401  (the pytester runs below use -n)

from pytest_nodeval.report.models import RunReport

from ..conftest import PROJECT_INI, write_case

LIVE = ("--nodeval-mode", "live", "--nodeval-world", "local", "--repeat", "10", "-p", "no:randomly")
BASELINE = "--nodeval-baseline=reports/baseline.json"
HELLO = [{"kind": "output_contains", "text": "hello"}]


@pytest.fixture
def project(nodeval_project: pytest.Pytester) -> pytest.Pytester:
    root = nodeval_project.path / "scenarios"
    for case_id in ("steady", "broken"):
        write_case(
            root,
            case_id,
            script=[{"text": "Hello."}],
            inputs=["hi"],
            assertions=HELLO,
            record=False,
        )
    result = nodeval_project.runpytest(*LIVE, "--nodeval-update-baseline")
    assert result.ret == 0, result.stdout.str()
    baseline = RunReport.model_validate_json(
        (nodeval_project.path / "reports" / "baseline.json").read_bytes()
    )
    assert [c.stats.passed for c in baseline.cases] == [10, 10]
    assert baseline.adaptive is None, "a run that becomes the baseline runs every repeat"
    # "broken" now fails every attempt: its output no longer says what the assertion wants.
    (root / "broken" / "assertions.yaml").write_text(
        json.dumps([{"kind": "output_contains", "text": "goodbye"}])
    )
    return nodeval_project


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


def _check_adaptive_outcome(project: pytest.Pytester, result: pytest.RunResult) -> RunReport:
    report = _report(project)
    steady, broken = report.case("steady"), report.case("broken")
    assert steady.adaptive is not None and broken.adaptive is not None
    # The unchanged case is decided at the first look; the rest of its repeats are skipped.
    assert (steady.adaptive.repeats, steady.adaptive.skipped, steady.adaptive.stop) == (
        3,
        7,
        "no regression",
    )
    assert [a.outcome for a in steady.attempts] == ["passed"] * 3 + ["skipped"] * 7
    reason = "adaptive: decided after 3 repeats (no regression)"
    assert {a.reason for a in steady.attempts[3:]} == {f"Skipped: {reason}"}
    assert steady.adaptive.reason == reason
    # Skips in no rate
    assert (steady.stats.passed, steady.stats.failed, steady.verdict) == (
        3,
        0,
        "passed",
    )
    # The broken case is decided as regressed before its cap, and the gate FAILs it.
    assert broken.adaptive.stop == "regressed" and broken.adaptive.repeats < 10
    assert broken.stats.passed == 0 and broken.stats.failed == broken.adaptive.repeats
    assert broken.adaptive.skipped == 10 - broken.adaptive.repeats
    assert (
        report.totals.skipped == 7 + broken.adaptive.skipped
        and report.totals.failed == broken.adaptive.repeats
    )
    assert report.adaptive is not None and report.adaptive.cases_compared == 2
    assert (report.adaptive.repeats_run, report.adaptive.repeats_skipped) == (
        3 + broken.adaptive.repeats,
        report.totals.skipped,
    )
    assert report.gate is not None and "scenario_regression" in report.gate["breached"]
    result.stdout.fnmatch_lines(
        [
            "*steady*3/3*passed (adaptive: 3 of 10 repeats, no regression)*",
            (
                f"adaptive repeats: {report.adaptive.repeats_run} run, "
                f"{report.totals.skipped} skipped once decided, "
                "over 2 case(s) compared with the baseline (1 no regression, 1 regressed)"
            ),
        ]
    )
    summary = (project.path / "reports" / "latest" / "summary.txt").read_text()
    assert "adaptive repeats:" in summary and "adaptive: 3 of 10 repeats, no regression" in summary
    return report


def test_a_decided_case_skips_the_rest_of_its_repeats(project: pytest.Pytester) -> None:
    result = project.runpytest(*LIVE, BASELINE, "--nodeval-adaptive", "-rs")
    _check_adaptive_outcome(project, result)
    result.stdout.fnmatch_lines(["*SKIPPED*adaptive: decided after 3 repeats (no regression)*"])


def test_with_two_workers_each_case_runs_on_one_worker_with_the_same_outcome(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest(*LIVE, BASELINE, "--nodeval-adaptive", "-n", "2")
    report = _check_adaptive_outcome(project, result)
    for case in report.cases:
        workers = {a.worker for a in case.attempts if a.outcome != "skipped"}
        assert len(workers) == 1, f"{case.id} ran on {workers}"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_attempts_run_ahead_are_only_those_a_decided_case_would_not_skip(
    project: pytest.Pytester, workers: list[str]
) -> None:
    result = project.runpytest(
        *LIVE, BASELINE, "--nodeval-adaptive", "--nodeval-concurrency", "8", *workers
    )
    report = _check_adaptive_outcome(project, result)
    # Every attempt that ran left its journal: none ran ahead only to be skipped (and its
    # spend left out of the report).
    sessions = project.path / "reports" / "latest" / "_sessions"
    ran = sorted(
        str(d.relative_to(sessions)) for d in sessions.glob("*/r*") if (d / "journal").is_dir()
    )
    reported = sorted(
        f"{c.id}/r{a.repeat}" for c in report.cases for a in c.attempts if a.outcome != "skipped"
    )
    assert ran == reported


def test_the_profile_key_turns_it_on(project: pytest.Pytester) -> None:
    project.makeini(PROJECT_INI + "nodeval_profiles =\n    release: adaptive=on\n")
    result = project.runpytest(*LIVE, BASELINE, "--nodeval-profile", "release")
    _check_adaptive_outcome(project, result)
    off = project.runpytest(
        *LIVE, BASELINE, "--nodeval-profile", "release", "--nodeval-adaptive=off"
    )
    assert _report(project).adaptive is None and _report(project).totals.skipped == 0, (
        off.stdout.str()
    )


def test_without_a_baseline_every_repeat_runs_and_the_run_says_why(
    nodeval_project: pytest.Pytester,
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "steady",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=HELLO,
        record=False,
    )
    result = nodeval_project.runpytest(*LIVE, "--nodeval-adaptive")
    assert result.ret == 0
    report = _report(nodeval_project)
    assert report.adaptive is None and report.case("steady").adaptive is None
    assert report.totals.passed == 10 and report.totals.skipped == 0
    result.stdout.fnmatch_lines(
        [
            (
                "nodeval: --nodeval-adaptive is not in effect: adaptive repeats compare each case "
                "with a baseline; give one with --nodeval-baseline or nodeval_baseline*"
                "every case runs all its repeats"
            )
        ]
    )


def test_a_bad_adaptive_value_names_where_it_came_from(nodeval_project: pytest.Pytester) -> None:
    nodeval_project.makeini(PROJECT_INI + "nodeval_adaptive = maybe\n")
    result = nodeval_project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*adaptive from *tox.ini must be on or off, got 'maybe'*"])


def test_the_report_schema_accepts_an_adaptive_run(project: pytest.Pytester) -> None:
    project.runpytest(*LIVE, BASELINE, "--nodeval-adaptive")
    schema = json.loads((Path(__file__).parents[2] / "schemas" / "report.schema.json").read_text())
    data = json.loads((project.path / "reports" / "latest" / "report.json").read_text())
    jsonschema.validate(data, schema)
    assert data["adaptive"]["cases_compared"] == 2
    assert {c["id"]: c["adaptive"]["stop"] for c in data["cases"]} == {
        "broken": "regressed",
        "steady": "no regression",
    }


def test_the_scheduler_groups_a_case_with_the_python_scenarios_bound_to_it() -> None:
    from pytest_nodeval.plugin.case_scheduling import CaseScheduling

    # Only the grouping is under test, not a live session
    scheduler = object.__new__(CaseScheduling)
    scheduler._case_ids = None
    scheduler.collection = [
        "scenarios/refund/case.yaml::test_scenario[refund]",
        "scenarios/refund/case.yaml::test_scenario[refund-r2]",
        "scenarios/refund-flow/case.yaml::test_scenario[refund-flow-r2]",
        "scenarios/test_refund.py::test_amount[refund-flow-r2]",
        "scenarios/test_refund.py::test_amount[eur-refund]",
        "tests/test_other.py::test_plain",
        "tests/test_other.py::test_grouped@db",
    ]
    scopes = [scheduler._split_scope(nodeid) for nodeid in scheduler.collection]
    assert scopes == [
        "nodeval-case:refund",
        "nodeval-case:refund",
        "nodeval-case:refund-flow",
        "nodeval-case:refund-flow",
        "nodeval-case:refund",
        "tests/test_other.py::test_plain",
        "db",
    ]


EXTRA_CHECK = """
import pytest

@pytest.mark.nodeval_case("steady")
def test_steady_again(nodeval_run):
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_python_checks_of_a_case_follow_its_decision(
    project: pytest.Pytester, workers: list[str]
) -> None:
    """A Python test bound to the case is a check of the same attempts: it runs for the repeats
    that ran and is skipped for the rest, also when it runs after all of the case's YAML tests."""
    (project.path / "scenarios" / "test_steady.py").write_text(EXTRA_CHECK)
    result = project.runpytest(*LIVE, BASELINE, "--nodeval-adaptive", *workers)
    steady = _report(project).case("steady")
    assert steady.adaptive is not None and (steady.adaptive.repeats, steady.adaptive.skipped) == (
        3,
        7,
    )
    assert [len(a.checks) for a in steady.attempts[:3]] == [2, 2, 2]
    assert [a.outcome for a in steady.attempts] == ["passed"] * 3 + ["skipped"] * 7, (
        result.stdout.str()
    )
    broken = _report(project).case("broken").adaptive
    assert broken is not None
    result.assert_outcomes(passed=6, failed=broken.repeats, skipped=7 + 7 + broken.skipped)
