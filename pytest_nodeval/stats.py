"""Pass-rate statistics (placeholder until the statistics module lands)."""

from __future__ import annotations

import math
from typing import Sequence

from pydantic import BaseModel, Field


def wilson_interval(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    z = 1.959963984540054
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


class CaseStats(BaseModel):
    attempts: int
    passed: int
    failed: int
    infra_errors: int = 0
    pass_rate: float | None
    wilson_low: float | None
    wilson_high: float | None
    pass_hat_k: dict[int, float] = Field(default_factory=dict)
    pass_at_k: dict[int, float] = Field(default_factory=dict)
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    tokens_mean: float | None = None


class SuiteStats(BaseModel):
    scenarios: int
    attempts: int
    pass_rate: float | None
    se_clustered: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


def case_stats(outcomes: Sequence[bool], latencies_ms: Sequence[float], tokens: Sequence[int],
               infra_errors: int = 0) -> CaseStats:
    n, k = len(outcomes), sum(outcomes)
    low, high = wilson_interval(k, n) if n else (None, None)
    return CaseStats(attempts=n + infra_errors, passed=k, failed=n - k, infra_errors=infra_errors,
                     pass_rate=k / n if n else None, wilson_low=low, wilson_high=high)


def suite_stats(cases: Sequence[CaseStats]) -> SuiteStats:
    rates = [c.pass_rate for c in cases if c.pass_rate is not None]
    return SuiteStats(scenarios=len(cases), attempts=sum(c.attempts for c in cases),
                      pass_rate=sum(rates) / len(rates) if rates else None)
