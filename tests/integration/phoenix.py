"""A real OpenTelemetry trace receiver for the tests: Arize Phoenix, served on loopback.

Phoenix lives in a virtualenv of its own, .venv/phoenix, built by `make test` from
tests/integration/phoenix-requirements.txt (it requires anthropic<2; the project pins 2).
The `phoenix` fixture starts `phoenix serve` from there on 127.0.0.1, with free ports, a
temporary working dir (its SQLite database included) and everything that would reach the
internet switched off; it yields a `PhoenixServer`. Spans are read back through Phoenix's own
Python client (arize-phoenix-client), run by that virtualenv's python, so what a test sees is
what Phoenix stored and serves, not what we sent.

Which project spans land in: the `openinference.project.name` resource attribute names it;
without one they go to "default" (an `x-project-name` header on the OTLP request wins over both).

What the client returns for a span (Phoenix 20.26.1, client 3.5.0; REST GET
/v1/projects/{project}/spans): a dict with `id` (Phoenix's own), `name`, `context` (`trace_id`
and `span_id`, lower-case hex), `parent_id` (hex, None on a root span), `span_kind`,
`start_time`, `end_time` (ISO 8601), `status_code` ("UNSET", "OK", "ERROR"), `status_message`,
`attributes` and `events` (each with `name`, `timestamp`, `attributes`). Attributes come back
flat, under the dotted keys they were sent with (`attributes["gen_ai.usage.input_tokens"] == 7`),
ints as ints. Phoenix adds the OpenInference attributes it derives from `gen_ai.*` ones, never
overriding any the span carries: `gen_ai.request.model` gives `llm.model_name`, the usage tokens
`llm.token_count.prompt`, `.completion` and `.total`. `span_kind` is `openinference.span.kind`
when the span has one (that attribute itself is not listed back), else derived from
`gen_ai.operation.name` (chat, text_completion, generate_content: LLM; embeddings: EMBEDDING;
execute_tool: TOOL; retrieval: RETRIEVER; invoke_agent, create_agent: AGENT), else "UNKNOWN".
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

PHOENIX_VENV = Path(__file__).resolve().parents[2] / ".venv" / "phoenix"
PHOENIX_PYTHON = PHOENIX_VENV / "bin" / "python"
PHOENIX_CLI = PHOENIX_VENV / "bin" / "phoenix"

# A start (importing the server, ~12 s of it, then creating the database and migrating it)
# took 17-25 s on 2 cores; more while the rest of the suite runs beside it.
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
LOG_TAIL_LINES = 40

# Reads every span of a project through arize-phoenix-client and prints them as JSON.
# Phoenix ingests OTLP in the background, so it waits (in its own process, no restart per
# poll) until at least `at_least` spans are there or the deadline passes. `phoenix` stands in
# as the bare namespace it is when only the client is installed: the server's
# phoenix/__init__.py, which importing phoenix.client would run, takes ~12 s to import.
_READ_SPANS = """
import importlib.util, json, sys, time, types

namespace = types.ModuleType("phoenix")
namespace.__path__ = list(importlib.util.find_spec("phoenix").submodule_search_locations)
sys.modules["phoenix"] = namespace

import httpx
from phoenix.client import Client

base_url, project = sys.argv[1], sys.argv[2]
at_least, timeout = int(sys.argv[3]), float(sys.argv[4])
deadline = time.monotonic() + timeout
client = Client(base_url=base_url)
while True:
    try:
        spans = client.spans.get_spans(project_identifier=project, limit=1_000_000)
    except httpx.HTTPStatusError as error:
        if error.response.status_code != 404:  # 404: no span has created the project yet
            raise
        spans = []
    if len(spans) >= at_least or time.monotonic() > deadline:
        break
    time.sleep(0.2)
json.dump(spans, sys.stdout)
"""


@dataclass
class PhoenixServer:
    """A running Phoenix: where to send OTLP/HTTP, and a way to read back what it stored."""

    base_url: str
    otlp_traces_url: str
    grpc_port: int
    log: Path

    def spans(
        self, project: str = "default", *, at_least: int = 0, timeout: float = 15.0
    ) -> list[dict[str, Any]]:
        """Every span of `project`, as the client returns them (none when it has no span).

        at_least: wait up to `timeout` seconds for that many (Phoenix stores spans a little
        after the OTLP request returns); fewer after that are returned as they are.
        """
        arguments = [self.base_url, project, str(at_least), str(timeout)]
        read = subprocess.run(
            [str(PHOENIX_PYTHON), "-c", _READ_SPANS, *arguments],
            capture_output=True,
            text=True,
            env=_clean_env(),
            timeout=timeout + 60,
        )
        if read.returncode != 0:
            raise AssertionError(f"reading spans through phoenix.client failed:\n{read.stderr}")
        spans: list[dict[str, Any]] = json.loads(read.stdout)
        return spans


def require_phoenix() -> None:
    if PHOENIX_CLI.is_file() and PHOENIX_PYTHON.is_file():
        return
    reason = (
        f"{PHOENIX_VENV} is missing: `make test` builds it "
        "(from tests/integration/phoenix-requirements.txt)"
    )
    if os.environ.get("CI"):
        pytest.fail(reason + " (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")  # Phoenix idles at ~15% of a core: only while its tests run
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    """Phoenix serving on 127.0.0.1 for the session, stopped at its end."""
    require_phoenix()
    working_dir = tmp_path_factory.mktemp("phoenix")
    port, grpc_port = _free_port(), _free_port()
    log = working_dir / "server.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [str(PHOENIX_CLI), "serve"],
            cwd=working_dir,
            env=_server_env(working_dir, port, grpc_port),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(process, base_url, log)
        yield PhoenixServer(base_url, f"{base_url}/v1/traces", grpc_port, log)
    finally:
        _stop(process)


def _server_env(working_dir: Path, port: int, grpc_port: int) -> dict[str, str]:
    return {
        **_clean_env(),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        # The gRPC collector cannot be switched off alone (only with read-only mode, which
        # refuses spans too): a free port of its own keeps it from clashing.
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(working_dir),
        # No analytics pixels, web fonts or sandbox binary download; no assistant or MCP
        # endpoint, which the tests never use.
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
        "PHOENIX_ENABLE_MCP_SERVER": "false",
    }


def _clean_env() -> dict[str, str]:
    """This process's environment less anything that would point Phoenix or its client
    (or OpenTelemetry inside them) elsewhere: another database, collector, key or project,
    or this project's modules on PYTHONPATH."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PHOENIX_", "OTEL_", "PYTHON"))
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_until_ready(process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    """Poll /readyz (it answers once the database is reachable) until 200."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _stop(process)
            pytest.fail(
                f"phoenix serve exited with {process.returncode} before it was ready; "
                f"its log ends:\n{_tail(log)}",
                pytrace=False,
            )
        try:
            if httpx2.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.2)
    _stop(process)
    pytest.fail(
        f"phoenix serve was not ready at {base_url} after {START_TIMEOUT:.0f} s; "
        f"its log ends:\n{_tail(log)}",
        pytrace=False,
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _tail(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    return "\n".join(lines[-LOG_TAIL_LINES:])
