"""The progress tally, fed events by hand: counts by attempt, spend, ETA and the line."""

from __future__ import annotations

import pytest

from pytest_nodeval.report.progress import (
    ETA_WINDOW,
    Snapshot,
    Tally,
    format_eta,
    format_line,
)


def _tests(*attempts: tuple[str, str, int]) -> dict[str, tuple[str, int]]:
    return {nodeid: (case_id, repeat) for nodeid, case_id, repeat in attempts}


def _run(
    tally: Tally,
    nodeid: str,
    start: float,
    end: float,
    outcome: str = "passed",
    infra: bool = False,
    cost: float | None = None,
) -> None:
    tally.start(nodeid, start)
    tally.result(nodeid, outcome, infra, cost, end)
    tally.finish(nodeid, end)


def test_done_in_flight_failed_and_infra_are_counted_by_attempt() -> None:
    tally = Tally(_tests(("a", "a", 1), ("b", "b", 1), ("c", "c", 1), ("d", "d", 1)))
    _run(tally, "a", 0, 1)
    _run(tally, "b", 1, 2, outcome="failed")
    _run(tally, "c", 2, 3, outcome="error", infra=True)
    tally.start("d", 3)
    snap = tally.snapshot()
    assert (snap.total, snap.done, snap.in_flight, snap.failed, snap.infra) == (4, 3, 1, 1, 1)


def test_an_attempt_checked_by_two_tests_is_done_when_both_are() -> None:
    tally = Tally(_tests(("yaml[a]", "a", 1), ("py[a]", "a", 1)))
    _run(tally, "yaml[a]", 0, 1)
    tally.start("py[a]", 1)
    assert (tally.snapshot().total, tally.snapshot().done, tally.snapshot().in_flight) == (1, 0, 1)
    tally.result("py[a]", "failed", False, None, 2)
    tally.finish("py[a]", 2)
    snap = tally.snapshot()
    assert (snap.done, snap.in_flight, snap.failed) == (1, 0, 1)


def test_tests_the_controller_learns_late_are_counted_and_never_take_progress_back() -> None:
    tests = _tests(("yaml[a]", "a", 1))
    tally = Tally(tests)
    _run(tally, "yaml[a]", 0, 1)
    assert tally.snapshot().done == 1
    tests["py[a]"] = ("a", 1)  # under xdist a Python scenario is known by its first report
    tests["py[b]"] = ("b", 1)
    tally.result("py[a]", "failed", False, None, 2)
    tally.result("py[b]", "passed", False, None, 2)
    snap = tally.snapshot()
    assert (snap.total, snap.done, snap.in_flight, snap.failed) == (2, 1, 1, 1)


def test_a_crashed_worker_is_an_infrastructure_error_and_ends_the_test() -> None:
    tally = Tally(_tests(("a", "a", 1)))
    tally.start("a", 0)
    tally.crash("a", 5)
    snap = tally.snapshot()
    assert (snap.done, snap.in_flight, snap.failed, snap.infra) == (1, 0, 0, 1)


def test_a_rerun_forgets_the_try_that_failed() -> None:
    tally = Tally(_tests(("a", "a", 1)))
    tally.start("a", 0)
    tally.result("a", "failed", False, 0.5, 1)
    tally.rerun("a")
    tally.result("a", "passed", False, 0.25, 2)
    tally.finish("a", 2)
    snap = tally.snapshot()
    assert (snap.done, snap.failed, snap.spend_usd) == (1, 0, 0.25)


def test_tests_that_are_no_attempts_are_not_counted() -> None:
    tally = Tally(_tests(("a", "a", 1)))
    _run(tally, "test_plain.py::test_x", 0, 1, outcome="failed")
    tally.crash("test_plain.py::test_y", 1)
    snap = tally.snapshot()
    assert (snap.total, snap.done, snap.failed, snap.infra) == (1, 0, 0, 0)


def test_spend_sums_attempts_that_carry_a_cost_once_each() -> None:
    tally = Tally(_tests(("yaml[a]", "a", 1), ("py[a]", "a", 1), ("b", "b", 1), ("c", "c", 1)))
    assert tally.snapshot().spend_usd is None
    _run(tally, "yaml[a]", 0, 1, cost=0.5)
    _run(tally, "py[a]", 1, 2, cost=0.5)  # two checks of one attempt: one spend
    _run(tally, "b", 2, 3, cost=0.25)
    _run(tally, "c", 3, 4)  # unpriced: adds nothing
    assert tally.snapshot().spend_usd == pytest.approx(0.75)


def test_attempts_a_worker_runs_ahead_are_in_flight() -> None:
    tally = Tally(_tests(*((f"t{i}", f"case{i}", 1) for i in range(10))))
    tally.start("t0", 0.0)
    tally.ahead("gw0", 7)  # t0's attempt and seven more run in gw0's pool
    tally.ahead("gw1", 2)
    assert tally.snapshot().in_flight == 10
    tally.ahead("gw0", 3)  # the latest word of a worker replaces its earlier one
    assert tally.snapshot().in_flight == 6
    _run(tally, "t1", 1.0, 2.0)
    for i in range(2, 10):
        _run(tally, f"t{i}", 2.0, 3.0)
    assert tally.snapshot().in_flight == 1, "never more than is left"


def test_eta_is_what_remains_at_the_rate_attempts_finished() -> None:
    tally = Tally(_tests(*((f"t{i}", f"case{i}", 1) for i in range(10))))
    assert tally.snapshot().eta_s is None, "no attempt done yet: no ETA"
    for i, end in enumerate((4.0, 5.0, 6.0)):  # one at a time from t=0: 3 done in 6 s
        _run(tally, f"t{i}", 0.0 if i == 0 else end - 1.0, end)
    assert tally.snapshot().eta_s == pytest.approx(6.0 / 3 * 7)


def test_the_eta_sees_parallelism_in_the_rate_whatever_runs_it() -> None:
    """Four tests at once (workers, or attempts run ahead): done four times as fast."""
    tally = Tally(_tests(*((f"t{i}", f"case{i}", 1) for i in range(12))))
    for i in range(4):
        tally.start(f"t{i}", 0.0)
    for i in range(4):
        tally.result(f"t{i}", "passed", False, None, 8.0)
        tally.finish(f"t{i}", 8.0)
    assert tally.snapshot().eta_s == pytest.approx(8.0 / 4 * 8)


def test_the_eta_follows_the_recent_attempts() -> None:
    count = ETA_WINDOW + 20
    tally = Tally(_tests(*((f"t{i}", f"case{i}", 1) for i in range(count + 10))))
    clock = 0.0
    for i in range(count):
        clock += 100.0 if i < 20 else 1.0  # the first 20 were slow
        _run(tally, f"t{i}", clock - 0.5, clock)
    assert tally.snapshot().eta_s == pytest.approx(1.0 * 10)


def test_every_event_costs_the_same_however_many_tests_there_are() -> None:
    """Counted, not timed: the tally walks the test map once, not once per event."""

    class CountingDict(dict[str, tuple[str, int]]):
        walked = 0

        def values(self):  # type: ignore[override]
            CountingDict.walked += 1
            return super().values()

    tests = CountingDict(_tests(*((f"t{i}", f"case{i}", 1) for i in range(2000))))
    tally = Tally(tests)
    for i in range(2000):
        _run(tally, f"t{i}", i, i + 1)
        tally.snapshot()
    assert tally.snapshot().done == 2000
    assert CountingDict.walked == 1


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.2, "1s"),
        (45, "45s"),
        (61, "2m"),
        (720, "12m"),
        (3600, "1h00m"),
        (3 * 3600 + 5 * 60 + 1, "3h06m"),
    ],
)
def test_format_eta(seconds: float, text: str) -> None:
    assert format_eta(seconds) == text


def test_the_line_says_spend_and_eta_only_when_known() -> None:
    known = Snapshot(
        total=600, done=120, in_flight=8, failed=3, infra=1, spend_usd=1.234, eta_s=700
    )
    assert (
        format_line(known)
        == "nodeval: 120/600 attempts, 8 in flight, 3 failed, 1 infra, $1.23, ETA 12m"
    )
    unknown = Snapshot(total=6, done=0, in_flight=1, failed=0, infra=0, spend_usd=None, eta_s=None)
    assert format_line(unknown) == "nodeval: 0/6 attempts, 1 in flight, 0 failed, 0 infra"
