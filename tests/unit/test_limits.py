"""The shared rate limiter: parsing nodeval_limits, the window arithmetic, the SQLite state.

The SQLite tests give the limiter explicit times, so nothing here depends on how fast the
machine is; the multi-process tests count, they never time.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_nodeval.agent.limits import (
    INFLIGHT_POLL_S,
    LimitRule,
    RunLimits,
    SharedLimiter,
    parse_limits,
    process_alive,
    rpm_wait,
    tpm_wait,
)
from pytest_nodeval.agent.retries import (
    RetryPolicy,
    backoff_s,
    policy_for,
    request_model,
    retry_after_s,
    should_retry,
)
from pytest_nodeval.errors import ConfigError

# -- parsing --------------------------------------------------------------------------------


def test_lines_become_rules_for_providers_and_model_globs() -> None:
    rules = parse_limits(
        [
            "anthropic: rpm=50 tpm=40000 inflight=8",
            "",
            "# a comment",
            "anthropic/claude-haiku-*: rpm=20 retries=6 max_wait=90.5",
            "openai: inflight=4",
        ],
        "tox.ini",
    )
    assert rules == (
        LimitRule("anthropic", None, rpm=50, tpm=40000, inflight=8),
        LimitRule("anthropic", "claude-haiku-*", rpm=20, retries=6, max_wait_s=90.5),
        LimitRule("openai", None, inflight=4),
    )
    limits = RunLimits(rules, Path("x"))
    assert [r.bucket for r in limits.rules_for("anthropic", "claude-haiku-4-5")] == [
        "anthropic",
        "anthropic/claude-haiku-*",
    ]
    assert [r.bucket for r in limits.rules_for("anthropic", "claude-opus-4")] == ["anthropic"]
    assert [r.bucket for r in limits.rules_for("anthropic", None)] == ["anthropic"]
    assert limits.rules_for("mock", "m") == ()


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("anthropic rpm=5", "is not 'provider: key=value ...'"),
        (": rpm=5", "is not 'provider: key=value ...'"),
        ("anthropic/: rpm=5", "is not 'provider: key=value ...'"),
        (
            "anthropic: rps=5",
            "has 'rps=5'; expected key=value with key one of rpm, tpm, inflight, retries, max_wait",
        ),
        ("anthropic: rpm", "has 'rpm'"),
        ("anthropic: rpm=0", "rpm in line 'anthropic: rpm=0' must be a whole number >= 1, got '0'"),
        (
            "anthropic: tpm=1.5",
            "tpm in line 'anthropic: tpm=1.5' must be a whole number >= 1, got '1.5'",
        ),
        (
            "anthropic: retries=-1",
            "retries in line 'anthropic: retries=-1' must be a whole number >= 0",
        ),
        (
            "anthropic: max_wait=0",
            "max_wait in line 'anthropic: max_wait=0' must be a number of seconds above 0",
        ),
        ("anthropic:", "sets nothing; give at least one of rpm"),
    ],
)
def test_a_bad_line_is_named_with_what_is_valid(line: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_limits([line], "pytest.ini")
    assert str(caught.value).startswith("nodeval_limits (pytest.ini): ")
    assert says in str(caught.value)


def test_two_lines_for_one_budget_are_refused() -> None:
    with pytest.raises(ConfigError, match="'openai' has two lines; keep one"):
        parse_limits(["openai: rpm=5", "openai: tpm=9"], "pytest.ini")


# -- the window arithmetic ---------------------------------------------------------------------


def test_rpm_waits_for_the_request_that_leaves_the_window_first() -> None:
    assert rpm_wait([], 100.0, 1) == 0.0
    assert rpm_wait([41.0, 50.0], 100.0, 3) == 0.0
    assert rpm_wait([41.0, 50.0, 70.0], 100.0, 3) == pytest.approx(1.0)  # 41 leaves at 101
    assert rpm_wait([41.0, 50.0, 70.0], 100.0, 2) == pytest.approx(10.0)  # 50 must leave too
    # Older than a minute: gone
    assert rpm_wait([10.0, 39.0, 50.0], 100.0, 1) == pytest.approx(10.0)


def test_tpm_waits_until_the_last_minutes_tokens_fall_below_the_limit() -> None:
    assert tpm_wait([(50.0, 500)], 100.0, 1000) == 0.0
    assert tpm_wait([(50.0, 600), (60.0, 400)], 100.0, 1000) == pytest.approx(10.0)  # 1000 reached
    assert tpm_wait([(50.0, 600), (60.0, 400), (70.0, 900)], 100.0, 1000) == pytest.approx(20.0)
    assert tpm_wait([(30.0, 5000), (90.0, 10)], 100.0, 1000) == 0.0  # the big debit left the window
    # One response over the limit
    assert tpm_wait([(95.0, 3000)], 100.0, 1000) == pytest.approx(55.0)


# -- retries: pure parts ----------------------------------------------------------------------


def test_retry_rules_follow_the_sdks() -> None:
    assert (
        should_retry(429, {})
        and should_retry(529, {})
        and should_retry(503, {})
        and should_retry(408, {})
    )
    assert not should_retry(400, {}) and not should_retry(401, {}) and not should_retry(200, {})
    assert not should_retry(503, {"x-should-retry": "false"})
    assert should_retry(400, {"x-should-retry": "true"})


def test_retry_after_prefers_milliseconds_and_reads_dates() -> None:
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == pytest.approx(0.25)
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s(
        {"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412500.0
    ) == pytest.approx(10.0)
    assert retry_after_s({}) is None


def test_backoff_honours_retry_after_or_doubles_with_jitter() -> None:
    policy, rng = RetryPolicy(), random.Random(1)
    for _ in range(50):
        assert 2.0 <= backoff_s(policy, 0, {"retry-after-ms": "2000"}, rng) <= 2.2
        assert 0.375 <= backoff_s(policy, 0, None, rng) <= 0.5
        assert 1.5 <= backoff_s(policy, 2, {}, rng) <= 2.0
        assert 6.0 <= backoff_s(policy, 9, {}, rng) <= 8.0  # capped


def test_the_model_of_a_request_is_read_from_its_body_or_gemini_path() -> None:
    assert (
        request_model("/v1/messages", b'{"model": "claude-haiku-4-5", "max_tokens": 5}')
        == "claude-haiku-4-5"
    )
    assert (
        request_model("/v1beta/models/gemini-2.5-flash:streamGenerateContent", b"{}")
        == "gemini-2.5-flash"
    )
    assert request_model("/v1/chat/completions", b"not json") is None


def test_a_model_line_sets_retries_over_its_provider_line_over_the_client() -> None:
    provider = LimitRule("anthropic", None, retries=3, max_wait_s=20.0)
    model = LimitRule("anthropic", "claude-*", retries=7)
    assert policy_for((provider, model), RetryPolicy(max_retries=1)) == RetryPolicy(
        max_retries=7, max_wait_s=20.0
    )
    assert policy_for((provider,), RetryPolicy(max_retries=1)) == RetryPolicy(
        max_retries=3, max_wait_s=20.0
    )
    assert policy_for((), RetryPolicy(max_retries=1)) == RetryPolicy(max_retries=1)


# -- the SQLite state, one process --------------------------------------------------------------


def test_requests_per_minute_are_a_sliding_window(tmp_path: Path) -> None:
    limiter, rule = SharedLimiter(tmp_path / "l.sqlite"), LimitRule("p", rpm=2)
    first, _ = limiter.try_acquire([rule], now=1000.0)
    second, _ = limiter.try_acquire([rule], now=1010.0)
    assert first is not None and second is not None
    limiter.release(first, now=1011.0)
    limiter.release(second, now=1011.0)
    refused, wait = limiter.try_acquire([rule], now=1020.0)
    # Finished or not, both started this minute
    assert refused is None and wait == pytest.approx(40.0)
    third, _ = limiter.try_acquire([rule], now=1060.5)
    assert third is not None


def test_tokens_are_debited_after_the_response_and_hold_the_next_request(tmp_path: Path) -> None:
    limiter, rule = SharedLimiter(tmp_path / "l.sqlite"), LimitRule("p", tpm=1000)
    a, _ = limiter.try_acquire([rule], now=0.0)
    b, _ = limiter.try_acquire([rule], now=0.5)  # nothing debited yet: both start
    assert a is not None and b is not None
    limiter.release(a, tokens=700, now=2.0)
    limiter.release(b, tokens=400, now=3.0)
    refused, wait = limiter.try_acquire([rule], now=4.0)
    assert refused is None and wait == pytest.approx(58.0)  # 700 tokens leave the window at 62
    assert limiter.try_acquire([rule], now=62.5)[0] is not None


def test_in_flight_places_are_given_back(tmp_path: Path) -> None:
    limiter, rule = SharedLimiter(tmp_path / "l.sqlite"), LimitRule("p", inflight=2)
    held = [limiter.try_acquire([rule], now=1.0)[0] for _ in range(2)]
    refused, wait = limiter.try_acquire([rule], now=1.0)
    assert refused is None and wait == INFLIGHT_POLL_S and limiter.in_flight(rule) == 2
    assert held[0] is not None
    limiter.release(held[0], now=2.0)
    assert limiter.try_acquire([rule], now=2.0)[0] is not None


def test_a_request_needs_room_in_every_matching_budget(tmp_path: Path) -> None:
    limiter = SharedLimiter(tmp_path / "l.sqlite")
    provider, model = LimitRule("p", rpm=10), LimitRule("p", "m*", inflight=1)
    assert limiter.try_acquire([provider, model], now=0.0)[0] is not None
    assert limiter.try_acquire([provider, model], now=0.0)[0] is None  # the model budget is full
    assert limiter.try_acquire([provider], now=0.0)[0] is not None  # another model still goes


def test_a_pause_holds_every_request_of_the_budget(tmp_path: Path) -> None:
    limiter, rule = SharedLimiter(tmp_path / "l.sqlite"), LimitRule("p", rpm=100)
    limiter.pause([rule], 5.0, now=10.0)
    refused, wait = limiter.try_acquire([rule], now=12.0)
    assert refused is None and wait == pytest.approx(3.0)
    assert limiter.try_acquire([rule], now=15.5)[0] is not None


# -- the SQLite state, several processes --------------------------------------------------------


def _hold_places(
    path: str, rounds: int, counter: object, peak: object, lock: object, start: object
) -> None:
    limiter, rule = SharedLimiter(Path(path)), LimitRule("p", inflight=3)
    start.wait()  # type: ignore[attr-defined]  # all at once: without the limit, all six would overlap
    for _ in range(rounds):
        lease = limiter.acquire([rule])
        with lock:  # type: ignore[attr-defined]
            counter.value += 1  # type: ignore[attr-defined]
            peak.value = max(peak.value, counter.value)  # type: ignore[attr-defined]
        time.sleep(0.1)  # hold the place a while, so the processes overlap
        with lock:  # type: ignore[attr-defined]
            counter.value -= 1  # type: ignore[attr-defined]
        limiter.release(lease)


def test_processes_never_hold_more_places_than_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    SharedLimiter(path)
    ctx = multiprocessing.get_context("spawn")
    counter, peak, lock, start = ctx.Value("i", 0), ctx.Value("i", 0), ctx.Lock(), ctx.Barrier(6)
    workers = [
        ctx.Process(target=_hold_places, args=(str(path), 5, counter, peak, lock, start))
        for _ in range(6)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert 1 < peak.value <= 3  # they overlapped, and never past the limit
    assert SharedLimiter(path).in_flight(LimitRule("p", inflight=3)) == 0


_DIE_HOLDING = """
import os, sys
from pathlib import Path
from pytest_nodeval.agent.limits import LimitRule, SharedLimiter
limiter = SharedLimiter(Path(sys.argv[1]))
for _ in range(2):
    limiter.acquire([LimitRule("p", inflight=2)])
os._exit(9)  # killed with both places held
"""


def test_a_dead_process_does_not_keep_its_places(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", _DIE_HOLDING, str(path)], check=False, env=env, timeout=60
    )
    assert done.returncode == 9
    limiter, rule = SharedLimiter(path), LimitRule("p", inflight=2)
    assert limiter.in_flight(rule) == 2  # the dead process's leases are still there...
    assert limiter.try_acquire([rule])[0] is not None  # ...and reclaimed at the next look
    assert limiter.in_flight(rule) == 1


def test_process_alive_tells_the_living_from_the_dead() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.01)  # exited, not yet reaped
    assert not process_alive(zombie.pid)
    zombie.wait()


def test_a_profile_line_replaces_the_plain_line_under_that_profile_only() -> None:
    lines = [
        "anthropic: rpm=50 inflight=4",
        "openai: inflight=2",
        "[release] anthropic: rpm=500 inflight=32",
        "[nightly] openai: inflight=9",
    ]
    plain = parse_limits(lines, "pyproject.toml", None, ["release", "nightly"])
    assert plain == (LimitRule("anthropic", rpm=50, inflight=4), LimitRule("openai", inflight=2))
    release = parse_limits(lines, "pyproject.toml", "release", ["release", "nightly"])
    assert release == (
        LimitRule("anthropic", rpm=500, inflight=32),
        LimitRule("openai", inflight=2),
    )
    with pytest.raises(
        ConfigError,
        match=r"names profile 'relase', which nodeval_profiles does not define; "
        r"defined: release, nightly",
    ):
        parse_limits(["[relase] anthropic: rpm=5"], "pyproject.toml", None, ["release", "nightly"])
    with pytest.raises(ConfigError, match=r"rpm in line 'anthropic: rpm=x' must be"):
        parse_limits(
            ["[nightly] anthropic: rpm=x"], "pyproject.toml", "release", ["release", "nightly"]
        )
    with pytest.raises(
        ConfigError, match=r"'openai' has two lines for profile 'nightly'; keep one"
    ):
        parse_limits(
            ["[nightly] openai: rpm=1", "[nightly] openai: rpm=2"],
            "pyproject.toml",
            None,
            ["nightly"],
        )
