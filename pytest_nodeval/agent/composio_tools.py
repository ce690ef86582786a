"""Composio actions as tools of the reference engine, through the real `composio` SDK.

`tools: [composio:GITHUB_STAR_A_REPOSITORY]` with a `composio:` section in input/config.yaml.

Live: one `tools.list` call at boot fetches every configured action's definition
(description and input parameters) from the Composio API; each call executes through
`tools.execute`. A failure the service reports as HTTP 200 `successful: false` becomes a
tool error the model sees; so does an API error (4xx/5xx) raised by the SDK.

Versions: the SDK refuses to execute an action whose toolkit version is 'latest'. The
engine executes each action at `toolkit_versions[<toolkit>]` when the config pins one,
else at the version the API described at boot, so a session never mixes versions. The
version is journaled with the definition (`tool.register` payload `composio`).

Replay: none of this runs; the definitions come from the journal's `tool.register`
events and the results from its `tool.result` events (see tools.RecordedTool).

The SDK is imported only here and only when live: importing it costs seconds of CPU.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import NodevalError
from .config import ComposioSpec
from .providers import ToolDef
from .tools import ToolContext, ToolOutcome

SOURCE = "composio"


class ComposioAction:
    """One Composio action; runs through the SDK client it was described by."""

    side_effects = True
    source = SOURCE

    def __init__(self, client: Any, spec: ComposioSpec, raw: Any) -> None:
        self._client, self._user_id = client, spec.user_id
        toolkit = raw.toolkit.slug if raw.toolkit is not None else None
        self._version = spec.toolkit_versions.get(toolkit or "") or getattr(raw, "version", None)
        if not self._version:
            raise NodevalError(
                f"composio: action {raw.slug} (toolkit {toolkit}) has no version to execute; "
                f"pin one in input/config.yaml: composio.toolkit_versions.{toolkit}"
            )
        self.definition = ToolDef(raw.slug, raw.description or "", dict(raw.input_parameters or {}))
        self.register_extra = {
            SOURCE: {"toolkit": toolkit, "version": self._version, "user_id": self._user_id}
        }

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        response = self._client.tools.execute(
            self.definition.name, args, user_id=self._user_id, version=self._version
        )
        return outcome_of(response)


def outcome_of(response: dict[str, Any]) -> ToolOutcome:
    """An execute response as the engine's outcome: `data` when successful, else the error."""
    if response.get("successful"):
        return ToolOutcome(True, response.get("data"))
    error = response.get("error") or "the action failed (successful: false, no error message)"
    return ToolOutcome(False, response.get("data") or None, str(error))


def live_actions(
    spec: ComposioSpec, slugs: list[str], *, fake: Any, timeout_s: float
) -> list[ComposioAction]:
    """Describe the actions through the Composio API, in the order the config lists them."""
    client = _client(spec, fake, timeout_s)
    try:
        described = {raw.slug: raw for raw in client.tools.get_raw_composio_tools(tools=slugs)}
    except Exception as exc:  # the SDK's errors name the status and the API's message
        raise NodevalError(
            f"composio: could not describe {', '.join(slugs)} at {_where(spec, fake)}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    unknown = [slug for slug in slugs if slug not in described]
    if unknown:
        raise NodevalError(
            f"composio: the API at {_where(spec, fake)} knows no action {', '.join(unknown)} "
            f"(input/config.yaml tools; it described: {', '.join(described) or 'none'})"
        )
    return [ComposioAction(client, spec, described[slug]) for slug in slugs]


def _client(spec: ComposioSpec, fake: Any, timeout_s: float) -> Any:
    from composio import Composio

    base_url = fake.url if fake is not None else spec.base_url
    # allow_tracking=False: an evaluation must not post telemetry from a background thread.
    options: dict[str, Any] = {
        "api_key": _api_key(spec, fake),
        "allow_tracking": False,
        "timeout": timeout_s,
    }
    if base_url is not None:
        options["base_url"] = base_url
    if spec.toolkit_versions:
        options["toolkit_versions"] = dict(spec.toolkit_versions)
    return Composio(**options)


def _api_key(spec: ComposioSpec, fake: Any) -> str:
    if fake is not None:
        return str(fake.api_key)
    key = os.environ.get(spec.api_key_env)
    if not key:
        raise NodevalError(
            f"composio: no API key; set the environment variable {spec.api_key_env} "
            "(or composio.api_key_env in input/config.yaml), use `base_url: fake`, "
            "or replay the case's journal in deterministic mode, which needs no key"
        )
    return key


def _where(spec: ComposioSpec, fake: Any) -> str:
    if fake is not None:
        return f"the fake ({fake.url})"
    return spec.base_url or "the SDK's default address"
