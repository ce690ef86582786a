"""What the HTML report shows, as plain JSON-ready data (no markup; `html.py` renders it).

Two inputs come from parts that are still settling, so each is read in exactly one
function here and nowhere else: the baseline diff in `RunReport.gate` (`gate_view`) and
the run history (`history_view`). Both read defensively: a missing or oddly shaped key
renders as "not known", never as an exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .models import AttemptRecord, CaseReport, RunReport

TEXT_LIMIT = 4_000
"""Characters kept of one-line texts (reasons, gate explanations, assertion messages)."""

VERDICT_SEVERITY = {"OK": 0, "WARN": 1, "INCONCLUSIVE": 2, "FAIL": 3}
CASE_SEVERITY = {"error": 0, "failed": 1, "tolerated": 2, "passed": 3, "not_run": 4, "skipped": 5}
_MOVEMENTS = {"down": "regressed", "up": "improved", "same": "unchanged"}


def num(value: Any) -> float | None:
    """A finite number, or None (JSON has no NaN; bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def text(value: Any, limit: int = TEXT_LIMIT) -> str:
    if value is None:
        return ""
    value = value if isinstance(value, str) else str(value)
    return (
        value
        if len(value) <= limit
        else f"{value[:limit]} [... {len(value) - limit} more characters]"
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- the gate (baseline diff) -------------------------------------------------------------


def gate_view(gate: dict[str, Any] | None) -> dict[str, Any] | None:
    """The one reader of `RunReport.gate`.

    Accepts the flat shape of the issue (`cases[].delta`, `delta_low`, `p95_ms_delta`, ...)
    and the nested `Diff` dump of the statistics branch (`cases[].pass_rate.delta`,
    `.ci_low`, `latency.p95_delta_ms`, `gates[].case_ids`); keys it does not know are ignored.
    """
    if not isinstance(gate, dict):
        return None
    cases = {
        str(c.get("case_id")): _case_change(c)
        for c in map(_dict, _list(gate.get("cases")))
        if "case_id" in c
    }
    for case_id in map(str, _list(gate.get("new_cases"))):
        cases.setdefault(case_id, _empty_change("new"))
    gates = [_gate_result(g) for g in map(_dict, _list(gate.get("gates")))]
    breached = [text(name, 200) for name in _list(gate.get("breached"))]
    breached = breached or [g["name"] for g in gates if g["verdict"] == "FAIL"]
    return {
        "baseline": text(
            gate.get("baseline") or gate.get("baseline_run_id") or gate.get("baseline_path") or "",
            500,
        ),
        "verdict": _overall_verdict(gate.get("verdict"), gates, breached),
        "breached": breached,
        "gates": gates,
        "suite": _suite_change(_dict(gate.get("suite"))),
        "cases": cases,
        "missing_cases": [text(c, 500) for c in _list(gate.get("missing_cases"))],
    }


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _case_change(case: dict[str, Any]) -> dict[str, Any]:
    rate, latency, tokens = (
        _dict(case.get("pass_rate")),
        _dict(case.get("latency")),
        _dict(case.get("tokens")),
    )
    verdicts = [case.get("verdict"), rate.get("verdict"), latency.get("verdict")]
    movement = _first(case.get("movement"), rate.get("movement"))
    return {
        "movement": _MOVEMENTS.get(str(movement), text(movement, 40))
        if movement is not None
        else "",
        "baseline_pass_rate": num(_first(case.get("baseline_pass_rate"), _ratio(rate, "baseline"))),
        "current_pass_rate": num(_first(case.get("current_pass_rate"), _ratio(rate, "current"))),
        "delta": num(_first(case.get("delta"), rate.get("delta"))),
        "delta_low": num(_first(case.get("delta_low"), rate.get("ci_low"))),
        "delta_high": num(_first(case.get("delta_high"), rate.get("ci_high"))),
        "p50_ms_delta": num(_first(case.get("p50_ms_delta"), latency.get("p50_delta_ms"))),
        "p95_ms_delta": num(_first(case.get("p95_ms_delta"), latency.get("p95_delta_ms"))),
        "tokens_delta": num(_first(case.get("tokens_delta"), tokens.get("delta"))),
        "cost_delta": num(_first(case.get("cost_delta"), _dict(case.get("cost")).get("delta"))),
        "verdict": _worst(verdicts),
    }


def _empty_change(movement: str) -> dict[str, Any]:
    return {**_case_change({}), "movement": movement}


def _ratio(rate: dict[str, Any], run: str) -> float | None:
    passed, attempts = num(rate.get(f"{run}_passed")), num(rate.get(f"{run}_attempts"))
    return passed / attempts if passed is not None and attempts else None


def _worst(verdicts: Iterable[Any]) -> str:
    known = [str(v) for v in verdicts if str(v) in VERDICT_SEVERITY]
    return max(known, key=VERDICT_SEVERITY.__getitem__, default="")


def _gate_result(gate: dict[str, Any]) -> dict[str, Any]:
    numbers = {text(k, 100): num(v) for k, v in _dict(gate.get("numbers")).items()}
    return {
        "name": text(gate.get("name"), 200),
        "verdict": _worst([gate.get("verdict")]),
        "reason": text(gate.get("reason")),
        "cases": [text(c, 500) for c in _list(_first(gate.get("cases"), gate.get("case_ids")))],
        "numbers": {k: v for k, v in numbers.items() if v is not None},
    }


def _overall_verdict(stated: Any, gates: list[dict[str, Any]], breached: list[str]) -> str:
    worst = _worst([stated, *(g["verdict"] for g in gates)])
    return "FAIL" if breached else worst


def _suite_change(suite: dict[str, Any]) -> dict[str, Any]:
    return {
        "baseline_pass_rate": num(suite.get("baseline_pass_rate")),
        "current_pass_rate": num(suite.get("current_pass_rate")),
        "delta": num(suite.get("delta")),
        "delta_low": num(_first(suite.get("delta_low"), suite.get("ci_low"))),
        "delta_high": num(_first(suite.get("delta_high"), suite.get("ci_high"))),
    }


def regressions(gate: dict[str, Any] | None, names: dict[str, str]) -> list[dict[str, Any]]:
    """Cases that got worse or that a gate flagged, the most severe and largest drop first."""
    if gate is None:
        return []
    flagged = {
        c for g in gate["gates"] if g["verdict"] in ("FAIL", "INCONCLUSIVE") for c in g["cases"]
    }
    rows = [
        {"case_id": case_id, "name": names.get(case_id, ""), **change}
        for case_id, change in gate["cases"].items()
        if change["movement"] == "regressed"
        or VERDICT_SEVERITY.get(change["verdict"], 0) >= 2
        or case_id in flagged
    ]
    return sorted(
        rows,
        key=lambda r: (-VERDICT_SEVERITY.get(r["verdict"], 0), r["delta"] or 0.0, r["case_id"]),
    )


# -- the run history ----------------------------------------------------------------------


def history_view(history: dict[str, Any] | None, run_id: str) -> dict[str, list[list[Any]]]:
    """The one reader of the history input: case id ->
    [[finished_at, pass_rate, run_id, is_this_run]], oldest first. Points without a pass rate
    are kept out (nothing to draw)."""
    trends: dict[str, list[list[Any]]] = {}
    for case_id, points in _dict(history).items():
        rows = [
            [text(p.get("finished_at"), 40), num(p.get("pass_rate")), text(p.get("run_id"), 200)]
            for p in map(_dict, _list(points))
        ]
        rows = sorted((r for r in rows if r[1] is not None), key=lambda r: str(r[0]))
        trends[str(case_id)] = [[*r, r[2] == run_id] for r in rows]
    return trends


# -- the run ------------------------------------------------------------------------------


def headline(report: RunReport, gate: dict[str, Any] | None) -> dict[str, Any]:
    """The banner: level (pass, warn, fail), a title and what explains it."""
    totals = report.totals
    verdict, breached = (gate["verdict"], gate["breached"]) if gate else ("", [])
    problems = [g for g in gate["gates"] if g["verdict"] != "OK"] if gate else []
    lines = [
        f"{g['name']}: {g['verdict']}" + (f" - {g['reason']}" if g["reason"] else "")
        for g in problems
    ]
    if verdict == "FAIL":
        return {
            "level": "fail",
            "title": "Gate failed: " + ", ".join(breached or ["see below"]),
            "lines": lines,
        }
    bad_cases = sum(1 for c in report.cases if c.verdict in ("failed", "error"))
    if report.exit_status != 0:
        title = (
            f"Failed: {bad_cases} of {totals.cases} scenario(s) failed" if bad_cases else "Failed"
        )
        return {
            "level": "fail",
            "title": title + f" (exit status {report.exit_status})",
            "lines": lines,
        }
    if verdict in ("INCONCLUSIVE", "WARN"):
        return {"level": "warn", "title": f"Gate {verdict.lower()}", "lines": lines}
    if totals.tolerated_failures or totals.infra_errors:
        return {
            "level": "warn",
            "title": "Passed, with " + _caveats(totals.tolerated_failures, totals.infra_errors),
            "lines": lines,
        }
    return {"level": "pass", "title": "Passed", "lines": lines}


def _caveats(tolerated: int, infra: int) -> str:
    parts = [f"{tolerated} tolerated failure(s)"] if tolerated else []
    return " and ".join(parts + ([f"{infra} infrastructure error(s)"] if infra else []))


def overview(report: RunReport, gate: dict[str, Any] | None) -> dict[str, Any]:
    t, suite = report.totals, report.suite
    return {
        "run_id": text(report.run_id, 200),
        "mode": text(report.mode, 40),
        "repeat": report.repeat,
        "profile": text(report.profile or "", 100),
        "started_at": text(report.started_at, 40),
        "duration_s": num(report.duration_s),
        "exit_status": report.exit_status,
        "suite": {
            "pass_rate": num(suite.pass_rate),
            "ci_low": num(suite.ci_low),
            "ci_high": num(suite.ci_high),
        },
        "cases": t.cases,
        "attempts": t.attempts,
        "passed": t.passed,
        "failed": t.failed,
        "errors": t.errors,
        "infra_errors": t.infra_errors,
        "tolerated_failures": t.tolerated_failures,
        "skipped": t.skipped,
        "not_run": t.not_run,
        "not_run_budget": t.not_run_budget,
        "cost": cost_overview(report),
        "baseline": gate["baseline"] if gate else None,
        "environment": {k: text(v, 200) for k, v in report.environment.items()},
    }


def cost_overview(report: RunReport) -> dict[str, Any] | None:
    """The run's cost as the page shows it; None when no attempt has a cost or an unpriced model."""
    from .terminal import usd

    t = report.totals
    side = bool(
        t.user_cost_usd
        or t.judge_cost_usd
        or t.user_cost_unpriced_models
        or t.judge_cost_unpriced_models
    )
    if t.cost_usd is None and not t.cost_unpriced_attempts and not side:
        return None
    detail = (
        f"{usd(t.cost_per_attempt_usd)} per attempt"
        if t.cost_usd is not None
        else (
            f"no price for {', '.join(t.cost_unpriced_models)}; "
            f"priced attempts {usd(t.cost_priced_usd)}"
        )
    )
    if t.cost_recorded:
        detail += " · as recorded: this replay spent nothing" + (" on the agent" if side else "")
    total = t.cost_usd
    if side:  # the simulated user's and the judge's calls, priced apart from the agent's
        unpriced = [*t.user_cost_unpriced_models, *t.judge_cost_unpriced_models]
        detail = (
            f"agent {usd(t.cost_usd)} ({detail}) · user {usd(t.user_cost_usd)} · "
            f"judge {usd(t.judge_cost_usd)}"
        )
        if t.total_cost_per_attempt_usd is not None:
            detail += f" · {usd(t.total_cost_per_attempt_usd)} per attempt in all"
        if unpriced:
            detail += f" · no price for {', '.join(unpriced)}"
        total = t.total_cost_usd
    return {
        "total": text(usd(total), 40),
        "detail": text(detail, 500),
        "max": num(report.max_cost_usd),
        "not_run_budget": t.not_run_budget,
    }


def variants_view(report: RunReport) -> dict[str, Any] | None:
    """A matrix run's variants table (report.json's `variants`), None for a run without one."""
    from .terminal import usd

    variants = report.variants
    if variants is None:
        return None
    labels = [v.label for v in variants.variants]
    rows = [
        {
            "label": text(v.label, 200),
            "scenarios": v.scenarios,
            "attempts": v.attempts,
            "pass_rate": num(v.pass_rate),
            "ci_low": num(v.ci_low),
            "ci_high": num(v.ci_high),
            "cost": text(usd(v.cost_per_attempt_usd), 40),
            "p95_ms": num(v.latency_p95_ms),
            "tokens": num(v.tokens_per_attempt),
            "verdict": text(v.vs_first.verdict, 20) if v.vs_first else None,
            "worse": [text(c, 200) for c in v.vs_first.worse] if v.vs_first else [],
            "reasons": [text(r, 500) for r in v.vs_first.reasons.values()] if v.vs_first else [],
        }
        for v in variants.variants
    ]
    cases = [
        {"id": text(case_id, 200), "rates": [num(rates.get(label)) for label in labels]}
        for case_id, rates in variants.cases.items()
    ]
    return {
        "compared_with": text(variants.compared_with, 200),
        "labels": [text(label, 200) for label in labels],
        "rows": rows,
        "cases": cases,
    }


# -- the scenarios ------------------------------------------------------------------------


def case_row(
    index: int,
    case: CaseReport,
    change: dict[str, Any] | None,
    trend: list[list[Any]],
    block: str,
    slots: list[int | None],
) -> dict[str, Any]:
    """`block` is the id of the element holding the case's timelines; `slots` gives each
    attempt's position in it (None: not embedded)."""
    s = case.stats
    return {
        "i": index,
        "id": text(case.id, 500),
        "name": text(case.name, 500),
        "dataset": text(case.dataset, 500) if case.dataset is not None else None,
        "tags": [text(t, 200) for t in case.tags],
        "verdict": case.verdict,
        "dir": text(case.directory, 1000),
        "min": num(case.min_pass_rate),
        "n": s.attempts,
        "passed": s.passed,
        "failed": s.failed,
        "infra": s.infra_errors,
        "judge_skipped": case.judge_skipped,
        "reruns": case.reruns,
        "adaptive": _adaptive_note(case),
        "rate": num(s.pass_rate),
        "lo": num(s.wilson_low),
        "hi": num(s.wilson_high),
        "phk": _largest_k(s.pass_hat_k),
        "p50": num(s.latency_p50_ms),
        "p95": num(s.latency_p95_ms),
        "tokens": num(s.tokens_mean),
        # The whole cost per attempt: the agent's, the simulated user's and the judge's calls.
        "cost": num(
            case.cost_per_attempt_usd
            if case.total_cost_per_attempt_usd is None
            else case.total_cost_per_attempt_usd
        ),
        "cost_unknown": any(_unpriced(a) for a in case.attempts),
        "change": change,
        "trend": trend,
        "attempts": [
            attempt_row(a, None if slot is None else block, slot)
            for a, slot in zip(case.attempts, slots, strict=True)
        ],
    }


def _adaptive_note(case: CaseReport) -> str | None:
    """'3 of 10 repeats, no regression' when adaptive repeats decided the case."""
    a = case.adaptive
    return None if a is None else text(f"{a.repeats} of {a.cap} repeats, {a.stop}", 200)


def _largest_k(values: dict[Any, Any]) -> list[float] | None:
    """pass^k at the largest k reported, as [k, value] (JSON turns int keys into strings)."""
    pairs = [(num(int(k)) if str(k).isdigit() else None, num(v)) for k, v in values.items()]
    known = [(k, v) for k, v in pairs if k is not None and v is not None]
    return list(max(known)) if known else None


def _unpriced(attempt: AttemptRecord) -> list[str]:
    """The models of the attempt's calls (agent, user, judge) with no known price."""
    found = attempt.cost_unpriced + attempt.user_cost_unpriced + attempt.judge_cost_unpriced
    return sorted(set(found))


def _cost_split(attempt: AttemptRecord) -> str:
    """`agent $0.0200 · user $0.0060 · judge $0.0040` when the user or the judge cost anything."""
    from .terminal import usd

    if not (
        attempt.user_cost_usd
        or attempt.judge_cost_usd
        or attempt.user_cost_unpriced
        or attempt.judge_cost_unpriced
    ):
        return ""
    return (
        f"agent {usd(attempt.cost_usd)} · user {usd(attempt.user_cost_usd)} · "
        f"judge {usd(attempt.judge_cost_usd)}"
    )


def attempt_row(
    attempt: AttemptRecord, timeline_id: str | None, slot: int | None = None
) -> dict[str, Any]:
    return {
        "repeat": attempt.repeat,
        "outcome": attempt.outcome,
        "infra": attempt.infra_error,
        "reason": text(attempt.reason),
        "divergence": text(attempt.divergence),
        "dseq": attempt.divergence_seq,
        "live_from": attempt.live_from_turn,
        "status": text(attempt.status, 100),
        "latency": num(attempt.latency_ms),
        "tokens": attempt.tokens,
        "cost": num(attempt.cost_usd),
        "user_cost": num(attempt.user_cost_usd),
        "judge_cost": num(attempt.judge_cost_usd),
        "total_cost": num(attempt.total_cost_usd),
        "cost_split": text(_cost_split(attempt), 200),
        "cost_unpriced": [text(m, 200) for m in _unpriced(attempt)],
        "turns": attempt.turns,
        "llm": attempt.llm_calls,
        "tools": attempt.tool_calls,
        "failed": sum(1 for a in attempt.assertions if a.status == "failed"),
        "journal": text(attempt.journal or "", 1000),
        "tl": timeline_id,
        "tn": slot,
    }


def assertion_rows(attempt: AttemptRecord) -> list[dict[str, Any]]:
    return [
        {
            "kind": text(a.kind, 200),
            "description": text(a.description),
            "status": a.status,
            "message": text(a.message),
            "seqs": [s for s in a.seqs if isinstance(s, int)],
        }
        for a in attempt.assertions
    ]
