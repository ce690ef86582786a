"""Every attempt lands in exactly one place: passed, failed, diverged, infra error, not run
or skipped (issue 14). Each test here failed on the main of 2026-12-01."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_rerunfailures  # noqa: F401  (the pytester runs below use --reruns)
import pytest_timeout  # noqa: F401  (a pytester run below uses --timeout)
import yaml

from pytest_nodeval.report.models import RunReport

from ..conftest import write_case
from ..html.pagetools import parse

ANSWER = [{"text": "Hello there."}]


def _report(project: pytest.Pytester) -> RunReport:
    return RunReport.model_validate_json(
        (project.path / "reports" / "latest" / "report.json").read_bytes()
    )


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
    (case_dir / "assertions.yaml").write_text("[]\n")  # none on purpose: the tests check it
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["where?"]}})
    )
    (project.path / "scenarios" / "test_orders.py").write_text(OWN_AGENT.format(order="A-1"))
    recorded = project.runpytest(
        "scenarios/test_orders.py::test_only_runs", "--nodeval-mode", "record"
    )
    recorded.assert_outcomes(passed=1)
    assert (case_dir / "journal" / "events.jsonl").is_file()
    return case_dir


def test_an_own_agent_that_diverges_fails_whatever_the_test_does_after_run(
    nodeval_project: pytest.Pytester,
) -> None:
    _own_agent_case(nodeval_project)
    (nodeval_project.path / "scenarios" / "test_orders.py").write_text(
        OWN_AGENT.format(order="B-2")
    )
    result = nodeval_project.runpytest("scenarios/test_orders.py")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*replay of *orders* diverged from its journal (*orders/journal/events.jsonl): "
            "at seq 4 (tool.call lookup-1):*",
            "*at args.order_id: recorded *A-1*, now *B-2*",
            "*re-record the journal: nodeval record *orders*",
        ]
    )
    assert "observed 0" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["orders * 0/1 * failed (1 diverged)", "*1 of the failures diverged from their journal*"]
    )
    attempts = _report(nodeval_project).case("orders").attempts
    assert {(a.outcome, a.status) for a in attempts} == {("failed", "divergence")}
    # report.json keeps the whole message and the seq of the tool call that differs
    assert {a.divergence_seq for a in attempts} == {4}
    assert all("at args.order_id: recorded 'A-1'" in (a.divergence or "") for a in attempts)


# -- a case has one attempt per repeat, whatever the tests bound to it ------------------------

BOUND = """
import pytest
from pytest_nodeval import expect

@pytest.mark.nodeval_case("hello")
def test_greets(nodeval_run):
    expect(nodeval_run).output_contains("Hello")

@pytest.mark.nodeval_case("hello")
def test_is_short(nodeval_run, request):
    assert len(nodeval_run.output) < {limit}, "too long"
"""


@pytest.mark.parametrize(("limit", "passed"), [(100, 3), (5, 0)])
def test_tests_bound_to_a_case_are_checks_of_one_attempt(
    nodeval_project: pytest.Pytester, limit: int, passed: int
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    (root / "test_hello.py").write_text(BOUND.format(limit=limit))
    result = nodeval_project.runpytest("--repeat", "3")
    assert result.parseoutcomes()["passed"] == 6 + passed  # 3 tests x 3 repeats are 9 checks
    report = _report(nodeval_project)
    case = report.case("hello")
    assert (case.stats.attempts, case.stats.passed) == (3, passed)
    assert report.totals.attempts == 3
    first = case.attempts[0]
    assert len(first.checks) == 3 and first.journal == "_sessions/hello/r1/journal"
    sessions = list(
        (nodeval_project.path / "reports" / "latest" / "_sessions" / "hello" / "r1").rglob(
            "events.jsonl"
        )
    )
    assert len(sessions) == 1, "the attempt ran once in this process, for all three checks"
    if not passed:
        assert first.outcome == "failed" and "too long" in (first.reason or "")


# -- attempts the run never reached are "not run", in no rate ---------------------------------


def test_attempts_after_x_are_not_run_not_infrastructure_errors(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "a-fails",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "bye"}],
    )
    write_case(root, "b-never", script=ANSWER, inputs=["hi"], assertions=[])
    result = nodeval_project.runpytest("-x", "--repeat", "2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["b-never * 0/0 * not run", "*3 not run*"])
    assert "infrastructure error" not in result.stdout.str()
    report = _report(nodeval_project)
    assert (report.totals.not_run, report.totals.errors, report.totals.infra_errors) == (3, 0, 0)
    assert {a.outcome for a in report.case("b-never").attempts} == {"not_run"}
    assert report.case("b-never").verdict == "not_run"
    assert report.suite.scenarios == 1, "a case that never ran is in no rate"


# -- reruns are tries of one attempt -------------------------------------------------------

PASSES_ON_RERUN = """
import pytest
from pathlib import Path

@pytest.mark.nodeval_case("hello")
def test_second_try_passes(nodeval_run, tmp_path_factory):
    marker = Path({marker!r})
    if not marker.exists():
        marker.write_text("tried")
        raise AssertionError("first try fails")
"""


def test_a_pass_on_rerun_counts_and_is_marked_flaky(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[])
    (root / "test_rerun.py").write_text(
        PASSES_ON_RERUN.format(marker=str(nodeval_project.path / "tried"))
    )
    result = nodeval_project.runpytest("scenarios/test_rerun.py", "--reruns", "2")
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["hello * 1/1 * passed (flaky: 1 rerun(s))"])
    report = _report(nodeval_project)
    attempt = report.case("hello").attempts[0]
    assert (attempt.outcome, attempt.reruns, report.exit_status) == ("passed", 1, 0)
    assert (report.totals.passed, report.totals.failed) == (1, 0)


def test_a_rerun_runs_the_attempt_again_even_when_other_checks_share_it(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[])
    (root / "test_rerun.py").write_text(
        PASSES_ON_RERUN.format(marker=str(nodeval_project.path / "tried"))
        + "\n\n@pytest.mark.nodeval_case('hello')\ndef test_other(nodeval_run):\n    pass\n"
    )
    result = nodeval_project.runpytest(
        "scenarios/test_rerun.py", "--reruns", "1", "-p", "no:randomly"
    )
    assert result.parseoutcomes() == {"passed": 2, "rerun": 1}
    sessions = nodeval_project.path / "reports" / "latest" / "_sessions" / "hello" / "r1"
    journals = sorted(str(p.parent.relative_to(sessions)) for p in sessions.rglob("events.jsonl"))
    assert journals == ["checks/test_second_try_passes_hello_/journal", "journal"], (
        "the first try's session, then the rerun's own (a new try), which the other check reuses"
    )
    attempt = _report(nodeval_project).case("hello").attempts[0]
    assert (attempt.outcome, attempt.reruns, len(attempt.checks)) == ("passed", 1, 2)


# -- a skipped judge is said wherever the verdict is -----------------------------------------


def test_a_skipped_judge_is_shown_next_to_the_pass(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[
            {"kind": "output_contains", "text": "hello"},
            {"kind": "judge", "rubric": ["Greets the user"]},
        ],
    )
    result = nodeval_project.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["hello * 1/1 * passed (judge skipped)"])
    run_dir = nodeval_project.path / "reports" / "latest"
    assert "passed (judge skipped)" in (run_dir / "summary.txt").read_text()
    page = parse((run_dir / "report.html").read_text())  # the page's data is compressed
    assert [row["judge_skipped"] for row in page.data()["cases"]] == [True]


# -- setup problems are infrastructure errors, never agent failures ------------------------------


def _infra_attempt(
    project: pytest.Pytester, result: pytest.RunResult, case_id: str = "hello"
) -> str:
    assert result.ret == 7, result.stdout.str()
    report = _report(project)
    attempt = report.case(case_id).attempts[0]
    assert (attempt.outcome, attempt.infra_error) == ("error", True)
    assert (report.totals.failed, report.totals.infra_errors, report.exit_status) == (0, 1, 7)
    assert report.suite.scenarios == 0, "an infrastructure error is in no pass rate"
    result.stdout.fnmatch_lines(
        [
            "infrastructure errors (not the agent's; in no pass rate; exit status 7):",
            f"  {case_id} r1: *",
        ]
    )
    summary = (project.path / "reports" / "latest" / "summary.txt").read_text()
    assert "infrastructure errors" in summary
    return attempt.reason or ""


def test_no_api_key_is_an_infrastructure_error(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[],
        providers=[{"name": "anthropic", "model": "claude-test"}],
        record=False,
    )
    result = nodeval_project.runpytest("--nodeval-mode", "live", "--nodeval-world", "local")
    assert "no API key" in _infra_attempt(nodeval_project, result)


def test_an_own_agent_without_a_key_is_an_infrastructure_error(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    case_dir = nodeval_project.path / "scenarios" / "hello"
    (case_dir / "input").mkdir(parents=True)
    (case_dir / "case.yaml").write_text("id: hello\n")
    (case_dir / "assertions.yaml").write_text("[]\n")  # none on purpose: the tests check it
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["hi"]}})
    )
    (nodeval_project.path / "scenarios" / "test_own.py").write_text("""
import pytest

def agent(ctx):
    client = ctx.anthropic()
    for text in ctx.inputs():
        ctx.output(client.messages.create(model="m", max_tokens=10, messages=[]).content[0].text)

@pytest.mark.nodeval_case("hello")
def test_own(nodeval_attempt):
    nodeval_attempt.run(agent)
""")
    result = nodeval_project.runpytest("scenarios/test_own.py", "--nodeval-mode", "live")
    assert "no API key" in _infra_attempt(nodeval_project, result)


def test_a_missing_world_image_is_an_infrastructure_error(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODEVAL_BASE_IMAGE", "nodeval-no-such-image:never")
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=[{"tool_calls": [{"name": "shell", "args": {"command": "ls"}}]}, *ANSWER],
        inputs=["hi"],
        assertions=[],
        record=False,
    )
    result = nodeval_project.runpytest("--nodeval-mode", "live", "--nodeval-world", "docker")
    _infra_attempt(nodeval_project, result)


def test_an_unreachable_judge_is_an_infrastructure_error_not_a_skip(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    judge = {
        "name": "anthropic",
        "model": "judge-1",
        "base_url": f"http://127.0.0.1:{port}",
        "max_retries": 0,
    }
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "judge", "rubric": ["Greets the user"], "judge": judge}],
    )
    result = nodeval_project.runpytest("--nodeval-mode", "full")
    assert "could not be reached" in _infra_attempt(nodeval_project, result)


def test_a_harness_timeout_is_an_infrastructure_error(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[])
    (root / "test_slow.py").write_text("""
import time, pytest

@pytest.mark.nodeval_case("hello")
def test_slow(nodeval_run):
    time.sleep(5)
""")
    result = nodeval_project.runpytest(
        "scenarios/test_slow.py", "--timeout", "0.5", "--timeout-method", "signal"
    )
    assert "harness timeout" in _infra_attempt(nodeval_project, result)


# -- one gate policy, read the same way by the run and by `nodeval baseline` -------------------

REFUNDS = """
import json, pathlib, pytest

FAILING = json.loads((pathlib.Path(__file__).parent / "failing.json").read_text())

@pytest.mark.nodeval_case("refunds")
def test_refunds(nodeval_run, request):
    assert request.node.callspec.params["nodeval_case"].repeat not in FAILING, "wrong refund"
"""


def test_nodeval_baseline_gates_with_the_runs_ini_policy(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "refunds",
        script=[{"text": "Refunded."}],
        inputs=["refund"],
        assertions=[],
        case={"min_pass_rate": 0.4},
    )
    (root / "test_refunds.py").write_text(REFUNDS)
    (root / "failing.json").write_text("[]")
    ini = nodeval_project.path / "tox.ini"
    ini.write_text(
        ini.read_text() + "\nnodeval_fail_on_scenario_drop = 0\nnodeval_fail_on_score_drop = 0.9\n"
    )
    args = ("scenarios/test_refunds.py", "--repeat", "10")
    nodeval_project.runpytest(*args, "--nodeval-update-baseline").assert_outcomes(passed=10)
    (root / "failing.json").write_text("[1, 2, 3, 4, 5, 6]")  # 4/10: tolerated, a 60 pp drop
    result = nodeval_project.runpytest(*args, "--nodeval-baseline=reports/baseline.json")
    report = _report(nodeval_project)
    assert report.gate_policy == {"fail_on_scenario_drop": 0.0, "fail_on_score_drop": 0.9}
    # The suite's 60 pp drop is under the ini's 90 pp; between two replays any drop of a case
    # is a regression whatever fail_on_scenario_drop says (docs/statistics.md).
    assert report.gate is not None and report.gate["breached"] == ["scenario_regression"]
    assert result.ret != 0
    command = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_nodeval.cli",
            "baseline",
            "--against",
            "reports/baseline.json",
            "--json",
            "diff.json",
        ],
        cwd=nodeval_project.path,
        capture_output=True,
        text=True,
    )
    assert command.returncode != 0, command.stdout + command.stderr
    diff = json.loads((nodeval_project.path / "diff.json").read_text())
    assert diff["policy"] == report.gate["policy"]
    assert diff["breached"] == report.gate["breached"] == ["scenario_regression"]


def test_the_seeds_latency_key_is_an_alias(nodeval_project: pytest.Pytester) -> None:
    write_case(
        nodeval_project.path / "scenarios", "hello", script=ANSWER, inputs=["hi"], assertions=[]
    )
    ini = nodeval_project.path / "tox.ini"
    ini.write_text(ini.read_text() + "\nnodeval_fail_on_latency_p95_drop = 0.5\n")
    result = nodeval_project.runpytest("--strict-config")
    result.assert_outcomes(passed=1)
    assert _report(nodeval_project).gate_policy == {"fail_on_latency_p95_increase": 0.5}
    ini.write_text(ini.read_text() + "\nnodeval_fail_on_latency_p95_increase = 0.25\n")
    result = nodeval_project.runpytest()
    result.stderr.fnmatch_lines(
        ["*nodeval_fail_on_latency_p95_drop * contradicts nodeval_fail_on_latency_p95_increase*"]
    )


# -- record mode keeps the golden journal unless the recording passes -------------------------


def test_record_mode_keeps_the_golden_journal_when_the_attempt_fails(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = write_case(
        root,
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "Hello"}],
    )
    golden = (case_dir / "journal" / "events.jsonl").read_bytes()
    config = case_dir / "input" / "config.yaml"
    config.write_text(config.read_text().replace("Hello there.", "Goodbye."))
    result = nodeval_project.runpytest("--nodeval-mode", "record", "--nodeval-world", "local")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["nodeval: kept: scenarios/hello/journal (the recording failed; --nodeval-record-force*"]
    )
    assert (case_dir / "journal" / "events.jsonl").read_bytes() == golden
    result = nodeval_project.runpytest(
        "--nodeval-mode", "record", "--nodeval-world", "local", "--nodeval-record-force"
    )
    result.stdout.fnmatch_lines(
        ["nodeval: recorded: scenarios/hello/journal (changed: *; failed, from _sessions/*)"]
    )
    assert b"Goodbye." in (case_dir / "journal" / "events.jsonl").read_bytes()


def test_record_mode_prints_each_journal_it_writes(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[], record=False)
    result = nodeval_project.runpytest("--nodeval-mode", "record", "--nodeval-world", "local")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["nodeval: recorded: scenarios/hello/journal (new; passed, from _sessions/hello/r1/*)"]
    )
    journal = {p.name: p.read_bytes() for p in (case_dir / "journal").iterdir()}
    again = nodeval_project.runpytest("--nodeval-mode", "record", "--nodeval-world", "local")
    again.stdout.fnmatch_lines(["nodeval: unchanged: scenarios/hello/journal (recorded the same*"])
    assert {p.name: p.read_bytes() for p in (case_dir / "journal").iterdir()} == journal


def test_nodeval_record_keeps_the_journal_when_the_recording_fails_its_assertions(
    tmp_path: Path,
) -> None:
    case_dir = write_case(
        tmp_path,
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "Hello"}],
    )
    golden = (case_dir / "journal" / "events.jsonl").read_bytes()
    config = case_dir / "input" / "config.yaml"
    config.write_text(config.read_text().replace("Hello there.", "Goodbye."))
    command = [
        sys.executable,
        "-m",
        "pytest_nodeval.cli",
        "record",
        str(case_dir),
        "--world",
        "local",
    ]
    refused = subprocess.run(command, capture_output=True, text=True)
    assert refused.returncode == 1 and "failed 1 assertion(s)" in refused.stderr
    assert (case_dir / "journal" / "events.jsonl").read_bytes() == golden
    forced = subprocess.run([*command, "--force"], capture_output=True, text=True)
    assert forced.returncode == 0 and "forced:" in forced.stdout
    assert b"Goodbye." in (case_dir / "journal" / "events.jsonl").read_bytes()


# -- memory: nothing of an attempt outlives its report but the record ---------------------------

COUNT_OBSERVED = """
import gc
from pathlib import Path

BEFORE = set()

def _alive():
    from pytest_nodeval.runner.session import Observed
    gc.collect()
    return {id(o) for o in gc.get_objects() if isinstance(o, Observed)}

def pytest_sessionstart(session):
    BEFORE.update(_alive())  # earlier in-process runs of the outer suite are not this run's

def pytest_sessionfinish(session):
    Path("observed_alive.txt").write_text(str(len(_alive() - BEFORE)))
"""


def test_no_attempt_keeps_its_observed_events_after_its_report(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    for index in range(4):
        write_case(root, f"case-{index}", script=ANSWER, inputs=["hi"], assertions=[])
    nodeval_project.makeconftest(COUNT_OBSERVED)
    nodeval_project.runpytest("--repeat", "2").assert_outcomes(passed=8)
    assert (nodeval_project.path / "observed_alive.txt").read_text() == "0"


def test_a_case_whose_files_are_broken_keeps_its_name_and_tags_in_the_report(
    nodeval_project: pytest.Pytester,
) -> None:
    case_dir = write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[],
        case={"name": "Greets", "tags": ["smoke"], "min_pass_rate": 0.5},
    )
    (case_dir / "assertions.yaml").write_text("- kind: no_such_kind\n")
    result = nodeval_project.runpytest()
    result.assert_outcomes(errors=1)
    case = _report(nodeval_project).case("hello")
    assert (case.name, case.tags, case.min_pass_rate, case.verdict) == (
        "Greets",
        ["smoke"],
        0.5,
        "error",
    )


def test_a_process_keeps_only_recently_used_cases_loaded() -> None:
    from pytest_nodeval.plugin.keys import RecentCases

    cases = RecentCases(size=2)
    cases["a"], cases["b"] = 1, 2
    assert cases.get("a") == 1  # used: now the most recent
    cases["c"] = 3
    assert list(cases) == ["a", "c"] and cases.get("b") is None
