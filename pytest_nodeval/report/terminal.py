"""Pure formatting for the terminal and summary.txt: the run summary and the baseline diff.

Lines are kept within 88 columns so the tables survive CI logs and narrow terminals.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..stats.gate_models import CaseDiff, Diff, Movement, Verdict
from ..text import printable

if TYPE_CHECKING:
    from .models import CaseReport, RunReport

__all__ = [
    "adaptive_lines",
    "case_lines",
    "cost_lines",
    "divergence_lines",
    "format_diff_table",
    "infra_lines",
    "summary_lines",
    "totals_line",
    "usd",
]

_TABLE_WIDTH = 88
_CASE_WIDTH = 22


def format_diff_table(diff: Diff, max_rows: int = 20) -> list[str]:
    """Plain-text lines: gate verdicts, then the cases that moved, regressions first."""
    return [printable(line) for line in _diff_lines(diff, max_rows)]


def _diff_lines(diff: Diff, max_rows: int) -> list[str]:
    breached = f" (breached: {', '.join(diff.breached)})" if diff.breached else ""
    lines = [f"nodeval gate: {diff.verdict}{breached}"]
    for note in diff.notes:  # e.g. runs of different modes: the reader must see it first
        lines += textwrap.wrap(
            f"note: {note}", _TABLE_WIDTH, subsequent_indent="  ", break_on_hyphens=False
        )
    for gate in diff.gates:
        head = f"  {gate.verdict:<12} {gate.name:<19} "
        lines += textwrap.wrap(
            gate.reason,
            _TABLE_WIDTH,
            initial_indent=head,
            subsequent_indent=" " * len(head),
            break_on_hyphens=False,
        )
    lines += _pass_rate_rows(diff.cases, max_rows)
    lines += _latency_rows(diff.cases, max_rows)
    for label, ids in (("new", diff.new_cases), ("missing", diff.missing_cases)):
        if ids:
            lines += textwrap.wrap(
                f"{label} cases ({len(ids)}): {', '.join(ids)}",
                _TABLE_WIDTH,
                subsequent_indent="  ",
                break_on_hyphens=False,
            )
    return lines


def _pass_rate_rows(cases: Sequence[CaseDiff], max_rows: int) -> list[str]:
    moved = [
        (case.case_id, case.pass_rate)
        for case in cases
        if case.pass_rate
        and (case.pass_rate.movement is not Movement.SAME or case.pass_rate.verdict.severity)
    ]
    moved.sort(key=lambda item: (-item[1].verdict.severity, item[1].delta, item[0]))
    if not moved:
        return []
    header = f"  {'case':<{_CASE_WIDTH}} {'base':>7} {'now':>7} {'change':>7}"
    header += f" {'95% CI (pp)':<12} {'p (Holm)':<13} verdict"
    rows = [
        f"  {_short(case_id):<{_CASE_WIDTH}}"
        f" {f'{ch.baseline_passed}/{ch.baseline_attempts}':>7}"
        f" {f'{ch.current_passed}/{ch.current_attempts}':>7}"
        f" {f'{ch.delta * 100:+.0f} pp':>7}"
        f" {f'[{ch.ci_low * 100:+.0f}, {ch.ci_high * 100:+.0f}]':<12}"
        f" {_p_text(ch.p_value, ch.p_value_adjusted):<13} {ch.verdict}"
        for case_id, ch in moved[:max_rows]
    ]
    return ["", "pass rate moves (regressions first):", header, *rows, *_more(moved, max_rows)]


def _latency_rows(cases: Sequence[CaseDiff], max_rows: int) -> list[str]:
    flagged = [
        (case.case_id, case.latency)
        for case in cases
        if case.latency and case.latency.verdict is not Verdict.OK
    ]
    flagged.sort(key=lambda item: (-item[1].verdict.severity, -(item[1].p95_ratio or 0.0)))
    if not flagged:
        return []
    header = f"  {'case':<{_CASE_WIDTH}} {'p95 base':>10} {'p95 now':>10} {'change':>7}"
    header += f" {'p (BH)':<13} verdict"
    rows = [
        f"  {_short(case_id):<{_CASE_WIDTH}}"
        f" {f'{ch.baseline_p95_ms:.0f} ms':>10} {f'{ch.current_p95_ms:.0f} ms':>10}"
        f" {f'{((ch.p95_ratio or 0.0) - 1.0) * 100:+.0f}%':>7}"
        f" {_p_text(ch.p_value, ch.p_value_adjusted):<13} {ch.verdict}"
        for case_id, ch in flagged[:max_rows]
    ]
    return ["", "latency p95 moves:", header, *rows, *_more(flagged, max_rows)]


def _more(rows: Sequence[object], max_rows: int) -> list[str]:
    return [f"  ... and {len(rows) - max_rows} more"] if len(rows) > max_rows else []


def _p_text(p_value: float | None, p_adjusted: float | None) -> str:
    if p_value is None or p_adjusted is None:
        return "-"
    return f"{p_value:.3f} ({p_adjusted:.2f})"


def _short(case_id: str) -> str:
    return case_id if len(case_id) <= _CASE_WIDTH else case_id[: _CASE_WIDTH - 1] + "~"


# -- the run summary ------------------------------------------------------------


def _rate(value: float | None) -> str:
    return "  -  " if value is None else f"{value:.2f}"


def _interval(case: CaseReport) -> str:
    low, high = case.stats.wilson_low, case.stats.wilson_high
    return "" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _verdict(case: CaseReport) -> str:
    verdict = (
        f"tolerated (min {case.min_pass_rate:.2f})" if case.verdict == "tolerated" else case.verdict
    )
    notes = []
    diverged = sum(1 for a in case.attempts if a.status == "divergence")
    if diverged:
        notes.append(f"{diverged} diverged")
    if case.stats.infra_errors:
        notes.append(f"{case.stats.infra_errors} infra")
    from .aggregate import is_budget_stop  # not at import: pytest_nodeval.gate loads this module

    budget = sum(1 for a in case.attempts if a.outcome == "not_run" and is_budget_stop(a))
    if budget:
        notes.append(f"{budget} not run (budget)")
    if case.reruns:
        notes.append(f"flaky: {case.reruns} rerun(s)")
    if case.judge_skipped:
        notes.append("judge skipped")
    if case.adaptive is not None:
        notes.append(
            f"adaptive: {case.adaptive.repeats} of {case.adaptive.cap} repeats, "
            f"{case.adaptive.stop}"
        )
    return verdict.replace("_", " ") + (f" ({', '.join(notes)})" if notes else "")


def usd(value: float | None) -> str:
    """$0.0123 below a dollar (agent calls cost cents), $12.34 above."""
    if value is None:
        return "unknown"
    return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"


def _case_cost(case: CaseReport) -> str:
    """The case's whole cost per attempt: the agent's, the user's and the judge's calls."""
    if any(a.cost_unpriced or a.user_cost_unpriced or a.judge_cost_unpriced for a in case.attempts):
        return "unknown"
    per_attempt = (
        case.cost_per_attempt_usd
        if case.total_cost_per_attempt_usd is None
        else case.total_cost_per_attempt_usd
    )
    return usd(per_attempt) if per_attempt is not None else "-"


def _shows_cost(report: RunReport) -> bool:
    """A cost column only when some attempt cost money or could not be priced."""
    t = report.totals
    return t.cost_priced_usd > 0 or t.cost_unpriced_attempts > 0 or _side_spend(report)


def _side_spend(report: RunReport) -> bool:
    """Whether a simulated user or the judge cost money, or could not be priced."""
    t = report.totals
    return bool(
        t.user_cost_usd
        or t.judge_cost_usd
        or t.user_cost_unpriced_models
        or t.judge_cost_unpriced_models
    )


def case_lines(
    report: RunReport, limit: int | None = None, *, divergences: bool = False
) -> list[str]:
    """A row per case, problems first; a dataset case's rows grouped under it, worst first; with
    `divergences`, each case's divergence messages whole under its row (summary.txt: the
    terminal has them in the test's failure)."""
    width = max([len(_label(c)) for c in report.cases] + [4])
    cost = _shows_cost(report)
    # passed/judged: infrastructure errors are not the agent's, so they stay out of the rate.
    head = f"{'case':<{width}}  {'passed':>9}  {'rate':>5}  {'95% CI':<14}  "
    lines = [head + (f"{'$/attempt':>9}  " if cost else "") + "verdict"]
    # Problems first, so a long run shows what needs attention without scrolling.
    order = {"error": 0, "failed": 1, "tolerated": 2, "passed": 3, "not_run": 4, "skipped": 5}
    cases = sorted(report.cases, key=lambda c: (order[c.verdict], c.id))
    shown = 0
    for group, members in _grouped(cases):
        if limit is not None and shown >= limit:
            break
        if group is not None:
            lines.append(_group_line(group, members))
        for case in members[: None if limit is None else limit - shown]:
            passed = f"{case.stats.passed}/{case.stats.passed + case.stats.failed}"
            money = f"{_case_cost(case):>9}  " if cost else ""
            lines.append(
                f"{_label(case):<{width}}  {passed:>9}  {_rate(case.stats.pass_rate):>5}  "
                f"{_interval(case):<14}  {money}{_verdict(case)}"
            )
            shown += 1
            if divergences:
                lines += divergence_lines(case)
    if limit is not None and len(cases) > limit:
        lines.append(f"... and {len(cases) - limit} more (use -v to list every case)")
    return lines


def _grouped(cases: list[CaseReport]) -> list[tuple[str | None, list[CaseReport]]]:
    """Cases in order, a dataset case's rows together where its worst row is; a plain case
    alone with no group name, in its own place."""
    groups: dict[str | int, tuple[str | None, list[CaseReport]]] = {}
    for index, case in enumerate(cases):
        key: str | int = case.dataset if case.dataset is not None else index
        groups.setdefault(key, (case.dataset, []))[1].append(case)
    return list(groups.values())


def _label(case: CaseReport) -> str:
    """A dataset row under its case's line: indented, its row id alone."""
    if case.dataset is not None:
        return "  /" + case.id.removeprefix(case.dataset + "/")
    return case.id


def _group_line(case_id: str, rows: list[CaseReport]) -> str:
    verdicts: dict[str, int] = {}
    for row in rows:
        verdicts[row.verdict] = verdicts.get(row.verdict, 0) + 1
    counts = ", ".join(f"{n} {verdict}" for verdict, n in verdicts.items())
    return f"{case_id} (dataset, {len(rows)} rows: {counts})"


DIVERGENCES_SHOWN = 3
"""Distinct divergence messages written under one case; report.json has every attempt's."""


def divergence_lines(case: CaseReport, indent: str = "    ") -> list[str]:
    """The case's diverged attempts, each distinct message once with the repeats that gave it:
    where the replay diverged, the field, a short diff and how to re-record, indented."""
    repeats: dict[str, list[int]] = {}
    for attempt in case.attempts:
        if attempt.divergence:
            repeats.setdefault(attempt.divergence, []).append(attempt.repeat)
    lines = []
    for message, numbers in list(repeats.items())[:DIVERGENCES_SHOWN]:
        lines.append(f"{indent}{', '.join(f'r{n}' for n in numbers)} diverged:")
        lines += [f"{indent}  {line}" if line else "" for line in message.splitlines()]
    if len(repeats) > DIVERGENCES_SHOWN:
        more = len(repeats) - DIVERGENCES_SHOWN
        lines.append(f"{indent}... and {more} more divergence(s): report.json has each attempt's")
    return lines


def totals_line(report: RunReport) -> str:
    t, suite = report.totals, report.suite
    rate = "" if suite.pass_rate is None else f", suite pass rate {suite.pass_rate:.2f}"
    if suite.ci_low is not None and suite.ci_high is not None:
        rate += f" [{suite.ci_low:.2f}, {suite.ci_high:.2f}]"
    parts = [
        f"{t.cases} case(s)",
        f"{t.attempts} attempt(s): {t.passed} passed, {t.failed} failed, {t.errors} error(s)",
    ]
    if t.infra_errors:
        parts.append(f"{t.infra_errors} infrastructure error(s) counted apart")
    diverged = sum(1 for c in report.cases for a in c.attempts if a.status == "divergence")
    if diverged:
        parts.append(f"{diverged} of the failures diverged from their journal")
    if t.not_run:
        budget = f" ({t.not_run_budget} for the budget)" if t.not_run_budget else ""
        parts.append(f"{t.not_run} not run{budget}")
    retries = sum(a.retries for c in report.cases for a in c.attempts)
    if retries:
        parts.append(f"{retries} LLM request(s) retried (429, 5xx, connection)")
    worlds = sorted({a.world_backend for c in report.cases for a in c.attempts if a.world_backend})
    where = f", world: {'/'.join(worlds)}" if worlds else ""
    return f"{report.mode} mode, repeat {report.repeat}{where}: " + ", ".join(parts) + rate


def summary_lines(report: RunReport, verbosity: int = 0, *, divergences: bool = False) -> list[str]:
    """The run summary for the terminal and summary.txt, control characters escaped (text.py).

    `divergences`: each diverged case's messages whole under it (summary.txt)."""
    return [printable(line) for line in _summary_lines(report, verbosity, divergences)]


def _summary_lines(report: RunReport, verbosity: int, divergences: bool) -> list[str]:
    lines = []
    if verbosity >= 0:
        limit = None if verbosity > 0 else 50
        lines += case_lines(report, limit, divergences=divergences)
    lines.append(totals_line(report))
    if report.variants is not None:
        from .variants import variants_lines

        lines += variants_lines(report.variants)
    lines += cost_lines(report)
    lines += adaptive_lines(report)
    lines += infra_lines(report)
    if report.totals.tolerated_failures:
        lines.append(
            f"{report.totals.tolerated_failures} attempt failure(s) tolerated by min_pass_rate: "
            f"they do not fail the run (exit status {report.exit_status})"
        )
    return lines


def adaptive_lines(report: RunReport) -> list[str]:
    """What adaptive repeats saved, and why the compared cases stopped."""
    run = report.adaptive
    if run is None:
        return []
    stops: dict[str, int] = {}
    for case in report.cases:
        if case.adaptive is not None:
            stops[case.adaptive.stop] = stops.get(case.adaptive.stop, 0) + 1
    why = ", ".join(f"{count} {stop}" for stop, count in sorted(stops.items()))
    line = (
        f"adaptive repeats: {run.repeats_run} run, {run.repeats_skipped} skipped once decided, "
        f"over {run.cases_compared} case(s) compared with the baseline ({why})"
    )
    return [line]


def cost_lines(report: RunReport) -> list[str]:
    """The run's cost (the agent's labelled as recorded in replay), split into the agent's, the
    simulated user's and the judge's when those cost anything; what could not be priced; the
    budget."""
    t = report.totals
    priced = any(a.cost_usd is not None for c in report.cases for a in c.attempts)
    lines = []
    side = _side_spend(report)
    if side:
        lines.append(_split_cost_line(report))
    label = "cost as recorded (this replay spent nothing)" if t.cost_recorded else "cost"
    if side:
        label = "agent cost as recorded" if t.cost_recorded else "agent cost"
    if t.cost_unpriced_attempts:
        lines.append(
            f"{label}: unknown: no price for model(s) {', '.join(t.cost_unpriced_models)} "
            f"({t.cost_unpriced_attempts} attempt(s); name them in nodeval_prices); "
            f"the priced attempts cost {usd(t.cost_priced_usd)}"
        )
    elif priced and t.cost_usd is not None and not side:
        lines.append(f"{label}: {usd(t.cost_usd)}, {usd(t.cost_per_attempt_usd)} per attempt")
    for party, models in (
        ("user", t.user_cost_unpriced_models),
        ("judge", t.judge_cost_unpriced_models),
    ):
        if models:
            lines.append(
                f"{party} cost: unknown: no price for model(s) {', '.join(models)} "
                "(name them in nodeval_prices)"
            )
    if report.max_cost_usd is not None:
        limit = f"--nodeval-max-cost {usd(report.max_cost_usd)}"
        if report.mode not in ("live", "record", "full"):
            lines.append(f"{limit}: not applied ({report.mode} mode makes no paid calls)")
        else:
            lines.append(
                f"{limit}: {t.not_run_budget} attempt(s) not run (budget), in no rate"
                if t.not_run_budget
                else f"{limit}: every attempt started"
            )
    return lines


def _split_cost_line(report: RunReport) -> str:
    """`cost: $0.0300 (agent $0.0200, user $0.0060, judge $0.0040), $0.0150 per attempt`."""
    t = report.totals
    agent = usd(t.cost_usd)
    if t.cost_recorded:
        agent += " as recorded: this replay spent nothing on it"
    parts = f"agent {agent}, user {usd(t.user_cost_usd)}, judge {usd(t.judge_cost_usd)}"
    per_attempt = (
        f", {usd(t.total_cost_per_attempt_usd)} per attempt"
        if t.total_cost_per_attempt_usd is not None
        else ""
    )
    return f"cost: {usd(t.total_cost_usd)} ({parts}){per_attempt}"


def infra_lines(report: RunReport, limit: int = 10) -> list[str]:
    """Each infrastructure error with its cause: a missing key or image is not the agent's."""
    errors = [(c.id, a) for c in report.cases for a in c.attempts if a.infra_error]
    if not errors:
        return []
    lines = [
        "infrastructure errors (not the agent's; in no pass rate; "
        f"exit status {report.exit_status}):"
    ]
    for case_id, attempt in errors[:limit]:
        lines.append(f"  {case_id} r{attempt.repeat}: {attempt.reason or 'no cause recorded'}")
    if len(errors) > limit:
        lines.append(f"  ... and {len(errors) - limit} more (report.json lists every one)")
    return lines
