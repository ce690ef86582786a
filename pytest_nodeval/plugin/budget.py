"""The run's money budget as the pytest layer makes it: the limit and a baseline's costs as
prior."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..runner.budget import Budget, BudgetGate, Prior
from .keys import budget_key
from .settings import Settings

SPENDING_MODES = ("live", "record")
"""Modes whose attempts call models for real (full mode replays the agent's calls)."""


def shared_budget(config: pytest.Config, settings: Settings, run_dir: Path) -> Budget | None:
    """The run's budget, made once per process, when --nodeval-max-cost is set and the mode
    spends."""
    if settings.max_cost is None or settings.mode not in SPENDING_MODES:
        return None
    budget = config.stash.get(budget_key, None)
    if budget is None:
        budget = config.stash[budget_key] = run_budget(settings, run_dir)
    return budget


def budget_gate(config: pytest.Config, settings: Settings, run_dir: Path) -> BudgetGate | None:
    """The budget as the start gate of the pool that runs attempts ahead (plugin/ahead.py)."""
    budget = shared_budget(config, settings, run_dir)
    if budget is None:
        return None
    from ..report.models import BUDGET_REASON
    from ..runner.cost import attempt_cost

    return BudgetGate(
        budget,
        lambda observed: attempt_cost(observed.events, settings.prices).cost_usd,
        BUDGET_REASON,
    )


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
    by_case = {
        c.id: c.cost_per_attempt_usd for c in report.cases if c.cost_per_attempt_usd is not None
    }
    return Prior(by_case, report.totals.cost_per_attempt_usd)
