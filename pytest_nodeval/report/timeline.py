"""One attempt's journal as the HTML report shows it: compact event views and a golden diff.

Everything here turns journal events into small plain dicts of *strings* for the page:
a title, a few labelled fields, a flag when something went wrong. Long values are cut
(`clip`), and responses are reduced to their text and tool calls, whatever the provider's
API. A request is shown as what changed since the previous request of the same attempt
(`request_patch`: the messages appended, the keys set or removed), and carries that patch
as JSON so the page can rebuild any request's whole body from the first one and the
patches after it. The page renders all of it as text only; nothing here produces markup.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .llm_replies import reply_of

FIELD_LIMIT = 20_000
"""Characters kept per field; a 1 MB tool result must not make a 1 MB page per attempt."""
EVENT_LIMIT = 2_000
"""Events kept per attempt; an agent stuck in a loop should not freeze the browser."""

SPREAD_KEYS = 8
"""Flat objects with up to this many keys (tool arguments and results) show a field per key."""
ONE_LINE = 100
INDENT_LIMIT = 2_000
"""JSON values longer than ONE_LINE and up to this size are shown indented."""
REQUEST_LIMIT = 1_000_000
"""Characters of request patches kept per attempt (JSON); the requests after that point
cannot be rebuilt on the page (their journal has them)."""

# What legitimately differs between a recording and its replay, ignored by the golden diff.
_VOLATILE = frozenset({"ts", "latency_ms", "session_id", "duration_ms", "mode", "headers"})

Field = list[str]  # [label, text]
EventView = dict[str, Any]


def mapping(value: Any) -> dict[str, Any]:
    """A JSON object from a journal, or an empty one when the journal holds something else."""
    return value if isinstance(value, dict) else {}


def clip(text: str, limit: int = FIELD_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters]"


def show(value: Any, limit: int = FIELD_LIMIT) -> str:
    """A value as readable text: strings as they are, anything else as indented JSON."""
    if isinstance(value, str):
        return clip(value, limit)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
        # Values that fit on a line stay on it. Longer ones read better indented, but json
        # indents only in pure Python (slow): worth it for what people read, not for
        # megabytes of tool output.
        if isinstance(value, (dict, list)) and ONE_LINE < len(text) <= INDENT_LIMIT:
            text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except ValueError:  # circular structures cannot come from JSON, but be safe
        text = repr(value)
    return clip(text, limit)


# -- reading ------------------------------------------------------------------------------


def load_events(
    directory: Path, texts: TextPool | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """The raw events of a journal directory and a note on what could not be read.

    Deliberately lenient (unlike `journal.read_journal`): the report must show whatever is
    on disk, including torn, invalid or newer journals, and never fail because of one. Read a
    batch of lines at a time, never the whole file: a 200 MB journal read whole, decoded,
    split and joined took five times its size at once (issue 28). `texts`: its long strings
    are shared with the journals read before with the same pool.
    """
    path = directory / "events.jsonl"
    events: list[dict[str, Any]] = []
    skipped = 0
    try:
        with path.open("rb") as lines:
            for batch in _batches(lines):
                parsed = _parse_batch(batch)
                events += parsed if texts is None else map(texts.share, parsed)
                skipped += len(batch) - len(parsed)
    except OSError as exc:
        return [], f"{path.name} could not be read: {exc.strerror or exc}"
    note = f"{skipped} unreadable line(s) in {path.name} skipped" if skipped else None
    return events, note


POOLED_TEXT = 256
"""Characters from which a string read from a journal is kept once per `TextPool`."""


class TextPool:
    """Long strings read from a case's journals, each kept once however often it is read.

    A model request carries the whole conversation so far, so each message is in every later
    request, and a replay's journal repeats its golden journal's: parsed apart, a 200 MB
    golden journal and its replay took about 200 MB each. Strings cannot change, so sharing
    them changes nothing else.
    """

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def share(self, value: Any) -> Any:
        """`value` (freshly parsed JSON, changed in place) with its long strings shared.

        A loop over a stack rather than a call per value, and exact type checks (parsed JSON
        has no subclasses): the report reads two journals per attempt, and this walks every
        value of them.
        """
        if type(value) is str:
            return self._texts.setdefault(value, value) if len(value) >= POOLED_TEXT else value
        if type(value) is not dict and type(value) is not list:
            return value
        texts = self._texts
        stack = [value]
        while stack:
            node = stack.pop()
            pairs = node.items() if type(node) is dict else enumerate(node)
            for key, item in pairs:
                kind = type(item)
                if kind is str:
                    if len(item) >= POOLED_TEXT:
                        node[key] = texts.setdefault(item, item)
                elif kind is dict or kind is list:
                    stack.append(item)
        return value


READ_BATCH = 4_000_000
"""Bytes of journal lines parsed by one call: one parser call for many lines is much faster
than one per line, and a batch bounds the text held beside the events."""


def _batches(lines: Iterable[bytes]) -> Iterator[list[str]]:
    """The non-blank lines, decoded, in batches of about READ_BATCH bytes."""
    batch: list[str] = []
    size = 0
    for line in lines:
        if not line or line.isspace():  # not line.strip(), which copies the line
            continue
        batch.append(line.decode("utf-8", errors="replace"))
        size += len(line)
        if size >= READ_BATCH:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _parse_batch(batch: list[str]) -> list[dict[str, Any]]:
    """Each line's event; one that cannot be read (a torn or foreign line) is left out."""
    if len(batch) == 1:  # a line of many megabytes is not copied into a batch of one
        return [event for event in map(_parse_line, batch) if event is not None]
    try:
        events = json.loads("[" + ",".join(batch) + "]")
        if all(isinstance(e, dict) for e in events):
            return list(events)
    except ValueError:
        pass  # a torn or foreign line somewhere: go line by line and skip it
    return [event for event in map(_parse_line, batch) if event is not None]


def _parse_line(line: str) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


# -- one event ----------------------------------------------------------------------------


def event_views(events: list[dict[str, Any]]) -> list[EventView]:
    views: list[EventView] = []
    requests = _Requests()
    for event in events[:EVENT_LIMIT]:
        payload = mapping(event.get("payload"))
        if event.get("type") == "llm.request":
            views.append(requests.view(event, payload))
        else:
            views.append(event_view(event, payload, requests.model))
    if len(events) > EVENT_LIMIT:
        views.append(
            {
                "seq": None,
                "turn": None,
                "type": "note",
                "title": "journal cut",
                "fields": [["", f"{len(events) - EVENT_LIMIT} more events are not shown"]],
                "bad": False,
            }
        )
    return views


def event_view(
    event: dict[str, Any], payload: dict[str, Any], model: str | None = None
) -> EventView:
    kind = str(event.get("type", "?"))
    describe = _DESCRIBERS.get(kind, _describe_other)
    title, fields, bad = describe(payload, model) if kind.startswith("llm.") else describe(payload)
    return {
        "seq": _int_or_none(event.get("seq")),
        "turn": _int_or_none(event.get("turn")),
        "type": clip(kind, 200),
        "title": clip(title, 500),
        "fields": [[label, text] for label, text in fields if text != ""],
        "bad": bad,
    }


class _Requests:
    """The LLM requests of one attempt, each described by what changed since the one before."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.previous: Any = None
        self.count = 0
        self.spent = 0  # characters of patches embedded so far

    def view(self, event: dict[str, Any], payload: dict[str, Any]) -> EventView:
        body = payload.get("body")
        self.model = (
            _dig(payload, "body", "model") or _model_in_path(payload.get("path")) or self.model
        )
        patch = request_patch(self.previous if self.count else None, body)
        view = event_view(event, payload, self.model)
        view["fields"] = [
            [label, text]
            for label, text in _patch_fields(self.model, body, patch, self.count == 0)
            if text != ""
        ]
        view["req"] = self._kept(patch)
        if "append" in patch:  # where each list grew from: its appended items are numbered on
            view["at"] = {key: len(self.previous[key]) for key in patch["append"]}
        if view["req"] is None:
            view["fields"].append(
                [
                    "full request",
                    f"not embedded: this attempt's requests changed by more than "
                    f"{REQUEST_LIMIT:,} characters; its journal has them",
                ]
            )
            if "whole" in patch:
                view["fields"].append(["body", show(body)])
        self.previous, self.count = body, self.count + 1
        return view

    def _kept(self, patch: dict[str, Any]) -> dict[str, Any] | None:
        if self.spent > REQUEST_LIMIT:
            return None
        try:
            self.spent += len(json.dumps(patch, allow_nan=False))
        except (TypeError, ValueError):  # NaN or a non-JSON value: this body cannot be rebuilt
            self.spent = REQUEST_LIMIT + 1
        return patch if self.spent <= REQUEST_LIMIT else None


_ABSENT = object()


def request_patch(previous: Any, body: Any) -> dict[str, Any]:
    """How `body` differs from the `previous` request's body (None for the first request).

    `append`: lists (the conversation) that only grew, as the items added at their end;
    `set`: keys that are new or hold another value; `del`: keys removed; `keys`: the key
    order, only when applying the rest would give another one; `whole`: a body that is not a
    JSON object. An empty patch is a body equal to the previous one.
    """
    if not isinstance(body, dict) or not isinstance(previous, (dict, type(None))):
        return {"whole": body}
    previous = previous or {}
    patch: dict[str, Any] = {}
    for key, value in body.items():
        old = previous.get(key, _ABSENT)
        if (
            isinstance(old, list)
            and isinstance(value, list)
            and len(old) <= len(value)
            and value[: len(old)] == old
        ):
            if len(old) < len(value):
                patch.setdefault("append", {})[key] = value[len(old) :]
        elif old is _ABSENT or old != value:
            patch.setdefault("set", {})[key] = value
    removed = [key for key in previous if key not in body]
    if removed:
        patch["del"] = removed
    if [k for k in previous if k in body] + [k for k in body if k not in previous] != list(body):
        patch["keys"] = list(body)
    return patch


def _patch_fields(
    model: str | None, body: Any, patch: dict[str, Any], first: bool
) -> list[tuple[str, str]]:
    """The counts; the changes themselves are in the patch, which the page shows as fields
    (so no text is embedded twice)."""
    messages = _messages_of(body)
    appended: list[Any] = next(
        (v for k, v in patch.get("append", {}).items() if k in _MESSAGE_KEYS), []
    )
    rewritten = any(k in _MESSAGE_KEYS for k in patch.get("set", {}))
    count = f"{len(messages)}" + (
        ""
        if first
        else f" (+{len(appended)})"
        if appended
        else " (all replaced)"
        if rewritten
        else " (none new)"
    )
    changed = [
        str(k)
        for k in patch.get("set", {})
        if k not in _MESSAGE_KEYS and not (first and k == "model")
    ]
    fields = [
        ("model", show(model or "?")),
        ("messages", count),
        ("changed" if not first else "keys", ", ".join(changed)),
    ]
    if not patch:
        fields.append(("changes", "none: the same body as the previous request"))
    return fields


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


Described = tuple[str, list[tuple[str, str]], bool]


def _describe_input(p: dict[str, Any]) -> Described:
    return f"user ({p.get('source', 'scripted')})", [("text", show(p.get("text", "")))], False


def _describe_output(p: dict[str, Any]) -> Described:
    return "agent answer", [("text", show(p.get("text", "")))], False


def _describe_ask(p: dict[str, Any]) -> Described:
    return "agent asks the user", [("question", show(p.get("question", "")))], False


def _describe_ask_response(p: dict[str, Any]) -> Described:
    return (
        f"user answers ({p.get('source', 'scripted')})",
        [("text", show(p.get("text", "")))],
        False,
    )


def _describe_llm_request(p: dict[str, Any], model: str | None) -> Described:
    """The title only: the fields are what changed since the previous request (`_Requests`)."""
    return (
        f"LLM request to {p.get('provider', '?')}" + (" (streaming)" if p.get("stream") else ""),
        [],
        False,
    )


def _describe_llm_response(p: dict[str, Any], model: str | None) -> Described:
    status = p.get("status", 200)
    bad = bool(p.get("error")) or (isinstance(status, int) and status >= 400)
    usage = mapping(p.get("usage"))
    fields = [
        ("model", show(model or "?")),
        ("status", str(status)),
        ("tokens", f"{usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out"),
        ("latency", _ms(p.get("latency_ms"))),
    ]
    if p.get("error"):
        fields.append(("error", show(p["error"])))
    text, calls = reply_of(p.get("body"), p.get("sse"))
    fields.append(("text", show(text)))
    fields += [(f"tool call: {name}", show(args)) for name, args in calls]
    if bad and not p.get("error"):
        fields.append(("body", show(p.get("body"))))
    return f"LLM response from {p.get('provider', '?')}", fields, bad


def spread(label: str, value: Any) -> list[tuple[str, str]]:
    """A small flat object as one field per key, so multi-line strings (a command's stdout)
    read as text instead of a JSON string full of \\n; anything else as one field."""
    flat = (
        isinstance(value, dict)
        and 0 < len(value) <= SPREAD_KEYS
        and all(v is None or isinstance(v, (str, int, float, bool)) for v in value.values())
    )
    if not flat:
        return [(label, show(value))]
    return [
        (f"{label}.{key}", show(v) if isinstance(v, str) else json.dumps(v))
        for key, v in value.items()
    ]


def _describe_tool_call(p: dict[str, Any]) -> Described:
    return (
        f"tool call: {p.get('tool', '?')}",
        [("call id", show(p.get("call_id", ""))), *spread("arguments", p.get("args"))],
        False,
    )


def _describe_tool_result(p: dict[str, Any]) -> Described:
    ok = p.get("ok") is not False
    fields = spread("result", p.get("result")) if p.get("result") is not None else []
    if p.get("error"):
        fields.append(("error", show(p["error"])))
    fields.append(("latency", _ms(p.get("latency_ms"))))
    return f"tool result: {p.get('tool', '?')}" + ("" if ok else " (failed)"), fields, not ok


def _describe_register(p: dict[str, Any]) -> Described:
    return (
        f"tool registered: {p.get('tool', '?')}",
        [("description", show(p.get("description", "")))],
        False,
    )


def _describe_fallback(p: dict[str, Any]) -> Described:
    title = f"provider fallback: {p.get('from_provider', '?')} -> {p.get('to_provider', '?')}"
    return title, [("error", show(p.get("error", "")))], True


def _describe_session_start(p: dict[str, Any]) -> Described:
    return (
        f"session start ({p.get('mode', '?')})",
        [("engine", show(f"{p.get('engine', '?')} {p.get('version', '')}"))],
        False,
    )


def _describe_session_end(p: dict[str, Any]) -> Described:
    status = str(p.get("status", "?"))
    usage = mapping(p.get("usage"))
    fields = [
        ("reason", show(p.get("reason") or "")),
        ("error kind", show(p.get("error_kind") or "")),
        ("duration", _ms(p.get("duration_ms"))),
        ("turns", str(p.get("turns", ""))),
        ("tokens", f"{usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out"),
    ]
    if p.get("infra"):
        fields.append(("infrastructure", "yes: the harness or a provider failed, not the agent"))
    return f"session end: {status}", fields, status != "ok"


def _describe_live_from(p: dict[str, Any]) -> Described:
    turn = p.get("turn", "?")
    fields = [("replayed", f"user turns before {turn}, from the case's journal")]
    if p.get("replayed_session"):
        fields.append(("journal's session", show(p.get("replayed_session"))))
    return f"live from user turn {turn} (--nodeval-from-turn)", fields, False


def _describe_turn_start(p: dict[str, Any]) -> Described:
    return "turn starts", [], False


def _describe_turn_end(p: dict[str, Any]) -> Described:
    return f"turn ends ({p.get('stop_reason', '?')})", [], False


def _describe_snapshot(p: dict[str, Any]) -> Described:
    files = mapping(p.get("files"))
    listing = "\n".join(sorted(str(name) for name in files)) or "(no files)"
    return f"world snapshot ({p.get('backend', '?')})", [("files", clip(listing))], False


def _describe_judge(p: dict[str, Any]) -> Described:
    fields = [
        ("criterion", show(p.get("criterion", ""))),
        ("verdict", show(p.get("verdict", ""))),
        ("reason", show(p.get("reason", ""))),
    ]
    return f"judge {p.get('judge', '?')}", fields, p.get("verdict") == "fail"


def _describe_skills(p: dict[str, Any]) -> Described:
    skills = [s for s in p.get("skills") or [] if isinstance(s, dict)]
    listing = (
        "\n".join(f"{s.get('name', '?')}: {s.get('description', '')}" for s in skills) or "(none)"
    )
    return f"skills discovered ({len(skills)})", [("skills", clip(listing))], False


def _describe_plan(p: dict[str, Any]) -> Described:
    steps = [str(s) for s in p.get("steps") or []]
    return f"plan ({len(steps)} steps)", [("steps", clip("\n".join(steps)))], False


def _describe_plan_result(p: dict[str, Any]) -> Described:
    rows = [s for s in p.get("steps") or [] if isinstance(s, dict)]
    marks = {True: "done", False: "NOT DONE", None: "unchecked"}
    listing = "\n".join(f"{marks.get(s.get('done'), '?')}: {s.get('text', '')}" for s in rows)
    title = f"plan result: {p.get('done', 0)} of {p.get('checkable', 0)} checkable steps done"
    return title, [("steps", clip(listing))], not p.get("followed")


def _describe_other(p: dict[str, Any]) -> Described:
    return "event", [("payload", show(p))], False


_DESCRIBERS: dict[str, Any] = {
    "io.input": _describe_input,
    "io.output": _describe_output,
    "io.ask": _describe_ask,
    "io.ask.response": _describe_ask_response,
    "llm.request": _describe_llm_request,
    "llm.response": _describe_llm_response,
    "tool.call": _describe_tool_call,
    "tool.result": _describe_tool_result,
    "tool.register": _describe_register,
    "provider.fallback": _describe_fallback,
    "session.start": _describe_session_start,
    "session.end": _describe_session_end,
    "session.live_from": _describe_live_from,
    "agent.turn.start": _describe_turn_start,
    "agent.turn.end": _describe_turn_end,
    "world.snapshot": _describe_snapshot,
    "judge.request": _describe_judge,
    "judge.response": _describe_judge,
    "skill.discover": _describe_skills,
    "plan.created": _describe_plan,
    "plan.result": _describe_plan_result,
}


def _ms(value: Any) -> str:
    return (
        f"{value:.0f} ms" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
    )


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


# -- what an LLM was sent ---------------------------------------------------------------


_MESSAGE_KEYS = ("messages", "input", "contents")


def _model_in_path(path: Any) -> str | None:
    # Gemini names the model in the path: /v1beta/models/gemini-2.5-flash:generateContent.
    if not isinstance(path, str) or "/models/" not in path:
        return None
    return path.rpartition("/models/")[2].partition(":")[0] or None


def _messages_of(body: Any) -> list[Any]:
    # Anthropic and OpenAI chat (and the mock) send "messages"; OpenAI Responses sends
    # "input"; Gemini sends "contents".
    for key in _MESSAGE_KEYS:
        value = _dig(body, key)
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            return [value]
    return []


# -- the golden diff ----------------------------------------------------------------------


def _stable(event: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """What must match for an observed event to count as the golden one: type, turn and
    the payload without what legitimately differs between a recording and its replay."""
    payload = mapping(event.get("payload"))
    if not _VOLATILE.isdisjoint(payload):  # copy only the payloads that need trimming
        payload = {k: v for k, v in payload.items() if k not in _VOLATILE}
    return event.get("type"), event.get("turn"), payload


def _signature(event: dict[str, Any]) -> str:
    kind, turn, payload = _stable(event)
    return f"{kind}|{turn}|" + json.dumps(payload, sort_keys=True, default=str)


class GoldenJournal:
    """A case's golden events, compared with each of its attempts (work shared between them)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events[:EVENT_LIMIT]
        self._stable = [_stable(e) for e in self.events]
        self._signatures: list[str] | None = None
        self._views: list[EventView] | None = None

    def diff(self, observed: list[dict[str, Any]]) -> dict[str, Any]:
        """Rows [golden index, observed index, status] aligning both streams, plus the golden
        events that differ (equal ones are shown from the observed side, so not stored twice).
        A "changed" row has a fourth item: what changed (`changed_fields`)."""
        observed = observed[:EVENT_LIMIT]
        stable = [_stable(e) for e in observed]
        if [s[0] for s in stable] == [g[0] for g in self._stable]:
            # The usual replay: the same events in the same order, some perhaps with other
            # contents; pair them by position (aligning is only needed when the shape differs).
            rows: list[list[Any]] = [
                [i, i, "same" if s == g else "changed"]
                for i, (s, g) in enumerate(zip(stable, self._stable, strict=True))
            ]
        else:
            rows = self._aligned(observed)
        for row in rows:
            if row[2] == "changed":
                row.append(changed_fields(self._stable[row[0]], stable[row[1]]))
        needed = sorted({int(row[0]) for row in rows if row[0] is not None and row[2] != "same"})
        views = self.views() if needed else []
        return {
            "rows": rows,
            "golden": {str(g): views[g] for g in needed},
            "same": sum(1 for row in rows if row[2] == "same"),
            "total": len(rows),
        }

    def views(self) -> list[EventView]:
        if self._views is None:
            self._views = event_views(self.events)
        return self._views

    def _aligned(self, observed: list[dict[str, Any]]) -> list[list[Any]]:
        if self._signatures is None:
            self._signatures = [_signature(e) for e in self.events]
        matcher = difflib.SequenceMatcher(
            None, self._signatures, [_signature(e) for e in observed], autojunk=False
        )
        rows: list[list[Any]] = []
        for tag, g0, g1, o0, o1 in matcher.get_opcodes():
            if tag == "equal":
                pairs = zip(range(g0, g1), range(o0, o1), strict=True)
                rows += [[g, o, "same"] for g, o in pairs]
            else:
                rows += _paired_by_type(self.events, range(g0, g1), observed, range(o0, o1))
        return rows


CHANGES_SHOWN = 6
"""Values named per changed event in the golden diff; the cards beside them show the rest."""
BRIEF = 200
"""Characters of a changed value named in the golden diff."""


def changed_fields(
    golden: tuple[Any, Any, dict[str, Any]], observed: tuple[Any, Any, dict[str, Any]]
) -> list[list[str]]:
    """[path, recorded, now] per value that differs between a golden event and the observed
    one paired with it (`_stable` forms), in document order: `turn` when the turn differs,
    else payload paths such as `body.system` or `args.command`. Values are short JSON."""
    found: list[list[str]] = []
    if golden[1] != observed[1]:
        found.append(["turn", _brief(golden[1]), _brief(observed[1])])
    _changed_leaves(golden[2], observed[2], "", found)
    return found[:CHANGES_SHOWN]


def _changed_leaves(left: Any, right: Any, path: str, found: list[list[str]]) -> None:
    if len(found) >= CHANGES_SHOWN or left == right:
        return
    if isinstance(left, dict) and isinstance(right, dict):
        for key in list(left) + [k for k in right if k not in left]:
            where = f"{path}.{key}" if path else str(key)
            _changed_leaves(left.get(key, _ABSENT), right.get(key, _ABSENT), where, found)
    elif isinstance(left, list) and isinstance(right, list):
        for index in range(max(len(left), len(right))):
            _changed_leaves(
                left[index] if index < len(left) else _ABSENT,
                right[index] if index < len(right) else _ABSENT,
                f"{path}[{index}]",
                found,
            )
    else:
        found.append([path or "payload", _brief(left), _brief(right)])


def _brief(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= BRIEF else text[: BRIEF - 1] + "…"


def _paired_by_type(
    golden: list[dict[str, Any]], g_range: range, observed: list[dict[str, Any]], o_range: range
) -> list[list[Any]]:
    """Within a stretch that differs, an event of the same type on both sides is one event
    that changed; the others are missing from, or extra to, the golden stream."""
    matcher = difflib.SequenceMatcher(
        None,
        [golden[g].get("type") for g in g_range],
        [observed[o].get("type") for o in o_range],
        autojunk=False,
    )
    rows: list[list[Any]] = []
    for tag, g0, g1, o0, o1 in matcher.get_opcodes():
        if tag == "equal":
            pairs = zip(range(g0, g1), range(o0, o1), strict=True)
            rows += [[g_range[g], o_range[o], "changed"] for g, o in pairs]
        else:
            rows += [[g_range[g], None, "missing"] for g in range(g0, g1)]
            rows += [[None, o_range[o], "extra"] for o in range(o0, o1)]
    return rows
