"""`nodeval record` for every kind of case (issue 17 point 6): a `_record/record.py`, your own
agent's bound Python test, the reference engine; a whole root at once; the case's world."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import write_case

ANSWER = [{"text": "Hello there."}]

AGENT = """
from pytest_nodeval import tool

@tool
def lookup(order_id: str) -> str:
    return "shipped"

def agent(ctx):
    for text in ctx.inputs():
        ctx.output("order A-1 is " + lookup("A-1"))
"""

BOUND_TEST = """
import pytest
from orders_agent import agent

@pytest.mark.nodeval_case("orders")
def test_orders(nodeval_attempt):
    nodeval_attempt.run(agent)
"""

RECORD_SCRIPT = """
import sys
sys.path.insert(0, "..")
from orders_agent import agent
from pytest_nodeval import record_agent

record_agent(agent)
"""


def _nodeval(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_nodeval.cli", *args], cwd=cwd, capture_output=True, text=True
    )


def _own_agent_case(root: Path, *, assertions: list[dict[str, object]] | None = None) -> Path:
    case_dir = root / "orders"
    (case_dir / "input").mkdir(parents=True)
    # A tool-only agent: it calls no model, and says so.
    (case_dir / "case.yaml").write_text("id: orders\nneeds_model: false\n")
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["where?"]}})
    )
    (case_dir / "assertions.yaml").write_text(
        yaml.safe_dump(
            assertions
            if assertions is not None
            else [{"kind": "output_contains", "text": "shipped"}]
        )
    )
    (root / "orders_agent.py").write_text(AGENT)
    return case_dir


def test_a_record_script_writes_the_journal_after_its_checks(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = _own_agent_case(root)
    (case_dir / "_record").mkdir()
    (case_dir / "_record" / "record.py").write_text(RECORD_SCRIPT)
    done = _nodeval(nodeval_project.path, "record", "scenarios/orders")
    assert done.returncode == 0, done.stderr
    assert "recorded scenarios/orders/journal:" in done.stdout and "(new)" in done.stdout
    assert "shipped" in (case_dir / "journal" / "events.jsonl").read_text()
    again = _nodeval(nodeval_project.path, "record", "scenarios/orders")
    assert again.returncode == 0 and "(unchanged)" in again.stdout


def test_a_record_script_run_by_hand_installs_its_journal_and_leaves_no_scratch(
    nodeval_project: pytest.Pytester, tmp_path: Path
) -> None:
    case_dir = _own_agent_case(nodeval_project.path / "scenarios")
    (case_dir / "_record").mkdir()
    (case_dir / "_record" / "record.py").write_text(RECORD_SCRIPT)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    env.pop("NODEVAL_RECORD_JOURNAL", None)
    journals = []
    for _ in range(2):  # the second run records the same: the journal is not rewritten
        done = subprocess.run(
            [sys.executable, "_record/record.py"],
            cwd=case_dir,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        journals.append((case_dir / "journal" / "events.jsonl").read_bytes())
    assert journals[0] == journals[1]
    assert list(scratch.iterdir()) == []
    assert sorted(p.name for p in case_dir.iterdir()) == [
        "_record",
        "assertions.yaml",
        "case.yaml",
        "input",
        "journal",
    ]


def test_a_record_script_whose_recording_fails_the_checks_leaves_no_journal(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = _own_agent_case(root, assertions=[{"kind": "output_contains", "text": "lost"}])
    (case_dir / "_record").mkdir()
    (case_dir / "_record" / "record.py").write_text(RECORD_SCRIPT)
    done = _nodeval(nodeval_project.path, "record", "scenarios/orders")
    assert done.returncode == 1 and "failed 1 assertion(s)" in done.stderr
    assert not (case_dir / "journal").exists()


def test_a_failing_record_script_is_reported_with_its_output_escaped(
    nodeval_project: pytest.Pytester,
) -> None:
    case_dir = _own_agent_case(nodeval_project.path / "scenarios")
    (case_dir / "_record").mkdir()
    (case_dir / "_record" / "record.py").write_text(
        "import sys\nsys.exit('agent crashed \\x1b[2J here')\n"
    )
    done = _nodeval(nodeval_project.path, "record", "scenarios/orders")
    assert done.returncode == 1
    assert "_record/record.py exited 1: agent crashed \\x1b[2J here" in done.stderr
    assert "\x1b" not in done.stderr


def test_an_own_agent_case_records_through_its_bound_test(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = _own_agent_case(root)
    (root / "test_orders.py").write_text(BOUND_TEST)
    done = _nodeval(nodeval_project.path, "record", "scenarios/orders")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the Python tests bound to case 'orders' passed in record mode" in done.stdout
    assert "shipped" in (case_dir / "journal" / "events.jsonl").read_text()
    nodeval_project.runpytest("scenarios").assert_outcomes(passed=1)  # and it replays


def test_an_own_agent_case_without_a_way_to_record_says_how_to_add_one(
    nodeval_project: pytest.Pytester,
) -> None:
    _own_agent_case(nodeval_project.path / "scenarios")
    done = _nodeval(nodeval_project.path, "record", "scenarios/orders")
    assert done.returncode == 1
    assert "no test under" in done.stderr and "@pytest.mark.nodeval_case('orders')" in done.stderr


def test_an_own_agent_case_is_not_collected_as_an_engine_test(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    _own_agent_case(root)
    result = nodeval_project.runpytest("scenarios", "--collect-only", "-q")
    assert "case.yaml" not in result.stdout.str()
    (root / "test_orders.py").write_text(BOUND_TEST)
    result = nodeval_project.runpytest("scenarios", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["scenarios/test_orders.py::test_orders[[]orders[]]", "1 test collected*"]
    )


def test_nodeval_case_runs_only_the_tests_bound_to_a_case(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[])
    write_case(root, "hello-again", script=ANSWER, inputs=["hi"], assertions=[])
    result = nodeval_project.runpytest("--nodeval-case=hello", "-q")
    result.assert_outcomes(passed=1, deselected=1)
    result = nodeval_project.runpytest("--nodeval-case=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--nodeval-case: no case 'nope' under nodeval_cases*"])


def test_a_root_records_every_case_and_says_what_changed(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[])
    write_case(root, "fresh", script=ANSWER, inputs=["hi"], assertions=[], record=False)
    write_case(
        root, "hello", script=ANSWER * 2, inputs=["hi", "and again"], assertions=[], record=False
    )
    done = _nodeval(nodeval_project.path, "record", "scenarios", "--world", "local")
    assert done.returncode == 0, done.stderr
    assert "2 case(s): 2 recorded (2 new or changed, 0 unchanged), 0 not recorded" in done.stdout
    assert "  new      scenarios/fresh\n" in done.stdout
    assert "  changed  scenarios/hello: header.json at config_digest" in done.stdout


def test_recording_an_unchanged_case_again_leaves_its_journal_byte_for_byte(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[], record=False)
    first = _nodeval(nodeval_project.path, "record", "scenarios", "--world", "local")
    assert first.returncode == 0, first.stderr
    journal = {p.name: p.read_bytes() for p in (case_dir / "journal").iterdir()}
    again = _nodeval(nodeval_project.path, "record", "scenarios", "--world", "local")
    assert "(unchanged)" in again.stdout, again.stdout
    assert {p.name: p.read_bytes() for p in (case_dir / "journal").iterdir()} == journal
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["hello?"]}})
    )
    changed = _nodeval(nodeval_project.path, "record", "scenarios", "--world", "local")
    assert "(changed: seq 5 io.input at payload.text)" in changed.stdout, changed.stdout


def test_record_honours_the_case_world_backend(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = write_case(
        root,
        "counted",
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": "echo hi"}}]},
            {"text": "done"},
        ],
        inputs=["count"],
        assertions=[],
        tools=["shell"],
        record=False,
        case={"world": {"backend": "local"}},
    )
    done = _nodeval(nodeval_project.path, "record", "scenarios/counted")
    assert done.returncode == 0, done.stderr
    assert "in a local world" in done.stdout, "auto would take Docker or bubblewrap here"
    assert (case_dir / "journal" / "events.jsonl").is_file()
    from ..world.conftest import require_backend

    require_backend("bwrap")
    done = _nodeval(nodeval_project.path, "record", "scenarios/counted", "--world", "bwrap")
    assert "in a bwrap world" in done.stdout, "--world wins over the case"


def test_record_falls_back_to_bubblewrap_when_docker_has_no_world_image(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ..world.conftest import require_backend

    require_backend("docker")
    require_backend("bwrap")
    monkeypatch.setenv("NODEVAL_BASE_IMAGE", "nodeval-test-absent:none")
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "counted",
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": "echo hi"}}]},
            {"text": "done"},
        ],
        inputs=["count"],
        assertions=[],
        tools=["shell"],
        record=False,
    )
    done = _nodeval(nodeval_project.path, "record", "scenarios/counted")
    assert done.returncode == 0, done.stderr
    assert (
        "the Docker engine has no world image" in done.stderr
        and "recording in bubblewrap instead" in done.stderr
    )
    assert "in a bwrap world" in done.stdout
    refused = _nodeval(nodeval_project.path, "record", "scenarios/counted", "--world", "docker")
    assert refused.returncode != 0 and "no base image" in refused.stdout + refused.stderr, (
        "an explicit --world is kept"
    )


# -- repeats in record mode (issue 28 point 7): one rule, a case's `repeat:` and --repeat alike -


def _count_installs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The journals the run installs (the run is in process: the controller's lazy import
    finds the wrapper)."""
    from pytest_nodeval.journal import writer

    installed: list[Path] = []
    install = writer.install_journal

    def counting(source: Path, target: Path) -> None:
        installed.append(target)
        install(source, target)

    monkeypatch.setattr(writer, "install_journal", counting)
    return installed


def _attempts_per_case(project: pytest.Pytester) -> dict[str, int]:
    import json

    report = json.loads((project.path / "reports" / "latest" / "report.json").read_text())
    return {case["id"]: len(case["attempts"]) for case in report["cases"]}


def test_record_mode_records_a_case_with_its_own_repeat_once(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root, "hello", script=ANSWER, inputs=["hi"], assertions=[], case={"repeat": 3}, record=False
    )
    installed = _count_installs(monkeypatch)
    result = nodeval_project.runpytest("--nodeval-mode", "record", "--nodeval-world", "local")
    result.assert_outcomes(passed=1)
    assert installed == [root / "hello" / "journal"]
    assert _attempts_per_case(nodeval_project) == {"hello": 1}
    # The case keeps its repeat for the runs that replay it.
    nodeval_project.runpytest().assert_outcomes(passed=3)


def test_record_mode_records_once_whatever_the_command_line_repeat(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[], record=False)
    installed = _count_installs(monkeypatch)
    result = nodeval_project.runpytest(
        "--nodeval-mode", "record", "--nodeval-world", "local", "--repeat", "4"
    )
    result.assert_outcomes(passed=1)
    assert installed == [root / "hello" / "journal"]
    assert _attempts_per_case(nodeval_project) == {"hello": 1}
    result.stdout.fnmatch_lines(
        [
            "record mode, repeat 1*",
            "nodeval: record mode records each case once; repeat 4 (from command line) is for "
            "the runs that replay or run live",
        ]
    )


def test_record_takes_a_cases_own_file_as_an_editor_passes_it(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = write_case(root, "hello", script=ANSWER, inputs=["hi"], assertions=[], record=False)
    done = _nodeval(nodeval_project.path, "record", "scenarios/hello/case.yaml", "--world", "local")
    assert done.returncode == 0, done.stderr
    assert (case_dir / "journal" / "events.jsonl").is_file()
