"""The gate's Python API: compare two runs case by case, decide, and plan repeats.

    from pytest_nodeval.gate import CaseSample, GatePolicy, compare, format_diff_table

    diff = compare(baseline_samples, current_samples, GatePolicy())
    print("\n".join(format_diff_table(diff)))

Adaptive repeats (stats/adaptive.py): `adaptive_design(cap)` gives a case's looks,
`decide_look(...)` what a look decides, and a current `CaseSample(..., adaptive_cap=cap)` is
tested by `compare()` with the sequential p-value of its looks.

A stable import path for scripts, notebooks and tools. The code lives in `stats/gate.py`
(the gates), `stats/gate_models.py` (what they take and return) and `report/terminal.py`
(the table). Importing this loads neither numpy nor scipy; the tests that need them
import them when called.
"""

from __future__ import annotations

from .report.terminal import format_diff_table
from .stats.adaptive import (
    AdaptiveDecision,
    AdaptiveDesign,
    AdaptiveStop,
    adaptive_design,
    case_level,
    decide_look,
    sequential_p,
)
from .stats.gate import compare, plan
from .stats.gate_models import (
    ALPHA_SHARES,
    CaseDiff,
    CaseSample,
    Diff,
    GateName,
    GatePolicy,
    GateResult,
    LatencyChange,
    Movement,
    PassRateChange,
    Plan,
    SuiteComparison,
    TokenChange,
    Verdict,
)

__all__ = [
    "ALPHA_SHARES",
    "AdaptiveDecision",
    "AdaptiveDesign",
    "AdaptiveStop",
    "CaseDiff",
    "CaseSample",
    "Diff",
    "GateName",
    "GatePolicy",
    "GateResult",
    "LatencyChange",
    "Movement",
    "PassRateChange",
    "Plan",
    "SuiteComparison",
    "TokenChange",
    "Verdict",
    "adaptive_design",
    "case_level",
    "compare",
    "decide_look",
    "format_diff_table",
    "plan",
    "sequential_p",
]
