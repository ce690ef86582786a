"""The reference engine's built-in tools: shell, file, code_exec and pdf (inside the World),
web (from the harness, see web.py) and ask_user.

A tool with side effects is never run during replay: its recorded `tool.result` is
served instead. `web` and `pdf` count as such too (they read the network and the world,
neither of which replay has), so their results always come from the journal.
`ask_user` has none of its own; its answer comes from the simulated user when live and
from the journal's `io.ask.response` in replay.

Tools of outside services (Composio actions, MCP tools) are described by those services
when live; in replay they are `RecordedTool`s rebuilt from the journal's `tool.register`
events, so a replay neither imports their SDKs nor contacts anyone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import NodevalError
from ..world import World
from .config import EngineConfig, PdfSpec, WebSpec
from .providers import ToolDef

OUTPUT_LIMIT = 16_384


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    ok: bool
    result: Any = None
    error: str | None = None
    extra: dict[str, Any] | None = None
    """Journal-only fields of the `tool.result` (e.g. the OAuth steps a call took); never
    shown to the model."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    world: World | None
    call_id: str
    timeout_s: float
    ask: Callable[[str, str], str]
    """ask(call_id, question) -> the user's answer."""


@dataclass(frozen=True, slots=True)
class ToolSetup:
    """What a built-in tool is made from: the engine config, and the fakes it may talk to."""

    config: EngineConfig
    web_fake_url: str | None = None
    """The running fakes.web, when the config's `web.fake` is on (live and record only)."""


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
    return {
        **extra,
        "tool": tool.definition.name,
        "description": tool.definition.description,
        "parameters": tool.definition.parameters,
        "side_effects": tool.side_effects,
        "source": tool.source,
    }


class RecordedTool:
    """A tool as a journal registered it: what replay offers the model instead of asking a service.

    It is side-effecting, so the engine serves its results from the replay stash and never
    runs it.
    """

    side_effects = True

    def __init__(self, payload: dict[str, Any]) -> None:
        self.definition = ToolDef(
            payload["tool"], payload.get("description", ""), payload.get("parameters", {})
        )
        self.source = str(payload.get("source", "builtin"))
        self.register_extra = {k: v for k, v in payload.items() if k not in REGISTER_FIELDS}

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        raise NodevalError(
            f"tool {self.definition.name!r} ({self.source}) was registered from the journal; "
            "its results come from the replay stash, so it cannot run"
        )


def recorded_tools(
    registered: list[dict[str, Any]], source: str, names: list[str] | None = None
) -> list[RecordedTool]:
    """The tools of `source` (all, or those named) among recorded tool.register payloads, in
    journal order."""
    return [
        RecordedTool(p)
        for p in registered
        if p.get("source") == source and (names is None or p.get("tool") in names)
    ]


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _world(ctx: ToolContext) -> World:
    if ctx.world is None:
        raise NodevalError("this tool needs a world, and none was started for this session")
    return ctx.world


def _clip(text: str) -> str:
    return (
        text
        if len(text) <= OUTPUT_LIMIT
        else text[:OUTPUT_LIMIT] + f"\n[... {len(text) - OUTPUT_LIMIT} more characters]"
    )


def _exec_outcome(result: Any, timeout_s: float) -> ToolOutcome:
    payload = {
        "stdout": _clip(result.stdout),
        "stderr": _clip(result.stderr),
        "exit_code": result.exit_code,
    }
    if result.timed_out:
        return ToolOutcome(False, payload, f"killed after the {timeout_s:g}s time limit")
    return ToolOutcome(True, payload)


class ShellTool:
    definition = ToolDef(
        "shell",
        "Run a shell command in the workspace and return its output.",
        _schema({"command": {"type": "string", "description": "The command line."}}, ["command"]),
    )
    side_effects = True
    source = "builtin"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        result = _world(ctx).exec(["sh", "-c", str(args["command"])], timeout_s=ctx.timeout_s)
        return _exec_outcome(result, ctx.timeout_s)


class CodeExecTool:
    definition = ToolDef(
        "code_exec",
        "Run a Python program in the workspace; returns stdout and stderr.",
        _schema({"code": {"type": "string", "description": "Python source."}}, ["code"]),
    )
    side_effects = True
    source = "builtin"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        code = str(args["code"]).encode()
        result = _world(ctx).exec(["python3", "-"], timeout_s=ctx.timeout_s, stdin=code)
        return _exec_outcome(result, ctx.timeout_s)


class FileTool:
    definition = ToolDef(
        "file",
        "Read, write or list files in the workspace.",
        _schema(
            {
                "op": {"type": "string", "enum": ["read", "write", "list"]},
                "path": {"type": "string"},
                "content": {"type": "string", "description": "For op=write."},
            },
            ["op", "path"],
        ),
    )
    side_effects = True
    source = "builtin"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        world, op, path = _world(ctx), args["op"], str(args["path"])
        try:
            if op == "read":
                return ToolOutcome(
                    True, {"content": _clip(world.read(path).decode("utf-8", "replace"))}
                )
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
    definition = ToolDef(
        "ask_user",
        "Ask the user a question and wait for the answer.",
        _schema({"question": {"type": "string"}}, ["question"]),
    )
    side_effects = False
    source = "builtin"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(True, {"answer": ctx.ask(ctx.call_id, str(args["question"]))})


class WebTool:
    """Fetch a URL and return its readable text, from the harness process (see web.py for why).

    Off unless input/config.yaml's `web.allow` lists the host; a blocked host, a redirect to
    one, a timeout, a page over `web.max_bytes` or a non-2xx status is a tool error.
    """

    definition = ToolDef(
        "web",
        (
            "Fetch a web page (http or https) and return its readable text. "
            "Only some hosts are allowed."
        ),
        _schema({"url": {"type": "string", "description": "The page's URL."}}, ["url"]),
    )
    side_effects = True  # it reads the network: replay serves the recorded result instead
    source = "builtin"

    def __init__(self, spec: WebSpec, fake_url: str | None = None) -> None:
        self.spec, self.fake_url = spec, fake_url

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        from .web import WebError, WebPolicy, fetch

        _require("trafilatura", "web")
        if self.spec.fake and self.fake_url is None:
            raise NodevalError(
                "web.fake is on, and no fakes.web is running here: a case's live or record "
                "attempt starts it from input/web.yaml"
            )
        timeout_s = min(self.spec.timeout_s, ctx.timeout_s)
        policy = WebPolicy(tuple(self.spec.allow), self.spec.max_bytes, timeout_s, self.fake_url)
        try:
            page = fetch(str(args["url"]), policy)
        except WebError as exc:
            return ToolOutcome(False, None, str(exc))
        return ToolOutcome(
            True,
            {
                "url": page.url,
                "status": page.status,
                "content_type": page.content_type,
                "title": page.title,
                "text": _clip(page.text),
            },
        )


class PdfTool:
    """The page count and text of a PDF file in the world, optionally of some pages only."""

    definition = ToolDef(
        "pdf",
        "Read a PDF file in the workspace: its page count and the text of its pages.",
        _schema(
            {
                "path": {"type": "string"},
                "pages": {
                    "type": "string",
                    "description": 'Pages to read, e.g. "2-4" or "1,3" (default: all).',
                },
            },
            ["path"],
        ),
    )
    side_effects = True  # replay has no world: the recorded result is served
    source = "builtin"

    def __init__(self, spec: PdfSpec) -> None:
        self.spec = spec

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        from .pdf import PdfError, read_pdf

        _require("pypdf", "pdf")
        world, path, pages = _world(ctx), str(args["path"]), args.get("pages")
        try:
            text = read_pdf(world.read(path), str(pages) if pages else None, self.spec.max_bytes)
        except (OSError, NodevalError, PdfError) as exc:
            return ToolOutcome(False, None, f"{path}: {exc}")
        return ToolOutcome(
            True,
            {
                "path": path,
                "page_count": text.page_count,
                "pages": _ranges(text.pages),
                "text": _clip(text.text),
            },
        )


def _require(module: str, extra: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise NodevalError(
            f"the {extra} tool needs the {module} package: pip install 'pytest-nodeval[{extra}]'"
        )


def _ranges(pages: list[int]) -> str:
    """[1, 2, 3, 5] -> "1-3,5"."""
    runs: list[list[int]] = []
    for n in pages:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _plain(cls: Callable[[], Tool]) -> Callable[[ToolSetup], Tool]:
    return lambda setup: cls()


BUILTINS: dict[str, Callable[[ToolSetup], Tool]] = {
    "shell": _plain(ShellTool),
    "file": _plain(FileTool),
    "code_exec": _plain(CodeExecTool),
    "ask_user": _plain(AskUserTool),
    "web": lambda setup: WebTool(setup.config.web or WebSpec(), setup.web_fake_url),
    "pdf": lambda setup: PdfTool(setup.config.pdf or PdfSpec()),
}


def missing_arguments(tool: Tool, args: dict[str, Any]) -> list[str]:
    required = tool.definition.parameters.get("required", [])
    return [name for name in required if name not in args]
