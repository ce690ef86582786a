"""Crash safety of recording (issue 18): `nodeval record` and `pytest --nodeval-mode record`
killed with SIGKILL at 50 random points. The golden journal is never torn (the old one or
the whole new one), the observed journal reads up to its last complete event, and
recording again succeeds."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_nodeval.case.directory import JOURNALS, load_case
from pytest_nodeval.journal.reader import read_golden, read_journal
from pytest_nodeval.journal.writer import install_journal
from tests.conftest import PYTEST_ADDOPTS

from ..conftest import PROJECT_INI, write_case

STEPS = 8
KILLS = 25  # per entry point
POINTS = [
    (entry, delay)
    for entry in ("nodeval record", "pytest record")
    for delay in random.Random(18).sample([round(0.2 + i * 0.11, 2) for i in range(40)], KILLS)
]


def _slow_case(root: Path) -> Path:
    """A recorded case whose recording takes a while: eight shell calls that each sleep."""
    script = []
    for step in range(STEPS):
        script.append(
            {"tool_calls": [{"name": "shell", "args": {"command": f"sleep 0.05; echo {step}"}}]}
        )
    script.append({"text": "all steps done"})
    return write_case(
        root,
        "slow",
        script=script,
        inputs=["go"],
        tools=["shell"],
        assertions=[{"kind": "output_contains", "text": "done"}],
        case={"world": {"backend": "local"}},
    )


def _command(entry: str, project: Path) -> list[str]:
    if entry == "nodeval record":
        return [sys.executable, "-m", "pytest_nodeval.cli", "record", "scenarios/slow", "--force"]
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--nodeval-mode=record",
        "--nodeval-world=local",
        "--nodeval-record-force",
        "scenarios",
    ]


@pytest.mark.parametrize(
    ("entry", "delay"), POINTS, ids=[f"{e.split()[0]}-{d}s" for e, d in POINTS]
)
def test_a_killed_recording_leaves_a_whole_journal(
    entry: str, delay: float, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "scenarios").mkdir(parents=True)
    (project / "tox.ini").write_text(PROJECT_INI)
    case_dir = _slow_case(project / "scenarios")
    golden_before = (case_dir / "journal" / "events.jsonl").read_bytes()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTEST_ADDOPTS"] = PYTEST_ADDOPTS
    env.pop("PYTEST_XDIST_WORKER", None)
    process = subprocess.Popen(
        _command(entry, project),
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(delay)
    os.killpg(process.pid, signal.SIGKILL)  # the process and the shell commands it started
    process.wait()

    # The golden journal: as a reader finds it (Case.journal repairs a half-done install).
    JOURNALS.clear()
    journal = load_case(case_dir).journal()
    after = (case_dir / "journal" / "events.jsonl").read_bytes()
    assert (
        after == golden_before or read_golden(case_dir / "journal").events[-1].type == "session.end"
    )
    assert journal.events

    # Every observed journal the killed process left reads up to its last complete event.
    observed = [
        *scratch.glob("nodeval-record-*/journal"),
        *project.glob("reports/*/_sessions/*/r*/journal"),
    ]
    for directory in observed:
        if (directory / "events.jsonl").is_file():
            read_journal(directory, warn=lambda _: None)

    # And recording again succeeds.
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    fresh = run_case(
        load_case(case_dir),
        AttemptSettings(mode="record", world_backend="local", install=False),
        tmp_path / "again" / "journal",
    )
    assert fresh.status == "ok"
    install_journal(fresh.journal_dir, case_dir / "journal")
    JOURNALS.clear()
    assert read_golden(case_dir / "journal").events[-1].type == "session.end"
    assert not [p.name for p in case_dir.iterdir() if p.name.startswith(".journal.")], (
        "leftovers cleaned"
    )


def test_an_install_killed_between_its_renames_is_undone_by_the_next_reader(tmp_path: Path) -> None:
    """The one window install_journal has: the old journal renamed aside, the new one not yet in."""
    case_dir = _slow_case(tmp_path)
    golden = (case_dir / "journal" / "events.jsonl").read_bytes()
    os.replace(case_dir / "journal", tmp_path / "slow" / ".journal.old-999999999")
    (tmp_path / "slow" / ".journal.new-999999999").mkdir()  # a half-copied new one
    JOURNALS.clear()
    assert load_case(case_dir).journal().events
    assert (case_dir / "journal" / "events.jsonl").read_bytes() == golden
    assert not [p.name for p in case_dir.iterdir() if p.name.startswith(".journal.")]
