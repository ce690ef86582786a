"""Redactors: run over every event payload before anything touches the disk.

A redactor is `(event_type, payload) -> payload`. The default one removes credential
headers and fields, API-key and bearer-token shaped strings, and the values of secret
environment variables (`*_API_KEY`, `*_TOKEN`, `*_SECRET`) wherever they appear.
`pii_redactor` also removes e-mail addresses and card-like numbers (used by the sampler).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Iterable

Redactor = Callable[[str, dict[str, Any]], dict[str, Any]]

REDACTED = "[REDACTED]"

SECRET_KEYS = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "api-key", "api_key", "apikey",
    "cookie", "set-cookie", "x-goog-api-key", "access_token", "refresh_token", "client_secret",
})

# Text often holds JSON-encoded strings (a tool result inside a request, an SSE stream),
# where a newline is the two characters "\n": a secret right after it follows the letter
# "n", so a plain \b never fires there. _START also accepts that position, and the e-mail
# pattern never starts on the escape's letter, so redacting the encoded text gives what
# encoding the redacted value gives (and replay of a redacted journal still matches).
_START = r"(?:(?<=\\[nrtbf])|\b)"
_SECRET_PATTERNS = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(_START + r"sk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)" + _START + r"bearer\s+[A-Za-z0-9._~+/=\-]{8,}"),
]
_PII_PATTERNS = [
    re.compile(r"(?<!\\)[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}"),
    re.compile(_START + r"(?:\d[ \-]?){13,19}\b"),
]
_SECRET_ENV = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)$")


def scrub(value: Any, patterns: list[re.Pattern[str]], literals: Iterable[str] = ()) -> Any:
    """A copy of value with secret keys dropped and matching strings replaced."""
    if isinstance(value, dict):
        return {k: (REDACTED if str(k).lower() in SECRET_KEYS else scrub(v, patterns, literals))
                for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, patterns, literals) for v in value]
    if isinstance(value, str):
        for literal in literals:
            if literal in value:
                value = value.replace(literal, REDACTED)
        for pattern in patterns:
            value = pattern.sub(REDACTED, value)
    return value


def secret_env_values(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    environ = dict(os.environ) if environ is None else environ
    # Short values would redact ordinary words; real keys are long.
    return tuple(v for k, v in environ.items() if _SECRET_ENV.search(k.upper()) and len(v) >= 8)


def chain(*redactors: Redactor) -> Redactor:
    """One redactor that runs the given ones in order."""

    def chained(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        for redactor in redactors:
            payload = redactor(event_type, payload)
        return payload

    chained.__name__ = "+".join(r.__name__ for r in redactors)
    return chained


def default_redactor(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Credentials only: what the journal writer always applies."""
    return scrub(payload, _SECRET_PATTERNS, secret_env_values())


def pii_redactor(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Credentials plus e-mail addresses and card-like numbers."""
    return scrub(payload, _SECRET_PATTERNS + _PII_PATTERNS, secret_env_values())
