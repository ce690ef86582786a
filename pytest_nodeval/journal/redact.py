"""Redactors: run over every event payload before anything touches the disk.

A redactor is `(event_type, payload) -> payload`. The default one removes credential
headers and fields (`x-goog-api-key` among them), API-key and bearer-token shaped strings
(Anthropic, OpenAI and Google keys, a `key=` in a URL's query), and the values of secret
environment variables (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`) wherever they
appear: as they are, reversed, base64-encoded (standard or URL-safe, the value alone or inside
longer encoded text), and split by whitespace (journal/disguise.py; docs/worlds.md says what is
not caught). `pii_redactor` also removes e-mail addresses and card-like numbers (used by the
sampler).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .disguise import KnownSecrets, known_secrets

Redactor = Callable[[str, dict[str, Any]], dict[str, Any]]
Pattern = re.Pattern[str] | KnownSecrets
"""What scrub() replaces: a credential pattern, or every form of the known secrets."""

REDACTED = "[REDACTED]"

SECRET_KEYS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "api_key",
        "apikey",
        "cookie",
        "set-cookie",
        "x-goog-api-key",
        "access_token",
        "refresh_token",
        "client_secret",
    }
)

# Text often holds JSON-encoded strings (a tool result inside a request, an SSE stream),
# where a newline is the two characters "\n": a secret right after it follows the letter
# "n", so a plain \b never fires there. _START also accepts that position, and the e-mail
# pattern never starts on the escape's letter, so redacting the encoded text gives what
# encoding the redacted value gives (and replay of a redacted journal still matches).
_START = r"(?:(?<=\\[nrtbf])|\b)"
# One alternation per redactor: a single pass over each string (redaction runs on every event).
_SECRET_PATTERNS = [
    re.compile(
        r"sk-ant-[A-Za-z0-9_\-]{8,}"
        r"|" + _START + r"sk-[A-Za-z0-9_\-]{16,}"
        r"|(?i:" + _START + r"bearer\s+[A-Za-z0-9._~+/=\-]{8,})"
        # Google API keys (Gemini's x-goog-api-key), and any key in a URL's query (`?key=...`).
        r"|" + _START + r"AIza[A-Za-z0-9_\-]{30,}"
        # (No backslash in the value, so the JSON-encoded text redacts as the raw value does.)
        r"|(?<=[?&]key=)[^&\s\"'#\\]{8,}"
    )
]
_PII_PATTERNS = [
    re.compile(
        r"(?<!\\)[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}"
        r"|" + _START + r"(?:\d[ \-]?){13,19}\b"
    )
]
_QUOTED_SECRET_KEYS = re.compile("|".join(re.escape(f'"{key}"') for key in sorted(SECRET_KEYS)))
"""Any secret key as a payload's JSON text has it: one pass (the scan runs on every event)."""
_SECRET_ENV = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)$")


def _with_secrets(patterns: Sequence[Pattern], literals: Iterable[str]) -> list[Pattern]:
    known = known_secrets(tuple(literals))
    return [known, *patterns] if known is not None else list(patterns)


def scrub(value: Any, patterns: list[re.Pattern[str]], literals: Iterable[str] = ()) -> Any:
    """A copy of value with secret keys dropped and matching strings replaced (`literals`:
    known secret values, also found disguised)."""
    return _scrub(value, _with_secrets(patterns, literals))


def _scrub(value: Any, patterns: list[Pattern]) -> Any:
    if isinstance(value, dict):
        return {
            k: (REDACTED if str(k).lower() in SECRET_KEYS else _scrub(v, patterns))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_scrub(v, patterns) for v in value]
    if isinstance(value, str) and len(value) >= 8:  # nothing secret is shorter
        for pattern in patterns:
            value = pattern.sub(REDACTED, value)
    return value


def scrub_payload(
    payload: dict[str, Any], patterns: list[re.Pattern[str]], literals: Iterable[str] = ()
) -> dict[str, Any]:
    """scrub() of an event's payload, which stays a dict."""
    scrubbed: dict[str, Any] = scrub(payload, patterns, literals)
    return scrubbed


def might_hold_secrets(
    payload: Any, patterns: list[re.Pattern[str]], literals: Iterable[str], text: str | None = None
) -> bool:
    """A fast, conservative check on the payload's JSON text (false alarms only cost a scrub).

    An agent resends its whole conversation on every model call, so walking every string of
    every request would cost more than the SDK call itself; most payloads hold nothing.
    `text`: the payload already serialised by the caller (an HTTP body as sent), which
    spares a JSON dump of it; it must hold every string of the payload that could be secret.
    """
    if text is None:
        text = json.dumps(payload, ensure_ascii=False, default=str)
    lowered = text.lower()
    # The credential patterns all contain one of these; a substring test is far cheaper
    # than running the patterns over a 40 KB request body.
    hinted = (
        "sk-" in lowered
        or "bearer" in lowered
        or "aiza" in lowered
        or "key=" in lowered
        or patterns is not _SECRET_PATTERNS
    )
    known = known_secrets(tuple(literals))
    return (
        _QUOTED_SECRET_KEYS.search(lowered) is not None
        or (hinted and any(p.search(text) for p in patterns))
        or (known is not None and known.might_be_in(text))
    )


def secret_env_values(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The values of the environment's secret-named variables (os.environ's by default)."""
    if environ is None:  # every journal writer reads them: only the secret-named are read
        environ = environ_snapshot(lambda key: _SECRET_ENV.search(key.upper()) is not None)
    # Short values would redact ordinary words; real keys are long.
    return tuple(v for k, v in environ.items() if _SECRET_ENV.search(k.upper()) and len(v) >= 8)


def environ_snapshot(wanted: Callable[[str], bool] | None = None) -> dict[str, str]:
    """os.environ as a dict (the keys `wanted` says yes to), safe while another thread
    changes it.

    `dict(os.environ)` lists the keys, then reads each: with attempts running in pool
    threads (--nodeval-concurrency), pytest's main thread deletes PYTEST_CURRENT_TEST in
    between, and the copy raised KeyError. A key gone by the time it is read is left out.
    """
    found = {}
    for key in list(os.environ):
        if wanted is not None and not wanted(key):
            continue
        value = os.environ.get(key)
        if value is not None:
            found[key] = value
    return found


def chain(*redactors: Redactor) -> Redactor:
    """One redactor that runs the given ones in order."""

    def chained(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        for redactor in redactors:
            payload = redactor(event_type, payload)
        return payload

    chained.__name__ = "+".join(r.__name__ for r in redactors)
    return chained


def secrets_redactor() -> Redactor:
    """Credentials only (what every journal writer applies); secret env values read once."""
    literals = secret_env_values()

    def secrets(
        event_type: str, payload: dict[str, Any], text: str | None = None
    ) -> dict[str, Any]:
        if not might_hold_secrets(payload, _SECRET_PATTERNS, literals, text):
            return payload
        return scrub_payload(payload, _SECRET_PATTERNS, literals)

    secrets.scans_text = True  # type: ignore[attr-defined]  # the writer may hand it the serialised text
    # Golden journals were written through this very redactor, so the writer may serve their
    # payloads verbatim (JournalWriter.emit_recorded) without running it again.
    secrets.redacts_as_recorded = True  # type: ignore[attr-defined]
    return secrets


def default_redactor(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Credentials only, reading the environment on each call (see secrets_redactor)."""
    return scrub_payload(payload, _SECRET_PATTERNS, secret_env_values())


def pii_redactor(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Credentials plus e-mail addresses and card-like numbers."""
    return scrub_payload(payload, _SECRET_PATTERNS + _PII_PATTERNS, secret_env_values())
