"""A full disk while recording or reporting, and scratch left behind (issue 28, points 3 and 4).

A disk with no room, wherever it is (the case's journal, the report, the run history, a
staging copy), is one line naming the path and the space needed and exit status 7
(infrastructure), never a traceback nor the agent's failure; every scratch file is removed
and the golden journal is left byte for byte. And `nodeval record` and record mode leave
nothing in the temp directory, whether the recording passed, failed, or was stopped.

The full disk is a 2 MB tmpfs, which takes root to mount: skipped otherwise, except in CI
(which runs as root), where a skip would hide the feature.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ..conftest import PROJECT_INI, PYTEST_ADDOPTS, write_case

ANSWER = [{"text": "Hello there."}]
CASE_DIR = Path("scenarios") / "hello"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A directory on a 2 MB tmpfs of its own, unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        _cannot("mounting a tmpfs to fill takes root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        _cannot(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _cannot(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI runs as root, so the full-disk tests must run there")
    pytest.skip(reason)


def _fill(disk: Path) -> None:
    """Write zeros until the disk has no room left."""
    with open(disk / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        try:  # the last pages, smaller than a chunk
            while True:
                filler.write(b"\0" * 512)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


def _project(root: Path) -> Path:
    """A project with one recorded case, hello, whose recording passes."""
    project = root / "project"
    (project / "scenarios").mkdir(parents=True)
    (project / "tox.ini").write_text(PROJECT_INI)
    write_case(
        project / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "Hello"}],
        case={"world": {"backend": "local"}},
    )
    return project


def _env(tmpdir: Path) -> dict[str, str]:
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTEST_ADDOPTS"] = PYTEST_ADDOPTS
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _nodeval_record(*extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest_nodeval.cli", "record", str(CASE_DIR), *extra]


def _pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *args]


def _pytest_record(*extra: str) -> list[str]:
    return _pytest("-q", "--nodeval-mode=record", "--nodeval-world=local", *extra, "scenarios")


def _run(command: list[str], project: Path, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=project, env=_env(tmpdir), capture_output=True, text=True, timeout=300
    )


def _scratch(project: Path, tmpdir: Path) -> list[str]:
    """What a recording left behind: staging journals in the case, anything in TMPDIR."""
    staged = [p.name for p in (project / CASE_DIR).iterdir() if p.name.startswith(".journal.")]
    return staged + [str(p) for p in tmpdir.iterdir()]


def _disk_full_lines(output: str, path: str) -> list[str]:
    """The lines that say the disk is full, each naming `path`."""
    lines = [line for line in output.splitlines() if "its disk is full" in line]
    assert lines, output
    assert all(path in line for line in lines), lines
    return lines


@pytest.fixture
def tmpdir_(tmp_path: Path) -> Path:
    """A fresh TMPDIR for the runs under test, on the normal disk, to check it stays empty."""
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    return scratch


# -- a full disk -------------------------------------------------------------------------------


OWN_AGENT = """
def agent(ctx):
    for text in ctx.inputs():
        ctx.output("Hello, " + text)
"""
RECORD_SCRIPT = """
import sys
sys.path.insert(0, "..")
from hello_agent import agent
from pytest_nodeval import record_agent

record_agent(agent)
"""
BOUND_TEST = """
import pytest
from hello_agent import agent

@pytest.mark.nodeval_case("hello")
def test_hello(nodeval_attempt):
    nodeval_attempt.run(agent)
"""


def _own_agent(project: Path, how: str) -> None:
    """hello, but run by an agent of the project's own: by a record script or a bound test."""
    case_dir = project / CASE_DIR
    (case_dir / "input" / "config.yaml").unlink()
    (case_dir / "case.yaml").write_text("id: hello\nneeds_model: false\n")
    (project / "scenarios" / "hello_agent.py").write_text(OWN_AGENT)
    if how == "script":
        (case_dir / "_record").mkdir()
        (case_dir / "_record" / "record.py").write_text(RECORD_SCRIPT)
    else:
        (project / "scenarios" / "test_hello.py").write_text(BOUND_TEST)


@pytest.mark.parametrize("how", ["engine", "script", "bound test"])
def test_nodeval_record_on_a_full_disk_says_so_in_one_line_and_keeps_the_journal(
    how: str, small_disk: Path, tmpdir_: Path
) -> None:
    project = _project(small_disk)
    if how != "engine":
        _own_agent(project, how)
        first = _run(_nodeval_record(), project, tmpdir_)
        assert first.returncode == 0, first.stdout + first.stderr
        shutil.rmtree(project / "reports", ignore_errors=True)
    golden = (project / CASE_DIR / "journal" / "events.jsonl").read_bytes()
    _fill(small_disk)
    done = _run(_nodeval_record("--world", "local"), project, tmpdir_)
    assert done.returncode == 7, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (line,) = _disk_full_lines(done.stderr, str(small_disk) if how == "bound test" else "hello")
    if how == "engine":
        assert "needs about" in line and "free" in line
    assert _scratch(project, tmpdir_) == []
    assert (project / CASE_DIR / "journal" / "events.jsonl").read_bytes() == golden


def test_record_mode_on_a_full_disk_is_an_infrastructure_error(
    small_disk: Path, tmpdir_: Path
) -> None:
    project = _project(small_disk)
    golden = (project / CASE_DIR / "journal" / "events.jsonl").read_bytes()
    _fill(small_disk)
    done = _run(_pytest_record(), project, tmpdir_)
    output = done.stdout + done.stderr
    assert done.returncode == 7, output
    assert "Traceback" not in output and "1 infrastructure error(s)" in output
    _disk_full_lines(output, str(small_disk))
    assert _scratch(project, tmpdir_) == []
    assert (project / CASE_DIR / "journal" / "events.jsonl").read_bytes() == golden


def test_record_mode_that_cannot_install_a_passed_recording_says_how_much_room_it_needs(
    small_disk: Path, tmpdir_: Path, tmp_path: Path
) -> None:
    """The attempt records fine (its journal is in a report directory with room); the case's
    disk has none for the new journal."""
    project = _project(small_disk)
    golden = (project / CASE_DIR / "journal" / "events.jsonl").read_bytes()
    # A new turn, so the recording differs from the journal and must be installed (the same
    # recording again is left as it is).
    inputs = project / CASE_DIR / "input" / "inputs.yaml"
    inputs.write_text(yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["hi again"]}}))
    _fill(small_disk)
    reports = tmp_path / "reports"
    done = _run(
        _pytest_record(f"--nodeval-report-dir={reports}", "-o", "nodeval_history="),
        project,
        tmpdir_,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 7, output
    assert "1 passed" in output and "Traceback" not in output
    (line,) = _disk_full_lines(output, str(project / CASE_DIR / "journal"))
    assert "needs about" in line and "KB" in line
    assert _scratch(project, tmpdir_) == []
    assert (project / CASE_DIR / "journal" / "events.jsonl").read_bytes() == golden


def test_a_replay_whose_report_cannot_be_written_exits_7(
    small_disk: Path, tmpdir_: Path, tmp_path: Path
) -> None:
    project = _project(tmp_path)
    _fill(small_disk)
    done = _run(
        _pytest("-q", f"--nodeval-report-dir={small_disk / 'reports'}", "scenarios"),
        project,
        tmpdir_,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 7, output
    assert "Traceback" not in output
    _disk_full_lines(output, str(small_disk / "reports"))
    assert list(tmpdir_.iterdir()) == []


# -- no scratch left ---------------------------------------------------------------------------


@pytest.mark.parametrize("passes", [True, False], ids=["passed", "failed"])
@pytest.mark.parametrize("entry", ["nodeval record", "pytest record"])
def test_a_recording_leaves_nothing_in_the_temp_directory(
    entry: str, passes: bool, tmp_path: Path, tmpdir_: Path
) -> None:
    project = _project(tmp_path)
    if not passes:
        (project / CASE_DIR / "assertions.yaml").write_text(
            "- kind: output_contains\n  text: never said\n"
        )
    command = _nodeval_record("--world", "local") if entry == "nodeval record" else _pytest_record()
    done = _run(command, project, tmpdir_)
    assert done.returncode == (0 if passes else 1), done.stdout + done.stderr
    assert _scratch(project, tmpdir_) == []


def _slow_case(project: Path) -> None:
    """hello again, now a recording that takes a while: shell calls that each sleep."""
    steps = [
        {"tool_calls": [{"name": "shell", "args": {"command": f"sleep 0.2; echo {n}"}}]}
        for n in range(15)
    ]
    write_case(
        project / "scenarios",
        "hello",
        script=[*steps, {"text": "all steps done"}],
        inputs=["go"],
        tools=["shell"],
        assertions=[{"kind": "output_contains", "text": "done"}],
        case={"world": {"backend": "local"}},
        record=False,
    )


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
@pytest.mark.parametrize("entry", ["nodeval record", "pytest record"])
def test_a_recording_stopped_midway_leaves_no_scratch(
    entry: str, stop: signal.Signals, tmp_path: Path, tmpdir_: Path
) -> None:
    project = _project(tmp_path)
    golden = (project / CASE_DIR / "journal" / "events.jsonl").read_bytes()
    _slow_case(project)
    command = _nodeval_record() if entry == "nodeval record" else _pytest_record()
    process = subprocess.Popen(
        command,
        cwd=project,
        env=_env(tmpdir_),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_world(tmpdir_, process)
        process.send_signal(stop)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode != 0
    assert _scratch(project, tmpdir_) == []
    after = (project / CASE_DIR / "journal" / "events.jsonl").read_bytes()
    assert after == golden, "a stopped recording never becomes the golden journal"


def _wait_for_world(tmpdir: Path, process: subprocess.Popen[bytes]) -> None:
    """Until the recording is under way: its local world's directory is in TMPDIR."""
    deadline = time.monotonic() + 120
    while not any(p.name.startswith("nodeval-world-") for p in tmpdir.iterdir()):
        assert process.poll() is None, "the recording ended before it could be stopped"
        assert time.monotonic() < deadline, "the recording never opened its world"
        time.sleep(0.05)


# -- the journal writer, on /dev/full (no root needed) -----------------------------------------


def _events_on_a_full_disk(journal_dir: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this machine")
    journal_dir.mkdir(parents=True)
    (journal_dir / "events.jsonl").symlink_to("/dev/full")


def test_a_journal_with_no_room_fails_every_write_after_the_first(tmp_path: Path) -> None:
    """An agent may swallow the first failure: the session must still not end as if whole."""
    from pytest_nodeval.errors import DiskFullError
    from pytest_nodeval.journal.writer import JournalWriter
    from pytest_nodeval.runner.session import journal_header

    _events_on_a_full_disk(tmp_path / "journal")
    writer = JournalWriter(tmp_path / "journal", journal_header("record", None))
    with pytest.raises(DiskFullError, match=r"cannot write .*events\.jsonl: its disk is full"):
        writer.emit("io.output", {"text": "hello"})
    with pytest.raises(DiskFullError):
        writer.emit("io.output", {"text": "again"})
    with pytest.raises(DiskFullError):
        writer.close()
    assert writer.events == []


def test_an_own_agent_that_swallows_the_failure_still_stops_on_a_full_disk(
    tmp_path: Path,
) -> None:
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.errors import DiskFullError
    from pytest_nodeval.runner.session import AttemptSettings, run_agent_case

    project = _project(tmp_path)

    def agent(ctx: object) -> None:
        with contextlib.suppress(Exception):  # a careless agent carries on
            ctx.output("hello")  # type: ignore[attr-defined]

    journal_dir = tmp_path / "observed" / "journal"
    _events_on_a_full_disk(journal_dir)
    case = load_case(project / CASE_DIR)
    with pytest.raises(DiskFullError) as raised:
        run_agent_case(agent, case, AttemptSettings(mode="record", install=False), journal_dir)
    assert raised.value.infrastructure


def test_the_run_s_shared_files_name_a_disk_that_filled_after_they_opened(
    small_disk: Path,
) -> None:
    """The budget and the rate limits, written by every process all run long: a write after the
    disk filled is the machine's fault, named, as opening the file on a full disk is."""
    from pytest_nodeval.agent.limits import LimitRule, SharedLimiter
    from pytest_nodeval.errors import DiskFullError
    from pytest_nodeval.runner.budget import Budget

    budget = Budget(small_disk, limit_usd=5.0)
    held = budget.reserve("hello")
    limiter = SharedLimiter(small_disk / "limits.sqlite")
    rules = [LimitRule("anthropic", rpm=1000, tpm=10**9)]
    lease, _ = limiter.try_acquire(rules)
    assert lease is not None and held.allowed
    _fill(small_disk)
    with pytest.raises(DiskFullError, match=r"cannot write .*budget.*: its disk is full"):
        for _ in range(200):  # each settle appends to the write-ahead log
            budget.settle(budget.reserve("hello"), 0.01)
    with pytest.raises(DiskFullError, match=r"cannot write .*limits\.sqlite: its disk is full"):
        for _ in range(200):
            limiter.release(lease, tokens=100)
            lease, _ = limiter.try_acquire(rules)
            assert lease is not None
