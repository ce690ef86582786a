"""`@tool` beside the agent frameworks' own tool decorators.

Inside a framework's decorator (`@function_tool` over `@tool`), `@tool` returns a function with
the original's name, docstring, signature and annotations (`functools.wraps`, which
`inspect.signature` and `typing.get_type_hints` follow), so the framework derives the same
schema. Outside it (`@tool` over `@function_tool`), it is handed the framework's tool object
and journals the function inside it, in place. Nothing here imports a framework: objects are
recognised by their attributes and their classes' names.

A framework passes its own objects to a tool (Pydantic AI's `RunContext`, the OpenAI Agents
SDK's `RunContextWrapper` and `ToolContext`, LangChain's `RunnableConfig` and callback
managers): the journal cannot store them and the recorded result does not depend on them, so
they are left out of the journaled arguments and handed to the function untouched.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from typing import Any

from ..errors import NodevalError

CONTEXT_TYPES = frozenset(
    {
        "RunContext",  # Pydantic AI
        "RunContextWrapper",  # OpenAI Agents SDK
        "ToolContext",  # OpenAI Agents SDK
        "RunnableConfig",  # LangChain
        "CallbackManagerForToolRun",
        "AsyncCallbackManagerForToolRun",
        "BaseCallbackManager",
        "ToolRuntime",  # LangGraph
        "InjectedToolCallId",
        "InjectedState",
        "InjectedStore",
    }
)
CONTEXT_PARAMS = frozenset({"run_manager", "callbacks"})
"""Parameters LangChain fills in by name."""
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def unjournaled_params(signature: inspect.Signature) -> set[str]:
    """The parameters whose annotation or name says the framework fills them in."""
    return {
        name
        for name, param in signature.parameters.items()
        if name in CONTEXT_PARAMS or _names_context(param.annotation)
    }


def _names_context(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    text = annotation if isinstance(annotation, str) else _annotation_text(annotation)
    return any(word in CONTEXT_TYPES for word in _WORD.findall(text))


def _annotation_text(annotation: Any) -> str:
    name = getattr(annotation, "__name__", None)
    return f"{name} {annotation!r}" if isinstance(name, str) else repr(annotation)


def is_context_value(value: Any) -> bool:
    """An argument that is one of a framework's context objects, whatever its annotation."""
    return any(cls.__name__ in CONTEXT_TYPES for cls in type(value).__mro__)


Decorate = Callable[[Any, str], Any]


def journal_tool_object(obj: Any, decorate: Decorate) -> Any:
    """Journal the function inside a framework's tool object, in place; returns the object."""
    name = getattr(obj, "name", None)
    if not isinstance(name, str):
        raise NodevalError(_not_a_tool(obj))
    if callable(getattr(obj, "on_invoke_tool", None)):  # OpenAI Agents SDK: FunctionTool
        obj.on_invoke_tool = _journaled_invoker(obj.on_invoke_tool, name, decorate)
        return obj
    if hasattr(obj, "func") and hasattr(obj, "coroutine"):  # LangChain: StructuredTool, Tool
        if obj.func is not None:
            obj.func = decorate(obj.func, name)
        if obj.coroutine is not None:
            obj.coroutine = decorate(obj.coroutine, name)
        return obj
    schema = getattr(obj, "function_schema", None)
    if callable(getattr(obj, "function", None)) and schema is not None:  # Pydantic AI: Tool
        obj.function = schema.function = decorate(obj.function, name)
        return obj
    if callable(getattr(obj, "forward", None)) and hasattr(obj, "inputs"):  # smolagents: Tool
        # A tool made by smolagents' @tool forwards to the function (its __wrapped__) through
        # a staticmethod whose signature claims a `self`.
        obj.forward = decorate(getattr(obj.forward, "__wrapped__", obj.forward), name)
        return obj
    raise NodevalError(_not_a_tool(obj))


def _journaled_invoker(invoke: Any, name: str, decorate: Decorate) -> Any:
    """The Agents SDK calls `on_invoke_tool(context, arguments_json)`: journal the arguments
    as the parameters they are, not as one string."""

    async def call(context: Any, **arguments: Any) -> Any:
        return await invoke(context, json.dumps(arguments))

    journaled = decorate(call, name)

    async def on_invoke_tool(context: Any, arguments_json: str) -> Any:
        arguments = json.loads(arguments_json) if arguments_json else {}
        return await journaled(context, **arguments)

    return on_invoke_tool


def _not_a_tool(obj: Any) -> str:
    return (
        f"@tool was given a {type(obj).__name__}, which is neither a function nor a tool of "
        "a framework it knows (the OpenAI Agents SDK's FunctionTool, LangChain's tools, "
        "Pydantic AI's Tool, smolagents' Tool); put @tool directly on the function"
    )
