"""What each scenario test adds to `--junitxml`: the case, repeat, outcome kind, latency,
tokens and cost, as `<property>` elements CI test tabs show.

They go on `item.user_properties` (what `record_property` appends to), which pytest copies
onto every TestReport: so they cross xdist with the report, and junitxml writes the ones on
the teardown report.
"""

from __future__ import annotations

from typing import Any

from ..report.models import AttemptRecord

PREFIX = "nodeval_"


def outcome_kind(record: AttemptRecord) -> str:
    """passed, failed, diverged, infra, error, skipped or not_run: a divergence and an
    infrastructure error are named apart from an agent failure."""
    if record.infra_error:
        return "infra"
    if record.status == "divergence" and record.outcome != "passed":
        return "diverged"
    return record.outcome


def properties(record: AttemptRecord) -> list[tuple[str, object]]:
    props: list[tuple[str, object]] = [
        ("case", record.case_id),
        ("repeat", record.repeat),
        ("outcome", outcome_kind(record)),
    ]
    if record.latency_ms is not None:
        props.append(("latency_ms", round(record.latency_ms, 1)))
    props += [
        ("input_tokens", record.input_tokens),
        ("output_tokens", record.output_tokens),
        ("tokens", record.tokens),
    ]
    cost = getattr(record, "cost_usd", None)  # attempts carry it once costs are priced
    if cost is not None:
        props.append(("cost_usd", cost))
    # The simulated persona's and the judge's calls, priced apart from the agent's.
    props += [
        (name, value)
        for name in ("user_cost_usd", "judge_cost_usd")
        if (value := getattr(record, name, None))
    ]
    return [(PREFIX + name, value) for name, value in props]


def record_properties(item: Any, report: Any, record: AttemptRecord) -> None:
    """Replace this attempt's properties on the item (and on a teardown report, which
    junitxml reads and which was made before a teardown error changed the outcome)."""
    fresh = properties(record)
    targets = [item.user_properties] + (
        [report.user_properties] if report.when == "teardown" else []
    )
    for target in targets:
        target[:] = [(k, v) for k, v in target if not str(k).startswith(PREFIX)] + fresh
