from __future__ import annotations

from typing import Any

import pytest

from pytest_nodeval.checks.assertions import ASSERTION, AssertionsFile, Evidence, evaluate, matches
from pytest_nodeval.checks.expect import expect
from pytest_nodeval.errors import CaseFormatError
from pytest_nodeval.journal.events import EVENT_ADAPTER
from pytest_nodeval.yamlfiles import validate


def _events(*specs: tuple[str, dict[str, Any]]) -> list[Any]:
    return [
        EVENT_ADAPTER.validate_python({"seq": i, "ts": "t", "type": t, "turn": 1, "payload": p})
        for i, (t, p) in enumerate(specs, start=1)
    ]


SESSION = _events(
    ("session.start", {"engine": "e", "version": "1", "session_id": "s"}),
    ("io.input", {"text": "How big is it?"}),
    ("llm.request", {"provider": "mock", "api": "mock", "body": {}}),
    (
        "llm.response",
        {"provider": "mock", "body": {}, "usage": {"input_tokens": 30, "output_tokens": 10}},
    ),
    ("tool.call", {"tool": "shell", "call_id": "c1", "args": {"command": "du -sh .", "cwd": "/w"}}),
    (
        "tool.result",
        {"tool": "shell", "call_id": "c1", "ok": True, "result": {"stdout": "12M\t.\n"}},
    ),
    ("tool.call", {"tool": "file", "call_id": "c2", "args": {"op": "read", "path": "x"}}),
    ("tool.result", {"tool": "file", "call_id": "c2", "ok": False, "error": "missing"}),
    ("io.output", {"text": "It uses 12 MB."}),
    (
        "session.end",
        {
            "status": "ok",
            "turns": 2,
            "duration_ms": 900.0,
            "usage": {"input_tokens": 30, "output_tokens": 10},
        },
    ),
)


def check(
    spec: dict[str, Any], events: list[Any] = SESSION, golden: list[Any] | None = None
) -> Any:
    return evaluate(ASSERTION.validate_python(spec), Evidence(events, golden))


@pytest.mark.parametrize(
    "spec",
    [
        {
            "kind": "event_present",
            "type": "tool.call",
            "where": {"args.command": {"regex": "^du "}},
        },
        {"kind": "event_absent", "type": "provider.fallback"},
        {"kind": "event_count", "type": "tool.call", "equals": 2},
        {
            "kind": "sequence",
            "events": [
                "io.input",
                "tool.call",
                {"type": "tool.result", "where": {"ok": True}},
                "io.output",
            ],
        },
        {"kind": "tool_called", "tool": "shell", "args": {"command": {"contains": "du"}}},
        {
            "kind": "tool_called",
            "tool": "shell",
            "args": {"command": "du -sh .", "cwd": "/w"},
            "args_exact": True,
            "times": 1,
        },
        {"kind": "tool_not_called", "tool": "code_exec"},
        {"kind": "output_contains", "text": "12 mb"},
        {"kind": "output_matches", "regex": r"\d+ MB"},
        {"kind": "output_equals", "text": "It uses 12 MB."},
        {"kind": "no_errors", "allow_tools": ["file"]},
        {"kind": "max_turns", "value": 2},
        {"kind": "max_tokens", "value": 40},
        {"kind": "max_latency_ms", "value": 1000},
    ],
)
def test_passing_assertions(spec: dict[str, Any]) -> None:
    result = check(spec)
    assert result.status == "passed", result.message


@pytest.mark.parametrize(
    "spec, expected",
    [
        ({"kind": "event_present", "type": "io.ask"}, "expected an event io.ask; there is none"),
        ({"kind": "event_count", "type": "tool.call", "max": 1}, "expected at most 1, observed 2"),
        (
            {"kind": "sequence", "events": ["io.output", "tool.call"]},
            "matched 1 of 2 (io.output(9)), then no tool.call after seq 9",
        ),
        (
            {"kind": "tool_called", "tool": "shell", "args": {"command": {"regex": "^ls"}}},
            "expected at least 1, observed 0",
        ),
        (
            {
                "kind": "tool_called",
                "tool": "shell",
                "args": {"command": "du -sh ."},
                "args_exact": True,
            },
            "observed 0",
        ),
        ({"kind": "tool_not_called", "tool": "file"}, "expected no call of tool 'file'; found 1"),
        ({"kind": "output_contains", "text": "GB"}, "to contain 'GB'; it is 'It uses 12 MB.'"),
        ({"kind": "no_errors"}, "expected no errors; found 1"),
        ({"kind": "max_turns", "value": 1}, "2 turns observed, at most 1 allowed"),
        ({"kind": "max_tokens", "value": 39}, "40 tokens observed"),
    ],
)
def test_failing_assertions_say_what_was_expected(spec: dict[str, Any], expected: str) -> None:
    result = check(spec)
    assert result.status == "failed"
    assert expected in result.message


def test_a_failure_shows_the_nearest_observed_events() -> None:
    result = check({"kind": "tool_called", "tool": "shell", "args": {"command": {"regex": "^ls"}}})
    assert "nearest observed events:" in result.message
    assert 'seq 5 tool.call {"tool": "shell"' in result.message
    assert result.seqs[0] == 5


def test_json_schema_output() -> None:
    events = _events(("io.output", {"text": '{"total": 12, "unit": "MB"}'}))
    schema = {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer"}}}
    assert check({"kind": "output_json_schema", "schema": schema}, events).status == "passed"
    bad = {"type": "object", "properties": {"total": {"type": "string"}}}
    result = check({"kind": "output_json_schema", "schema": bad}, events)
    assert result.status == "failed" and "at total: 12 is not of type 'string'" in result.message
    # The file's key is `schema:`, as its JSON Schema says: the field's Python name is no key.
    spec = {"kind": "output_json_schema", "json_schema": schema}
    with pytest.raises(CaseFormatError, match="json_schema"):
        validate(AssertionsFile, [spec], "assertions.yaml")


def test_same_tool_sequence_against_the_golden_journal() -> None:
    golden = [e for e in SESSION if e.seq != 7]
    result = check({"kind": "same_tool_sequence"}, SESSION, golden)
    assert result.status == "failed"
    assert "at call #2" in result.message
    assert check({"kind": "same_tool_sequence"}, SESSION, SESSION).status == "passed"
    assert check({"kind": "same_tool_sequence"}, SESSION, None).status == "skipped"


def test_judge_rubrics_are_skipped_never_passed_without_a_judge() -> None:
    result = check({"kind": "judge", "rubric": ["States the total size"]})
    assert result.status == "skipped"
    assert "graded only in full, live and record modes" in result.message


def test_world_assertions_read_the_snapshot() -> None:
    events = _events(
        (
            "world.snapshot",
            {
                "backend": "local",
                "files": {
                    "out.txt": {
                        "exists": True,
                        "content": "done: 3 files",
                        "encoding": "utf-8",
                        "truncated": False,
                    },
                    "gone.txt": {"exists": False},
                },
            },
        )
    )
    assert (
        check({"kind": "world_file_contains", "path": "out.txt", "text": "3 files"}, events).status
        == "passed"
    )
    assert check({"kind": "world_file_exists", "path": "gone.txt"}, events).status == "failed"
    assert (
        "not among the watched paths"
        in check({"kind": "world_file_exists", "path": "other"}, events).message
    )


@pytest.mark.parametrize(
    "expected, actual, result",
    [
        ({"a": 1}, {"a": 1, "b": 2}, True),
        ({"a": {"regex": "^x"}}, {"a": "xyz"}, True),
        ({"n": {"gte": 2, "lt": 5}}, {"n": 5}, False),
        ({"n": {"gt": 1}}, {"n": True}, False),
        ({"tags": {"contains": "b"}}, {"tags": ["a", "b"]}, True),
        ({"k": {"exists": False}}, {}, True),
        ({"k": {"one_of": [1, 2]}}, {"k": 3}, False),
        ([1, {"a": 2}], [1, {"a": 2, "b": 3}], True),
    ],
)
def test_matchers(expected: Any, actual: Any, result: bool) -> None:
    assert matches(expected, actual) is result


def test_unknown_kind_or_key_is_a_clear_error() -> None:
    with pytest.raises(CaseFormatError) as info:
        validate(
            AssertionsFile, [{"kind": "tool_called", "tool": "shell", "tims": 2}], "assertions.yaml"
        )
    said = (
        "assertions.yaml: assertions.0.tool_called.tims: unknown key "
        "(valid keys: name, kind, tool, args"
    )
    assert said in str(info.value)
    with pytest.raises(
        CaseFormatError,
        match=r"assertions.0: Input tag 'tool_caled' found using 'kind' does not match",
    ):
        validate(AssertionsFile, [{"kind": "tool_caled", "tool": "shell"}], "assertions.yaml")


def test_expect_raises_with_the_same_explanation() -> None:
    expect(SESSION).tool_called("shell", {"command": {"regex": "^du"}})
    with pytest.raises(AssertionError, match="calls of tool 'shell'"):
        expect(SESSION).tool_called("shell", times=3)


def _plan(steps: list[dict[str, Any]], followed: bool) -> list[Any]:
    checkable = [s for s in steps if s["tool"]]
    return _events(
        ("plan.created", {"text": "plan", "steps": [s["text"] for s in steps]}),
        (
            "plan.result",
            {
                "steps": steps,
                "done": sum(1 for s in checkable if s["done"]),
                "checkable": len(checkable),
                "followed": followed,
            },
        ),
    )


def test_plan_followed() -> None:
    done = {"text": "[shell] measure", "tool": "shell", "done": True}
    missed = {"text": "[file] write it down", "tool": "file", "done": False}
    prose = {"text": "[none] answer", "tool": None, "done": None}
    assert check({"kind": "plan_followed"}, _plan([done, prose], True)).status == "passed"
    result = check({"kind": "plan_followed"}, _plan([done, missed], False))
    assert result.status == "failed" and "1 done, not done: [file] write it down" in result.message
    assert (
        check({"kind": "plan_followed", "min_done": 0.5}, _plan([done, missed], False)).status
        == "passed"
    )
    assert "made no plan" in check({"kind": "plan_followed"}).message
    assert (
        "names none of the agent's tools"
        in check({"kind": "plan_followed"}, _plan([prose], False)).message
    )
