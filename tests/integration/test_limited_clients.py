"""Every kind of client goes through the run's limiter: async own agents and the reference engine.

Counted by fakes.llm (`max_in_flight`); each test also runs without the limit, to show the
count would have been higher.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval import AgentContext
from pytest_nodeval.agent.limits import LimitRule, RunLimits
from pytest_nodeval.case.directory import load_case
from pytest_nodeval.runner.session import (
    AttemptSettings,
    Observed,
    run_agent_case,
    run_case,
)
from pytest_nodeval_fakes.llm import LLMFake

SLOW = {
    "rules": [
        {
            "respond": {
                "text": "ok",
                "delay_s": 0.3,
                "usage": {"input_tokens": 3, "output_tokens": 1},
            }
        }
    ]
}


def _inputs(directory: Path, case_id: str) -> Path:
    (directory / "input").mkdir(parents=True)
    (directory / "case.yaml").write_text(f"id: {case_id}\n")
    (directory / "assertions.yaml").write_text("[]\n")  # this test checks the observation itself
    (directory / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["hi"]}})
    )
    return directory


def _async_fan_out(url: str) -> Any:
    async def agent(ctx: AgentContext) -> None:
        client = ctx.async_anthropic(base_url=url, api_key="sk-test")
        for text in ctx.inputs():
            replies = await asyncio.gather(
                *[
                    client.messages.create(
                        model="claude-sonnet-4-6",
                        max_tokens=8,
                        messages=[{"role": "user", "content": f"{text} {i}"}],
                    )
                    for i in range(6)
                ]
            )
            ctx.output(" ".join(r.content[0].text for r in replies))
        await client.close()

    return agent


@pytest.mark.parametrize("limited", [True, False], ids=["limited", "unlimited"])
def test_an_async_agents_concurrent_calls_wait_for_places(limited: bool, tmp_path: Path) -> None:
    limits = (
        RunLimits((LimitRule("anthropic", inflight=2),), tmp_path / "limits.sqlite")
        if limited
        else None
    )
    case = load_case(_inputs(tmp_path / "fan", "fan"))
    with LLMFake(SLOW) as fake:
        observed = run_agent_case(
            _async_fan_out(fake.url),
            case,
            AttemptSettings(mode="live", limits=limits),
            tmp_path / "out",
        )
    assert observed.status == "ok" and (observed.output or "").count("ok") == 6
    if limited:
        assert 1 < fake.max_in_flight <= 2
    else:
        assert fake.max_in_flight > 2


def _engine_case(directory: Path) -> Path:
    _inputs(directory, directory.name)
    config = {
        "providers": [{"name": "anthropic", "model": "claude-sonnet-4-6", "base_url": "fake"}],
        "system_prompt": "Be brief.",
        "tools": [],
    }
    (directory / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    return directory


@pytest.mark.parametrize("limited", [True, False], ids=["limited", "unlimited"])
def test_reference_engine_sessions_share_the_limit(limited: bool, tmp_path: Path) -> None:
    # Three engine sessions at once (as a concurrency pool or three workers would run them),
    # all answered by one fake: a model line's inflight=1 lets one call through at a time.
    limits = (
        RunLimits((LimitRule("anthropic", "claude-*", inflight=1),), tmp_path / "limits.sqlite")
        if limited
        else None
    )
    cases = [load_case(_engine_case(tmp_path / f"case-{i}")) for i in range(3)]
    results: list[Observed] = []
    start = threading.Barrier(3)
    with LLMFake(SLOW) as fake:

        def run(i: int) -> None:
            start.wait()
            results.append(
                run_case(
                    cases[i],
                    AttemptSettings(mode="live", limits=limits),
                    tmp_path / f"out-{i}",
                    fakes={"llm": fake},
                )
            )

        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [r.status for r in results] == ["ok"] * 3
    assert fake.max_in_flight == 1 if limited else fake.max_in_flight > 1
