"""The run's progress while it runs: a live status line on a terminal, plain lines in CI logs.

Registered on the controller only, when --nodeval-progress is not `off`: xdist workers print
nothing, and the controller sees every worker's `pytest_runtest_logstart`, `logreport` and
`logfinish`. A run without nodeval attempts prints nothing. What is counted, and what "in
flight" means, is `report/progress.py`'s.

`auto` picks the live line when pytest writes to a terminal that can move its cursor (not
TERM=dumb) and captures the tests' output (not -s: what a test prints would cross the line);
plain lines otherwise. `tty` and `plain` force one of them.

**Plain lines** (one per `nodeval_progress_interval`, 30 s) are written when a test starts,
before pytest writes anything for it, or when one finishes (or its worker crashes), with
pytest's own `write_line`, which ends pytest's current line first; pytest then starts the
test's line afresh (its file name again before the dots). When no test event has written
one for an interval (one long attempt, every worker busy), a background thread writes it:
not through pytest's terminal writer, which is not thread-safe, but to a duplicate of its
file descriptor taken at session start, since while a test runs in-process pytest points
the descriptor itself at its capture file. Such a line starts on a line of its own; pytest's
dots after it continue below it.

**The live line** is drawn on the row below pytest's cursor, and the cursor is put back where
pytest left it:

    "\\n" + status + ESC[1A (up a row) + "\\r" + ESC[<col>C (forward to pytest's column)

so pytest's own partial line (dots, a -v line waiting for its PASSED) stays as it is. Before
anything else reaches the terminal through pytest's terminal writer, the status is erased
with ESC[J, which erases from the cursor to the end of the screen: the cursor sits at the end
of pytest's text, so that is exactly the status row. For this the writer's file is wrapped
(`TerminalWriter._file`, the one internal of pytest this relies on; without it the run falls
back to plain lines), so pytest's progress, -v lines, warnings, xdist's messages and live
logs all erase the status before they write. It is drawn again after each test event's hooks
have run, and erased for good when the run loop ends, so the final output holds none of it.
Before --pdb's debugger starts (`pytest_exception_interact`) it is erased too. Bytes that
bypass the writer (a subprocess writing straight to the terminal, a `breakpoint()` in a
test) can still cross it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Generator
from typing import Any, TextIO

import pytest

from ..report.progress import Tally, format_line
from .keys import settings_of, worker_crashed

ERASE_BELOW = "\x1b[J"
UP_ONE_ROW = "\x1b[1A"


class Progress:
    def __init__(self, config: pytest.Config, tests: dict[str, tuple[str, int]]) -> None:
        self.config = config
        self.settings = settings_of(config)
        self.tally = Tally(tests)
        self.lock = threading.Lock()
        """Held while the tally changes or is summed: the ticker thread reads it."""
        self.out: _LiveLine | _PlainLines | None = None
        self._ticker: _Ticker | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Here, not in __init__: the terminal reporter is registered by its own pytest_configure.
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        mode = choose_mode(self.settings.progress, reporter, self.config)
        if mode is None:
            return
        if mode == "tty":
            self.out = _LiveLine(reporter._tw)
        else:
            self.out = _PlainLines(reporter, self.settings.progress_interval_s, time.monotonic())
            if self.settings.progress_interval_s > 0:
                self._ticker = _Ticker(self, self.out)
                self._ticker.start()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        if isinstance(self.out, _PlainLines) and self.out.due(time.monotonic()):
            self._show(self.out)  # before pytest starts this test's line: its dots stay on one line
        yield
        with self.lock:
            self.tally.start(nodeid, time.monotonic())
        self._redraw()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        yield  # the controller has read the report: a Python scenario's test is known by now
        now = time.monotonic()
        with self.lock:
            self._count(report, now)
        # No logfinish follows a crashed worker's report: show the line now.
        if worker_crashed(report) and isinstance(self.out, _PlainLines) and self.out.due(now):
            self._show(self.out)
        self._redraw()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        yield
        now = time.monotonic()
        with self.lock:
            self.tally.finish(nodeid, now)
        if isinstance(self.out, _PlainLines) and self.out.due(now):
            self._show(self.out)  # under xdist the last attempts start nothing more: say it here
        self._redraw()

    @pytest.hookimpl(tryfirst=True)
    def pytest_exception_interact(self) -> None:
        # --pdb writes through a terminal writer of its own: the live line must be gone first.
        if isinstance(self.out, _LiveLine):
            self.out.erase()
            self.out.flush()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the ticker and take the live line away (at the end, or when nothing is shown)."""
        if self._ticker is not None:
            self._ticker.stop()
        if isinstance(self.out, _LiveLine):
            self.out.close()
        self.out = None

    def _count(self, report: pytest.TestReport, now: float) -> None:
        ahead = getattr(report, "nodeval_ahead", None)  # plugin/ahead.py: a worker's pool
        if isinstance(ahead, (list, tuple)) and len(ahead) == 2:
            self.tally.ahead(str(ahead[0]), int(ahead[1]))
        if report.outcome == "rerun":  # type: ignore[comparison-overlap]  # pytest-rerunfailures
            self.tally.rerun(report.nodeid)
        elif worker_crashed(report):
            self.tally.crash(report.nodeid, now)
            node = getattr(report, "node", None)
            if node is not None:  # its pool died with it
                self.tally.ahead(str(node.gateway.id), 0)
        else:
            attempt = attempt_payload(report)
            if attempt is not None:
                self.tally.result(
                    report.nodeid,
                    str(attempt.get("outcome", "")),
                    bool(attempt.get("infra_error")),
                    cost_of(attempt),
                    now,
                )

    def _redraw(self) -> None:
        """The live line again, after whatever pytest wrote for this event erased it."""
        if isinstance(self.out, _LiveLine):
            self._show(self.out)

    def _show(self, out: _LiveLine | _PlainLines) -> None:
        line = self.line()
        if line is not None:
            out.show(line)

    def line(self) -> str | None:
        """The progress line now; None in a run without attempts."""
        with self.lock:
            snapshot = self.tally.snapshot()
        return format_line(snapshot) if snapshot.total else None


def choose_mode(setting: str, reporter: Any, config: pytest.Config) -> str | None:
    """tty, plain or None (nothing to write to, or off)."""
    if setting == "off" or reporter is None:
        return None
    if setting == "auto":
        live = (
            reporter.isatty()
            and os.environ.get("TERM") != "dumb"
            and config.getoption("capture", "fd") in ("fd", "sys")
        )
        setting = "tty" if live else "plain"
    if setting == "tty" and not hasattr(getattr(reporter, "_tw", None), "_file"):
        return "plain"  # a pytest whose writer is built otherwise: plain lines never garble it
    return setting


def attempt_payload(report: pytest.TestReport) -> dict[str, Any] | None:
    """The attempt's result the report carries (see report_payload.py), as plain JSON types."""
    payload = getattr(report, "nodeval", None)
    attempt = payload.get("attempt") if isinstance(payload, dict) else None
    return attempt if isinstance(attempt, dict) else None


def cost_of(attempt: dict[str, Any]) -> float | None:
    """The attempt's spend in USD, when the run prices its attempts (`cost_usd`), else None:
    the agent's calls, and the simulated user's and the judge's when they are priced."""
    agent, *side = (
        _usd(attempt.get(key)) for key in ("cost_usd", "user_cost_usd", "judge_cost_usd")
    )
    if agent is None:
        return None
    return agent + sum(cost for cost in side if cost is not None)


def _usd(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _PlainLines:
    def __init__(self, reporter: Any, interval_s: float, started: float) -> None:
        self.reporter = reporter
        self.interval_s = interval_s
        self.last = started
        self._lock = threading.Lock()

    def due(self, now: float) -> bool:
        """Whether a line is due now; if so, the next is due an interval from now."""
        with self._lock:
            if now - self.last < self.interval_s:
                return False
            self.last = now
            return True

    def show(self, line: str) -> None:
        writer = getattr(self.reporter, "_tw", None)
        if getattr(writer, "width_of_current_line", 0) and not self.reporter.currentfspath:
            # write_line ends pytest's line only when it knows of one (a file name before the
            # dots); under xdist the dots run on without one: end it here.
            self.reporter.write("\n")
        self.reporter.write_line(line)


class _Ticker:
    """Writes the plain line when no test event has for an interval (see the module docstring)."""

    def __init__(self, progress: Progress, out: _PlainLines) -> None:
        self.progress, self.out = progress, out
        self.file, self._owned = _side_file(getattr(out.reporter, "_tw", None))
        self._column_after_last: int | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nodeval-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
        if self.file is not None and self._owned:
            self.file.close()

    def _run(self) -> None:
        while not self._stopped.wait(min(1.0, self.out.interval_s / 3)):
            if self.file is None or not self.out.due(time.monotonic()):
                continue
            line = self.progress.line()
            if line is None:
                continue
            # End pytest's partial line first, unless our last line already did and pytest
            # wrote nothing since (its writer does not see what we write).
            column = getattr(getattr(self.out.reporter, "_tw", None), "width_of_current_line", 0)
            ends_pytests_line = column and column != self._column_after_last
            self._column_after_last = column
            try:
                self.file.write(("\n" if ends_pytests_line else "") + line + "\n")
                self.file.flush()
            except (OSError, ValueError):  # the output went away: nothing more to say
                return


def _side_file(writer: Any) -> tuple[TextIO | None, bool]:
    """Where the ticker writes, and whether it is ours to close: a duplicate of the descriptor
    pytest writes its report to; without one (an in-memory stream, as under pytester
    in-process), that stream itself, which capturing a test's descriptors does not redirect."""
    stream = getattr(writer, "_file", None)
    try:
        fd = stream.fileno()  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):
        return stream, False
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return open(os.dup(fd), "w", encoding=encoding, errors="replace"), True


class _LiveLine:
    """Stands in for the terminal writer's file: whatever is written erases the status first."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.file: TextIO = writer._file
        self.shown: str | None = None

    def show(self, status: str) -> None:
        if status == self.shown:
            return  # still on screen: nothing was written since it was drawn
        width = self.writer.fullwidth
        column = self.writer.width_of_current_line
        if column < 0 or (column and column % width == 0):
            # Unknown (a "\r" or a control character in pytest's line), or the cursor waits at
            # the right margin: there is no column to come back to.
            return
        self.erase()
        back = f"\r\x1b[{column % width}C" if column % width else "\r"
        self.file.write("\n" + status[: width - 1] + UP_ONE_ROW + back)
        self.file.flush()
        self.shown = status
        if self.writer._file is not self:
            self.writer._file = self

    def erase(self) -> None:
        if self.shown is not None:
            self.shown = None
            self.file.write(ERASE_BELOW)

    def close(self) -> None:
        self.erase()
        self.file.flush()
        if self.writer._file is self:
            self.writer._file = self.file

    # -- the file's face, for the terminal writer ---------------------------------------------

    def write(self, text: str) -> int:
        self.erase()
        return self.file.write(text)

    def flush(self) -> None:
        self.file.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.file, name)
