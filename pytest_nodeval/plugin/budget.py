"""The run's money budget as the pytest layer makes it: the limit and a baseline's costs as prior."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..runner.budget import Budget, Prior
from .settings import Settings


def run_budget(settings: Settings, run_dir: Path) -> Budget:
    assert settings.max_cost is not None
    return Budget(run_dir, settings.max_cost, baseline_prior(settings.baseline))


def baseline_prior(path: Path | None) -> Prior:
    """Mean cost per attempt by case and overall in the baseline; empty when there is none."""
    if path is None or not path.exists():
        return Prior()
    from ..errors import NodevalError
    from ..report.baseline import load

    try:
        report: Any = load(path)
    except NodevalError:
        return Prior()  # the gate says what is wrong with it; the budget just has no prior
    by_case = {c.id: c.cost_per_attempt_usd for c in report.cases if c.cost_per_attempt_usd is not None}
    return Prior(by_case, report.totals.cost_per_attempt_usd)
