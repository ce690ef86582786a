"""@tool for a user's own agent: live calls are journaled (results and raised errors), replay
serves them without running the function, sync and async alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pytest_nodeval import AgentContext, ToolFailed, tool
from pytest_nodeval.case.directory import load_case
from pytest_nodeval.runner.session import AttemptSettings, run_agent_case

RAN: list[str] = []


@tool
def charge(order_id: str, cents: int = 100) -> dict[str, Any]:
    RAN.append(f"charge {order_id}")
    if order_id == "bad":
        raise ValueError("card declined")
    return {"order_id": order_id, "charged": cents}


@tool
async def notify(message: str) -> str:
    RAN.append(f"notify {message}")
    return f"sent: {message}"


def agent(ctx: AgentContext) -> None:
    for text in ctx.inputs():
        first = charge(text)
        try:
            charge("bad")
        except (ValueError, ToolFailed) as exc:
            ctx.output(f"{first['charged']} charged; second failed: {exc}")


async def async_agent(ctx: AgentContext) -> str:
    return await notify("done")


def _case(root: Path) -> Path:
    (root / "input").mkdir(parents=True)
    (root / "case.yaml").write_text("id: tools-case\nneeds_model: false\n")
    (root / "assertions.yaml").write_text("[]\n")  # none on purpose: the tests check it
    (root / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["A-1"]}})
    )
    return root


def test_a_failing_local_tool_is_journaled_and_replayed_without_running(tmp_path: Path) -> None:
    case_dir = _case(tmp_path / "case")
    RAN.clear()
    live = run_agent_case(
        agent, load_case(case_dir), AttemptSettings(mode="record"), tmp_path / "rec"
    )
    results = [e.payload for e in live.events if e.type == "tool.result"]
    assert [(r.ok, r.error) for r in results] == [
        (True, None),
        (False, "ValueError: card declined"),
    ]
    assert results[0].result == {"order_id": "A-1", "charged": 100}
    assert RAN == ["charge A-1", "charge bad"]
    RAN.clear()
    replay = run_agent_case(
        agent, load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "rep"
    )
    assert RAN == [] and replay.divergence is None
    assert live.output == "100 charged; second failed: card declined"
    # Replay cannot rebuild the original exception: it raises ToolFailed with the recorded error.
    assert replay.output == "100 charged; second failed: ValueError: card declined"


def test_an_async_tool_is_journaled_and_replayed(tmp_path: Path) -> None:
    case_dir = _case(tmp_path / "case")
    RAN.clear()
    live = run_agent_case(
        async_agent, load_case(case_dir), AttemptSettings(mode="record"), tmp_path / "rec"
    )
    assert live.output == "sent: done" and RAN == ["notify done"]
    RAN.clear()
    replay = run_agent_case(
        async_agent, load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "rep"
    )
    assert replay.output == "sent: done" and RAN == []


def test_outside_a_session_the_tool_just_runs() -> None:
    RAN.clear()
    assert charge("X", cents=5) == {"order_id": "X", "charged": 5}
    assert RAN == ["charge X"]
