"""report.json (schema_version "1"): what one pytest run of the scenarios found.

Every model here is what lands on disk or crosses xdist; its JSON Schema is exported to
`schemas/report.schema.json` and a test fails when the two drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..journal.writer import write_atomic
from ..stats.run_stats import CaseStats, SuiteStats

REPORT_SCHEMA_VERSION: Final = "1"
EXIT_INFRA_ERROR = 7
"""Exit status of a run whose only problems are infrastructure errors (no key, no image, a
provider or judge down, a harness timeout): the agent was not judged, so this is neither 0
nor the agent-failure status 1."""
Outcome = Literal["passed", "failed", "error", "skipped", "not_run"]
"""How an attempt ended. error: it could not be judged (infra_error says whether the harness,
a provider, a key or an image is to blame); not_run: the run stopped before it (-x, --sw,
an interrupt). Only passed and failed attempts count in pass rates."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AssertionRecord(_Model):
    kind: str
    description: str
    status: Literal["passed", "failed", "skipped"]
    message: str = ""
    seqs: list[int] = Field(default_factory=list)
    """Observed events the result refers to."""


class CaseMeta(_Model):
    """What the controller needs to know about a case (travels on every report of it)."""

    id: str
    name: str = ""
    tags: list[str] = Field(default_factory=list)
    min_pass_rate: float | None = None
    directory: str = ""
    """Relative to the rootdir."""
    dataset: str | None = None
    """For a row of a dataset case (id `<case>/<row>`): the dataset case's own id."""
    variant: str | None = None
    """In a matrix (--nodeval-matrix), the variant's label: the id ends in `@<label>`."""


class AttemptRecord(_Model):
    """One attempt (a case at one repeat): the payload each TestReport carries."""

    nodeid: str
    case_id: str
    repeat: int
    outcome: Outcome
    infra_error: bool = False
    """The harness or a provider failed (5xx, timeout, crashed worker), not the agent."""
    reason: str | None = None
    """Why it did not pass, in one line."""
    divergence: str | None = None
    """A replay that diverged from its journal: the whole message (where, the field that
    differs, a short diff, how to re-record); `reason` holds its first line."""
    divergence_seq: int | None = None
    """The seq of the recorded event where the replay diverged, when known (a request or a
    tool call that differs); the observed journal numbers its events alike up to there."""
    live_from_turn: int | None = None
    """--nodeval-from-turn: the user turn the attempt went live at (the turns before it were
    replayed from the case's journal); None for an attempt that ran whole in its mode."""
    status: str | None = None
    """The session's own end status: ok, limit, error, divergence, incomplete."""
    checks: list[str] = Field(default_factory=list)
    """Every test bound to this case and repeat: each is a check of this one attempt, which
    passes only if all of them pass."""
    reruns: int = 0
    """Tries before the one that counts (pytest-rerunfailures): non-zero means flaky."""
    assertions: list[AssertionRecord] = Field(default_factory=list)
    latency_ms: float | None = None
    """The agent's session duration (in replay: as recorded)."""
    wall_ms: float | None = None
    """Time this attempt took here (in replay: the replay itself)."""
    input_tokens: int = 0
    """Every prompt token of the agent's model calls, cached ones included."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """Of input_tokens, read from a prompt cache."""
    cache_write_tokens: int = 0
    """Of input_tokens, written to a prompt cache."""
    cost_usd: float | None = None
    """What the agent's model calls cost, in USD (in replay: what the recorded calls cost,
    at today's prices). None when the attempt never ran or a call's model has no price."""
    cost_unpriced: list[str] = Field(default_factory=list)
    """Models of this attempt's calls with no known price: why cost_usd is None."""
    user_cost_usd: float | None = None
    """What the simulated persona's model calls cost, in USD, at the same prices (0 for a
    scripted user, and in replay, which serves the persona's turns from the journal). None
    when the attempt never ran or a call's model has no price."""
    user_cost_unpriced: list[str] = Field(default_factory=list)
    """Models of the persona's calls with no known price: why user_cost_usd is None."""
    judge_cost_usd: float | None = None
    """What the judge's model calls cost, in USD (it grades live in full, live and record
    modes, also when the agent replays). None as user_cost_usd."""
    judge_cost_unpriced: list[str] = Field(default_factory=list)
    """Models of the judge's calls with no known price: why judge_cost_usd is None."""
    total_cost_usd: float | None = None
    """cost_usd + user_cost_usd + judge_cost_usd: the attempt's whole cost; None when one
    of them is (and in reports written before the user and the judge were priced)."""
    turns: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    retries: int = 0
    """LLM requests tried again after a 429, 5xx or connection error (live attempts only;
    each LLM call counts once in llm_calls however often it was tried)."""
    journal: str | None = None
    """The observed journal directory, relative to the run directory."""
    world_backend: str | None = None
    worker: str | None = None
    judged: dict[str, str] = Field(default_factory=dict)
    """The judge's verdict per rubric criterion: pass, fail, inconclusive or skipped."""
    user_ending: str | None = None
    """How a simulated persona ended the conversation."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class JudgeAgreement(_Model):
    """How consistently the judge graded one criterion across a case's attempts."""

    verdicts: dict[str, int]
    """Count per verdict (pass, fail, inconclusive, skipped)."""
    agreement: float | None
    """The share of graded attempts that got the most common pass/fail verdict."""


class CaseAdaptive(_Model):
    """How adaptive repeats (--nodeval-adaptive) ran a case compared with the baseline."""

    cap: int
    """Repeats collected for the case: the most it could take."""
    repeats: int
    """Graded attempts the case took before its comparison was decided (or it stopped)."""
    skipped: int
    """Repeats skipped once decided: outcome skipped, in no rate."""
    stop: Literal["regressed", "no regression", "cap", "undecided"]
    """Why it stopped: regressed or no regression (decided at a look), cap (every repeat
    ran, undecided until the last), undecided (infrastructure errors or an interrupted run
    left it short of a decision)."""
    reason: str
    """The same in words, as the skipped repeats say it."""


class AdaptiveRun(_Model):
    """The adaptive design of a run (stats/adaptive.py): present when it was in effect."""

    cases_compared: int
    """Cases in both this run and the baseline: the per-case level is shared among them."""
    case_level: float
    """Each case's one-sided level, spent over its looks (the per-case gate's share / cases)."""
    repeats_run: int
    """Attempts of compared cases that ran."""
    repeats_skipped: int
    """Attempts of compared cases skipped once their comparison was decided."""


class CaseReport(_Model):
    id: str
    name: str = ""
    tags: list[str] = Field(default_factory=list)
    directory: str = ""
    dataset: str | None = None
    """For a row of a dataset case (id `<case>/<row>`): the dataset case's own id, which
    groups its rows in the reports; None for any other case."""
    variant: str | None = None
    """In a matrix (--nodeval-matrix), the variant's label (`model=a`): the id ends in
    `@<label>`, and report.json's `variants` compares the variants."""
    min_pass_rate: float | None = None
    verdict: Literal["passed", "failed", "tolerated", "error", "skipped", "not_run"]
    """passed: every attempt passed; tolerated: some failed, within min_pass_rate; error: an
    attempt could not be judged; not_run: no attempt ran."""
    stats: CaseStats
    judge_agreement: dict[str, JudgeAgreement] = Field(default_factory=dict)
    """Per rubric criterion, how the judge's verdicts spread over the repeats."""
    cost_usd: float | None = None
    """What this case's attempts cost, in USD; None when one that ran has no known price."""
    cost_per_attempt_usd: float | None = None
    """cost_usd over the attempts that ran (passed, failed or error); None as above."""
    user_cost_usd: float | None = None
    """What the simulated persona's calls cost over the case's attempts; None as cost_usd."""
    judge_cost_usd: float | None = None
    """What the judge's calls cost over the case's attempts; None as cost_usd."""
    total_cost_usd: float | None = None
    """The agent's, the user's and the judge's together; None when one of them is unknown."""
    total_cost_per_attempt_usd: float | None = None
    """total_cost_usd over the attempts that ran; None as total_cost_usd."""
    attempts: list[AttemptRecord]
    adaptive: CaseAdaptive | None = None
    """How many repeats adaptive repeats gave the case and why it stopped; None when the
    case ran every collected repeat (adaptive off, no baseline, or not in the baseline)."""

    def meta(self) -> CaseMeta:
        """What its attempts' reports said of the case (to aggregate or export them again)."""
        return CaseMeta(
            id=self.id,
            name=self.name,
            tags=self.tags,
            min_pass_rate=self.min_pass_rate,
            directory=self.directory,
            dataset=self.dataset,
            variant=self.variant,
        )

    @property
    def judge_skipped(self) -> bool:
        """A judge rubric went ungraded (deterministic mode, or no judge): say so next to a pass."""
        return any(
            a.kind == "judge" and a.status == "skipped"
            for at in self.attempts
            for a in at.assertions
        ) or any(v == "skipped" for at in self.attempts for v in at.judged.values())

    @property
    def reruns(self) -> int:
        return sum(a.reruns for a in self.attempts)


class Totals(_Model):
    cases: int = 0
    attempts: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    infra_errors: int = 0
    """Errors that are the infrastructure's (no key, no image, provider down, harness timeout)."""
    skipped: int = 0
    not_run: int = 0
    """Attempts the run stopped before (-x, --sw, an interrupt); in no rate."""
    tolerated_failures: int = 0
    not_run_budget: int = 0
    """Of not_run, the attempts --nodeval-max-cost kept from starting."""
    cost_usd: float | None = None
    """What the run's attempts cost, in USD; None when an attempt that ran has no known price
    (cost_priced_usd then sums the rest)."""
    cost_priced_usd: float = 0.0
    """The cost of the attempts whose cost is known."""
    cost_per_attempt_usd: float | None = None
    """cost_usd over the attempts that ran; None as cost_usd."""
    cost_unpriced_attempts: int = 0
    """Attempts that ran whose cost is unknown (a model without a price)."""
    cost_unpriced_models: list[str] = Field(default_factory=list)
    """The models without a price: name them in nodeval_prices."""
    user_cost_usd: float | None = None
    """What the simulated personas' calls cost (the agent's are cost_usd); None when one has
    no known price."""
    user_cost_unpriced_models: list[str] = Field(default_factory=list)
    """The persona models without a price."""
    judge_cost_usd: float | None = None
    """What the judge's calls cost; None when one has no known price."""
    judge_cost_unpriced_models: list[str] = Field(default_factory=list)
    """The judge models without a price."""
    total_cost_usd: float | None = None
    """The run's whole cost: the agent's, the user's and the judge's calls; None when one of
    them is unknown. What --nodeval-max-cost counts (less the agent's calls in replay)."""
    total_cost_per_attempt_usd: float | None = None
    """total_cost_usd over the attempts that ran; None as total_cost_usd."""
    cost_recorded: bool = False
    """True in replay (deterministic, full): the agent's cost is what the recorded calls cost,
    at today's prices; the run itself spent nothing on the agent's calls (a full run's judge
    still grades live, and its cost is spent)."""


BUDGET_REASON = "not run (budget)"
"""How an attempt --nodeval-max-cost kept from starting begins its reason."""


class RunSummary(_Model):
    """The run in one block, by case: what a dashboard or a CI step reads first."""

    cases: int
    passed: int
    """Cases whose every graded attempt passed, or whose failures their min_pass_rate tolerates."""
    failed: int
    """Cases that failed: an agent failure (or a divergence) beyond what min_pass_rate tolerates."""
    infra: int
    """Cases with at least one infrastructure error (no key, no image, a provider down); their
    verdict is an error, not a failure."""
    errors: int
    """Cases with an attempt that could not be judged for another reason (a broken case file)."""
    skipped: int
    not_run: int
    pass_rate: float | None
    """The suite pass rate (scenarios weighted equally; `suite` has its interval)."""
    duration_s: float


def summary_of(cases: list[CaseReport], suite: SuiteStats, duration_s: float) -> RunSummary:
    infra = sum(1 for c in cases if any(a.infra_error for a in c.attempts))
    verdicts = [c.verdict for c in cases]
    return RunSummary(
        cases=len(cases),
        passed=verdicts.count("passed") + verdicts.count("tolerated"),
        failed=verdicts.count("failed"),
        infra=infra,
        errors=verdicts.count("error") - infra,
        skipped=verdicts.count("skipped"),
        not_run=verdicts.count("not_run"),
        pass_rate=suite.pass_rate,
        duration_s=duration_s,
    )


class ShardRecord(_Model):
    """Which slice of the suite a sharded run (--nodeval-shard K/N) ran: `nodeval merge` checks
    the shards against it and counts a missing shard's cases as not run."""

    index: int
    """This shard, counting from 1."""
    total: int
    balanced_by: Literal["baseline", "history", "counts"]
    """Where the durations that balanced the split came from."""
    cases: dict[str, int] = Field(default_factory=dict)
    """Every case of the selected suite -> the shard it was assigned to (not only this one's)."""
    tests: int = 0
    """Tests (cases' and plain ones) this shard kept."""


class VariantComparison(_Model):
    """The variant against the first, as the gate compares a run with its baseline."""

    verdict: str
    """The worst gate verdict: OK, WARN, INCONCLUSIVE or FAIL."""
    breached: list[str]
    """Gates whose verdict is FAIL."""
    worse: list[str]
    """Scenarios (ids without the variant) whose pass rate fell, most severe first, as the
    per-scenario gate names them."""
    reasons: dict[str, str] = Field(default_factory=dict)
    """Each gate's one-line reason, by gate."""


class VariantSummary(_Model):
    label: str
    """The variant's label, as test ids carry it: `model=a`."""
    scenarios: int
    attempts: int
    """Graded attempts (passed or failed)."""
    pass_rate: float | None
    """The suite pass rate over the variant's scenarios (each weighted equally)."""
    ci_low: float | None
    ci_high: float | None
    cost_usd: float | None
    """What its attempts cost; None when one of them has no known price."""
    cost_per_attempt_usd: float | None
    latency_p95_ms: float | None
    """The 95th percentile of its attempts' latencies, pooled."""
    tokens_per_attempt: float | None
    vs_first: VariantComparison | None = None
    """Against the first variant; None for the first."""


class VariantsReport(_Model):
    compared_with: str
    """The first variant's label: the one every other is compared with."""
    variants: list[VariantSummary]
    cases: dict[str, dict[str, float | None]]
    """Per scenario (id without the variant), each variant's pass rate."""


class RunReport(_Model):
    schema_version: Literal["1"] = REPORT_SCHEMA_VERSION
    run_id: str
    started_at: str
    finished_at: str
    duration_s: float
    mode: str
    repeat: int
    profile: str | None = None
    match: str = "default"
    world: str = "auto"
    max_cost_usd: float | None = None
    """--nodeval-max-cost: the run stopped starting attempts before its spend passed this."""
    exit_status: int
    """The exit status of the run, after nodeval's decisions (tolerated failures, gate)."""
    pytest_exit_status: int
    summary: RunSummary | None = None
    """The run by case (None in reports written before it existed)."""
    totals: Totals
    suite: SuiteStats
    cases: list[CaseReport]
    gate_policy: dict[str, float] = Field(default_factory=dict)
    """The gate thresholds set in this run's ini file (the rest are GatePolicy's defaults):
    `nodeval baseline` gates with the same policy as the run did."""
    gate: dict[str, Any] | None = None
    """The diff against the baseline and the gates' verdicts, when a baseline was given."""
    adaptive: AdaptiveRun | None = None
    """Adaptive repeats, when they were in effect (asked for, with a baseline, not replay)."""
    matrix: list[str] = Field(default_factory=list)
    """--nodeval-matrix's variants by label, in the matrix's order (the first is the one the
    others are compared with); empty for a run without one."""
    variants: VariantsReport | None = None
    """A matrix run's variants side by side, each compared with the first (report/variants.py);
    None for a run without --nodeval-matrix."""
    environment: dict[str, str] = Field(default_factory=dict)
    """Versions, platform, xdist workers and, when known, git_commit (what `nodeval merge`
    compares)."""
    shard: ShardRecord | None = None
    """The slice of the suite this run was (--nodeval-shard), None for a whole run."""
    merged_from: list[str] = Field(default_factory=list)
    """The shard runs (their run ids) `nodeval merge` joined into this one; empty for a pytest
    run."""

    def case(self, case_id: str) -> CaseReport:
        return next(c for c in self.cases if c.id == case_id)


def write_report(report: RunReport, directory: Path) -> Path:
    path = directory / "report.json"
    write_atomic(path, report.model_dump_json(indent=2) + "\n")
    return path


def load_report(path: Path) -> RunReport:
    """A report.json, or the one in a run directory; errors name the file."""
    from pydantic import ValidationError

    from ..errors import NodevalError

    target = path / "report.json" if path.is_dir() else path
    try:
        return RunReport.model_validate_json(target.read_bytes())
    except FileNotFoundError:
        raise NodevalError(f"{target}: no such report") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise NodevalError(
            f"{target}: not a valid report.json (schema_version 1): {where}: {first['msg']}"
        ) from None
