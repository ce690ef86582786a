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
import random
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
# A start whose port was taken after it was chosen is tried again with other ports.
START_ATTEMPTS = 3
PORT_TAKEN_SIGNS = ("Failed to bind to address", "address already in use")
PORT_TRIES = 50
PRIVATE_PORTS_FROM = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")

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
    for attempt in range(1, START_ATTEMPTS + 1):
        working_dir = tmp_path_factory.mktemp("phoenix")
        port = _free_port()
        grpc_port = _free_port(other_than=port)
        log = working_dir / "server.log"
        process = _start(working_dir, port, grpc_port, log)
        base_url = f"http://127.0.0.1:{port}"
        try:
            if _wait_until_ready(process, base_url, log, last_attempt=attempt == START_ATTEMPTS):
                yield PhoenixServer(base_url, f"{base_url}/v1/traces", grpc_port, log)
                return
        finally:
            _stop(process)


def _start(working_dir: Path, port: int, grpc_port: int, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as log_file:
        return subprocess.Popen(
            [str(PHOENIX_CLI), "serve"],
            cwd=working_dir,
            env=_server_env(working_dir, port, grpc_port),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )


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


def _free_port(other_than: int = 0) -> int:
    """A port no other socket holds (nor `other_than`, chosen but not bound yet), below the
    kernel's ephemeral range when it can be.

    Phoenix binds its gRPC collector on [::] (every address), so a port free on 127.0.0.1
    alone is not enough; and a port the kernel hands out (bind to port 0, or the local end of
    any outgoing connection, of which the suite makes thousands) can be taken again in the
    second before Phoenix binds it. A CI run failed that way once ("Failed to bind to address
    [::]:47707"); ports outside that range are never handed out.
    """
    first_ephemeral = _first_ephemeral_port()
    for _ in range(PORT_TRIES):
        port = random.randrange(PRIVATE_PORTS_FROM, first_ephemeral)
        if port != other_than and _bindable(port):
            return port
    while True:  # a crowded range: let the kernel choose
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            chosen: int = probe.getsockname()[1]
        if chosen != other_than:
            return chosen


def _first_ephemeral_port() -> int:
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default when the range cannot be read
    return max(low, PRIVATE_PORTS_FROM + 1)


def _bindable(port: int) -> bool:
    families = [(socket.AF_INET, "0.0.0.0")]
    if socket.has_ipv6:
        families.append((socket.AF_INET6, "::"))
    for family, address in families:
        with socket.socket(family) as probe:
            try:
                probe.bind((address, port))
            except OSError:
                return False
    return True


def _wait_until_ready(
    process: subprocess.Popen[bytes], base_url: str, log: Path, *, last_attempt: bool
) -> bool:
    """Poll /readyz (it answers once the database is reachable) until 200: True then.

    False when the server exited because one of its ports was taken and another attempt is
    left; a failure of the test for any other exit, or when it is not ready in time.
    """
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if _port_taken(log) and not last_attempt:
                return False
            pytest.fail(
                f"phoenix serve exited with {process.returncode} before it was ready; "
                f"its log ends:\n{_tail(log)}",
                pytrace=False,
            )
        try:
            if httpx2.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return True
        except httpx2.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(
        f"phoenix serve was not ready at {base_url} after {START_TIMEOUT:.0f} s; "
        f"its log ends:\n{_tail(log)}",
        pytrace=False,
    )


def _port_taken(log: Path) -> bool:
    text = log.read_text(errors="replace")
    return any(sign in text for sign in PORT_TAKEN_SIGNS)


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
