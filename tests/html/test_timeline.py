"""Journal events as the report shows them: summaries per provider API, cuts, golden diff."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_nodeval.report.llm_replies import reply_of
from pytest_nodeval.report.timeline import (
    FIELD_LIMIT,
    POOLED_TEXT,
    GoldenJournal,
    TextPool,
    clip,
    event_views,
    load_events,
)


def _event(seq: int, kind: str, payload: dict[str, Any], turn: int = 1) -> dict[str, Any]:
    return {
        "seq": seq,
        "ts": f"2026-11-30T12:00:{seq:02d}Z",
        "type": kind,
        "turn": turn,
        "payload": payload,
    }


def _fields(view: dict[str, Any]) -> dict[str, str]:
    return dict(view["fields"])


def test_clip_says_how_much_was_cut() -> None:
    assert clip("short") == "short"
    cut = clip("x" * (FIELD_LIMIT + 1234))
    assert cut.startswith("x" * FIELD_LIMIT) and cut.endswith("[... 1234 more characters]")


def apply_patch(previous: Any, patch: dict[str, Any]) -> Any:
    """What report.js does with a request's patch."""
    if "whole" in patch:
        return patch["whole"]
    base = previous if isinstance(previous, dict) else {}
    body = {k: v for k, v in base.items() if k not in patch.get("del", [])}
    body.update(patch.get("set", {}))
    body.update({k: base[k] + items for k, items in patch.get("append", {}).items()})
    return {k: body[k] for k in patch["keys"]} if "keys" in patch else body


def _growing_requests(calls: int) -> list[dict[str, Any]]:
    system, messages, events = "S" * 50_000, [], []
    for call in range(calls):
        messages = messages + [
            {"role": "user", "content": f"question {call} " + "q" * 2_000},
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {call}"}]},
        ]
        body = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 1024,
            "system": system,
            "messages": messages[:-1],
        }
        events.append(
            _event(len(events) + 1, "llm.request", {"provider": "anthropic", "body": body})
        )
    return events


def test_a_request_holds_only_what_changed_since_the_previous_one() -> None:
    events = _growing_requests(6)
    views = event_views(events)
    first, later = views[0], views[1:]
    assert first["req"] == {"set": events[0]["payload"]["body"]}  # the base: the whole first body
    assert _fields(first) == {
        "model": "claude-sonnet-4-6",
        "messages": "1",
        "keys": "max_tokens, system",
    }
    for index, view in enumerate(later, start=1):
        # Only the two messages appended since the previous call: not the system prompt, not
        # the history.
        assert set(view["req"]) == {"append"} and [
            len(v) for v in view["req"]["append"].values()
        ] == [2]
        assert _fields(view)["messages"] == f"{2 * index + 1} (+2)"
        assert (
            len(json.dumps(view)) < 5_000 < len(json.dumps(events[index]["payload"]["body"])) // 10
        )
    assert "SSSS" not in json.dumps(later)
    body = None
    for event, view in zip(events, views, strict=True):
        body = apply_patch(body, view["req"])
        # Same values, same key order
        assert json.dumps(body) == json.dumps(event["payload"]["body"])


def test_request_patches_say_what_was_set_removed_replaced_or_reordered() -> None:
    first = {
        "model": "m",
        "tools": [1],
        "messages": [{"role": "user", "content": "a"}],
        "temperature": 0,
    }
    cases = [
        ({**first, "tools": [1, 2]}, {"append": {"tools": [2]}}),
        (
            {**first, "messages": [{"role": "user", "content": "b"}]},
            {"set": {"messages": [{"role": "user", "content": "b"}]}},
        ),
        ({k: v for k, v in first.items() if k != "temperature"}, {"del": ["temperature"]}),
        (
            {"temperature": 0, "model": "m", "tools": [1], "messages": first["messages"]},
            {"keys": ["temperature", "model", "tools", "messages"]},
        ),
        (dict(first), {}),
        ("not an object", {"whole": "not an object"}),
    ]
    for body, patch in cases:
        views = event_views(
            [
                _event(1, "llm.request", {"provider": "p", "body": first}),
                _event(2, "llm.request", {"provider": "p", "body": body}),
            ]
        )
        assert views[1]["req"] == patch
        assert json.dumps(apply_patch(first, patch)) == json.dumps(body)
    assert _fields(
        event_views(
            [
                _event(1, "llm.request", {"provider": "p", "body": first}),
                _event(2, "llm.request", {"provider": "p", "body": first}),
            ]
        )[1]
    )["changes"].startswith("none")


def test_past_the_limit_requests_are_counted_but_not_embedded(monkeypatch: Any) -> None:
    import pytest_nodeval.report.timeline as timeline

    monkeypatch.setattr(timeline, "REQUEST_LIMIT", 60_000)  # the base is ~52,000
    views = event_views(_growing_requests(12))
    kept = [v["req"] is not None for v in views]
    # A prefix of the requests
    assert kept[0] and not kept[-1] and kept == sorted(kept, reverse=True)
    assert (
        "not embedded" in _fields(views[-1])["full request"]
        and _fields(views[-1])["messages"] == "23 (+2)"
    )


def test_a_response_names_the_model_of_its_request_tokens_latency_text_and_tool_calls() -> None:
    events = [
        _event(
            1, "llm.request", {"provider": "p", "body": {"model": "gpt-5-mini", "messages": []}}
        ),
        _event(
            2,
            "llm.response",
            {
                "provider": "p",
                "latency_ms": 812.4,
                "usage": {"input_tokens": 10, "output_tokens": 3},
                "body": {
                    "choices": [
                        {
                            "message": {
                                "content": "Checking.",
                                "tool_calls": [
                                    {
                                        "function": {
                                            "name": "shell",
                                            "arguments": '{"command": "du"}',
                                        }
                                    }
                                ],
                            }
                        }
                    ]
                },
            },
        ),
    ]
    fields = _fields(event_views(events)[1])
    assert (
        fields["model"] == "gpt-5-mini"
        and fields["tokens"] == "10 in, 3 out"
        and fields["latency"] == "812 ms"
    )
    assert fields["text"] == "Checking." and fields["tool call: shell"] == '{"command": "du"}'


def test_replies_of_every_recorded_api() -> None:
    assert reply_of({"text": "hi", "tool_calls": [{"name": "shell", "args": {"c": 1}}]}, None) == (
        "hi",
        [("shell", {"c": 1})],
    )
    anthropic = {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "tool_use", "name": "file", "input": {"p": "x"}},
        ]
    }
    assert reply_of(anthropic, None) == ("a", [("file", {"p": "x"})])
    responses = {
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "r"}]},
            {"type": "function_call", "name": "shell", "arguments": "{}"},
        ]
    }
    assert reply_of(responses, None) == ("r", [("shell", "{}")])
    assert reply_of(None, None) == ("", [])


def _sse(*docs: dict[str, Any]) -> str:
    return "".join(f"event: x\ndata: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n"


def test_replies_of_streams_are_reassembled() -> None:
    anthropic = _sse(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "He"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "llo"}},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "name": "shell"},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"c":'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": " 1}"},
        },
    )
    assert reply_of(None, anthropic) == ("Hello", [("shell", '{"c": 1}')])
    chat = _sse(
        {"choices": [{"delta": {"content": "Hi"}}]},
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"name": "file", "arguments": "{"}}]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}}]},
    )
    assert reply_of(None, chat) == ("Hi", [("file", "{}")])
    responses = _sse(
        {"type": "response.output_text.delta", "delta": "partial"},
        {
            "type": "response.completed",
            "response": {
                "output": [
                    {"type": "message", "content": [{"type": "output_text", "text": "whole"}]}
                ]
            },
        },
    )
    assert reply_of(None, responses) == ("whole", [])


def test_failures_are_flagged() -> None:
    views = event_views(
        [
            _event(
                1, "llm.response", {"provider": "p", "status": 529, "body": {"error": "overloaded"}}
            ),
            _event(2, "tool.result", {"tool": "shell", "ok": False, "error": "exit 2"}),
            _event(
                3, "provider.fallback", {"from_provider": "a", "to_provider": "b", "error": "529"}
            ),
            _event(
                4, "session.end", {"status": "error", "reason": "provider failed", "infra": True}
            ),
            _event(5, "io.output", {"text": "fine"}),
        ]
    )
    assert [v["bad"] for v in views] == [True, True, True, True, False]
    assert "overloaded" in _fields(views[0])["body"]
    assert views[2]["title"] == "provider fallback: a -> b"


def test_unknown_and_malformed_events_do_not_break_the_view() -> None:
    views = event_views(
        [{"seq": "x", "type": "future.thing", "payload": {"a": 1}}, {"payload": None}, {}]
    )
    assert (
        views[0]["seq"] is None
        and views[0]["title"] == "event"
        and '"a": 1' in _fields(views[0])["payload"]
    )
    assert views[1]["type"] == "?"


def test_load_events_skips_torn_lines_and_replaces_broken_utf8(tmp_path: Path) -> None:
    good = json.dumps(_event(1, "io.output", {"text": "ok"})).encode()
    broken = b'{"seq": 2, "type": "io.output", "turn": 1, "payload": {"text": "caf\xc3 \xff"}}'
    (tmp_path / "events.jsonl").write_bytes(good + b"\n" + broken + b"\n" + b'{"seq": 3, "ty')
    events, note = load_events(tmp_path)
    assert [e["seq"] for e in events] == [1, 2]
    assert events[1]["payload"]["text"] == "caf\ufffd \ufffd"
    assert note == "1 unreadable line(s) in events.jsonl skipped"


def test_journals_read_with_one_pool_keep_each_long_text_once(tmp_path: Path) -> None:
    """A request carries the conversation so far, and a replay repeats its golden journal:
    read with one pool, a long message is one string wherever it appears (issue 28)."""
    message = "m" * POOLED_TEXT
    for name in ("golden", "observed"):
        lines = [
            _event(seq, "llm.request", {"body": {"messages": [message] * seq, "model": "x"}})
            for seq in (1, 2)
        ]
        (tmp_path / name).mkdir()
        (tmp_path / name / "events.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    pool = TextPool()
    golden, _ = load_events(tmp_path / "golden", pool)
    observed, _ = load_events(tmp_path / "observed", pool)
    texts = [m for e in golden + observed for m in e["payload"]["body"]["messages"]]
    assert len(texts) == 6 and all(text == message for text in texts)
    assert len({id(text) for text in texts}) == 1, "one string, not six"
    assert observed == load_events(tmp_path / "observed")[0], "nothing else changes"


def test_load_events_of_a_missing_journal_says_so(tmp_path: Path) -> None:
    events, note = load_events(tmp_path / "nowhere")
    assert events == [] and note is not None and "events.jsonl could not be read" in note


def _journal(answer: str, extra: bool = False) -> list[dict[str, Any]]:
    events = [
        _event(
            1,
            "session.start",
            {"engine": "e", "version": "1", "session_id": "a", "mode": "record"},
            0,
        ),
        _event(2, "io.input", {"text": "hi"}),
        _event(3, "llm.response", {"provider": "p", "latency_ms": 5.0, "body": {"text": answer}}),
        _event(4, "io.output", {"text": answer}),
    ]
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
    views = event_views(
        [
            _event(
                1, "tool.call", {"tool": "shell", "call_id": "c1", "args": {"command": "du -sh ."}}
            ),
            _event(
                2,
                "tool.result",
                {
                    "tool": "shell",
                    "call_id": "c1",
                    "ok": True,
                    "result": {"stdout": "12M\t.\nmore\n", "stderr": "", "exit_code": 0},
                },
            ),
            _event(
                3,
                "tool.result",
                {"tool": "file", "call_id": "c2", "ok": True, "result": {"entries": ["a", "b"]}},
            ),
        ]
    )
    assert _fields(views[0]) == {"call id": "c1", "arguments.command": "du -sh ."}
    # Empty stderr left out
    assert _fields(views[1]) == {
        "result.stdout": "12M\t.\nmore\n",
        "result.exit_code": "0",
    }
    assert _fields(views[2]) == {"result": '{"entries": ["a", "b"]}'}


def test_skills_and_a_plan_are_shown_with_what_was_done() -> None:
    views = event_views(
        [
            _event(
                1,
                "skill.discover",
                {"skills": [{"name": "release-notes", "description": "Short notes."}]},
            ),
            _event(
                2, "plan.created", {"text": "...", "steps": ["[skill] load it", "[shell] read"]}
            ),
            _event(
                3,
                "plan.result",
                {
                    "steps": [
                        {"text": "[skill] load it", "tool": "skill", "done": True},
                        {"text": "[shell] read", "tool": "shell", "done": False},
                    ],
                    "done": 1,
                    "checkable": 2,
                    "followed": False,
                },
            ),
        ]
    )
    assert [v["title"] for v in views] == [
        "skills discovered (1)",
        "plan (2 steps)",
        "plan result: 1 of 2 checkable steps done",
    ]
    assert _fields(views[0])["skills"] == "release-notes: Short notes."
    assert _fields(views[2])["steps"] == "done: [skill] load it\nNOT DONE: [shell] read"
    assert [v["bad"] for v in views] == [False, False, True]


def test_a_changed_event_names_the_fields_that_changed() -> None:
    golden = _journal("Hello")
    golden.insert(2, _event(5, "llm.request", {"provider": "p", "body": {"system": "Be kind."}}))
    observed = _journal("Hello")
    observed.insert(2, _event(5, "llm.request", {"provider": "p", "body": {"system": "Be rude."}}))
    observed[4]["turn"] = 2
    rows = GoldenJournal(golden).diff(observed)["rows"]
    assert rows[2] == [2, 2, "changed", [["body.system", '"Be kind."', '"Be rude."']]]
    assert rows[4] == [4, 4, "changed", [["turn", "1", "2"]]]
    assert all(len(row) == 3 for row in rows if row[2] != "changed")


def test_changed_fields_name_absent_values_and_stay_short() -> None:
    golden = [_event(1, "tool.call", {"tool": "t", "args": {"a": [1], "b": "x" * 500}})]
    observed = [_event(1, "tool.call", {"tool": "t", "args": {"a": [1, 2], "c": 3}})]
    changes = GoldenJournal(golden).diff(observed)["rows"][0][3]
    assert changes[0] == ["args.a[1]", "(absent)", "2"]
    assert changes[1][0] == "args.b" and changes[1][2] == "(absent)"
    assert len(changes[1][1]) == 200 and changes[1][1].endswith("…")
    assert changes[2] == ["args.c", "(absent)", "3"]


def test_appended_items_say_where_their_list_grew_from() -> None:
    views = event_views(_growing_requests(3))
    assert "at" not in views[0]
    assert [view["at"] for view in views[1:]] == [{"messages": 1}, {"messages": 3}]


def test_where_an_attempt_went_live_is_shown() -> None:
    views = event_views(
        [_event(9, "session.live_from", {"turn": 3, "replayed_session": "abc123"}, turn=3)]
    )
    assert views[0]["title"] == "live from user turn 3 (--nodeval-from-turn)"
    assert _fields(views[0]) == {
        "replayed": "user turns before 3, from the case's journal",
        "journal's session": "abc123",
    }
    assert views[0]["bad"] is False
