"""Pure formatting of the run summary (terminal section and summary.txt)."""

from __future__ import annotations

from .report import CaseReport, RunReport


def _rate(value: float | None) -> str:
    return "  -  " if value is None else f"{value:.2f}"


def _interval(case: CaseReport) -> str:
    low, high = case.stats.wilson_low, case.stats.wilson_high
    return "" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _verdict(case: CaseReport) -> str:
    if case.verdict == "tolerated":
        return f"tolerated (min {case.min_pass_rate:.2f})"
    if case.stats.infra_errors:
        return f"{case.verdict} ({case.stats.infra_errors} infra)"
    return case.verdict


def case_lines(report: RunReport, limit: int | None = None) -> list[str]:
    width = max([len(c.id) for c in report.cases] + [4])
    # passed/judged: infrastructure errors are not the agent's, so they stay out of the rate.
    lines = [f"{'case':<{width}}  {'passed':>9}  {'rate':>5}  {'95% CI':<14}  verdict"]
    # Problems first, so a long run shows what needs attention without scrolling.
    order = {"error": 0, "failed": 1, "tolerated": 2, "passed": 3, "skipped": 4}
    cases = sorted(report.cases, key=lambda c: (order[c.verdict], c.id))
    for case in cases[:limit]:
        passed = f"{case.stats.passed}/{case.stats.passed + case.stats.failed}"
        lines.append(f"{case.id:<{width}}  {passed:>9}  {_rate(case.stats.pass_rate):>5}  "
                     f"{_interval(case):<14}  {_verdict(case)}")
    if limit is not None and len(cases) > limit:
        lines.append(f"... and {len(cases) - limit} more (use -v to list every case)")
    return lines


def totals_line(report: RunReport) -> str:
    t, suite = report.totals, report.suite
    rate = "" if suite.pass_rate is None else f", suite pass rate {suite.pass_rate:.2f}"
    if suite.ci_low is not None and suite.ci_high is not None:
        rate += f" [{suite.ci_low:.2f}, {suite.ci_high:.2f}]"
    parts = [f"{t.cases} case(s)", f"{t.attempts} attempt(s): {t.passed} passed, {t.failed} failed, {t.errors} error(s)"]
    if t.infra_errors:
        parts.append(f"{t.infra_errors} infrastructure error(s) counted apart")
    worlds = sorted({a.world_backend for c in report.cases for a in c.attempts if a.world_backend})
    where = f", world: {'/'.join(worlds)}" if worlds else ""
    return f"{report.mode} mode, repeat {report.repeat}{where}: " + ", ".join(parts) + rate


def summary_lines(report: RunReport, verbosity: int = 0) -> list[str]:
    lines = []
    if verbosity >= 0:
        lines += case_lines(report, limit=None if verbosity > 0 else 50)
    lines.append(totals_line(report))
    if report.totals.tolerated_failures:
        lines.append(f"{report.totals.tolerated_failures} attempt failure(s) tolerated by min_pass_rate: "
                     f"they do not fail the run (exit status {report.exit_status})")
    return lines
