"""The run as a Markdown job summary (GitHub's `GITHUB_STEP_SUMMARY`, a GitLab artifact).

Plain Markdown that both render: a verdict line, the gates, the cases that need attention
(regressions first), infrastructure errors with their causes, cost when attempts carry it,
and links to the artifacts. Agent output never reaches it unescaped: a reason is one line,
its table pipes and HTML escaped, cut at a word boundary; a divergence's diff sits in a
fenced code block (longer than any backtick run in it) inside a `<details>` block.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

from ..text import cut_at_word, printable
from .models import EXIT_INFRA_ERROR, RunReport

_VERDICTS = {
    0: "PASSED",
    1: "FAILED",
    6: "FAILED (the gate)",
    EXIT_INFRA_ERROR: "INFRASTRUCTURE ERROR",
}
_ROWS = 20
REASON_LIMIT = 200
"""Characters of a reason in a table cell (before escaping)."""
DIFF_LIMIT = 4_000
"""Characters of one divergence's message in its <details> block."""


def _cell(text: Any, limit: int | None = None) -> str:
    one_line = " ".join(printable(str(text)).split())
    if limit is not None:
        one_line = cut_at_word(one_line, limit)
    return html.escape(one_line, quote=False).replace("|", "\\|")


def verdict_of(exit_status: int) -> str:
    return _VERDICTS.get(exit_status, f"INCOMPLETE (exit status {exit_status})")


def markdown(report: RunReport, links: dict[str, str] | None = None) -> str:
    """The whole summary; `links` maps an artifact's label to its URL or relative path."""
    parts = [
        _headline(report),
        *_gate(report),
        *_attention(report),
        *_divergences(report),
        *_infra(report),
        *_cost(report),
        *_links(links or {}),
    ]
    return "\n".join(parts) + "\n"


def _headline(report: RunReport) -> str:
    t, suite = report.totals, report.suite
    rate = "n/a" if suite.pass_rate is None else f"{suite.pass_rate:.2f}"
    if suite.ci_low is not None and suite.ci_high is not None:
        rate += f" [{suite.ci_low:.2f}, {suite.ci_high:.2f}]"
    shards = f", merged from {len(report.merged_from)} shard runs" if report.merged_from else ""
    return (
        f"## nodeval: {verdict_of(report.exit_status)}\n\n"
        f"{report.mode} mode, repeat {report.repeat}{shards}: "
        f"{t.cases} case(s), {t.attempts} attempt(s): "
        f"{t.passed} passed, {t.failed} failed, {t.errors} error(s) "
        f"({t.infra_errors} infrastructure), "
        f"{t.not_run} not run. Suite pass rate {rate}. Exit status {report.exit_status}.\n"
    )


def _gate(report: RunReport) -> list[str]:
    gate = report.gate
    if not gate:
        return ["### Gate\n\nNo baseline given: nothing was gated.\n"]
    lines = [
        f"### Gate: {gate.get('verdict', '?')} (against `{_cell(gate.get('baseline', '?'))}`)\n",
        "| gate | verdict | reason |",
        "|---|---|---|",
    ]
    for result in gate.get("gates", []):
        lines.append(
            f"| {_cell(result['name'])} | {_cell(result['verdict'])} | {_cell(result['reason'])} |"
        )
    return [*lines, ""]


def _regressed(report: RunReport) -> dict[str, float]:
    """Case id -> its pass-rate delta, for cases the gate says went down (largest drop first)."""
    out = {}
    for case in (report.gate or {}).get("cases", []):
        change = case.get("pass_rate") or {}
        if change.get("movement") == "down" or change.get("verdict") == "FAIL":
            out[case["case_id"]] = change.get("delta", 0.0)
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def _attention(report: RunReport) -> list[str]:
    regressed = _regressed(report)
    rows = [(case_id, f"regressed {delta:+.2f}") for case_id, delta in regressed.items()]
    rows += [
        (c.id, c.verdict.replace("_", " "))
        for c in report.cases
        if c.id not in regressed and c.verdict in ("failed", "error", "tolerated", "not_run")
    ]
    if not rows:
        return ["### Cases\n\nEvery case passed.\n"]
    cases = {c.id: c for c in report.cases}
    lines = [
        "### Cases that need a look (regressions first)\n",
        "| case | what | passed | why |",
        "|---|---|---|---|",
    ]
    for case_id, what in rows[:_ROWS]:
        case = cases.get(case_id)
        passed = f"{case.stats.passed}/{case.stats.passed + case.stats.failed}" if case else "-"
        reason = next((a.reason for a in case.attempts if a.reason), "") if case else ""
        lines.append(
            f"| {_cell(case_id)} | {_cell(what)} | {passed} | {_cell(reason, REASON_LIMIT)} |"
        )
    if len(rows) > _ROWS:
        lines.append(f"\n... and {len(rows) - _ROWS} more in report.html.")
    return [*lines, ""]


def _divergences(report: RunReport) -> list[str]:
    """Each diverged case's first divergence: its first line, and the whole message (the field
    that differs, the diff, how to re-record) folded in a <details> block."""
    diverged = [
        (c.id, attempt)
        for c in report.cases
        for attempt in [next((a for a in c.attempts if a.divergence), None)]
        if attempt is not None
    ]
    if not diverged:
        return []
    lines = ["### Divergences from the journal\n"]
    for case_id, attempt in diverged[:_ROWS]:
        first, _, rest = printable(attempt.divergence or "").partition("\n")
        lines += [
            "<details>",
            f"<summary>{_cell(case_id)} r{attempt.repeat}: {_cell(first, REASON_LIMIT)}</summary>",
            "",
            *_fenced(cut_at_word(rest, DIFF_LIMIT)),
            "",
            "</details>",
            "",
        ]
    if len(diverged) > _ROWS:
        lines.append(f"... and {len(diverged) - _ROWS} more in summary.txt and report.json.\n")
    return lines


def _fenced(text: str) -> list[str]:
    """A code block whose fence is longer than any run of backticks in `text`, so nothing in
    it can end the block: Markdown shows it as it is, HTML included."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", text, fence]


def _infra(report: RunReport) -> list[str]:
    errors = [(c.id, a) for c in report.cases for a in c.attempts if a.infra_error]
    if not errors:
        return []
    lines = [
        "### Infrastructure errors (not the agent's; in no pass rate)\n",
        "| case | repeat | cause |",
        "|---|---|---|",
    ]
    for case_id, attempt in errors[:_ROWS]:
        lines.append(
            f"| {_cell(case_id)} | {attempt.repeat} | "
            f"{_cell(attempt.reason or 'no cause recorded')} |"
        )
    return [*lines, ""]


def _cost(report: RunReport) -> list[str]:
    # cost_usd is read by name: attempts written before the field existed simply have none.
    costs = [getattr(a, "cost_usd", None) for c in report.cases for a in c.attempts]
    known = [c for c in costs if c is not None]
    tokens = sum(a.tokens for c in report.cases for a in c.attempts)
    money = (
        f"${sum(known):.4f} over {len(known)} attempt(s) that reported a cost; " if known else ""
    )
    t = report.totals
    if known and (t.user_cost_usd or t.judge_cost_usd):
        # The simulated user's and the judge's calls, priced apart from the agent's.
        parts = [("the simulated user's", t.user_cost_usd), ("the judge's", t.judge_cost_usd)]
        money = (
            "the agent's calls "
            + money
            + "".join(
                f"{party} calls ${cost:.4f}; " if cost is not None else f"{party} calls unknown; "
                for party, cost in parts
            )
        )
        if t.total_cost_usd is not None:
            money += f"${t.total_cost_usd:.4f} in all; "
    return [f"### Cost\n\n{money}{tokens} token(s) in all.\n"]


def _links(links: dict[str, str]) -> list[str]:
    if not links:
        return []
    return [
        "### Artifacts\n",
        *(f"- [{_cell(label)}]({target})" for label, target in links.items()),
        "",
    ]


def write_summary(
    report: RunReport, path: Path, links: dict[str, str], *, append: bool = False
) -> None:
    """Write (or, for GITHUB_STEP_SUMMARY, append) the summary; the caller handles OSError."""
    text = markdown(report, links)
    if append:
        with path.open("a", encoding="utf-8") as out:
            out.write(text)
    else:
        from ..journal.writer import write_atomic

        write_atomic(path, text)


def summary_targets(option: str | Path | None) -> list[tuple[Path, bool]]:
    """Where a run's Markdown summary goes, each with whether to append: the path given
    (--nodeval-summary-md, written whole), and GitHub's job summary file when the run is a
    GitHub Actions step (GITHUB_STEP_SUMMARY, appended to)."""
    targets = [(Path(option), False)] if option else []
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        targets.append((Path(os.environ["GITHUB_STEP_SUMMARY"]), True))
    return targets
