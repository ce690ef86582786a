"""Running cases: outcomes, explanations, reports, repeats, tolerated failures, exit status."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from pytest_nodeval.report.models import RunReport

from ..conftest import write_case

ANSWER = [{"text": "Hello there."}]


def _report(project: pytest.Pytester) -> RunReport:
    path = project.path / "reports" / "latest" / "report.json"
    return RunReport.model_validate_json(path.read_bytes())


def test_a_passing_case(nodeval_project: pytest.Pytester) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    result = nodeval_project.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*= nodeval =*",
            "hello * 1/1 * 1.00 * [[]0.21, 1.00[]] * passed",
            "*nodeval report: reports/*/report.json*",
        ]
    )
    report = _report(nodeval_project)
    assert report.totals.passed == 1 and report.exit_status == 0
    attempt = report.case("hello").attempts[0]
    assert attempt.assertions[0].status == "passed"
    assert (
        nodeval_project.path / "reports" / "latest" / attempt.journal / "events.jsonl"
    ).is_file()
    assert (
        (nodeval_project.path / "reports" / "latest" / "summary.txt")
        .read_text()
        .startswith("case ")
    )


def test_a_failing_assertion_explains_itself_without_a_traceback(
    nodeval_project: pytest.Pytester,
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[
            {"kind": "tool_called", "tool": "shell"},
            {"kind": "output_contains", "text": "bye"},
        ],
    )
    result = nodeval_project.runpytest()
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*case 'hello' (repeat 1, deterministic mode): 2 problem(s)",
            '*x tool_called {"tool": "shell"}',
            "*calls of tool 'shell': expected at least 1, observed 0",
            "*to contain 'bye'; it is 'Hello there.'*",
            "*observed journal: reports/*/_sessions/hello/r1/journal",
        ]
    )
    assert "pytest_nodeval/" not in result.stdout.str()
    attempt = _report(nodeval_project).case("hello").attempts[0]
    assert attempt.outcome == "failed"
    assert attempt.reason and attempt.reason.startswith("tool_called")


def test_a_missing_journal_is_a_setup_error_naming_the_directory(
    nodeval_project: pytest.Pytester,
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[],
        record=False,
    )
    result = nodeval_project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*scenarios/hello/journal: no journal here; "
            "record one with `nodeval record *scenarios/hello`*"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert _report(nodeval_project).case("hello").verdict == "failed"


def test_a_setup_error_counts_as_an_error_attempt(nodeval_project: pytest.Pytester) -> None:
    write_case(
        nodeval_project.path / "scenarios", "hello", script=ANSWER, inputs=["hi"], assertions=[]
    )
    nodeval_project.makeconftest("""
import pytest
@pytest.fixture(autouse=True)
def broken_fixture():
    raise RuntimeError("database is down")
""")
    result = nodeval_project.runpytest()
    result.assert_outcomes(errors=1)
    report = _report(nodeval_project)
    attempt = report.case("hello").attempts[0]
    assert attempt.outcome == "error" and "database is down" in (attempt.reason or "")
    assert report.totals.errors == 1 and report.case("hello").verdict == "error"


def test_repeat_3_gives_pass_rates(nodeval_project: pytest.Pytester) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    result = nodeval_project.runpytest("--repeat", "3")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["hello * 3/3 * 1.00 * [[]0.44, 1.00[]] * passed"])
    stats = _report(nodeval_project).case("hello").stats
    assert (stats.attempts, stats.passed, round(stats.wilson_low or 0, 2)) == (3, 3, 0.44)


FLAKY = """
import pytest

@pytest.mark.nodeval_case("hello")
def test_flaky(nodeval_run, nodeval_case, request):
    repeat = request.node.callspec.params["nodeval_case"].repeat
    assert repeat != 2, "the second attempt fails"
"""


def test_failures_within_min_pass_rate_are_tolerated_and_said(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root, "hello", script=ANSWER, inputs=["hi"], assertions=[], case={"min_pass_rate": 0.6}
    )
    (root / "test_flaky.py").write_text(FLAKY)
    result = nodeval_project.runpytest("--repeat", "3", "scenarios/test_flaky.py")
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "hello * 2/3 * 0.67 * tolerated (min 0.60)",
            "1 attempt failure(s) tolerated by min_pass_rate: "
            "they do not fail the run (exit status 0)",
        ]
    )
    report = _report(nodeval_project)
    assert (
        report.totals.tolerated_failures == 1
        and report.exit_status == 0
        and report.pytest_exit_status == 1
    )


def test_failures_below_min_pass_rate_fail_the_run(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root, "hello", script=ANSWER, inputs=["hi"], assertions=[], case={"min_pass_rate": 0.9}
    )
    (root / "test_flaky.py").write_text(FLAKY)
    result = nodeval_project.runpytest("--repeat", "3", "scenarios/test_flaky.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _report(nodeval_project).case("hello").verdict == "failed"


def test_other_failures_are_never_tolerated(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root, "hello", script=ANSWER, inputs=["hi"], assertions=[], case={"min_pass_rate": 0.5}
    )
    (root / "test_flaky.py").write_text(FLAKY + "\n\ndef test_plain():\n    assert False\n")
    result = nodeval_project.runpytest("--repeat", "3", "scenarios/test_flaky.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_python_scenarios_use_fixtures_and_the_assertion_api(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "disk",
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": "echo 3M"}}]},
            {"text": "It uses 3M."},
        ],
        inputs=["size?"],
        assertions=[],
    )
    (root / "test_disk.py").write_text("""
import pytest
from pytest_nodeval import expect

@pytest.mark.nodeval_case("disk")
def test_disk(nodeval_run, nodeval_events, nodeval_case):
    assert nodeval_case.id == "disk"
    assert [e.type for e in nodeval_events][0] == "session.start"
    expect(nodeval_run).tool_called("shell", args={"command": {"regex": "^echo"}})
    expect(nodeval_run).output_contains("3M")
    expect(nodeval_run).max_turns(1)
""")
    result = nodeval_project.runpytest("scenarios/test_disk.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*budget exceeded: 2 turns observed, at most 1 allowed*"])
    statuses = [a.status for a in _report(nodeval_project).case("disk").attempts[0].assertions]
    assert statuses == ["passed", "passed", "failed"]


def test_a_python_scenario_without_a_case_is_told_how_to_bind_one(
    nodeval_project: pytest.Pytester,
) -> None:
    (nodeval_project.path / "scenarios" / "test_unbound.py").write_text(
        "def test_x(nodeval_case):\n    pass\n"
    )
    result = nodeval_project.runpytest("scenarios/test_unbound.py")
    result.stdout.fnmatch_lines(
        ["*uses nodeval_case but names no case; add @pytest.mark.nodeval_case('<case-id>')*"]
    )


def test_plain_test_suites_get_no_report(nodeval_project: pytest.Pytester) -> None:
    (nodeval_project.path / "scenarios" / "test_plain.py").write_text("def test_x():\n    pass\n")
    nodeval_project.runpytest().assert_outcomes(passed=1)
    assert not (nodeval_project.path / "reports").exists()


def test_report_json_matches_the_exported_schema(nodeval_project: pytest.Pytester) -> None:
    write_case(
        nodeval_project.path / "scenarios", "hello", script=ANSWER, inputs=["hi"], assertions=[]
    )
    nodeval_project.runpytest()
    schema = json.loads((Path(__file__).parents[2] / "schemas" / "report.schema.json").read_text())
    document = json.loads((nodeval_project.path / "reports" / "latest" / "report.json").read_text())
    jsonschema.validate(document, schema)


def test_collect_only_writes_no_report(nodeval_project: pytest.Pytester) -> None:
    write_case(
        nodeval_project.path / "scenarios", "hello", script=ANSWER, inputs=["hi"], assertions=[]
    )
    result = nodeval_project.runpytest("--collect-only")
    assert result.ret == 0 and "error" not in result.stdout.str()
    assert not (nodeval_project.path / "reports").exists()


def test_report_json_sums_the_run_up_by_case(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "good",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
        record=False,
    )
    write_case(
        root,
        "bad",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "bye"}],
        record=False,
    )
    write_case(
        root,
        "nokey",
        script=ANSWER,
        inputs=["hi"],
        assertions=[],
        record=False,
        providers=[{"name": "anthropic", "model": "claude-test"}],
    )
    nodeval_project.runpytest("--nodeval-mode", "live", "--nodeval-world", "local", "--repeat", "2")
    report = _report(nodeval_project)
    assert report.summary is not None
    assert report.summary.model_dump(exclude={"duration_s"}) == {
        "cases": 3,
        "passed": 1,
        "failed": 1,
        "infra": 1,
        "errors": 0,
        "skipped": 0,
        "not_run": 0,
        "pass_rate": 0.5,
    }, "the infrastructure error's case is in no pass rate"
    assert report.summary.duration_s == report.duration_s > 0


def test_hostile_text_reaches_the_terminal_and_summary_escaped(
    nodeval_project: pytest.Pytester,
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "hostile",
        script=[{"text": "done \x1b[2J\x1b[31m"}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "bye", "name": "looks \u202eright"}],
    )
    result = nodeval_project.runpytest()
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "\x1b" not in output and "\u202e" not in output
    assert "done \\x1b[2J\\x1b[31m" in output and "looks \\u202eright" in output
    summary = (nodeval_project.path / "reports" / "latest" / "summary.txt").read_text()
    assert "\x1b" not in summary and "\u202e" not in summary
