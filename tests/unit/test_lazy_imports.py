"""Loading the plugin loads nothing heavy: no SDK, pydantic model, jinja2 or numpy.

docs/architecture.md: "A pytest run loads the entry module, those two, and the fixtures and
collection modules [...]: no SDK, pydantic model, jinja2 or numpy. Everything else loads
when first used." Each check runs in a fresh interpreter, since this one has long imported
all of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PYTEST_ADDOPTS

# What a run that needs none of them must not pay for at startup.
HEAVY = (
    "anthropic",
    "openai",
    "google.genai",
    "httpx2",
    "mcp",
    "pydantic",
    "jinja2",
    "jsonschema",
    "numpy",
    "scipy",
    "statsmodels",
    "docker",
    "testcontainers",
    "yaml",
    # Only a run that exports (--nodeval-otel-endpoint, nodeval export-otel) loads the SDK.
    "opentelemetry",
    "google.protobuf",
)

# The plugin's own modules a run without cases, profiles or case arguments does without.
IDLE_UNUSED = (
    "pytest_nodeval.plugin.settings",
    "pytest_nodeval.plugin.own_cases",
    "pytest_nodeval.plugin.markers",
)

# Writes every module loaded by the end of the session (after every other plugin's hook).
RECORDING_CONFTEST = textwrap.dedent(
    """
    import json
    import sys

    import pytest


    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session):
        with open(session.config.rootpath / "modules.json", "w") as out:
            json.dump(sorted(sys.modules), out)
    """
)


def _env() -> dict[str, str]:
    """This environment without the pytest and nodeval settings of the run testing us."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NODEVAL_"))}


def _heavy(modules: list[str]) -> list[str]:
    return [name for name in HEAVY if name in modules]


def _ours(modules: list[str]) -> list[str]:
    """The package's modules that were loaded: where to look for the heavy import."""
    return [name for name in modules if name.startswith("pytest_nodeval")]


def test_importing_the_entry_module_loads_nothing_heavy(tmp_path: Path) -> None:
    code = "import json, sys\nimport pytest_nodeval.plugin\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    modules = json.loads(done.stdout)
    assert "pytest_nodeval.plugin" in modules
    assert _heavy(modules) == [], _ours(modules)


def _plain_project_run(tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    """pytest run in a project of one plain test and no case: (its output, the modules it
    had loaded by the end)."""
    (tmp_path / "conftest.py").write_text(RECORDING_CONFTEST)
    done = _pytest_on_one_plain_test(tmp_path, "", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads((tmp_path / "modules.json").read_text())


def _pytest_on_one_plain_test(
    tmp_path: Path, ini: str, *args: str
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    return subprocess.run(
        # langsmith's own plugin (the frameworks extra) imports httpx2 and pydantic: not ours.
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
        + PYTEST_ADDOPTS.split(),
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
    )


def test_a_collect_only_run_without_cases_loads_nothing_heavy(tmp_path: Path) -> None:
    out, modules = _plain_project_run(tmp_path, "--collect-only")
    assert "1 test collected" in out
    # The plugin came in through its pytest11 entry point, with the fixtures it registers.
    assert {"pytest_nodeval.plugin", "pytest_nodeval.plugin.fixtures"} <= set(modules)
    assert _heavy(modules) == [], _ours(modules)


def test_a_whole_run_without_cases_starts_no_controller_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """Issue 33: the plugin steps aside when collection finds no nodeval test. The controller,
    the progress line and the report models are never imported, and no report is written."""
    out, modules = _plain_project_run(tmp_path)
    assert "1 passed" in out
    assert _heavy(modules) == [], _ours(modules)
    started = {"pytest_nodeval.plugin.controller", "pytest_nodeval.plugin.progress"}
    assert not started & set(modules), _ours(modules)
    # Nor the Settings dataclass (checked values suffice), nor what only a run naming a case
    # directory or defining profiles needs.
    assert not set(IDLE_UNUSED) & set(modules), _ours(modules)
    assert not any(name.startswith("pytest_nodeval.report") for name in modules), _ours(modules)
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize(
    ("ini", "args", "said"),
    [
        ("", ["--repeat", "0"], "repeat from command line must be an integer from 1 to"),
        ("nodeval_progress_interval = soon", [], "must be a number of seconds >= 0, got 'soon'"),
    ],
)
def test_a_bad_option_is_refused_in_a_run_without_cases(
    tmp_path: Path, ini: str, args: list[str], said: str
) -> None:
    """The settings are checked in every run, though made only when a case needs them."""
    done = _pytest_on_one_plain_test(tmp_path, ini, *args)
    assert done.returncode == 4, done.stdout + done.stderr
    assert said in done.stderr
