"""Re-recording without churn (issue 30): a recording that says what the journal in place says,
apart from ids and clocks, is told apart from one that changed, and says where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_nodeval.agent.config import EngineConfig
from pytest_nodeval.journal.sameness import recording_change

START = {"engine": "pytest-nodeval", "session_id": "a1", "mode": "record"}
REQUEST = {"provider": "mock", "body": {"system": "Be kind.", "messages": ["hi"]}}
RESPONSE = {"provider": "mock", "status": 200, "headers": {"request-id": "r1"}, "latency_ms": 3.1}


Events = list[tuple[str, dict[str, Any]]]


def _journal(root: Path, name: str, events: Events, **header: Any) -> Path:
    directory = root / name
    directory.mkdir()
    head = {"schema_version": 1, "session_id": "a1", "created_at": "2026-12-01T00:00:00Z"}
    (directory / "header.json").write_text(json.dumps({**head, **header}))
    lines = [
        json.dumps({"seq": seq, "ts": f"2026-12-0{seq}T00:00:00Z", "type": kind, "payload": p})
        for seq, (kind, p) in enumerate(events, start=1)
    ]
    (directory / "events.jsonl").write_text("".join(line + "\n" for line in lines))
    return directory


def _session(**changes: Any) -> Events:
    body: dict[str, Any] = {**REQUEST["body"], **changes}  # type: ignore[dict-item]
    request = {**REQUEST, "body": body}
    return [("session.start", START), ("llm.request", request), ("llm.response", RESPONSE)]


def test_ids_clocks_durations_and_response_headers_are_no_change(tmp_path: Path) -> None:
    before = _journal(tmp_path, "before", _session())
    later: Events = [
        ("session.start", {**START, "session_id": "b2"}),
        ("llm.request", REQUEST),
        ("llm.response", {**RESPONSE, "headers": {"request-id": "r9"}, "latency_ms": 7.0}),
    ]
    after = _journal(tmp_path, "after", later, session_id="b2", created_at="2026-12-03T00:00:00Z")
    assert recording_change(before, after) is None


def test_a_changed_request_names_its_seq_and_field(tmp_path: Path) -> None:
    before = _journal(tmp_path, "before", _session())
    after = _journal(tmp_path, "after", _session(system="Be brief."))
    assert recording_change(before, after) == "changed: seq 2 llm.request at payload.body.system"


def test_more_events_new_journals_and_headers_are_changes(tmp_path: Path) -> None:
    before = _journal(tmp_path, "before", _session())
    longer = _journal(tmp_path, "longer", [*_session(), ("session.end", {"status": "ok"})])
    assert recording_change(before, longer) == "changed: 3 -> 4 events"
    assert recording_change(tmp_path / "missing", before) == "new"
    other = _journal(tmp_path, "other", _session(), schema_version=2)
    assert recording_change(before, other) == "changed: header.json at schema_version"


def test_config_digest_is_what_the_file_says_not_the_models_defaults() -> None:
    provider = {"name": "mock", "model": "m", "script": [{"text": "hi"}]}
    bare = EngineConfig.model_validate({"providers": [provider]})
    spelled = EngineConfig.model_validate({"providers": [provider], "temperature": None})
    assert bare.digest() == spelled.digest()
    changed = EngineConfig.model_validate({"providers": [provider], "system_prompt": "Be kind."})
    assert changed.digest() != bare.digest()
