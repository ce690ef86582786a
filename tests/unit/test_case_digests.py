"""Record modes (issue 30): a recording's header keeps digests of its case's files, which tell
`--nodeval-record-mode=missing` a current journal from a stale one; a recording that differs
from the journal in its header alone rewrites the header, never the events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_nodeval.case.digests import case_digests, file_digest, journal_staleness
from pytest_nodeval.journal.events import EngineInfo, JournalHeader
from pytest_nodeval.journal.sameness import (
    describe_changes,
    header_change_only,
    recording_change,
    refresh_header,
)


def _case(root: Path) -> Path:
    directory = root / "hello"
    (directory / "input" / "world" / "docs").mkdir(parents=True)
    (directory / "case.yaml").write_text("id: hello\n")
    (directory / "assertions.yaml").write_text("- kind: output_contains\n  text: hi\n")
    (directory / "input" / "config.yaml").write_text("system_prompt: Be kind.\n")
    (directory / "input" / "inputs.yaml").write_text("user: {kind: scripted, inputs: [hi]}\n")
    (directory / "input" / "world" / "docs" / "a.txt").write_text("seed\n")
    (directory / "input" / "__pycache__").mkdir()
    (directory / "input" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (directory / "notes.md").write_text("not a case file\n")
    return directory


def _journal(directory: Path, digests: dict[str, str] | None, events: str = "") -> Path:
    header = JournalHeader(
        session_id="s1",
        created_at="2026-12-01T00:00:00Z",
        engine=EngineInfo(version="1"),
        source="record",
        case_digests=digests,
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "header.json").write_text(header.model_dump_json(indent=2) + "\n")
    (directory / "events.jsonl").write_text(
        events
        or '{"seq":1,"ts":"2026-12-01T00:00:00Z","type":"io.input","payload":{"text":"hi"}}\n'
    )
    return directory


def test_the_digests_name_the_case_files_in_order_and_nothing_else(tmp_path: Path) -> None:
    digests = case_digests(_case(tmp_path))
    assert list(digests) == [
        "assertions.yaml",
        "case.yaml",
        "input/config.yaml",
        "input/inputs.yaml",
        "input/world/docs/a.txt",
    ]
    assert all(value.startswith("sha256:") and len(value) == 23 for value in digests.values())


def test_a_digest_is_of_the_bytes_with_line_endings_read_as_lf(tmp_path: Path) -> None:
    one, two, other = tmp_path / "one", tmp_path / "two", tmp_path / "other"
    one.write_bytes(b"id: hello\nname: x\n")
    two.write_bytes(b"id: hello\r\nname: x\r\n")  # a checkout with autocrlf
    other.write_bytes(b"id: hello\nname: y\n")
    assert file_digest(one) == file_digest(two) != file_digest(other)


def test_editing_one_file_changes_its_digest_alone(tmp_path: Path) -> None:
    directory = _case(tmp_path)
    before = case_digests(directory)
    assert case_digests(directory) == before  # deterministic: no churn
    (directory / "assertions.yaml").write_text("- kind: output_contains\n  text: hello\n")
    after = case_digests(directory)
    assert {k for k in before if before[k] != after[k]} == {"assertions.yaml"}


def test_a_journal_is_current_while_its_files_are_those_it_was_recorded_from(
    tmp_path: Path,
) -> None:
    directory = _case(tmp_path)
    assert journal_staleness(directory) == "no journal"
    _journal(directory / "journal", case_digests(directory))
    assert journal_staleness(directory) is None
    (directory / "assertions.yaml").write_text("[]\n")
    (directory / "input" / "web.yaml").write_text("pages: []\n")
    assert journal_staleness(directory) == "assertions.yaml edited, input/web.yaml added"
    (directory / "input" / "world" / "docs" / "a.txt").unlink()
    assert journal_staleness(directory) == (
        "assertions.yaml edited, input/web.yaml added, input/world/docs/a.txt removed"
    )


def test_a_journal_recorded_before_digests_existed_counts_as_current(tmp_path: Path) -> None:
    directory = _case(tmp_path)
    _journal(directory / "journal", None)
    assert "case_digests" not in (directory / "journal" / "header.json").read_text()
    assert journal_staleness(directory) is None
    (directory / "journal" / "header.json").write_text("{not json")
    assert journal_staleness(directory) == "its journal's header.json cannot be read"


def test_many_changes_are_said_briefly() -> None:
    before = {f"input/{n}.yaml": "sha256:1" for n in "abcde"}
    after = {name: "sha256:2" for name in before}
    assert describe_changes(before, after) == (
        "input/a.yaml edited, input/b.yaml edited, input/c.yaml edited and 2 more"
    )
    assert describe_changes(before, before) is None


def test_a_recording_that_differs_in_its_digests_alone_rewrites_only_the_header(
    tmp_path: Path,
) -> None:
    journal = _journal(tmp_path / "journal", {"assertions.yaml": "sha256:1"})
    events = (journal / "events.jsonl").read_bytes()
    later = '{"seq":1,"ts":"2026-12-09T00:00:00Z","type":"io.input","payload":{"text":"hi"}}\n'
    recording = _journal(tmp_path / "recording", {"assertions.yaml": "sha256:2"}, later)
    header = json.loads((recording / "header.json").read_text())
    header.update(session_id="s2", created_at="2026-12-09T00:00:00Z")
    (recording / "header.json").write_text(json.dumps(header))
    assert recording_change(journal, recording) == (
        "changed: header.json case_digests (assertions.yaml edited)"
    )
    assert header_change_only(journal, recording)
    refresh_header(journal, recording)
    assert (journal / "events.jsonl").read_bytes() == events
    refreshed = JournalHeader.model_validate_json((journal / "header.json").read_bytes())
    assert refreshed.case_digests == {"assertions.yaml": "sha256:2"}
    assert (refreshed.session_id, refreshed.created_at) == ("s1", "2026-12-01T00:00:00Z")
    assert recording_change(journal, recording) is None


def test_a_recording_whose_events_differ_is_no_header_change(tmp_path: Path) -> None:
    journal = _journal(tmp_path / "journal", {"assertions.yaml": "sha256:1"})
    other = '{"seq":1,"ts":"2026-12-09T00:00:00Z","type":"io.input","payload":{"text":"yo"}}\n'
    recording = _journal(tmp_path / "recording", {"assertions.yaml": "sha256:2"}, other)
    assert recording_change(journal, recording) == "changed: seq 1 io.input at payload.text"
    assert not header_change_only(journal, recording)
    assert not header_change_only(tmp_path / "absent", recording)


def test_an_unreadable_seed_file_is_named_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _case(tmp_path)
    seed = directory / "input" / "world" / "docs" / "a.txt"
    read_bytes = Path.read_bytes

    def refused(path: Path) -> bytes:
        # A mode of 0 stops no root process (CI runs as root): the refusal is simulated.
        if path == seed:
            raise PermissionError(13, "Permission denied")
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refused)
    digests = case_digests(directory)
    assert digests["input/world/docs/a.txt"] == "unreadable: Permission denied"
    assert digests["case.yaml"].startswith("sha256:")
