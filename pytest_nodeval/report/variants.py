"""report.json's `variants`: a matrix run's variants side by side, each compared with the first.

With `--nodeval-matrix`, every scenario ran once per variant (`qa@model=a`, `qa@model=b`).
Each variant gets the suite's numbers over its own scenarios: pass rate with its 95% interval,
cost, pooled p95 latency, tokens per attempt. Each variant after the first is then compared
with the first by the baseline gate itself (stats/gate.py): the same paired tests, alpha
budget and rules as a run against its baseline, on the scenarios both variants ran. "b is
worse than a on these 3 cases" is then the gate's verdict, not a reading of two tables.
The models are in models.py, with the rest of report.json's.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..stats.run_stats import percentile, suite_stats
from .models import CaseReport, RunReport, VariantComparison, VariantsReport, VariantSummary


def with_variants(report: RunReport, gate_policy: dict[str, float]) -> RunReport:
    """The report with its `variants`, compared under the run's gate policy (its ini keys)."""
    from .baseline import policy_from

    variants = variants_of(report, policy_from(gate_policy))
    return report if variants is None else report.model_copy(update={"variants": variants})


def variants_of(report: RunReport, policy: Any) -> VariantsReport | None:
    """The variants of a matrix run, or None for a run without one."""
    by_label: dict[str, list[CaseReport]] = defaultdict(list)
    for case in report.cases:
        if case.variant is not None:
            by_label[case.variant].append(case)
    if not by_label:
        return None
    # The matrix's order, not the order the cases finished in (which xdist and shards change).
    order = {label: i for i, label in enumerate(report.matrix)}
    labels = sorted(by_label, key=lambda label: order.get(label, len(order)))
    first = _as_run(report, by_label[labels[0]])
    summaries = [
        _summary(
            label, by_label[label], None if i == 0 else _vs(first, report, by_label[label], policy)
        )
        for i, label in enumerate(labels)
    ]
    rates: dict[str, dict[str, float | None]] = defaultdict(dict)
    for label, cases in by_label.items():
        for case in cases:
            rates[_scenario(case)][label] = case.stats.pass_rate
    return VariantsReport(
        compared_with=labels[0], variants=summaries, cases=dict(sorted(rates.items()))
    )


def _scenario(case: CaseReport) -> str:
    return case.id.removesuffix(f"@{case.variant}") if case.variant else case.id


def _as_run(report: RunReport, cases: list[CaseReport]) -> RunReport:
    """The run as if it were only this variant's scenarios, under their ids without it."""
    renamed = [
        case.model_copy(
            update={
                "id": _scenario(case),
                "attempts": [
                    a.model_copy(update={"case_id": _scenario(case)}) for a in case.attempts
                ],
            }
        )
        for case in cases
    ]
    return report.model_copy(update={"cases": renamed, "gate": None, "variants": None})


def _vs(
    first: RunReport, report: RunReport, cases: list[CaseReport], policy: Any
) -> VariantComparison:
    from .baseline import compare

    diff = compare(first, _as_run(report, cases), policy)
    scenario_gate = next((g for g in diff.gates if g.name == "scenario_regression"), None)
    worse = [
        c.case_id
        for c in diff.cases
        if c.pass_rate is not None and c.pass_rate.movement == "regressed"
    ]
    return VariantComparison(
        verdict=str(diff.verdict.value),
        breached=[str(name) for name in diff.breached],
        worse=list(scenario_gate.case_ids) if scenario_gate and scenario_gate.case_ids else worse,
        reasons={str(g.name): g.reason for g in diff.gates},
    )


def _summary(label: str, cases: list[CaseReport], vs: VariantComparison | None) -> VariantSummary:
    from .aggregate import cost_of

    graded = [c for c in cases if c.verdict not in ("skipped", "not_run")]
    suite = suite_stats([c.stats for c in graded])
    attempts = [a for c in cases for a in c.attempts]
    judged = [a for a in attempts if a.outcome in ("passed", "failed") and not a.infra_error]
    latencies = [a.latency_ms for a in judged if a.latency_ms is not None]
    cost, per_attempt = cost_of(attempts)
    return VariantSummary(
        label=label,
        scenarios=suite.scenarios,
        attempts=suite.attempts,
        pass_rate=suite.pass_rate,
        ci_low=suite.ci_low,
        ci_high=suite.ci_high,
        cost_usd=cost,
        cost_per_attempt_usd=per_attempt,
        latency_p95_ms=percentile(latencies, 0.95) if latencies else None,
        tokens_per_attempt=sum(a.tokens for a in judged) / len(judged) if judged else None,
        vs_first=vs,
    )


def variants_lines(variants: VariantsReport) -> list[str]:
    """The comparison table for the terminal and summary.txt."""
    lines = [f"variants (each compared with {variants.compared_with}):"]
    width = max(len(v.label) for v in variants.variants)
    for v in variants.variants:
        interval = (
            f"[{v.ci_low:.2f}, {v.ci_high:.2f}]"
            if v.ci_low is not None and v.ci_high is not None
            else ""
        )
        cells = [
            f"{v.label:<{width}}",
            f"{_shown(v.pass_rate, '{:.2f}'):>4} {interval:<12}",
            _shown(v.cost_per_attempt_usd, "${:.4f}/attempt", "cost unknown"),
            _shown(v.latency_p95_ms, "p95 {:.0f} ms", "p95 –"),
            _shown(v.tokens_per_attempt, "{:.0f} tokens/attempt", ""),
        ]
        lines.append("  " + "  ".join(cells) + _against_first(v))
    return lines


def _shown(value: float | None, form: str, missing: str = "–") -> str:
    return form.format(value) if value is not None else missing


def _against_first(variant: VariantSummary) -> str:
    vs = variant.vs_first
    if vs is None:
        return ""
    if not vs.worse:
        return f"  {vs.verdict}"
    shown = ", ".join(vs.worse[:5]) + (" ..." if len(vs.worse) > 5 else "")
    return f"  {vs.verdict}: worse on {len(vs.worse)} case(s): {shown}"
