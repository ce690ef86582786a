"""pytest entry point of pytest-nodeval (the `pytest11` entry point `nodeval`).

Kept thin: options, ini keys, markers and the hooks, each delegating to a module of this
package that loads when first needed. Nothing heavy is imported here (no SDKs, pydantic
models, statsmodels or jinja2), and no module imports this one: the names the pytest
layer shares live in `keys.py`. The controller (aggregation, reports, gate) is registered
only where this process is not an xdist worker.
"""

from __future__ import annotations

import functools
import os
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from ..case import CASE_FILE
from ..provider_keys import provide_placeholders, withdraw_placeholders
from .keys import (
    GATE_INI_KEYS,
    PATH_OPTIONS,
    WORKER_RUN_ID,
    RecentCases,
    bound_key,
    case_ref,
    cases_key,
    refuse_selection,
    resolved_key,
    run_id_key,
    settings_of,
    shard_key,
    under_case_roots,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nodeval", "LLM agent evaluation (pytest-nodeval)")
    group.addoption(
        "--repeat",
        type=int,
        default=None,
        metavar="N",
        help="Attempts per case (overrides a case's own repeat). "
        "Default: ini nodeval_repeat, else 1.",
    )
    group.addoption(
        "--nodeval-mode",
        default=None,
        choices=("deterministic", "full", "live", "record"),
        help="deterministic: replay journals (default); full: replay and grade judge rubrics live; "
        "live: run providers and worlds for real; record: live, and rewrite each case's journal.",
    )
    group.addoption(
        "--nodeval-profile",
        default=None,
        metavar="NAME",
        help="Use the settings of a profile from nodeval_profiles "
        "(default: the profile named by -m).",
    )
    group.addoption(
        "--nodeval-report-dir",
        default=None,
        metavar="DIR",
        help="Where runs write reports/<run-id>/ "
        "(default: ini nodeval_report_dir, else 'reports').",
    )
    group.addoption(
        "--nodeval-match",
        default=None,
        choices=("default", "strict"),
        help="How strictly a replayed request must equal the recorded one.",
    )
    group.addoption(
        "--nodeval-world",
        default=None,
        choices=("auto", "docker", "bwrap", "local"),
        help="Backend of the isolated world in live and record modes (default: auto).",
    )
    group.addoption(
        "--nodeval-baseline",
        default=None,
        metavar="PATH",
        help="Compare this run with a baseline report.json (or run directory) and gate on it.",
    )
    group.addoption(
        "--nodeval-judge-reuse",
        action="store_true",
        default=False,
        help="In full mode, reuse a journaled judge verdict for an identical transcript.",
    )
    group.addoption(
        "--nodeval-update-baseline",
        action="store_true",
        default=False,
        help="After a complete run, write its report to the baseline path.",
    )
    group.addoption(
        "--nodeval-record-force",
        action="store_true",
        default=False,
        help="In record mode, replace a case's journal even when the attempt failed its checks "
        "(by default only a passing recording replaces the golden journal).",
    )
    group.addoption(
        "--nodeval-record-mode",
        default=None,
        choices=("all", "missing", "none"),
        help="With --nodeval-mode record, which cases record: all (default); missing: those "
        "without a journal or whose files changed since it was recorded (the rest are skipped); "
        "none: nothing records, cases with a journal replay and cases without one fail. "
        "Default: ini nodeval_record_mode, else all.",
    )
    group.addoption(
        "--nodeval-from-turn",
        type=int,
        default=None,
        metavar="N",
        help="With --nodeval-mode live or record: replay user turns 1..N-1 from each case's "
        "journal (answers included, requests not compared), then run turn N onward live. "
        "Default: ini nodeval_from_turn, else off.",
    )
    group.addoption(
        "--nodeval-case",
        action="append",
        default=[],
        metavar="ID",
        help="Run only the tests bound to this case (repeatable): its YAML test and the Python "
        "tests marked nodeval_case(ID); other tests are deselected.",
    )
    group.addoption(
        "--nodeval-progress",
        default=None,
        choices=("auto", "tty", "plain", "off"),
        help="Progress of the run's attempts: auto (default: a live line on a terminal, "
        "a plain line every nodeval_progress_interval seconds otherwise), tty, plain or off.",
    )
    group.addoption(
        "--nodeval-adaptive",
        nargs="?",
        const="on",
        default=None,
        metavar="on|off",
        help="With a baseline, give each case more repeats only while its comparison is undecided, "
        "up to its repeat count; the rest are skipped (default: ini nodeval_adaptive, else off).",
    )
    group.addoption(
        "--nodeval-max-cost",
        default=None,
        metavar="USD",
        help="Stop starting attempts once the run's spend plus what is in flight would pass this "
        "many USD; the rest are 'not run (budget)'. Default: ini nodeval_max_cost, else no limit.",
    )
    group.addoption(
        "--nodeval-shard",
        default=None,
        metavar="K/N",
        help="Run shard K of N (1-based): every repeat and check of a case on one shard, "
        "balanced by the baseline's or the history's durations. "
        "'auto' reads CI_NODE_INDEX/CI_NODE_TOTAL "
        "or BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT. Join the runs with nodeval merge.",
    )
    group.addoption(
        "--nodeval-summary-md",
        default=None,
        metavar="PATH",
        help="Also write the run's summary as Markdown here (a CI job summary); when "
        "GITHUB_STEP_SUMMARY is set, it is appended to that file too.",
    )
    group.addoption(
        "--nodeval-matrix",
        action="append",
        default=[],
        metavar="KEY=A,B",
        help="Run every case once per variant (repeatable; the variants are the product): "
        "KEY is model, system_prompt (a file in the case's input/) or any {{ vars.KEY }} the "
        "case's files use. The first variant is the one the others are compared with.",
    )
    group.addoption(
        "--nodeval-otel-endpoint",
        default=None,
        metavar="URL",
        help="Send each attempt as an OpenTelemetry trace to this OTLP/HTTP collector "
        "(e.g. http://localhost:4318). Default: ini nodeval_otel_endpoint, else "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else none.",
    )
    group.addoption(
        "--nodeval-otel-content",
        action="store_true",
        default=False,
        help="Put message content, tool arguments and results in the exported traces "
        "(redacted as the journal is). Default: ini nodeval_otel_content, else off.",
    )
    group.addoption(
        "--nodeval-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="Attempts in flight per process (per xdist worker): live, record and full attempts "
        "run ahead of their tests in a pool. "
        "Default: ini nodeval_concurrency, else 1 (one at a time).",
    )
    parser.addini(
        "nodeval_cases",
        "Directories searched for case directories.",
        type="args",
        default=["scenarios"],
    )
    parser.addini("nodeval_repeat", "Default attempts per case.", default="")
    parser.addini("nodeval_mode", "Default mode: deterministic, full, live or record.", default="")
    parser.addini("nodeval_match", "Replay request matching: default or strict.", default="")
    parser.addini(
        "nodeval_record_mode",
        "Which cases record mode records: all, missing or none (see --nodeval-record-mode).",
        default="",
    )
    parser.addini(
        "nodeval_from_turn",
        "Live and record modes: replay turns before this one from the journal "
        "(see --nodeval-from-turn).",
        default="",
    )
    parser.addini("nodeval_world", "World backend: auto, docker, bwrap or local.", default="")
    parser.addini(
        "nodeval_adaptive",
        "Adaptive repeats against the baseline: on or off (default off).",
        default="",
    )
    parser.addini(
        "nodeval_concurrency",
        "Attempts in flight per process (see --nodeval-concurrency).",
        default="",
    )
    parser.addini(
        "nodeval_world_concurrency",
        "Of those, attempts holding a world at once (default 4).",
        default="",
    )
    parser.addini("nodeval_report_dir", "Directory for run reports.", default="reports")
    parser.addini("nodeval_baseline", "Baseline report.json for the gate.", default="")
    for name, help_text in GATE_INI_KEYS.items():
        parser.addini(f"nodeval_{name}", help_text, default="")
    parser.addini(
        "nodeval_judge",
        "Default judge model: '<anthropic|openai|gemini> <model> [base_url]'.",
        default="",
    )
    parser.addini(
        "nodeval_history",
        "SQLite file every run appends its summary to ('' disables).",
        default="reports/history.sqlite",
    )
    parser.addini("nodeval_progress", "Progress display: auto, tty, plain or off.", default="")
    parser.addini(
        "nodeval_progress_interval",
        "Seconds between plain progress lines (0: at every test event).",
        default="30",
    )
    parser.addini(
        "nodeval_prices",
        "Per-model prices in USD per million tokens, ahead of genai-prices: lines "
        "'model: input=3.00 output=15.00 cache_read=0.30 cache_write=3.75'.",
        type="linelist",
        default=[],
    )
    parser.addini(
        "nodeval_max_cost",
        "USD a run may spend before it stops starting attempts (--nodeval-max-cost).",
        default="",
    )
    parser.addini(
        "nodeval_matrix",
        "Variants every case runs in: lines 'KEY=A,B' (--nodeval-matrix overrides them).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "nodeval_otel_endpoint",
        "OTLP/HTTP collector that receives each attempt as a trace (--nodeval-otel-endpoint).",
        default="",
    )
    parser.addini(
        "nodeval_otel_content",
        "Put message content in the exported traces (--nodeval-otel-content).",
        type="bool",
        default=False,
    )
    parser.addini(
        "nodeval_profiles",
        "Settings per marker: lines 'name: mode=live repeat=10 adaptive=on'.",
        type="linelist",
        default=[],
    )
    parser.addini(
        "nodeval_max_journal_bytes",
        "Refuse a golden journal bigger than this many bytes (default 1 GiB: 1073741824).",
        default="",
    )
    parser.addini(
        "nodeval_limits",
        "Rate limits shared by every worker of a run: lines "
        "'provider[/model-glob]: rpm=N tpm=N inflight=N retries=N max_wait=S'.",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    from ..modes import attempt_mode
    from . import fixtures
    from .resolve import resolve

    # Registered here rather than through `pytest_plugins`, for which pytest reads every
    # installed distribution's entry points once more (about 20 M instructions a run).
    config.pluginmanager.register(fixtures, fixtures.__name__)
    if any(str(arg) in PATH_OPTIONS for arg in config.invocation_params.args):
        from .rootdir import check_rootdir  # only such an argument can have moved the rootdir

        check_rootdir(config)
    values = config.stash[resolved_key] = resolve(config)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:  # the controller writes; xdist workers get checked options
        from .preflight import check_options

        check_options(config)
    if config.getini("nodeval_max_journal_bytes"):  # read where journals are: every process
        from .preflight import limit_journals

        limit_journals(config)
    # Frameworks build their SDK clients when the agent is made, often at import: an unset key
    # gets a placeholder now, which never reaches a real provider (provider_keys.py).
    provide_placeholders()
    config.stash[cases_key] = RecentCases()
    config.stash[run_id_key] = workerinput[WORKER_RUN_ID] if workerinput else new_run_id()
    config.addinivalue_line(
        "markers", "nodeval_case(case_id): bind a Python scenario to a case directory."
    )
    names_cases = any(_names_a_case(config, arg) for arg in config.args)
    if names_cases:
        from . import own_cases

        own_cases.rewrite_arguments(config)
    if names_cases or config.option.markers or config.getini("nodeval_profiles"):
        from . import markers

        markers.register_markers(config)
        config.pluginmanager.register(markers, "nodeval-markers")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "nodeval-xdist")
    if values["concurrency"] > 1:
        from .ahead import RunAhead, runs_attempts_ahead

        if runs_attempts_ahead(settings_of(config)):
            config.pluginmanager.register(RunAhead(config), "nodeval-ahead")
    if workerinput is None:
        if _starts_at_once(config, attempt_mode(values["mode"], values["record_mode"])):
            _start_controller(config)
        else:
            config.pluginmanager.register(_StartWhenCollected(config), "nodeval-start")
    if values["adaptive"]:
        from .adaptive import register

        register(config)
    _export_otel(config)


def _names_a_case(config: pytest.Config, arg: str) -> bool:
    """Whether a command-line argument may name a case (own_cases.py and markers.py look
    closer): most runs name none, and then load neither module (issue 33)."""
    path = (config.invocation_params.dir / arg.partition("::")[0]).resolve()
    try:
        return path.name == CASE_FILE or (path / CASE_FILE).is_file()
    except OSError:  # a name too long for the file system: pytest says what is wrong with it
        return False


def _export_otel(config: pytest.Config) -> None:
    """Send attempts as traces when a collector is named (plugin/otel.py); nothing loads else."""
    named = (
        config.getoption("nodeval_otel_endpoint")
        or config.getini("nodeval_otel_endpoint")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    if not named:
        return
    from .otel import endpoint_of

    url = endpoint_of(config)
    if url is not None:
        from .otel import register

        register(config, url)


def _starts_at_once(config: pytest.Config, mode: str) -> bool:
    """Whether the controller must listen from the start: under xdist (this process collects
    nothing and hears of the tests from the workers), a shard (whose empty run is still
    written), and live or record runs (which clean up what a killed run left first)."""
    distributed = config.pluginmanager.hasplugin("xdist") and config.getvalue("dist") != "no"
    return distributed or bool(config.getoption("nodeval_shard")) or mode in ("live", "record")


def _start_controller(config: pytest.Config) -> tuple[Any, Any]:
    """Register the controller and, unless switched off, the progress line."""
    from .controller import Controller

    controller = Controller(config)
    config.pluginmanager.register(controller, "nodeval-controller")
    progress = None
    if settings_of(config).progress != "off":
        from .progress import Progress

        progress = Progress(config, controller.expected)
        config.pluginmanager.register(progress, "nodeval-progress")
    return controller, progress


class _StartWhenCollected:
    """Starts the controller once collection has found a nodeval test (issue 33).

    A project's session without any (its unit tests, in a project that also has cases) then
    never imports the controller, the progress line or the report models, and no hook of
    theirs runs per test: the installed plugin costs such a run its startup alone.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from .preflight import check_baseline

        values = self.config.stash[resolved_key]
        check_baseline(values["baseline"], values["baseline_from_cli"])

    def start(self, session: pytest.Session) -> None:
        controller, progress = _start_controller(self.config)
        # They join during the collection_finish call, which began without them: give them
        # what the session has passed already (its start was checked above).
        controller.pytest_collection_finish(session)
        if progress is not None:
            progress.pytest_sessionstart(session)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class _XdistHooks:
    """Hands the controller's run id to every worker, so all write into one run directory;
    with --nodeval-concurrency, sends each worker enough tests to keep its pool busy."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_RUN_ID] = node.config.stash[run_id_key]

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Adaptive repeats decide from a case's earlier repeats: all of them go to one worker.
        Otherwise, with --nodeval-concurrency, each worker gets chunks of N tests (schedule.py)."""
        settings = settings_of(config)
        if settings.adaptive:
            from .adaptive import make_scheduler

            return make_scheduler(config, log)
        if settings.concurrency < 2 or config.getvalue("dist") != "load":
            return None
        from .ahead import runs_attempts_ahead
        from .schedule import ChunkedLoadScheduling

        if not runs_attempts_ahead(settings):
            return None
        return ChunkedLoadScheduling(config, log, chunk=settings.concurrency)


def pytest_unconfigure(config: pytest.Config) -> None:
    withdraw_placeholders()
    if config.getini("nodeval_max_journal_bytes"):  # the next session in this process (pytester)
        from ..case.directory import JOURNALS, MAX_JOURNAL_BYTES

        JOURNALS.limit_bytes = MAX_JOURNAL_BYTES


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A case directory is collected as its case.yaml alone: pytest never walks input/ or
    journal/."""
    if not under_case_roots(parent.config, path) or not (path / CASE_FILE).is_file():
        return None
    return _case_dir_type().from_parent(parent, path=path)


@functools.cache
def _case_dir_type() -> type[pytest.Directory]:
    """`collect.CaseDir`, imported once (a run without cases does not load that module): an
    import statement in the hook costs a microsecond per case directory (issue 33)."""
    from .collect import CaseDir

    return CaseDir


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name != CASE_FILE:
        return None
    if not under_case_roots(parent.config, file_path):
        return None
    from .collect import CaseFile

    return CaseFile.from_parent(parent, path=file_path)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "nodeval_case" in metafunc.fixturenames:
        from .collect import parametrize_case

        parametrize_case(metafunc)


@pytest.hookimpl(trylast=True)  # after -k and -m: a shard splits what is selected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if bound_key in config.stash:
        from .own_cases import select_bound

        select_bound(config, items)
    _select_cases(config, items)
    _shard_items(config, items)
    if config.stash[resolved_key]["from_turn"] is not None:
        from .preflight import check_from_turn_cases

        check_from_turn_cases(config, items)


def _select_cases(config: pytest.Config, items: list[pytest.Item]) -> None:
    selected_ids = set(config.getoption("nodeval_case"))
    if not selected_ids:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    bound_ids: set[str] = set()
    for item in items:
        ref = case_ref(item)
        named = ref.names & selected_ids if ref else set()
        if named:
            kept.append(item)
            bound_ids |= named
        else:
            dropped.append(item)
    unbound = sorted(selected_ids - bound_ids)
    if unbound:
        refuse_selection(
            config,
            items,
            f"--nodeval-case: no test is bound to case {', '.join(map(repr, unbound))} among "
            "the collected tests (a case directory under nodeval_cases, or a test marked "
            "@pytest.mark.nodeval_case(ID))",
        )
        return
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _shard_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("nodeval_shard"):
        return
    from .shard import WORKER_OUTPUT_KEY, deselect

    plan = deselect(config, items)
    if plan is not None:
        config.stash[shard_key] = plan.to_json()
        workeroutput = getattr(config, "workeroutput", None)
        # The xdist controller does not collect: it reads the plan from here
        if workeroutput is not None:
            workeroutput[WORKER_OUTPUT_KEY] = plan.to_json()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Where collection found nodeval tests, results ride on their reports, and the controller
    (when it waited for them) starts; a session without any keeps none of it (issue 33)."""
    config = session.config
    starter = config.pluginmanager.get_plugin("nodeval-start")
    if starter is not None:
        config.pluginmanager.unregister(starter)
    if not any(case_ref(item) is not None for item in session.items):
        return
    config.pluginmanager.register(_ResultCarrier(), "nodeval-results")
    if starter is not None and not config.option.collectonly:
        starter.start(session)


class _ResultCarrier:
    """Puts each nodeval test's result on its TestReport (report_payload.py), on the process
    that runs it: the controller reads it there, with or without xdist."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        ref = case_ref(item)
        if ref is not None:
            from .report_payload import attach

            attach(report, item, ref)
        return report
