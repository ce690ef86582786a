"""A corpus of wrong command lines (issue 28 point 6), the sibling of test_bad_input_corpus.py:
each `pytest` or `nodeval` invocation exits with a usage status (4, or 7 for the machine),
says the problem in one line naming the option, file or value, and writes nothing: no
report.json, no history row, no half-made output.

The project is the same in every entry: one case (scenarios/hello), a file `afile` to put
paths under, a file `notdb.sqlite` that is not SQLite, and reports/run/report.json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from ..conftest import record_case, write_case

USAGE = 4
MOST_LINES = 6
"""A rejected command line says little on stderr: the problem, and at most argparse's short
usage (pytest prints its session header on stdout before a problem found at collection)."""


@dataclass(frozen=True)
class Wrong:
    id: str
    run: str
    """`pytest ...` (in the project) or `nodeval ...`, split on spaces."""
    says: str
    """The one line that names the problem (fnmatch pattern: * and ? are wildcards)."""
    status: int = USAGE
    setup: Callable[[Path], None] | None = None


def _another_case(root: Path) -> None:
    (root / "scenarios" / "other").mkdir()
    (root / "scenarios" / "other" / "case.yaml").write_text("id: other\n")


PYTEST = [
    # -- paths a run writes, checked before any test runs --------------------------------------
    Wrong(
        "report-dir-under-a-file",
        "pytest --nodeval-report-dir=afile/x",
        "ERROR: --nodeval-report-dir: *afile is a file, not a directory, so *afile/x cannot be "
        "made",
    ),
    Wrong(
        "report-dir-is-a-file",
        "pytest --nodeval-report-dir=afile",
        "ERROR: --nodeval-report-dir: *afile is a file, not a directory",
    ),
    Wrong(
        "ini-report-dir-is-a-file",
        "pytest -o nodeval_report_dir=afile",
        "ERROR: nodeval_report_dir (*): *afile is a file, not a directory",
    ),
    Wrong(
        "ini-history-not-sqlite",
        "pytest -o nodeval_history=notdb.sqlite",
        "ERROR: nodeval_history (*): *notdb.sqlite is not an SQLite file, so it cannot be a "
        "run history",
    ),
    Wrong(
        "ini-history-a-directory",
        "pytest -o nodeval_history=scenarios",
        "ERROR: nodeval_history (*): *scenarios is a directory, not a run history*",
    ),
    Wrong(
        "ini-history-under-a-file",
        "pytest -o nodeval_history=afile/history.sqlite",
        "ERROR: nodeval_history (*): *afile is a file, not a directory*",
    ),
    Wrong(
        "summary-md-under-a-file",
        "pytest --nodeval-summary-md=afile/summary.md",
        "ERROR: --nodeval-summary-md: *afile is a file, not a directory, so *summary.md cannot "
        "be written",
    ),
    Wrong(
        "summary-md-a-directory",
        "pytest --nodeval-summary-md=scenarios",
        "ERROR: --nodeval-summary-md: *scenarios is a directory; name a file",
    ),
    Wrong(
        "ini-cases-a-file",
        "pytest -o nodeval_cases=afile",
        "ERROR: nodeval_cases (*): *afile is a file, not a directory of cases",
    ),
    # -- selection: shards and cases -----------------------------------------------------------
    Wrong(
        "shard-without-value",
        "pytest --nodeval-shard",
        "pytest*: error: argument --nodeval-shard: expected one argument",
    ),
    Wrong(
        "shard-past-the-end",
        "pytest --nodeval-shard=5/4",
        "ERROR: --nodeval-shard: expected K/N with 1 <= K <= N (e.g. 2/4), or auto; got '5/4'",
    ),
    Wrong("shard-zero", "pytest --nodeval-shard=0/4", "ERROR: --nodeval-shard: *got '0/4'"),
    Wrong("shard-word", "pytest --nodeval-shard=half", "ERROR: --nodeval-shard: *got 'half'"),
    Wrong(
        "shard-auto-outside-ci",
        "pytest --nodeval-shard=auto",
        "ERROR: --nodeval-shard=auto: none of the CI variables * is set; pass K/N instead*",
    ),
    Wrong(
        "case-unknown",
        "pytest --nodeval-case=nope",
        "ERROR: --nodeval-case: no case 'nope' under nodeval_cases (*scenarios); "
        "the cases there: hello",
    ),
    Wrong(
        "case-unknown-under-xdist",
        "pytest -n 2 --nodeval-case=nope",
        "ERROR: --nodeval-case: no case 'nope' under nodeval_cases*",
    ),
    Wrong(
        "case-not-collected",
        "pytest scenarios/hello --nodeval-case=other",
        "ERROR: --nodeval-case: no test is bound to case 'other' among the collected tests*",
        setup=_another_case,
    ),
    Wrong(
        "case-not-collected-under-xdist",  # a worker cannot raise it: INTERNALERROR before
        "pytest -n 2 scenarios/hello --nodeval-case=other",
        "ERROR: --nodeval-case: no test is bound to case 'other' among the collected tests*",
        setup=_another_case,
    ),
    # -- --nodeval-from-turn: a turn to go live at, in a live mode, of a case that has it ------
    Wrong(
        "from-turn-zero",
        "pytest --nodeval-mode live --nodeval-from-turn 0",
        "ERROR: --nodeval-from-turn (a user turn, counted from 1) must be a positive integer, "
        "got 0",
    ),
    Wrong(
        "ini-from-turn-word",
        "pytest --nodeval-mode live -o nodeval_from_turn=two",
        "ERROR: nodeval_from_turn (*) (a user turn, counted from 1) must be a positive integer, "
        "got 'two'",
    ),
    Wrong(
        "from-turn-deterministic",
        "pytest --nodeval-from-turn 2",
        "ERROR: --nodeval-from-turn: runs turn 2 onward live, so it needs --nodeval-mode live "
        "or record *; this run's mode is deterministic",
    ),
    Wrong(
        "from-turn-record-mode-none",
        "pytest --nodeval-mode record --nodeval-record-mode none --nodeval-from-turn 2",
        "ERROR: --nodeval-from-turn: runs turn 2 onward live*; this run's mode is record "
        "(replaying)",
    ),
    Wrong(
        "from-turn-no-journal",
        "pytest --nodeval-mode live --nodeval-from-turn 2",
        "ERROR: --nodeval-from-turn: case 'hello' has no journal (*) to replay turn 1 from; "
        "record it first (nodeval record hello), then continue from turn 2",
    ),
    Wrong(
        "from-turn-past-the-last",
        "pytest --nodeval-mode live --nodeval-from-turn 3",
        "ERROR: --nodeval-from-turn: case 'hello' has 1 user turn(s) (1 in its journal, 1 in "
        "input/inputs.yaml); --nodeval-from-turn 3 needs turns 1-2 in the journal and a turn 3 "
        "to run live",
        setup=lambda root: record_case(root / "scenarios" / "hello"),
    ),
    # -- values ----------------------------------------------------------------------------------
    Wrong(
        "repeat-zero",
        "pytest --repeat 0",
        "ERROR: repeat from command line must be an integer from 1 to 10000, got 0",
    ),
    Wrong("repeat-negative", "pytest --repeat -1", "ERROR: repeat from command line *got -1"),
    Wrong(
        "repeat-word",
        "pytest --repeat abc",
        "pytest*: error: argument --repeat: invalid int value: 'abc'",
    ),
    Wrong("repeat-huge", "pytest --repeat 100000", "ERROR: repeat from command line *got 100000"),
    Wrong(
        "ini-repeat-zero",
        "pytest -o nodeval_repeat=0",
        "ERROR: repeat from * must be an integer from 1 to 10000, got '0'",
    ),
    Wrong(
        "mode-bogus",
        "pytest --nodeval-mode bogus",
        "pytest*: error: argument --nodeval-mode: invalid choice: 'bogus' (choose from *)",
    ),
    Wrong(
        "match-loose",
        "pytest --nodeval-match loose",
        "pytest*: error: argument --nodeval-match: invalid choice: 'loose'*",
    ),
    Wrong(
        "world-podman",
        "pytest --nodeval-world podman",
        "pytest*: error: argument --nodeval-world: invalid choice: 'podman'*",
    ),
    Wrong(
        "progress-loud",
        "pytest --nodeval-progress loud",
        "pytest*: error: argument --nodeval-progress: invalid choice: 'loud'*",
    ),
    Wrong(
        "adaptive-maybe",
        "pytest --nodeval-adaptive=maybe",
        "ERROR: adaptive from command line must be on or off, got 'maybe'",
    ),
    Wrong(
        "max-cost-negative",
        "pytest --nodeval-max-cost=-1",
        "ERROR: --nodeval-max-cost must be a positive amount in USD (e.g. 5 or 0.50), got '-1'",
    ),
    Wrong("max-cost-word", "pytest --nodeval-max-cost=lots", "ERROR: --nodeval-max-cost *'lots'"),
    Wrong(
        "journal-limit-word",
        "pytest -o nodeval_max_journal_bytes=lots",
        "ERROR: nodeval_max_journal_bytes *'lots' is not a whole number of bytes above 0",
    ),
    Wrong(
        "journal-limit-zero",
        "pytest -o nodeval_max_journal_bytes=0",
        "ERROR: nodeval_max_journal_bytes *'0' is not a whole number of bytes above 0",
    ),
    Wrong(
        "concurrency-zero",
        "pytest --nodeval-concurrency=0",
        "ERROR: concurrency from command line must be a positive integer, got 0",
    ),
    Wrong(
        "concurrency-word",
        "pytest --nodeval-concurrency=many",
        "pytest*: error: argument --nodeval-concurrency: invalid int value: 'many'",
    ),
    Wrong(
        "record-mode-sometimes",
        "pytest --nodeval-mode record --nodeval-record-mode sometimes",
        "pytest*: error: argument --nodeval-record-mode: invalid choice: 'sometimes' "
        "(choose from *all*missing*none*)",
    ),
    Wrong(
        "record-mode-outside-record-mode",
        "pytest --nodeval-record-mode missing",
        "ERROR: --nodeval-record-mode is for record mode only (--nodeval-mode record); "
        "this run's mode is deterministic (from default)",
    ),
    Wrong(
        "record-mode-in-live-mode",
        "pytest --nodeval-mode live --nodeval-record-mode none",
        "ERROR: --nodeval-record-mode is for record mode only *; this run's mode is live "
        "(from command line)",
    ),
    Wrong(
        "ini-record-mode-sometimes",
        "pytest --nodeval-mode record -o nodeval_record_mode=sometimes",
        "ERROR: nodeval_record_mode (*) must be one of all, missing, none, got 'sometimes'",
    ),
    Wrong(
        "profile-undefined",
        "pytest --nodeval-profile=release",
        "ERROR: --nodeval-profile 'release' is not defined in nodeval_profiles (*); defined: none",
    ),
    Wrong(
        "baseline-a-directory-without-a-report",
        "pytest --nodeval-baseline=scenarios",
        "ERROR: --nodeval-baseline: *scenarios: no report.json here or in its run directories",
    ),
    Wrong(
        "baseline-under-a-file",
        "pytest --nodeval-update-baseline --nodeval-baseline=afile/baseline.json",
        "ERROR: --nodeval-baseline: *afile/baseline.json: no such report or run directory",
    ),
    # -- test paths --------------------------------------------------------------------------
    Wrong(
        "a-path-longer-than-a-file-name-may-be",
        "pytest " + "x" * 300,
        "ERROR: file or directory not found: " + "x" * 300,
    ),
]

NODEVAL = [
    Wrong(
        "no-command",
        "nodeval",
        "nodeval: error: a command is needed, one of: baseline, clean, eval, export-otel, *",
    ),
    Wrong("unknown-command", "nodeval bogus", "nodeval: error: *invalid choice: 'bogus'*"),
    Wrong(
        "history-no-case",
        "nodeval history",
        "nodeval history: error: the following arguments are required: CASE",
    ),
    Wrong(
        "history-not-sqlite",
        "nodeval history hello --history notdb.sqlite",
        "nodeval history: --history: notdb.sqlite is not an SQLite file, so it cannot be a "
        "run history",
    ),
    Wrong(
        "history-a-directory",
        "nodeval history hello --history scenarios",
        "nodeval history: --history: scenarios is a directory, not a run history*",
    ),
    Wrong(
        "history-missing",
        "nodeval history hello --history none.sqlite",
        "nodeval history: none.sqlite: no run history yet*",
    ),
    Wrong(
        "history-limit-negative",
        "nodeval history hello --limit -3",
        "nodeval history: error: argument --limit: expected a positive integer, got '-3'",
    ),
    Wrong(
        "history-limit-word",
        "nodeval history hello --limit all",
        "nodeval history: error: argument --limit: expected a positive integer, got 'all'",
    ),
    Wrong(
        "plan-no-baseline",
        "nodeval plan",
        "nodeval plan: error: the following arguments are required: --baseline",
    ),
    Wrong(
        "plan-repeats-zero",
        "nodeval plan --baseline reports/run --repeats 0",
        "nodeval plan: error: argument --repeats: expected a positive integer, got '0'",
    ),
    Wrong(
        "plan-scenarios-negative",
        "nodeval plan --baseline reports/run --scenarios -2",
        "nodeval plan: error: argument --scenarios: expected a positive integer, got '-2'",
    ),
    Wrong(
        "plan-target-drop-above-one",
        "nodeval plan --baseline reports/run --target-drop 5",
        "nodeval plan: error: argument --target-drop: expected a number above 0 and at most 1, "
        "got '5'",
    ),
    Wrong(
        "plan-baseline-missing",
        "nodeval plan --baseline reports/nope",
        "nodeval plan: reports/nope: no such report or run directory",
    ),
    Wrong(
        "report-history-not-sqlite",
        "nodeval report reports/run --history notdb.sqlite",
        "nodeval report: --history: notdb.sqlite is not an SQLite file*",
    ),
    Wrong(
        "report-history-missing",
        "nodeval report reports/run --history none.sqlite",
        "nodeval report: --history: none.sqlite: no such run history",
    ),
    Wrong(
        "report-rootdir-missing",
        "nodeval report reports/run --rootdir nope",
        "nodeval report: --rootdir: nope: no such directory",
    ),
    Wrong(
        "merge-no-runs",
        "nodeval merge",
        "nodeval merge: error: the following arguments are required: RUN_DIR",
    ),
    Wrong(
        "merge-to-a-file",
        "nodeval merge reports/run --to afile",
        "nodeval merge: --to: afile is a file, not a directory",
    ),
    Wrong(
        "merge-history-not-sqlite",
        "nodeval merge reports/run --history notdb.sqlite",
        "nodeval merge: --history: notdb.sqlite is not an SQLite file*",
    ),
    Wrong(
        "merge-summary-under-a-file",
        "nodeval merge reports/run --summary-md afile/summary.md",
        "nodeval merge: --summary-md: afile is a file, not a directory*",
    ),
    Wrong(
        "merge-rootdir-a-file",
        "nodeval merge reports/run --rootdir afile",
        "nodeval merge: --rootdir: afile is a file, not a directory",
    ),
    Wrong(
        "baseline-no-action",
        "nodeval baseline",
        "nodeval baseline: error: one of the arguments --against --save is required",
    ),
    Wrong(
        "baseline-save-to-under-a-file",
        "nodeval baseline --save reports/run --to afile/baseline.json",
        "nodeval baseline: --to: afile is a file, not a directory, so afile/baseline.json "
        "cannot be written",
    ),
    Wrong(
        "baseline-json-a-directory",
        "nodeval baseline --against reports/run --json scenarios",
        "nodeval baseline: --json: scenarios is a directory; name a file",
    ),
    Wrong(
        "new-no-id", "nodeval new", "nodeval new: error: the following arguments are required: ID"
    ),
    Wrong("new-bad-id", "nodeval new Bad_ID", "nodeval new: 'Bad_ID' is not a valid case id: *"),
    Wrong(
        "new-root-a-file",
        "nodeval new fresh --root afile",
        "nodeval new: --root: afile is a file, not a directory",
    ),
    Wrong(
        "schemas-into-a-file",
        "nodeval schemas afile",
        "nodeval schemas: DIRECTORY: afile is a file, not a directory",
    ),
    Wrong(
        "samples-dir-a-file",
        "nodeval samples --dir afile",
        "nodeval samples: --dir: afile is a file, not a directory",
    ),
    Wrong(
        "samples-dir-missing",
        "nodeval samples --dir nowhere",
        "nodeval samples: --dir: nowhere: no such directory",
    ),
    Wrong(
        "samples-bad-reason",
        "nodeval samples --reason bored",
        "nodeval samples: error: argument --reason: invalid choice: 'bored'*",
    ),
    Wrong(
        "record-no-path",
        "nodeval record",
        "nodeval record: error: the following arguments are required: PATH",
    ),
    Wrong(
        "record-a-file",
        "nodeval record afile",
        "nodeval record: afile: not a case directory or a directory of cases (a file)",
    ),
    Wrong(
        "record-nothing-there",
        "nodeval record nope",
        "nodeval record: nope: not a case directory or a directory of cases (no such directory)",
    ),
    Wrong(
        "record-world-podman",
        "nodeval record scenarios/hello --world podman",
        "nodeval record: error: argument --world: invalid choice: 'podman'*",
    ),
    Wrong(
        "record-command-mode-sometimes",
        "nodeval record scenarios/hello --record-mode sometimes",
        "nodeval record: error: argument --record-mode: invalid choice: 'sometimes' "
        "(choose from *all*missing*none*)",
    ),
    Wrong(
        "promote-cases-dir-a-file",
        "nodeval promote some-sample --id fresh --cases-dir afile",
        "nodeval promote: --cases-dir: afile is a file, not a directory",
    ),
    Wrong(
        "eval-without-a-mode",
        "nodeval eval",
        "nodeval eval: error: the following arguments are required: --inspect-mode",
    ),
    Wrong(
        "clean-run-id-without-value",
        "nodeval clean --run-id",
        "nodeval clean: error: argument --run-id: expected one argument",
    ),
]

CORPUS = PYTEST + NODEVAL


@pytest.mark.parametrize("wrong", CORPUS, ids=[w.id for w in CORPUS])
def test_a_wrong_command_line_says_one_line_and_writes_nothing(
    wrong: Wrong,
    nodeval_project: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = nodeval_project.path
    _lay_out(root, monkeypatch)
    if wrong.setup is not None:
        wrong.setup(root)
    before = _files(root)
    command = wrong.run.split()
    if command[0] == "pytest":
        result = nodeval_project.runpytest(*command[1:])
        status, out, err = result.ret, result.stdout.str(), result.stderr.str()
    else:
        status, out, err = _nodeval(command[1:], root, capsys, monkeypatch)
    output = f"{out}\n{err}"
    assert status == wrong.status, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    said = [line for line in err.splitlines() if line.strip()]
    shown = [line for line in said if fnmatchcase(line, wrong.says)]
    assert len(shown) == 1, f"expected one line like {wrong.says!r} on stderr:\n{output}"
    assert len(said) <= MOST_LINES, output
    assert _files(root) == before, "a rejected command line wrote files"


def test_the_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 40
    assert len({w.id for w in CORPUS}) == len(CORPUS)


def _lay_out(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_case(
        root / "scenarios",
        "hello",
        script=[{"text": "Hello there."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
        record=False,
    )
    (root / "afile").write_text("")
    (root / "notdb.sqlite").write_text("a text file, not a database\n")
    (root / "reports" / "run").mkdir(parents=True)
    (root / "reports" / "run" / "report.json").write_text("{}")
    for variable in ("CI_NODE_INDEX", "CI_NODE_TOTAL", "BUILDKITE_PARALLEL_JOB"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _nodeval(
    argv: list[str],
    root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[int, str, str]:
    from pytest_nodeval.cli import main

    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(root / "home"))  # promote and samples look under ~/.nodeval
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors exit from inside main
        status = int(exc.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _files(root: Path) -> set[str]:
    """Every file and directory of the project but pytest's cache."""
    return {
        str(path.relative_to(root))
        for path in root.rglob("*")
        if ".pytest_cache" not in path.parts and "__pycache__" not in path.parts
    }
