"""Fixtures for the contract tests of `fakes/`: each test gets its own servers on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx2
import pytest


@pytest.fixture(autouse=True)
def no_leftover_server_threads() -> Iterator[None]:
    """Every fake a test starts must be stopped (and its thread joined) by the test's end."""
    before = {t.ident for t in threading.enumerate()}
    yield
    leftovers = [
        t.name
        for t in threading.enumerate()
        if t.ident not in before and t.name.startswith("fake-") and t.is_alive()
    ]
    assert not leftovers, f"server threads still running after the test: {leftovers}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "llm_script(script): the LLMScript the `llm` fixture serves")


@pytest.fixture
def http() -> Iterator[httpx2.Client]:
    """A plain-HTTP client for raw protocol checks (no TLS context: the fakes are http)."""
    with httpx2.Client(verify=False, timeout=5.0) as client:
        yield client
