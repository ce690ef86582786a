"""Attempts in flight at once: a bounded pool of threads, world slots, and one place to refuse
a start.

The pytest layer (plugin/ahead.py) submits the attempts its process will run next; each
test then waits for its own. Nothing here knows pytest, so other runners can use it too.

Why threads: an attempt spends its time waiting on a model, a fake or a world, and the
engine, the SDKs' sync clients and the simulated users are blocking code. An async agent
runs on its own event loop in its pool thread (agent/adapter.py's `run_agent`), so async
and sync agents mix freely in one pool.

Every attempt about to start passes `StartGate.reserve`, which may refuse it (the run's
money budget, a rate limiter): the one seam for limits that must hold across the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol


class NotStarted(Exception):
    """The start gate refused the attempt; it never ran (`reason` says why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Job:
    """One attempt to run: `run()` returns its observation or raises what the attempt raised."""

    key: str
    """Names the attempt (the test's node id)."""
    run: Callable[[], Any]
    case_id: str = ""
    """The case the attempt belongs to (a budget estimates an attempt's cost by its case)."""
    world: bool = False
    """Whether the attempt opens a world, and so needs one of the pool's world slots."""


class StartGate(Protocol):
    def reserve(self, job: Job) -> str | None:
        """Called just before `job` starts, in its pool thread: None lets it start; a reason
        refuses it (the attempt then ends as `NotStarted(reason)`). May block to pace starts."""
        ...

    def settle(self, job: Job, result: Any, error: BaseException | None) -> None:
        """Called once a reserved job ends, with its result or what it raised."""
        ...


class OpenGate:
    """Lets every attempt start (no budget, no limiter configured)."""

    def reserve(self, job: Job) -> str | None:
        return None

    def settle(self, job: Job, result: Any, error: BaseException | None) -> None:
        return None


class AttemptPool:
    """Runs submitted jobs on up to `size` threads, at most `world_slots` of them holding a world.

    Jobs start in the order submitted, except that a job needing a world while every slot
    is taken lets the jobs behind it start first (it holds no thread while it waits).
    Threads start on demand and are daemons: an interrupted run does not wait for attempts
    in flight. `stop()` cancels what has not started.
    """

    def __init__(self, size: int, world_slots: int, gate: StartGate | None = None) -> None:
        self.size = size
        self.gate: StartGate = gate or OpenGate()
        self._worlds_free = max(1, min(world_slots, size))
        self._pending: list[tuple[Job, Future[Any]]] = []
        self._threads: list[threading.Thread] = []
        self._changed = threading.Condition()
        self._stopping = False
        self._tickets = 0
        self._turn = 0
        """Jobs pass the gate one at a time in the order taken (see `_pass_gate`)."""
        self.in_flight = 0
        """Jobs running now (read it for a progress line; changes under the pool's lock)."""
        self.most_in_flight = 0
        """The highest `in_flight` seen."""

    def submit(self, job: Job) -> Future[Any]:
        future: Future[Any] = Future()
        with self._changed:
            self._pending.append((job, future))
            if len(self._threads) < self.size:
                thread = threading.Thread(
                    target=self._work, name=f"nodeval-attempt-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._changed.notify()
        return future

    def stop(self, *, wait: bool) -> None:
        """Cancel every job not started yet; with `wait`, let the running ones finish first."""
        with self._changed:
            self._stopping = True
            for _, future in self._pending:
                future.cancel()
            self._pending.clear()
            threads = list(self._threads)
            self._changed.notify_all()
        if wait:
            for thread in threads:
                thread.join()

    def _work(self) -> None:
        while (taken := self._take()) is not None:
            job, future, ticket = taken
            try:
                self._run(job, future, ticket)
            finally:
                if job.world:
                    with self._changed:
                        self._worlds_free += 1
                        self._changed.notify_all()

    def _take(self) -> tuple[Job, Future[Any], int] | None:
        """The first pending job that can start now (a world job needs a free slot), marked
        running, with its turn at the gate; None once stopping."""
        with self._changed:
            while not self._stopping:
                startable = next(
                    (
                        i
                        for i, (job, _) in enumerate(self._pending)
                        if not job.world or self._worlds_free > 0
                    ),
                    None,
                )
                if startable is None:
                    self._changed.wait()
                    continue
                job, future = self._pending.pop(startable)
                if future.set_running_or_notify_cancel():  # False: its holder cancelled it
                    self._worlds_free -= job.world
                    self._tickets += 1
                    return job, future, self._tickets - 1
            return None

    def _pass_gate(self, job: Job, ticket: int) -> str | None:
        """The gate's decision, taken in the order the jobs were taken: a budget then admits
        attempts in collection order, as a serial run would, not in the order threads wake."""
        with self._changed:
            self._changed.wait_for(lambda: self._turn == ticket)
        try:
            return self.gate.reserve(job)
        finally:
            with self._changed:
                self._turn += 1
                self._changed.notify_all()

    def _run(self, job: Job, future: Future[Any], ticket: int) -> None:
        try:
            refusal = self._pass_gate(job, ticket)
        except BaseException as exc:  # a broken gate fails this attempt, not the pool
            future.set_exception(exc)
            return
        if refusal is not None:
            future.set_exception(NotStarted(refusal))
            return
        self._count(+1)
        result, error = None, None
        try:
            result = job.run()
        except BaseException as exc:  # reported on the attempt's own test, as if it ran there
            error = exc
        finally:
            self._count(-1)
        try:
            self.gate.settle(job, result, error)
        except BaseException as exc:
            error = error or exc
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def _count(self, step: int) -> None:
        with self._changed:
            self.in_flight += step
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
