"""Helpers for the inspect-mode protocol tests: mock configs, the command, response checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.protocol.inspect_mode import EXIT_CODES, InspectResponse, status_for

CLI = (sys.executable, "-m", "pytest_nodeval.cli")
# Generous: the machine running the suite may be busy, and each run starts two interpreters.
COMMAND_TIMEOUT_S = 90

ANSWERS = [
    {"when": {"input_contains": "capital of France"}, "text": "Paris is the capital of France."},
    {"when": {"input_contains": "2 + 2"}, "text": "2 + 2 = 4."},
    {"text": "I do not know."},
]


def write_config(
    directory: Path,
    name: str = "config.yaml",
    *,
    script: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> Path:
    """An engine config driven by the keyless mock provider."""
    config = {
        "providers": [{"name": "mock", "model": "mock-1", "script": script or ANSWERS}],
        "system_prompt": "You answer briefly.",
        **extra,
    }
    path = directory / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def request_bytes(**fields: Any) -> bytes:
    return json.dumps({"schema": 1, **fields}).encode()


def run_command(
    stdin: bytes, *args: str, cwd: Path | None = None, timeout: float = COMMAND_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    # The local world: these tests look for the tools' processes on this machine.
    env = {**os.environ, "NODEVAL_WORLD": "local"}
    return subprocess.run(
        [*CLI, *(args or ("inspect-mode",))],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=timeout,
        env=env,
    )


def check_response(response: InspectResponse, exit_code: int) -> None:
    """What every response must satisfy, whatever the request was."""
    assert exit_code == response.exit_code
    assert exit_code in EXIT_CODES.values()
    code = response.error.code if response.error else None
    assert response.status == status_for(code)
    assert exit_code == EXIT_CODES[code or "ok"]
    wire = response.to_wire()
    assert wire.endswith(b"\n") and wire.count(b"\n") == 1
    assert InspectResponse.model_validate_json(wire) == response


def check_stdout(result: subprocess.CompletedProcess[bytes]) -> InspectResponse:
    """stdout is exactly one JSON document and a newline, and agrees with the exit status."""
    assert result.stdout.endswith(b"\n") and result.stdout.count(b"\n") == 1, result.stdout[:500]
    assert b"Traceback" not in result.stdout
    response = InspectResponse.model_validate_json(result.stdout)
    check_response(response, result.returncode)
    return response


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path)
