"""The reference engine's built-in tools: shell, file, code_exec (inside the World) and ask_user.

A tool with side effects is never run during replay: its recorded `tool.result` is
served instead. `ask_user` has none of its own; its answer comes from the simulated
user when live and from the journal's `io.ask.response` in replay.

Tools of outside services (Composio actions, MCP tools) are described by those services
when live; in replay they are `RecordedTool`s rebuilt from the journal's `tool.register`
events, so a replay neither imports their SDKs nor contacts anyone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from ..errors import NodevalError
from ..world import World
from .providers import ToolDef

OUTPUT_LIMIT = 16_384


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    ok: bool
    result: Any = None
    error: str | None = None
    extra: dict[str, Any] | None = None
    """Journal-only fields of the `tool.result` (e.g. the OAuth steps a call took); never shown to the model."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    world: World | None
    call_id: str
    timeout_s: float
    ask: Callable[[str, str], str]
    """ask(call_id, question) -> the user's answer."""


class Tool(Protocol):
    definition: ToolDef
    side_effects: bool
    source: str
    """"builtin", "composio" or "mcp:<server>"."""

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome: ...


REGISTER_FIELDS = ("tool", "description", "parameters", "side_effects", "source")


def register_payload(tool: Tool) -> dict[str, Any]:
    """The `tool.register` payload: the definition, plus what the tool adds (`register_extra`)."""
    extra = getattr(tool, "register_extra", None) or {}
    return {**extra, "tool": tool.definition.name, "description": tool.definition.description,
            "parameters": tool.definition.parameters, "side_effects": tool.side_effects, "source": tool.source}


class RecordedTool:
    """A tool as a journal registered it: what replay offers the model instead of asking a service.

    It is side-effecting, so the engine serves its results from the replay stash and never
    runs it.
    """

    side_effects = True

    def __init__(self, payload: dict[str, Any]) -> None:
        self.definition = ToolDef(payload["tool"], payload.get("description", ""), payload.get("parameters", {}))
        self.source = str(payload.get("source", "builtin"))
        self.register_extra = {k: v for k, v in payload.items() if k not in REGISTER_FIELDS}

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        raise NodevalError(f"tool {self.definition.name!r} ({self.source}) was registered from the journal; "
                           "its results come from the replay stash, so it cannot run")


def recorded_tools(registered: list[dict[str, Any]], source: str, names: list[str] | None = None) -> list[RecordedTool]:
    """The tools of `source` (all, or those named) among recorded tool.register payloads, in journal order."""
    return [RecordedTool(p) for p in registered
            if p.get("source") == source and (names is None or p.get("tool") in names)]


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _world(ctx: ToolContext) -> World:
    if ctx.world is None:
        raise NodevalError("this tool needs a world, and none was started for this session")
    return ctx.world


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT] + f"\n[... {len(text) - OUTPUT_LIMIT} more characters]"


def _exec_outcome(result: Any, timeout_s: float) -> ToolOutcome:
    payload = {"stdout": _clip(result.stdout), "stderr": _clip(result.stderr), "exit_code": result.exit_code}
    if result.timed_out:
        return ToolOutcome(False, payload, f"killed after the {timeout_s:g}s time limit")
    return ToolOutcome(True, payload)


class ShellTool:
    definition = ToolDef("shell", "Run a shell command in the workspace and return its output.",
                         _schema({"command": {"type": "string", "description": "The command line."}}, ["command"]))
    side_effects = True
    source = "builtin"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        result = _world(ctx).exec(["sh", "-c", str(args["command"])], timeout_s=ctx.timeout_s)
        return _exec_outcome(result, ctx.timeout_s)


class CodeExecTool:
    definition = ToolDef("code_exec", "Run a Python program in the workspace; returns stdout and stderr.",
                         _schema({"code": {"type": "string", "description": "Python source."}}, ["code"]))
    side_effects = True
    source = "builtin"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        code = str(args["code"]).encode()
        result = _world(ctx).exec(["python3", "-"], timeout_s=ctx.timeout_s, stdin=code)
        return _exec_outcome(result, ctx.timeout_s)


class FileTool:
    definition = ToolDef(
        "file", "Read, write or list files in the workspace.",
        _schema({
            "op": {"type": "string", "enum": ["read", "write", "list"]},
            "path": {"type": "string"},
            "content": {"type": "string", "description": "For op=write."},
        }, ["op", "path"]),
    )
    side_effects = True
    source = "builtin"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        world, op, path = _world(ctx), args["op"], str(args["path"])
        try:
            if op == "read":
                return ToolOutcome(True, {"content": _clip(world.read(path).decode("utf-8", "replace"))})
            if op == "write":
                data = str(args.get("content", "")).encode()
                world.write(path, data)
                return ToolOutcome(True, {"written": len(data)})
            if op == "list":
                return ToolOutcome(True, {"entries": world.list(path)})
        except (OSError, NodevalError) as exc:
            return ToolOutcome(False, None, f"{op} {path}: {exc.__class__.__name__}: {exc}")
        return ToolOutcome(False, None, f"unknown op {op!r} (valid: read, write, list)")


class AskUserTool:
    definition = ToolDef("ask_user", "Ask the user a question and wait for the answer.",
                         _schema({"question": {"type": "string"}}, ["question"]))
    side_effects = False
    source = "builtin"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(True, {"answer": ctx.ask(ctx.call_id, str(args["question"]))})


BUILTINS: dict[str, Callable[[], Tool]] = {
    "shell": ShellTool, "file": FileTool, "code_exec": CodeExecTool, "ask_user": AskUserTool,
}


def missing_arguments(tool: Tool, args: dict[str, Any]) -> list[str]:
    required = tool.definition.parameters.get("required", [])
    return [name for name in required if name not in args]
