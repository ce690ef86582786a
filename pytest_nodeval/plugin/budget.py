"""The run's money budget as the pytest layer makes it: the limit and a baseline's costs as
prior."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..runner.budget import Budget, BudgetGate, Prior
from .keys import budget_key
from .settings import Settings

SPENDING_MODES = ("live", "record", "full")
"""Modes whose attempts call models for real: full mode replays the agent's calls, but its
judge grades live."""


def shared_budget(config: pytest.Config, settings: Settings, run_dir: Path) -> Budget | None:
    """The run's budget, made once per process, when --nodeval-max-cost is set and the mode
    spends."""
    if settings.max_cost is None or settings.attempt_mode not in SPENDING_MODES:
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
    from ..modes import REPLAY_MODES
    from ..report.models import BUDGET_REASON

    agent_live = settings.attempt_mode not in REPLAY_MODES
    return BudgetGate(
        budget,
        lambda observed: observed.spend(settings.prices).paid_usd(agent_live),
        BUDGET_REASON,
    )


def run_budget(settings: Settings, run_dir: Path) -> Budget:
    assert settings.max_cost is not None
    # A full run pays for its judge alone: the baseline's costs, the agent's, would overestimate.
    baseline = settings.baseline if settings.attempt_mode != "full" else None
    return Budget(run_dir, settings.max_cost, baseline_prior(baseline))


def baseline_prior(path: Path | None) -> Prior:
    """Mean spend per attempt (agent, user and judge) by case and overall in the baseline;
    empty when there is none."""
    if path is None or not path.exists():
        return Prior()
    from ..errors import NodevalError
    from ..report.baseline import load

    try:
        report: Any = load(path)
    except NodevalError:
        return Prior()  # the gate says what is wrong with it; the budget just has no prior
    by_case = {
        c.id: per_attempt
        for c in report.cases
        if (per_attempt := _spend_per_attempt(c)) is not None
    }
    return Prior(by_case, _spend_per_attempt(report.totals))


def _spend_per_attempt(figures: Any) -> float | None:
    """A case's or the run's spend per attempt; the agent's cost in a baseline written before
    the user's and the judge's were priced."""
    total = getattr(figures, "total_cost_per_attempt_usd", None)
    return figures.cost_per_attempt_usd if total is None else float(total)
