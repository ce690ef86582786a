"""The replay hot path (issue 33): the engine's own events and the recorded answers are written
and served without validation or re-serialisation, and the observed journal says, byte for
byte, what the ordinary, validated path writes."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.agent import engine, providers
from pytest_nodeval.agent.config import EngineConfig
from pytest_nodeval.case.directory import load_case
from pytest_nodeval.journal import events, transport, writer
from pytest_nodeval.journal.events import EVENTS_FILE, HEADER_FILE
from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.journal.replay import ReplayStash
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval.runner.session import AttemptSettings, case_label, journal_header, run_case

SCENARIOS = Path(__file__).parents[2] / "scenarios"
SEEDS = sorted(p.name for p in SCENARIOS.iterdir() if (p / "journal" / EVENTS_FILE).is_file())
RERUN_TOOLS = ("ask_user", "skill")
"""Tools replay runs again (no side effects): their results' latencies are measured anew."""


def _replayed(case_dir: Path, journal: Path) -> list[str]:
    """The observed journal's lines, without what changes from run to run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the local world's warning, for cases that open one
        observed = run_case(load_case(case_dir), AttemptSettings(mode="deterministic"), journal)
    assert observed.status == "ok", observed.metrics()
    lines = []
    for line in (journal / EVENTS_FILE).read_text(encoding="utf-8").splitlines():
        line = re.sub(r'"ts":"[^"]*"', '"ts":_', line)
        line = re.sub(r'"session_id":"[^"]*"', '"session_id":_', line)
        if '"type":"tool.result"' in line and any(f'"tool":"{t}"' in line for t in RERUN_TOOLS):
            line = re.sub(r'"latency_ms":[0-9.e-]+', '"latency_ms":_', line)
        lines.append(line)
    header = json.loads((journal / HEADER_FILE).read_text(encoding="utf-8"))
    del header["session_id"], header["created_at"]
    return [json.dumps(header), *lines]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_replay_writes_what_the_validated_path_writes(seed: str, tmp_path: Path) -> None:
    fast = _replayed(SCENARIOS / seed, tmp_path / "fast")
    again = _replayed(SCENARIOS / seed, tmp_path / "again")  # an SDK client reused, if any
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer, "_SCALAR_FIELDS", {})
        patch.setattr(writer, "_SERVED_IF_SAME", frozenset())
        patch.setattr(transport, "_prepared_response", lambda *args: None)
        patch.setattr(engine, "same_json", lambda *args: False)
        patch.setattr(providers.ReplayedProviders, "take", lambda *args: None)
        validated = _replayed(SCENARIOS / seed, tmp_path / "validated")
    assert len(fast) > 3
    assert fast == validated
    assert again == validated


def test_a_case_digests_its_config_once_for_all_its_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = load_case(SCENARIOS / "hello-answer")
    assert case.config is not None
    expected = case.config.digest()
    digested: list[EngineConfig] = []
    original = EngineConfig.digest
    monkeypatch.setattr(
        EngineConfig, "digest", lambda self: digested.append(self) or original(self)
    )
    for attempt in ("a", "b"):
        run_case(case, AttemptSettings(mode="deterministic"), tmp_path / attempt)
        header = json.loads((tmp_path / attempt / HEADER_FILE).read_text(encoding="utf-8"))
        assert header["config_digest"] == expected
    assert digested == [case.config]


def test_a_case_is_named_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = load_case(SCENARIOS / "hello-answer")
    monkeypatch.chdir(SCENARIOS)
    assert case_label(case) == "hello-answer"
    monkeypatch.chdir(SCENARIOS / "hello-answer")
    assert case_label(case) == "."
    monkeypatch.chdir(SCENARIOS / "hello-answer" / "input")
    assert case_label(case) == str(case.directory)
    monkeypatch.chdir(tmp_path)
    assert case_label(case) == str(case.directory)


def test_the_seeds_cover_every_shortcut() -> None:
    """The comparison above means something only if the seeds take each shortcut: SDK
    answers, served tool calls, the engine's own small events."""
    types: set[str] = set()
    apis: set[str] = set()
    for seed in SEEDS:
        for event in read_journal(SCENARIOS / seed / "journal").events:
            types.add(event.type)
            if event.type == "llm.request":
                apis.add(event.payload.api)
    assert {"anthropic.messages", "openai.chat", "gemini.generate_content", "mock"} <= apis
    assert {"tool.call", "tool.result", "agent.turn.start", "agent.turn.end", "io.input"} <= types
    assert {"tool.register", "world.snapshot"} <= types


def test_the_stashes_of_one_journal_share_its_seed_and_each_serves_it_whole() -> None:
    journal = read_journal(SCENARIOS / "multi-turn-refund" / "journal")
    first = ReplayStash(journal, case="refund")
    seed = journal._replay_seed
    request = next(e for e in journal.events if e.type == "llm.request")
    while first.next_input() is not None:
        pass
    first.serve_llm(_writer(None), request.payload.provider, request.payload_dict())
    assert first.leftovers() != ReplayStash(read_journal(journal.directory), case="r").leftovers()
    second = ReplayStash(journal, case="refund")
    assert journal._replay_seed is seed
    assert second.leftovers() == ReplayStash(read_journal(journal.directory), case="r").leftovers()
    assert second.next_input() is not None


# -- the writer ---------------------------------------------------------------------------------


def _writer(directory: Path | None) -> JournalWriter:
    return JournalWriter(directory, journal_header("replay", None), durable=False)


def _validated(tmp_path: Path, type_name: str, payload: dict[str, Any]) -> tuple[str, Any]:
    """The line the validated path writes for this payload (its time left out), its event."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer, "_SCALAR_FIELDS", {})
        with _writer(tmp_path / "validated") as journal:
            event = journal.emit(type_name, dict(payload))
    line = (tmp_path / "validated" / EVENTS_FILE).read_text(encoding="utf-8")
    return re.sub(r'"ts":"[^"]*"', "", line), event


@pytest.mark.parametrize(
    ("type_name", "payload", "shortcut"),
    [
        ("agent.turn.start", {}, True),
        ("agent.turn.end", {"stop_reason": "tool_use"}, True),
        ("io.input", {"text": 'h\u00e9llo \u2028 "quoted"\n\x01', "source": "scripted"}, True),
        ("io.input", {"text": "defaults filled"}, True),
        ("session.start", {"engine": "e", "version": "1", "session_id": "s"}, True),
        # Validation converts or refuses these: a str subclass, an unknown key, a constraint.
        ("io.output", {"text": type("Text", (str,), {})("sub")}, False),
        ("io.output", {"text": "x", "extra": "kept"}, False),
        ("session.live_from", {"turn": 2}, False),
        ("session.end", {"status": "ok", "duration_ms": 3}, False),
    ],
)
def test_a_payload_of_declared_scalars_is_written_as_validation_would(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    type_name: str,
    payload: dict[str, Any],
    shortcut: bool,
) -> None:
    line, validated = _validated(tmp_path, type_name, payload)
    calls: list[str] = []
    adapter = events.EVENT_ADAPTER

    class Counting:
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(adapter, name)

    monkeypatch.setattr(writer, "EVENT_ADAPTER", Counting())
    with _writer(tmp_path / "fast") as journal:
        event = journal.emit(type_name, dict(payload))
    fast = (tmp_path / "fast" / EVENTS_FILE).read_text(encoding="utf-8")
    assert re.sub(r'"ts":"[^"]*"', "", fast) == line
    assert event.payload == validated.payload
    assert event.payload.model_fields_set == validated.payload.model_fields_set
    assert (calls == []) is shortcut, calls


def test_only_values_validation_keeps_as_given_take_the_shortcut() -> None:
    fields = writer._ScalarFields(
        {"n": frozenset({float}), "s": frozenset({str, type(None)})},
        {"n": None, "s": None},
        frozenset({"n"}),
        ('"n":', '"s":'),
    )
    assert writer._as_declared({"n": 1.5, "s": None}, fields)
    assert not writer._as_declared({"n": 1, "s": "x"}, fields), "an int becomes a float"
    assert not writer._as_declared({"n": True}, fields)
    assert not writer._as_declared({"n": float("nan")}, fields), "JSON has no NaN"
    assert not writer._as_declared({"s": "x"}, fields), "a required field missing"
    assert not writer._as_declared({"n": 1.0, "other": 1.0}, fields)


def test_a_declared_payload_with_a_secret_is_written_redacted(tmp_path: Path) -> None:
    secret = "sk-ant-" + "a" * 30
    with _writer(tmp_path / "j") as journal:
        event = journal.emit("io.output", {"text": f"the key is {secret}"})
    assert event.payload.text == "the key is [REDACTED]"
    assert secret not in (tmp_path / "j" / EVENTS_FILE).read_text()


def _golden(tmp_path: Path, *emitted: tuple[str, dict[str, Any]]) -> writer.GoldenEvents:
    """A golden journal of these events (recorded, read back), as a replay's writer sees it."""
    with JournalWriter(tmp_path / "golden", journal_header("record", None)) as journal:
        for turn, (type_name, payload) in enumerate(emitted):
            journal.emit(type_name, payload, turn=turn)
    return writer.GoldenEvents(read_journal(tmp_path / "golden").events)


def test_an_engine_event_equal_to_the_recorded_one_is_written_as_recorded(tmp_path: Path) -> None:
    recorded = [
        ("agent.turn.start", {}),
        ("io.input", {"text": 'h\u00e9llo "quoted"\n', "source": "scripted"}),
        ("io.output", {"text": "done"}),
    ]
    golden = _golden(tmp_path, *recorded)
    twin = JournalWriter(
        tmp_path / "twin", journal_header("replay", None), durable=False, golden=golden
    )
    with twin, _writer(tmp_path / "plain") as plain:
        for turn, (type_name, payload) in enumerate(recorded):
            twin.emit(type_name, dict(payload), turn=turn)
            plain.emit(type_name, dict(payload), turn=turn)
    lines = [
        re.sub(r'"ts":"[^"]*"', "", (tmp_path / name / EVENTS_FILE).read_text(encoding="utf-8"))
        for name in ("twin", "plain")
    ]
    assert lines[0] == lines[1]
    assert [e.payload for e in twin.events] == [e.payload for e in plain.events]
    # The recorded payloads themselves, shared: nothing was scanned or built again.
    assert all(e.payload is g.payload for e, g in zip(twin.events, golden.events, strict=True))


@pytest.mark.parametrize(
    ("type_name", "payload", "turn"),
    [
        ("io.output", {"text": "other"}, 1),  # another text
        ("io.output", {"text": "done"}, 2),  # another turn
        ("io.input", {"text": "done"}, 1),  # another type
        ("io.output", {"text": "done", "extra": "kept"}, 1),  # a key the recording lacks
    ],
)
def test_an_engine_event_unlike_the_recorded_one_is_written_as_made(
    tmp_path: Path, type_name: str, payload: dict[str, Any], turn: int
) -> None:
    golden = _golden(tmp_path, ("agent.turn.start", {}), ("io.output", {"text": "done"}))
    with JournalWriter(None, journal_header("replay", None), golden=golden) as journal:
        journal.emit("agent.turn.start", {}, turn=0)
        event = journal.emit(type_name, dict(payload), turn=turn)
    assert event.payload is not golden.events[1].payload
    assert event.payload.text == payload["text"]
    assert event.turn == turn and event.type == type_name


PARAMETERS = {"type": "object", "properties": {"command": {"type": "string"}}}
REGISTERED = {
    "extra_b": 1,
    "extra_a": "x",
    "tool": "shell",
    "description": "Run a command.",
    "parameters": PARAMETERS,
    "side_effects": True,
    "source": "builtin",
}
SNAPSHOT = {"backend": "local", "files": {"out.txt": {"exists": True, "content": "4.0"}}}


def test_a_registration_or_snapshot_equal_to_the_recorded_one_is_written_as_recorded(
    tmp_path: Path,
) -> None:
    recorded = [("tool.register", REGISTERED), ("world.snapshot", SNAPSHOT)]
    # The fields in another order than the model's (validation does not keep it), the extra
    # ones in theirs (it keeps that).
    fields = ("source", "extra_b", "side_effects", "parameters", "extra_a", "description", "tool")
    replayed = [{k: REGISTERED[k] for k in fields}, dict(reversed(SNAPSHOT.items()))]
    golden = _golden(tmp_path, *recorded)
    twin = JournalWriter(
        tmp_path / "twin", journal_header("replay", None), durable=False, golden=golden
    )
    with twin, _writer(tmp_path / "plain") as plain:
        for turn, ((type_name, payload), again) in enumerate(zip(recorded, replayed, strict=True)):
            twin.emit(type_name, again, turn=turn)
            plain.emit(type_name, dict(payload), turn=turn)
    lines = [
        re.sub(r'"ts":"[^"]*"', "", (tmp_path / name / EVENTS_FILE).read_text(encoding="utf-8"))
        for name in ("twin", "plain")
    ]
    assert lines[0] == lines[1]
    assert all(e.payload is g.payload for e, g in zip(twin.events, golden.events, strict=True))


@pytest.mark.parametrize(
    ("changed", "turn"),
    [
        ({**REGISTERED, "description": "Run a shell command."}, 0),  # another value
        ({**REGISTERED, "extra_b": 1.0}, 0),  # equal, but written 1.0
        ({**REGISTERED, "parameters": dict(reversed(PARAMETERS.items()))}, 0),  # key order
        ({k: v for k, v in REGISTERED.items() if k != "source"}, 0),  # a default left out
        ({"extra_a": "x", **REGISTERED}, 0),  # the extra fields in another order
        (REGISTERED, 1),  # another turn
    ],
)
def test_a_registration_unlike_the_recorded_one_is_written_as_made(
    tmp_path: Path, changed: dict[str, Any], turn: int
) -> None:
    golden = _golden(tmp_path, ("tool.register", REGISTERED))
    line, validated = _validated(tmp_path, "tool.register", dict(changed))
    replay = JournalWriter(
        tmp_path / "replay", journal_header("replay", None), durable=False, golden=golden
    )
    with replay:
        event = replay.emit("tool.register", dict(changed), turn=turn)
    assert event.payload is not golden.events[0].payload
    assert event.payload == validated.payload
    written = (tmp_path / "replay" / EVENTS_FILE).read_text(encoding="utf-8")
    assert re.sub(r'"ts":"[^"]*"', "", written).replace(f'"turn":{turn}', '"turn":0') == line


def test_a_stricter_redactor_scans_every_engine_event_of_a_replay(tmp_path: Path) -> None:
    golden = _golden(tmp_path, ("io.output", {"text": "mail me at a@b.example"}))

    def masking(type_name: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {k: v.replace("a@b.example", "[EMAIL]") for k, v in payload.items()}

    with JournalWriter(None, journal_header("replay", None), masking, golden=golden) as journal:
        event = journal.emit("io.output", {"text": "mail me at a@b.example"}, turn=0)
    assert event.payload.text == "mail me at [EMAIL]"


def test_a_replayed_journal_is_written_when_it_closes(tmp_path: Path) -> None:
    journal = _writer(tmp_path / "j")
    journal.emit("agent.turn.start", {})
    journal.emit("agent.turn.end", {"stop_reason": "end_turn"})
    assert (tmp_path / "j").is_dir() and not (tmp_path / "j" / EVENTS_FILE).exists()
    journal.close()
    assert [e.type for e in read_journal(tmp_path / "j").events] == [
        "agent.turn.start",
        "agent.turn.end",
    ]


def test_a_replayed_journal_writes_out_once_a_megabyte_has_gathered(tmp_path: Path) -> None:
    journal = _writer(tmp_path / "j")
    text = "x" * (writer.WRITTEN_AS_IS // 4)
    for _ in range(5):
        journal.emit("io.output", {"text": text})
    written = (tmp_path / "j" / EVENTS_FILE).read_text().count("\n")
    journal.close()
    assert 4 <= written < 5
    assert len(read_journal(tmp_path / "j").events) == 5


def test_an_in_memory_journal_keeps_its_events_and_writes_nothing(tmp_path: Path) -> None:
    journal = _writer(None)
    journal.emit("io.input", {"text": "hi", "source": "scripted"})
    journal.close()
    assert [e.payload.text for e in journal.events] == ["hi"]


# -- the replay transport's prepared answer -----------------------------------------------------


def _response_text(body: str, headers: dict[str, str] | None = None, **fields: Any) -> bytes:
    """An llm.response payload's text as the writer lays it out, with `body` as given."""
    head = {"provider": "p", "status": 200, "headers": headers or {}}
    tail = {"sse": None, "error": None, "usage": None, "model": "m", "latency_ms": 1.0, **fields}
    text = json.dumps(head, separators=(",", ":"))[:-1] + f',"body":{body},'
    return (text + json.dumps(tail, separators=(",", ":"))[1:]).encode()


@pytest.mark.parametrize(
    ("body", "extra", "sliced"),
    [
        ('{"content":[{"type":"text","text":"hi"}]}', {}, True),
        ('{"inner":{"a":1,"sse":null,"error":null}}', {}, True),
        ('{"a":1}', {"retries": 0}, True),
        # A body that is a string is sent as its text, not as JSON; a nested `,"sse":null,`
        # after the payload's own leaves a closing brace over: the payload is parsed instead.
        ('"plain text"', {}, False),
        ('{"a":1}', {"note": {"x": 1, "sse": None, "y": 2}}, False),
    ],
)
def test_the_body_text_is_sliced_from_the_payload_only_when_it_is_unambiguous(
    body: str, extra: dict[str, Any], sliced: bool
) -> None:
    raw = _response_text(body, **extra)
    span = transport._body_span(raw, None)
    found = None if span is None else raw[span[0] : span[1]]
    assert found == (body.encode() if sliced else None)
    if found is not None:
        assert json.loads(found) == json.loads(raw)["body"]


def test_a_header_called_body_leaves_the_payload_to_be_parsed() -> None:
    import httpx2

    raw = _response_text('{"a":1}', {"a": "1", "body": "x"})
    payload = type("Head", (), {"status": 200, "error": None, "headers": {"a": "1", "body": "x"}})
    request = httpx2.Request("POST", "http://replay.invalid/v1/messages")
    assert transport._prepared_response(payload, raw, request) is None


def test_a_prepared_answer_reads_as_the_serialised_one(tmp_path: Path) -> None:
    """What the SDK reads of the answer: status, headers, and the body's JSON."""
    import httpx2

    with JournalWriter(tmp_path / "g", journal_header("record", None)) as journal:
        journal.emit(
            "llm.response",
            {
                "provider": "p",
                "status": 201,
                "headers": {"request-id": "r1"},
                "body": {"content": [{"type": "text", "text": "héllo \u2028"}], "n": 1.5},
                "latency_ms": 2.0,
            },
        )
    event = read_journal(tmp_path / "g", lazy=True).events[0]
    request = httpx2.Request("POST", "http://replay.invalid/v1/messages")
    prepared = transport._prepared_response(event.payload, event.payload.raw, request)
    ordinary = transport.replayed_response(event.payload_dict(), request)
    assert prepared is not None
    assert prepared.status_code == ordinary.status_code == 201
    lengths = ("content-length",)
    assert {k: v for k, v in prepared.headers.items() if k not in lengths} == {
        k: v for k, v in ordinary.headers.items() if k not in lengths
    }
    assert prepared.json() == ordinary.json()


# -- SDK clients kept for the next attempt --------------------------------------------------------


def test_a_replayed_sdk_client_serves_the_next_attempt_of_its_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = providers.ReplayedProviders()
    monkeypatch.setattr(providers, "REPLAYED", pool)
    case = SCENARIOS / "ops-all-fakes"  # an anthropic provider
    built: list[Any] = []
    monkeypatch.setattr(
        providers, "PROVIDERS", {**providers.PROVIDERS, "anthropic": lambda *a: _built(built, *a)}
    )
    first = _replayed(case, tmp_path / "one")
    second = _replayed(case, tmp_path / "two")
    assert first == second
    assert len(built) == 1, "built once, kept for the second attempt"
    assert built[0].transport._stash is None, "the golden journal let go between attempts"


def _built(built: list[Any], *args: Any) -> Any:
    built.append(providers.AnthropicProvider(*args))
    return built[-1]


def test_a_kept_provider_is_lent_to_one_attempt_at_a_time(tmp_path: Path) -> None:
    from pytest_nodeval.agent.config import ProviderSpec
    from pytest_nodeval.journal.replay import ReplayStash

    pool = providers.ReplayedProviders()
    golden = read_journal(SCENARIOS / "hello-answer" / "journal")
    spec = ProviderSpec(name="anthropic", model="m", base_url="http://replay.invalid")
    wiring = providers.Wiring(_writer(None), ReplayStash(golden, case="c"))
    built = providers.AnthropicProvider(spec, wiring)
    assert pool.give(built)
    assert pool.take(spec, wiring) is built
    assert pool.take(spec, wiring) is None, "lent out: not lent twice"
    assert pool.take(spec.model_copy(update={"model": "other"}), wiring) is None
    mock = ProviderSpec.model_validate({"name": "mock", "model": "m", "script": [{"text": "hi"}]})
    assert not pool.give(providers.MockProvider(mock, wiring)), "a mock keeps its script"


# -- the conversation converted once ----------------------------------------------------------


def test_a_growing_conversation_is_converted_as_a_whole_one_would_be() -> None:
    converted = providers.Converted(providers.extend_anthropic)
    messages: list[dict[str, Any]] = [{"role": "user", "text": "hi"}]
    steps: list[dict[str, Any]] = [
        {"role": "assistant", "text": "", "tool_calls": [{"id": "a", "name": "t", "args": {}}]},
        {"role": "tool", "call_id": "a", "name": "t", "content": "1", "is_error": False},
        {"role": "tool", "call_id": "b", "name": "t", "content": "2", "is_error": True},
        {"role": "assistant", "text": "done", "tool_calls": []},
        {"role": "user", "text": "again"},
    ]
    assert converted(messages) == providers.to_anthropic(messages)
    for step in steps:
        messages.append(step)
        sent = converted(messages)
        assert sent == providers.to_anthropic(messages)
    assert len(sent[2]["content"]) == 2, "both results in one user message"


def test_another_conversation_or_a_changed_one_is_converted_whole() -> None:
    converted = providers.Converted(providers.extend_anthropic)
    first: list[dict[str, Any]] = [
        {"role": "user", "text": "one"},
        {"role": "assistant", "text": "a", "tool_calls": []},
    ]
    converted(first)
    other: list[dict[str, Any]] = [{"role": "user", "text": "two"}]
    assert converted(other) == providers.to_anthropic(other)
    other[0] = {"role": "user", "text": "three"}  # the same list, its first message replaced
    assert converted(other) == providers.to_anthropic(other)
    other.pop()
    assert converted(other) == []


def test_a_payload_model_that_runs_code_of_its_own_is_always_validated() -> None:
    from pydantic import BaseModel, Field, field_validator

    class Plain(BaseModel):
        text: str
        note: str | None = None

    class Checked(BaseModel):
        text: str

        @field_validator("text")
        @classmethod
        def _not_blank(cls, value: str) -> str:
            if not value.strip():
                raise ValueError("blank")
            return value

    class Aliased(BaseModel):
        text: str = Field(alias="t")

    assert writer._scalar_fields(Plain) is not None
    assert writer._scalar_fields(Checked) is None
    assert writer._scalar_fields(Aliased) is None
