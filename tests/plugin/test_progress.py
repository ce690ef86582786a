"""The progress of a run while it runs: plain lines in logs, a live line on a terminal.

The live line is checked as a terminal shows it: the raw output (cursor movements and
erasures included) is fed to a terminal emulator, and the screen must be the same as the
screen of the same run without progress.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import anthropic  # noqa: F401  (loaded before pytester snapshots sys.modules: the no-key case needs it)
import pyte
import pytest
import xdist  # noqa: F401  (the pytester runs below use -n)

from ..conftest import write_case

COLUMNS = 100
PROGRESS_LINE = re.compile(
    r"nodeval: (\d+)/(\d+) attempts, (\d+) in flight, (\d+) failed, (\d+) infra"
)
EVERY_EVENT = ("-o", "nodeval_progress_interval=0")


def _mixed_live_suite(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Live mode, no key: one case passes, one fails its check, one is an infrastructure error."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    root = project.path / "scenarios"
    write_case(
        root,
        "answer",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
        record=False,
    )
    write_case(
        root,
        "wrong",
        script=[{"text": "No."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "yes"}],
        record=False,
    )
    write_case(
        root,
        "nokey",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=[],
        providers=[{"name": "anthropic", "model": "claude-test"}],
        record=False,
    )


def _replay_suite(project: pytest.Pytester) -> None:
    root = project.path / "scenarios"
    for name in ("alpha", "beta"):
        write_case(
            root,
            name,
            script=[{"text": "Hello."}],
            inputs=["hi"],
            assertions=[{"kind": "output_contains", "text": "hello"}],
        )
    write_case(
        root,
        "wrong",
        script=[{"text": "No."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "yes"}],
    )
    (root / "test_plain.py").write_text(
        "import logging, warnings\n\ndef test_warns():\n"
        "    logging.warning('hi')\n    warnings.warn(UserWarning('careful'))\n"
    )


def _progress(result: pytest.RunResult) -> list[tuple[int, ...]]:
    return [
        tuple(int(n) for n in m.groups())
        for line in result.outlines
        if (m := PROGRESS_LINE.search(line))
    ]


LIVE = (
    "--repeat",
    "2",
    "--nodeval-mode",
    "live",
    "--nodeval-world",
    "local",
    "-W",
    "ignore::UserWarning",
)


def test_plain_lines_count_attempts_done_failed_and_infra(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mixed_live_suite(nodeval_project, monkeypatch)
    result = nodeval_project.runpytest(*LIVE, "--nodeval-progress", "plain", *EVERY_EVENT)
    assert result.ret == 1
    lines = _progress(result)
    assert lines[0] == (0, 6, 0, 0, 0)
    assert lines[-1] == (6, 6, 0, 2, 2), "2 attempts failed their check, 2 had no key"
    done = [line[0] for line in lines]
    assert done == sorted(done) and set(done) == set(range(7)), (
        "every attempt is counted once, in order"
    )


def test_auto_writes_plain_lines_where_pytest_writes_to_no_terminal(
    nodeval_project: pytest.Pytester,
) -> None:
    _replay_suite(nodeval_project)
    result = nodeval_project.runpytest(*EVERY_EVENT)
    assert _progress(result)[-1] == (3, 3, 0, 1, 0)
    assert "\x1b[" not in result.stdout.str(), "no cursor movement where there is no terminal"


CRASH = """
import os
import pytest

@pytest.mark.nodeval_case("answer")
def test_crash(nodeval_run, request):
    if request.node.callspec.params["nodeval_case"].repeat == 2:
        os._exit(1)   # the worker dies in the middle of this attempt
"""


def test_with_xdist_the_controller_counts_every_workers_attempts(
    nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mixed_live_suite(nodeval_project, monkeypatch)
    (nodeval_project.path / "scenarios" / "test_crash.py").write_text(CRASH)
    result = nodeval_project.runpytest(
        *LIVE, "-n", "2", "--nodeval-progress", "plain", *EVERY_EVENT
    )
    lines = _progress(result)
    assert lines[-1] == (6, 6, 0, 2, 3), (
        "answer r2's worker crashed in its Python check: infra, not failed"
    )
    assert max(line[2] for line in lines) <= 2, "at most one attempt in flight per worker"


SPEND = """
import pytest

# What a run that prices its attempts carries (AttemptRecord.cost_usd, issue 16). Added after
# the controller has read the payload, so this works whether the record knows the field or not.
@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    attempt = getattr(report, "nodeval", {}).get("attempt")
    if attempt is not None:
        attempt["cost_usd"] = 0.125
"""


def test_spend_is_the_sum_of_the_attempts_cost_usd_when_they_carry_one(
    nodeval_project: pytest.Pytester,
) -> None:
    _replay_suite(nodeval_project)
    result = nodeval_project.runpytest("--repeat", "2", "--nodeval-progress", "plain", *EVERY_EVENT)
    assert "$" not in "".join(line for line in result.outlines if PROGRESS_LINE.search(line))
    (nodeval_project.path / "conftest.py").write_text(SPEND)
    result = nodeval_project.runpytest("--repeat", "2", "--nodeval-progress", "plain", *EVERY_EVENT)
    last = [line for line in result.outlines if PROGRESS_LINE.search(line)][-1]
    assert last == "nodeval: 6/6 attempts, 0 in flight, 2 failed, 0 infra, $0.75"


@pytest.mark.parametrize("switch", [("--nodeval-progress", "off"), ("-o", "nodeval_progress=off")])
def test_off_prints_nothing(nodeval_project: pytest.Pytester, switch: tuple[str, str]) -> None:
    _replay_suite(nodeval_project)
    result = nodeval_project.runpytest(*switch, *EVERY_EVENT)
    result.assert_outcomes(passed=3, failed=1)
    assert _progress(result) == []
    assert "attempts," not in result.stdout.str()


def test_a_long_attempt_gets_a_plain_line_every_interval_while_it_runs(
    nodeval_project: pytest.Pytester,
) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "answer",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    (root / "test_slow.py").write_text(
        "import time\nimport pytest\n\n@pytest.mark.nodeval_case('answer')\n"
        "def test_slow(nodeval_attempt):\n    time.sleep(3)\n    nodeval_attempt.run()\n"
    )
    # A subprocess: the lines must reach the real output while pytest captures the test's.
    result = nodeval_project.runpytest_subprocess(
        "--nodeval-progress", "plain", "-o", "nodeval_progress_interval=0.5", "-k", "slow"
    )
    result.assert_outcomes(passed=1)
    during = [line for line in _progress(result) if line[:3] == (0, 1, 1)]
    # One test event starts the attempt and one ends it: more lines than that came from the clock.
    assert len(during) >= 3, result.stdout.str()
    assert "\n\n" not in result.stdout.str().split("test_slow.py")[1].split("[100%]")[0], (
        "no blank lines"
    )


def test_a_run_without_attempts_prints_no_progress(nodeval_project: pytest.Pytester) -> None:
    (nodeval_project.path / "scenarios" / "test_plain.py").write_text("def test_one():\n    pass\n")
    result = nodeval_project.runpytest("--nodeval-progress", "plain", *EVERY_EVENT)
    result.assert_outcomes(passed=1)
    assert "nodeval:" not in result.stdout.str()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("nodeval_progress", "loud"),
        ("nodeval_progress_interval", "soon"),
        ("nodeval_progress_interval", "-1"),
    ],
)
def test_a_bad_progress_setting_is_a_usage_error(
    nodeval_project: pytest.Pytester, key: str, value: str
) -> None:
    result = nodeval_project.runpytest("-o", f"{key}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{key} (*) must be *, got '{value}'*"])


# -- the live line, as a terminal shows it -------------------------------------------------------


def _on_a_terminal(project: pytest.Pytester, *args: str) -> str:
    """pytest's output, run in a pseudo-terminal COLUMNS wide: what a terminal receives."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    env = {**os.environ, "COLUMNS": str(COLUMNS), "TERM": "xterm"}
    with subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project.path,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
    ) as process:
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
    assert process.returncode in (0, 1), b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode()


def _screen(raw: str) -> list[str]:
    """What the terminal shows after `raw` (the run ids and the time made alike)."""
    screen = pyte.Screen(COLUMNS, 3000)
    pyte.Stream(screen).feed(raw)
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    text = re.sub(r"\d{8}-\d{6}-[0-9a-f]{4}", "<run-id>", "\n".join(lines))
    # The duration's width moves the last line's "=" padding: compare the words only.
    return re.sub(
        r"=+ (.*) in \d+\.\d+s( \(\d+:\d\d:\d\d\))? =+", r"= \1 in <time> =", text
    ).splitlines()


@pytest.mark.parametrize(
    "args",
    [(), ("-v", "-o", "log_cli=true"), ("-n", "2", "-k", "not wrong")],
    ids=["dots", "verbose-live-logs", "xdist"],
)
def test_on_a_terminal_the_live_line_is_drawn_and_leaves_nothing_behind(
    nodeval_project: pytest.Pytester, args: tuple[str, ...]
) -> None:
    _replay_suite(nodeval_project)
    # Auto: a terminal gets the live line
    live = _on_a_terminal(nodeval_project, "--repeat", "2", *args)
    quiet = _on_a_terminal(nodeval_project, "--repeat", "2", *args, "--nodeval-progress", "off")
    attempts = 4 if "-n" in args else 6
    assert f"\r\nnodeval: {attempts}/{attempts} attempts, 0 in flight" in live, (
        "drawn on the row below pytest's"
    )
    assert live.count("\x1b[J") >= attempts, "and erased before pytest wrote on"
    assert "nodeval: " not in quiet
    assert _screen(live) == _screen(quiet)


@pytest.mark.parametrize(
    ("setting", "tty", "term", "capture", "mode"),
    [
        ("auto", True, "xterm", "fd", "tty"),
        ("auto", False, "xterm", "fd", "plain"),
        ("auto", True, "dumb", "fd", "plain"),  # no cursor movement
        ("auto", True, "xterm", "no", "plain"),  # -s: what tests print would cross the line
        ("auto", True, "xterm", "tee-sys", "plain"),
        ("tty", False, "dumb", "no", "tty"),
        ("plain", True, "xterm", "fd", "plain"),
        ("off", True, "xterm", "fd", None),
    ],
)
def test_choose_mode(
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
    tty: bool,
    term: str,
    capture: str,
    mode: str | None,
) -> None:
    from types import SimpleNamespace

    from pytest_nodeval.plugin.progress import choose_mode

    monkeypatch.setenv("TERM", term)
    reporter = SimpleNamespace(isatty=lambda: tty, _tw=SimpleNamespace(_file=sys.stdout))
    config = SimpleNamespace(getoption=lambda name, default=None: capture)
    assert choose_mode(setting, reporter, config) == mode  # type: ignore[arg-type]
    assert choose_mode(setting, None, config) is None, (
        "no terminal reporter (-p no:terminal): nothing"
    )
