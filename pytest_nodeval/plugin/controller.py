"""The controller: collects attempt results, aggregates, decides the exit status, writes reports.

Registered only in the process that is not an xdist worker. Results arrive on TestReports
through `pytest_runtest_logreport`, the same hook with and without `-n`. The denominator
is what was collected: an attempt whose worker crashed is an infrastructure error, one the
run stopped before (-x, --sw, an interrupt) is "not run". Reruns (pytest-rerunfailures) are
tries of one attempt: the last try counts, and the record says how many came before it.
"""

from __future__ import annotations

import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..case import CASE_FILE
from .keys import (
    OTEL_PROBLEM,
    SELECTION_REFUSED,
    case_ref,
    otel_problem_key,
    run_id_key,
    settings_of,
    shard_key,
    worker_crashed,
)

if TYPE_CHECKING:  # the models load only once a run has cases (a suite without any never pays)
    from ..report.models import AttemptRecord, CaseMeta, RunReport
    from ..stats.gate_models import Diff

_SEVERITY = {"not_run": 0, "passed": 0, "skipped": 1, "failed": 2, "error": 3}


class Controller:
    """The run's one reporter, on the process that is not an xdist worker.

    It owns what the run adds up to: every test's `AttemptRecord` as its TestReport brings it
    (the same path with and without xdist), the attempts expected but never reported (counted
    as not run, or as infrastructure errors when a worker crashed), the journals a record run
    installs, report.json, summary.txt, report.html and the history row, the baseline gate's
    Diff, and the exit status. Workers never write; this object never runs an attempt.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = settings_of(config)
        self.run_id = config.stash[run_id_key]
        self.run_dir = self.settings.report_dir / self.run_id
        self.started_at, self._t0 = _now(), time.perf_counter()
        self.expected: dict[str, tuple[str, int]] = {}
        self.records: dict[str, AttemptRecord] = {}
        self.metas: dict[str, CaseMeta] = {}
        self.failed_nodeids: set[str] = set()
        self.reruns: dict[str, int] = {}
        self.report: RunReport | None = None
        self.report_path: Path | None = None
        self.html_path: Path | None = None
        self.problem: str | None = None
        self.no_room = False
        """A journal or report file found no room on its disk: the machine's fault (exit 7)."""
        self.cleaned: list[str] = []
        self.notes: list[str] = []
        self.diff: Diff | None = None
        self.shard: dict[str, Any] | None = None
        self.refused: str | None = None
        """A worker refused the command line's selection (keys.refuse_selection): the run
        ends with it as a usage error."""

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from .preflight import check_baseline

        check_baseline(self.settings.baseline, self.settings.baseline_from_cli)
        if self.settings.attempt_mode in ("live", "record") and self.settings.world in (
            "auto",
            "docker",
        ):
            self._clean_stale_worlds()

    def _clean_stale_worlds(self) -> None:
        """Containers a killed earlier run left behind go now (the Ryuk reaper may not exist)."""
        from ..world.docker import cleanup_stale, engine_problem

        if engine_problem() is None:
            try:
                self.cleaned = cleanup_stale(keep_run_id=self.run_id)
            except Exception as exc:  # cleanup must never stop a run
                self.problem = f"could not clean up stale world containers: {exc}"

    # -- what is expected ------------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.shard = self.config.stash.get(shard_key, None)
        for item in session.items:
            ref = case_ref(item)
            if ref is not None:
                self.expected[item.nodeid] = (ref.case_id, ref.repeat)
        if not self.expected and self.shard is None and not self._has_news():
            self._retire()

    def _has_news(self) -> bool:
        return bool(self.problem or self.cleaned or self.notes)

    def _retire(self) -> None:
        """A session without a nodeval test (this process collected them all: no xdist) has
        no report to write and no progress to show: the plugin steps out of every later hook,
        so a project's other tests pay nothing for it (issue 33)."""
        manager = self.config.pluginmanager
        progress = manager.get_plugin("nodeval-progress")
        if progress is not None:
            progress.close()
            manager.unregister(progress)
        manager.unregister(self)

    @pytest.hookimpl(optionalhook=True)  # only exists when pytest-xdist is active
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # The controller does not collect under xdist; case files are known from their ids.
        for nodeid in ids:
            parsed = parse_case_nodeid(nodeid)
            if parsed is not None:
                self.expected.setdefault(nodeid, parsed)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from .shard import WORKER_OUTPUT_KEY

        # Every worker computes the same shard plan; any one that finished hands it over.
        output = getattr(node, "workeroutput", {})
        plan = output.get(WORKER_OUTPUT_KEY)
        if plan is not None and self.shard is None:
            self.shard = plan
        self.refused = self.refused or output.get(SELECTION_REFUSED)
        self._otel_problem(output.get(OTEL_PROBLEM))

    def _otel_problem(self, problem: str | None) -> None:
        """Say once that the export failed, whichever processes it failed in."""
        if problem and not any(note.startswith("OpenTelemetry export") for note in self.notes):
            self.notes.append(problem)

    # -- what arrives ----------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome == "rerun":  # type: ignore[comparison-overlap]  # pytest-rerunfailures
            self._start_over(report.nodeid)
            return
        if report.failed:
            self.failed_nodeids.add(report.nodeid)
        if not hasattr(report, "nodeval") and report.nodeid not in self.expected:
            return  # not an attempt: plain tests cost nothing here
        from .report_payload import from_report

        meta, repeat, record = from_report(report)
        if meta is not None:
            self.metas[meta.id] = meta
            self.expected.setdefault(report.nodeid, (meta.id, repeat))
        if record is None and worker_crashed(report) and report.nodeid in self.expected:
            from ..report.models import AttemptRecord

            case_id, repeat = self.expected[report.nodeid]
            record = AttemptRecord(
                nodeid=report.nodeid,
                case_id=case_id,
                repeat=repeat,
                outcome="error",
                infra_error=True,
                reason=_crash_reason(report),
            )
        if record is not None:
            self._merge(record)

    def _start_over(self, nodeid: str) -> None:
        """A try that will be rerun: forget it; the next try's reports decide."""
        self.reruns[nodeid] = self.reruns.get(nodeid, 0) + 1
        self.records.pop(nodeid, None)
        self.failed_nodeids.discard(nodeid)

    def _merge(self, record: AttemptRecord) -> None:
        if record.nodeid in self.reruns:
            record = record.model_copy(update={"reruns": self.reruns[record.nodeid]})
        current = self.records.get(record.nodeid)
        if current is None or _SEVERITY[record.outcome] >= _SEVERITY[current.outcome]:
            if current is not None and record.outcome == "error" and current.outcome != "error":
                # A teardown error after a judged call keeps the call's measurements.
                record = current.model_copy(update={"outcome": "error", "reason": record.reason})
            self.records[record.nodeid] = record

    # -- the end -------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.refused is not None:  # as pytest says a UsageError, and no report
            sys.stderr.write(f"ERROR: {self.refused}\n")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        nothing = not self.expected and not self.records
        if self.config.option.collectonly or (nothing and self.shard is None):
            return  # nothing ran: no report (and no attempt counted as lost)
        if exitstatus == pytest.ExitCode.USAGE_ERROR:
            # A command line refused after collection (an unknown --nodeval-case): no run
            # happened, so no report and no history row of attempts counted as not run.
            return
        shard = self.shard
        if (
            nothing
            and shard is not None
            and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
        ):
            # More shards than the suite fills: this one's empty run is still a shard of the
            # whole, which nodeval merge needs (it refuses a missing shard).
            session.exitstatus = pytest.ExitCode.OK
            self.notes.append(
                f"shard {shard.get('index')}/{shard.get('total')}: no case was assigned "
                "to this shard; its empty run is written for nodeval merge"
            )
        self._otel_problem(self.config.stash.get(otel_problem_key, None))
        self._fill_missing()
        report = self._adaptive(self._build(int(session.exitstatus)))
        if self.settings.attempt_mode == "record":
            self._install_recordings(report)
        elif self.settings.mode == "record":
            self.notes.append(
                "--nodeval-record-mode=none: nothing was recorded; cases with a journal replayed it"
            )
        if self.settings.mode == "record" and self.settings.unused_repeat is not None:
            self.notes.append(
                f"record mode records each case once; repeat {self.settings.unused_repeat} "
                "is for the runs that replay or run live"
            )
        self._decide_exit_status(report, session)
        if self.settings.baseline is not None:
            self._gate(report, session)
        report.exit_status = int(session.exitstatus)
        self.report = report
        self._write(report)
        if self.settings.update_baseline:
            self._bless(report)
        if self.no_room and session.exitstatus == pytest.ExitCode.OK:
            from ..report.models import EXIT_INFRA_ERROR

            session.exitstatus = EXIT_INFRA_ERROR

    def _adaptive(self, report: RunReport) -> RunReport:
        """Each compared case's adaptive repeats: how many it took and why it stopped."""
        from .keys import adaptive_off_key

        if not self.settings.adaptive:
            return report
        if adaptive_off_key in self.config.stash:
            self.notes.append(
                f"--nodeval-adaptive is not in effect: {self.config.stash[adaptive_off_key]}"
            )
            return report
        from ..errors import NodevalError
        from ..report.adaptive import annotate, baseline_counts
        from ..report.baseline import load, policy_from

        assert self.settings.baseline is not None, (
            "adaptive repeats are in effect only with a baseline"
        )
        try:
            counts = baseline_counts(load(self.settings.baseline))
        except NodevalError:
            return report  # the gate says what is wrong with the baseline
        return annotate(report, counts, policy_from(self.settings.gate_policy))

    def _gate(self, report: RunReport, session: pytest.Session) -> None:
        """Compare with the baseline; a FAIL gives its own exit status when the tests passed."""
        from ..errors import NodevalError
        from ..report.baseline import EXIT_GATE_FAILED, compare, gate_section, load, policy_from

        path = self.settings.baseline
        assert path is not None
        if not path.exists() and not self.settings.baseline_from_cli:
            self.notes.append(
                f"no baseline yet at {_relative(path)} (nodeval_baseline); bless this run with "
                "--nodeval-update-baseline to start gating"
            )
            return
        try:
            baseline = load(path)
            diff = compare(baseline, report, policy_from(self.settings.gate_policy))
        except (NodevalError, TypeError, ValueError) as exc:
            self.problem = f"the baseline gate could not run: {exc}"
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        self.diff = diff
        report.gate = gate_section(diff, _relative(path))
        if diff.breached and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = EXIT_GATE_FAILED

    def _bless(self, report: RunReport) -> None:
        from ..errors import NodevalError
        from ..report.baseline import DEFAULT_BASELINE, save

        target = self.settings.baseline or self.config.rootpath / DEFAULT_BASELINE
        try:
            save(self.run_dir, target)
            self.notes.append(f"baseline updated: {_relative(target)} (review and commit it)")
        except (NodevalError, OSError) as exc:
            self.problem = f"--nodeval-update-baseline: {exc}"

    def _fill_missing(self) -> None:
        from ..report.models import AttemptRecord

        for nodeid, (case_id, repeat) in self.expected.items():
            if nodeid not in self.records:
                self.records[nodeid] = AttemptRecord(
                    nodeid=nodeid,
                    case_id=case_id,
                    repeat=repeat,
                    outcome="not_run",
                    reason=(
                        "not run: the run stopped before this attempt (-x, --sw or an interrupt)"
                    ),
                )

    def _build(self, pytest_exit: int) -> RunReport:
        from ..modes import REPLAY_MODES
        from ..report.aggregate import aggregate
        from ..report.models import RunReport, ShardRecord, summary_of
        from ..report.variants import with_variants

        cases, totals, suite = aggregate(self.records.values(), self.metas)
        duration_s = round(time.perf_counter() - self._t0, 3)
        # Replay spends nothing on the agent.
        totals.cost_recorded = self.settings.attempt_mode in REPLAY_MODES
        report = RunReport(
            run_id=self.run_id,
            started_at=self.started_at,
            finished_at=_now(),
            duration_s=duration_s,
            summary=summary_of(cases, suite, duration_s),
            mode=self.settings.mode,
            repeat=self.settings.repeat,
            profile=self.settings.profile,
            match=self.settings.match,
            world=self.settings.world,
            max_cost_usd=self.settings.max_cost,
            exit_status=pytest_exit,
            pytest_exit_status=pytest_exit,
            totals=totals,
            suite=suite,
            cases=cases,
            environment=_environment(self.config),
            gate_policy=dict(self.settings.gate_policy),
            shard=None if self.shard is None else ShardRecord.model_validate(self.shard),
            matrix=[variant.label for variant in self.settings.variants],
        )
        return with_variants(report, self.settings.gate_policy)

    def _install_recordings(self, report: RunReport) -> None:
        """A recording replaces a case's golden journal only when its attempt passed every check."""
        from ..journal.sameness import install_if_changed
        from ..journal.writer import install_journal

        for case in report.cases:
            for attempt in case.attempts:
                if attempt.journal is None or not case.directory:
                    continue
                target = golden_journal(self.config.rootpath / case.directory, case)
                if attempt.outcome != "passed" and not self.settings.record_force:
                    kept = "kept" if target.exists() else "not written"
                    self.notes.append(
                        f"{kept}: {_relative(target)} (the recording {attempt.outcome}; "
                        f"--nodeval-record-force installs it anyway)"
                    )
                    continue
                source = self.run_dir / attempt.journal
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)  # a first row or variant
                    change = install_if_changed(target, source, install_journal)
                    self.notes.append(
                        f"unchanged: {_relative(target)} (recorded the same again)"
                        if change is None  # not written again: no churn in git
                        else f"recorded: {_relative(target)} ({change}; {attempt.outcome}, "
                        f"from {attempt.journal})"
                    )
                except OSError as exc:
                    self._could_not_write(
                        exc, target, f"could not install the recording of {case.id} into {target}"
                    )

    def _decide_exit_status(self, report: RunReport, session: pytest.Session) -> None:
        """Failures a case tolerates do not fail the run; infrastructure errors get their own
        status."""
        from ..report.models import EXIT_INFRA_ERROR

        tolerated = {
            nodeid
            for c in report.cases
            if c.verdict == "tolerated"
            for a in c.attempts
            if a.outcome == "failed"
            for nodeid in a.checks
        }
        infra = {
            nodeid for c in report.cases for a in c.attempts if a.infra_error for nodeid in a.checks
        }
        if (
            session.exitstatus == pytest.ExitCode.TESTS_FAILED
            and self.failed_nodeids <= tolerated | infra
        ):
            session.exitstatus = (
                EXIT_INFRA_ERROR if self.failed_nodeids & infra else pytest.ExitCode.OK
            )
        elif session.exitstatus == pytest.ExitCode.OK and infra:
            session.exitstatus = EXIT_INFRA_ERROR

    def _write(self, report: RunReport) -> None:
        from ..journal.writer import write_atomic
        from ..report.models import write_report
        from ..report.terminal import summary_lines

        try:
            self.report_path = write_report(report, self.run_dir)
            summary = summary_lines(report, divergences=True)
            write_atomic(self.run_dir / "summary.txt", "\n".join(summary) + "\n")
            _point_latest(self.settings.report_dir, self.run_id)
        except OSError as exc:
            self._could_not_write(
                exc, self.run_dir, f"could not write the report under {self.run_dir}"
            )
        # A shard is part of a run: `nodeval merge` appends the whole one. Keeping shards out
        # also keeps the history every shard balances by the same until the merge.
        if self.settings.history is not None and self.shard is None:
            self._append_history(report, self.settings.history)
        if self.report_path is not None:
            self._write_html(report)
        self._write_summary_md(report)

    def _write_summary_md(self, report: RunReport) -> None:
        """--nodeval-summary-md, and GitHub's job summary when the run is a GitHub Actions step."""
        from ..report.summary_md import summary_targets, write_summary

        links = {"report.json": _relative(self.run_dir / "report.json")}
        if self.html_path is not None:
            links["report.html"] = _relative(self.html_path)
        for path, append in summary_targets(self.config.getoption("nodeval_summary_md")):
            try:
                write_summary(report, path, links, append=append)
            except OSError as exc:
                self._could_not_write(exc, path, f"could not write the Markdown summary {path}")

    def _append_history(self, report: RunReport, path: Path) -> None:
        import sqlite3

        from ..report.history import append

        try:
            append(path, report)
        except (OSError, sqlite3.Error) as exc:
            self._could_not_write(exc, path, f"could not append to the run history {path}")

    def _write_html(self, report: RunReport) -> None:
        from ..report.html import read_history, write_html

        history = read_history(self.settings.history, [c.id for c in report.cases])
        try:
            self.html_path = write_html(
                report, self.run_dir, rootdir=self.config.rootpath, history=history
            )
        except Exception as exc:
            # The page is a view of report.json, which is already written: a bug in it must
            # cost the page, never the run's summary and exit status (a full disk still does).
            path = self.run_dir / "report.html"
            self._could_not_write(exc, path, f"could not write {path}: {type(exc).__name__}")

    def _could_not_write(self, exc: BaseException, path: Path, what: str) -> None:
        """Say what could not be written and why, in one line. No room for it (a full disk)
        is the machine's fault: the line names the path and the room, and the exit is 7."""
        from ..errors import disk_full, no_room

        if no_room(exc):
            self.no_room = True
            self.problem = str(disk_full(exc, path))
        else:
            self.problem = f"{what}: {exc}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.report is None:
            return
        from ..report.terminal import summary_lines
        from ..text import printable

        terminalreporter.section("nodeval")
        if self.cleaned:
            terminalreporter.line(
                f"removed {len(self.cleaned)} world container(s) left by earlier runs"
            )
        for line in summary_lines(self.report, verbosity=self.config.get_verbosity()):
            terminalreporter.line(line)
        if self.diff is not None:
            from ..report.terminal import format_diff_table

            for line in format_diff_table(self.diff):
                terminalreporter.line(line, red=bool(self.diff.breached))
        for note in self.notes:
            terminalreporter.line(printable(f"nodeval: {note}"))
        if self.problem:
            terminalreporter.line(printable(f"nodeval: {self.problem}"), red=True)
        elif self.report_path is not None:
            html = f", {self.html_path.name}" if self.html_path is not None else ""
            terminalreporter.write_sep("-", f"nodeval report: {_relative(self.report_path)}{html}")


def golden_journal(directory: Path, case: Any) -> Path:
    """A case's journal: journal/, a dataset row's journal/<row>/, a variant's .../@<label>/
    (as `Case.journal_dir` says it, from what report.json keeps of the case)."""
    target = directory / "journal"
    scenario = case.id.removesuffix(f"@{case.variant}") if case.variant else case.id
    if case.dataset is not None:
        target /= scenario.removeprefix(case.dataset + "/")
    return target / f"@{case.variant}" if case.variant else target


def _crash_reason(report: pytest.TestReport) -> str:
    # xdist's crash report starts with the worker's platform line; the crash is said below it.
    lines = (report.longreprtext or "").splitlines()
    return next(
        (line.strip() for line in lines if "crashed" in line), "the worker running it crashed"
    )


def parse_case_nodeid(nodeid: str) -> tuple[str, int] | None:
    """('refund-flow', 2) from 'scenarios/refund-flow/case.yaml::test_scenario[refund-flow-r2]'."""
    path, sep, rest = nodeid.partition("::test_scenario[")
    if not sep or not path.endswith(CASE_FILE) or not rest.endswith("]"):
        return None
    param = rest[:-1]
    base, dash, number = param.rpartition("-r")
    if dash and number.isdigit() and base:
        return base, int(number)
    return param, 1


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _environment(config: pytest.Config) -> dict[str, str]:
    from .. import __version__

    workers = getattr(config.option, "numprocesses", None)
    return {
        "pytest_nodeval": __version__,
        "pytest": pytest.__version__,
        "python": platform.python_version(),
        "platform": sys.platform,
        "workers": str(workers or 0),
        **_git_commit(config.rootpath),
    }


def _git_commit(rootdir: Path) -> dict[str, str]:
    """{'git_commit': sha} when known: the CI's variable, else git itself; `nodeval merge`
    refuses shards of different commits."""
    import os
    import subprocess

    for variable in ("GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT"):
        if os.environ.get(variable):
            return {"git_commit": os.environ[variable]}
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=rootdir, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    sha = done.stdout.strip()
    return {"git_commit": sha} if done.returncode == 0 and sha else {}


def _point_latest(report_dir: Path, run_id: str) -> None:
    """`reports/latest` names the newest run (a symlink, replaced atomically)."""
    link = report_dir / "latest"
    tmp = report_dir / f".latest-{run_id}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_id)
        tmp.replace(link)
    except OSError:
        tmp.unlink(missing_ok=True)


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
