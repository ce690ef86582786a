"""A run's progress as the controller sees it, and the one line that says it.

Pure: the pytest layer (`plugin/progress.py`) feeds `Tally` the test events with the time
they happened; nothing here reads a clock or writes anywhere.

Counts are by attempt (a case at one repeat), as in report.json: the tests bound to one
attempt are its checks (`report/aggregate.py`), so an attempt is done when every test of
it has finished, failed when one of them failed, an infrastructure error when one of them
was. "In flight" is attempts with a test that has started (`pytest_runtest_logstart`) and
not yet finished, plus those a worker runs ahead of their tests in its pool
(--nodeval-concurrency), as the worker's latest report said; so done + in flight + waiting
= total.

Every event costs O(1): each attempt keeps its own counts, and the run's totals change by
the difference an event makes to one attempt, so a 10,000-test run redraws as cheaply as a
10-test one.

The ETA is what remains at the rate attempts finished lately: the last `ETA_WINDOW` of them
over the time they took to finish (since the first test started, while fewer are done). A
rate, not a per-attempt time, so it needs no idea of the run's parallelism: xdist workers,
attempts run ahead in a worker's pool and slow stragglers all show in how fast attempts end.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import islice

__all__ = ["ETA_WINDOW", "Snapshot", "Tally", "format_eta", "format_line"]

ETA_WINDOW = 100
"""Attempts whose finishing rate the ETA uses: the recent ones, so it follows the suite's mix."""

AttemptKey = tuple[str, int]
_NO_PROBLEM, _FAILED, _INFRA = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The run at one moment, in attempts."""

    total: int
    done: int
    in_flight: int
    failed: int
    """Done or not, attempts with a test that failed or errored for a reason of the agent's or
    the case's."""
    infra: int
    """Attempts with an infrastructure error (a crashed worker, a missing key): counted apart
    from failed."""
    spend_usd: float | None
    """The sum of `cost_usd` over the attempts that report one; None when none does."""
    eta_s: float | None
    """Seconds until the rest is done at the rate attempts finished lately; None before any is
    done."""


@dataclass(slots=True)
class _Attempt:
    tests: int = 0
    running: int = 0
    finished: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)

    done: bool = False
    """Once every test known of it has finished. It stays done: a check the controller learns
    of late (a Python scenario under xdist) adds to the counts, never takes progress back."""

    def flags(self) -> tuple[bool, bool, bool, bool, float | None]:
        self.done = self.done or (self.tests > 0 and self.finished >= self.tests)
        worst = max(self.problems.values(), default=_NO_PROBLEM)
        cost = max(self.costs.values()) if self.costs else None
        return (
            self.done,
            self.running > 0 and not self.done,
            worst == _FAILED,
            worst == _INFRA,
            cost,
        )


class Tally:
    """Counts a run's attempts from its test events; `snapshot()` sums them up."""

    def __init__(self, tests: Mapping[str, AttemptKey]) -> None:
        self._tests = tests
        """nodeid -> attempt: the controller's map, read, never written; it only grows."""
        self._indexed = 0
        self._attempts: dict[AttemptKey, _Attempt] = {}
        self._started: dict[str, float] = {}
        self._finished: set[str] = set()
        self._first_start: float | None = None
        self._done_at: deque[float] = deque(maxlen=ETA_WINDOW + 1)
        """When the recent attempts were done: the window's rate is len - 1 over its span."""
        self._now = 0.0
        """The latest event's time."""
        self._done = self._in_flight = self._failed = self._infra = 0
        self._spend, self._priced = 0.0, 0
        self._ahead: dict[str, int] = {}
        self._ahead_total = 0

    # -- events ------------------------------------------------------------------------------

    def start(self, nodeid: str, now: float) -> None:
        key = self._key(nodeid)
        if key is None or nodeid in self._started:
            return
        was_finished = nodeid in self._finished
        self._finished.discard(nodeid)
        self._started[nodeid] = now
        if self._first_start is None:
            self._first_start = now
        self._now = now

        def apply(attempt: _Attempt) -> None:
            attempt.running += 1
            attempt.finished -= was_finished

        self._change(key, apply)

    def result(
        self, nodeid: str, outcome: str, infra: bool, cost_usd: float | None, now: float
    ) -> None:
        """A report of the test carried the attempt's result (setup, call or teardown)."""
        key = self._key(nodeid)
        if key is None:
            return
        if nodeid not in self._started and nodeid not in self._finished:
            self.start(nodeid, now)  # under xdist a Python scenario is known by its first report
        severity = _INFRA if infra else _FAILED if outcome in ("failed", "error") else _NO_PROBLEM

        def apply(attempt: _Attempt) -> None:
            if severity > attempt.problems.get(nodeid, _NO_PROBLEM):
                attempt.problems[nodeid] = severity
            if cost_usd is not None:
                attempt.costs[nodeid] = cost_usd

        self._change(key, apply)

    def rerun(self, nodeid: str) -> None:
        """A try that pytest-rerunfailures will run again: its results so far do not count."""
        key = self._key(nodeid)
        if key is None:
            return

        def apply(attempt: _Attempt) -> None:
            attempt.problems.pop(nodeid, None)
            attempt.costs.pop(nodeid, None)

        self._change(key, apply)

    def finish(self, nodeid: str, now: float) -> None:
        key = self._key(nodeid)
        started = self._started.pop(nodeid, None)
        if key is None or started is None:
            return
        self._finished.add(nodeid)
        self._now = now

        def apply(attempt: _Attempt) -> None:
            attempt.running -= 1
            attempt.finished += 1

        self._change(key, apply)

    def ahead(self, worker: str, running: int) -> None:
        """A worker said how many attempts it runs ahead of their tests now."""
        self._ahead_total += running - self._ahead.get(worker, 0)
        self._ahead[worker] = running

    def crash(self, nodeid: str, now: float) -> None:
        """The worker running the test died: an infrastructure error, and the test is over."""
        self.result(nodeid, "error", True, None, now)
        self.finish(nodeid, now)

    # -- the sum -----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        self._index()
        total = len(self._attempts)
        spend = self._spend if self._priced else None
        in_flight = min(self._in_flight + self._ahead_total, total - self._done)
        return Snapshot(
            total=total,
            done=self._done,
            in_flight=in_flight,
            failed=self._failed,
            infra=self._infra,
            spend_usd=spend,
            eta_s=self._eta(total - self._done),
        )

    def _eta(self, remaining: int) -> float | None:
        if not self._done_at or remaining <= 0 or self._first_start is None:
            return None
        if len(self._done_at) > ETA_WINDOW:  # a full window: its own span
            finished, span = ETA_WINDOW, self._done_at[-1] - self._done_at[0]
        else:
            finished, span = len(self._done_at), self._done_at[-1] - self._first_start
        return max(span, 0.0) / finished * remaining

    # -- bookkeeping -------------------------------------------------------------------------

    def _key(self, nodeid: str) -> AttemptKey | None:
        if nodeid not in self._tests:
            return None
        self._index()
        return self._tests[nodeid]

    def _index(self) -> None:
        """Counts the tests the controller learned of since last time (it only appends)."""
        if self._indexed == len(self._tests):
            return
        for key in islice(self._tests.values(), self._indexed, None):
            self._change(key, _add_test)
        self._indexed = len(self._tests)

    def _change(self, key: AttemptKey, apply: Callable[[_Attempt], None]) -> None:
        attempt = self._attempts.get(key)
        if attempt is None:
            attempt = self._attempts[key] = _Attempt()
        before = attempt.flags()
        apply(attempt)
        after = attempt.flags()
        if after[0] and not before[0]:
            self._done_at.append(self._now)
        self._done += after[0] - before[0]
        self._in_flight += after[1] - before[1]
        self._failed += after[2] - before[2]
        self._infra += after[3] - before[3]
        self._spend += (after[4] or 0.0) - (before[4] or 0.0)
        self._priced += (after[4] is not None) - (before[4] is not None)


def _add_test(attempt: _Attempt) -> None:
    attempt.tests += 1


def format_eta(seconds: float) -> str:
    if seconds < 60:
        return f"{math.ceil(seconds)}s"
    minutes = math.ceil(seconds / 60)
    if minutes < 60:
        return f"{minutes}m"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def format_line(snap: Snapshot) -> str:
    """`nodeval: 120/600 attempts, 8 in flight, 3 failed, 1 infra, $1.23, ETA 12m`."""
    parts = [
        f"nodeval: {snap.done}/{snap.total} attempts",
        f"{snap.in_flight} in flight",
        f"{snap.failed} failed",
        f"{snap.infra} infra",
    ]
    # None: nothing priced; 0: only free calls (the mock provider), nothing to say
    if snap.spend_usd:
        parts.append(f"${snap.spend_usd:.2f}")
    if snap.eta_s is not None:
        parts.append(f"ETA {format_eta(snap.eta_s)}")
    return ", ".join(parts)
