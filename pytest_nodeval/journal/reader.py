"""Reading journals back: parsed once, a torn last line reported by file and line.

Unknown event types (from a newer writer) are kept, with a warning; anything else that
cannot be used is a JournalError naming the file and the line.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import JournalError, NodevalWarning
from .events import (
    EVENT_ADAPTER,
    EVENTS_FILE,
    HEADER_FILE,
    LAZY_FIELDS,
    Event,
    JournalHeader,
    RecordedPayload,
    UnknownEvent,
    share_fields_set,
)


class Journal(BaseModel):
    """A journal read back from disk."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    directory: Path
    header: JournalHeader
    if TYPE_CHECKING:
        events: list[Event]
    else:
        events: list[Any]  # validated one by one as they are read, not again by this model
    problems: list[str] = Field(default_factory=list)
    """Warnings raised while reading (a torn last line, unknown event types)."""
    raw_payloads: dict[int, bytes] = Field(default_factory=dict)
    """The JSON text of each llm.request and llm.response payload as written, by seq: replay
    compares an SDK's request body with it byte for byte before parsing anything, and writes
    both back to the observed journal as they are (see replay.ReplayStash). Empty in a golden
    journal, whose model payloads are that text (`RecordedPayload.raw`)."""

    def of_type(self, *types: str) -> list[Event]:
        return [e for e in self.events if e.type in types]


def read_golden(directory: Path, *, lazy: bool = True) -> Journal:
    """A case's golden journal: what replay serves, so it must be whole.

    An observed journal may end torn after a crash (read_journal warns and keeps what came
    before); a golden one that is empty, torn or has no session.end is an error, because a
    replay of it would pass or fail on a recording nobody made.

    lazy: its model payloads kept as their text (`RecordedPayload`), about half the memory;
    False for a journal read once and replayed many times, which then parses them only once.
    """
    journal = read_journal(directory, whole=True, lazy=lazy)
    path = directory / EVENTS_FILE
    if not journal.events:
        raise JournalError(
            f"{path}: no events (an empty golden journal); re-record it with "
            f"`nodeval record {directory.parent}`"
        )
    if not any(e.type == "session.end" for e in journal.events):
        raise JournalError(
            f"{path}: no session.end after seq {journal.events[-1].seq} (the recording was cut "
            f"off); re-record it with `nodeval record {directory.parent}`"
        )
    return journal


def read_journal(
    directory: Path,
    *,
    warn: Callable[[str], None] | None = None,
    whole: bool = False,
    lazy: bool = False,
) -> Journal:
    """Parse a journal directory once; raise JournalError naming the file for what is unusable.

    whole: a torn last line is an error too (a golden journal), not a warning.
    lazy: model payloads are kept as their text (`RecordedPayload`), each line still checked
    whole as it is read; the events list can be referred to weakly (`EventList`).
    """
    warn = warn or _warn
    header = read_header(directory)
    path = directory / EVENTS_FILE
    if not path.is_file():
        raise JournalError(f"{path}: missing (a journal needs {HEADER_FILE} and {EVENTS_FILE})")
    events: list[Event] = EventList()
    problems: list[str] = []
    raw_payloads: dict[int, bytes] = {}
    with path.open("rb") as lines:  # line by line: the file is never held whole beside its events
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            torn = not line.endswith(b"\n")  # only the last line can lack its newline
            try:
                event = EVENT_ADAPTER.validate_json(line)
            except ValidationError as exc:
                if torn and whole:
                    raise JournalError(
                        f"{path}:{number}: torn last line (the recording was cut off after "
                        f"{len(events)} events); re-record it with "
                        f"`nodeval record {directory.parent}`"
                    ) from None
                if torn:
                    problems.append(
                        f"{path}:{number}: torn last line ignored (the session was cut off); "
                        f"the {len(events)} events before it are used"
                    )
                    break
                raise JournalError(f"{path}:{number}: invalid event: {_first_error(exc)}") from None
            if events and event.seq <= events[-1].seq:
                raise JournalError(
                    f"{path}:{number}: seq {event.seq} does not follow seq {events[-1].seq}"
                )
            if event.type in LAZY_FIELDS:
                span = _payload_span(line)
                if lazy and span is not None:
                    payload = RecordedPayload(event.payload, line, span, LAZY_FIELDS[event.type])
                    # The event was just parsed and nothing else holds it: its payload is
                    # replaced in place rather than the (frozen) event rebuilt around it.
                    event.__dict__["payload"] = payload
                    share_fields_set(event)
                else:
                    raw_payloads[event.seq] = line[span[0] : span[1]] if span else b""
            if isinstance(event, UnknownEvent):
                problems.append(
                    f"{path}:{number}: unknown event type '{event.type}' kept as is "
                    "(written by a newer pytest-nodeval?)"
                )
            events.append(event)
    for problem in problems:
        warn(problem)
    # Constructed, not validated: every event was validated as it was read, and validation
    # would copy the EventList into a plain list.
    return Journal.model_construct(
        directory=directory,
        header=header,
        events=events,
        problems=problems,
        raw_payloads=raw_payloads,
    )


class EventList(list[Any]):
    """A journal's events, in a list that can be referred to weakly: the journal cache
    (case.directory.JournalCache) finds a big journal again while an attempt still holds it."""

    __slots__ = ("__weakref__",)


def _payload_span(line: bytes) -> tuple[int, int] | None:
    """Where the payload's JSON text is in a line the writer wrote:
    `{"seq":..,...,"payload":{...}}`; None in a line written otherwise."""
    end = len(line)
    while end and line[end - 1] in b" \t\r\n":  # not line.rstrip(), which copies the line
        end -= 1
    start = line.find(b',"payload":')
    return (start + 11, end - 1) if start != -1 and line[end - 1 : end] == b"}" else None


def read_header(directory: Path) -> JournalHeader:
    if not directory.is_dir():
        # A dataset row's journal is journal/<row>: its case directory is one level further up.
        case = directory.parent.parent if directory.parent.name == "journal" else directory.parent
        raise JournalError(f"{directory}: no journal here; record one with `nodeval record {case}`")
    path = directory / HEADER_FILE
    try:
        return JournalHeader.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise JournalError(f"{path}: missing") from None
    except ValidationError as exc:
        raise JournalError(
            f"{path}: {_first_error(exc)} (this reader knows schema_version 1)"
        ) from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


def _warn(message: str) -> None:
    warnings.warn(NodevalWarning(message), stacklevel=3)


def dump_events(events: list[Event]) -> list[dict[str, Any]]:
    """Events as plain JSON types (for reports and comparisons)."""
    return [_dumped(e) for e in events]


def _dumped(event: Event) -> dict[str, Any]:
    if not isinstance(event.payload, RecordedPayload):
        return dict(json.loads(event.model_dump_json()))
    head = {"seq": event.seq, "ts": event.ts, "type": event.type, "turn": event.turn}
    return {**head, "payload": json.loads(bytes(event.payload.raw))}
