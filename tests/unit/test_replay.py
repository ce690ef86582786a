"""Record with the mock provider, replay, and check that divergence is loud."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.case.directory import load_case
from pytest_nodeval.journal.reader import dump_events, read_journal
from pytest_nodeval.runner.session import AttemptSettings, run_case

from ..conftest import write_case

SCRIPT = [
    {
        "tool_calls": [
            {"name": "shell", "args": {"command": "echo 12M > usage.txt && cat usage.txt"}}
        ]
    },
    {"tool_calls": [{"name": "ask_user", "args": {"question": "Which unit do you prefer?"}}]},
    {"text": "The workspace uses 12M."},
]


def _comparable(events: list[Any]) -> list[dict[str, Any]]:
    """Events without what legitimately differs between runs: timestamps, latencies, session ids."""
    out = []
    for event in dump_events(events):
        event.pop("ts")
        payload = event["payload"]
        for key in ("latency_ms", "session_id", "duration_ms", "mode"):
            payload.pop(key, None)
        out.append(event)
    return out


@pytest.fixture
def case_dir(tmp_path: Path) -> Path:
    return write_case(
        tmp_path,
        "disk-usage",
        script=SCRIPT,
        inputs=["How much space is used?"],
        answers=[{"text": "megabytes"}],
    )


def test_replay_reproduces_the_recorded_stream_offline(
    case_dir: Path, tmp_path: Path, no_network: list[Any]
) -> None:
    golden = read_journal(case_dir / "journal").events
    observed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "replayed"
    )
    assert observed.divergence is None
    assert observed.status == "ok"
    assert _comparable(observed.events) == _comparable(golden)
    assert observed.output == "The workspace uses 12M."
    assert no_network == []


def test_replay_does_not_run_side_effecting_tools(case_dir: Path, tmp_path: Path) -> None:
    observed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "replayed"
    )
    assert observed.world_backend is None  # no world was started
    result = next(
        e for e in observed.events if e.type == "tool.result" and e.payload.tool == "shell"
    )
    assert result.payload.result["stdout"] == "12M\n"


def _edit_config(case_dir: Path, **changes: Any) -> None:
    path = case_dir / "input" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config.update(changes)
    path.write_text(yaml.safe_dump(config))


def test_a_changed_system_prompt_is_a_divergence_with_seq_and_diff(
    case_dir: Path, tmp_path: Path
) -> None:
    _edit_config(case_dir, system_prompt="You are a sloppy assistant.")
    observed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "replayed"
    )
    assert observed.status == "divergence"
    message = observed.divergence or ""
    assert "at seq 7 (llm.request to 'mock')" in message
    assert observed.divergence_seq == 7  # carried by the ReplayDivergence, not read from text
    assert (
        "at system: recorded 'You are a careful assistant.', now 'You are a sloppy assistant.'"
        in message
    )
    assert '- "system": "You are a careful assistant.",' in message
    assert '+ "system": "You are a sloppy assistant.",' in message
    assert "nodeval record" in message
    # The observed journal says so too, with the whole message: a reader of it alone sees why.
    end = observed.events[-1]
    assert end.type == "session.end" and end.payload.status == "divergence"
    assert (end.payload.error_kind, end.payload.reason) == ("divergence", message)


def test_a_changed_tool_argument_is_a_divergence(case_dir: Path, tmp_path: Path) -> None:
    journal = case_dir / "journal" / "events.jsonl"
    recorded_call = '"tool":"shell","call_id":"call_1_1","args":{"command":"echo 12M'
    journal.write_text(
        journal.read_text().replace(recorded_call, recorded_call.replace("12M", "99M"))
    )
    observed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "replayed"
    )
    message = observed.divergence or ""
    assert "(tool.call call_1_1)" in message
    call = next(e for e in observed.golden or [] if e.type == "tool.call")
    assert f"at seq {call.seq} " in message and observed.divergence_seq == call.seq
    assert "at args.command: recorded 'echo 99M" in message and "now 'echo 12M" in message


def test_an_agent_that_stops_early_diverges(case_dir: Path, tmp_path: Path) -> None:
    # The journal has three model calls; give the agent a third input it never got.
    journal = case_dir / "journal" / "events.jsonl"
    lines = journal.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if '"type":"agent.turn.start","turn":3' in line)
    # Still ends with its session.end
    journal.write_text("\n".join([*lines[:cut], lines[-1]]) + "\n")
    observed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "replayed"
    )
    assert (
        "made an LLM call to 'mock' that the journal does not have, "
        "after its last recorded response to "
        "'mock' (seq " in (observed.divergence or "")
    )
    assert f"diverged from its journal ({journal}):" in (observed.divergence or "")


def test_strict_matching_notices_changes_default_matching_ignores(
    case_dir: Path, tmp_path: Path
) -> None:
    journal = case_dir / "journal" / "events.jsonl"
    journal.write_text(
        journal.read_text().replace(
            '"tools":["shell","file","ask_user"]',
            '"tools":["shell","file","ask_user"],"metadata":1',
            1,
        )
    )
    default = run_case(load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "a")
    strict = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic", match="strict"), tmp_path / "b"
    )
    assert default.divergence is None
    assert strict.divergence is not None and "metadata" in strict.divergence


def test_a_journal_too_big_to_keep_replays_from_its_text_the_same(
    case_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the cache's bound a golden journal keeps its model payloads as their text
    (issue 28); the replay, its observed journal and a divergence's diff are the same."""
    from pytest_nodeval.case.directory import JOURNALS
    from pytest_nodeval.journal.events import RecordedPayload

    monkeypatch.setattr(JOURNALS, "max_bytes", 1)
    JOURNALS.clear()
    golden = read_journal(case_dir / "journal").events
    observed = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "replayed"
    )
    assert (observed.divergence, observed.status) == (None, "ok")
    assert _comparable(observed.events) == _comparable(golden)
    assert _comparable(read_journal(tmp_path / "replayed").events) == _comparable(golden)
    served = [e for e in observed.events if e.type.startswith("llm.")]
    assert served and all(isinstance(e.payload, RecordedPayload) for e in served)
    assert observed.golden is not None and observed.golden[6].payload is served[0].payload, (
        "the checks' golden events and the replay's are one read"
    )
    _edit_config(case_dir, system_prompt="You are a sloppy assistant.")
    diverged = run_case(
        load_case(case_dir), AttemptSettings(mode="deterministic"), tmp_path / "diverged"
    )
    assert diverged.divergence_seq == 7
    assert '- "system": "You are a careful assistant.",' in (diverged.divergence or "")
