"""Skills discovered at boot and the engine's planning step (issue 17 points 4 and 5)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_nodeval.agent.planning import parse_plan, plan_result
from pytest_nodeval.agent.skills import discover_skills
from pytest_nodeval.errors import ConfigError

SEED = Path(__file__).parents[2] / "scenarios" / "plan-with-skill"


def _skill(root: Path, directory: str, text: str) -> Path:
    path = root / directory / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_skills_are_read_from_their_front_matter(tmp_path: Path) -> None:
    _skill(tmp_path, "b", "---\nname: beta\ndescription: Second.\n---\nDo B.\n")
    _skill(tmp_path, "a", "---\nname: alpha\ndescription: First.\n---\nDo A.\n")
    (tmp_path / "not-a-skill").mkdir()
    skills = discover_skills(tmp_path)
    assert [(s.name, s.description, s.path, s.body) for s in skills] == [
        ("alpha", "First.", "a", "Do A."),
        ("beta", "Second.", "b", "Do B."),
    ]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Just instructions, no front matter.\n", "no front matter"),
        ("---\nname: [unclosed\n---\nx\n", "not valid YAML"),
        ("---\ndescription: no name\n---\nx\n", "'name' must be"),
        ("---\nname: Has Spaces\ndescription: d\n---\nx\n", "'name' must be"),
        ("---\nname: ok\n---\nx\n", "'description' must be"),
    ],
)
def test_a_bad_skill_file_is_an_error_naming_it(tmp_path: Path, text: str, said: str) -> None:
    path = _skill(tmp_path, "broken", text)
    with pytest.raises(ConfigError) as raised:
        discover_skills(tmp_path)
    assert str(raised.value).startswith(f"{path}: ") and said in str(raised.value)


def test_two_skills_of_one_name_are_refused(tmp_path: Path) -> None:
    _skill(tmp_path, "one", "---\nname: same\ndescription: d\n---\n")
    _skill(tmp_path, "two", "---\nname: same\ndescription: d\n---\n")
    with pytest.raises(ConfigError, match="names must be unique"):
        discover_skills(tmp_path)


def test_a_missing_skills_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        discover_skills(tmp_path / "skills")


def test_a_plan_is_its_numbered_lines() -> None:
    text = "Here is my plan:\n1. [shell] list files\n2) [file] write the summary\n- [none] answer\n"
    assert parse_plan(text) == ["[shell] list files", "[file] write the summary", "[none] answer"]
    assert parse_plan("look first\nthen answer") == ["look first", "then answer"]


def test_a_step_is_done_when_its_tool_was_called_after_the_steps_before_it() -> None:
    steps = [
        "[shell] measure",
        "[file] write the summary",
        "[none] answer",
        "[file] mention the shell",
    ]
    result = plan_result(steps, ["shell", "file", "file"], ["shell", "file"])
    assert [s["done"] for s in result["steps"]] == [True, True, None, True]
    assert (result["done"], result["checkable"], result["followed"]) == (3, 3, True)
    out_of_order = plan_result(steps[:2], ["file", "shell"], ["shell", "file"])
    assert [s["done"] for s in out_of_order["steps"]] == [True, False] and not out_of_order[
        "followed"
    ]


def test_a_step_tagged_with_a_tool_the_agent_lacks_cannot_be_checked() -> None:
    result = plan_result(
        ["[browser] open the page", "skill talk in prose"], ["shell"], ["shell", "skill"]
    )
    assert [s["tool"] for s in result["steps"]] == [None, None]
    assert (result["checkable"], result["followed"]) == (0, False)


def _seed_copy(tmp_path: Path) -> Path:
    case_dir = tmp_path / "plan-with-skill"
    shutil.copytree(SEED, case_dir)
    return case_dir


def _replay(case_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    return run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "observed"
    )


def test_the_seed_replays_its_plan_and_skill_events(tmp_path: Path) -> None:
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.checks.assertions import evaluate_all

    case_dir = _seed_copy(tmp_path)
    observed = _replay(case_dir, tmp_path)
    assert observed.divergence is None and observed.status == "ok"
    types = [e.type for e in observed.events]
    assert (
        types.count("skill.discover")
        == types.count("plan.created")
        == types.count("plan.result")
        == 1
    )
    assert all(
        r.status == "passed"
        for r in evaluate_all(load_case(case_dir).assertions, observed.evidence)
    )


def test_skills_are_discovered_live_in_replay_so_a_changed_skill_diverges(tmp_path: Path) -> None:
    case_dir = _seed_copy(tmp_path)
    skill = case_dir / "input" / "skills" / "release-notes" / "SKILL.md"
    skill.write_text(skill.read_text().replace("short release notes", "long release notes"))
    observed = _replay(case_dir, tmp_path)
    assert observed.divergence is not None and "long release notes" in observed.divergence


def test_a_skill_file_without_front_matter_fails_the_attempt_naming_it(tmp_path: Path) -> None:
    case_dir = _seed_copy(tmp_path)
    skill = case_dir / "input" / "skills" / "changelog-style" / "SKILL.md"
    skill.write_text("no front matter here\n")
    with pytest.raises(ConfigError, match=f"{skill}: no front matter"):
        _replay(case_dir, tmp_path)
