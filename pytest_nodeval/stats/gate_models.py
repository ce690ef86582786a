"""Inputs and report schema of the baseline comparison: what compare() takes and returns.

In-memory settings are frozen dataclasses; everything that lands in the JSON report is a
pydantic model with an attribute docstring on every field.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, computed_field

if TYPE_CHECKING:  # annotations only
    from .significance import RatioBound

__all__ = [
    "ALPHA_SHARES",
    "CaseDiff",
    "CaseSample",
    "Diff",
    "GateName",
    "GatePolicy",
    "GateResult",
    "LatencyChange",
    "Movement",
    "Number",
    "PassRateChange",
    "Plan",
    "SuiteComparison",
    "TokenChange",
    "Verdict",
    "worst_verdict",
]


@dataclass(frozen=True, slots=True)
class CaseSample:
    """One case's graded attempts in one run. Infra errors are already excluded."""

    case_id: str
    outcomes: tuple[bool, ...]
    latencies_ms: tuple[float, ...] = ()
    tokens: tuple[int, ...] = ()
    costs: tuple[float, ...] = ()
    """USD per attempt, of the attempts whose cost is known."""
    adaptive_cap: int | None = None
    """Set when the run took this case's attempts adaptively (stats/adaptive.py) with this
    cap: ``outcomes`` are then in the order they ran, and the per-case gate tests them with
    the sequential p-value of that design instead of one Boschloo test."""
    adaptive_decided: bool = False
    """The design stopped this case before its cap (regressed or no regression): a large
    drop it let go is not INCONCLUSIVE, since more repeats were judged not to change it."""

    def __post_init__(self) -> None:
        """Refuse data no gate can use: one NaN latency turned a x3 slowdown into a WARN, one
        negative cost hid a x3 cost rise (issue 29). Raises ValueError naming the field."""
        where = f"case {self.case_id!r}"
        for index, outcome in enumerate(self.outcomes):
            if not isinstance(outcome, bool):
                raise ValueError(
                    f"{where}: outcomes[{index}] is {outcome!r}; expected True (passed) or "
                    "False (failed)"
                )
        for name, unit in (
            ("latencies_ms", "milliseconds"),
            ("tokens", "tokens"),
            ("costs", "USD"),
        ):
            values = getattr(self, name)
            if len(values) > len(self.outcomes):
                raise ValueError(
                    f"{where}: {len(values)} {name} for {len(self.outcomes)} outcomes; expected "
                    "at most one per graded attempt"
                )
            for index, value in enumerate(values):
                if not _non_negative_finite(value):
                    raise ValueError(
                        f"{where}: {name}[{index}] is {value!r}; expected a finite number "
                        f">= 0 ({unit})"
                    )

    @property
    def attempts(self) -> int:
        return len(self.outcomes)

    @property
    def passed(self) -> int:
        return self.outcomes.count(True)  # every outcome is a bool (__post_init__)


def _non_negative_finite(value: object) -> bool:
    # numbers.Real takes numpy's numbers too; a bool is a flag, not an amount.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return math.isfinite(value) and float(value) >= 0.0


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """Gate thresholds and test settings (docs/statistics.md §3, §4 and §7).

    Each ``fail_on_*`` is a practical threshold; 0 disables that gate. Between two live
    (or full, or record) runs a gate FAILs only on a change that is both that large and
    significant; between two deterministic replays the thresholds are plain thresholds.
    """

    fail_on_score_drop: float = 0.05
    """Suite gate: absolute drop in the paired suite pass rate (5 pp)."""
    fail_on_scenario_drop: float = 0.20
    """Per-case gate: absolute drop in one case's pass rate that a significant drop must
    reach to FAIL (20 pp). Replay: any drop of a case FAILs, even with this at 0."""
    fail_on_latency_p95_increase: float = 0.25
    """Latency gate: relative rise of the p95 (0.25 = p95 x 1.25): of the pooled p95 between
    live runs, of each case's p95 between deterministic replays."""
    latency_min_increase_ms: float = 500.0
    """Latency gate between live runs: the pooled p95 must also rise by this many ms."""
    latency_min_attempts: int = 100
    """Latency gate between live runs: latencies needed in each run (pooled over cases) to
    FAIL; with fewer, a significant slowdown only WARNs (docs/statistics.md §3.4)."""
    fail_on_token_increase: float = 0.15
    """Token gate: relative rise of total mean tokens per attempt over the suite."""
    fail_on_cost_increase: float = 0.15
    """Cost gate: relative rise of total mean cost (USD) per attempt over the suite."""
    alpha: float = 0.01
    """The run's false-alarm budget: under no change, at most this share of runs FAIL, all
    gates together (docs/statistics.md §4.1). Split across the gates by ``ALPHA_SHARES``;
    halve it for a second look at the same change (docs/statistics.md §6.5)."""
    fdr_level: float = 0.10
    """Benjamini-Hochberg level that names individually slower cases in the latency detail;
    it decides no FAIL (the FAIL decisions control the family-wise error)."""
    bootstrap_iterations: int = 4000
    """Resamples of the latency and token bootstraps (enough for their 0.125% quantile)."""
    bootstrap_seed: int = 0
    """Seed of the bootstraps and of the suite test's random draws (when there are too many
    dealings to enumerate), so the same data always gives the same verdict."""

    def __post_init__(self) -> None:
        for name in ("fail_on_score_drop", "fail_on_scenario_drop"):
            self._require(name, lambda v: 0.0 <= v <= 1.0, "a pass-rate drop in [0, 1]")
        for name in (
            "fail_on_latency_p95_increase",
            "fail_on_token_increase",
            "fail_on_cost_increase",
        ):
            self._require(name, lambda v: v >= 0.0, "a relative increase >= 0")
        self._require("latency_min_increase_ms", lambda v: v >= 0.0, ">= 0")
        self._require("latency_min_attempts", lambda v: v >= 1, ">= 1")
        for name in ("alpha", "fdr_level"):
            self._require(name, lambda v: 0.0 < v < 1.0, "in (0, 1)")
        self._require("bootstrap_iterations", lambda v: v >= 100, ">= 100")

    def _require(self, name: str, valid: Callable[[float], bool], expected: str) -> None:
        value = getattr(self, name)
        if not valid(value):
            raise ValueError(f"GatePolicy.{name} must be {expected}, got {value!r}")

    def level(self, gate: GateName) -> float:
        """The one-sided level of ``gate``: its share of the run's false-alarm budget."""
        return self.alpha * ALPHA_SHARES[gate]


class Verdict(StrEnum):
    """Outcome of a gate, in increasing order of severity."""

    OK = "OK"
    WARN = "WARN"
    INCONCLUSIVE = "INCONCLUSIVE"
    FAIL = "FAIL"

    @property
    def severity(self) -> int:
        """0 for OK up to 3 for FAIL: INCONCLUSIVE needs a re-run, WARN only a look."""
        return list(Verdict).index(self)


def worst_verdict(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe of ``verdicts``; OK when there are none."""
    return max(verdicts, key=lambda verdict: verdict.severity, default=Verdict.OK)


class GateName(StrEnum):
    SUITE_PASS_RATE = "suite_pass_rate"
    SCENARIO_REGRESSION = "scenario_regression"
    LATENCY_P95 = "latency_p95"
    TOKENS = "tokens"
    COST = "cost"


ALPHA_SHARES: dict[GateName, float] = {
    GateName.SUITE_PASS_RATE: 0.50,
    GateName.SCENARIO_REGRESSION: 0.25,
    GateName.LATENCY_P95: 0.125,
    GateName.TOKENS: 0.0625,
    GateName.COST: 0.0625,
}
"""Each gate's share of ``GatePolicy.alpha`` (docs/statistics.md §4.1). They sum to 1, so by
the union bound the run FAILs under no change at most ``alpha`` of the time, whatever the true
pass rates. The suite gate gets half: it carries the power for suite-wide drops
(benchmarks/README.md). Tokens and cost split the share the token gate had alone: both
measure what an attempt consumes."""


class Movement(StrEnum):
    """Direction of a case's pass rate from baseline to current."""

    SAME = "same"
    DOWN = "down"
    UP = "up"


class _ReportModel(BaseModel):
    # defer_build: validators are built on first use, not at import (~0.1 s CPU saved);
    # the plugin imports these modules in runs that may never build a report.
    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, defer_build=True
    )


class PassRateChange(_ReportModel):
    """A case's pass rate in both runs and the per-case regression test."""

    baseline_passed: int
    """Passing attempts in the baseline."""
    baseline_attempts: int
    """Graded attempts in the baseline (infra errors excluded)."""
    current_passed: int
    """Passing attempts in the current run."""
    current_attempts: int
    """Graded attempts in the current run (infra errors excluded)."""
    delta: float
    """Current pass rate minus baseline pass rate."""
    ci_low: float
    """Lower end of the 95% Newcombe interval of ``delta``."""
    ci_high: float
    """Upper end of the 95% Newcombe interval of ``delta``."""
    movement: Movement
    """Whether the pass rate went down, up or stayed the same."""
    p_value: float | None
    """One-sided Boschloo p for a drop (for a case run with adaptive repeats, the sequential p
    of its looks: stats/adaptive.py); None when not tested (deterministic replay, gate off)."""
    p_value_adjusted: float | None
    """``p_value`` after Holm across the tested cases: FAIL needs it <= the gate's level."""
    verdict: Verdict
    """This case's verdict under the scenario_regression gate."""


class LatencyChange(_ReportModel):
    """A case's latency percentiles (Harrell-Davis) in both runs and the slowdown test."""

    baseline_p50_ms: float
    """Baseline median latency."""
    current_p50_ms: float
    """Current median latency."""
    baseline_p95_ms: float
    """Baseline 95th-percentile latency."""
    current_p95_ms: float
    """Current 95th-percentile latency."""
    p50_delta_ms: float
    """Current minus baseline median latency."""
    p95_delta_ms: float
    """Current minus baseline p95 latency."""
    p95_ratio: float | None
    """Current p95 / baseline p95; None when the baseline p95 is 0."""
    p_value: float | None
    """One-sided Mann-Whitney p that current is slower; None with fewer than 2 latencies a run,
    in deterministic replay, or with the gate off."""
    p_value_adjusted: float | None
    """``p_value`` after Benjamini-Hochberg across the tested cases."""
    verdict: Verdict
    """Live runs: WARN names a case materially and significantly slower (BH at fdr_level),
    detail only; the gate FAILs on the pooled p95. Deterministic replay: FAIL when this
    case's p95 rose by the threshold."""


class TokenChange(_ReportModel):
    """A case's mean per attempt in both runs: tokens, or USD for the cost."""

    baseline_mean: float
    """Baseline mean tokens per attempt."""
    current_mean: float
    """Current mean tokens per attempt."""
    delta: float
    """Current minus baseline mean."""
    ratio: float | None
    """Current / baseline mean; None when the baseline mean is 0."""


class CaseDiff(_ReportModel):
    """How one case present in both runs moved."""

    case_id: str
    """The case's id."""
    pass_rate: PassRateChange | None
    """Pass-rate change; None when either run has no graded attempt of this case."""
    latency: LatencyChange | None
    """Latency change; None when either run recorded no latency for this case."""
    tokens: TokenChange | None
    """Token change; None when either run recorded no tokens for this case."""
    cost: TokenChange | None = None
    """Change of the mean cost per attempt (USD); None when either run has no known cost."""


class SuiteComparison(_ReportModel):
    """Suite pass rate, paired by scenario over the cases graded in both runs.

    The suite gate's numbers (docs/statistics.md §3.2)."""

    scenarios: int
    """Scenarios graded in both runs: the pairs behind every number below."""
    baseline_pass_rate: float | None
    """Mean per-scenario pass rate of the baseline over the paired scenarios."""
    current_pass_rate: float | None
    """Mean per-scenario pass rate of the current run over the paired scenarios."""
    delta: float | None
    """Mean of the per-scenario differences (current - baseline)."""
    standard_error: float | None
    """sd(differences) / sqrt(scenarios): the paired, scenario-clustered SE."""
    ci_low: float | None
    """Lower end of the two-sided (1 - 2 level) t interval of ``delta``, where level is the
    suite gate's (0.005 by default, so 99%; 0.0075 when the per-case gate cannot FAIL,
    docs/statistics.md §4.1)."""
    ci_high: float | None
    """Upper end of that interval; also the one-sided (1 - level) upper bound."""
    p_value: float | None
    """One-sided p-value for a drop: FAIL needs it <= the suite gate's level and ``delta`` at
    or below minus ``fail_on_score_drop``."""
    p_value_method: Literal["stratified-permutation", "weighted-sign-flip", "sign-flip", "t"] | None
    """"stratified-permutation": the conditional test of T = sum_j d_j / sd_j when each
    scenario's attempts trade runs at random with its passes fixed, sd_j =
    sqrt(pbar_j (1 - pbar_j) (1/R_Bj + 1/R_Cj)) with pbar_j pooled over both runs; exact
    enumeration when the scenarios' distinct (R_B, R_C, passes) groups allow at most 2**18
    sums, else 19,999 draws seeded by ``bootstrap_seed``. Reports written before it say
    "weighted-sign-flip" (the same T referred to its sign flips across scenarios),
    "sign-flip" (unweighted, up to 30 scenarios) or "t" (one-sample t, above)."""
    correlation: float | None
    """Correlation of per-scenario pass rates between the runs: what pairing gains."""
    minimum_detectable_drop: float | None
    """Drop found with 80% power at this noise and the gate's level (docs/statistics.md §7.1)."""


Number = float | int | None


class GateResult(_ReportModel):
    """The verdict of one gate."""

    name: GateName
    """Which gate."""
    verdict: Verdict
    """OK, WARN, INCONCLUSIVE or FAIL."""
    reason: str
    """One line for humans."""
    numbers: dict[str, Number]
    """The numbers behind the verdict."""
    case_ids: list[str]
    """Cases involved, most severe first."""


@dataclass(frozen=True, slots=True)
class PendingGate:
    """A gate's result once the bootstrap bound it asks for is known (``bound`` None: it asks
    for none). compare() computes the bounds of all its gates together, so that those that
    resample the same cases and attempts share one draw (``significance.ratio_lower_bounds``).
    """

    bound: RatioBound | None
    result: Callable[[float | None], GateResult]


class Diff(BaseModel):
    """Baseline-vs-current comparison with the gate verdicts (the JSON report's ``diff``)."""

    # Unknown keys are ignored rather than rejected so that a dumped Diff, which carries
    # its computed fields, validates back.
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, defer_build=True)

    schema_version: Literal["1"] = "1"
    """Version of this schema."""
    policy: dict[str, Number]
    """The GatePolicy used, so a verdict can be reproduced."""
    baseline_mode: str | None = None
    """The baseline run's mode (deterministic, full, live, record); None in older reports."""
    current_mode: str | None = None
    """The current run's mode."""
    deterministic: bool = False
    """True when the current run is a deterministic replay of a deterministic or record
    baseline: both exact, so thresholds are plain, no statistics (docs/statistics.md §5)."""
    notes: list[str] = []
    """Caveats a reader must see, such as runs of different modes; printed in the diff table."""
    cases: list[CaseDiff]
    """Cases present in both runs, sorted by id."""
    new_cases: list[str]
    """Cases only in the current run."""
    missing_cases: list[str]
    """Cases only in the baseline."""
    suite: SuiteComparison
    """Paired suite pass-rate comparison."""
    gates: list[GateResult]
    """One result per enabled gate."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def breached(self) -> list[GateName]:
        """Gates whose verdict is FAIL."""
        return [gate.name for gate in self.gates if gate.verdict is Verdict.FAIL]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict:
        """The most severe gate verdict (OK when no gate is enabled)."""
        return worst_verdict(gate.verdict for gate in self.gates)


class Plan(_ReportModel):
    """How small a suite drop a design can detect, and the repeats a target drop needs."""

    scenarios: int
    """Scenarios in the design."""
    repeats: int
    """Repeats per scenario in each run."""
    alpha: float
    """One-sided significance level."""
    power: float
    """Probability of detecting a drop of the reported size."""
    within_scenario_variance: float
    """E[p(1-p)], the binomial noise of one attempt, averaged over scenarios."""
    variance_source: Literal["baseline", "default"]
    """Estimated from baseline cases with 2+ attempts, or the planning default 0.10
    (docs/statistics.md §7.2)."""
    minimum_detectable_drop: float
    """Smallest suite drop detected with ``power`` at these scenarios and repeats."""
    target_drop: float
    """The suite drop the plan should detect."""
    repeats_needed: int | None
    """Repeats per scenario (both runs) to detect ``target_drop``; None for a deterministic
    baseline."""
    scenarios_needed: int
    """Scenarios needed to detect ``target_drop`` at the given repeats."""
    deterministic: bool = False
    """True for a deterministic replay baseline: every drop is seen exactly and repeats add
    nothing, so ``repeats_needed`` is None and the MDE is the smallest possible drop."""
