"""Baselines: load one, compare a run with it, and bless a run as the new one.

A baseline is a report.json (schema_version "1") kept at a reviewable path, by default
`reports/baseline.json`; blessing a release's numbers is one command and one file change.
Pure of pytest: the plugin and the `nodeval baseline` command both use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NodevalError
from ..journal.writer import write_atomic
from .models import RunReport, load_report

if TYPE_CHECKING:  # stats/ loads numpy: imported when a gate runs, not with this module
    from ..stats.gate_models import CaseSample, Diff, GatePolicy

DEFAULT_BASELINE = Path("reports") / "baseline.json"
EXIT_GATE_FAILED = 6
"""Exit status of a run (or `nodeval baseline`) whose gate FAILED while its tests passed."""

# pytest exit statuses of runs that did not complete: interrupted, internal error, usage error.
_INCOMPLETE = {2: "was interrupted", 3: "hit an internal error", 4: "was a usage error"}


def resolve(path: Path) -> Path:
    """A report.json from a run directory or a file; a directory of runs is listed, not guessed."""
    if path.is_file():
        return path
    if (path / "report.json").is_file():
        return path / "report.json"
    if path.is_dir():
        runs = sorted((p.parent for p in path.glob("*/report.json")), reverse=True)
        if runs:
            shown = "\n  ".join(str(r) for r in runs[:10])
            more = f"\n  ... and {len(runs) - 10} more" if len(runs) > 10 else ""
            raise NodevalError(
                f"{path} holds {len(runs)} runs; name one of them (or its report.json):"
                f"\n  {shown}{more}"
            )
        raise NodevalError(f"{path}: no report.json here or in its run directories")
    raise NodevalError(f"{path}: no such report or run directory")


def load(path: Path) -> RunReport:
    """A report that the gate can compare: data no gate can use (a NaN latency, a negative
    cost, a latency without its attempt) is one error naming the file, case and field."""
    report_path = resolve(path)
    report = load_report(report_path)
    try:
        samples(report)
    except ValueError as exc:
        raise NodevalError(f"{report_path}: not usable by the gate: {exc}") from None
    return report


def samples(report: RunReport) -> list[CaseSample]:
    """What the gate compares: per case, the agent's pass/fail per attempt, latencies and tokens.

    Infrastructure errors (and attempts that never ran) are left out: they are not the agent's.
    A case run with adaptive repeats carries its design, so the gate tests it sequentially.
    """
    from ..stats.gate_models import CaseSample

    out: list[CaseSample] = []
    for case in report.cases:
        judged = [
            a for a in case.attempts if a.outcome in ("passed", "failed") and not a.infra_error
        ]
        adaptive = getattr(case, "adaptive", None)  # older in-memory reports have none
        out.append(
            CaseSample(
                case_id=case.id,
                outcomes=tuple(a.outcome == "passed" for a in judged),
                latencies_ms=tuple(a.latency_ms for a in judged if a.latency_ms is not None),
                tokens=tuple(a.tokens for a in judged),
                costs=tuple(a.cost_usd for a in judged if a.cost_usd is not None),
                adaptive_cap=adaptive.cap if adaptive is not None else None,
                adaptive_decided=adaptive is not None
                and adaptive.stop in ("regressed", "no regression"),
            )
        )
    return out


def policy_from(values: dict[str, float]) -> GatePolicy:
    from ..stats.gate_models import GatePolicy

    # Typed float, but the whole-number fields (latency_min_attempts, bootstrap_iterations,
    # bootstrap_seed) hold ints: plugin/settings.py parses them so, and report.json keeps them.
    return GatePolicy(**values)  # type: ignore[arg-type]


def compare(baseline: RunReport, current: RunReport, policy: GatePolicy) -> Diff:
    """The gate's Diff of two runs (see stats/gate.py), in the light of both runs' modes:
    two deterministic replays are compared without statistics."""
    from ..stats.gate import compare as compare_samples

    return compare_samples(
        samples(baseline),
        samples(current),
        policy,
        baseline_mode=baseline.mode,
        current_mode=current.mode,
    )


def gate_section(diff: Diff, label: str) -> dict[str, Any]:
    """What report.json keeps under `gate`: the baseline compared with, then the Diff."""
    return {"baseline": label, **diff.model_dump(mode="json")}


def incomplete_reason(report: RunReport) -> str | None:
    if report.pytest_exit_status in _INCOMPLETE:
        return (
            f"the run {_INCOMPLETE[report.pytest_exit_status]} "
            f"(pytest exit status {report.pytest_exit_status})"
        )
    never = [
        a.nodeid
        for c in report.cases
        for a in c.attempts
        if a.outcome == "not_run" or (a.reason and a.reason.startswith("never reported"))
    ]
    if never:
        return f"{len(never)} attempt(s) not run (the run was cut short), e.g. {never[0]}"
    if report.totals.attempts == 0:
        return "the run has no attempts"
    return None


def save(source: Path, target: Path) -> Path:
    """Write a completed run's report to the baseline path, atomically."""
    report_path = resolve(source)
    report = load_report(report_path)
    reason = incomplete_reason(report)
    if reason is not None:
        raise NodevalError(f"{report_path}: refusing to bless it as the baseline: {reason}")
    write_atomic(target, report.model_dump_json(indent=2) + "\n")
    return target
