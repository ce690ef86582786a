"""@tool beside the frameworks' decorators (agent/framework_tools.py), without the frameworks:
which arguments are a framework's context, what the journal records, and what it refuses."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml

from pytest_nodeval import tool
from pytest_nodeval.agent.framework_tools import is_context_value, unjournaled_params
from pytest_nodeval.case.directory import load_case
from pytest_nodeval.errors import NodevalError
from pytest_nodeval.runner.session import AttemptSettings, run_agent_case


class RunContext:  # named as Pydantic AI's is: recognised by name, never imported
    deps = "a connection"


class RunnableConfig(dict[str, Any]):
    pass


class InjectedToolCallId:
    pass


def test_context_parameters_are_told_by_annotation_or_name() -> None:
    def f(
        ctx: RunContext,
        text: str,
        config: RunnableConfig,
        call_id: Annotated[str, InjectedToolCallId],
        run_manager: Any = None,
    ) -> None: ...

    def g(ctx: "RunContext[None]", text: "str") -> None: ...  # noqa: UP037  (as text)

    assert unjournaled_params(inspect.signature(f)) == {"ctx", "config", "call_id", "run_manager"}
    assert unjournaled_params(inspect.signature(g)) == {"ctx"}
    assert is_context_value(RunContext()) and not is_context_value({"a": 1})


def test_tool_keeps_what_frameworks_read_from_the_function() -> None:
    def save_note(ctx: RunContext, text: str, tags: list[str] | None = None) -> str:
        """Save a note for the user."""
        return text

    wrapped = tool(save_note)
    assert wrapped.__name__ == "save_note"
    assert wrapped.__doc__ == "Save a note for the user."
    assert inspect.signature(wrapped) == inspect.signature(save_note)
    assert wrapped.__annotations__ == save_note.__annotations__


def test_an_object_that_is_no_tool_is_refused_with_what_to_do() -> None:
    class Thing:
        name = "thing"

    with pytest.raises(NodevalError, match="@tool was given a Thing.*put @tool directly"):
        tool(Thing())


class Conn:
    """Something the journal cannot store."""


RAN: list[str] = []


@tool
def save_note(ctx: RunContext, text: str, **options: Any) -> str:
    RAN.append(text)
    return f"saved {text} with {ctx.deps}"


@tool
def write(conn: Conn, text: str) -> str:
    return text


@tool(exclude=["conn"])
def write_excluded(conn: Conn, text: str) -> str:
    return text


def _case(root: Path) -> Path:
    (root / "input").mkdir(parents=True)
    (root / "case.yaml").write_text("id: tools\nneeds_model: false\n")
    (root / "assertions.yaml").write_text("[]\n")
    (root / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["go"]}})
    )
    return root


def test_context_arguments_are_passed_through_and_left_out_of_the_journal(
    tmp_path: Path,
) -> None:
    def agent(ctx: Any) -> None:
        for _ in ctx.inputs():
            ctx.output(save_note(RunContext(), "milk", urgent=True))

    case = load_case(_case(tmp_path / "case"))
    RAN.clear()
    live = run_agent_case(agent, case, AttemptSettings(mode="record"), tmp_path / "rec")
    calls = [e.payload.args for e in live.events if e.type == "tool.call"]
    assert calls == [{"text": "milk", "urgent": True}]  # **options are parameters too
    assert live.output == "saved milk with a connection"
    replay = run_agent_case(agent, case, AttemptSettings(mode="deterministic"), tmp_path / "rep")
    assert replay.divergence is None and RAN == ["milk"]
    assert replay.output == "saved milk with a connection"


def test_an_argument_the_journal_cannot_store_is_named_with_the_fix(tmp_path: Path) -> None:
    def agent(ctx: Any) -> None:
        for _ in ctx.inputs():
            ctx.output(write(Conn(), "x"))

    case = load_case(_case(tmp_path / "case"))
    observed = run_agent_case(agent, case, AttemptSettings(mode="record"), tmp_path / "rec")
    reason = observed.metrics()["reason"]
    assert "the argument 'conn' of tool 'write' is a Conn" in reason
    assert "@tool(exclude=['conn'])" in reason

    def excluded(ctx: Any) -> None:
        for _ in ctx.inputs():
            ctx.output(write_excluded(Conn(), "x"))

    fine = run_agent_case(excluded, case, AttemptSettings(mode="record"), tmp_path / "rec2")
    assert fine.status == "ok", fine.metrics()
    assert [e.payload.args for e in fine.events if e.type == "tool.call"] == [{"text": "x"}]
