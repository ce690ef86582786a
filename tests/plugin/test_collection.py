"""Collecting case directories into tests: ids, markers, profiles, bad input."""

from __future__ import annotations

import pytest

from ..conftest import PROJECT_INI, write_case

ANSWER = [{"text": "Hello there."}]
PASSING = [{"kind": "output_contains", "text": "hello"}]


def test_each_case_is_a_test_with_a_deterministic_id(nodeval_project: pytest.Pytester) -> None:
    for name in ("beta", "alpha"):
        write_case(
            nodeval_project.path / "scenarios",
            name,
            script=ANSWER,
            inputs=["hi"],
            assertions=PASSING,
        )
    result = nodeval_project.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "scenarios/alpha/case.yaml::test_scenario[[]alpha[]]",
            "scenarios/beta/case.yaml::test_scenario[[]beta[]]",
        ]
    )


def test_repeats_get_r_suffixes(nodeval_project: pytest.Pytester) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "alpha",
        script=ANSWER,
        inputs=["hi"],
        assertions=PASSING,
    )
    result = nodeval_project.runpytest("--collect-only", "-q", "--repeat", "3")
    result.stdout.fnmatch_lines(
        [
            "*test_scenario[[]alpha[]]",
            "*test_scenario[[]alpha-r2[]]",
            "*test_scenario[[]alpha-r3[]]",
        ]
    )


def test_a_case_repeat_applies_unless_the_command_line_says_repeat(
    nodeval_project: pytest.Pytester,
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "alpha",
        script=ANSWER,
        inputs=["hi"],
        assertions=PASSING,
        case={"repeat": 2},
    )
    nodeval_project.runpytest("--collect-only", "-q").stdout.fnmatch_lines(["*2 tests collected*"])
    nodeval_project.runpytest("--collect-only", "-q", "--repeat", "1").stdout.fnmatch_lines(
        ["*1 test collected*"]
    )


def test_tags_become_registered_markers(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "alpha",
        script=ANSWER,
        inputs=["hi"],
        assertions=PASSING,
        case={"tags": ["pr", "release"]},
    )
    write_case(
        root, "beta", script=ANSWER, inputs=["hi"], assertions=PASSING, case={"tags": ["release"]}
    )
    result = nodeval_project.runpytest(
        "-m", "pr", "--strict-markers", "-W", "error::pytest.PytestUnknownMarkWarning"
    )
    result.assert_outcomes(passed=1, deselected=1)
    assert "PytestUnknownMarkWarning" not in result.stdout.str()


def test_k_selects_one_case(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    for name in ("alpha", "beta", "gamma"):
        write_case(root, name, script=ANSWER, inputs=["hi"], assertions=PASSING)
    nodeval_project.runpytest("-k", "beta").assert_outcomes(passed=1, deselected=2)


def test_malformed_case_yaml_is_a_collection_error_naming_file_and_field(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=PASSING)
    (root / "alpha" / "case.yaml").write_text("id: alpha\nrepeat: many\nowner: me\ncolour: blue\n")
    result = nodeval_project.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting scenarios/alpha/case.yaml*",
            "*scenarios/alpha/case.yaml: repeat: Input should be a valid integer* (got 'many')",
            "*scenarios/alpha/case.yaml: colour: unknown key "
            "(valid keys: schema_version, id, name*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_invalid_yaml_names_the_line(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=PASSING)
    (root / "alpha" / "assertions.yaml").write_text("- kind: output_contains\n  text: [unclosed\n")
    result = nodeval_project.runpytest()
    result.stdout.fnmatch_lines(["*scenarios/alpha/assertions.yaml:3:1: invalid YAML*"])


def test_unknown_config_key_names_file_and_key(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=PASSING)
    config = root / "alpha" / "input" / "config.yaml"
    config.write_text(config.read_text() + "limits: {max_turn: 3}\n")
    result = nodeval_project.runpytest()
    result.stdout.fnmatch_lines(
        [
            "*input/config.yaml: limits.max_turn: unknown key "
            "(valid keys: max_turns, max_tokens, timeout_s, tool_timeout_s)"
        ]
    )


def test_duplicate_case_ids_are_an_error_naming_both_files(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=PASSING)
    write_case(
        root / "more",
        "alpha-copy",
        script=ANSWER,
        inputs=["hi"],
        assertions=PASSING,
        case={"id": "alpha"},
    )
    result = nodeval_project.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*duplicate case id 'alpha': "
            "*scenarios/alpha/case.yaml and *scenarios/more/alpha-copy/case.yaml*"
        ]
    )


def test_profiles_from_markers(nodeval_project: pytest.Pytester) -> None:
    nodeval_project.makeini(
        PROJECT_INI + "nodeval_profiles =\n    release: repeat=3\n    pr: repeat=1\n"
    )
    write_case(
        nodeval_project.path / "scenarios",
        "alpha",
        script=ANSWER,
        inputs=["hi"],
        assertions=PASSING,
        case={"tags": ["pr", "release"]},
    )
    nodeval_project.runpytest("-m", "release").assert_outcomes(passed=3)
    nodeval_project.runpytest("-m", "pr").assert_outcomes(passed=1)
    # CLI over profile
    nodeval_project.runpytest("-m", "release", "--repeat", "2").assert_outcomes(passed=2)
    result = nodeval_project.runpytest("-m", "pr or release")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*selects several profiles (pr, release); choose one with --nodeval-profile*"]
    )


def test_bad_profile_value_names_its_source(nodeval_project: pytest.Pytester) -> None:
    nodeval_project.makeini(PROJECT_INI + "nodeval_profiles =\n    release: mode=livee\n")
    result = nodeval_project.runpytest("-m", "release")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*mode from profile 'release' (*tox.ini) "
            "must be one of deterministic, full, live, record, got 'livee'*"
        ]
    )


def test_bad_ini_repeat_names_the_ini_file(nodeval_project: pytest.Pytester) -> None:
    nodeval_project.makeini(PROJECT_INI + "nodeval_repeat = 0\n")
    result = nodeval_project.runpytest()
    result.stderr.fnmatch_lines(
        ["*repeat from *tox.ini must be an integer from 1 to 10000, got '0'*"]
    )


def test_record_mode_collects_one_attempt_per_case(nodeval_project: pytest.Pytester) -> None:
    """A recording is one attempt: neither --repeat nor a case's own repeat makes more."""
    root = nodeval_project.path / "scenarios"
    write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=PASSING, record=False)
    write_case(root, "beta", script=ANSWER, inputs=["hi"], case={"repeat": 3}, record=False)
    for repeat in ([], ["--repeat", "2"]):
        result = nodeval_project.runpytest("--nodeval-mode", "record", "--collect-only", *repeat)
        result.stdout.fnmatch_lines(["*2 tests collected*"])


def test_a_stale_journal_warns_naming_the_case(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    case = write_case(
        root, "alpha", script=ANSWER, inputs=["hi"], assertions=PASSING, case={"freshness": "30d"}
    )
    header = case / "journal" / "header.json"
    header.write_text(
        header.read_text().replace(header.read_text().split('"created_at": "')[1][:4], "2020", 1)
    )
    result = nodeval_project.runpytest()
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*NodevalWarning: case 'alpha' (*scenarios/alpha/case.yaml): its journal is * day(s) "
            "past its freshness window (30d); re-record it with `nodeval record *"
        ]
    )


def test_runs_without_xdist_loaded(nodeval_project: pytest.Pytester) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "alpha",
        script=ANSWER,
        inputs=["hi"],
        assertions=PASSING,
    )
    nodeval_project.runpytest("-p", "no:xdist").assert_outcomes(passed=1)


def test_node_ids_case_directories_and_last_failed_select_cases(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=PASSING)
    write_case(
        root,
        "beta",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "bye"}],
    )
    by_id = nodeval_project.runpytest(
        "scenarios/alpha/case.yaml::test_scenario[alpha-r2]", "--repeat", "2", "-v"
    )
    by_id.assert_outcomes(passed=1)
    by_id.stdout.fnmatch_lines(["scenarios/alpha/case.yaml::test_scenario[[]alpha-r2[]] PASSED*"])
    nodeval_project.runpytest("scenarios/beta", "--repeat", "2").assert_outcomes(failed=2)
    nodeval_project.runpytest("--repeat", "2").assert_outcomes(passed=2, failed=2)
    last_failed = nodeval_project.runpytest("--lf", "--repeat", "2", "-v")
    last_failed.assert_outcomes(failed=2)
    last_failed.stdout.fnmatch_lines(["scenarios/beta/case.yaml::test_scenario[[]beta[]] FAILED*"])


def test_pytest_markers_lists_the_profiles_and_the_case_tags(
    nodeval_project: pytest.Pytester,
) -> None:
    nodeval_project.makeini(
        PROJECT_INI + "nodeval_profiles =\n    pr: repeat=1\n    release: mode=live repeat=5\n"
    )
    write_case(
        nodeval_project.path / "scenarios",
        "tagged",
        script=[{"text": "hi"}],
        inputs=["hi"],
        case={"tags": ["pr", "billing"]},
    )
    result = nodeval_project.runpytest("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.pr: the nodeval profile 'pr' (nodeval_profiles: repeat=1)*",
            "@pytest.mark.release: the nodeval profile 'release'*",
            "@pytest.mark.billing: cases tagged 'billing' (pytest-nodeval)",
        ]
    )
    assert result.stdout.str().count("@pytest.mark.pr:") == 1


def test_a_case_outside_the_case_roots_gets_a_hint(nodeval_project: pytest.Pytester) -> None:
    write_case(nodeval_project.path / "elsewhere", "lost", script=[{"text": "hi"}], inputs=["hi"])
    result = nodeval_project.runpytest("elsewhere/lost")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        [
            "nodeval: elsewhere/lost holds a case, but it is not under the case roots "
            "(nodeval_cases: scenarios), so it is not collected; add its root to nodeval_cases"
        ]
    )


def test_a_path_option_given_apart_from_its_value_is_not_taken_for_the_rootdir(
    nodeval_project: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """pytest sees `--nodeval-report-dir DIR` before our plugin defines the option: an
    existing DIR outside the project would become the rootdir and the ini be skipped."""
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    elsewhere = tmp_path_factory.mktemp("reports-elsewhere")
    apart = nodeval_project.runpytest("--nodeval-report-dir", str(elsewhere))
    assert apart.ret == pytest.ExitCode.USAGE_ERROR
    apart.stderr.fnmatch_lines(
        [
            f"ERROR: --nodeval-report-dir {elsewhere}: pytest read this value as a test path*"
            f"write --nodeval-report-dir={elsewhere} (one argument)"
        ]
    )
    joined = nodeval_project.runpytest(f"--nodeval-report-dir={elsewhere}")
    joined.assert_outcomes(passed=1)
    # Within the project: harmless
    inside = nodeval_project.runpytest("--nodeval-report-dir", "scenarios")
    inside.assert_outcomes(passed=1)


def test_paths_on_the_command_line_are_relative_to_where_pytest_runs(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    monkeypatch.chdir(nodeval_project.path / "scenarios")
    nodeval_project.runpytest("--nodeval-report-dir", "../from-a-subdir").assert_outcomes(passed=1)
    assert (nodeval_project.path / "from-a-subdir" / "latest" / "report.json").is_file()
    blessed = nodeval_project.path / "from-a-subdir" / "latest" / "report.json"
    gated = nodeval_project.runpytest("--nodeval-baseline", "../from-a-subdir/latest/report.json")
    gated.assert_outcomes(passed=1)
    gated.stdout.fnmatch_lines(["nodeval gate: *"])
    assert blessed.is_file() and not (nodeval_project.path / "scenarios" / "from-a-subdir").exists()
