"""The replay write path (issue 15): a payload served from a golden journal is written as it
is, never scanned or validated again; a request body is scanned once, as sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.journal import redact
from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval.runner.session import journal_header


class CountingRedactor:
    """The default secrets redactor, counting what it is asked to look at."""

    scans_text = True
    redacts_as_recorded = True

    def __init__(self) -> None:
        self.inner = redact.secrets_redactor()
        self.seen: list[tuple[str, bool]] = []

    def __call__(
        self, event_type: str, payload: dict[str, Any], text: str | None = None
    ) -> dict[str, Any]:
        self.seen.append((event_type, text is not None))
        return self.inner(event_type, payload, text)


def _golden(tmp_path: Path) -> Any:
    with JournalWriter(tmp_path / "golden", journal_header("record", None)) as writer:
        writer.emit(
            "llm.response",
            {
                "provider": "p",
                "status": 200,
                "headers": {},
                "body": {"text": "hi " * 50},
                "latency_ms": 12.5,
            },
        )
        writer.emit(
            "tool.result",
            {
                "tool": "shell",
                "call_id": "c1",
                "ok": True,
                "result": {"out": "3M"},
                "latency_ms": 4.0,
            },
        )
    return read_journal(tmp_path / "golden")


def test_a_served_payload_is_written_verbatim_without_a_second_scan(tmp_path: Path) -> None:
    golden = _golden(tmp_path)
    redactor = CountingRedactor()
    with JournalWriter(
        tmp_path / "observed", journal_header("replay", None), redactor, durable=False
    ) as writer:
        writer.set_turn(3)
        served = [writer.emit_recorded(event) for event in golden.events]
    assert redactor.seen == [], "served payloads were redacted when recorded"
    assert [e.payload for e in served] == [e.payload for e in golden.events]
    pairs = zip(served, golden.events, strict=True)
    assert all(s.payload is g.payload for s, g in pairs), "shared, not copied"
    observed = read_journal(tmp_path / "observed").events
    assert [(e.seq, e.turn, e.payload_dict()) for e in observed] == [
        (1, 3, golden.events[0].payload_dict()),
        (2, 3, golden.events[1].payload_dict()),
    ]


def test_session_events_are_never_served_from_a_journal(tmp_path: Path) -> None:
    with JournalWriter(tmp_path / "golden", journal_header("record", None)) as writer:
        start = writer.emit(
            "session.start", {"engine": "e", "version": "1", "session_id": "s", "mode": "record"}
        )
    with (
        JournalWriter(None, journal_header("replay", None)) as writer,
        pytest.raises(ValueError, match="session.start"),
    ):
        writer.emit_recorded(start)


def test_a_request_is_scanned_once_on_its_text_as_sent_and_secrets_still_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "my key is sk-ant-abcdefghijklmnop"}],
    }
    sent = json.dumps(body)
    redactor = CountingRedactor()
    dumps = []
    real_dumps = json.dumps
    monkeypatch.setattr(
        redact.json, "dumps", lambda *a, **k: dumps.append(a) or real_dumps(*a, **k)
    )
    with JournalWriter(
        tmp_path / "observed", journal_header("replay", None), redactor, durable=False
    ) as writer:
        writer.emit(
            "llm.request",
            {
                "provider": "p",
                "api": "a",
                "method": "POST",
                "path": "/v1/messages",
                "stream": False,
                "body": json.loads(sent),
            },
            owned=True,
            text=sent,
        )
    assert redactor.seen == [("llm.request", True)]
    assert dumps == [], "the scan read the text it was given instead of serialising the payload"
    line = (tmp_path / "observed" / "events.jsonl").read_text()
    assert "sk-ant-" not in line and redact.REDACTED in line


def _exchange_journal(tmp_path: Path) -> Any:
    with JournalWriter(tmp_path / "golden", journal_header("record", None)) as writer:
        writer.emit(
            "llm.request",
            {
                "provider": "p",
                "api": "mock",
                "method": "POST",
                "path": "/mock",
                "stream": False,
                "body": {"messages": [{"role": "user", "text": "hi"}]},
            },
        )
        writer.emit(
            "llm.response",
            {
                "provider": "p",
                "status": 200,
                "headers": {},
                "body": {"text": "hello"},
                "latency_ms": 3.0,
            },
        )
    return read_journal(tmp_path / "golden")


def test_a_request_equal_to_the_recording_is_journaled_as_the_recorded_event(
    tmp_path: Path,
) -> None:
    from pytest_nodeval.journal.replay import ReplayStash

    golden = _exchange_journal(tmp_path)
    redactor = CountingRedactor()
    stash = ReplayStash(golden, case="c")
    with JournalWriter(
        tmp_path / "observed", journal_header("replay", None), redactor, durable=False
    ) as writer:
        response = stash.serve_llm(writer, "p", golden.events[0].payload_dict())
    assert response["body"] == {"text": "hello"}
    assert redactor.seen == [], "an equal request and the served response need no scan"
    assert writer.events[0].payload is golden.events[0].payload


def test_a_diverging_request_is_journaled_as_sent_before_the_replay_stops(tmp_path: Path) -> None:
    from pytest_nodeval.journal.replay import ReplayStash, ReplayStopped

    golden = _exchange_journal(tmp_path)
    stash = ReplayStash(golden, case="c")
    sent = {
        **golden.events[0].payload_dict(),
        "body": {"messages": [{"role": "user", "text": "bye"}]},
    }
    with (
        JournalWriter(
            tmp_path / "observed", journal_header("replay", None), durable=False
        ) as writer,
        pytest.raises(ReplayStopped),
    ):
        stash.serve_llm(writer, "p", sent)
    assert [e.type for e in writer.events] == ["llm.request"]
    assert writer.events[0].payload_dict()["body"] == sent["body"]


def test_a_request_sent_byte_for_byte_as_recorded_is_served_without_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Matched on the golden journal's own bytes: nothing is parsed, and the line is written as
    recorded."""
    from pytest_nodeval.journal import replay

    golden = _exchange_journal(tmp_path)
    request = golden.events[0]
    sent = json.dumps(request.payload_dict()["body"], separators=(",", ":")).encode()
    stash = replay.ReplayStash(golden, case="c")
    assert stash.serve_llm_exact(None, "p", "mock", "POST", "/mock", sent + b" ") is None, (
        "other bytes: parse"
    )
    parsed = []
    monkeypatch.setattr(replay.json, "loads", lambda *a, **k: parsed.append(a), raising=False)
    with JournalWriter(
        tmp_path / "observed", journal_header("replay", None), durable=False
    ) as writer:
        served = stash.serve_llm_exact(writer, "p", "mock", "POST", "/mock", sent)
    assert served is not None and served["body"] == {"text": "hello"} and parsed == []
    golden_lines = (tmp_path / "golden" / "events.jsonl").read_bytes().split(b"\n")[:2]
    observed_lines = (tmp_path / "observed" / "events.jsonl").read_bytes().split(b"\n")[:2]
    for golden_line, observed_line in zip(golden_lines, observed_lines, strict=True):
        assert observed_line.split(b',"payload":')[1] == golden_line.split(b',"payload":')[1], (
            "written as recorded"
        )
    assert [e.payload for e in read_journal(tmp_path / "observed").events] == [
        e.payload for e in golden.events[:2]
    ]


def test_a_served_exchange_is_not_serialised_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both payloads of an exchange go to the observed journal as the golden journal's text."""
    from pytest_nodeval.journal import replay
    from pytest_nodeval.journal.events import EVENT_MODELS

    golden = _exchange_journal(tmp_path)
    sent = golden.events[0].payload.model_dump()
    dumped = []
    for kind in ("llm.request", "llm.response"):
        model = EVENT_MODELS[kind]
        monkeypatch.setattr(
            model, "model_dump_json", lambda self, **k: dumped.append(self.type) or "{}"
        )
    stash = replay.ReplayStash(golden, case="c")
    with JournalWriter(
        tmp_path / "observed", journal_header("replay", None), durable=False
    ) as writer:
        stash.serve_llm(writer, "p", sent)
    assert dumped == []


def test_a_flat_payload_is_not_copied_through_json_and_its_strings_are_still_scanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_nodeval.journal import writer as writer_module

    dumps = []
    real_dumps = json.dumps
    monkeypatch.setattr(
        writer_module.json, "dumps", lambda *a, **k: dumps.append(a) or real_dumps(*a, **k)
    )
    monkeypatch.setattr(
        redact.json, "dumps", lambda *a, **k: dumps.append(a) or real_dumps(*a, **k)
    )
    with JournalWriter(
        tmp_path / "observed", journal_header("replay", None), durable=False
    ) as writer:
        writer.emit("io.output", {"text": "here it is: Bearer abcdefghijklmnop"})
        writer.emit("agent.turn.end", {"stop_reason": "end_turn"})
        # Nested: copied
        writer.emit("tool.call", {"tool": "shell", "call_id": "c1", "args": {"command": "ls"}})
    assert len(dumps) == 2, "only the nested payload went through JSON (scan + copy)"
    text = (tmp_path / "observed" / "events.jsonl").read_text()
    assert "abcdefghijklmnop" not in text and redact.REDACTED in text


def test_matching_a_request_never_dumps_the_recorded_one_to_a_dict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 40 KB request body dumped per call (and once more per event at seeding) cost more than
    the replay."""
    from pytest_nodeval.journal import replay
    from pytest_nodeval.journal.events import EVENT_MODELS

    golden = _exchange_journal(tmp_path)
    dumped = []
    request_model = EVENT_MODELS["llm.request"]
    monkeypatch.setattr(
        request_model, "payload_dict", lambda self: dumped.append(self.seq) or {}, raising=True
    )
    stash = replay.ReplayStash(golden, case="c")
    sent = golden.events[0].payload.model_dump()
    with JournalWriter(
        tmp_path / "observed", journal_header("replay", None), durable=False
    ) as writer:
        stash.serve_llm(writer, "p", sent)
    assert dumped == []


def test_a_stricter_redactor_still_sees_a_served_payload(tmp_path: Path) -> None:
    """Serving verbatim is only for the secrets redactor golden journals were written with."""
    with JournalWriter(tmp_path / "golden", journal_header("record", None)) as writer:
        writer.emit(
            "tool.result",
            {
                "tool": "crm",
                "call_id": "c1",
                "ok": True,
                "result": {"email": "ann@example.com"},
                "latency_ms": 1.0,
            },
        )
    golden = read_journal(tmp_path / "golden")
    with JournalWriter(
        tmp_path / "sample", journal_header("sample", None), redact.pii_redactor
    ) as writer:
        served = writer.emit_recorded(golden.events[0])
    assert served.payload_dict()["result"] == {"email": redact.REDACTED}
    assert "ann@example.com" not in (tmp_path / "sample" / "events.jsonl").read_text()


# -- a golden journal read for replay keeps its model payloads as text (issue 28) -----------


def _golden_exchange(tmp_path: Path) -> Path:
    _exchange_journal(tmp_path)
    with (tmp_path / "golden" / "events.jsonl").open("a") as lines:  # read_golden wants an end
        lines.write('{"seq":3,"ts":"t","type":"session.end","turn":0,"payload":{"status":"ok"}}\n')
    return tmp_path / "golden"


def test_a_golden_journal_keeps_model_payloads_as_their_text_parsed_when_read(
    tmp_path: Path,
) -> None:
    from pytest_nodeval.journal.events import RecordedPayload
    from pytest_nodeval.journal.reader import read_golden

    directory = _golden_exchange(tmp_path)
    request = read_golden(directory).events[0]
    parsed = read_journal(directory).events[0]
    payload = request.payload
    assert isinstance(payload, RecordedPayload)
    line = (directory / "events.jsonl").read_bytes().split(b"\n")[0]
    assert bytes(payload.raw) == line.split(b',"payload":')[1][:-1], "the line's own text"
    assert (payload.provider, payload.path) == ("p", "/mock")
    assert payload.body == {"messages": [{"role": "user", "text": "hi"}]}
    assert payload.body is not payload.body, "parsed when read, never kept"
    assert request.payload_dict() == parsed.payload_dict()
    assert request.payload_dict() is not request.payload_dict()
    assert payload == parsed.payload and request == read_golden(directory).events[0]


@pytest.mark.parametrize("as_is", [False, True], ids=["in the line", "as the golden bytes"])
def test_a_golden_journal_read_as_text_is_served_shared_and_written_as_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_is: bool
) -> None:
    from pytest_nodeval.journal import writer as writer_module
    from pytest_nodeval.journal.events import RecordedPayload
    from pytest_nodeval.journal.reader import read_golden
    from pytest_nodeval.journal.replay import ReplayStash, ReplayStopped

    if as_is:  # a payload of many megabytes: its bytes go to the file without a copy
        monkeypatch.setattr(writer_module, "WRITTEN_AS_IS", 1)
    golden = read_golden(_golden_exchange(tmp_path))
    assert all(isinstance(e.payload, RecordedPayload) for e in golden.events[:2])
    sent = json.dumps(golden.events[0].payload_dict()["body"], separators=(",", ":")).encode()
    with JournalWriter(
        tmp_path / "observed", journal_header("replay", None), durable=False
    ) as writer:
        served = ReplayStash(golden, case="c").serve_llm_exact(
            writer, "p", "mock", "POST", "/mock", sent
        )
        again = ReplayStash(golden, case="c").serve_llm(
            writer, "p", golden.events[0].payload_dict()
        )
        with pytest.raises(ReplayStopped, match=r"(?s)at seq 1 .*-.*\"hi\".*\+.*\"bye\""):
            request = {**golden.events[0].payload_dict(), "body": {"messages": [{"text": "bye"}]}}
            ReplayStash(golden, case="c", match="strict").serve_llm(writer, "p", request)
    assert served == again == {**golden.events[1].payload_dict()}
    assert [e.payload for e in writer.events[:4]] == [e.payload for e in golden.events[:2]] * 2
    assert all(
        s.payload is g.payload
        for s, g in zip(writer.events[:4], golden.events[:2] * 2, strict=True)
    ), "shared with the golden journal, not copied"
    golden_lines = (tmp_path / "golden" / "events.jsonl").read_bytes().split(b"\n")[:2]
    observed_lines = (tmp_path / "observed" / "events.jsonl").read_bytes().split(b"\n")[:4]
    for golden_line, observed_line in zip(golden_lines * 2, observed_lines, strict=True):
        assert observed_line.split(b',"payload":')[1] == golden_line.split(b',"payload":')[1]
    observed = read_journal(tmp_path / "observed").events
    assert [e.payload_dict() for e in observed[:4]] == [
        e.payload_dict() for e in golden.events[:2] * 2
    ]
