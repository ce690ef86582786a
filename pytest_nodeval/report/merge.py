"""Shard runs joined into one run: what `nodeval merge` writes.

The merged report is built the way the controller builds one: the shards' attempts go
through `aggregate` again, so per-case and suite statistics are recomputed from the
attempts (never averaged from the shards' numbers), and a case's verdict is the one one
machine would have given. Shards that cannot be joined honestly are refused, naming them:
another commit, mode, repeat, match or gate policy, a different split of the suite, a case
run on two shards, a shard given twice, or (unless allowed) a shard missing.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..errors import NodevalError
from .models import AttemptRecord, RunReport, load_report

# Settings every shard must share: the merged report states one value of each.
_SAME = ("mode", "repeat", "match", "gate_policy", "matrix")


@dataclass(frozen=True, slots=True)
class ShardRun:
    path: Path
    """The run directory."""
    report: RunReport

    @property
    def label(self) -> str:
        shard = self.report.shard
        return f"{self.path} (shard {shard.index}/{shard.total})" if shard else str(self.path)


def load_shards(paths: list[Path]) -> list[ShardRun]:
    """The runs, each once: a run reached twice (`latest` beside its directory, a symlink an
    artifact upload turned into a copy) is the same run, told apart by its run id."""
    runs: dict[str, ShardRun] = {}
    for path in paths:
        if not (path / "report.json").is_file():
            raise NodevalError(f"{path}: not a run directory (no report.json)")
        report = load_report(path)
        runs.setdefault(report.run_id, ShardRun(path, report))
    return list(runs.values())


def check_compatible(runs: list[ShardRun]) -> None:
    """Raise naming the runs that cannot be joined into one."""
    first = runs[0]
    for run in runs[1:]:
        for field in _SAME:
            mine, theirs = getattr(first.report, field), getattr(run.report, field)
            if mine != theirs:
                raise NodevalError(
                    f"cannot merge runs of different {field}: {first.label} has {mine!r}, "
                    f"{run.label} has {theirs!r}"
                )
        commits = (
            first.report.environment.get("git_commit"),
            run.report.environment.get("git_commit"),
        )
        if None not in commits and commits[0] != commits[1]:
            raise NodevalError(
                f"cannot merge runs of different commits: {first.label} ran {commits[0]}, "
                f"{run.label} ran {commits[1]}"
            )
    _check_splits(runs)
    _check_overlap(runs)


def _check_splits(runs: list[ShardRun]) -> None:
    sharded = [r for r in runs if r.report.shard is not None]
    if sharded and len(sharded) != len(runs):
        whole = next(r for r in runs if r.report.shard is None)
        raise NodevalError(
            "cannot merge a whole run with shard runs: "
            f"{whole.path} was not run with --nodeval-shard"
        )
    seen: dict[int, ShardRun] = {}
    for run in sharded:
        shard, reference = run.report.shard, sharded[0].report.shard
        assert shard is not None and reference is not None
        if (shard.total, shard.cases) != (reference.total, reference.cases):
            raise NodevalError(
                f"the shards split the suite differently: {sharded[0].label} and {run.label} "
                "(another -m/-k selection, or a different baseline or history balanced them; "
                "run every shard with the same options and the committed baseline)"
            )
        if shard.index in seen:
            raise NodevalError(
                f"shard {shard.index}/{shard.total} given twice: "
                f"{seen[shard.index].path} and {run.path}"
            )
        seen[shard.index] = run


def _check_overlap(runs: list[ShardRun]) -> None:
    owner: dict[str, ShardRun] = {}
    for run in runs:
        for case in run.report.cases:
            if case.id in owner:
                raise NodevalError(
                    f"case {case.id!r} was run by two of the runs: {owner[case.id].label} and "
                    f"{run.label}; shards must not overlap"
                )
            owner[case.id] = run


def missing_shards(runs: list[ShardRun]) -> list[int]:
    shards = [r.report.shard for r in runs if r.report.shard is not None]
    if not shards:
        return []
    present = {s.index for s in shards}
    return [k for k in range(1, shards[0].total + 1) if k not in present]


def _not_run(case_id: str, repeat: int, shard: str) -> AttemptRecord:
    return AttemptRecord(
        nodeid=f"{case_id}[r{repeat}]",
        case_id=case_id,
        repeat=repeat,
        outcome="not_run",
        reason=f"not run: the run of shard {shard} is missing (nodeval merge --allow-missing)",
    )


def merge_reports(runs: list[ShardRun], run_id: str, missing: list[int]) -> RunReport:
    """One report from compatible shard runs; `missing` shards' cases are not run."""
    from .aggregate import aggregate
    from .models import summary_of
    from .variants import with_variants

    records = [a for run in runs for case in run.report.cases for a in case.attempts]
    metas = {case.id: case.meta() for run in runs for case in run.report.cases}
    first = runs[0].report
    plan = first.shard.cases if first.shard else {}
    total = first.shard.total if first.shard else 0
    for case_id, shard in sorted(plan.items()):
        if shard in missing:
            records += [
                _not_run(case_id, r, f"{shard}/{total}") for r in range(1, first.repeat + 1)
            ]
    cases, totals, suite = aggregate(records, metas)
    # As the shards' controllers set it (replay or not).
    totals.cost_recorded = first.totals.cost_recorded
    started = min(r.report.started_at for r in runs)
    finished = max(r.report.finished_at for r in runs)
    duration_s = round((_when(finished) - _when(started)).total_seconds(), 3)
    status = combined_exit_status([_before_gate(r.report) for r in runs])
    pytest_status = combined_exit_status([r.report.pytest_exit_status for r in runs])
    environment = {**first.environment, "shards": str(total or len(runs))}
    merged = RunReport(
        run_id=run_id,
        started_at=started,
        finished_at=finished,
        duration_s=duration_s,
        summary=summary_of(cases, suite, duration_s),
        mode=first.mode,
        repeat=first.repeat,
        profile=first.profile,
        match=first.match,
        world=first.world,
        max_cost_usd=first.max_cost_usd,
        exit_status=status,
        pytest_exit_status=pytest_status,
        totals=totals,
        suite=suite,
        cases=cases,
        environment=environment,
        gate_policy=dict(first.gate_policy),
        merged_from=[r.report.run_id for r in runs],
        matrix=list(first.matrix),
    )
    return with_variants(merged, dict(first.gate_policy))


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _before_gate(report: RunReport) -> int:
    """A shard's status without its own gate (the merged run is gated as a whole)."""
    from .baseline import EXIT_GATE_FAILED

    return 0 if report.exit_status == EXIT_GATE_FAILED else report.exit_status


def combined_exit_status(statuses: list[int]) -> int:
    """The status one run of every shard's tests would have ended with: an incomplete run
    (2-4, as pytest's interrupt wins over failures) over an agent failure (1) over
    infrastructure errors (7) over success; 5 (no tests) only when no shard ran any."""
    from .models import EXIT_INFRA_ERROR

    ran = [s for s in statuses if s != 5] or [5]
    for status in (2, 3, 4, 1, EXIT_INFRA_ERROR):  # the worst first
        if status in ran:
            return status
    return max(ran)


def copy_sessions(runs: list[ShardRun], target: Path) -> int:
    """Each shard's `_sessions/` (the observed journals report.json points to) into the merged
    run: hard links where the file system allows, copies elsewhere. Returns the files placed."""
    placed = 0

    def link_or_copy(src: str, dst: str) -> None:
        nonlocal placed
        placed += 1
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    for run in runs:
        sessions = run.path / "_sessions"
        if sessions.is_dir():
            shutil.copytree(
                sessions, target / "_sessions", copy_function=link_or_copy, dirs_exist_ok=True
            )
    return placed
