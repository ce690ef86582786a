"""This repository's seed scenarios: they replay green, and the fallback one also works live."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_nodeval.case.directory import load_case
from pytest_nodeval.runner.session import AttemptSettings, run_case

SCENARIOS = Path(__file__).parents[2] / "scenarios"
SEEDS = sorted(p.parent.name for p in SCENARIOS.glob("*/case.yaml"))


def test_there_are_five_seed_scenarios_tagged_pr() -> None:
    assert len(SEEDS) >= 5
    assert all("pr" in load_case(SCENARIOS / name).spec.tags for name in SEEDS)


@pytest.mark.parametrize("name", SEEDS)
def test_seed_scenario_replays_without_divergence(name: str, tmp_path: Path, no_network: list) -> None:
    observed = run_case(load_case(SCENARIOS / name), AttemptSettings(mode="deterministic"), tmp_path / "j")
    assert observed.divergence is None and observed.status == "ok"
    assert no_network == []


def test_the_fallback_path_live_against_the_llm_fake(tmp_path: Path) -> None:
    observed = run_case(load_case(SCENARIOS / "provider-fallback"), AttemptSettings(mode="live", seed=1), tmp_path / "j")
    assert observed.status == "ok", observed.metrics()
    fallbacks = [e.payload for e in observed.events if e.type == "provider.fallback"]
    assert [(f.from_provider, f.to_provider) for f in fallbacks] == [("anthropic", "openai")]
    assert "OverloadedError" in fallbacks[0].error
    assert observed.output == "Yes: every check is green."
