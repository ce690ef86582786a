"""`nodeval new` (issue 20): a case that records and replays green at once, its files pointing
editors at the project's schemas."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from pytest_nodeval.cli import main


def _schema_of(path: Path) -> Path:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema="), f"{path} has no schema line"
    return (path.parent / first.partition("$schema=")[2]).resolve()


@pytest.fixture
def in_project(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    """The project, as the working directory `nodeval new` writes under."""
    monkeypatch.chdir(nodeval_project.path)
    return nodeval_project


def test_new_cases_record_and_replay_green(
    in_project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "greeting"]) == 0
    assert main(["new", "my-agent", "--agent"]) == 0
    # A program as the agent, in the best world this machine has (tests/command_agents has more).
    assert main(["new", "my-program", "--command"]) == 0
    out = capsys.readouterr().out
    assert "created scenarios/greeting: recorded its journal" in out
    assert "created scenarios/my-agent: recorded its journal with _record/record.py" in out
    assert "(replay it with `pytest scenarios/my-agent`)" in out
    assert "created scenarios/my-program: recorded its journal" in out
    root = in_project.path / "scenarios"
    for path in [*root.glob("*/*.yaml"), *root.glob("*/input/*.yaml")]:
        schema = _schema_of(path)
        jsonschema.validate(yaml.safe_load(path.read_text()), json.loads(schema.read_text()))
    result = in_project.runpytest()
    result.assert_outcomes(passed=3)
    # The command the scaffold gave runs the own agent's bound test, and only it.
    alone = in_project.runpytest("scenarios/my-agent", "-v")
    alone.assert_outcomes(passed=1)
    alone.stdout.fnmatch_lines(["*test_agent_my_agent.py::test_agent_my_agent* PASSED*"])


def test_new_refuses_an_existing_id_and_a_bad_one(
    in_project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "greeting"]) == 0
    before = sorted(p.name for p in (in_project.path / "scenarios" / "greeting").iterdir())
    assert main(["new", "greeting"]) == 4
    assert main(["new", "Bad Id"]) == 4
    err = capsys.readouterr().err
    assert (
        "case 'greeting' already exists at scenarios/greeting" in err
        and "'Bad Id' is not a valid case id" in err
    )
    assert sorted(p.name for p in (in_project.path / "scenarios" / "greeting").iterdir()) == before
