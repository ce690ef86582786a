"""Helpers for the sampler and promote tests: mock-driven engine configs and samplers that close."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.agent.config import EngineConfig
from pytest_nodeval.sampler import Sampler, SamplerSettings

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"
API_KEY = "sk-ant-api03-" + "Zq7x" * 8
SECRETS = (EMAIL, CARD, API_KEY, "4111111111111111", "Zq7xZq7x")
SECRET_INPUT = f"Hi, I am {EMAIL}, card {CARD}, and my key is {API_KEY}."

ANSWERS = [{"text": "Done: your request is complete (ticket 5521)."}]
DISK_USAGE = [
    {"tool_calls": [{"name": "shell", "args": {"command": "echo 12M"}}]},
    {"text": "The workspace uses 12M in total."},
]


def mock_config(
    script: list[dict[str, Any]], *, tools: list[str] | None = None, **limits: Any
) -> EngineConfig:
    return EngineConfig.model_validate(
        {
            "providers": [{"name": "mock", "model": "mock-1", "script": script}],
            "system_prompt": "You are a careful support assistant.",
            "tools": tools or [],
            "limits": limits,
        }
    )


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


def assert_no_secret_in(path: Path) -> None:
    for file in files_under(path):
        data = file.read_bytes()
        leaked = [s for s in SECRETS if s.encode() in data]
        assert not leaked, f"{file} holds {leaked}"


@pytest.fixture
def make_sampler(tmp_path: Path) -> Iterator[Callable[..., Sampler]]:
    """Build active, enabled samplers writing under tmp_path (closed after the test)."""
    made: list[Sampler] = []

    def make(**settings: Any) -> Sampler:
        settings.setdefault("out_dir", tmp_path / "samples")
        sampler = Sampler(SamplerSettings(active=True, enabled=True, **settings))
        made.append(sampler)
        return sampler

    yield make
    for sampler in made:
        sampler.close(timeout=5)


@pytest.fixture
def sampler_warnings(caplog: pytest.LogCaptureFixture) -> Callable[[], list[logging.LogRecord]]:
    caplog.set_level(logging.INFO, logger="pytest_nodeval.sampler")

    def warnings() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "pytest_nodeval.sampler" and r.levelno >= logging.WARNING
        ]

    return warnings
