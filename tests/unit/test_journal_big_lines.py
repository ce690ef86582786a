"""A golden journal's line of megabytes (issue 28): validated without holding it and its parse
at once, left in its file, and compared and written back from there a chunk at a time."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.errors import JournalError
from pytest_nodeval.journal import ondisk, reader, transport
from pytest_nodeval.journal.events import EVENTS_FILE
from pytest_nodeval.journal.ondisk import DiskSlice, stamp_of
from pytest_nodeval.journal.reader import dump_events, read_golden, read_journal
from pytest_nodeval.journal.replay import ReplayStash, ReplayStopped
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval.runner.session import journal_header

LONG = "A" * 3000 + "MARK" + "B" * 3000
"""A message long enough, with the thresholds below, to be checked on its own."""


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines from 4 KB on are big and strings from 64 bytes on long; files read 100 bytes at a
    time: every chunk boundary of the reader and of DiskSlice is crossed."""
    monkeypatch.setattr(reader, "BIG_LINE", 4096)
    monkeypatch.setattr(reader, "LONG_STRING", 64)
    monkeypatch.setattr(reader, "CHUNK", 100)
    monkeypatch.setattr(ondisk, "CHUNK", 100)


def _golden(directory: Path, content: str = LONG, provider: str = "p") -> Path:
    request = {
        "provider": provider,
        "api": "anthropic.messages",
        "path": "/v1/messages",
        "body": {"model": "m", "messages": [{"role": "user", "content": content}]},
    }
    response = {"provider": provider, "body": {"content": [{"type": "text", "text": "hi"}]}}
    with JournalWriter(directory, journal_header("record", None)) as journal:
        journal.emit("session.start", {"engine": "e", "version": "1", "session_id": "s"})
        journal.emit("llm.request", request)
        journal.emit("llm.response", response)
        journal.emit("session.end", {"status": "ok"})
    return directory


def _sent_body(directory: Path) -> bytes:
    """What an SDK sends: the request body's JSON text as the golden line has it."""
    line = (directory / EVENTS_FILE).read_bytes().splitlines()[1]
    return line[line.index(b',"body":') + 8 : -2]


def _replay(
    directory: Path, observed: Path, body: bytes, *, lazy: bool = True, durable: bool = False
) -> list[str]:
    journal = read_journal(directory, whole=True, lazy=lazy)
    stash = ReplayStash(journal, case="big")
    with JournalWriter(observed, journal.header, durable=durable) as writer:
        served = stash.serve_llm_exact(
            writer, "p", "anthropic.messages", "POST", "/v1/messages", body
        )
        assert served == {**served, "body": {"content": [{"type": "text", "text": "hi"}]}}
    text = (observed / EVENTS_FILE).read_text(encoding="utf-8")
    return re.sub(r'"ts":"[^"]*"', '"ts":_', text).splitlines()


def test_a_big_line_is_left_in_its_file_and_served_from_it(
    small_thresholds: None, tmp_path: Path
) -> None:
    golden = _golden(tmp_path / "g")
    request, response = read_golden(golden).events[1:3]
    assert isinstance(request.payload.raw, DiskSlice)  # not the line's bytes
    assert isinstance(response.payload.raw, memoryview)  # a small line stays in memory
    assert request.payload.body["messages"][0]["content"] == LONG
    left = _replay(golden, tmp_path / "left", _sent_body(golden))
    held = _replay(golden, tmp_path / "held", _sent_body(golden), lazy=False)
    flushed = _replay(golden, tmp_path / "flushed", _sent_body(golden), durable=True)
    assert left == held == flushed
    assert LONG in left[0]


def test_a_body_that_differs_at_its_end_is_not_served_as_recorded(
    small_thresholds: None, tmp_path: Path
) -> None:
    golden = _golden(tmp_path / "g")
    stash = ReplayStash(read_golden(golden), case="big")
    body = _sent_body(golden)
    with JournalWriter(tmp_path / "o", read_golden(golden).header, durable=False) as writer:
        serve: Any = stash.serve_llm_exact
        where = (writer, "p", "anthropic.messages", "POST", "/v1/messages")
        assert serve(*where, body[:-1] + b"]") is None  # same length, another last byte
        assert serve(*where, body[:-1]) is None
        assert serve(*where, body) is not None


def test_a_golden_journal_changed_during_the_replay_stops_it_in_one_line(
    small_thresholds: None, tmp_path: Path
) -> None:
    golden = _golden(tmp_path / "g")
    stash = ReplayStash(read_golden(golden), case="big")
    with (golden / EVENTS_FILE).open("ab") as events:
        events.write(b"\n")
    header = read_golden(golden).header
    writer = JournalWriter(tmp_path / "o", header, durable=False)
    with writer, pytest.raises(ReplayStopped) as stopped:
        stash.serve_llm_exact(
            writer, "p", "anthropic.messages", "POST", "/v1/messages", _sent_body(golden)
        )
    message = str(stopped.value.divergence)
    assert message == (
        f"{golden / EVENTS_FILE}: changed on disk during the replay that reads it "
        f"(it was {(golden / EVENTS_FILE).stat().st_size - 1} bytes when read); run the replay "
        "again"
    )


def test_a_big_answer_left_in_its_file_reads_as_the_serialised_one(
    small_thresholds: None, tmp_path: Path
) -> None:
    import httpx2

    text = "é" * 5000
    with JournalWriter(tmp_path / "g", journal_header("record", None)) as journal:
        body = {"content": [{"type": "text", "text": text}]}
        journal.emit("llm.response", {"provider": "p", "headers": {"a": "1"}, "body": body})
    event = read_journal(tmp_path / "g", lazy=True).events[0]
    assert isinstance(event.payload.raw, DiskSlice)
    request = httpx2.Request("POST", "http://replay.invalid/v1/messages")
    prepared = transport._prepared_response(event.payload, event.payload.raw, request)
    assert prepared is not None
    assert (
        prepared.json() == body == transport.replayed_response(event.payload_dict(), request).json()
    )


def _outcome(directory: Path) -> tuple[str, Any]:
    try:
        return "read", dump_events(read_journal(directory, whole=True, lazy=True).events)
    except JournalError as exc:
        return "error", str(exc)


@pytest.mark.parametrize(
    ("mark", "provider"),
    [
        (b"MARK", "p"),
        (b"\\q", "p"),  # an escape JSON does not have
        (b"\\u12G4", "p"),
        (b"\x01", "p"),  # a control character
        (b"\\ud800", "p"),  # a surrogate alone
        (b"\\ud83d\\ude00", "p"),  # a pair: one character
        (b"\xff", "p"),  # not UTF-8
        (b"\xed\xa0\x80", "p"),  # an encoded surrogate
        (b'M"RK', "p"),  # a quote that ends the string early
        (b"MARK", "P" * 100),  # a long string in a field kept parsed
    ],
)
def test_a_line_validated_by_parts_reads_as_one_parsed_whole(
    small_thresholds: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mark: bytes,
    provider: str,
) -> None:
    golden = _golden(tmp_path / "g", provider=provider)
    path = golden / EVENTS_FILE
    path.write_bytes(path.read_bytes().replace(b"MARK", mark))
    by_parts = _outcome(golden)
    with monkeypatch.context() as patch:
        patch.setattr(reader, "_validated_by_parts", lambda line: None)
        whole = _outcome(golden)
    assert by_parts == whole
    if mark == b"MARK" and provider == "p":
        assert by_parts[0] == "read"


def test_a_torn_big_last_line_is_reported_as_a_torn_small_one(
    small_thresholds: None, tmp_path: Path
) -> None:
    golden = _golden(tmp_path / "g")
    path = golden / EVENTS_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2])[:-500])
    with pytest.raises(JournalError, match=r"events.jsonl:2: torn last line"):
        read_golden(golden)
    read = read_journal(golden, warn=lambda problem: None, lazy=True)
    assert [e.type for e in read.events] == ["session.start"]


def test_a_disk_slice_reads_finds_and_compares_as_its_bytes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ondisk, "CHUNK", 7)
    rng = random.Random(28)
    data = bytes(rng.choice(b"abc,:") for _ in range(500))
    path = tmp_path / "f"
    path.write_bytes(b"head" + data + b"tail")
    with path.open("rb") as file:
        whole = DiskSlice(path, 4, len(data), stamp_of(file.fileno()))
    for start, stop in [(0, 500), (3, 97), (250, 251), (490, 500)]:
        part = whole.sub(start, stop)
        expected = data[start:stop]
        assert bytes(part) == part[:] == expected and len(part) == len(expected)
        assert b"".join(part.chunks()) == expected
        assert part.same_as(expected) and not part.same_as(expected[:-1] + b"!")
        for needle in (b"a", b"ab,", b"c:a:b", b"::::::::", b"zz"):
            assert part.find(needle) == expected.find(needle)
            assert part.rfind(needle) == expected.rfind(needle)
            assert part.find(needle, 2, len(part) - 1) == expected.find(needle, 2, len(part) - 1)


PEAK = """
import sys
from pathlib import Path
from pytest_nodeval.journal.reader import read_golden
def peak():
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if "VmHWM" in l)
before = peak()
journal = read_golden(Path(sys.argv[1]))
print(peak() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_reading_a_line_of_20_mb_adds_less_than_one_and_a_half_times_it(tmp_path: Path) -> None:
    golden = _golden(tmp_path / "g", content="x" * 20_000_000)
    line = max(len(line) for line in (golden / EVENTS_FILE).open("rb"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(golden)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    # The line is held once while it is checked; parsed whole beside it, it was twice and more.
    assert int(done.stdout) < 1.5 * line


def test_a_golden_journal_changed_under_a_replay_is_the_machines_fault_not_a_divergence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The attempt stops with the one line and as an infrastructure error (run_case raises it
    once the agent has stopped), where a divergence would count against the agent."""
    from pytest_nodeval.case import directory
    from pytest_nodeval.case.directory import JournalCache, load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    scenario = tmp_path / "case"
    shutil.copytree(Path(__file__).parents[2] / "scenarios" / "hello-answer", scenario)
    (scenario / "input" / "inputs.yaml").write_text(
        f"user:\n  kind: scripted\n  inputs: [{LONG}]\n", encoding="utf-8"
    )
    recorded = run_case(load_case(scenario), AttemptSettings(mode="record"), tmp_path / "rec")
    assert recorded.status == "ok", recorded.metrics()
    monkeypatch.setattr(directory, "JOURNALS", JournalCache(max_bytes=0))  # read lazily
    monkeypatch.setattr(reader, "BIG_LINE", 4096)  # the request's line is left in the file
    monkeypatch.setattr(reader, "LONG_STRING", 64)

    def changed(self: DiskSlice) -> Any:
        raise self._changed()

    monkeypatch.setattr(DiskSlice, "_open", changed)
    case = load_case(scenario)
    with pytest.raises(JournalError) as stopped:
        run_case(case, AttemptSettings(mode="deterministic"), tmp_path / "observed")
    assert stopped.value.infrastructure
    assert "changed on disk during the replay that reads it" in str(stopped.value)
