"""`pytest scenarios/ID` for your own agent's case runs the tests bound to it, wherever they
are in the test tree (issue 30): IDEs run a directory or a file."""

from __future__ import annotations

import pytest

BOUND = """
import pytest

@pytest.mark.nodeval_case("mine")
def test_mine(nodeval_case):
    assert nodeval_case.id == "mine"

@pytest.mark.nodeval_case("theirs")
def test_theirs(nodeval_case):
    pass

def test_unbound():
    pass
"""


@pytest.fixture
def project(nodeval_project: pytest.Pytester) -> pytest.Pytester:
    """Two own agents' cases, their tests in tests/, one of pytest's testpaths."""
    ini = nodeval_project.path / "tox.ini"
    ini.write_text(ini.read_text().replace("testpaths = scenarios", "testpaths = scenarios tests"))
    for case_id in ("mine", "theirs"):
        case_dir = nodeval_project.path / "scenarios" / case_id
        case_dir.mkdir()
        (case_dir / "case.yaml").write_text(f"id: {case_id}\n")
        (case_dir / "assertions.yaml").write_text("[]\n")
    tests = nodeval_project.path / "tests"
    tests.mkdir()
    (tests / "test_agents.py").write_text(BOUND)
    (tests / "test_other.py").write_text("def test_other():\n    pass\n")
    return nodeval_project


@pytest.mark.parametrize("arg", ["scenarios/mine", "scenarios/mine/case.yaml"])
def test_a_directory_or_its_case_yaml_runs_the_bound_tests_alone(
    project: pytest.Pytester, arg: str
) -> None:
    result = project.runpytest(arg, "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*tests/test_agents.py::test_mine*PASSED*"])


def test_other_arguments_keep_their_tests(project: pytest.Pytester) -> None:
    result = project.runpytest("scenarios/mine", "tests/test_other.py", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random(["*::test_mine*PASSED*", "*::test_other*PASSED*"])


def test_xdist_workers_select_the_same_tests(project: pytest.Pytester) -> None:
    result = project.runpytest("scenarios/theirs", "-n", "2", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*::test_theirs*"])


def test_a_case_no_test_is_bound_to_is_one_line(project: pytest.Pytester) -> None:
    (project.path / "scenarios" / "lonely").mkdir()
    (project.path / "scenarios" / "lonely" / "case.yaml").write_text("id: lonely\n")
    result = project.runpytest("scenarios/lonely")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: scenarios/lonely: your own agent's case, but no test under scenarios, tests "
            "is bound to it; bind one with @pytest.mark.nodeval_case('lonely')"
        ]
    )
