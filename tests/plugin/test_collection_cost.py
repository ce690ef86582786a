"""What collection does per case, counted (not timed): pytest never walks inside a case
directory, only case.yaml is read until a case runs, and a bad file fails only its case."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ..conftest import write_case

ANSWER = [{"text": "Hello there."}]
PASSING = [{"kind": "output_contains", "text": "hello"}]


class _Seen:
    """Every path pytest offers to the collection hooks (a plugin of the inner run)."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def pytest_ignore_collect(self, collection_path: Path) -> None:
        self.paths.append(collection_path)

    def pytest_collect_file(self, file_path: Path) -> None:
        self.paths.append(file_path)


def _unrecorded(root: Path, name: str) -> Path:
    """A case with every file a case can hold, a journal's files and a stray test file in input/."""
    directory = write_case(
        root, name, script=ANSWER, inputs=["hi"], assertions=PASSING, record=False
    )
    (directory / "journal").mkdir()
    (directory / "journal" / "header.json").write_text("{}")
    (directory / "journal" / "events.jsonl").write_text("")
    (directory / "input" / "world" / "src").mkdir(parents=True)
    (directory / "input" / "world" / "src" / "test_inside.py").write_text(
        "def test_inside():\n    pass\n"
    )
    return directory


def test_collection_lists_nothing_inside_a_case_directory(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    cases = [_unrecorded(root / "group", f"case-{i}") for i in range(5)]
    (root / "test_beside.py").write_text("def test_beside():\n    pass\n")
    (root / "group" / "test_parent.py").write_text("def test_in_parent():\n    pass\n")
    seen = _Seen()
    result = nodeval_project.runpytest("--collect-only", "-q", plugins=[seen])
    result.stdout.fnmatch_lines(
        [
            "scenarios/group/case-0/case.yaml::test_scenario[[]case-0[]]",
            "scenarios/group/test_parent.py::test_in_parent",
            "scenarios/test_beside.py::test_beside",
            "*7 tests collected*",
        ]
    )
    inside = [
        p
        for p in seen.paths
        for case in cases
        if p.is_relative_to(case) and p not in (case, case / "case.yaml")
    ]
    assert inside == []


def test_collection_reads_case_yaml_only(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = nodeval_project.path / "scenarios"
    for name in ("alpha", "beta"):
        write_case(root, name, script=ANSWER, inputs=["hi"], assertions=PASSING)
    read: list[Path] = []
    for method in ("read_text", "read_bytes"):
        original = getattr(Path, method)

        def recording(self: Path, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            read.append(self)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Path, method, recording)

    def opening(path: Any, *args: Any, _original: Any = os.open, **kwargs: Any) -> Any:
        read.append(Path(os.fsdecode(path)))  # how the YAML files are read (yamlfiles.py)
        return _original(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", opening)
    nodeval_project.runpytest("--collect-only", "-q").stdout.fnmatch_lines(["*2 tests collected*"])
    assert sorted(p.relative_to(root).as_posix() for p in read if p.is_relative_to(root)) == [
        "alpha/case.yaml",
        "beta/case.yaml",
    ]
    read.clear()
    nodeval_project.runpytest("-k", "alpha").assert_outcomes(passed=1, deselected=1)
    assert {"alpha/assertions.yaml", "alpha/input/config.yaml", "alpha/input/inputs.yaml"} <= {
        p.relative_to(root).as_posix() for p in read if p.is_relative_to(root)
    }
    assert not any(p.is_relative_to(root / "beta") and p.name != "case.yaml" for p in read)


def test_a_broken_assertions_yaml_fails_only_its_case(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    for name in ("alpha", "beta"):
        write_case(root, name, script=ANSWER, inputs=["hi"], assertions=PASSING)
    (root / "alpha" / "assertions.yaml").write_text("- kind: output_contains\n  text: [unclosed\n")
    (root / "test_bound.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.nodeval_case('alpha')\ndef test_bound(nodeval_run):\n    pass\n"
    )
    result = nodeval_project.runpytest("--repeat", "2")
    result.assert_outcomes(passed=2, errors=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_scenario[[]alpha[]]*",
            "*scenarios/alpha/assertions.yaml:3:1: invalid YAML*",
            "*ERROR at setup of test_bound[[]alpha-r2[]]*",
            "*scenarios/alpha/assertions.yaml:3:1: invalid YAML*",
            "alpha * error",
            "beta * 2/2 * passed",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "pytest_nodeval" not in result.stdout.str()


def test_a_config_that_needs_inputs_fails_its_case_naming_the_file(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=PASSING)
    (root / "alpha" / "input" / "inputs.yaml").unlink()
    (root / "test_other.py").write_text("def test_other():\n    pass\n")
    result = nodeval_project.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_scenario[[]alpha[]]*",
            "*scenarios/alpha/input/inputs.yaml: missing (a case with input/config.yaml needs*",
        ]
    )


class _Items:
    """What a run collected, item by item, as far as selection, reports and fixtures see it."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            assert isinstance(item, pytest.Function)
            spec = item.callspec
            self.seen.append(
                (
                    item.nodeid,
                    item.originalname,
                    [(m.name, m.args) for m in item.iter_markers()],
                    sorted(item.keywords),
                    (spec.params, spec.indices, dict(spec._arg2scope), spec.id, spec.marks),
                    item.fixturenames,
                    (item.function, item.instance, item.module),
                )
            )


class _GenericPath:
    """A plugin with a pytest_generate_tests of its own: every case goes through pytest's
    generic path, as that plugin must see each of them."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        self.seen.append(metafunc.definition.nodeid)


def test_cases_beside_one_another_get_the_items_pytest_would_make(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = nodeval_project.path / "scenarios"
    cases = {
        root: [("alpha", {"tags": ["pr"]}), ("beta", {"repeat": 2}), ("gamma", {})],
        root / "group": [("delta", {"tags": ["pr", "nightly"]}), ("eta", {})],
    }
    for where, made in cases.items():
        for name, case in made:
            write_case(where, name, script=ANSWER, inputs=["hi"], assertions=PASSING, case=case)
    # A case with a conftest.py of its own (its fixtures may differ) is made apart.
    (root / "gamma" / "conftest.py").write_text("")
    from pytest_nodeval.plugin import collect

    metafuncs: list[str] = []

    def counting(metafunc: pytest.Metafunc, _original: Any = collect.parametrize_case) -> None:
        metafuncs.append(metafunc.definition.nodeid)
        _original(metafunc)

    monkeypatch.setattr(collect, "parametrize_case", counting)
    fast, generic, hook = _Items(), _Items(), _GenericPath()
    nodeval_project.runpytest("--collect-only", "-q", plugins=[fast]).assert_outcomes()
    assert len(metafuncs) == 3  # the first case of scenarios/ and of group/, and gamma
    metafuncs.clear()
    nodeval_project.runpytest("--collect-only", "-q", plugins=[generic, hook]).assert_outcomes()
    assert len(metafuncs) == len(hook.seen) == 5
    assert len(fast.seen) == 6
    assert fast.seen == generic.seen


@pytest.mark.parametrize(
    ("args", "conftest"),
    [
        (["--ignore=scenarios/group/beta/case.yaml"], ""),
        (["--ignore-glob=*/beta/case.yaml"], ""),
        ([], "collect_ignore = ['beta/case.yaml']\n"),
        ([], "collect_ignore_glob = ['b*/case.*']\n"),
        (
            [],
            "def pytest_ignore_collect(collection_path):\n"
            "    return True if collection_path.parent.name == 'beta' else None\n",
        ),
    ],
    ids=["ignore", "ignore-glob", "collect_ignore", "collect_ignore_glob", "hook"],
)
def test_anything_that_can_ignore_a_case_yaml_still_does(
    nodeval_project: pytest.Pytester, args: list[str], conftest: str
) -> None:
    """The check pytest_ignore_collect makes on case.yaml is skipped only when nothing could
    ignore it: each way of ignoring a file must still drop its case, and only its case."""
    group = nodeval_project.path / "scenarios" / "group"
    for name in ("alpha", "beta", "gamma"):
        write_case(group, name, script=ANSWER, inputs=["hi"], assertions=PASSING)
    (group / "conftest.py").write_text(conftest)
    result = nodeval_project.runpytest("--collect-only", "-q", *args)
    result.stdout.fnmatch_lines(
        [
            "scenarios/group/alpha/case.yaml::test_scenario[[]alpha[]]",
            "scenarios/group/gamma/case.yaml::test_scenario[[]gamma[]]",
            "*2 tests collected*",
        ]
    )
    assert "beta" not in result.stdout.str()


def test_a_case_directory_s_own_conftest_can_ignore_its_case_yaml(
    nodeval_project: pytest.Pytester,
) -> None:
    """Whether anything could ignore a case.yaml is asked once for the cases beside one
    another, but a case directory with a conftest.py of its own is asked apart."""
    group = nodeval_project.path / "scenarios" / "group"
    for name in ("alpha", "beta", "gamma"):
        write_case(group, name, script=ANSWER, inputs=["hi"], assertions=PASSING)
    (group / "beta" / "conftest.py").write_text("collect_ignore = ['case.yaml']\n")
    result = nodeval_project.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "scenarios/group/alpha/case.yaml::test_scenario[[]alpha[]]",
            "scenarios/group/gamma/case.yaml::test_scenario[[]gamma[]]",
            "*2 tests collected*",
        ]
    )
    assert "beta" not in result.stdout.str()


def test_a_plugin_that_comes_in_during_collection_can_ignore_the_cases_after_it(
    nodeval_project: pytest.Pytester,
) -> None:
    """The answer kept for the cases beside one another is not kept past a plugin that
    implements pytest_ignore_collect and is registered while they are collected."""
    group = nodeval_project.path / "scenarios" / "group"
    for name in ("alpha", "beta", "gamma"):
        write_case(group, name, script=ANSWER, inputs=["hi"], assertions=PASSING)
    (group / "conftest.py").write_text(
        "class Ignorer:\n"
        "    def pytest_ignore_collect(self, collection_path):\n"
        "        return True if collection_path.parent.name == 'gamma' else None\n\n"
        "def pytest_collectstart(collector):\n"
        "    if collector.path.parent.name == 'beta':  # its case.yaml\n"
        "        collector.config.pluginmanager.register(Ignorer())\n"
    )
    result = nodeval_project.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["*alpha*", "*beta*", "*2 tests collected*"])
    assert "gamma" not in result.stdout.str()
