"""Attempts started ahead of their tests (--nodeval-concurrency N): which ones, and when.

pytest still runs one test at a time, in collection order, and reports each attempt on
its own test. Before each test, this process starts the attempts of the tests it will run
next in a pool (runner/pool.py), until N started attempts have not finished their tests;
a test's `nodeval_attempt.run()` then waits for its own attempt's observation. So the
reports, journals and checks are those of a serial run, and only the waiting overlaps.

Which tests this process runs next: `session.items` without xdist; on an xdist worker,
the items the controller has sent it and it has not run yet (the worker's queue; the
scheduler in plugin/schedule.py sends chunks of at least N so that queue stays full).

An attempt can start ahead when nothing its test sets up feeds it:

* a case directory's own test (`test_scenario`);
* a Python scenario that declares its agent on the marker,
  `@pytest.mark.nodeval_case("id", agent=my_agent)`, whose body calls `run()`;

unless the test requests a world or a fake fixture, whose value the attempt would use.

Everything else runs inside its test as before: deterministic replay (fast and CPU-bound),
tests of an attempt that several tests in this process check, skip-marked tests, reruns.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .keys import ahead_key, case_ref, run_id_key, settings_of

if TYPE_CHECKING:
    from ..runner.pool import AttemptPool
    from .adaptive import AdaptiveRepeats
    from .settings import Settings

POOLED_MODES = ("live", "record", "full")
TEST_FED = frozenset({"nodeval_world", "nodeval_llm_server", "nodeval_composio", "nodeval_mcp"})
"""Fixtures whose value the attempt uses (fixtures.py): a test requesting one runs its attempt
itself."""


def runs_attempts_ahead(settings: Settings) -> bool:
    """Whether this run starts attempts ahead of their tests: concurrency, in a mode that spends."""
    return settings.concurrency > 1 and settings.attempt_mode in POOLED_MODES


class RunAhead:
    """The plugin object that starts attempts ahead (registered where tests run, see
    __init__.py)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings: Settings = settings_of(config)
        self.size = self.settings.concurrency
        self._pool: AttemptPool | None = None
        self.started: dict[str, Future[Any]] = {}
        """By node id, the attempts started ahead whose tests have not finished."""
        self.considered: set[str] = set()
        self._positions: dict[str, int] | None = None

    @property
    def pool(self) -> AttemptPool:
        if self._pool is None:
            from ..runner.pool import AttemptPool
            from .budget import budget_gate

            # --nodeval-max-cost: an attempt holds its estimate just before it starts in the pool,
            # so "spend plus what is in flight" counts what is running, not what is queued.
            run_dir = self.settings.report_dir / self.config.stash[run_id_key]
            gate = budget_gate(self.config, self.settings, run_dir)
            self._pool = AttemptPool(self.size, self.settings.world_concurrency, gate)
        return self._pool

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        self.fill(item)
        try:
            return (yield)
        finally:
            self.started.pop(item.nodeid, None)
            if ahead_key in item.stash:
                del item.stash[ahead_key]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if self._pool is not None:
            # For the controller's progress line (plugin/progress.py): attempts in flight here
            # whose tests have not started, which it cannot see; plain JSON values, so xdist
            # carries them.
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            report.nodeval_ahead = [worker, self.running_besides(item.nodeid)]
        return report

    def running_besides(self, nodeid: str) -> int:
        """Attempts started ahead and not finished, but the one of the test `nodeid`."""
        return sum(not future.done() for key, future in self.started.items() if key != nodeid)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Cancel what has not started (-x, --maxfail, an interrupt); those tests report as not
        run."""
        if self._pool is not None:
            # After an interrupt, do not wait for attempts in flight (their threads are daemons).
            self._pool.stop(wait=exitstatus != pytest.ExitCode.INTERRUPTED)

    def fill(self, item: pytest.Item) -> None:
        """Start attempts of this test and the next ones, until `size` are held."""
        adaptive = self.config.pluginmanager.get_plugin("nodeval-adaptive")
        for candidate in self.upcoming(item):
            if len(self.started) >= self.size:
                return
            if candidate.nodeid in self.considered:
                continue
            runs = _runs_for_sure(adaptive, candidate)
            if runs is None:
                continue  # an adaptive look before it is undecided: consider it again later
            self.considered.add(candidate.nodeid)
            if runs and can_start_ahead(candidate):
                self.start(candidate)

    def start(self, item: pytest.Item) -> None:
        from ..runner.pool import Job
        from .attempt import new_attempt
        from .collect import load_case_cached

        ref = case_ref(item)
        if ref is None:
            return  # not a case's test: nothing to start
        try:
            case = load_case_cached(item.config, Path(ref.directory), ref.row, ref.variant)
        except (Exception, pytest.fail.Exception):
            return  # a broken case fails in its test, with the same message
        run_dir = self.settings.report_dir / item.config.stash[run_id_key]
        attempt = new_attempt(item, case, self.settings, run_dir)
        if attempt.not_recorded() is not None:
            return  # record mode missing or none: its test skips or fails without running it
        agent, inputs = attempt.declared or (None, None)
        job = Job(
            item.nodeid, lambda: attempt.execute(agent, inputs), case.id, world=attempt.opens_world
        )
        attempt.ahead = self.started[item.nodeid] = self.pool.submit(job)
        item.stash[ahead_key] = attempt

    def upcoming(self, item: pytest.Item) -> Iterator[pytest.Item]:
        """This test, then the tests this process will run after it, in order."""
        yield item
        session = item.session
        queued = _worker_queue(self.config)
        if queued is not None:
            yield from (session.items[i] for i in queued)
            return
        if self._positions is None:
            self._positions = {it.nodeid: i for i, it in enumerate(session.items)}
        start = self._positions.get(item.nodeid)
        if start is not None:
            yield from session.items[start + 1 :]


def _runs_for_sure(adaptive: AdaptiveRepeats | None, item: pytest.Item) -> bool | None:
    """Whether the item's repeat will run under adaptive repeats (plugin/adaptive.py), so that
    starting it ahead spends nothing a decided case would have skipped; True without them."""
    ref = case_ref(item)
    if adaptive is None or ref is None:
        return True
    return adaptive.sure_to_run(ref.case_id, ref.repeat)


def can_start_ahead(item: pytest.Item) -> bool:
    """Whether the item's attempt can run before its test (see the module docstring)."""
    from .attempt import checks_here
    from .collect import CaseFile

    ref = case_ref(item)
    if ref is None or getattr(item, "execution_count", 1) > 1:
        return False
    if any(item.get_closest_marker(name) for name in ("skip", "skipif")):
        return False
    if checks_here(item.session).get(ref.attempt, 1) > 1:
        return False  # its tests share one run of the engine (Attempt.shared), inline
    if set(getattr(item, "fixturenames", ())) & TEST_FED:
        return False  # e.g. an own agent's clients go to the test's nodeval_llm_server
    marker = item.get_closest_marker("nodeval_case")
    return isinstance(item.parent, CaseFile) or (
        marker is not None and marker.kwargs.get("agent") is not None
    )


def _worker_queue(config: pytest.Config) -> list[int] | None:
    """On an xdist worker, the indices of the items it received and has not started; else None.

    Reads xdist's WorkerInteractor (pytest-xdist 3.x: `nextitem_index` and the `torun` queue),
    which exposes no public API for this; if its shape changes, attempts run one test ahead.
    """
    if not hasattr(config, "workerinput"):
        return None
    interactor = next(
        (p for p in config.pluginmanager.get_plugins() if type(p).__name__ == "WorkerInteractor"),
        None,
    )
    queue = getattr(interactor, "torun", None)
    if queue is None or not hasattr(queue, "lock"):
        return []
    with queue.lock() as items:
        waiting = list(items)
    following = [getattr(interactor, "nextitem_index", None), *waiting]
    return [i for i in following if isinstance(i, int)]
