"""The providers' key variables, and the placeholder an SDK gets when it needs no real key.

The anthropic, openai and google-genai SDKs, and the frameworks built on them, refuse to build
a client without a key, often when the agent is made (a module-level `Agent(...)`), before any
attempt runs. A pytest run under nodeval gives every unset key variable a placeholder from
its start to its end, so they build; the placeholder never works anywhere: a replayed request
never leaves the process, a recorded one goes to the test's fake, and one that would carry it
to a real provider is stopped with a message that says which key to set
(agent/intercept.py). Keys that are set are never touched.
"""

from __future__ import annotations

import os
import threading

PLACEHOLDER_KEY = "nodeval-placeholder-key"
KEY_ENVS = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
"""By provider, the variables its SDK reads (google-genai reads either)."""

_LOCK = threading.Lock()
_SET: set[str] = set()


def provide_placeholders() -> None:
    """Give each provider whose key variables are all unset a placeholder in the first one."""
    with _LOCK:
        for envs in KEY_ENVS.values():
            if not any(os.environ.get(env) for env in envs):
                os.environ[envs[0]] = PLACEHOLDER_KEY
                _SET.add(envs[0])


def withdraw_placeholders() -> None:
    """Unset the placeholders provide_placeholders set (and nobody changed since)."""
    with _LOCK:
        for env in _SET:
            if os.environ.get(env) == PLACEHOLDER_KEY:
                del os.environ[env]
        _SET.clear()


def real_key(value: str | None) -> str | None:
    """The value of a key variable, unless it is the placeholder."""
    return None if value == PLACEHOLDER_KEY else value
