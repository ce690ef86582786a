"""The pure parts of --nodeval-from-turn (issue 30): the prefix stash holds the turns before N
and serves them without comparing requests, and the user that replays them hands over to the
live one at turn N, marking the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.errors import ReplayDivergence
from pytest_nodeval.journal.events import EngineInfo, JournalHeader, new_session_id, now_iso
from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.journal.replay import ReplayStash, ReplayStopped, events_before_turn
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval.people.inputs import PersonaUserSpec, ScriptedUserSpec
from pytest_nodeval.people.persona import PersonaUser
from pytest_nodeval.people.users import PrefixUser, ScriptedUser

SEED = Path(__file__).parents[2] / "scenarios" / "multi-turn-refund" / "journal"


def _writer() -> JournalWriter:
    header = JournalHeader(
        session_id=new_session_id(),
        created_at=now_iso(),
        engine=EngineInfo(version="test"),
        source="live",
    )
    return JournalWriter(None, header)


def _request(system: str) -> dict[str, Any]:
    body = {"model": "other-model", "system": system, "messages": [], "tools": []}
    return {
        "provider": "mock",
        "api": "mock",
        "method": "POST",
        "path": "/mock",
        "stream": False,
        "body": body,
    }


def test_the_prefix_holds_the_turns_before_n() -> None:
    journal = read_journal(SEED)
    before = events_before_turn(journal, 3)
    assert [e.payload.text for e in before if e.type == "io.input"] == [
        "I want a refund.",
        "The order is A-1042.",
    ]
    assert before[-1].type == "io.output"  # turn 2's answer; turn 3 begins live
    assert events_before_turn(journal, 1) == [e for e in journal.events if e.seq < 3]


def test_the_prefix_serves_any_request_in_order_and_stops_past_its_calls() -> None:
    stash = ReplayStash(read_journal(SEED), case="refund", live_from=2)
    writer = _writer()
    served = stash.serve_llm(writer, "mock", _request("A new prompt entirely."))
    assert served["body"]["text"] == "I can help with that. What is the order number?"
    # The request is journaled as sent now, the answer as recorded.
    assert writer.events[0].payload.body["system"] == "A new prompt entirely."
    with pytest.raises(ReplayStopped) as stopped:
        stash.serve_llm(writer, "mock", _request("A new prompt entirely."))
    assert isinstance(stopped.value.divergence, ReplayDivergence)
    assert str(stopped.value.divergence).startswith(
        "the replayed turn 1 of 'refund' went beyond its journal"
    )


def test_a_whole_replay_still_compares_requests() -> None:
    stash = ReplayStash(read_journal(SEED), case="refund")
    with pytest.raises(ReplayStopped):
        stash.serve_llm(_writer(), "mock", _request("A new prompt entirely."))


def test_the_user_replays_then_hands_over_and_marks_the_journal() -> None:
    journal = read_journal(SEED)
    stash = ReplayStash(journal, case="refund", live_from=3)
    live = ScriptedUser(ScriptedUserSpec(kind="scripted", inputs=["one", "two", "three"]))
    writer = _writer()
    user = PrefixUser(stash, live, writer)
    user.replayed_session = journal.header.session_id
    said = [user.next_input(None), user.next_input("answer 1"), user.next_input("answer 2")]
    assert [t.text if t else None for t in said] == [
        "I want a refund.",
        "The order is A-1042.",
        "three",  # the script's third input: its first two were used up by the replay
    ]
    assert not stash.serving
    assert [(e.type, e.payload_dict()) for e in writer.events] == [
        ("session.live_from", {"turn": 3, "replayed_session": journal.header.session_id})
    ]
    assert user.next_input("answer 3") is None


def test_a_persona_hears_the_replayed_turns() -> None:
    spec = PersonaUserSpec(
        kind="persona",
        provider={"name": "mock", "model": "m", "script": [{"text": "ok"}]},  # type: ignore[arg-type]
        persona="A customer.",
        reason="A refund.",
    )
    persona = PersonaUser(spec)
    persona.replayed_turn(None, "I want a refund.")
    persona.replayed_turn("What is the order number?", "A-1042.")
    conversation = persona._conversation()
    assert [m["text"] for m in conversation[1:]] == [
        "I want a refund.",
        "What is the order number?",
        "A-1042.",
    ]
