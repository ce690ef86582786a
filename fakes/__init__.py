"""Protocol-faithful local fakes of the services an agent uses (ASGI apps on loopback).

* `fakes.llm`: Anthropic Messages and OpenAI Chat Completions / Responses, scripted.
* `fakes.composio`: the Composio API routes the `composio` SDK calls.
* `fakes.mcp_oauth`: an OAuth 2.1 authorization server and a protected MCP server.
* `fakes.web`: scripted web pages by URL, for the engine's `web` tool.
* `fakes.server`: serving any ASGI app on an ephemeral loopback port.

Importing `fakes` is cheap: each module imports its server stack when it is used.
"""

from ._script import ScriptError

__all__ = ["ScriptError"]
