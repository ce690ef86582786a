from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_nodeval.errors import JournalError, NodevalWarning
from pytest_nodeval.journal.events import EVENT_MODELS, UnknownEvent
from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval.runner.session import journal_header


def _write(directory: Path, events: list[tuple[str, dict]]) -> JournalWriter:
    writer = JournalWriter(directory, journal_header("record", None))
    for type_name, payload in events:
        writer.emit(type_name, payload)
    writer.close()
    return writer


BASIC = [
    ("session.start", {"engine": "e", "version": "1", "session_id": "s"}),
    ("io.input", {"text": "hello", "source": "scripted"}),
    ("tool.call", {"tool": "shell", "call_id": "c1", "args": {"command": "ls"}}),
    ("tool.result", {"tool": "shell", "call_id": "c1", "ok": True, "result": {"stdout": "a\n"}}),
    ("session.end", {"status": "ok"}),
]


def test_round_trip_keeps_types_order_and_payloads(tmp_path: Path) -> None:
    writer = _write(tmp_path / "j", BASIC)
    journal = read_journal(tmp_path / "j")
    assert [e.type for e in journal.events] == [t for t, _ in BASIC]
    assert [e.seq for e in journal.events] == [1, 2, 3, 4, 5]
    assert journal.events[2].payload.args == {"command": "ls"}
    assert journal.events == writer.events
    assert journal.header.schema_version == 1


def test_every_event_type_has_its_own_model() -> None:
    assert {
        "session.start",
        "io.ask.response",
        "llm.response",
        "world.snapshot",
        "eval.candidate",
        "skill.discover",
        "plan.created",
        "plan.result",
        "session.live_from",
    } <= set(EVENT_MODELS)
    assert len(EVENT_MODELS) == 22


def test_lines_have_the_documented_field_order(tmp_path: Path) -> None:
    _write(tmp_path / "j", BASIC[:1])
    line = (tmp_path / "j" / "events.jsonl").read_text().splitlines()[0]
    assert list(json.loads(line)) == ["seq", "ts", "type", "turn", "payload"]


def test_torn_last_line_is_reported_and_the_prefix_kept(tmp_path: Path) -> None:
    _write(tmp_path / "j", BASIC)
    events = tmp_path / "j" / "events.jsonl"
    events.write_bytes(events.read_bytes()[:-25])  # cut mid-line, as a killed writer would
    with pytest.warns(NodevalWarning, match=r"events.jsonl:5: torn last line"):
        journal = read_journal(tmp_path / "j")
    assert [e.seq for e in journal.events] == [1, 2, 3, 4]


def test_a_broken_line_in_the_middle_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    _write(tmp_path / "j", BASIC)
    events = tmp_path / "j" / "events.jsonl"
    lines = events.read_text().splitlines()
    lines[1] = lines[1][:20]
    events.write_text("\n".join(lines) + "\n")
    with pytest.raises(JournalError, match=r"events.jsonl:2: invalid event"):
        read_journal(tmp_path / "j")


def test_unknown_event_types_are_kept_with_a_warning(tmp_path: Path) -> None:
    _write(tmp_path / "j", BASIC[:2])
    events = tmp_path / "j" / "events.jsonl"
    with events.open("a") as handle:
        handle.write(
            json.dumps(
                {"seq": 3, "ts": "t", "type": "memory.write", "turn": 1, "payload": {"k": 1}}
            )
            + "\n"
        )
    with pytest.warns(NodevalWarning, match=r"events.jsonl:3: unknown event type 'memory.write'"):
        journal = read_journal(tmp_path / "j")
    assert isinstance(journal.events[-1], UnknownEvent)
    assert journal.events[-1].payload == {"k": 1}


def test_missing_journal_names_the_directory_and_how_to_record(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match=r"no journal here; record one with `nodeval record"):
        read_journal(tmp_path / "case" / "journal")


def test_header_of_an_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "j", BASIC[:1])
    header = tmp_path / "j" / "header.json"
    header.write_text(header.read_text().replace('"schema_version": 1', '"schema_version": 7'))
    with pytest.raises(JournalError, match=r"header.json: schema_version"):
        read_journal(tmp_path / "j")


def test_seq_must_increase(tmp_path: Path) -> None:
    _write(tmp_path / "j", BASIC[:2])
    events = tmp_path / "j" / "events.jsonl"
    first = events.read_text().splitlines()[0]
    events.write_text(events.read_text() + first + "\n")
    with pytest.raises(JournalError, match=r":3: seq 1 does not follow seq 2"):
        read_journal(tmp_path / "j")


def test_the_writer_refuses_types_it_does_not_define(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path / "j", journal_header("record", None))
    with pytest.raises(ValueError, match="unknown event type 'made.up'"):
        writer.emit("made.up", {})


def test_secrets_never_reach_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_API_KEY", "acme-live-7f3a9c2e1b")
    _write(
        tmp_path / "j",
        [
            (
                "llm.response",
                {
                    "provider": "p",
                    "headers": {"content-type": "application/json"},
                    "body": {
                        "note": "key sk-ant-api03-abcdefghijklmnop and Bearer abc.def.ghijkl",
                        "Authorization": "Bearer xyz",
                        "echo": "acme-live-7f3a9c2e1b",
                    },
                },
            ),
            (
                "tool.result",
                {
                    "tool": "t",
                    "call_id": "c",
                    "ok": True,
                    "result": {"cookie": "sid=123", "x-api-key": "k"},
                },
            ),
        ],
    )
    text = (tmp_path / "j" / "events.jsonl").read_text()
    for secret in (
        "sk-ant-api03",
        "abc.def.ghijkl",
        "Bearer xyz",
        "acme-live-7f3a9c2e1b",
        "sid=123",
    ):
        assert secret not in text
    assert text.count("[REDACTED]") == 6


def test_a_writer_without_a_directory_keeps_the_journal_in_memory_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    writer = JournalWriter(None, journal_header("live", None))
    for type_name, payload in BASIC:
        writer.emit(type_name, payload)
    writer.close()
    assert [e.seq for e in writer.events] == [1, 2, 3, 4, 5]
    assert list(tmp_path.iterdir()) == []
