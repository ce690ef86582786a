"""The engine's optional planning step (`plan: true` in input/config.yaml).

Before it acts on the first input, the model writes a numbered plan; the engine records it
(`plan.created`) and keeps it in the system prompt. At the end of the session it records
which steps were done (`plan.result`): a step tagged with one of the agent's tools
("2. [shell] read CHANGES.txt") is done when that tool was called after the steps before it
were; a step with no tool ([none], or no tag) cannot be checked from the journal and says
so (done: None). Both events are derived, so replay
computes them again from the served responses and the tool calls it observes.
"""

from __future__ import annotations

import re
from typing import Any

PLAN_INSTRUCTION = (
    "Before you act, write your plan: a numbered list of the steps you will take, one per "
    "line, each starting with the tool it uses in square brackets, or [none] (for example "
    "'1. [shell] list the files'). Reply with the plan only."
)
_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(.*\S)")
_TOOL_TAG = re.compile(r"^\[([^\]\s]+)\]")


def parse_plan(text: str) -> list[str]:
    """The plan's steps: its numbered or bulleted lines, else its non-empty lines."""
    lines = text.splitlines()
    items = [m.group(1) for line in lines if (m := _ITEM.match(line))]
    return items or [line.strip() for line in lines if line.strip()]


def with_plan(system: str, plan: str) -> str:
    return f"{system}\n\nYour plan (follow it):\n{plan}".lstrip()


def plan_result(steps: list[str], called: list[str], tools: list[str]) -> dict[str, Any]:
    """Which steps were done, from the tools called after the plan (in order)."""
    position, rows, followed = 0, [], True
    for step in steps:
        tool = _named_tool(step, tools)
        done = None
        if tool is not None:
            found = _index(called, tool, position)
            done = found is not None
            if found is not None:
                position = found + 1
            else:
                followed = False
        rows.append({"text": step, "tool": tool, "done": done})
    checkable = [r for r in rows if r["tool"] is not None]
    return {
        "steps": rows,
        "done": sum(1 for r in checkable if r["done"]),
        "checkable": len(checkable),
        "followed": followed and bool(checkable),
    }


def _named_tool(step: str, tools: list[str]) -> str | None:
    """The tool a step starts with in brackets ("[shell] list the files"), if the agent has it.

    Only the tag counts: tool names are common words ("file", "skill"), so a step's prose
    says nothing reliable about which tool it needs.
    """
    tag = _TOOL_TAG.match(step)
    return tag.group(1) if tag and tag.group(1) in tools else None


def _index(called: list[str], tool: str, start: int) -> int | None:
    for index in range(start, len(called)):
        if called[index] == tool:
            return index
    return None
