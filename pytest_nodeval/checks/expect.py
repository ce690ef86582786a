"""The Python assertion API: the same checks as `assertions.yaml`, for scenarios written in Python.

    from pytest_nodeval import expect

    def test_refund(nodeval_run):
        expect(nodeval_run).tool_called("shell", args={"command": {"regex": "^du "}})
        expect(nodeval_run).output_contains("MB")

Each method raises AssertionError with the same explanation a YAML assertion gives, and
its result is listed in the attempt's report. `check()` takes a YAML-shaped dict.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

from ..text import printable
from .assertions import ASSERTION, AssertionResult, Evidence, evaluate

# Where expect()'s results are listed besides being raised: the running attempt's results,
# so they appear in its report. The pytest layer sets it for the length of a test.
_RESULTS: ContextVar[list[AssertionResult] | None] = ContextVar(
    "nodeval_expect_results", default=None
)


def collect_results(into: list[AssertionResult]) -> Token[list[AssertionResult] | None]:
    """List the results of `expect()` calls made in this context in `into`, until
    `stop_collecting`."""
    return _RESULTS.set(into)


def stop_collecting(token: Token[list[AssertionResult] | None]) -> None:
    _RESULTS.reset(token)


def note_results(results: list[AssertionResult]) -> None:
    sink = _RESULTS.get()
    if sink is not None:
        sink.extend(results)


def evidence_of(target: Any) -> Evidence:
    """What to check: an Evidence, anything with one (an observed session, an attempt), or
    events."""
    if isinstance(target, Evidence):
        return target
    evidence = getattr(target, "evidence", None)
    if isinstance(evidence, Evidence):
        return evidence
    return Evidence(list(target))


class Expect:
    """`expect(target)`: assertions.yaml's kinds as methods, over one attempt's events.

    It owns only the evidence it was given (an attempt, an observed session or events). Each
    method checks one assertion, adds its result to the attempt's report while an attempt is
    active, and raises AssertionError (with pytest's usual failure) when it fails.
    """

    def __init__(self, target: Any) -> None:
        self._evidence = evidence_of(target)

    def check(self, spec: dict[str, Any]) -> AssertionResult:
        result = evaluate(ASSERTION.validate_python(spec), self._evidence)
        note_results([result])
        if result.status == "failed":
            raise AssertionError(printable(f"{result.description}\n{result.message}"))
        return result

    def _kind(self, kind: str, **fields: Any) -> AssertionResult:
        return self.check({"kind": kind, **{k: v for k, v in fields.items() if v is not None}})

    def event_present(self, type: str, where: dict[str, Any] | None = None) -> AssertionResult:
        return self._kind("event_present", type=type, where=where)

    def event_absent(self, type: str, where: dict[str, Any] | None = None) -> AssertionResult:
        return self._kind("event_absent", type=type, where=where)

    def event_count(
        self,
        type: str,
        where: dict[str, Any] | None = None,
        *,
        equals: int | None = None,
        min: int | None = None,
        max: int | None = None,
    ) -> AssertionResult:
        return self._kind("event_count", type=type, where=where, equals=equals, min=min, max=max)

    def sequence(self, *events: str | dict[str, Any]) -> AssertionResult:
        return self._kind("sequence", events=list(events))

    def tool_called(
        self,
        tool: str,
        args: dict[str, Any] | None = None,
        *,
        exact: bool = False,
        times: int | None = None,
        min_times: int | None = None,
        max_times: int | None = None,
    ) -> AssertionResult:
        return self._kind(
            "tool_called",
            tool=tool,
            args=args,
            args_exact=exact or None,
            times=times,
            min_times=min_times,
            max_times=max_times,
        )

    def tool_not_called(self, tool: str, args: dict[str, Any] | None = None) -> AssertionResult:
        return self._kind("tool_not_called", tool=tool, args=args)

    def output_contains(self, text: str, *, case_sensitive: bool = False) -> AssertionResult:
        return self._kind("output_contains", text=text, case_sensitive=case_sensitive)

    def output_matches(self, regex: str) -> AssertionResult:
        return self._kind("output_matches", regex=regex)

    def output_equals(self, text: str) -> AssertionResult:
        return self._kind("output_equals", text=text)

    def output_json_schema(self, schema: dict[str, Any]) -> AssertionResult:
        return self._kind("output_json_schema", schema=schema)

    def no_errors(
        self, *, allow_tools: list[str] | None = None, allow_fallback: bool = False
    ) -> AssertionResult:
        return self._kind("no_errors", allow_tools=allow_tools, allow_fallback=allow_fallback)

    def plan_followed(self, *, min_done: float = 1.0) -> AssertionResult:
        return self._kind("plan_followed", min_done=min_done)

    def max_turns(self, value: int) -> AssertionResult:
        return self._kind("max_turns", value=value)

    def max_tokens(self, value: int) -> AssertionResult:
        return self._kind("max_tokens", value=value)

    def max_latency_ms(self, value: float) -> AssertionResult:
        return self._kind("max_latency_ms", value=value)

    def same_tool_sequence(self, *, args: bool = True) -> AssertionResult:
        return self._kind("same_tool_sequence", args=args)

    def world_file_exists(self, path: str) -> AssertionResult:
        return self._kind("world_file_exists", path=path)

    def world_file_contains(self, path: str, text: str) -> AssertionResult:
        return self._kind("world_file_contains", path=path, text=text)


def expect(target: Any) -> Expect:
    """Assertions over an observed session (`nodeval_run`), an attempt, or a list of events."""
    return Expect(target)
