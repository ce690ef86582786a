"""Rate limits shared by every process of a run: requests and tokens per minute, requests in flight.

The limits come from the `nodeval_limits` ini key, one line per provider or per model:

    anthropic: rpm=50 tpm=40000 inflight=8
    anthropic/claude-haiku-*: rpm=20 retries=6 max_wait=120
    openai: inflight=4
    [release] anthropic: rpm=200 tpm=400000 inflight=32

A request takes a place in every line that matches it (its provider's line and any model
line whose glob matches the request's `model`), so a provider line is a budget shared by all
its models and a model line a further budget of the models it names. A `[profile]` line is
in force only under that profile, in place of the plain line for the same provider or model.

The state lives in one SQLite file under the run directory, so the controller and every
xdist worker of the run draw on the same budget (never one bucket per process). Every change
is a short IMMEDIATE transaction in WAL mode. An in-flight place is a lease row carrying its
process id: a lease whose process died (a killed worker) is reclaimed at the next look, and
every lease expires after `LEASE_TTL_S` whatever happens, so nothing can wedge the run.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..shared_db import connect_shared, written
from ..world.processes import process_alive

WINDOW_S = 60.0
"""Requests and tokens per minute are counted over the last `WINDOW_S` seconds (a sliding
window)."""
LEASE_TTL_S = 900.0
"""An in-flight place is given back after this long even if its process is still alive."""
INFLIGHT_POLL_S = 0.05
"""How often a request waiting for an in-flight place looks again (no one can say when one
frees)."""
LONGEST_NAP_S = 1.0
"""A waiting request looks again at least this often (another process may have given back
a place)."""
INT_KEYS = ("rpm", "tpm", "inflight", "retries")
KEYS = (*INT_KEYS, "max_wait")


@dataclass(frozen=True, slots=True)
class LimitRule:
    """One `nodeval_limits` line: the budget of a provider, or of the models a glob names."""

    provider: str
    model: str | None = None
    """A glob (fnmatch, case-sensitive) over the request's `model`; None: every model."""
    rpm: int | None = None
    tpm: int | None = None
    inflight: int | None = None
    retries: int | None = None
    """Retries of one request on a 429/5xx/connection error; None: the client's own setting."""
    max_wait_s: float | None = None
    """The longest one request may spend waiting between its retries; None: the default."""

    @property
    def bucket(self) -> str:
        return self.provider if self.model is None else f"{self.provider}/{self.model}"

    @property
    def limits_anything(self) -> bool:
        return any(v is not None for v in (self.rpm, self.tpm, self.inflight))

    def matches(self, provider: str, model: str | None) -> bool:
        if provider != self.provider:
            return False
        return self.model is None or (model is not None and fnmatch.fnmatchcase(model, self.model))


def parse_limits(
    lines: Iterable[str],
    where: str,
    profile: str | None = None,
    profiles: Collection[str] | None = None,
) -> tuple[LimitRule, ...]:
    """`nodeval_limits` lines into the rules in force; a bad line is a ConfigError naming it.

    A line may start with `[profile]`: it applies only under that profile, where it replaces
    the unqualified line of the same provider or model. Every line is checked, in force or not.
    """
    scopes: dict[str | None, dict[str, LimitRule]] = {None: {}}
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        only, rule = _profile_of(line.strip(), where, profiles)
        scope = scopes.setdefault(only, {})
        if rule.bucket in scope:
            raise ConfigError(
                f"nodeval_limits ({where}): {rule.bucket!r} has two lines"
                f"{'' if only is None else f' for profile {only!r}'}; keep one"
            )
        scope[rule.bucket] = rule
    in_force = {**scopes[None], **(scopes.get(profile, {}) if profile is not None else {})}
    return tuple(in_force.values())


def _profile_of(
    line: str, where: str, profiles: Collection[str] | None
) -> tuple[str | None, LimitRule]:
    if not line.startswith("["):
        return None, _parse_line(line, where)
    name, closed, rest = line[1:].partition("]")
    if not closed or not name.strip():
        raise ConfigError(
            f"nodeval_limits ({where}): {line!r} starts like '[profile] provider: ...' "
            "but has no profile name in brackets"
        )
    if profiles is not None and name.strip() not in profiles:
        raise ConfigError(
            f"nodeval_limits ({where}): {line!r} names profile {name.strip()!r}, which "
            f"nodeval_profiles does not define; defined: {', '.join(profiles) or 'none'}"
        )
    return name.strip(), _parse_line(rest.strip(), where)


def _parse_line(line: str, where: str) -> LimitRule:
    target, sep, rest = line.partition(":")
    provider, _, model = target.strip().partition("/")
    if not sep or not provider or "/" in model or (target.strip().endswith("/")):
        raise ConfigError(
            f"nodeval_limits ({where}): {line!r} is not 'provider: key=value ...' or "
            "'provider/model-glob: key=value ...' (e.g. 'anthropic: rpm=50 tpm=40000 inflight=8')"
        )
    values: dict[str, float | int] = {}
    for item in rest.split():
        key, eq, raw = item.partition("=")
        if not eq or key not in KEYS:
            raise ConfigError(
                f"nodeval_limits ({where}): line {line!r} has {item!r}; expected key=value "
                f"with key one of {', '.join(KEYS)}"
            )
        values[key] = _number(key, raw, line, where)
    if not values:
        raise ConfigError(
            f"nodeval_limits ({where}): line {line!r} sets nothing; give at least one of "
            f"{', '.join(KEYS)}"
        )
    return LimitRule(
        provider=provider,
        model=model or None,
        rpm=_int(values.get("rpm")),
        tpm=_int(values.get("tpm")),
        inflight=_int(values.get("inflight")),
        retries=_int(values.get("retries")),
        max_wait_s=values.get("max_wait"),
    )


def _number(key: str, raw: str, line: str, where: str) -> float | int:
    try:
        value: float | int = int(raw) if key in INT_KEYS else float(raw)
    except ValueError:
        value = -1
    smallest = 0 if key == "retries" else 1
    if value < smallest or (key == "max_wait" and value <= 0):
        what = (
            "a number of seconds above 0"
            if key == "max_wait"
            else ("a whole number >= 0" if key == "retries" else "a whole number >= 1")
        )
        raise ConfigError(
            f"nodeval_limits ({where}): {key} in line {line!r} must be {what}, got {raw!r}"
        )
    return value


def _int(value: float | int | None) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class RunLimits:
    """The run's rules and where their shared state lives (picklable: it goes to every attempt)."""

    rules: tuple[LimitRule, ...]
    db_path: Path

    def rules_for(self, provider: str, model: str | None) -> tuple[LimitRule, ...]:
        return tuple(r for r in self.rules if r.matches(provider, model))


# -- the sliding window: pure arithmetic -------------------------------------------------


def rpm_wait(starts: Sequence[float], now: float, rpm: int) -> float:
    """Seconds until one more request fits, given the start times of the last minute's requests."""
    recent = sorted(t for t in starts if t > now - WINDOW_S)
    if len(recent) < rpm:
        return 0.0
    # The request that must leave the window first is the one `rpm` places from the newest.
    return recent[len(recent) - rpm] + WINDOW_S - now


def tpm_wait(debits: Sequence[tuple[float, int]], now: float, tpm: int) -> float:
    """Seconds until the last minute's tokens fall below `tpm` (then a request may start)."""
    recent = sorted((t, n) for t, n in debits if t > now - WINDOW_S)
    total = sum(n for _, n in recent)
    for t, n in recent:
        if total < tpm:
            break
        total -= n
        if total < tpm:
            return t + WINDOW_S - now
    return 0.0


# -- the shared state ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lease:
    id: str
    rules: tuple[LimitRule, ...]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS starts (bucket TEXT NOT NULL, t REAL NOT NULL);
CREATE INDEX IF NOT EXISTS starts_by_bucket ON starts (bucket, t);
CREATE TABLE IF NOT EXISTS debits (bucket TEXT NOT NULL, t REAL NOT NULL, tokens INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS debits_by_bucket ON debits (bucket, t);
CREATE TABLE IF NOT EXISTS leases (
    id TEXT NOT NULL, bucket TEXT NOT NULL, pid INTEGER NOT NULL, expires REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS leases_by_bucket ON leases (bucket);
CREATE TABLE IF NOT EXISTS pauses (bucket TEXT PRIMARY KEY, until REAL NOT NULL);
"""


class SharedLimiter:
    """The run's budgets in one SQLite file; every process of the run opens the same one."""

    def __init__(self, path: Path, *, clock: Callable[[], float] | None = None) -> None:
        self.path = path
        self._clock = clock or time.time
        self._local = threading.local()
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """The thread's connection for one transaction: one left open by an error is undone,
        and a disk that filled up is named (shared_db.written)."""
        # One connection per thread (sqlite3 connections are not shared across threads), and
        # a new one after a fork. The busy timeout waits out other processes' transactions.
        db = getattr(self._local, "db", None)
        if db is None or self._local.pid != os.getpid():
            db = connect_shared(self.path)
            # The state lives one run and means nothing after a crash of the machine: no fsync.
            db.execute("PRAGMA synchronous=OFF")
            self._local.db, self._local.pid = db, os.getpid()
        try:
            with written(self.path):
                yield db
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")

    def now(self) -> float:
        return self._clock()

    def try_acquire(
        self, rules: Sequence[LimitRule], now: float | None = None
    ) -> tuple[Lease | None, float]:
        """A place in every rule's budget, or how long to wait before trying again."""
        now = self.now() if now is None else now
        with self._connect() as db:  # an error rolls the transaction back
            db.execute("BEGIN IMMEDIATE")
            _forget_the_past(db, now)
            wait = max((_wait_for(db, rule, now) for rule in rules), default=0.0)
            lease = None if wait > 0 else _take(db, rules, now)
            db.execute("COMMIT")
        return lease, wait

    def acquire(
        self, rules: Sequence[LimitRule], sleep: Callable[[float], None] = time.sleep
    ) -> Lease:
        while True:
            lease, wait = self.try_acquire(rules)
            if lease is not None:
                return lease
            sleep(min(wait, LONGEST_NAP_S))

    async def acquire_async(self, rules: Sequence[LimitRule]) -> Lease:
        while True:
            lease, wait = self.try_acquire(rules)
            if lease is not None:
                return lease
            await asyncio.sleep(min(wait, LONGEST_NAP_S))

    def release(self, lease: Lease, tokens: int = 0, now: float | None = None) -> None:
        """Give back the in-flight places and debit the tokens the response reported."""
        now = self.now() if now is None else now
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM leases WHERE id = ?", (lease.id,))
            if tokens > 0:
                db.executemany(
                    "INSERT INTO debits VALUES (?, ?, ?)",
                    [(r.bucket, now, tokens) for r in lease.rules if r.tpm is not None],
                )
            db.execute("COMMIT")

    def pause(self, rules: Sequence[LimitRule], seconds: float, now: float | None = None) -> None:
        """The provider said "retry after": no process of the run starts a request there until
        then."""
        until = (self.now() if now is None else now) + seconds
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "INSERT INTO pauses VALUES (?, ?) ON CONFLICT(bucket) DO UPDATE SET "
                "until = max(until, excluded.until)",
                [(r.bucket, until) for r in rules],
            )
            db.execute("COMMIT")

    def in_flight(self, rule: LimitRule) -> int:
        with self._connect() as db:
            return int(
                db.execute(
                    "SELECT count(*) FROM leases WHERE bucket = ?", (rule.bucket,)
                ).fetchone()[0]
            )


def _forget_the_past(db: sqlite3.Connection, now: float) -> None:
    db.execute("DELETE FROM starts WHERE t <= ?", (now - WINDOW_S,))
    db.execute("DELETE FROM debits WHERE t <= ?", (now - WINDOW_S,))
    db.execute("DELETE FROM leases WHERE expires <= ?", (now,))
    db.execute("DELETE FROM pauses WHERE until <= ?", (now,))
    pids = [
        row[0]
        for row in db.execute("SELECT DISTINCT pid FROM leases WHERE pid != ?", (os.getpid(),))
    ]
    dead = [(pid,) for pid in pids if not process_alive(pid)]
    db.executemany("DELETE FROM leases WHERE pid = ?", dead)


def _wait_for(db: sqlite3.Connection, rule: LimitRule, now: float) -> float:
    waits = [0.0]
    paused = db.execute("SELECT until FROM pauses WHERE bucket = ?", (rule.bucket,)).fetchone()
    if paused is not None:
        waits.append(paused[0] - now)
    # Counting first: the rows (all of the last minute) are read only when the budget is spent.
    if (
        rule.rpm is not None
        and _scalar(db, "SELECT count(*) FROM starts WHERE bucket = ?", rule.bucket) >= rule.rpm
    ):
        starts = [
            row[0] for row in db.execute("SELECT t FROM starts WHERE bucket = ?", (rule.bucket,))
        ]
        waits.append(rpm_wait(starts, now, rule.rpm))
    if (
        rule.tpm is not None
        and _scalar(db, "SELECT total(tokens) FROM debits WHERE bucket = ?", rule.bucket)
        >= rule.tpm
    ):
        debits = db.execute(
            "SELECT t, tokens FROM debits WHERE bucket = ?", (rule.bucket,)
        ).fetchall()
        waits.append(tpm_wait(debits, now, rule.tpm))
    if rule.inflight is not None and (
        _scalar(db, "SELECT count(*) FROM leases WHERE bucket = ?", rule.bucket) >= rule.inflight
    ):
        waits.append(INFLIGHT_POLL_S)
    return max(waits)


def _scalar(db: sqlite3.Connection, query: str, bucket: str) -> float:
    """The one number a query about one bucket answers (a count or a total)."""
    return float(db.execute(query, (bucket,)).fetchone()[0])


def _take(db: sqlite3.Connection, rules: Sequence[LimitRule], now: float) -> Lease:
    lease = Lease(uuid.uuid4().hex, tuple(rules))
    db.executemany(
        "INSERT INTO starts VALUES (?, ?)", [(r.bucket, now) for r in rules if r.rpm is not None]
    )
    db.executemany(
        "INSERT INTO leases VALUES (?, ?, ?, ?)",
        [
            (lease.id, r.bucket, os.getpid(), now + LEASE_TTL_S)
            for r in rules
            if r.inflight is not None
        ],
    )
    return lease


@functools.lru_cache(maxsize=8)
def shared_limiter(path: Path) -> SharedLimiter:
    """This process's handle on a run's limiter file (it holds no connection: threads may
    share it)."""
    return SharedLimiter(path)
