"""--nodeval-from-turn N inside pytest (issue 30): the attempt replays turns 1..N-1 from the
case's journal and runs turn N onward live; assertions see the whole session, report.json's
attempt says where it went live, record mode installs the whole session, and cases that cannot
continue from the turn are refused in one line (tests/plugin/test_bad_command_lines.py has the
usage errors of the command line; tests/integration/test_from_turn.py counts calls at the fake).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from pytest_nodeval.report.models import RunReport

SEED = Path(__file__).parents[2] / "scenarios" / "multi-turn-refund"
LIVE = ("--nodeval-mode", "live", "--nodeval-world", "local", "-W", "ignore::UserWarning")


@pytest.fixture
def project(nodeval_project: pytest.Pytester) -> pytest.Pytester:
    """multi-turn-refund (three scripted turns, a mock provider, its recorded journal)."""
    shutil.copytree(SEED, nodeval_project.path / "scenarios" / "multi-turn-refund")
    return nodeval_project


def _report(project: pytest.Pytester) -> RunReport:
    path = project.path / "reports" / "latest" / "report.json"
    return RunReport.model_validate_json(path.read_bytes())


def _events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_assertions_see_the_whole_session_and_the_report_says_where_it_went_live(
    project: pytest.Pytester,
) -> None:
    # assertions.yaml counts three inputs and three outputs, and a sequence across the turns:
    # it passes only if the replayed turns are in the observed session.
    result = project.runpytest(*LIVE, "--nodeval-from-turn", "3")
    result.assert_outcomes(passed=1)
    attempt = _report(project).cases[0].attempts[0]
    assert attempt.live_from_turn == 3
    assert attempt.llm_calls == 4  # the session's calls, replayed ones included
    journal = project.path / "reports" / "latest" / str(attempt.journal) / "events.jsonl"
    events = _events(journal)
    marks = [e for e in events if e["type"] == "session.live_from"]
    assert [m["payload"]["turn"] for m in marks] == [3]  # type: ignore[index]
    assert sum(e["type"] == "io.input" for e in events) == 3


def test_an_attempt_run_whole_says_nothing_of_it(project: pytest.Pytester) -> None:
    project.runpytest(*LIVE).assert_outcomes(passed=1)
    assert _report(project).cases[0].attempts[0].live_from_turn is None


def test_record_mode_installs_the_replayed_turns_and_the_live_ones(
    project: pytest.Pytester,
) -> None:
    journal = project.path / "scenarios" / "multi-turn-refund" / "journal" / "events.jsonl"
    before = _events(journal)
    result = project.runpytest(
        "--nodeval-mode", "record", "--nodeval-world", "local", "--nodeval-from-turn", "2"
    )
    result.assert_outcomes(passed=1)
    after = _events(journal)
    assert [e["type"] for e in after if e["type"] == "session.live_from"] == ["session.live_from"]
    # The recorded turns are all there: the two before the mark and the one after it.
    assert [e["payload"] for e in after if e["type"] == "io.input"] == [
        e["payload"] for e in before if e["type"] == "io.input"
    ]
    project.runpytest().assert_outcomes(passed=1)  # and the new journal replays


def test_under_xdist_a_case_without_the_turn_is_the_same_usage_error(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest(*LIVE, "-n", "2", "--nodeval-from-turn", "4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str()
    result.stderr.fnmatch_lines(
        ["ERROR: --nodeval-from-turn: case 'multi-turn-refund' has 3 user turn(s) *needs*"]
    )
    assert not (project.path / "reports").exists()


OWN_AGENT = """
import pytest

def agent(ctx):
    for text in ctx.inputs():
        ctx.output("ok")

@pytest.mark.nodeval_case("mine")
def test_mine(nodeval_attempt):
    nodeval_attempt.run(agent)
"""


def test_an_own_agent_case_is_refused_in_one_line(nodeval_project: pytest.Pytester) -> None:
    case_dir = nodeval_project.path / "scenarios" / "mine"
    (case_dir / "input").mkdir(parents=True)
    (case_dir / "case.yaml").write_text("id: mine\n")
    (case_dir / "assertions.yaml").write_text("[]\n")
    (case_dir / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["one", "two"]}})
    )
    (nodeval_project.path / "scenarios" / "test_mine.py").write_text(OWN_AGENT)
    result = nodeval_project.runpytest("--nodeval-mode", "live", "--nodeval-from-turn", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stderr.str()
    result.stderr.fnmatch_lines(
        [
            "ERROR: --nodeval-from-turn: case 'mine': --nodeval-from-turn replays the reference "
            "engine's turns (input/config.yaml) only, and it is run by your own agent; run it "
            "without --nodeval-from-turn"
        ]
    )
