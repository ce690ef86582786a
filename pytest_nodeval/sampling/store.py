"""Sample directories: what the sampler writes, and what `nodeval samples` and `promote` read.

    <out_dir>/<sample-id>/
        sample.json            SampleInfo: id, session, time, reason, error, size
        journal/header.json    the session's header, source "sample", redactors listed
        journal/events.jsonl   the session's events, redacted, ending with `eval.candidate`
        input/config.yaml      the engine config snapshot, redacted (absent for a user's own agent)

The layout is a case's, so `nodeval promote` copies the journal as it is. A sample is
built in memory first (redaction happens there, before anything touches the disk), then
written into a hidden staging directory and renamed into place: a reader never sees
half a sample, and a crash leaves at most a hidden directory behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ..agent.config import EngineConfig
from ..case import CONFIG_FILE
from ..journal.events import EVENT_ADAPTER, EVENTS_FILE, HEADER_FILE, EngineInfo, JournalHeader
from ..journal.redact import Redactor
from ..journal.writer import write_atomic

SAMPLE_FILE = "sample.json"
DEFAULT_SAMPLES_DIR = Path("~/.nodeval/samples")
Reason = Literal["sampled", "failed"]


class SampleInfo(BaseModel):
    """`sample.json`: what `nodeval samples` lists."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    id: str
    """The directory name: capture time and session id."""
    session_id: str
    captured_at: str
    """When the sampler decided to keep the session (UTC, ISO 8601)."""
    reason: Reason
    """"sampled" (picked at the configured rate) or "failed" (failure capture)."""
    error: str | None = None
    """Why the session failed, redacted like everything else."""
    status: str | None = None
    """The session's end status ("ok", "error", "limit"), if it ended."""
    events: int
    size_bytes: int
    """Bytes of the journal and config files."""
    redaction: list[str]
    """Names of the redactors that ran before anything was written."""


@dataclass(frozen=True, slots=True)
class Capture:
    """One session the sampler decided to keep, as it was observed (not yet redacted)."""

    session_id: str
    reason: Reason
    error: str | None
    events: Sequence[Any]
    header: JournalHeader | None
    config: EngineConfig | None
    captured_at: str


@dataclass(frozen=True, slots=True)
class SampleFiles:
    """A sample built in memory: relative path -> text, ready to be written."""

    info: SampleInfo
    files: dict[str, str]

    @property
    def size(self) -> int:
        return sum(len(text.encode("utf-8")) for text in self.files.values())


@dataclass(frozen=True, slots=True)
class StoredSample:
    path: Path
    info: SampleInfo | None
    """None when sample.json is unreadable (the directory is still counted and evictable)."""
    size: int
    captured_at: str


# -- building (in memory) -----------------------------------------------------------------


def sample_id(session_id: str, captured_at: str) -> str:
    """`20261130-120000-<session>`: sorts by time, names the session, safe as a file name."""
    stamp = re.sub(r"[^0-9]", "", captured_at)[:14]
    safe_session = re.sub(r"[^A-Za-z0-9_.-]", "-", session_id)[:32]
    return f"{stamp[:8]}-{stamp[8:14]}-{safe_session}"


def build_sample(capture: Capture, redactor: Redactor, redaction: list[str]) -> SampleFiles:
    """Redact and serialise a captured session; nothing is written here."""
    lines = redacted_events(capture.events, redactor)
    lines.append(_candidate_event(capture, lines, redactor))
    header = _sample_header(capture, redactor, redaction)
    files = {
        f"journal/{HEADER_FILE}": header.model_dump_json(indent=2) + "\n",
        f"journal/{EVENTS_FILE}": "".join(
            e.model_dump_json(exclude_none=False) + "\n" for e in lines
        ),
    }
    if capture.config is not None:
        files[CONFIG_FILE] = _config_yaml(capture.config, redactor)
    info = SampleInfo(
        id=sample_id(header.session_id, capture.captured_at),
        session_id=header.session_id,
        captured_at=capture.captured_at,
        reason=capture.reason,
        error=lines[-1].payload.error,
        status=_end_status(lines),
        events=len(lines),
        redaction=header.redaction,
        size_bytes=sum(len(text.encode("utf-8")) for text in files.values()),
    )
    files[SAMPLE_FILE] = info.model_dump_json(indent=2) + "\n"
    return SampleFiles(info, files)


def redacted_events(events: Sequence[Any], redactor: Redactor) -> list[Any]:
    """Every event with its payload redacted, validated again as a journal event."""
    redacted = []
    for event in events:
        raw = (
            dict(event)
            if isinstance(event, dict)
            else {
                "seq": event.seq,
                "ts": event.ts,
                "type": event.type,
                "turn": event.turn,
                "payload": event.payload_dict(),
            }
        )
        raw["payload"] = redactor(raw["type"], dict(raw.get("payload") or {}))
        redacted.append(EVENT_ADAPTER.validate_python(raw))
    return redacted


def _candidate_event(capture: Capture, events: list[Any], redactor: Redactor) -> Any:
    # Appended after session.end: replay ignores it, and it says why this session was kept.
    payload = redactor("eval.candidate", {"reason": capture.reason, "error": capture.error})
    last = events[-1] if events else None
    return EVENT_ADAPTER.validate_python(
        {
            "seq": last.seq + 1 if last else 1,
            "ts": capture.captured_at,
            "type": "eval.candidate",
            "turn": last.turn if last else 0,
            "payload": payload,
        }
    )


def _sample_header(capture: Capture, redactor: Redactor, redaction: list[str]) -> JournalHeader:
    header = capture.header or _header_from_events(capture)
    data = header.model_dump(mode="json")
    data["source"] = "sample"
    data["redaction"] = list(dict.fromkeys([*header.redaction, *redaction]))
    return JournalHeader.model_validate(redactor("journal.header", data))


def _header_from_events(capture: Capture) -> JournalHeader:
    """For sessions observed without their header (a user's own journal, say)."""
    start = next((e for e in capture.events if _type(e) == "session.start"), None)
    payload = _payload(start) if start is not None else {}
    first_ts = _field(capture.events[0], "ts") if capture.events else capture.captured_at
    return JournalHeader(
        session_id=capture.session_id,
        created_at=first_ts,
        source="live",
        engine=EngineInfo(
            name=str(payload.get("engine", "unknown")),
            version=str(payload.get("version", "unknown")),
        ),
        config_digest=payload.get("config_digest"),
    )


def _config_yaml(config: EngineConfig, redactor: Redactor) -> str:
    data = redactor("config", config.model_dump(mode="json", exclude_defaults=True))
    EngineConfig.model_validate(data)  # a redactor must leave a config the engine can load
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _end_status(events: list[Any]) -> str | None:
    ends = [e for e in events if e.type == "session.end"]
    return ends[-1].payload.status if ends else None


def _type(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else getattr(event, "type", None)


def _payload(event: Any) -> dict[str, Any]:
    return dict(event.get("payload") or {}) if isinstance(event, dict) else event.payload_dict()


def _field(event: Any, name: str) -> Any:
    return event.get(name) if isinstance(event, dict) else getattr(event, name)


# -- writing, listing, eviction -------------------------------------------------------------


def write_sample(out_dir: Path, sample: SampleFiles) -> Path:
    """Write all files into a hidden staging directory, then rename it into place."""
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / sample.info.id
    staging = out_dir / f".staging-{sample.info.id}-{os.getpid()}-{threading.get_ident()}"
    try:
        for relative, text in sample.files.items():
            write_atomic(staging / relative, text)
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def list_samples(out_dir: Path) -> list[StoredSample]:
    """Every sample directory under out_dir, oldest first (hidden staging directories skipped)."""
    if not out_dir.is_dir():
        return []
    found = []
    for entry in os.scandir(out_dir):
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        if (path / SAMPLE_FILE).exists() or (path / "journal").is_dir():
            found.append(_stored(path))
    return sorted(found, key=lambda s: (s.captured_at, s.path.name))


def _stored(path: Path) -> StoredSample:
    info = read_sample_info(path)
    captured = info.captured_at if info else _mtime_iso(path)
    return StoredSample(path, info, directory_size(path), captured)


def read_sample_info(path: Path) -> SampleInfo | None:
    try:
        return SampleInfo.model_validate_json((path / SAMPLE_FILE).read_bytes())
    except (OSError, ValidationError):
        return None


def directory_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile by another process's eviction
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _mtime_iso(path: Path) -> str:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    return datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def evict(out_dir: Path, max_bytes: int, *, keep: str | None = None) -> tuple[list[str], int]:
    """Delete the oldest samples until the total is at most max_bytes; (removed ids, new total)."""
    stored = list_samples(out_dir)
    total = sum(s.size for s in stored)
    removed: list[str] = []
    for sample in stored:
        if total <= max_bytes:
            break
        if sample.path.name == keep:
            continue
        _remove(out_dir, sample.path)
        total -= sample.size
        removed.append(sample.path.name)
    return removed, total


def _remove(out_dir: Path, path: Path) -> None:
    # Renamed out of sight first, so a reader never meets a half-deleted sample.
    doomed = out_dir / f".evicted-{path.name}-{os.getpid()}-{threading.get_ident()}"
    try:
        os.rename(path, doomed)
    except FileNotFoundError:  # another process evicted it first
        return
    shutil.rmtree(doomed, ignore_errors=True)
