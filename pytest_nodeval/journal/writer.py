"""Writing journals: events appended one flushed line at a time, files replaced atomically.

The writer appends and flushes each event and fsyncs at turn ends, so a killed process
leaves a valid prefix that the reader can use (a replayed journal, which can always be
replayed again, is written when it closes). Every payload goes through a redactor first,
except one served verbatim from a golden journal, which was redacted when it was recorded.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from ..errors import DiskFullError, disk_full, no_room
from .events import (
    EVENT_ADAPTER,
    EVENT_MODELS,
    EVENTS_FILE,
    HEADER_FILE,
    PAYLOADS,
    Event,
    JournalHeader,
    PayloadText,
    RecordedPayload,
    constructed,
    now_iso,
    same_json,
)
from .ondisk import DiskSlice
from .redact import Redactor, secrets_redactor

# Event types after which the writer fsyncs: a turn's work is durable once it has ended.
_DURABLE_AFTER = frozenset({"agent.turn.end", "session.end"})
# Events that describe this session itself, never a recorded one's.
_NOT_SERVABLE = frozenset({"session.start", "session.end"})
# Events of the engine's whose payload the recording fixes (tools as registered, the world's
# files at the end): in a replay, mostly the recorded event again (see GoldenEvents.same).
_SERVED_IF_SAME = frozenset({"tool.register", "world.snapshot"})


class JournalWriter:
    """Appends events to `<directory>/events.jsonl`, one flushed line at a time (durable).

    Every payload goes through the redactor before it is serialised, so secrets never
    reach the disk; the events kept in memory (`events`) are the redacted ones too.
    `durable=False`, for replayed sessions, which can always be replayed again: no fsync (it
    costs milliseconds on some disks), and the lines are kept and written at close.
    With `directory=None` the journal lives in memory only and nothing is written: what
    a production session uses, so the sampler decides what (if anything) reaches the disk.
    """

    def __init__(
        self,
        directory: Path | None,
        header: JournalHeader,
        redactor: Redactor | None = None,
        *,
        durable: bool = True,
        golden: GoldenEvents | None = None,
    ) -> None:
        self.directory = directory
        self.header = header
        self._golden = golden
        """A replay's golden journal: an engine event equal to the one recorded at its place
        is written as recorded (see GoldenEvents)."""
        self.events: list[Event] = []
        self._redactor = redactor or secrets_redactor()
        self._durable = durable
        self._turn = 0
        self._file: BinaryIO | None = None
        self._lock = threading.Lock()
        self._written = 0
        self._no_room: DiskFullError | None = None
        """Set once a write found no room: every later write and close() raise it again, so
        the session cannot end as if its journal were whole (an agent may swallow the first)."""
        self._pending: list[str | PayloadText] | None = None
        """A replayed journal's lines not written yet (see `_append`); None: written at once."""
        self._pending_size = 0
        if directory is None:
            return
        if durable:
            self._open()
            return
        # A replayed journal is opened when its first lines go out, at close for most: its
        # files cost a session's worth of small events, and nobody reads them before the end.
        # The directory is made now: a program's stderr is written beside the events.
        self._pending = []
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if no_room(exc):
                raise disk_full(exc, directory) from None
            raise

    def _open(self) -> None:
        directory = self.directory
        assert directory is not None
        try:
            if self._pending is None:  # a replayed journal's directory was made with the writer
                directory.mkdir(parents=True, exist_ok=True)
            write_atomic(
                directory / HEADER_FILE,
                self.header.model_dump_json(indent=2) + "\n",
                durable=self._durable,
                make_parent=False,
            )
            # Open for the writer's lifetime (closed by close()), so no `with` block. Binary:
            # lines are encoded as they go out, and served payloads are bytes already.
            self._file = open(directory / EVENTS_FILE, "wb")  # noqa: SIM115
        except OSError as exc:
            if no_room(exc):
                raise disk_full(exc, directory) from None
            raise

    @property
    def turn(self) -> int:
        return self._turn

    def set_turn(self, turn: int) -> None:
        self._turn = turn

    def redacted(self, text: str) -> str:
        """`text` as the redactor leaves it in an event, for what is kept beside the journal
        (a program's stderr)."""
        return str(self._redactor("io.output", {"text": text})["text"])

    def emit(
        self,
        type_name: str,
        payload: dict[str, Any],
        *,
        turn: int | None = None,
        owned: bool = False,
        text: str | None = None,
    ) -> Event:
        """Validate, redact, append and return one event.

        `owned=True`: the caller hands the payload over and never touches it again (say, a
        request body it just parsed), so it need not be copied through a JSON round trip.
        `text`: the payload's strings as the caller already has them serialised (an HTTP
        request body): the secret scan reads it instead of serialising the payload again.
        """
        if type_name not in PAYLOADS:
            raise ValueError(f"unknown event type {type_name!r}; known: {', '.join(PAYLOADS)}")
        golden = self._golden
        if golden is not None and type_name in _SERVED_IF_SAME and self._as_recorded():
            with self._lock:
                now = self._turn if turn is None else turn
                same = golden.same(len(self.events), type_name, now, payload)
                if same is not None:
                    return self._keep_served(EVENT_MODELS[type_name], same[0], now, same[1])
        scalars = _SCALAR_FIELDS.get(type_name)
        if scalars is not None and _as_declared(payload, scalars):
            return self._emit_declared(type_name, payload, turn, scalars)
        if not owned and _flat(payload):
            # Only immutable scalars: nothing the caller could change later, so no copy needed,
            # and the scan can read the strings as they are.
            owned = True
            if text is None:
                text = "\n".join(
                    f'"{key}":{value}' for key, value in payload.items() if isinstance(value, str)
                )
        if text is not None and getattr(self._redactor, "scans_text", False):
            redacted = self._redactor(type_name, payload, text)  # type: ignore[call-arg]
        else:
            redacted = self._redactor(type_name, payload)
        with self._lock:  # an agent's threads may call models at once: one seq each, in file order
            raw = {
                "seq": len(self.events) + 1,
                "ts": now_iso(),
                "type": type_name,
                "turn": self._turn if turn is None else turn,
                "payload": redacted,
            }
            # Serialise first, then validate the very line that is written: the event kept in
            # memory is what a reader will parse, and it shares no objects with the caller (an
            # agent's live message list, say, changes after the call).
            if owned:
                event = EVENT_ADAPTER.validate_python(raw)
            else:
                event = EVENT_ADAPTER.validate_json(
                    json.dumps(raw, ensure_ascii=False, default=str)
                )
            return self._keep(event)

    def _emit_declared(
        self,
        type_name: str,
        payload: dict[str, Any],
        turn: int | None,
        scalars: _ScalarFields,
    ) -> Event:
        """`emit` of a payload of scalars, each of the very type its field declares (the
        engine's turn markers, inputs and outputs): validation would return the payload as
        given, so the models are constructed around it, unvalidated and uncopied, and
        serialised as `emit` serialises them."""
        golden = self._golden
        if golden is not None and self._as_recorded():
            with self._lock:
                now = self._turn if turn is None else turn
                twin = golden.twin(len(self.events), type_name, now, payload, scalars)
                if twin is not None:
                    recorded, text = twin
                    return self._keep_served(EVENT_MODELS[type_name], recorded, now, text)
        text = "\n".join(f'"{key}":{value}' for key, value in payload.items() if type(value) is str)
        if getattr(self._redactor, "scans_text", False):
            redacted = self._redactor(type_name, payload, text)  # type: ignore[call-arg]
        else:
            redacted = self._redactor(type_name, payload)
        with self._lock:
            head = {"seq": len(self.events) + 1, "ts": now_iso(), "type": type_name}
            head["turn"] = self._turn if turn is None else turn
            if redacted is not payload and not _as_declared(redacted, scalars):
                return self._keep(EVENT_ADAPTER.validate_python({**head, "payload": redacted}))
            values = {
                name: redacted.get(name, default) for name, default in scalars.defaults.items()
            }
            written = self._file is not None or self._pending is not None
            line = _declared_line(head, values, scalars.keys) if written else None
            head["payload"] = constructed(PAYLOADS[type_name], values, set(redacted))
            event = constructed(EVENT_MODELS[type_name], head, _SERVED_FIELDS)
            return self._keep(event, line=line)

    def _as_recorded(self) -> bool:
        """Whether this writer's redactor leaves a recorded payload as it was recorded (the
        default one does; a stricter one must scan every event)."""
        return bool(getattr(self._redactor, "redacts_as_recorded", False))

    def _keep_served(
        self, model: type[Event], recorded: Event, turn: int, payload_text: PayloadText | str
    ) -> Event:
        """(Under the lock.) Keep an event of `recorded`'s payload with a new seq, time and
        turn, its line that payload's text as recorded. A replayed journal's line is kept as
        its three parts, the payload's text not copied: most events of a replay come here."""
        seq, ts, kind = len(self.events) + 1, now_iso(), recorded.type
        values = {"seq": seq, "ts": ts, "type": kind, "turn": turn, "payload": recorded.payload}
        # One fields set for every served event (events are frozen).
        event = constructed(model, values, _SERVED_FIELDS)
        if self._pending is None or self._no_room is not None or not payload_text:
            if isinstance(payload_text, str):
                return self._keep(event, line=_line_head(seq, ts, kind, turn) + payload_text + "}")
            return self._keep(event, payload_text)
        self._queue(_line_head(seq, ts, kind, turn), payload_text)
        self.events.append(event)
        return event

    def emit_recorded(
        self, recorded: Event, *, turn: int | None = None, raw_payload: PayloadText = b""
    ) -> Event:
        """Append an event whose payload is served verbatim from a golden journal.

        That payload was redacted and validated when it was recorded, and it is frozen
        (shared, never copied): only the new seq, time and turn are added. Nothing is scanned
        or parsed again, which is most of the cost of a replayed event. `raw_payload`: the
        payload's JSON text as the golden journal has it, written as is (not serialised again);
        a `RecordedPayload` brings its own.
        """
        if not raw_payload and isinstance(recorded.payload, RecordedPayload):
            raw_payload = recorded.payload.raw
        model = EVENT_MODELS.get(recorded.type)
        if model is None or recorded.type in _NOT_SERVABLE:
            raise ValueError(
                f"event type {recorded.type!r} cannot be served verbatim from a journal"
            )
        if not self._as_recorded():
            # A stricter redactor (the sampler's PII one, a user's) never saw this payload.
            return self.emit(recorded.type, recorded.payload_dict(), turn=turn)
        with self._lock:
            return self._keep_served(
                model, recorded, self._turn if turn is None else turn, raw_payload
            )

    def _keep(self, event: Event, raw_payload: PayloadText = b"", line: str | None = None) -> Event:
        """Append `event` and write its line: `line` when the caller built it already."""
        if self._file is not None or self._pending is not None:
            if raw_payload:  # the field order of model_dump_json, with the golden payload's text
                line = _line_head(event.seq, event.ts, event.type, event.turn)
                # Kept for later, the payload stays a view (written as bytes, never decoded).
                if self._pending is None and len(raw_payload) < WRITTEN_AS_IS:
                    text = bytes(raw_payload) if isinstance(raw_payload, DiskSlice) else raw_payload
                    line, raw_payload = line + str(text, "utf-8") + "}", b""
                self._append(line, event.type in _DURABLE_AFTER, raw_payload)
            else:
                if line is None:
                    line = event.model_dump_json()  # canonical: every field, defaults included
                self._append(line, event.type in _DURABLE_AFTER)
        self.events.append(event)
        return event

    def _append(self, line: str, turn_ended: bool, payload: PayloadText = b"") -> None:
        """Write `line` and a newline; with `payload`, the line's start, the payload's bytes as
        they are, and its closing brace."""
        if self._no_room is not None:
            raise self._no_room
        if self._pending is not None:
            self._queue(line, payload)
            return
        assert self._file is not None
        try:
            if payload:
                self._file.write(line.encode("utf-8"))
                _write_bytes(self._file, payload)
                self._file.write(b"}\n")
            else:
                self._file.write((line + "\n").encode("utf-8"))
            # Only a durable journal gets here (a replayed one keeps its lines): every event
            # flushed, an fsync at turn ends.
            self._file.flush()
            if turn_ended:
                os.fsync(self._file.fileno())
        except OSError as exc:
            self._fail(exc)
        self._written += len(line) + len(payload) + (2 if payload else 1)

    def _queue(self, line: str, payload: PayloadText | str = b"") -> None:
        """A replayed journal's line (`_append`), kept until close or until a megabyte has
        gathered: a served payload's text stays a view into the golden journal, not a copy."""
        assert self._pending is not None
        if payload:
            self._pending += (line, payload, "}\n")
        else:
            self._pending.append(line + "\n")
        size = len(line) + len(payload) + (2 if payload else 1)
        self._pending_size += size
        self._written += size
        if self._pending_size >= WRITTEN_AS_IS:
            self._write_pending()

    def _write_pending(self) -> None:
        """Open the replayed journal if it is not yet, and write out its lines kept so far."""
        assert self._pending is not None
        if self._file is None:
            self._open()
        assert self._file is not None
        chunks, self._pending, self._pending_size = self._pending, [], 0
        try:
            _write_runs(self._file, chunks)
            self._file.flush()
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> NoReturn:
        """Raise a failed write; one for lack of room as the one-line DiskFullError, for good."""
        if not no_room(exc):
            raise exc
        assert self.directory is not None
        self._no_room = disk_full(exc, self.directory / EVENTS_FILE, self._written, more=True)
        raise self._no_room from None

    def close(self) -> None:
        if self._pending is not None and self._no_room is None:
            self._write_pending()
            self._pending = None
        if self._file is None or self._file.closed:
            if self._no_room is not None:
                raise self._no_room
            return
        try:
            if self._no_room is None:
                self._file.flush()
                if self._durable:
                    os.fsync(self._file.fileno())
        except OSError as exc:
            self._fail(exc)
        finally:
            self._close_quietly()

    def _close_quietly(self) -> None:
        """Close the file even when its buffer cannot go out (the disk is full): the failure
        was raised already, and the descriptor must not stay open."""
        assert self._file is not None
        with suppress(OSError):
            self._file.close()
        if self._no_room is not None:
            raise self._no_room

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SERVED_FIELDS = {"seq", "ts", "type", "turn", "payload"}


def _write_runs(file: BinaryIO, chunks: list[str | PayloadText]) -> None:
    """Write pending lines, joined in one write between the golden lines left in their file
    (most journals have none), which are copied from it a chunk at a time."""
    run: list[bytes | memoryview] = []
    for chunk in chunks:
        if isinstance(chunk, DiskSlice):
            file.write(b"".join(run))
            run = []
            _write_bytes(file, chunk)
        else:
            run.append(chunk.encode("utf-8") if isinstance(chunk, str) else chunk)
    file.write(b"".join(run))


def _write_bytes(file: BinaryIO, payload: PayloadText) -> None:
    """Write a payload's text; one left in the golden journal's file a chunk at a time."""
    for chunk in payload.chunks() if isinstance(payload, DiskSlice) else (payload,):
        file.write(chunk)


WRITTEN_AS_IS = 1 << 20
"""A served payload's text from this size on is written as the golden journal's bytes, never
decoded into the line: a line of many megabytes would be copied three times on its way out."""

_SCALARS = (str, int, bool, type(None))


def _scalar_types(annotation: Any) -> frozenset[type] | None:
    """The types a field of this annotation keeps as given when validated; None for others."""
    if annotation in (str, int, bool, float):
        return frozenset({annotation})
    if annotation == (str | None):
        return frozenset({str, type(None)})
    return None


@dataclass(frozen=True, slots=True)
class _ScalarFields:
    """A payload model whose fields are all scalars, as validation sees them."""

    types: dict[str, frozenset[type]]
    """The exact types each field keeps as given (an int for a float field is converted and a
    str subclass is not `str`: those are validated)."""
    defaults: dict[str, Any]
    """Every field in declaration order, with its default (immutable: a scalar)."""
    required: frozenset[str]
    keys: tuple[str, ...]
    """Each field's name as JSON with its colon, in declaration order (`_declared_line`)."""


def _scalar_fields(model: type[Any]) -> _ScalarFields | None:
    decorators = model.__pydantic_decorators__
    if decorators.field_validators or decorators.model_validators:
        return None  # validation would run code of the model's own: never skipped
    types: dict[str, frozenset[type]] = {}
    for name, info in model.model_fields.items():
        # A constrained field (`ge=1`) is validated, to refuse a value that breaks it.
        plain = not (info.metadata or info.default_factory or info.alias)
        kept = _scalar_types(info.annotation) if plain else None
        if kept is None:
            return None
        types[name] = kept
    fields = model.model_fields.items()
    return _ScalarFields(
        types,
        {name: None if info.is_required() else info.default for name, info in fields},
        frozenset(name for name, info in fields if info.is_required()),
        tuple(f"{encode_basestring(name)}:" for name in model.model_fields),
    )


def _declared_line(
    head: dict[str, Any], values: dict[str, Any], keys: tuple[str, ...]
) -> str | None:
    """The line `model_dump_json` writes for an event of declared scalars, built by hand (the
    engine writes three or four a turn); None for a value it is not proven for (anything but a
    str or None, a turn that is not an int) and for a string JSON cannot carry (a lone
    surrogate: pydantic refuses it), which then take `model_dump_json`.

    Pydantic's JSON and `encode_basestring` escape strings alike (`"`, `\\`, the short forms
    and `\\u00xx` for the control characters, nothing else): tests/unit/test_journal_lines.py
    compares the two for every event type `emit` constructs.
    """
    turn = head["turn"]
    if type(turn) is not int:
        return None
    payload = _declared_payload(values, keys)
    if payload is None:
        return None
    return _line_head(head["seq"], head["ts"], head["type"], turn) + payload + "}"


def _line_head(seq: int, ts: str, kind: str, turn: int) -> str:
    """An event's line up to its payload's text, in the field order of `model_dump_json`."""
    return f'{{"seq":{seq},"ts":"{ts}","type":"{kind}","turn":{turn},"payload":'


def _declared_payload(values: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The payload's part of `_declared_line`: its JSON object, or None."""
    fields = []
    for key, value in zip(keys, values.values(), strict=True):
        if type(value) is str:
            fields.append(key + encode_basestring(value))
        elif value is None:
            fields.append(key + "null")
        else:
            return None
    text = f"{{{','.join(fields)}}}"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return text


class GoldenEvents:
    """A golden journal's events as the writers of its replays look them up.

    The engine's own events of declared scalars (turn starts and ends, inputs, outputs) in a
    replay are mostly the recorded ones again, at the same place: an event of the same type
    and turn whose payload, its defaults filled in, equals the recorded payload is written as
    that one (`JournalWriter._keep_served`): its payload model shared, its text made once per
    golden journal, nothing scanned, constructed or serialised again. The line is the one the
    writer would build (the same `_declared_payload` of equal values). As for the model's
    answers served verbatim, the scan that is skipped is the one made when it was recorded;
    a writer with a stricter redactor than the default scans every event (see `emit`).
    """

    __slots__ = ("_dumps", "_texts", "events")

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self._texts: dict[int, str | None] = {}
        """By index: the payload's text as written, None where it has none (not str/None)."""
        self._dumps: dict[int, tuple[dict[str, Any], str]] = {}
        """By index, for `same`: the payload as JSON values and as its text."""

    def twin(
        self, index: int, type_name: str, turn: int, payload: dict[str, Any], fields: _ScalarFields
    ) -> tuple[Event, str] | None:
        """The recorded event at `index` and its payload's text, if the event about to be
        written there (`type_name`, `turn`, `payload`) is equal to it; None otherwise."""
        if index >= len(self.events) or type_name in _NOT_SERVABLE:
            return None
        recorded = self.events[index]
        if recorded.type != type_name or recorded.turn != turn:
            return None
        model = recorded.payload
        if isinstance(model, RecordedPayload) or model.__pydantic_extra__:
            return None
        values = {name: payload.get(name, default) for name, default in fields.defaults.items()}
        if model.__dict__ != values:  # str and None only below: equal values, equal text
            return None
        text = self._texts.get(index, "")
        if text == "":
            text = self._texts[index] = _declared_payload(values, fields.keys)
        return None if text is None else (recorded, text)

    def same(
        self, index: int, type_name: str, turn: int, payload: dict[str, Any]
    ) -> tuple[Event, str] | None:
        """The recorded event at `index` and its payload's text, if the event about to be
        written there (`type_name`, `turn`, `payload`) has the recorded payload's every field,
        each the same JSON (`same_json`: equal values of the same types, dicts in the same key
        order); None otherwise. Validated and serialised, such a payload is the recorded one
        again, and its line the recorded payload's text (extra fields included): `emit` hands
        over the recorded event instead. The scan skipped is the one made when it was recorded,
        as in `twin`."""
        if index >= len(self.events):
            return None
        recorded = self.events[index]
        if recorded.type != type_name or recorded.turn != turn:
            return None
        model = recorded.payload
        if isinstance(model, RecordedPayload):
            return None
        known = self._dumps.get(index)
        if known is None:
            known = self._dumps[index] = (model.model_dump(mode="json"), model.model_dump_json())
        values, text = known
        if payload.keys() != values.keys():
            return None
        extra = model.__pydantic_extra__
        if extra and [key for key in payload if key in extra] != list(extra):
            return None  # validated, the extra fields keep the order they came in
        for key, value in values.items():
            if not same_json(value, payload[key]):
                return None
        return recorded, text


_SCALAR_FIELDS = {
    name: fields
    for name, model in PAYLOADS.items()
    if (fields := _scalar_fields(model)) is not None
}
"""The event types whose payload fields are all scalars, which `emit` need not validate."""


def _as_declared(payload: dict[str, Any], fields: _ScalarFields) -> bool:
    """Whether validation would keep `payload` as it is: every required field and no other,
    each of its exact type, and no float that JSON cannot carry."""
    types = fields.types
    for key, value in payload.items():
        kept = types.get(key)
        if kept is None or type(value) not in kept:
            return False
        if type(value) is float and not math.isfinite(value):
            return False
    return fields.required.issubset(payload)


def _flat(payload: dict[str, Any]) -> bool:
    """Whether every value is an immutable JSON scalar (a finite float included)."""
    for value in payload.values():
        if type(value) in _SCALARS:
            continue
        if type(value) is float and math.isfinite(value):
            continue
        return False
    return True


def write_atomic(path: Path, text: str, *, durable: bool = True, make_parent: bool = True) -> None:
    """Write a file so that readers see the old or the new content, never a torn one.

    A write that fails leaves no temporary file behind; one that found no room raises
    DiskFullError (an OSError) naming the file and the space it needed. `make_parent=False`:
    the caller has made its directory.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = text.encode("utf-8")
    try:
        if make_parent:
            path.parent.mkdir(parents=True, exist_ok=True)
        # Descriptor calls, not a text file object: every replayed attempt writes a header
        # this way, and building the object's layers cost more than the system calls.
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            _write_all(descriptor, data)
            if durable:
                os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if no_room(exc):
            raise disk_full(exc, path, len(data)) from None
        raise


def _write_all(descriptor: int, data: bytes) -> None:
    """os.write until every byte is out (one call writes fewer only when interrupted)."""
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


STAGING_PREFIX = ".journal.new-"
_RECORDING: set[Path] = set()
"""Staging directories this process is recording into (see `recording_beside`): never stale."""


def staging_dir(target: Path) -> Path:
    """Where this process stages a new journal for `target`: beside it, on the same disk."""
    return target.with_name(f"{STAGING_PREFIX}{os.getpid()}")


@contextmanager
def recording_beside(target: Path) -> Iterator[Path]:
    """A fresh directory beside `target` to record a journal into, removed on the way out
    unless `install_staged` moved it into place: on success, failure, Ctrl-C or SIGTERM (once
    it is an exception), nothing is left behind. Recording there, not in the temp directory,
    means installing is a rename: no copy, and no second journal's worth of disk.
    """
    recover_journal(target)
    staging = staging_dir(target)
    shutil.rmtree(staging, ignore_errors=True)
    _RECORDING.add(staging)
    try:
        yield staging
    finally:
        _RECORDING.discard(staging)
        shutil.rmtree(staging, ignore_errors=True)


def install_staged(staging: Path, target: Path) -> None:
    """Put a journal recorded into `staging` (see `recording_beside`) in place of `target`."""
    try:
        _sync_tree(staging)
    except OSError as exc:
        if no_room(exc):
            raise disk_full(exc, target, _tree_size(staging)) from None
        raise
    _swap_in(staging, target)


def install_journal(source: Path, target: Path) -> None:
    """Replace a case's journal directory with a freshly recorded one, never leaving it torn.

    The new journal is copied (and synced) beside the old one, the old one renamed aside,
    the new one renamed into place, the old one removed. A process killed between the two
    renames leaves no `journal/` but a complete `.journal.old-*`: `recover_journal` (run by
    the next install and by every golden-journal read) puts it back. A copy that fails (a
    full disk: DiskFullError, saying how much room the journal needs) is removed, and the old
    journal stays.
    """
    recover_journal(target)
    staging = staging_dir(target)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _copy_journal(source, staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _swap_in(staging, target)


def _copy_journal(source: Path, staging: Path, target: Path) -> None:
    needed = _tree_size(source)
    free = shutil.disk_usage(staging.parent).free
    try:
        if free < needed:  # refuse before writing anything rather than fill the disk
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(staging))
        shutil.copytree(source, staging)  # its shutil.Error says ENOSPC only in text: no_room
        _sync_tree(staging)
    except OSError as exc:
        if no_room(exc):
            raise disk_full(exc, target, needed) from None
        raise


def _swap_in(staging: Path, target: Path) -> None:
    old = target.with_name(f".journal.old-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    _sync_dir(target.parent)
    shutil.rmtree(old, ignore_errors=True)


def _tree_size(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir() if path.is_file())


def recover_journal(target: Path) -> bool:
    """Undo an install a killed process left half done; True when a journal was put back.

    With `journal/` in place, leftovers of killed installs are only removed. Without it, the
    newest `.journal.old-*` (the journal as it was before the install) becomes `journal/`
    again: the recording that was being installed is dropped, never half used.
    """
    if not target.parent.is_dir():
        return False
    leftovers = sorted(target.parent.glob(".journal.old-*"), key=lambda p: p.stat().st_mtime_ns)
    restored = False
    if not target.exists() and leftovers:
        os.replace(leftovers.pop(), target)
        restored = True
    for stale in [*leftovers, *target.parent.glob(f"{STAGING_PREFIX}*")]:
        if stale not in _RECORDING and not _owned_by_live_process(stale):
            shutil.rmtree(stale, ignore_errors=True)
    return restored


def _owned_by_live_process(path: Path) -> bool:
    pid = path.name.rpartition("-")[2]
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sync_tree(directory: Path) -> None:
    for path in directory.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    _sync_dir(directory)


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
