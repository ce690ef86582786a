"""pytest entry point of pytest-nodeval.

Kept thin: options, ini keys, markers, collection of case directories and the hook
that puts each attempt's result on its TestReport. Nothing heavy is imported here (no
SDKs, pydantic models, statsmodels or jinja2); the concept modules load when used.
The controller (aggregation, reports, gate) is registered only where this process is
not an xdist worker.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .attempt import Attempt
    from .case import Case
    from .settings import Settings

pytest_plugins = ["pytest_nodeval.fixtures"]

settings_key = pytest.StashKey["Settings"]()
run_id_key = pytest.StashKey[str]()
cases_key = pytest.StashKey[dict[str, "Case"]]()
attempt_key = pytest.StashKey["Attempt"]()
case_index_key = pytest.StashKey[dict[str, Path]]()

CASE_FILE = "case.yaml"

# The gate's thresholds as ini keys (nodeval_<name>); documented defaults live in gate_models.GatePolicy.
GATE_INI_KEYS = {
    "fail_on_score_drop": "Suite pass-rate drop (absolute) that fails the gate when significant; 0 disables.",
    "fail_on_scenario_drop": "Per-case pass-rate drop (absolute) that fails the gate when significant; 0 disables.",
    "fail_on_latency_p95_increase": "Relative p95 latency increase per case that fails the gate; 0 disables.",
    "latency_min_increase_ms": "Smallest absolute p95 increase (ms) worth failing on.",
    "latency_min_attempts": "Attempts per run below which the latency gate can only WARN.",
    "fail_on_token_increase": "Relative increase in tokens per attempt that fails the gate; 0 disables.",
    "alpha": "Significance level of the gates' one-sided tests.",
    "fdr_level": "Benjamini-Hochberg false-discovery level across cases.",
    "bootstrap_iterations": "Bootstrap resamples for the latency and token gates.",
    "bootstrap_seed": "Seed of those resamples, so verdicts reproduce.",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nodeval", "LLM agent evaluation (pytest-nodeval)")
    group.addoption("--repeat", type=int, default=None, metavar="N",
                    help="Attempts per case (overrides a case's own repeat). Default: ini nodeval_repeat, else 1.")
    group.addoption("--nodeval-mode", default=None, choices=("deterministic", "full", "live", "record"),
                    help="deterministic: replay journals (default); full: replay and grade judge rubrics live; "
                         "live: run providers and worlds for real; record: live, and rewrite each case's journal.")
    group.addoption("--nodeval-profile", default=None, metavar="NAME",
                    help="Use the settings of a profile from nodeval_profiles (default: the profile named by -m).")
    group.addoption("--nodeval-report-dir", default=None, metavar="DIR",
                    help="Where runs write reports/<run-id>/ (default: ini nodeval_report_dir, else 'reports').")
    group.addoption("--nodeval-match", default=None, choices=("default", "strict"),
                    help="How strictly a replayed request must equal the recorded one.")
    group.addoption("--nodeval-world", default=None, choices=("auto", "docker", "bwrap", "local"),
                    help="Backend of the isolated world in live and record modes (default: auto).")
    group.addoption("--nodeval-baseline", default=None, metavar="PATH",
                    help="Compare this run with a baseline report.json (or run directory) and gate on it.")
    group.addoption("--nodeval-judge-reuse", action="store_true", default=False,
                    help="In full mode, reuse a journaled judge verdict for an identical transcript.")
    group.addoption("--nodeval-update-baseline", action="store_true", default=False,
                    help="After a complete run, write its report to the baseline path.")
    parser.addini("nodeval_cases", "Directories searched for case directories.", type="args", default=["scenarios"])
    parser.addini("nodeval_repeat", "Default attempts per case.", default="")
    parser.addini("nodeval_mode", "Default mode: deterministic, full, live or record.", default="")
    parser.addini("nodeval_match", "Replay request matching: default or strict.", default="")
    parser.addini("nodeval_world", "World backend: auto, docker, bwrap or local.", default="")
    parser.addini("nodeval_report_dir", "Directory for run reports.", default="reports")
    parser.addini("nodeval_baseline", "Baseline report.json for the gate.", default="")
    for name, help_text in GATE_INI_KEYS.items():
        parser.addini(f"nodeval_{name}", help_text, default="")
    parser.addini("nodeval_judge", "Default judge model: '<anthropic|openai> <model> [base_url]'.", default="")
    parser.addini("nodeval_history", "SQLite file every run appends its summary to ('' disables).",
                  default="reports/history.sqlite")
    parser.addini("nodeval_profiles", "Settings per marker: lines 'name: mode=live repeat=5'.", type="linelist",
                  default=[])


def pytest_configure(config: pytest.Config) -> None:
    from .settings import from_config

    config.stash[settings_key] = from_config(config)
    config.stash[cases_key] = {}
    workerinput = getattr(config, "workerinput", None)
    config.stash[run_id_key] = workerinput["nodeval_run_id"] if workerinput else new_run_id()
    config.addinivalue_line("markers", "nodeval_case(case_id): bind a Python scenario to a case directory.")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "nodeval-xdist")
    if workerinput is None:
        from .controller import Controller

        config.pluginmanager.register(Controller(config), "nodeval-controller")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class _XdistHooks:
    """Hands the controller's run id to every worker, so all write into one run directory."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["nodeval_run_id"] = node.config.stash[run_id_key]


class CaseFile(pytest.Module):
    """A case directory's case.yaml, collected as a module holding the shared `test_scenario`."""

    case: Case

    def _getobj(self) -> Any:
        from . import _scenario

        return _scenario

    def collect(self) -> Any:
        from .errors import NodevalError

        try:
            self.case = load_case_cached(self.config, self.path.parent)
            _warn_if_stale(self.case)
        except NodevalError as exc:
            raise self.CollectError(str(exc)) from None
        return super().collect()


def _warn_if_stale(case: Case) -> None:
    overdue = case.stale_by()
    if overdue is not None:
        import warnings

        from .errors import NodevalWarning

        warnings.warn(NodevalWarning(
            f"case '{case.id}' ({case.directory / CASE_FILE}): its journal is {overdue.days} day(s) past its "
            f"freshness window ({case.spec.freshness}); re-record it with `nodeval record {case.directory}`"))


def load_case_cached(config: pytest.Config, directory: Path) -> Case:
    from .case import load_case
    from .errors import CaseFormatError

    cases = config.stash[cases_key]
    key = str(directory)
    if key not in cases:
        case = load_case(directory)
        other = next((c for c in cases.values() if c.id == case.id), None)
        if other is not None:
            raise CaseFormatError(f"duplicate case id {case.id!r}: {other.directory / CASE_FILE} and "
                                  f"{directory / CASE_FILE}; case ids must be unique")
        for tag in case.spec.tags:
            config.addinivalue_line("markers", f"{tag}: cases tagged '{tag}' (pytest-nodeval)")
        cases[key] = case
    return cases[key]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name != CASE_FILE:
        return None
    roots = parent.config.stash[settings_key].case_roots
    if not any(file_path.is_relative_to(root) for root in roots):
        return None
    return CaseFile.from_parent(parent, path=file_path)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "nodeval_case" not in metafunc.fixturenames:
        return
    from .attempt import CaseRef

    case = _case_for(metafunc)
    settings = metafunc.config.stash[settings_key]
    marks = [getattr(pytest.mark, tag) for tag in case.spec.tags]
    refs = [CaseRef(case.id, str(case.directory), r) for r in range(1, settings.repeats_for(case.spec.repeat) + 1)]
    metafunc.parametrize("nodeval_case", [pytest.param(ref, id=ref.test_id, marks=marks) for ref in refs],
                         indirect=True)


def _case_for(metafunc: pytest.Metafunc) -> Case:
    parent = metafunc.definition.parent
    if isinstance(parent, CaseFile):
        return parent.case
    from .errors import NodevalError

    marker = metafunc.definition.get_closest_marker("nodeval_case")
    if marker is None or not marker.args:
        raise pytest.Collector.CollectError(
            f"{metafunc.definition.nodeid} uses nodeval_case but names no case; "
            "add @pytest.mark.nodeval_case('<case-id>')")
    case_id = marker.args[0]
    try:
        directory = _case_index(metafunc.config).get(case_id)
        if directory is not None:
            return load_case_cached(metafunc.config, directory)
    except NodevalError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    roots = ", ".join(str(r) for r in metafunc.config.stash[settings_key].case_roots)
    raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: no case with id {case_id!r} under {roots}")


def _case_index(config: pytest.Config) -> dict[str, Path]:
    """Case id -> directory for every case under the roots (built once, for Python scenarios)."""
    if case_index_key not in config.stash:
        from .case import find_case_dirs, read_case_id

        index: dict[str, Path] = {}
        for directory in find_case_dirs(list(config.stash[settings_key].case_roots)):
            index.setdefault(read_case_id(directory), directory)
        config.stash[case_index_key] = index
    return config.stash[case_index_key]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    ref = getattr(getattr(item, "callspec", None), "params", {}).get("nodeval_case")
    if ref is not None:
        from .wire import attach

        attach(report, item, ref)
    return report
