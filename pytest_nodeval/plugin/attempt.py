"""One attempt inside pytest: run a case at one repeat, check it, describe the result.

Used by the fixtures; the result becomes the `AttemptRecord` that rides on the TestReport.
"""

from __future__ import annotations

import os
from concurrent.futures import CancelledError, Future
from contextvars import Token
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from ..case.directory import Case, CaseHead
from ..checks.assertions import AssertionResult, Evidence, evaluate_all
from ..checks.expect import collect_results, stop_collecting
from ..errors import DiskFullError, NodevalError, disk_full, no_room
from ..report.models import AssertionRecord, AttemptRecord, CaseMeta
from ..runner.session import AttemptSettings, Observed, opens_world, run_agent_case, run_case
from ..text import cut_at_word, printable
from .collect import CaseRef
from .keys import case_ref, checks_key, observed_key
from .settings import Settings

REASON_CHARS = 300
"""A reason in report.json is one line of at most this many characters, cut at a word."""

if TYPE_CHECKING:
    from ..agent.adapter import Agent
    from ..agent.limits import RunLimits
    from ..runner.budget import Budget, Reservation
    from ..runner.cost import Spend
    from ..runner.session import Grader
    from ..world import World


def case_meta(case: Case | CaseHead, rootpath: Path) -> CaseMeta:
    try:
        directory = str(case.directory.relative_to(rootpath))
    except ValueError:
        directory = str(case.directory)
    return CaseMeta(
        id=case.id,
        name=case.spec.name,
        tags=list(case.spec.tags),
        min_pass_rate=case.spec.min_pass_rate,
        directory=directory,
        # A CaseHead (a case whose files never loaded) has no row: the caller sets it.
        dataset=case.spec.id if getattr(case, "row", None) is not None else None,
        variant=variant.label if (variant := getattr(case, "variant", None)) else None,
    )


@dataclass
class SharedObservation:
    """A reference-engine session run in this process, kept for the other tests of the same
    attempt collected here (see keys.observed_key): each takes it instead of running again."""

    observed: Observed
    checks_left: int
    """Tests of the attempt still to take it; at 0 it is dropped, to keep memory flat."""


class Attempt:
    """One attempt of a case at one repeat, as one test sees it.

    It owns the attempt's run (`run()`, at most once per process and shared by the tests
    that check the same attempt), its journal directory under the run directory, the
    results of assertions.yaml and `expect()`, and the `AttemptRecord` it becomes on the
    TestReport (`record()`). It knows whether the failure is the agent's or the
    infrastructure's (`infra_cause`) and whether the run's budget kept it from starting
    (`budget_stop`). Fixtures fill in what the test brings: a world, running fakes.
    """

    def __init__(
        self, case: Case, ref: CaseRef, settings: Settings, run_dir: Path, rootpath: Path
    ) -> None:
        self.case, self.ref, self.settings, self.run_dir = case, ref, settings, run_dir
        self.meta = case_meta(case, rootpath)
        self.dir = run_dir / "_sessions" / case.id / f"r{ref.repeat}"
        self.observed: Observed | None = None
        self.results: list[AssertionResult] = []
        self.world: World | None = None
        """Set by the nodeval_world fixture: the engine's tools then act on that world."""
        self.fakes: dict[str, Any] = {}
        """Running fakes by kind (llm, composio, mcp), filled by the nodeval_llm_server,
        nodeval_composio and nodeval_mcp fixtures: a live attempt uses them instead of its own."""
        self.check_name = "check"
        """The test's name: a second test of this attempt that must run it again (on another
        xdist worker) journals under checks/<name>/ instead of over the first."""
        self.shared: dict[tuple[str, int], SharedObservation] = {}
        """Reference-engine sessions run in this process that other tests of the same attempt
        will check (see keys.observed_key)."""
        self.checks_here = 1
        """Tests of this attempt collected in this process."""
        self.journal_dir = self.dir / "journal"
        self.infra_cause: str | None = None
        """Set when a key, an image, a provider or the judge was missing or down: the attempt is
        an infrastructure error, not the agent's failure."""
        self.budget: Budget | None = None
        """The run's runner.budget.Budget when --nodeval-max-cost is set and the mode spends
        money."""
        self.budget_stop: str | None = None
        """Why the budget kept this attempt from starting: it is then "not run", in no rate."""
        self._spend: Spend | None = None
        self.declared: tuple[Agent, list[str] | None] | None = None
        """(agent, inputs) from the test's `nodeval_case` marker (`agent=`, `inputs=`): what
        `run()` runs, and what lets the attempt start before its test (see plugin/ahead.py)."""
        self.ahead: Future[Observed] | None = None
        """The attempt already started in the pool: `run()` takes its observation."""
        self.reused = False
        """Its observation is another test's of the same attempt: that test exports it."""

    @property
    def row(self) -> dict[str, Any] | None:
        """The dataset row this attempt runs (its fields, `id` included); None for a plain case."""
        return dict(self.case.row.fields) if self.case.row is not None else None

    @property
    def opens_world(self) -> bool:
        """Whether running this attempt opens a world of its own."""
        return (
            self.world is None
            and self.declared is None
            and opens_world(self.case, self.attempt_settings)
        )

    @property
    def attempt_settings(self) -> AttemptSettings:
        world = self.case.spec.world.backend or (
            None if self.settings.world == "auto" else self.settings.world
        )
        return AttemptSettings(
            mode=self.settings.attempt_mode,
            match=self.settings.match,
            world_backend=world,
            run_id=self.run_dir.name,
            seed=self.ref.repeat,
            judge=self.settings.judge,
            work_dir=self.run_dir / "_work",
            install=False,  # the controller installs passes
            limits=self._limits(),
            from_turn=self.settings.from_turn,
        )

    def _limits(self) -> RunLimits | None:
        if not self.settings.limits:
            return None
        from ..agent.limits import RunLimits

        # Under the run directory: the controller and every xdist worker share this one file.
        return RunLimits(self.settings.limits, self.run_dir / "_shared" / "limits.sqlite")

    def _grader(self) -> Grader | None:
        rubrics = [a for a in self.case.assertions if a.kind == "judge"]
        if not rubrics or self.settings.attempt_mode == "deterministic":
            return None  # deterministic mode reports rubrics as skipped, never as passed
        from ..people.judge import make_grader

        golden = (
            self.case.journal().events
            if (self.case.journal_dir / "events.jsonl").is_file()
            else None
        )
        return make_grader(
            rubrics, self.settings.judge, golden, self.settings.judge_reuse, limits=self._limits()
        )

    def run(self, agent: Agent | None = None, *, inputs: list[str] | None = None) -> Observed:
        """Run the case once, with the reference engine or your own `agent` (see agent/adapter.py).

        Later calls return the same observation. A replay that diverged from the journal
        fails the test here, for YAML cases and own agents alike (and the report stays
        failed even if the test swallows that failure: see `report_payload.attach`).
        """
        agent, inputs = self._agent(agent, inputs)
        key = self.ref.attempt
        reusable = agent is None and self.world is None  # a test's own world must see its own run
        if self.observed is None and reusable and key in self.shared:
            shared = self.shared[key]
            self.observed, shared.checks_left = shared.observed, shared.checks_left - 1
            self.reused = True
            if shared.checks_left <= 0:
                del self.shared[key]
            self.journal_dir = self.observed.journal_dir
        if self.observed is None:
            reservation = None
            try:
                # Started in the pool (plugin/ahead.py), or run here.
                self.observed = self._take_ahead() if self.ahead else None
                if self.observed is None:  # inline, or cancelled in the pool before it started
                    reservation = self._reserve()
                    self.observed = self.execute(agent, inputs)
            except (NodevalError, OSError) as exc:
                self._stop(exc)
            finally:
                if reservation is not None and self.budget is not None:
                    self._settle(self.budget, reservation)
            if reusable and self.checks_here > 1:
                self.shared[key] = SharedObservation(self.observed, self.checks_here - 1)
        if self.observed.divergence:
            pytest.fail(printable(self.observed.divergence), pytrace=False)
        end = self.observed.end
        if end is not None and end.infra:  # a provider or key failed: nothing to judge
            self.infra_cause = str(end.reason)
            pytest.fail(
                printable(f"infrastructure error, not the agent's: {self.infra_cause}"),
                pytrace=False,
            )
        return self.observed

    def _settle(self, budget: Budget, reservation: Reservation) -> None:
        """Give the run's budget this attempt's cost; a budget file the disk has no room for
        stops the attempt as the machine's fault (shared_db.written), not the agent's."""
        try:
            budget.settle(reservation, self.paid_usd)
        except DiskFullError as exc:
            self._stop(exc)

    def _stop(self, exc: NodevalError | OSError) -> NoReturn:
        """Fail the test on what stopped the run, in one line. A disk with no room for the
        attempt's journal (or its config snapshot) is the machine's fault, not the agent's."""
        if not isinstance(exc, NodevalError):
            if not no_room(exc):
                raise exc
            exc = disk_full(exc, Path(exc.filename) if exc.filename else self.dir)
        if exc.infrastructure:
            self.infra_cause = str(exc)
        # from None: the message once, not again as "During handling of the above exception"
        raise pytest.fail.Exception(printable(str(exc)), pytrace=False) from None

    def not_recorded(self) -> tuple[str, str] | None:
        """Record modes `missing` and `none`: ("skip", why) for a case whose journal is
        current under `missing`, ("fail", why) for a case without a journal under `none`;
        None when the attempt runs (records, or replays under `none`)."""
        settings = self.settings
        if settings.mode != "record" or settings.record_mode == "all":
            return None
        if settings.record_mode == "missing":
            from ..case.digests import journal_staleness

            if journal_staleness(self.case.directory, self.case.row, self.case.dataset) is None:
                return "skip", "journal is current (--nodeval-record-mode=missing)"
            return None
        if (self.case.journal_dir / "events.jsonl").is_file():
            return None
        return "fail", (
            f"case '{self.case.id}' has no journal, and --nodeval-record-mode=none records "
            f"nothing: record it with --nodeval-record-mode=missing, or `nodeval record "
            f"{_rel(self.case.directory)}`"
        )

    def skip_if_current(self) -> None:
        """Skip this test before anything runs when record mode `missing` finds its journal
        current (a case without a journal under `none` fails in `run()`, as it would replay)."""
        stop = self.not_recorded()
        if stop is not None and stop[0] == "skip":
            pytest.skip(stop[1])

    def _reserve(self) -> Reservation | None:
        """Hold this attempt's estimated cost in the run's budget, or stop it as "not run
        (budget)"."""
        if self.budget is None:
            return None
        reservation = self.budget.reserve(self.case.id)
        if not reservation.allowed:
            from ..report.models import BUDGET_REASON

            self.budget_stop = f"{BUDGET_REASON}: {reservation.refusal()}"
            pytest.skip(self.budget_stop)
        return reservation

    @property
    def spend(self) -> Spend:
        """The observed calls' runner.cost.Spend: the agent's, the simulated user's and the
        judge's (computed once)."""
        if self._spend is None:
            from ..runner.cost import AttemptCost, Spend

            # The turns a --nodeval-from-turn attempt replayed cost nothing (live_events).
            self._spend = (
                self.observed.spend(self.settings.prices)
                if self.observed
                else Spend(AttemptCost(None), AttemptCost(None), AttemptCost(None))
            )
        return self._spend

    @property
    def paid_usd(self) -> float | None:
        """What the run paid for this attempt, for the budget: the user's and the judge's calls,
        and the agent's unless a replay served them; None when unknown or it never ran."""
        if self.observed is None:
            return None
        from ..modes import REPLAY_MODES

        return self.spend.paid_usd(self.settings.attempt_mode not in REPLAY_MODES)

    def execute(self, agent: Agent | None = None, inputs: list[str] | None = None) -> Observed:
        """Run the case once and return the observation; raises what the run raised.

        Thread-safe against other attempts: the pool calls it for attempts started ahead.
        """
        stop = self.not_recorded() if self.settings.record_mode == "none" else None
        if stop is not None:  # no journal to replay: one line saying how to record it
            raise NodevalError(stop[1])
        self._snapshot_config()
        self.journal_dir = self._claim_journal_dir()
        if agent is None:
            return run_case(
                self.case,
                self.attempt_settings,
                self.journal_dir,
                world=self.world,
                grade=self._grader(),
                fakes=self.fakes,
            )
        return run_agent_case(
            agent, self.case, self.attempt_settings, self.journal_dir, inputs, fakes=self.fakes
        )

    def _take_ahead(self) -> Observed | None:
        """The observation of the attempt started ahead, waiting for it; what it raised is raised
        here. None when the pool cancelled it before it started: its test then runs it."""
        from ..runner.pool import NotStarted

        future, self.ahead = self.ahead, None
        assert future is not None
        try:
            observed = future.result()
        except CancelledError:
            return None
        except NotStarted as refused:  # the budget's start gate: "not run", in no rate
            self.budget_stop = refused.reason
            pytest.skip(refused.reason)
        self.journal_dir = observed.journal_dir
        return observed

    def _agent(
        self, agent: Agent | None, inputs: list[str] | None
    ) -> tuple[Agent | None, list[str] | None]:
        """The agent and inputs to run: the ones given, else those the marker declared."""
        if self.declared is None:
            return agent, inputs
        declared, declared_inputs = self.declared
        if agent is not None and agent is not declared:
            pytest.fail(
                f"case '{self.case.id}': this test's nodeval_case marker declares "
                f"agent={_name(declared)}, but run() was given {_name(agent)}; "
                "call run() without an agent, or declare that one",
                pytrace=False,
            )
        return declared, inputs if inputs is not None else declared_inputs

    @property
    def divergence(self) -> str | None:
        return self.observed.divergence if self.observed is not None else None

    @property
    def is_first_run(self) -> bool:
        """Whether this test ran the attempt's own session, the one its journal holds: not a
        check that took another test's run, nor one that ran it again beside the first (on
        another xdist worker, journaled under checks/). One trace per attempt comes from it."""
        return (
            self.observed is not None
            and not self.reused
            and self.journal_dir == self.dir / "journal"
        )

    def _claim_journal_dir(self) -> Path:
        journal = self.dir / "journal"
        try:
            journal.mkdir(parents=True)
            return journal
        except FileExistsError:
            safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in self.check_name)
            return self.dir / "checks" / safe / "journal"

    def _snapshot_config(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.case.config is not None:
            (self.dir / "config.json").write_text(self.case.config.model_dump_json(indent=2))

    def check(self) -> None:
        """Run, evaluate the case's assertions.yaml, and fail with an explanation if anything
        is off."""
        observed = self.run()
        self.results += evaluate_all(self.case.assertions, observed.evidence)
        problems = self.problems()
        if problems:
            pytest.fail(printable(self.explain(problems)), pytrace=False)

    def problems(self) -> list[str]:
        found = []
        observed = self.observed
        if observed is not None and observed.status not in ("ok",):
            found.append(
                f"the session ended with status '{observed.status}': {observed.metrics()['reason']}"
            )
        ending = (
            observed.end.user_ending if observed is not None and observed.end is not None else None
        )
        success = getattr(self.case.inputs.user, "success", None) if self.case.inputs else None
        if ending is not None and success is not None and ending not in success:
            found.append(
                f"the simulated user ended the conversation with '{ending}'; "
                f"endings that count as success: {', '.join(success)}"
            )
        found += [
            f"{r.description}\n    {r.message.replace(chr(10), chr(10) + '    ')}"
            for r in self.results
            if r.status == "failed"
        ]
        return found

    def first_problem(self) -> str | None:
        problems = self.problems()
        return cut_at_word(problems[0].splitlines()[0], REASON_CHARS) if problems else None

    def explain(self, problems: list[str]) -> str:
        header = f"case '{self.case.id}' (repeat {self.ref.repeat}, {self.settings.mode} mode"
        if self.settings.attempt_mode != self.settings.mode:
            header += f", replayed: --nodeval-record-mode={self.settings.record_mode}"
        header += "): "
        header += f"{len(problems)} problem(s)"
        journal = self.journal_dir
        return (
            header
            + "\n"
            + "\n".join(f"  x {p}" for p in problems)
            + f"\n  observed journal: {_rel(journal)}"
        )

    def record(
        self, outcome: str, reason: str | None, infra_cause: str | None = None
    ) -> AttemptRecord:
        metrics = self.observed.metrics() if self.observed else {}
        infra_cause = infra_cause or self.infra_cause
        infra = bool(metrics.get("infra")) or infra_cause is not None
        if infra_cause is not None:
            reason = cut_at_word(infra_cause.splitlines()[0], REASON_CHARS)
        if self.budget_stop is not None:
            outcome, reason = "not_run", self.budget_stop
        spend = self.spend
        cost = spend.agent
        return AttemptRecord(
            nodeid="",
            case_id=self.case.id,
            repeat=self.ref.repeat,
            outcome=outcome,  # type: ignore[arg-type]  # report_payload makes an infra failure an error
            infra_error=infra,
            reason=reason,
            divergence=self.divergence,
            divergence_seq=self.observed.divergence_seq if self.observed else None,
            live_from_turn=self.observed.live_from_turn if self.observed else None,
            status=metrics.get("status"),
            assertions=[AssertionRecord(**r.to_json()) for r in self.results],
            latency_ms=metrics.get("latency_ms"),
            wall_ms=metrics.get("wall_ms"),
            input_tokens=metrics.get("input_tokens", 0),
            output_tokens=metrics.get("output_tokens", 0),
            cache_read_tokens=cost.cache_read_tokens,
            cache_write_tokens=cost.cache_write_tokens,
            cost_usd=cost.cost_usd,
            cost_unpriced=list(cost.unpriced),
            user_cost_usd=spend.user.cost_usd,
            user_cost_unpriced=list(spend.user.unpriced),
            judge_cost_usd=spend.judge.cost_usd,
            judge_cost_unpriced=list(spend.judge.unpriced),
            total_cost_usd=spend.total_usd,
            turns=metrics.get("turns", 0),
            llm_calls=metrics.get("llm_calls", 0),
            tool_calls=metrics.get("tool_calls", 0),
            retries=metrics.get("retries", 0),
            journal=str(self.journal_dir.relative_to(self.run_dir)) if self.observed else None,
            world_backend=self.observed.world_backend if self.observed else None,
            worker=os.environ.get("PYTEST_XDIST_WORKER"),
            judged={
                c: str(v.get("verdict"))
                for c, v in (self.observed.judged if self.observed else {}).items()
            },
            user_ending=metrics.get("user_ending"),
        )

    @property
    def evidence(self) -> Evidence:
        """The observed events, for `expect()`; runs the attempt first if it has not run."""
        return self.run().evidence

    def activate(self) -> Token[list[AssertionResult] | None]:
        """While active, the results of `expect()` calls are listed in this attempt's report."""
        return collect_results(self.results)

    @staticmethod
    def deactivate(token: Token[list[AssertionResult] | None]) -> None:
        stop_collecting(token)


def new_attempt(item: pytest.Item, case: Case, settings: Settings, run_dir: Path) -> Attempt:
    """The attempt of a test: for its fixture, or to start ahead of it (plugin/ahead.py)."""
    ref = case_ref(item)
    assert ref is not None, f"{item.nodeid} is bound to no case, so it has no attempt"
    attempt = Attempt(case, ref, settings, run_dir, item.config.rootpath)
    attempt.shared = item.config.stash.setdefault(observed_key, {})
    if getattr(item, "execution_count", 1) > 1:  # a rerun (pytest-rerunfailures) is a new try
        attempt.shared.pop(ref.attempt, None)
    attempt.checks_here = checks_here(item.session).get(ref.attempt, 1)
    attempt.check_name = item.name
    marker = item.get_closest_marker("nodeval_case")
    if marker is not None and marker.kwargs.get("agent") is not None:
        attempt.declared = (marker.kwargs["agent"], marker.kwargs.get("inputs"))
    return attempt


def checks_here(session: pytest.Session) -> dict[tuple[str, int], int]:
    """Tests per attempt (`CaseRef.attempt`: case directory or row, repeat) collected here."""
    counts = session.config.stash.get(checks_key, None)
    if counts is None:
        counts = {}
        for item in session.items:
            ref = case_ref(item)
            if ref is not None:
                key = ref.attempt
                counts[key] = counts.get(key, 0) + 1
        session.config.stash[checks_key] = counts
    return counts


def _name(agent: Any) -> str:
    return getattr(agent, "__qualname__", None) or type(agent).__name__


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
