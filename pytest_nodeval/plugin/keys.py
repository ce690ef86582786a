"""Names the pytest layer shares: stash keys and the gate's ini keys.

Imports nothing of the package at load time, so the entry module, the fixtures, the
settings and the controller can share these without importing one another.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import pytest

# Annotated rather than subscripted (StashKey[T]()), so loading this module builds no
# typing objects: it is imported by every pytest run.
if TYPE_CHECKING:
    from pathlib import Path

    from ..case.directory import Case
    from .attempt import Attempt, SharedObservation
    from .collect import CaseRef
    from .otel_sender import OtelSender
    from .own_cases import BoundRun
    from .settings import Settings

resolved_key: pytest.StashKey[dict[str, Any]] = pytest.StashKey()
"""config.stash: the run's settings, resolved and checked once per process in pytest_configure
(resolve.py), as the keyword arguments of `settings.Settings`."""
settings_key: pytest.StashKey[Settings] = pytest.StashKey()
"""config.stash: the run's Settings, made when first needed: read them with `settings_of`."""
bound_key: pytest.StashKey[BoundRun] = pytest.StashKey()
"""config.stash: the own agents' cases given by directory, whose bound tests run (own_cases.py)."""
run_id_key: pytest.StashKey[str] = pytest.StashKey()
"""config.stash: the run id (the controller's, handed to every xdist worker)."""
cases_key: pytest.StashKey[dict[str, Case]] = pytest.StashKey()
"""config.stash: recently loaded cases by directory (a `RecentCases`): a case's repeats and
checks run close together, so each case is read about once per process."""
case_index_key: pytest.StashKey[dict[str, Path]] = pytest.StashKey()
"""config.stash: case id -> directory under the case roots, for Python scenarios."""
attempt_key: pytest.StashKey[Attempt] = pytest.StashKey()
"""item.stash: the test's attempt, read when its TestReport is made."""
ahead_key: pytest.StashKey[Attempt] = pytest.StashKey()
"""item.stash: the test's attempt, started in the pool before the test (plugin/ahead.py)."""
observed_key: pytest.StashKey[dict[tuple[str, int], SharedObservation]] = pytest.StashKey()
"""config.stash: reference-engine sessions by (case directory, repeat) that more tests of the
same attempt will check, with how many: a process runs each attempt once."""
checks_key: pytest.StashKey[dict[tuple[str, int], int]] = pytest.StashKey()
"""config.stash: how many collected tests check each (case directory, repeat) here."""
infra_key: pytest.StashKey[str] = pytest.StashKey()
"""item.stash: why a fixture (a world, a fake) could not start, when the machine is to blame."""
budget_key: pytest.StashKey[Any] = pytest.StashKey()
"""config.stash: the run's runner.budget.Budget (--nodeval-max-cost), made on first use."""
shard_key: pytest.StashKey[dict[str, Any]] = pytest.StashKey()
"""config.stash: this run's shard plan (--nodeval-shard) as JSON types, for report.json."""
fakes_key: pytest.StashKey[dict[str, Any]] = pytest.StashKey()
"""item.stash: the fakes a test's fixtures started, by kind; its attempt uses them."""
adaptive_off_key: pytest.StashKey[str] = pytest.StashKey()
"""config.stash: why adaptive repeats, though asked for, are not in effect in this run."""
otel_key: pytest.StashKey[OtelSender] = pytest.StashKey()
"""config.stash: this process's exporter of attempts (--nodeval-otel-endpoint), when one is set."""
otel_problem_key: pytest.StashKey[str] = pytest.StashKey()
"""config.stash: why this process's OpenTelemetry export failed (the controller says it)."""

GATE_INI_ALIASES = {"fail_on_latency_p95_drop": "fail_on_latency_p95_increase"}
"""Other names a gate ini key is known by -> the GatePolicy field it sets."""


def settings_of(config: pytest.Config) -> Settings:
    """The run's Settings. A run that collects no nodeval case does not need them, and never
    pays for creating their dataclass (issue 33): what it reads is in `resolved_key`."""
    settings = config.stash.get(settings_key, None)
    if settings is None:
        from .settings import Settings

        settings = config.stash[settings_key] = Settings(**config.stash[resolved_key])
    return settings


def case_roots(config: pytest.Config) -> tuple[Path, ...]:
    """The directories searched for cases (nodeval_cases), without making the Settings."""
    roots: tuple[Path, ...] = config.stash[resolved_key]["case_roots"]
    return roots


_root_texts_key: pytest.StashKey[tuple[tuple[str, str], ...]] = pytest.StashKey()


def under_case_roots(config: pytest.Config, path: Path) -> bool:
    """Whether `path` is a case root or inside one, as `path.is_relative_to(root)` answers
    (lexically, case-insensitively where the system is), compared as text: pytest asks this
    of every directory it collects, and `is_relative_to` builds paths to answer (issue 33)."""
    roots = config.stash.get(_root_texts_key, None)
    if roots is None:
        roots = config.stash[_root_texts_key] = tuple(
            (os.path.normcase(root), os.path.join(os.path.normcase(root), ""))
            for root in map(str, case_roots(config))
        )
    text = os.path.normcase(path)
    return any(text == root or text.startswith(inside) for root, inside in roots)


def case_ref(node: Any) -> CaseRef | None:
    """The node's CaseRef (which case, which repeat) when the plugin parametrized it, else None."""
    ref = getattr(getattr(node, "callspec", None), "params", {}).get("nodeval_case")
    return ref if hasattr(ref, "case_id") else None


def worker_crashed(report: pytest.TestReport) -> bool:
    """A report xdist made up for a test whose worker died while running it (its phase is "???",
    not setup, call or teardown)."""
    phase: str = report.when or ""
    return phase == "???"


class RecentCases(OrderedDict):  # type: ignore[type-arg]
    """The last `size` cases used, by directory: memory stays flat however many cases a run has."""

    def __init__(self, size: int = 64) -> None:
        super().__init__()
        self.size = size

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


PATH_OPTIONS = ("--nodeval-report-dir", "--nodeval-baseline", "--nodeval-summary-md")
"""Our options that take a path: given as a separate argument, pytest may take its value for a
test path when it chooses the rootdir (rootdir.py)."""

WORKER_RUN_ID = "nodeval_run_id"
"""The key of the run id in an xdist worker's `workerinput`."""

# The gate's thresholds as ini keys (nodeval_<name>); defaults: stats.gate_models.GatePolicy.
GATE_INI_KEYS = {
    "fail_on_score_drop": (
        "Suite pass-rate drop (absolute) that fails the gate when significant; 0 disables."
    ),
    "fail_on_scenario_drop": (
        "Per-case pass-rate drop (absolute) that fails the gate when significant; 0 disables."
    ),
    "fail_on_latency_p95_increase": (
        "Relative p95 latency increase that fails the gate: pooled p95 between live runs, "
        "each case's p95 between replays; 0 disables."
    ),
    "fail_on_latency_p95_drop": (
        "An older name of nodeval_fail_on_latency_p95_increase (an alias)."
    ),
    "latency_min_increase_ms": "Smallest absolute p95 increase (ms) worth failing on.",
    "latency_min_attempts": "Attempts per run below which the latency gate can only WARN.",
    "fail_on_token_increase": (
        "Relative increase in tokens per attempt that fails the gate; 0 disables."
    ),
    "fail_on_cost_increase": (
        "Relative increase in cost (USD) per attempt that fails the gate; 0 disables."
    ),
    "alpha": "False-alarm budget of a run, all gates together (split across the gates).",
    "fdr_level": (
        "Benjamini-Hochberg level that names slower cases in the latency detail; decides no FAIL."
    ),
    "bootstrap_iterations": "Bootstrap resamples for the latency, token and cost gates.",
    "bootstrap_seed": "Seed of those resamples, so verdicts reproduce.",
}


OTEL_PROBLEM = "nodeval_otel_problem"
"""workeroutput: why a worker's OpenTelemetry export failed (the controller says it once)."""
SELECTION_REFUSED = "nodeval_selection_refused"
"""workeroutput: why a worker's collection refused the command line (the controller says it)."""


def refuse_selection(config: pytest.Config, items: list[pytest.Item], message: str) -> None:
    """A command line whose selection is wrong (a case no test is bound to): a usage error.

    On an xdist worker a raised UsageError would crash the whole run (INTERNALERROR), so the
    worker runs nothing and hands the message over; the controller ends the run with it and
    exit status 4, as without xdist (controller.py)."""
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is None:
        raise pytest.UsageError(message)
    workeroutput[SELECTION_REFUSED] = message
    config.hook.pytest_deselected(items=list(items))
    items.clear()
