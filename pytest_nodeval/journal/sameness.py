"""Whether a new recording says anything its case's journal does not: re-recording without churn.

Journals live in git. Two recordings of an unchanged agent differ in what no reviewer cares
about: the session's id, the clock (each event's `ts`, the header's `created_at`), how long
calls took, and a provider's per-response headers (request ids, dates). Everything else (the
requests, the answers, the tools, the user's turns, the order of it all) is the recording.
A recording the same as the journal in place is not installed, so the journal stays
byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .events import EVENTS_FILE, HEADER_FILE

_VOLATILE_HEADER = frozenset({"session_id", "created_at"})
_VOLATILE_PAYLOAD = frozenset({"session_id", "latency_ms", "duration_ms", "headers"})
"""Payload fields that change from one recording to the next on their own."""


def recording_change(journal: Path, recording: Path) -> str | None:
    """How `recording` differs from the journal in place, in one line; None when it says the
    same (or "new" when there is no journal yet)."""
    if not (journal / EVENTS_FILE).is_file():
        return "new"
    try:
        before, after = _events(journal), _events(recording)
        old_header, new_header = _header(journal), _header(recording)
    except (OSError, ValueError):
        return "changed: the journal in place could not be read"
    if old_header != new_header:
        return f"changed: header.json{_where(old_header, new_header)}"
    if len(before) != len(after):
        return f"changed: {len(before)} -> {len(after)} events"
    for old, new in zip(before, after, strict=True):
        if old != new:
            return f"changed: seq {new.get('seq')} {new.get('type')}{_where(old, new)}"
    return None


def _header(directory: Path) -> dict[str, Any]:
    header = json.loads((directory / HEADER_FILE).read_text(encoding="utf-8"))
    return {k: v for k, v in header.items() if k not in _VOLATILE_HEADER}


def _events(directory: Path) -> list[dict[str, Any]]:
    with (directory / EVENTS_FILE).open(encoding="utf-8") as lines:
        return [_steady(json.loads(line)) for line in lines if line.strip()]


def _steady(event: dict[str, Any]) -> dict[str, Any]:
    event.pop("ts", None)
    payload = event.get("payload")
    if isinstance(payload, dict):
        event["payload"] = {k: v for k, v in payload.items() if k not in _VOLATILE_PAYLOAD}
    return event


def _where(old: dict[str, Any], new: dict[str, Any]) -> str:
    from .replay import first_difference

    found = first_difference(old, new)
    return f" at {found[0]}" if found else ""
