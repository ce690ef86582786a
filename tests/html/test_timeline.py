"""Journal events as the report shows them: summaries per provider API, cuts, golden diff."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_nodeval.report.llm_replies import reply_of
from pytest_nodeval.report.timeline import FIELD_LIMIT, GoldenJournal, clip, event_views, load_events


def _event(seq: int, kind: str, payload: dict[str, Any], turn: int = 1) -> dict[str, Any]:
    return {"seq": seq, "ts": f"2026-11-30T12:00:{seq:02d}Z", "type": kind, "turn": turn, "payload": payload}


def _fields(view: dict[str, Any]) -> dict[str, str]:
    return dict(view["fields"])


def test_clip_says_how_much_was_cut() -> None:
    assert clip("short") == "short"
    cut = clip("x" * (FIELD_LIMIT + 1234))
    assert cut.startswith("x" * FIELD_LIMIT) and cut.endswith("[... 1234 more characters]")


def test_a_request_shows_model_message_count_and_last_message_not_the_body() -> None:
    body = {"model": "claude-sonnet-4-6", "system": "S" * 50_000,
            "messages": [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]}
    view = event_views([_event(1, "llm.request", {"provider": "anthropic", "body": body})])[0]
    fields = _fields(view)
    assert fields == {"model": "claude-sonnet-4-6", "messages": "2", "last message": "user: second"}
    assert "SSSS" not in json.dumps(view)


def test_a_response_names_the_model_of_its_request_tokens_latency_text_and_tool_calls() -> None:
    events = [
        _event(1, "llm.request", {"provider": "p", "body": {"model": "gpt-5-mini", "messages": []}}),
        _event(2, "llm.response", {"provider": "p", "latency_ms": 812.4, "usage": {"input_tokens": 10, "output_tokens": 3},
                                   "body": {"choices": [{"message": {"content": "Checking.", "tool_calls": [
                                       {"function": {"name": "shell", "arguments": '{"command": "du"}'}}]}}]}}),
    ]
    fields = _fields(event_views(events)[1])
    assert fields["model"] == "gpt-5-mini" and fields["tokens"] == "10 in, 3 out" and fields["latency"] == "812 ms"
    assert fields["text"] == "Checking." and fields["tool call: shell"] == '{"command": "du"}'


def test_replies_of_every_recorded_api() -> None:
    assert reply_of({"text": "hi", "tool_calls": [{"name": "shell", "args": {"c": 1}}]}, None) == ("hi", [("shell", {"c": 1})])
    anthropic = {"content": [{"type": "text", "text": "a"}, {"type": "tool_use", "name": "file", "input": {"p": "x"}}]}
    assert reply_of(anthropic, None) == ("a", [("file", {"p": "x"})])
    responses = {"output": [{"type": "message", "content": [{"type": "output_text", "text": "r"}]},
                            {"type": "function_call", "name": "shell", "arguments": "{}"}]}
    assert reply_of(responses, None) == ("r", [("shell", "{}")])
    assert reply_of(None, None) == ("", [])


def _sse(*docs: dict[str, Any]) -> str:
    return "".join(f"event: x\ndata: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n"


def test_replies_of_streams_are_reassembled() -> None:
    anthropic = _sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "He"}},
                     {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "llo"}},
                     {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "name": "shell"}},
                     {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"c":'}},
                     {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ' 1}'}})
    assert reply_of(None, anthropic) == ("Hello", [("shell", '{"c": 1}')])
    chat = _sse({"choices": [{"delta": {"content": "Hi"}}]},
                {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "file", "arguments": "{"}}]}}]},
                {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}}]})
    assert reply_of(None, chat) == ("Hi", [("file", "{}")])
    responses = _sse({"type": "response.output_text.delta", "delta": "partial"},
                     {"type": "response.completed", "response": {"output": [
                         {"type": "message", "content": [{"type": "output_text", "text": "whole"}]}]}})
    assert reply_of(None, responses) == ("whole", [])


def test_failures_are_flagged() -> None:
    views = event_views([
        _event(1, "llm.response", {"provider": "p", "status": 529, "body": {"error": "overloaded"}}),
        _event(2, "tool.result", {"tool": "shell", "ok": False, "error": "exit 2"}),
        _event(3, "provider.fallback", {"from_provider": "a", "to_provider": "b", "error": "529"}),
        _event(4, "session.end", {"status": "error", "reason": "provider failed", "infra": True}),
        _event(5, "io.output", {"text": "fine"}),
    ])
    assert [v["bad"] for v in views] == [True, True, True, True, False]
    assert "overloaded" in _fields(views[0])["body"]
    assert views[2]["title"] == "provider fallback: a -> b"


def test_unknown_and_malformed_events_do_not_break_the_view() -> None:
    views = event_views([{"seq": "x", "type": "future.thing", "payload": {"a": 1}}, {"payload": None}, {}])
    assert views[0]["seq"] is None and views[0]["title"] == "event" and '"a": 1' in _fields(views[0])["payload"]
    assert views[1]["type"] == "?"


def test_load_events_skips_torn_lines_and_replaces_broken_utf8(tmp_path: Path) -> None:
    good = json.dumps(_event(1, "io.output", {"text": "ok"})).encode()
    broken = b'{"seq": 2, "type": "io.output", "turn": 1, "payload": {"text": "caf\xc3 \xff"}}'
    (tmp_path / "events.jsonl").write_bytes(good + b"\n" + broken + b"\n" + b'{"seq": 3, "ty')
    events, note = load_events(tmp_path)
    assert [e["seq"] for e in events] == [1, 2]
    assert events[1]["payload"]["text"] == "caf\ufffd \ufffd"
    assert note == "1 unreadable line(s) in events.jsonl skipped"


def test_load_events_of_a_missing_journal_says_so(tmp_path: Path) -> None:
    events, note = load_events(tmp_path / "nowhere")
    assert events == [] and note is not None and "events.jsonl could not be read" in note


def _journal(answer: str, extra: bool = False) -> list[dict[str, Any]]:
    events = [_event(1, "session.start", {"engine": "e", "version": "1", "session_id": "a", "mode": "record"}, 0),
              _event(2, "io.input", {"text": "hi"}),
              _event(3, "llm.response", {"provider": "p", "latency_ms": 5.0, "body": {"text": answer}}),
              _event(4, "io.output", {"text": answer})]
    if extra:
        events.insert(3, _event(9, "tool.call", {"tool": "shell", "call_id": "1", "args": {}}))
    return events


def test_a_replay_equal_but_for_timings_matches_the_golden_event_by_event() -> None:
    golden = GoldenJournal(_journal("Hello"))
    replay = _journal("Hello")
    replay[0]["payload"].update(session_id="b", mode="deterministic")
    replay[2]["payload"]["latency_ms"] = 99.0
    diff = golden.diff(replay)
    assert diff["rows"] == [[0, 0, "same"], [1, 1, "same"], [2, 2, "same"], [3, 3, "same"]]
    assert diff["golden"] == {} and diff["same"] == diff["total"] == 4


def test_a_changed_answer_and_an_extra_call_are_aligned() -> None:
    diff = GoldenJournal(_journal("Hello")).diff(_journal("Bye", extra=True))
    assert [row[2] for row in diff["rows"]] == ["same", "same", "changed", "extra", "changed"]
    assert diff["rows"][3] == [None, 3, "extra"]
    assert _fields(diff["golden"]["2"])["text"] == "Hello"
    assert diff["same"] == 2 and diff["total"] == 5


def test_a_missing_event_is_shown_on_the_golden_side() -> None:
    diff = GoldenJournal(_journal("Hello")).diff(_journal("Hello")[:3])
    assert diff["rows"][-1] == [3, None, "missing"]
    assert diff["golden"]["3"]["type"] == "io.output"


def test_small_flat_arguments_and_results_show_a_field_per_key() -> None:
    views = event_views([
        _event(1, "tool.call", {"tool": "shell", "call_id": "c1", "args": {"command": "du -sh ."}}),
        _event(2, "tool.result", {"tool": "shell", "call_id": "c1", "ok": True,
                                  "result": {"stdout": "12M\t.\nmore\n", "stderr": "", "exit_code": 0}}),
        _event(3, "tool.result", {"tool": "file", "call_id": "c2", "ok": True, "result": {"entries": ["a", "b"]}}),
    ])
    assert _fields(views[0]) == {"call id": "c1", "arguments.command": "du -sh ."}
    assert _fields(views[1]) == {"result.stdout": "12M\t.\nmore\n", "result.exit_code": "0"}  # empty stderr left out
    assert _fields(views[2]) == {"result": '{"entries": ["a", "b"]}'}
