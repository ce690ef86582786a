"""`--nodeval-otel-endpoint`: each attempt sent as one OpenTelemetry trace as it ends.

Every process that runs tests (each xdist worker, or the one pytest process) sends its own
attempts through OTLP/HTTP. The test hands the attempt over and goes on: the spans are made
and sent by a thread of their own, so a replay does not wait for the network. A collector that
is down costs one export try; later attempts are dropped without trying, and the run ends with
one note naming the URL, its results counted as usual (docs/opentelemetry.md).

This module loads when pytest starts; plugin/otel_sender.py, and with it the OpenTelemetry
SDK, only when an endpoint is set.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

from .keys import OTEL_PROBLEM, otel_key, otel_problem_key

_TRACES_PATH = "/v1/traces"


def endpoint_of(config: pytest.Config) -> str | None:
    """The OTLP/HTTP traces URL the run sends to, or None: --nodeval-otel-endpoint, ini
    nodeval_otel_endpoint, else the OpenTelemetry environment variables."""
    given = config.getoption("nodeval_otel_endpoint") or config.getini("nodeval_otel_endpoint")
    if given:
        return traces_url(str(given), "--nodeval-otel-endpoint")
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return _checked(
            os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        )
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return traces_url(os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"], "OTEL_EXPORTER_OTLP_ENDPOINT")
    return None


def traces_url(base: str, where: str) -> str:
    """A collector's base URL (as OTEL_EXPORTER_OTLP_ENDPOINT gives it) with the traces path."""
    url = _checked(base, where).rstrip("/")
    return url if url.endswith(_TRACES_PATH) else url + _TRACES_PATH


def _checked(url: str, where: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise pytest.UsageError(
            f"{where}={url!r}: not an OTLP/HTTP URL; give one such as http://localhost:4318"
        )
    return url.strip()


def register(config: pytest.Config, url: str) -> None:
    """Start sending this process's attempts to `url`."""
    try:
        from .otel_sender import OtelSender

        sender = OtelSender(url, content=_content(config), run_id=_run_id(config))
    except ImportError as exc:
        raise pytest.UsageError(
            f"--nodeval-otel-endpoint needs the OpenTelemetry SDK ({exc.name} is missing): "
            "pip install 'pytest-nodeval[otel]'"
        ) from None
    config.stash[otel_key] = sender
    config.pluginmanager.register(_Flush(config), "nodeval-otel")


def _content(config: pytest.Config) -> bool:
    return bool(config.getoption("nodeval_otel_content") or config.getini("nodeval_otel_content"))


def _run_id(config: pytest.Config) -> str:
    from .keys import run_id_key

    return str(config.stash[run_id_key])


class _Flush:
    """Sends what is left when the session ends, before the controller writes its notes."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        # Around every other implementation: the controller (itself tryfirst) reads the result.
        problem = self.config.stash[otel_key].close()
        if problem:
            workeroutput = getattr(self.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput[OTEL_PROBLEM] = problem
            else:
                self.config.stash[otel_problem_key] = problem
        return (yield)
