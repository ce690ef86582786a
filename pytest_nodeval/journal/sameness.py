"""Whether a new recording says anything its case's journal does not: re-recording without churn.

Journals live in git. Two recordings of an unchanged agent differ in what no reviewer cares
about: the session's id, the clock (each event's `ts`, the header's `created_at`), how long
calls took, and a provider's per-response headers (request ids, dates). Everything else (the
requests, the answers, the tools, the user's turns, the order of it all) is the recording.
A recording the same as the journal in place is not installed, so the journal stays
byte-identical; one that differs in its header alone (the case files' digests after an edit
to assertions.yaml) rewrites header.json alone (`refresh_header`), keeping events.jsonl.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .events import EVENTS_FILE, HEADER_FILE, JournalHeader

_VOLATILE_HEADER = frozenset({"session_id", "created_at"})
_DIGESTS = "case_digests"
"""Compared after the events: a change in what the agent did says more than a file's digest."""
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
    old_digests, new_digests = old_header.pop(_DIGESTS, None), new_header.pop(_DIGESTS, None)
    if old_header != new_header:
        return f"changed: header.json{_where(old_header, new_header)}"
    events = _events_change(before, after)
    if events is not None:
        return events
    if old_digests != new_digests:
        return f"changed: header.json {_DIGESTS} ({_files_changed(old_digests, new_digests)})"
    return None


def install_if_changed(
    journal: Path, recording: Path, install: Callable[[Path, Path], None]
) -> str | None:
    """Put `recording` in place of the case's `journal` when it says something new, and say
    how it differs (`recording_change`); None, writing nothing, when it says the same. One
    that differs in its header alone rewrites header.json alone, so events.jsonl stays
    byte-identical; otherwise `install(recording, journal)` (install_journal or
    install_staged) puts the whole of it in place."""
    change = recording_change(journal, recording)
    if change is None:
        return None
    if header_change_only(journal, recording):
        refresh_header(journal, recording)
    else:
        install(recording, journal)
    return change


def header_change_only(journal: Path, recording: Path) -> bool:
    """Whether `recording` says the same as the journal in place but in its header (its case
    files' digests, say, after an edit to assertions.yaml that changed nothing the agent did)."""
    try:
        return (journal / EVENTS_FILE).is_file() and _events_change(
            _events(journal), _events(recording)
        ) is None
    except (OSError, ValueError):
        return False


def refresh_header(journal: Path, recording: Path) -> None:
    """Give the journal in place the recording's header, keeping its own session id and time
    (which its events.jsonl names): its events stay byte-identical, and the diff a reviewer
    sees is the header's fields that changed. For a recording `header_change_only` allows."""
    from .writer import write_atomic

    kept = json.loads((journal / HEADER_FILE).read_text(encoding="utf-8"))
    header = json.loads((recording / HEADER_FILE).read_text(encoding="utf-8"))
    header.update({k: kept[k] for k in _VOLATILE_HEADER if k in kept})
    # Through the model, so the file is written exactly as the journal writer writes one.
    text = JournalHeader.model_validate(header).model_dump_json(indent=2) + "\n"
    write_atomic(journal / HEADER_FILE, text)


def _events_change(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str | None:
    if len(before) != len(after):
        return f"changed: {len(before)} -> {len(after)} events"
    for old, new in zip(before, after, strict=True):
        if old != new:
            return f"changed: seq {new.get('seq')} {new.get('type')}{_where(old, new)}"
    return None


def _files_changed(old: Any, new: Any) -> str:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return "none before" if not isinstance(old, dict) else "none now"
    return describe_changes(old, new) or "reordered"


def describe_changes(recorded: dict[str, str], now: dict[str, str]) -> str | None:
    """The files that differ between two maps of file digests, said briefly ("assertions.yaml
    edited, input/web.yaml added"); None when none does."""
    changes = [
        f"{name} {_how(recorded.get(name), now.get(name))}"
        for name in sorted(recorded.keys() | now.keys())
        if recorded.get(name) != now.get(name)
    ]
    if not changes:
        return None
    shown = ", ".join(changes[:3])
    return shown + (f" and {len(changes) - 3} more" if len(changes) > 3 else "")


def _how(before: str | None, after: str | None) -> str:
    if before is None:
        return "added"
    return "removed" if after is None else "edited"


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
