"""The line the writer builds by hand for an engine event of declared scalars (issue 33) is the
line pydantic's `model_dump_json` writes for it, for every event type `emit` constructs and
every character a string can hold; where pydantic refuses the event, so does the shortcut. The
time stamp, formatted once per second, reads as datetime's."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from pytest_nodeval.journal import writer
from pytest_nodeval.journal.events import (
    EVENT_ADAPTER,
    EVENT_MODELS,
    PAYLOADS,
    iso_of_ns,
    now_iso,
)

TYPES = sorted(writer._SCALAR_FIELDS)
ANY_CHARACTER = st.characters(exclude_categories=())  # control characters too; rarely a surrogate
LONE_SURROGATE = st.tuples(
    st.text(ANY_CHARACTER, max_size=5),
    st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2),
    st.text(ANY_CHARACTER, max_size=5),
).map("".join)


def _pydantic_line(type_name: str, head: dict[str, Any], values: dict[str, Any]) -> str | None:
    """What `emit` wrote before the shortcut: the validated event's JSON; None where pydantic
    refuses to serialise it."""
    event = EVENT_ADAPTER.validate_python({**head, "type": type_name, "payload": values})
    try:
        return event.model_dump_json()
    except PydanticSerializationError:
        return None


def _hand_line(type_name: str, head: dict[str, Any], values: dict[str, Any]) -> str | None:
    """The shortcut's line, its values filled in as `_emit_declared` fills them."""
    fields = writer._SCALAR_FIELDS[type_name]
    filled = {name: values.get(name, default) for name, default in fields.defaults.items()}
    return writer._declared_line({**head, "type": type_name}, filled, fields.keys)


def _payloads(type_name: str, text: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Payloads `emit` takes the shortcut for: required fields given, optional ones given,
    None (where declared) or left to their defaults."""
    fields = writer._SCALAR_FIELDS[type_name]
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, kept in fields.types.items():
        value = st.one_of(text, st.none()) if type(None) in kept else text
        (required if name in fields.required else optional)[name] = value
    return st.fixed_dictionaries(required, optional=optional)


def test_every_type_emit_constructs_has_only_str_or_none_fields() -> None:
    # The hand-built line is proven for these two; a new field of another type takes
    # model_dump_json (see the next test) until a test here covers it.
    assert {"agent.turn.start", "agent.turn.end", "io.input", "io.output"} <= set(TYPES)
    for type_name in TYPES:
        for kept in writer._SCALAR_FIELDS[type_name].types.values():
            assert kept <= {str, type(None)}, (type_name, kept)


@pytest.mark.parametrize("value", [1, True, 1.5, 0.1, 1e16])
def test_a_value_other_than_str_or_none_is_left_to_pydantic(value: Any) -> None:
    head = {"seq": 1, "ts": now_iso(), "type": "io.output", "turn": 0}
    assert writer._declared_line(head, {"n": value}, ('"n":',)) is None
    assert writer._declared_line({**head, "turn": True}, {"n": "x"}, ('"n":',)) is None


@pytest.mark.parametrize("type_name", TYPES)
@settings(max_examples=200, deadline=None)
@given(data=st.data(), seq=st.integers(1, 2**63), turn=st.integers(0, 2**63))
def test_the_hand_built_line_is_pydantics(
    type_name: str, data: st.DataObject, seq: int, turn: int
) -> None:
    payload = data.draw(_payloads(type_name, st.text(ANY_CHARACTER, max_size=30)))
    head = {"seq": seq, "ts": now_iso(), "turn": turn}
    line = _pydantic_line(type_name, head, payload)
    assert _hand_line(type_name, head, payload) == line
    surrogate = data.draw(LONE_SURROGATE)
    for name in writer._SCALAR_FIELDS[type_name].types:
        spoilt = {**payload, name: surrogate}
        assert (
            _hand_line(type_name, head, spoilt) is _pydantic_line(type_name, head, spoilt) is None
        )


def test_every_character_is_escaped_as_pydantic_escapes_it() -> None:
    """Each code point alone (a lone surrogate refused by both), up to U+3000 and across the
    surrogates; the rest of the code space in runs of 64 (a string is escaped per character)."""
    head = {"seq": 1, "ts": now_iso(), "turn": 0}
    singles = [*range(0x3000), *range(0xD700, 0xE100)]
    runs = [*range(0x3000, 0xD700, 64), *range(0xE100, sys.maxunicode + 1, 64)]
    texts = [chr(c) for c in singles]
    texts += [
        "".join(map(chr, range(start, min(start + 64, sys.maxunicode + 1)))) for start in runs
    ]
    assert sum(map(len, texts)) == sys.maxunicode + 1
    different = []
    for text in texts:
        payload = {"text": text}
        if _hand_line("io.output", head, payload) != _pydantic_line("io.output", head, payload):
            different.append(hex(ord(text[0])))
    assert different == []


def test_a_lone_surrogate_is_refused_by_both() -> None:
    head = {"seq": 1, "ts": now_iso(), "turn": 0}
    assert _pydantic_line("io.output", head, {"text": "a\ud800b"}) is None
    assert _hand_line("io.output", head, {"text": "a\ud800b"}) is None


def test_the_field_names_are_the_models_in_declaration_order() -> None:
    for type_name in TYPES:
        names = [key[1:-2] for key in writer._SCALAR_FIELDS[type_name].keys]
        assert names == list(PAYLOADS[type_name].model_fields)
        assert list(EVENT_MODELS[type_name].model_fields) == [
            "seq",
            "ts",
            "type",
            "turn",
            "payload",
        ]


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_NS = int((datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - EPOCH).total_seconds()) * 10**9


def _datetime_stamp(ns: int) -> str:
    """What `datetime.now(UTC)` stamps for the system clock at `ns`: CPython floors the clock
    to the microsecond (`datetime_best_possible`)."""
    moment = EPOCH + timedelta(microseconds=ns // 1000)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


@settings(max_examples=500)
@given(ns=st.integers(0, LAST_NS), later=st.integers(0, 10**9 - 1))
def test_the_time_stamp_reads_as_datetimes(ns: int, later: int) -> None:
    assert iso_of_ns(ns) == _datetime_stamp(ns)
    assert iso_of_ns(ns + later) == _datetime_stamp(ns + later), "the second kept or moved on"
    assert iso_of_ns(ns) == _datetime_stamp(ns), "and back"


def test_the_time_stamp_is_the_clocks() -> None:
    before = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    stamp = now_iso()
    after = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    assert before <= stamp <= after
