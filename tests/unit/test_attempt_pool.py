"""The pool that runs attempts ahead of their tests, and the xdist scheduler that feeds it."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_nodeval.runner.pool import AttemptPool, Job, NotStarted

WAIT = 30  # seconds: only a hung pool ever reaches it


class Blocking:
    """Jobs that run until released, recording how many ran at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.started = threading.Semaphore(0)

    def job(self, key: str, value: Any = None, *, world: bool = False) -> Job:
        def run() -> Any:
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            self.started.release()
            self.release.wait(WAIT)
            with self.lock:
                self.now -= 1
            return value if value is not None else key

        return Job(key, run, world=world)

    def wait_started(self, count: int) -> None:
        for _ in range(count):
            assert self.started.acquire(timeout=WAIT)


def test_at_most_size_jobs_run_at_once_and_each_result_reaches_its_future() -> None:
    jobs = Blocking()
    pool = AttemptPool(3, world_slots=3)
    futures = [pool.submit(jobs.job(f"t{i}")) for i in range(7)]
    jobs.wait_started(3)
    assert pool.in_flight == 3
    jobs.release.set()
    assert [f.result(WAIT) for f in futures] == [f"t{i}" for i in range(7)]
    assert jobs.most == 3
    assert pool.most_in_flight == 3
    pool.stop(wait=True)


def test_world_slots_cap_the_jobs_that_open_a_world() -> None:
    jobs = Blocking()
    pool = AttemptPool(4, world_slots=1)
    worlds = [pool.submit(jobs.job(f"w{i}", world=True)) for i in range(3)]
    plain = [pool.submit(jobs.job(f"p{i}")) for i in range(2)]
    # One world job and both plain ones; the other world jobs wait for the slot
    jobs.wait_started(3)
    assert jobs.now == 3
    jobs.release.set()
    assert [f.result(WAIT) for f in worlds + plain] == ["w0", "w1", "w2", "p0", "p1"]
    pool.stop(wait=True)


def test_an_exception_reaches_only_its_own_future() -> None:
    pool = AttemptPool(2, world_slots=1)

    def boom() -> None:
        raise ValueError("the agent's harness broke")

    bad = pool.submit(Job("bad", boom))
    good = pool.submit(Job("good", lambda: "fine"))
    with pytest.raises(ValueError, match="harness broke"):
        bad.result(WAIT)
    assert good.result(WAIT) == "fine"
    pool.stop(wait=True)


def test_stop_cancels_what_has_not_started_and_lets_the_running_finish() -> None:
    jobs = Blocking()
    pool = AttemptPool(1, world_slots=1)
    running = pool.submit(jobs.job("running"))
    queued = [pool.submit(jobs.job(f"q{i}")) for i in range(3)]
    jobs.wait_started(1)
    threading.Timer(0.05, jobs.release.set).start()
    pool.stop(wait=True)
    assert running.result(WAIT) == "running"
    for future in queued:
        with pytest.raises(CancelledError):
            future.result(WAIT)


class Gate:
    """Refuses the keys it is told to; records what it saw."""

    def __init__(self, refuse: set[str]) -> None:
        self.refuse = refuse
        self.reserved: list[str] = []
        self.settled: list[tuple[str, Any, str | None]] = []

    def reserve(self, job: Job) -> str | None:
        self.reserved.append(job.key)
        return "over budget" if job.key in self.refuse else None

    def settle(self, job: Job, result: Any, error: BaseException | None) -> None:
        self.settled.append((job.key, result, type(error).__name__ if error else None))


def test_the_start_gate_can_refuse_a_start_and_settles_every_started_job() -> None:
    gate = Gate({"b"})
    pool = AttemptPool(1, world_slots=1, gate=gate)

    def fails() -> None:
        raise RuntimeError("x")

    a, b, c = (
        pool.submit(Job("a", lambda: 1)),
        pool.submit(Job("b", lambda: 2)),
        pool.submit(Job("c", fails)),
    )
    assert a.result(WAIT) == 1
    with pytest.raises(NotStarted, match="over budget"):
        b.result(WAIT)
    with pytest.raises(RuntimeError):
        c.result(WAIT)
    pool.stop(wait=True)
    assert gate.reserved == ["a", "b", "c"]
    assert gate.settled == [("a", 1, None), ("c", None, "RuntimeError")], (
        "a refused job is never settled"
    )


class SlowGate(Gate):
    """Takes a while to decide, and notes how many decisions overlapped."""

    def __init__(self) -> None:
        super().__init__(set())
        self.deciding = self.most_deciding = 0
        self.lock = threading.Lock()

    def reserve(self, job: Job) -> str | None:
        with self.lock:
            self.deciding += 1
            self.most_deciding = max(self.most_deciding, self.deciding)
        time.sleep(0.02)
        with self.lock:
            self.deciding -= 1
        return super().reserve(job)


def test_the_gate_decides_one_job_at_a_time_in_the_order_taken() -> None:
    gate = SlowGate()
    pool = AttemptPool(6, world_slots=1, gate=gate)
    futures = [pool.submit(Job(str(i), lambda: None)) for i in range(12)]
    for future in futures:
        future.result(WAIT)
    pool.stop(wait=True)
    assert gate.most_deciding == 1 and gate.reserved == [str(i) for i in range(12)]


# -- the xdist scheduler ---------------------------------------------------------------------


class Node:
    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduler(chunk: int, tests: int, nodes: int) -> tuple[Any, list[Node]]:
    from pytest_nodeval.plugin.schedule import ChunkedLoadScheduling

    config = SimpleNamespace(
        getvalue=lambda name: [f"{nodes}*popen"] if name == "tx" else None,
        getoption=lambda name: None,
        hook=None,
    )
    sched = ChunkedLoadScheduling(config, None, chunk=chunk)  # type: ignore[arg-type]
    workers = [Node(f"gw{i}") for i in range(nodes)]
    collection = [f"test_{i}" for i in range(tests)]
    for node in workers:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    return sched, workers


def test_each_worker_starts_with_two_chunks_of_consecutive_tests() -> None:
    sched, (a, b) = _scheduler(chunk=15, tests=100, nodes=2)
    assert a.sent == [list(range(30))]
    assert b.sent == [list(range(30, 60))]
    assert len(sched.pending) == 40


def test_a_worker_gets_another_chunk_once_it_holds_only_one() -> None:
    sched, (a, _) = _scheduler(chunk=15, tests=100, nodes=2)
    for index in range(14):
        sched.mark_test_complete(a, index)
    assert len(a.sent) == 1, "16 still queued: more than a chunk"
    sched.mark_test_complete(a, 14)
    assert a.sent[1] == list(range(60, 75))
    assert len(sched.node2pending[a]) == 30


def test_a_small_suite_is_shared_fairly_and_then_the_workers_shut_down() -> None:
    sched, (a, b) = _scheduler(chunk=15, tests=20, nodes=2)
    assert a.sent == [list(range(10))] and b.sent == [list(range(10, 20))]
    assert a.shutting_down and b.shutting_down
    assert not sched.pending


def test_only_modes_that_wait_on_models_run_attempts_ahead() -> None:
    from pathlib import Path

    from pytest_nodeval.plugin.ahead import runs_attempts_ahead
    from pytest_nodeval.plugin.settings import Settings

    def settings(concurrency: int, mode: str, record_mode: str = "all") -> Any:
        return Settings(
            mode=mode,  # type: ignore[arg-type]
            repeat=1,
            repeat_from_cli=False,
            match="default",
            world="auto",
            report_dir=Path("reports"),
            case_roots=(),
            profile=None,
            baseline=None,
            update_baseline=False,
            concurrency=concurrency,
            record_mode=record_mode,  # type: ignore[arg-type]
        )

    assert runs_attempts_ahead(settings(8, "live"))
    assert not runs_attempts_ahead(settings(1, "live"))
    assert not runs_attempts_ahead(settings(8, "deterministic"))
    assert runs_attempts_ahead(settings(8, "record", "missing"))
    # record mode's `none` records nothing: its attempts replay, inline as deterministic ones
    assert not runs_attempts_ahead(settings(8, "record", "none"))
