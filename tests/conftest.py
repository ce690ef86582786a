"""Shared helpers for the plugin's own tests."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# httpx2 maps httpcore2's exceptions through a table it fills once per process: if httpcore2
# were first imported inside an in-process run, pytester would drop it afterwards, and the
# next import's exception classes would not be in that table (a raw httpcore2.ConnectError
# escaping the web tool, in whichever test a worker ran next).
import httpcore2  # noqa: F401

# jinja2's exception classes must stay the ones a cached template raises (a dataset's rows).
import jinja2  # noqa: F401

# numpy refuses a second import in one process, and pytester would drop it between runs.
import numpy  # noqa: F401
import pytest

# The OpenTelemetry exporter sends through requests, which it imports at its first export: a
# second in-process run would find its connection pool in a dropped copy of urllib3.
import requests.adapters  # noqa: F401
import scipy.stats  # noqa: F401
import yaml

# Imported here, before pytester snapshots sys.modules, so in-process runs reuse them
# instead of re-importing (and rebuilding every pydantic model) on each run; for own agents,
# also so that @tool sees the same session contextvar as the run.
import pytest_nodeval.agent.adapter
import pytest_nodeval.agent.engine
import pytest_nodeval.plugin.controller
import pytest_nodeval.plugin.otel_sender
import pytest_nodeval.plugin.report_payload
import pytest_nodeval.report.aggregate  # noqa: F401

# langsmith (installed with the frameworks extra) registers a pytest plugin whose import takes
# ~2.5 s: every pytest process this suite starts would pay it. The runs here never use it.
PYTEST_ADDOPTS = "-p no:langsmith_plugin"
os.environ["PYTEST_ADDOPTS"] = PYTEST_ADDOPTS

pytest_plugins = ["pytester"]


def write_case(
    root: Path,
    case_id: str,
    *,
    script: list[dict[str, Any]],
    inputs: list[str],
    assertions: list[dict[str, Any]] | None = None,
    tools: list[str] | None = None,
    case: dict[str, Any] | None = None,
    answers: list[dict[str, Any]] | None = None,
    providers: list[dict[str, Any]] | None = None,
    record: bool = True,
    system_prompt: str = "You are a careful assistant.",
) -> Path:
    """A case directory driven by the mock provider; recorded unless record=False."""
    directory = root / case_id
    (directory / "input").mkdir(parents=True, exist_ok=True)
    _dump(
        directory / "case.yaml", {"id": case_id, "name": case_id.replace("-", " "), **(case or {})}
    )
    config = {
        "providers": providers or [{"name": "mock", "model": "mock-1", "script": script}],
        "system_prompt": system_prompt,
        "tools": tools if tools is not None else ["shell", "file", "ask_user"],
    }
    _dump(directory / "input" / "config.yaml", config)
    user: dict[str, Any] = {"kind": "scripted", "inputs": inputs}
    if answers:
        user["answers"] = answers
    _dump(directory / "input" / "inputs.yaml", {"user": user})
    # None: none on purpose (`[]`), as a case without assertions.yaml is an error.
    _dump(directory / "assertions.yaml", assertions if assertions is not None else [])
    if record:
        record_case(directory)
    return directory


def record_case(directory: Path) -> Any:
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    scratch = Path(tempfile.mkdtemp(prefix="nodeval-record-"))
    try:  # the recording is installed in the case: its observed journal is not needed after
        observed = run_case(
            load_case(directory),
            AttemptSettings(mode="record", world_backend="local"),
            scratch / "journal",
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert observed.status == "ok", observed.metrics()
    return observed


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Any attempt to open a network connection fails loudly (and is listed)."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise OSError("network access is blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield attempts


# The outer test process imported pytest_nodeval already, so inner runs cannot rewrite it.
PROJECT_INI = (
    "[pytest]\ntestpaths = scenarios\nfilterwarnings = ignore::pytest.PytestAssertRewriteWarning\n"
    # Inner runs do not use hypothesis; its summary hook re-imports half of it per run.
    "addopts = -p no:hypothesispytest\n"
)


@pytest.fixture
def block_network(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Call it to block every socket connection from then on (record first, then replay)."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise OSError("network access is blocked during replay")

    def block() -> list[Any]:
        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket.socket, "connect_ex", refuse)
        monkeypatch.setattr(socket, "getaddrinfo", refuse)
        return attempts

    return block


@pytest.fixture
def nodeval_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester directory laid out like a user's project (scenarios/ as the case root)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", PYTEST_ADDOPTS)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makeini(PROJECT_INI)
    (pytester.path / "scenarios").mkdir()
    return pytester


class _Artifacts:
    """Lists, at the end of the run, the files tests saved for people to look at (screenshots).

    Tests add them with `request.node.user_properties.append(("artifact", path))`; user
    properties travel on the TestReport, so this works under xdist as well.
    """

    def __init__(self) -> None:
        self.saved: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.saved += [
                (report.nodeid, str(value))
                for name, value in report.user_properties
                if name == "artifact"
            ]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.saved:
            terminalreporter.section("artifacts")
            for nodeid, path in sorted(self.saved):
                terminalreporter.line(f"{path}  ({nodeid})")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Artifacts(), "nodeval-test-artifacts")
