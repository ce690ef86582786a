"""Reading journals back: parsed once, a torn last line reported by file and line.

Unknown event types (from a newer writer) are kept, with a warning; anything else that
cannot be used is a JournalError naming the file and the line.
"""

from __future__ import annotations

import codecs
import json
import re
import secrets
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

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
from .ondisk import CHUNK, DiskSlice, stamp_of


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

    _replay_seed: Any = PrivateAttr(default=None)
    """What every replay of the whole journal starts from (journal/replay.py), sorted out of
    the events once per journal read rather than once per attempt."""
    _tools_called: frozenset[str] | None = PrivateAttr(default=None)

    def of_type(self, *types: str) -> list[Event]:
        return [e for e in self.events if e.type in types]

    def tools_called(self) -> frozenset[str]:
        """The tools the journal's tool.call events name (found once per journal read)."""
        if self._tools_called is None:
            self._tools_called = frozenset(e.payload.tool for e in self.of_type("tool.call"))
        return self._tools_called


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
    offset = 0
    with path.open("rb") as lines:  # line by line: the file is never held whole beside its events
        stamp = stamp_of(lines.fileno())
        # A journal read whole (cached, observed) keeps its lines: only a lazy read lets go of
        # a long one, which is then worth reading in one piece.
        for number, line in enumerate(_lines(lines) if lazy else lines, start=1):
            start, offset = offset, offset + len(line)
            if line.isspace():  # not line.strip(), which copies the line
                continue
            torn = not line.endswith(b"\n")  # only the last line can lack its newline
            try:
                event = _validated_by_parts(line) if lazy and len(line) >= BIG_LINE else None
                left = event is not None  # validated without its lazy fields: left in the file
                if event is None:
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
                    text = DiskSlice(path, start, len(line), stamp) if left else line
                    payload = RecordedPayload(event.payload, text, span, LAZY_FIELDS[event.type])
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


BIG_LINE = 1 << 20
"""A golden journal's line from this size on is validated by parts and left in its file."""

LONG_STRING = 1 << 12
"""A string from this size on is checked on its own, not parsed, in a line validated by parts."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A JSON string as a JSON parser reads one from its opening quote (its escapes unchecked)."""

_VALID_CONTENT = re.compile(
    rb'[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u(?![dD][89a-fA-F])[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*'
)
"""What pydantic accepts between a string's quotes, less any surrogate escape (which must pair
up: such a string is left to pydantic)."""

_ELIDED = secrets.token_hex(8).encode()
"""What stands for a long string in a line validated by parts (no journal has it by chance)."""


def _lines(file: BinaryIO) -> Iterator[bytes]:
    """The file's lines as iterating it gives them, a long one read in one piece: readline
    gathers it from pieces and joins them, which holds it twice."""
    while line := file.readline(BIG_LINE):
        if len(line) == BIG_LINE and not line.endswith(b"\n"):
            start = file.tell() - len(line)
            del line
            length = BIG_LINE + _rest_of_line(file)
            file.seek(start)
            line = file.read(length)
        yield line


def _rest_of_line(file: BinaryIO) -> int:
    """How many bytes the line goes on for (its newline included), read a chunk at a time."""
    length = 0
    while chunk := file.read(CHUNK):
        end = chunk.find(b"\n")
        if end != -1:
            return length + end + 1
        length += len(chunk)
    return length


def _validated_by_parts(line: bytes) -> Event | None:
    """A big line's model event validated without parsing its long strings: None when it
    cannot be (then it is parsed whole, which also tells what is wrong with it).

    Parsed whole, a line of 50 MB is held twice at once: its bytes and the strings of its
    parse. Instead each long string is checked where it is (its escapes and characters; its
    UTF-8 with the line's, a megabyte at a time) and the line is parsed with a short
    stand-in for it. Exactly what a parse whole accepts: every quote of the line must start or
    end one of the strings found, so a JSON parser finds the same strings in both texts. The
    stand-ins may only be in the payload fields that are left unparsed (`LAZY_FIELDS`).
    """
    view, elided, at, after = memoryview(line), 0, 0, 0
    parts: list[bytes | memoryview] = []
    for match in _STRING.finditer(line):
        start, end = match.span()
        if line.find(b'"', after, start) != -1:  # a quote outside every string found
            return None
        after = end
        if end - start >= LONG_STRING:
            if not _VALID_CONTENT.fullmatch(line, start + 1, end - 1):
                return None
            parts += (view[at : start + 1], _ELIDED)
            elided += end - start
            at = end - 1
    if line.find(b'"', after) != -1 or elided < len(line) // 2:
        return None  # (mostly short strings: a parse whole costs little more)
    if not _utf8(view):
        return None
    parts.append(view[at:])
    try:
        event: Event = EVENT_ADAPTER.validate_json(b"".join(parts))
    except ValidationError:
        return None
    lazy = LAZY_FIELDS.get(event.type)
    kept = event.model_dump_json(exclude={"payload": set(lazy)}) if lazy else ""
    if lazy is None or _payload_span(line) is None or _ELIDED.decode() in kept:
        return None  # a long string in a field that is kept parsed
    return event


def _utf8(view: memoryview) -> bool:
    """Whether these bytes are UTF-8 as pydantic reads it, decoded a megabyte at a time."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for at in range(0, len(view), CHUNK):
            decoder.decode(view[at : at + CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


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
