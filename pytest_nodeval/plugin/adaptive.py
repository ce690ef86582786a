"""Adaptive repeats in the pytest layer: a case's repeats stop once its comparison is decided.

With `--nodeval-adaptive` (or the profile or ini key) and a baseline, the process that runs
the tests (the only one, or each xdist worker) reads the baseline's counts, learns each
attempt's outcome from its TestReport as it is made, and before a case's next repeat asks
`stats/adaptive.py` whether the case is decided. A decided case's remaining repeats end as
skipped with the decision as the reason: in no rate, not failures. Nothing is written here;
the controller replays the same pure decisions for the report (`report/adaptive.py`).

Under xdist, `case_scheduling.py` sends all of a case's tests to one worker, in order, so
the decision is made where the case's earlier results are known.
"""

from __future__ import annotations

from typing import Any

import pytest

from .keys import adaptive_off_key, case_ref, settings_of


def register(config: pytest.Config) -> None:
    """Adaptive repeats in this process, or the reason they are off in the config's stash."""
    why = inactive_reason(config)
    if why is not None:
        config.stash[adaptive_off_key] = why
        return
    from ..report.baseline import policy_from

    policy = policy_from(settings_of(config).gate_policy)
    config.pluginmanager.register(AdaptiveRepeats(config, policy), "nodeval-adaptive")


def inactive_reason(config: pytest.Config) -> str | None:
    settings = settings_of(config)
    runs_all = "every case runs all its repeats"
    if settings.mode == "deterministic":
        return (
            "a deterministic replay repeats itself exactly, so there is nothing to decide: "
            f"{runs_all}"
        )
    if settings.update_baseline:
        return (
            "this run becomes the baseline (--nodeval-update-baseline), "
            f"which needs every repeat: {runs_all}"
        )
    if settings.baseline is None or not settings.baseline.exists():
        where = f" (none at {settings.baseline})" if settings.baseline is not None else ""
        return (
            "adaptive repeats compare each case with a baseline; give one with "
            f"--nodeval-baseline or nodeval_baseline{where}: {runs_all}"
        )
    if settings.gate_policy.get("fail_on_scenario_drop", 1.0) == 0:
        return (
            "the per-case gate is off (nodeval_fail_on_scenario_drop = 0), "
            f"so no case has a decision: {runs_all}"
        )
    from ..report.baseline import policy_from

    try:
        policy_from(settings.gate_policy)
    except ValueError as exc:
        return f"the gate's settings are invalid ({exc}): {runs_all}"
    return None


class AdaptiveRepeats:
    """Per case: outcomes so far, and the decision that stopped it."""

    def __init__(self, config: pytest.Config, policy: Any) -> None:
        self.config = config
        self.policy = policy
        self.caps: dict[str, int] = {}
        self.counts: dict[str, tuple[int, int]] | None = None
        self.level = 0.0
        self.results: dict[str, dict[int, bool | None]] = {}
        self.running: set[tuple[str, int]] = set()
        self.stopped: dict[str, Any] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            ref = case_ref(item)
            if ref is not None:
                self.caps[ref.case_id] = max(self.caps.get(ref.case_id, 0), ref.repeat)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        ref = case_ref(item)
        if ref is not None:
            reason = self.skip_reason(ref.case_id, ref.repeat)
            if reason is not None:
                # Reported at the test's own location, as a skip mark's reason is.
                raise pytest.skip.Exception(reason, _use_item_location=True)

    def skip_reason(self, case_id: str, repeat: int) -> str | None:
        """Why this repeat is not needed, or None to run it (every check of a repeat agrees)."""
        if (case_id, repeat) in self.running:
            return None
        if case_id not in self.stopped:
            decision = self._decide(case_id, repeat)
            # Undecided, or every repeat already ran (a later check of one of them): run it.
            if decision is None or decision.stop is None or decision.stop == "cap":
                self.running.add((case_id, repeat))
                return None
            self.stopped[case_id] = decision
        return str(self.stopped[case_id].reason)

    def sure_to_run(self, case_id: str, repeat: int) -> bool | None:
        """For attempts started ahead of their tests (plugin/ahead.py): True when this repeat
        runs whatever the case's results still to come, False when the case has stopped, None
        while a look before it may still stop the case (start it once that look is decided).

        A case can only stop at a look: when its graded attempts reach one of the design's
        sizes. So a repeat is sure to run when no look lies between the attempts graded now
        and the repeat, or when the only one is now and it decided to go on.
        """
        if (case_id, repeat) in self.running:
            return True
        if case_id in self.stopped:
            return False
        if self._baseline_counts().get(case_id, (0, 0))[1] == 0:
            return True  # not in the baseline: every repeat runs
        from ..stats.adaptive import adaptive_design

        graded = sum(1 for outcome in self.results.get(case_id, {}).values() if outcome is not None)
        design = adaptive_design(self.caps.get(case_id, repeat))
        pending = [n for n in design.looks if graded <= n < min(repeat, design.cap)]
        if not pending:
            return True
        if pending != [graded]:
            return None
        decision = self._decide(case_id, repeat)
        return decision.stop is None or decision.stop == "cap"

    def _decide(self, case_id: str, repeat: int) -> Any:
        from ..stats.adaptive import adaptive_design, decide_look

        counts = self._baseline_counts()
        baseline = counts.get(case_id, (0, 0))
        if baseline[1] == 0:
            return None  # not in the baseline: nothing to compare, every repeat runs
        # Every attempt of the case known so far, in repeat order: the repeats before this one
        # when tests run in collection order (and under xdist, where a case keeps to one worker).
        seen = self.results.get(case_id, {})
        graded = [outcome for r in sorted(seen) if (outcome := seen[r]) is not None]
        design = adaptive_design(self.caps.get(case_id, repeat))
        return decide_look(*baseline, graded, design, self.level, self.policy.fail_on_scenario_drop)

    def _baseline_counts(self) -> dict[str, tuple[int, int]]:
        if self.counts is None:
            from ..errors import NodevalError
            from ..report.adaptive import baseline_counts, compared, level_for
            from ..report.baseline import load

            path = settings_of(self.config).baseline
            try:
                self.counts = baseline_counts(load(path)) if path is not None else {}
            except NodevalError:
                self.counts = {}  # the controller's gate says what is wrong with it
            self.level = level_for(self.policy, len(compared(self.caps, self.counts)))
        return self.counts

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome == "rerun":  # type: ignore[comparison-overlap]  # pytest-rerunfailures
            return
        from .report_payload import from_report

        _, _, record = from_report(report)
        if record is None or record.outcome in ("skipped", "not_run"):
            return
        graded = (
            None if record.infra_error or record.outcome == "error" else record.outcome == "passed"
        )
        seen = self.results.setdefault(record.case_id, {})
        if record.repeat in seen:  # another check of the same attempt: a failure or an error wins
            before = seen[record.repeat]
            graded = None if before is None or graded is None else before and graded
        seen[record.repeat] = graded


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scheduler for this run, when the dist mode would split a case across workers."""
    if adaptive_off_key in config.stash or config.getvalue("dist") not in (
        "load",
        "loadgroup",
        "worksteal",
    ):
        return None  # loadscope and loadfile keep a case.yaml's tests together already
    from .case_scheduling import CaseScheduling

    return CaseScheduling(config, log)
