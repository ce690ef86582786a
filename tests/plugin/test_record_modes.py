"""Record modes (issue 30), as vcrpy's: `--nodeval-record-mode` all, missing or none for
`pytest --nodeval-mode record`, and `nodeval record --record-mode`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import write_case

ANSWER = [{"text": "Hello there."}]
RECORD = ("--nodeval-mode", "record", "--nodeval-world", "local", "-rs")


def _two_cases(root: Path, *, record: bool = False) -> tuple[Path, Path]:
    return (
        write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=[], record=record),
        write_case(root, "beta", script=ANSWER, inputs=["hi"], assertions=[], record=record),
    )


def _files(journal: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(journal.iterdir())}


def _edit_assertions(case_dir: Path) -> None:
    (case_dir / "assertions.yaml").write_text(
        yaml.safe_dump([{"kind": "output_contains", "text": "Hello"}])
    )


def _nodeval(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_nodeval.cli", *args], cwd=cwd, capture_output=True, text=True
    )


def test_missing_records_only_the_case_whose_assertions_changed(
    nodeval_project: pytest.Pytester,
) -> None:
    alpha, beta = _two_cases(nodeval_project.path / "scenarios")
    nodeval_project.runpytest(*RECORD).assert_outcomes(passed=2)  # all, the default
    kept_alpha, kept_beta = _files(alpha / "journal"), _files(beta / "journal")
    assert "case_digests" in kept_alpha["header.json"].decode()
    _edit_assertions(beta)

    result = nodeval_project.runpytest(*RECORD, "--nodeval-record-mode", "missing")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "nodeval: recorded: scenarios/beta/journal (changed: header.json case_digests "
            "(assertions.yaml edited); passed*",
            "SKIPPED*journal is current (--nodeval-record-mode=missing)",
        ]
    )
    assert _files(alpha / "journal") == kept_alpha
    recorded = _files(beta / "journal")
    assert recorded["events.jsonl"] == kept_beta["events.jsonl"], "the agent did the same"
    assert recorded["header.json"] != kept_beta["header.json"]

    # The ini key; with attempts started ahead of their tests, a current case starts none.
    again = nodeval_project.runpytest(
        *RECORD, "-o", "nodeval_record_mode=missing", "--nodeval-concurrency", "2"
    )
    again.assert_outcomes(skipped=2)
    assert not (nodeval_project.path / "reports" / "latest" / "_sessions").exists()


def test_missing_records_a_case_without_a_journal(nodeval_project: pytest.Pytester) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=[])
    fresh = write_case(root, "fresh", script=ANSWER, inputs=["hi"], assertions=[], record=False)
    result = nodeval_project.runpytest(*RECORD, "--nodeval-record-mode=missing")
    result.assert_outcomes(passed=1, skipped=1)
    assert (fresh / "journal" / "events.jsonl").is_file()


def test_all_records_every_case_and_writes_only_what_changed(
    nodeval_project: pytest.Pytester,
) -> None:
    alpha, beta = _two_cases(nodeval_project.path / "scenarios", record=True)
    kept = _files(alpha / "journal")
    result = nodeval_project.runpytest(*RECORD, "--nodeval-record-mode", "all")
    result.assert_outcomes(passed=2)
    assert _files(alpha / "journal") == kept


def test_none_replays_cases_with_a_journal_and_fails_those_without(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    recorded = write_case(
        root,
        "alpha",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "Hello there"}],
    )
    kept = _files(recorded / "journal")
    # Run live, the mock would now answer otherwise: the case passes only by replaying.
    write_case(
        root,
        "alpha",
        script=[{"text": "Goodbye."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "Hello there"}],
        record=False,
    )
    fresh = write_case(root, "fresh", script=ANSWER, inputs=["hi"], assertions=[], record=False)
    result = nodeval_project.runpytest(*RECORD, "--nodeval-record-mode", "none")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*case 'fresh' has no journal, and --nodeval-record-mode=none records nothing: "
            "record it with --nodeval-record-mode=missing, or `nodeval record scenarios/fresh`",
            "nodeval: --nodeval-record-mode=none: nothing was recorded; cases with a journal "
            "replayed it",
        ]
    )
    assert _files(recorded / "journal") == kept
    assert not (fresh / "journal").exists()


def test_nodeval_record_missing_records_only_the_changed_case(
    nodeval_project: pytest.Pytester,
) -> None:
    project = nodeval_project.path
    alpha, beta = _two_cases(project / "scenarios")
    first = _nodeval(project, "record", "scenarios", "--world", "local")
    assert first.returncode == 0, first.stderr
    kept_alpha, kept_beta = _files(alpha / "journal"), _files(beta / "journal")
    _edit_assertions(beta)

    done = _nodeval(project, "record", "scenarios", "--world", "local", "--record-mode", "missing")
    assert done.returncode == 0, done.stderr
    assert "skipped scenarios/alpha/journal: unchanged (journal current)\n" in done.stdout
    assert "(changed: header.json case_digests (assertions.yaml edited))\n" in done.stdout, (
        done.stdout
    )
    assert "2 case(s): 1 recorded (1 new or changed, 0 unchanged), 1 skipped, 0 not recorded" in (
        done.stdout
    )
    assert _files(alpha / "journal") == kept_alpha
    assert _files(beta / "journal")["events.jsonl"] == kept_beta["events.jsonl"]
    assert _files(beta / "journal")["header.json"] != kept_beta["header.json"]

    again = _nodeval(project, "record", "scenarios", "--world", "local", "--record-mode", "missing")
    assert again.returncode == 0 and again.stdout.count("unchanged (journal current)") == 2


def test_nodeval_record_none_only_checks_that_every_case_has_a_journal(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    recorded = write_case(root, "alpha", script=ANSWER, inputs=["hi"], assertions=[])
    kept = _files(recorded / "journal")
    write_case(root, "fresh", script=ANSWER, inputs=["hi"], assertions=[], record=False)
    done = _nodeval(nodeval_project.path, "record", "scenarios", "--record-mode", "none")
    assert done.returncode == 1
    assert "skipped scenarios/alpha/journal: has a journal (--record-mode none)" in done.stdout
    assert (
        "not recorded scenarios/fresh: no journal, and --record-mode none records nothing: "
        "record it with `nodeval record scenarios/fresh` (or --record-mode missing)"
    ) in done.stderr
    assert _files(recorded / "journal") == kept
    assert not (root / "fresh" / "journal").exists()
    only = _nodeval(nodeval_project.path, "record", "scenarios/alpha", "--record-mode", "none")
    assert only.returncode == 0, only.stderr
