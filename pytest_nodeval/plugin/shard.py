"""`--nodeval-shard K/N`: this machine runs one slice of the suite; `nodeval merge` joins them.

The unit of the split is a case: every repeat and every check (a Python test bound with
`@pytest.mark.nodeval_case`) of a case lands on one shard, so a case's statistics are
computed from attempts run side by side. A plain test is a unit of its own (its node id).

The split is a rendezvous (highest-random-weight) hash with bounded loads: each unit ranks
the shards by a hash of (unit, shard) and takes the first whose load stays under
(1 + SLACK) x the mean, heaviest units first. Every shard computes the same split from the
same inputs, without talking to the others. The trade-off, chosen on purpose:

- stability: adding or removing a case moves only the cases whose preferred shard's room
  changes (a few), where longest-first over sorted ids reshuffles about half the suite;
- balance: within SLACK of the mean, plus at most one unit, rather than the tightest
  packing. Durations come from the baseline (committed, so every CI machine reads the
  same numbers), else the run history, else every attempt weighs the same.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

SLACK = 0.15
"""How far above the mean load a shard may go before a unit tries its next preferred shard."""
WORKER_OUTPUT_KEY = "nodeval_shard"
"""The key of the shard plan in an xdist worker's `workeroutput` (the controller does not
collect)."""

# Variables a CI system sets on a parallel job: (index, total, first index).
_CI_VARIABLES = (
    ("CI_NODE_INDEX", "CI_NODE_TOTAL", 1),  # GitLab parallel: (and others using the same names)
    ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),
)


@dataclass(frozen=True, slots=True)
class ShardSpec:
    index: int
    """1-based."""
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def parse_shard(value: str, environ: Mapping[str, str] = os.environ) -> ShardSpec:
    """'K/N' (1 <= K <= N), or 'auto' from the CI's variables; a bad value is a usage error."""
    if value == "auto":
        return _from_ci(environ)
    index, sep, total = value.partition("/")
    if not (sep and index.isdigit() and total.isdigit() and 1 <= int(index) <= int(total)):
        raise pytest.UsageError(
            f"--nodeval-shard: expected K/N with 1 <= K <= N (e.g. 2/4), or auto; got {value!r}"
        )
    return ShardSpec(int(index), int(total))


def _from_ci(environ: Mapping[str, str]) -> ShardSpec:
    for index_var, total_var, first in _CI_VARIABLES:
        if index_var in environ and total_var in environ:
            index, total = environ[index_var], environ[total_var]
            if not (
                index.isdigit() and total.isdigit() and first <= int(index) < int(total) + first
            ):
                raise pytest.UsageError(
                    f"--nodeval-shard=auto: {index_var}={index!r} and {total_var}={total!r} "
                    f"do not name a shard (the index counts from {first})"
                )
            return ShardSpec(int(index) - first + 1, int(total))
    names = ", ".join(f"{i}/{t}" for i, t, _ in _CI_VARIABLES)
    raise pytest.UsageError(
        f"--nodeval-shard=auto: none of the CI variables {names} is set; pass K/N instead "
        "(GitHub Actions has none: use --nodeval-shard ${{ matrix.shard }}/N)"
    )


def _unit_hash(unit: str, shard: int) -> int:
    return int.from_bytes(
        hashlib.blake2b(f"{unit}\0{shard}".encode(), digest_size=8).digest(), "big"
    )


def preference(unit: str, total: int) -> list[int]:
    """The shards (1-based) in this unit's order of preference: the rendezvous ranking."""
    return sorted(range(1, total + 1), key=lambda shard: _unit_hash(unit, shard), reverse=True)


def assign(weights: Mapping[str, float], total: int) -> dict[str, int]:
    """Unit -> shard (1-based): rendezvous hashing with loads bounded by (1 + SLACK) x the mean."""
    capacity = (1 + SLACK) * sum(weights.values()) / total
    loads = [0.0] * (total + 1)
    plan = {}
    # Heaviest first, so the big units find room; ties broken by a hash, never by the id's
    # place in the sorted list (which would shift whenever a case is added before it).
    for unit in sorted(weights, key=lambda u: (-weights[u], _unit_hash(u, 0))):
        ranked = preference(unit, total)
        shard = next((s for s in ranked if loads[s] + weights[unit] <= capacity), None)
        if shard is None:
            shard = min(ranked, key=lambda s: loads[s])  # a unit bigger than the room left anywhere
        plan[unit] = shard
        loads[shard] += weights[unit]
    return plan


def unit_of(item: pytest.Item) -> str:
    """'case:<id>' for a test bound to a case, else 'test:<node id>'."""
    from .keys import case_ref

    ref = case_ref(item)
    return f"case:{ref.case_id}" if ref is not None else f"test:{item.nodeid}"


@dataclass(frozen=True, slots=True)
class ShardPlan:
    spec: ShardSpec
    balanced_by: str
    """baseline, history or counts: where the durations came from."""
    units: dict[str, int]
    """Every unit of the collected suite -> its shard."""
    kept: int = 0
    """Tests this shard kept."""

    def cases(self) -> dict[str, int]:
        return {
            unit[5:]: shard
            for unit, shard in sorted(self.units.items())
            if unit.startswith("case:")
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.spec.index,
            "total": self.spec.total,
            "balanced_by": self.balanced_by,
            "cases": self.cases(),
            "tests": self.kept,
        }


def plan_for(
    items: list[pytest.Item], spec: ShardSpec, durations: dict[str, float], source: str
) -> ShardPlan:
    """Weights: the items of a unit times its case's duration per attempt (the mean of the
    known ones where a case has none yet, 1 when nothing is known)."""
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[unit_of(item)] += 1
    fallback = sum(durations.values()) / len(durations) if durations else 1.0
    weights = {
        unit: n * durations.get(unit[5:] if unit.startswith("case:") else "", fallback)
        for unit, n in counts.items()
    }
    return ShardPlan(spec, source if durations else "counts", assign(weights, spec.total))


def deselect(config: pytest.Config, items: list[pytest.Item]) -> ShardPlan | None:
    value = config.getoption("nodeval_shard")
    if not value:
        return None
    spec = parse_shard(value)
    durations, source = known_durations(config)
    plan = plan_for(items, spec, durations, source)
    kept = [item for item in items if plan.units[unit_of(item)] == spec.index]
    dropped = [item for item in items if plan.units[unit_of(item)] != spec.index]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    return replace(plan, kept=len(kept))


def known_durations(config: pytest.Config) -> tuple[dict[str, float], str]:
    """Milliseconds per attempt by case id: the baseline's, else the run history's."""
    from .keys import settings_of

    settings = settings_of(config)
    if settings.baseline is not None and settings.baseline.exists():
        durations = baseline_durations(settings.baseline)
        if durations:
            return durations, "baseline"
    if settings.history is not None and settings.history.is_file():
        return history_durations(settings.history), "history"
    return {}, "counts"


def baseline_durations(path: Path) -> dict[str, float]:
    from ..errors import NodevalError
    from ..report.baseline import load

    try:
        report = load(path)
    except NodevalError:
        return {}  # the controller says what is wrong with it, as a usage error
    out = {}
    for case in report.cases:
        times = [a.wall_ms if a.wall_ms is not None else a.latency_ms for a in case.attempts]
        known = [t for t in times if t is not None]
        if known:
            out[case.id] = sum(known) / len(known)
    return out


def history_durations(path: Path) -> dict[str, float]:
    """The latest run's median latency per case (the history keeps no wall times)."""
    import sqlite3
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            rows = db.execute(
                "SELECT c.case_id, c.latency_p50_ms FROM case_results c JOIN runs r USING (run_id) "
                "WHERE c.latency_p50_ms IS NOT NULL ORDER BY r.finished_at"
            ).fetchall()
    except sqlite3.Error:
        return {}
    return {case_id: float(ms) for case_id, ms in rows}  # later runs overwrite earlier ones
