"""This repository's seed scenarios: they replay green, and pass their assertions live too."""

from __future__ import annotations

import json
import subprocess
import sys
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
def test_seed_scenario_replays_without_divergence(
    name: str, tmp_path: Path, no_network: list
) -> None:
    observed = run_case(
        load_case(SCENARIOS / name), AttemptSettings(mode="deterministic"), tmp_path / "j"
    )
    assert observed.divergence is None and observed.status == "ok"
    assert no_network == []


def test_the_fallback_path_live_against_the_llm_fake(tmp_path: Path) -> None:
    observed = run_case(
        load_case(SCENARIOS / "provider-fallback"),
        AttemptSettings(mode="live", seed=1),
        tmp_path / "j",
    )
    assert observed.status == "ok", observed.metrics()
    fallbacks = [e.payload for e in observed.events if e.type == "provider.fallback"]
    assert [(f.from_provider, f.to_provider) for f in fallbacks] == [("anthropic", "openai")]
    assert "OverloadedError" in fallbacks[0].error
    assert observed.output == "Yes: every check is green."


def test_the_release_profile_passes_every_seed_scenario_live(tmp_path: Path) -> None:
    """`pytest -m release` as a user runs it (live, against the fakes, concurrency from the
    profile), at 2 repeats: an assertion that only a replayed journal satisfies fails here."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "release",
        "--repeat",
        "2",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--nodeval-report-dir={tmp_path / 'reports'}",
        "-o",
        "nodeval_history=",
        "-p",
        "no:randomly",
    ]
    done = subprocess.run(
        command, cwd=SCENARIOS.parent, capture_output=True, text=True, timeout=600
    )
    report = json.loads((tmp_path / "reports" / "latest" / "report.json").read_text())
    outcomes = {
        (a["case_id"], a["repeat"]): a["outcome"]
        for case in report["cases"]
        for a in case["attempts"]
    }
    released = {name for name in SEEDS if "release" in load_case(SCENARIOS / name).spec.tags}
    assert {case for case, _ in outcomes} == released and len(released) >= 5
    assert set(outcomes.values()) == {"passed"}, done.stdout[-4000:]
    assert done.returncode == 0, done.stdout[-4000:]
