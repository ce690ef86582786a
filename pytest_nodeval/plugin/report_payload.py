"""What rides on a TestReport: the case's metadata and the attempt's result, as JSON types.

pytest-xdist serialises `report.__dict__`, so the same attribute reaches the controller
with and without `-n`; keeping it to builtins keeps execnet happy and messages small.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..report.models import AttemptRecord, CaseMeta
from .attempt import Attempt, case_meta
from .collect import CaseRef

ATTRIBUTE = "nodeval"


def attach(report: pytest.TestReport, item: pytest.Item, ref: CaseRef) -> None:
    from .keys import attempt_key, cases_key

    attempt = item.stash.get(attempt_key, None)
    if attempt is not None:
        _keep_divergence_failed(report, attempt)
        meta = attempt.meta
    else:
        from .collect import case_key

        known = item.config.stash[cases_key].get(case_key(ref.directory, ref.row, ref.variant))
        case = known or _head(item.config, ref)
        meta = (
            case_meta(case, item.config.rootpath).model_copy(
                update={
                    "id": ref.case_id,
                    "dataset": case.spec.id if ref.row else None,
                    "variant": ref.variant,
                }
            )
            if case
            else CaseMeta(id=ref.case_id)
        )
    payload: dict[str, Any] = {"meta": meta.model_dump(mode="json"), "repeat": ref.repeat}
    record = _record(report, item, attempt, ref)
    if record is not None:
        payload["attempt"] = record.model_dump(mode="json")
        from .junit import record_properties

        record_properties(item, report, record)
        if attempt is not None and attempt.is_first_run and report.when != "teardown":
            _export(item, record, attempt)
    setattr(report, ATTRIBUTE, payload)
    if report.when == "teardown" and attempt is not None:
        # The small record above is all the run needs from here on; the attempt holds the
        # observed events (about 1 MB for a 20-call session), and items live until the end.
        del item.stash[attempt_key]


def _export(item: pytest.Item, record: AttemptRecord, attempt: Attempt) -> None:
    """Hand the attempt to this process's OpenTelemetry exporter, when one runs (plugin/otel.py)."""
    from .keys import otel_key

    sender = item.config.stash.get(otel_key, None)
    if sender is not None and attempt.observed is not None:
        sender.send(record, attempt.meta, attempt.observed.events)


def _head(config: pytest.Config, ref: CaseRef) -> Any:
    """The case.yaml collection read, when the rest of the case never loaded (its files are
    broken, or the test stopped before): name, tags and min_pass_rate still reach the report."""
    from pathlib import Path

    from ..errors import NodevalError
    from .collect import case_head

    try:
        return case_head(config, Path(ref.directory))
    except NodevalError:
        return None


def _keep_divergence_failed(report: pytest.TestReport, attempt: Attempt) -> None:
    """A diverged replay is never a pass, even when the test caught what run() raised."""
    if report.when == "call" and report.passed and attempt.divergence:
        report.outcome = "failed"
        report.longrepr = attempt.divergence


def _record(
    report: pytest.TestReport, item: pytest.Item, attempt: Attempt | None, ref: CaseRef
) -> AttemptRecord | None:
    if report.when == "call":
        outcome: str = report.outcome
    elif report.failed:
        outcome = "error"  # setup or teardown failed: the attempt could not be judged
    elif report.skipped and report.when == "setup":
        outcome = "skipped"
    else:
        return None
    reason = None if report.passed else (attempt and attempt.first_problem()) or first_line(report)
    infra = None if report.passed else infra_cause(report, item)
    if attempt is not None:
        record = attempt.record(outcome, reason, infra)
    else:
        record = AttemptRecord(
            nodeid="",
            case_id=ref.case_id,
            repeat=ref.repeat,
            outcome=outcome,  # type: ignore[arg-type]  # one of pytest's outcomes, or error/skipped
            reason=infra or reason,
            infra_error=infra is not None,
        )
    if record.infra_error and record.outcome in ("failed", "passed"):  # nothing was judged
        record = record.model_copy(update={"outcome": "error"})
    return record.model_copy(update={"nodeid": report.nodeid})


def infra_cause(report: pytest.TestReport, item: pytest.Item) -> str | None:
    """Why this test could not judge the agent, when the harness is to blame; else None.

    A fixture that could not start a world or a fake says so in the item's stash; a
    pytest-timeout firing inside the harness is recognised by its message.
    """
    from .keys import infra_key

    cause = item.stash.get(infra_key, None)
    if cause is not None:
        return cause
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", "") or ""
    if "from pytest-timeout" in message:
        return f"harness timeout: {message.removeprefix('Failed: ')}"
    return None


def first_line(report: pytest.TestReport, limit: int = 300) -> str:
    """A one-line reason: the exception's own message where pytest has one."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if report.skipped and isinstance(report.longrepr, tuple):
        text = str(report.longrepr[2])
    elif crash is not None:
        text = crash.message
    else:
        text = report.longreprtext or ""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def from_report(report: Any) -> tuple[CaseMeta | None, int, AttemptRecord | None]:
    """(case metadata, repeat, the attempt's result if this report carries one)."""
    payload = getattr(report, ATTRIBUTE, None)
    if not isinstance(payload, dict):
        return None, 0, None
    meta = CaseMeta.model_validate(payload["meta"]) if "meta" in payload else None
    record = AttemptRecord.model_validate(payload["attempt"]) if "attempt" in payload else None
    return meta, int(payload.get("repeat", 0)), record
