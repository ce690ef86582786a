"""Deterministic assertions over the observed events (`assertions.yaml` and the Python API).

Each assertion is a pydantic model with a `kind`; `evaluate` turns it into an
`AssertionResult` that says what was expected and, on failure, shows the nearest
observed events. Field matchers address payload paths:

  literal                 equal
  {regex: "^du "}         re.search on the string form
  {contains: "MB"}        substring (or list membership)
  {one_of: [a, b]}        equal to one of
  {gte: 1, lt: 5}         numeric bounds (gt, gte, lt, lte)
  {exists: false}         the path is absent
  {key: matcher, ...}     a dict holding at least these keys, each matching
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from ..agent.config import ProviderSpec
from ..yamlfiles import valid_regex

if TYPE_CHECKING:
    from ..journal.events import Event

_OPERATORS = frozenset({"regex", "contains", "one_of", "gt", "gte", "lt", "lte", "exists"})
_ABSENT = object()


def matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict) and expected and set(expected) <= _OPERATORS:
        return all(_operator(op, arg, actual) for op, arg in expected.items())
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            matches(v, actual.get(k, _ABSENT)) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return actual is not _ABSENT and expected == actual


def _operator(op: str, arg: Any, actual: Any) -> bool:
    if op == "exists":
        return (actual is not _ABSENT) == bool(arg)
    if actual is _ABSENT:
        return False
    if op == "regex":
        return re.search(arg, actual if isinstance(actual, str) else json.dumps(actual)) is not None
    if op == "contains":
        return arg in actual if isinstance(actual, (list, str)) else str(arg) in json.dumps(actual)
    if op == "one_of":
        return actual in arg
    if not isinstance(actual, (int, float)) or isinstance(actual, bool):
        return False
    compared: dict[str, bool] = {
        "gt": actual > arg,
        "gte": actual >= arg,
        "lt": actual < arg,
        "lte": actual <= arg,
    }
    return compared[op]


def where_matches(event: Any, where: dict[str, Any]) -> bool:
    payload = event.payload_dict()
    return all(matches(expected, _path(payload, path)) for path, expected in where.items())


def _path(data: Any, path: str) -> Any:
    current = data
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _ABSENT
    return current


# -- the assertion kinds ------------------------------------------------------------------


def _compile(pattern: Any, where: str) -> None:
    if not isinstance(pattern, str):
        raise ValueError(f"{where}: a regex must be a string, got {pattern!r}")
    try:
        valid_regex(pattern)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _check_regexes(value: Any, where: str) -> None:
    """Compile every `{regex: ...}` operator in args/where trees now, so a bad one fails at load."""
    if isinstance(value, dict):
        if value and set(value) <= _OPERATORS and "regex" in value:
            _compile(value["regex"], f"{where}.regex" if where else "regex")
        for key, item in value.items():
            _check_regexes(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_regexes(item, f"{where}.{index}" if where else str(index))


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    """Shown in reports instead of the generated description."""

    @model_validator(mode="after")
    def _regexes_compile(self) -> Any:
        for name in ("args", "where"):
            _check_regexes(getattr(self, name, None), name)
        return self


class EventPattern(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    where: dict[str, Any] = Field(default_factory=dict)

    @field_validator("where")
    @classmethod
    def _regexes_compile(cls, where: dict[str, Any]) -> dict[str, Any]:
        _check_regexes(where, "where")
        return where


class EventPresent(_Spec):
    kind: Literal["event_present"]
    type: str
    where: dict[str, Any] = Field(default_factory=dict)


class EventAbsent(_Spec):
    kind: Literal["event_absent"]
    type: str
    where: dict[str, Any] = Field(default_factory=dict)


class EventCount(_Spec):
    kind: Literal["event_count"]
    type: str
    where: dict[str, Any] = Field(default_factory=dict)
    equals: int | None = None
    min: int | None = None
    max: int | None = None


class SequenceSpec(_Spec):
    """The events occur in this order (others may come in between)."""

    kind: Literal["sequence"]
    events: list[EventPattern] = Field(min_length=1)

    @field_validator("events", mode="before")
    @classmethod
    def _types_as_patterns(cls, events: Any) -> Any:
        return (
            [{"type": e} if isinstance(e, str) else e for e in events]
            if isinstance(events, list)
            else events
        )


class ToolCalled(_Spec):
    kind: Literal["tool_called"]
    tool: str
    args: dict[str, Any] | None = None
    """Matchers for the arguments: a subset unless `args_exact` is true."""
    args_exact: bool = False
    times: int | None = None
    min_times: int | None = None
    max_times: int | None = None


class ToolNotCalled(_Spec):
    kind: Literal["tool_not_called"]
    tool: str
    args: dict[str, Any] | None = None


class OutputContains(_Spec):
    kind: Literal["output_contains"]
    text: str
    case_sensitive: bool = False


class OutputMatches(_Spec):
    kind: Literal["output_matches"]
    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        _compile(value, "regex")
        return value


class OutputEquals(_Spec):
    kind: Literal["output_equals"]
    text: str


class OutputJsonSchema(_Spec):
    kind: Literal["output_json_schema"]
    json_schema: dict[str, Any] = Field(alias="schema")
    """Read as `schema:` only, as the shipped JSON Schema has it (the field's own name would
    shadow BaseModel's)."""


class NoErrors(_Spec):
    """No failed tool result, provider fallback or session error."""

    kind: Literal["no_errors"]
    allow_tools: list[str] = Field(default_factory=list)
    """Tools whose failures the agent is expected to handle."""
    allow_fallback: bool = False


class PlanFollowed(_Spec):
    """The engine's plan (`plan: true`) was followed: every step naming a tool was done, in order."""  # noqa: E501  (the schema's description)

    kind: Literal["plan_followed"]
    min_done: float = Field(default=1.0, ge=0, le=1)
    """The share of the plan's checkable steps that must be done (1.0: all of them, in order)."""


class MaxTurns(_Spec):
    kind: Literal["max_turns"]
    value: int = Field(ge=0)


class MaxTokens(_Spec):
    kind: Literal["max_tokens"]
    value: int = Field(ge=0)


class MaxLatency(_Spec):
    kind: Literal["max_latency_ms"]
    value: float = Field(gt=0)


class SameToolSequence(_Spec):
    """The same tool calls, in the same order, as the golden journal."""

    kind: Literal["same_tool_sequence"]
    args: bool = True
    """Compare the arguments too, not only the tool names."""


class WorldFileExists(_Spec):
    kind: Literal["world_file_exists"]
    path: str


class WorldFileContains(_Spec):
    kind: Literal["world_file_contains"]
    path: str
    text: str


class Judge(_Spec):
    """Criteria in plain language, graded by a judge model in full, live and record modes."""

    kind: Literal["judge"]
    rubric: list[str] = Field(min_length=1)
    reference: str | None = None
    """A reference answer the judge compares with."""
    judge: ProviderSpec | None = None
    """The judge model for this rubric (default: the ini key nodeval_judge)."""


AssertionSpec = Annotated[
    EventPresent
    | EventAbsent
    | EventCount
    | SequenceSpec
    | ToolCalled
    | ToolNotCalled
    | OutputContains
    | OutputMatches
    | OutputEquals
    | OutputJsonSchema
    | NoErrors
    | PlanFollowed
    | MaxTurns
    | MaxTokens
    | MaxLatency
    | SameToolSequence
    | WorldFileExists
    | WorldFileContains
    | Judge,
    Field(discriminator="kind"),
]
ASSERTION = TypeAdapter(AssertionSpec)


class AssertionsFile(BaseModel):
    """`assertions.yaml`: a list of assertions (or `{assertions: [...]}`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    assertions: list[AssertionSpec] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _bare_list(cls, data: Any) -> Any:
        return {"assertions": data} if isinstance(data, list) else data


# -- evaluation ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssertionResult:
    kind: str
    description: str
    status: Literal["passed", "failed", "skipped"]
    message: str = ""
    seqs: tuple[int, ...] = ()
    """The observed events the result refers to (matched, or nearest when failing)."""

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "description": self.description,
            "status": self.status,
            "message": self.message,
            "seqs": list(self.seqs),
        }


@dataclass(frozen=True)
class Evidence:
    """What assertions look at: the observed events, and the golden ones if there are any."""

    events: Sequence[Event]
    golden: Sequence[Event] | None = None
    judged: dict[str, Any] = field(default_factory=dict)
    """Judge verdicts by criterion, when a judge ran (full, live and record modes)."""

    def of_type(self, type_name: str) -> list[Event]:
        return [e for e in self.events if e.type == type_name]

    @property
    def output(self) -> str | None:
        outputs = self.of_type("io.output")
        text: str | None = outputs[-1].payload.text if outputs else None
        return text


def describe(spec: Any) -> str:
    name: str | None = spec.name
    if name:
        return name
    fields = spec.model_dump(exclude={"kind", "name"}, exclude_defaults=True, by_alias=True)
    return f"{spec.kind} " + json.dumps(fields, default=str) if fields else spec.kind


def evaluate(spec: Any, evidence: Evidence) -> AssertionResult:
    check = _CHECKS[spec.kind]
    status, message, seqs = check(spec, evidence)
    return AssertionResult(spec.kind, describe(spec), status, message, tuple(seqs))


def evaluate_all(specs: Sequence[Any], evidence: Evidence) -> list[AssertionResult]:
    return [evaluate(spec, evidence) for spec in specs]


_Outcome = tuple[Literal["passed", "failed", "skipped"], str, list[int]]


def _ok(seqs: list[int] | None = None) -> _Outcome:
    return "passed", "", seqs or []


def _fail(message: str, nearest: Sequence[Any] = ()) -> _Outcome:
    shown = list(nearest)[:5]
    if shown:
        message += "\n  nearest observed events:\n" + "\n".join("    " + line_for(e) for e in shown)
    return "failed", message, [e.seq for e in shown]


def line_for(event: Any) -> str:
    payload = json.dumps(event.payload_dict(), default=str, ensure_ascii=False)
    return (
        f"seq {event.seq} {event.type} {payload if len(payload) <= 160 else payload[:157] + '...'}"
    )


def _nearest_by_type(evidence: Evidence, type_name: str) -> list[Any]:
    same = evidence.of_type(type_name)
    if same:
        return same
    namespace = type_name.split(".")[0] + "."
    return [e for e in evidence.events if e.type.startswith(namespace)]


def _matching(evidence: Evidence, type_name: str, where: dict[str, Any]) -> list[Any]:
    return [e for e in evidence.of_type(type_name) if where_matches(e, where)]


def _check_present(spec: EventPresent, evidence: Evidence) -> _Outcome:
    found = _matching(evidence, spec.type, spec.where)
    if found:
        return _ok([found[0].seq])
    return _fail(
        f"expected an event {spec.type}{_where_text(spec.where)}; there is none",
        _nearest_by_type(evidence, spec.type),
    )


def _check_absent(spec: EventAbsent, evidence: Evidence) -> _Outcome:
    found = _matching(evidence, spec.type, spec.where)
    if not found:
        return _ok()
    return _fail(
        f"expected no event {spec.type}{_where_text(spec.where)}; found {len(found)}", found
    )


def _check_count(spec: EventCount, evidence: Evidence) -> _Outcome:
    found = _matching(evidence, spec.type, spec.where)
    problem = _count_problem(len(found), spec.equals, spec.min, spec.max)
    if problem is None:
        return _ok([e.seq for e in found])
    return _fail(
        f"{spec.type}{_where_text(spec.where)}: {problem}",
        found or _nearest_by_type(evidence, spec.type),
    )


def _count_problem(count: int, equals: int | None, low: int | None, high: int | None) -> str | None:
    if equals is not None and count != equals:
        return f"expected exactly {equals}, observed {count}"
    if low is not None and count < low:
        return f"expected at least {low}, observed {count}"
    if high is not None and count > high:
        return f"expected at most {high}, observed {count}"
    return None


def _check_sequence(spec: SequenceSpec, evidence: Evidence) -> _Outcome:
    matched: list[Any] = []
    events = iter(evidence.events)
    for pattern in spec.events:
        hit = next(
            (e for e in events if e.type == pattern.type and where_matches(e, pattern.where)), None
        )
        if hit is None:
            after = matched[-1].seq if matched else 0
            expected = " -> ".join(p.type for p in spec.events)
            got = " -> ".join(f"{e.type}({e.seq})" for e in matched) or "nothing"
            return _fail(
                f"expected the sequence {expected}; matched {len(matched)} of {len(spec.events)} "
                f"({got}), then no {pattern.type}{_where_text(pattern.where)} after seq {after}",
                [
                    e
                    for e in evidence.events
                    if e.seq > after and e.type.split(".")[0] == pattern.type.split(".")[0]
                ],
            )
        matched.append(hit)
    return _ok([e.seq for e in matched])


def _tool_calls(
    evidence: Evidence, tool: str, args: dict[str, Any] | None, exact: bool
) -> list[Any]:
    calls = [e for e in evidence.of_type("tool.call") if e.payload.tool == tool]
    if args is None:
        return calls
    return [
        e
        for e in calls
        if matches(args, e.payload.args) and (not exact or set(e.payload.args or {}) == set(args))
    ]


def _check_tool_called(spec: ToolCalled, evidence: Evidence) -> _Outcome:
    found = _tool_calls(evidence, spec.tool, spec.args, spec.args_exact)
    low = spec.min_times if spec.min_times is not None else (None if spec.times is not None else 1)
    problem = _count_problem(len(found), spec.times, low, spec.max_times)
    if problem is None:
        return _ok([e.seq for e in found])
    expected_calls = f"tool '{spec.tool}'" + (
        f" with args {json.dumps(spec.args)}" if spec.args is not None else ""
    )
    calls = evidence.of_type("tool.call")
    nearest = [e for e in calls if e.payload.tool == spec.tool] + [
        e for e in calls if e.payload.tool != spec.tool
    ]
    return _fail(f"calls of {expected_calls}: {problem}", nearest)


def _check_tool_not_called(spec: ToolNotCalled, evidence: Evidence) -> _Outcome:
    found = _tool_calls(evidence, spec.tool, spec.args, False)
    if not found:
        return _ok()
    return _fail(f"expected no call of tool '{spec.tool}'; found {len(found)}", found)


def _output_or_fail(evidence: Evidence) -> tuple[str | None, _Outcome | None]:
    output = evidence.output
    if output is None:
        ends = evidence.of_type("session.end")
        return None, _fail("the session produced no output (no io.output event)", ends)
    return output, None


def _check_output(evidence: Evidence, holds: Any, expectation: str) -> _Outcome:
    """Pass when holds(final output) is true; otherwise say what was expected and what it is."""
    output, failed = _output_or_fail(evidence)
    if failed is not None or output is None:
        return failed or _fail("no output")
    if holds(output):
        return _ok()
    return _fail(
        f"expected the final output to {expectation}; it is {_clip(output)!r}",
        evidence.of_type("io.output")[-1:],
    )


def _check_output_contains(spec: OutputContains, evidence: Evidence) -> _Outcome:
    def holds(output: str) -> bool:
        return spec.text in output if spec.case_sensitive else spec.text.lower() in output.lower()

    return _check_output(evidence, holds, f"contain {spec.text!r}")


def _check_output_matches(spec: OutputMatches, evidence: Evidence) -> _Outcome:
    return _check_output(
        evidence, lambda output: re.search(spec.regex, output) is not None, f"match /{spec.regex}/"
    )


def _check_output_equals(spec: OutputEquals, evidence: Evidence) -> _Outcome:
    return _check_output(
        evidence, lambda output: output.strip() == spec.text.strip(), f"equal {spec.text!r}"
    )


def _check_json_schema(spec: OutputJsonSchema, evidence: Evidence) -> _Outcome:
    import jsonschema

    output, failed = _output_or_fail(evidence)
    if failed or output is None:
        return failed or _fail("no output")
    try:
        document = json.loads(output)
    except ValueError as exc:
        return _fail(f"the final output is not JSON ({exc}); it is {_clip(output)!r}")
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(spec.json_schema).iter_errors(document)
    )
    if error is None:
        return _ok()
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return _fail(f"the final output does not match the JSON schema at {where}: {error.message}")


def _check_no_errors(spec: NoErrors, evidence: Evidence) -> _Outcome:
    bad = [
        e
        for e in evidence.of_type("tool.result")
        if not e.payload.ok and e.payload.tool not in spec.allow_tools
    ]
    if not spec.allow_fallback:
        bad += evidence.of_type("provider.fallback")
    bad += [e for e in evidence.of_type("session.end") if e.payload.status != "ok"]
    if not bad:
        return _ok()
    return _fail(f"expected no errors; found {len(bad)}", sorted(bad, key=lambda e: e.seq))


def _check_plan_followed(spec: PlanFollowed, evidence: Evidence) -> _Outcome:
    results = evidence.of_type("plan.result")
    if not results:
        created = evidence.of_type("plan.created")
        return _fail(
            "no plan.result event: the agent made no plan (set `plan: true` in input/config.yaml)"
            if not created
            else "the session ended before the plan's result was recorded",
            created,
        )
    result = results[-1].payload
    if result.checkable == 0:
        return _fail(
            "the plan names none of the agent's tools, "
            "so the journal cannot tell whether it was followed",
            results,
        )
    share = result.done / result.checkable
    missed = [s["text"] for s in result.steps if s.get("done") is False]
    if (spec.min_done >= 1.0 and result.followed) or (
        spec.min_done < 1.0 and share >= spec.min_done
    ):
        return _ok([results[-1].seq])
    return _fail(
        f"expected {spec.min_done:.0%} of the plan's {result.checkable} checkable step(s) "
        f"done in order; {result.done} done, not done: "
        f"{'; '.join(missed) or 'none (done out of order)'}",
        results,
    )


def _check_budget(spec: MaxTurns | MaxTokens | MaxLatency, evidence: Evidence) -> _Outcome:
    ends = evidence.of_type("session.end")
    if not ends:
        return _fail("the session did not end (no session.end event)")
    end = ends[-1].payload
    observed: float = {
        "max_turns": end.turns,
        "max_tokens": end.usage.input_tokens + end.usage.output_tokens,
        "max_latency_ms": end.duration_ms,
    }[spec.kind]
    if observed <= spec.value:
        return _ok([ends[-1].seq])
    unit = {"max_turns": " turns", "max_tokens": " tokens", "max_latency_ms": " ms"}[spec.kind]
    return _fail(
        f"budget exceeded: {observed:g}{unit} observed, at most {spec.value:g} allowed", ends
    )


def _check_same_tools(spec: SameToolSequence, evidence: Evidence) -> _Outcome:
    if evidence.golden is None:
        return "skipped", "no golden journal to compare with", []

    def calls(events: Sequence[Any]) -> list[Any]:
        return [
            (e.payload.tool, e.payload.args) if spec.args else e.payload.tool
            for e in events
            if e.type == "tool.call"
        ]

    golden, observed = calls(evidence.golden), calls(evidence.events)
    if golden == observed:
        return _ok([e.seq for e in evidence.of_type("tool.call")])
    # strict=False: the lists may differ in length; past the shorter one, the default index.
    index = next(
        (i for i, (g, o) in enumerate(zip(golden, observed, strict=False)) if g != o),
        min(len(golden), len(observed)),
    )
    return _fail(
        f"tool calls differ from the golden journal at call #{index + 1}: "
        f"golden {json.dumps(golden[index : index + 1], default=str)}, "
        f"observed {json.dumps(observed[index : index + 1], default=str)} "
        f"({len(golden)} golden calls, {len(observed)} observed)",
        evidence.of_type("tool.call")[index:],
    )


def _snapshot_file(evidence: Evidence, path: str) -> dict[str, Any] | None:
    for event in reversed(evidence.of_type("world.snapshot")):
        files: dict[str, dict[str, Any]] = event.payload.files
        if path in files:
            return files[path]
    return None


def _check_world_exists(spec: WorldFileExists, evidence: Evidence) -> _Outcome:
    state = _snapshot_file(evidence, spec.path)
    if state is None:
        return _fail(
            f"{spec.path!r} is not among the watched paths of any world.snapshot; "
            "add it to `world.watch` in case.yaml and re-record",
            evidence.of_type("world.snapshot"),
        )
    if state.get("exists"):
        return _ok()
    return _fail(
        f"expected {spec.path!r} to exist in the world at the end; it does not",
        evidence.of_type("world.snapshot"),
    )


def _check_world_contains(spec: WorldFileContains, evidence: Evidence) -> _Outcome:
    state = _snapshot_file(evidence, spec.path)
    if state is None or not state.get("exists"):
        return _check_world_exists(
            WorldFileExists(kind="world_file_exists", path=spec.path), evidence
        )
    if state.get("unreadable"):
        return _fail(
            f"expected {spec.path!r} to contain {spec.text!r}; it was unreadable in the world at "
            f"the end ({state.get('reason') or 'no reason given'})",
            evidence.of_type("world.snapshot"),
        )
    content = state.get("content", "")
    if state.get("encoding") == "utf-8" and spec.text in content:
        return _ok()
    suffix = " (snapshot truncated)" if state.get("truncated") else ""
    return _fail(
        f"expected {spec.path!r} to contain {spec.text!r}; it holds {_clip(content)!r}{suffix}",
        evidence.of_type("world.snapshot"),
    )


def _check_judge(spec: Judge, evidence: Evidence) -> _Outcome:
    verdicts = [evidence.judged.get(criterion) for criterion in spec.rubric]
    if all(v is None for v in verdicts):
        return "skipped", "judge rubrics are graded only in full, live and record modes", []
    failed = [
        (c, v)
        for c, v in zip(spec.rubric, verdicts, strict=True)
        if v is not None and v.get("verdict") == "fail"
    ]
    unsure = [
        (c, v)
        for c, v in zip(spec.rubric, verdicts, strict=True)
        if v is None or v.get("verdict") not in ("pass", "fail")
    ]
    seqs = [e.seq for e in evidence.of_type("judge.response") if e.payload.criterion in spec.rubric]
    if failed:
        status, message, _ = _fail("; ".join(f"{c!r}: {v.get('reason', '')}" for c, v in failed))
        return status, message, seqs
    if unsure:
        # An unsure judge is not the agent failing: reported, neither passed nor failed.
        detail = "; ".join(
            f"{c!r}: {(v or {}).get('verdict', 'no verdict')}: {(v or {}).get('reason', '')}"
            f"{_raw(v)}"
            for c, v in unsure
        )
        return "skipped", detail, seqs
    return "passed", "", seqs


def _raw(verdict: dict[str, Any] | None) -> str:
    raw = (verdict or {}).get("raw")
    return f" (raw answer: {_clip(str(raw))!r})" if raw else ""


def _where_text(where: dict[str, Any]) -> str:
    return f" where {json.dumps(where, default=str)}" if where else ""


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_CHECKS: dict[str, Any] = {
    "event_present": _check_present,
    "event_absent": _check_absent,
    "event_count": _check_count,
    "sequence": _check_sequence,
    "tool_called": _check_tool_called,
    "tool_not_called": _check_tool_not_called,
    "output_contains": _check_output_contains,
    "output_matches": _check_output_matches,
    "output_equals": _check_output_equals,
    "output_json_schema": _check_json_schema,
    "no_errors": _check_no_errors,
    "plan_followed": _check_plan_followed,
    "max_turns": _check_budget,
    "max_tokens": _check_budget,
    "max_latency_ms": _check_budget,
    "same_tool_sequence": _check_same_tools,
    "world_file_exists": _check_world_exists,
    "world_file_contains": _check_world_contains,
    "judge": _check_judge,
}
