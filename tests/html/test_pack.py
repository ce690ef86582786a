"""How report.html packs its data: gzip for the run's data, deflate against a shared
dictionary for each case's timelines, long strings of a case stored once."""

from __future__ import annotations

import base64
import json
import random
import zlib
from pathlib import Path

import pytest

from pytest_nodeval.report import html as html_module
from pytest_nodeval.report.html import DICTIONARY_ID, STRING_REF, _Strings, render, resolve_strings
from pytest_nodeval.report.html_pack import (
    DICTIONARY_SIZE,
    Dictionary,
    pack_text,
    unpack_text,
    zlib_stream,
)

from .pagetools import parse
from .synthetic import build_run, real_size_events

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
]


def _text(seed: int, words: int = 4000) -> str:
    return json.dumps({"text": " ".join(random.Random(seed).choices(WORDS, k=words))})


def test_text_round_trips_as_inert_base64() -> None:
    text = json.dumps({"a": "</script><!-- \u2028", "b": [1, 2.5, None]}, ensure_ascii=True)
    packed = pack_text(text)
    assert packed.startswith('"') and packed.endswith('"') and not set("<>&\\") & set(packed)
    assert unpack_text(packed) == text


def test_a_block_is_the_zlib_stream_the_page_builds_from_the_dictionary() -> None:
    """What report.js does: a stored block of the dictionary, then the block; the Adler-32
    at the end covers both, so a wrong dictionary fails the check instead of showing garbage."""
    dictionary = Dictionary(_text(1))
    packed = dictionary.pack(_text(2))
    assert dictionary.unpack(packed) == _text(2)
    assert Dictionary.from_element(dictionary.element()).data == dictionary.data
    data = base64.b64decode(json.loads(packed))
    whole = zlib.decompress(zlib_stream(dictionary.data, data))
    assert whole == dictionary.data + _text(2).encode()
    with pytest.raises(zlib.error):
        zlib.decompress(zlib_stream(Dictionary(_text(3)).data, data))


def test_the_dictionary_is_the_start_of_the_first_block_and_makes_the_others_smaller() -> None:
    first = _text(1, words=20_000)
    dictionary = Dictionary(first)
    assert dictionary.data == first[:DICTIONARY_SIZE].encode()
    similar = _text(2)
    alone = len(pack_text(similar))
    assert len(dictionary.pack(similar)) < 0.9 * alone


def test_a_stored_block_cannot_hold_more_than_64_kb() -> None:
    with pytest.raises(ValueError, match="65,535"):
        zlib_stream(b"x" * 70_000, b"")


@pytest.mark.parametrize(
    "value",
    [
        "short",
        "x" * 64,
        STRING_REF,
        STRING_REF + "0",
        STRING_REF + STRING_REF + "1",
        STRING_REF + "y" * 100,
        {
            "__proto__": "z" * 80,
            "k": [STRING_REF + "3", {"deep": "w" * 70}],
            "n": [1, None, True, 2.5],
        },
    ],
)
def test_strings_referred_to_come_back_as_they_were(value: object) -> None:
    strings = _Strings()
    referred = strings.refer(value)
    assert resolve_strings(referred, strings.items) == value


def test_a_long_string_held_by_several_views_is_stored_once() -> None:
    strings = _Strings()
    answer = "The answer, long enough to be shared. " * 3
    views = [
        strings.refer({"fields": [["text", answer]]}),
        strings.refer({"req": {"append": {"messages": [answer]}}}),
    ]
    assert strings.items == [answer]
    assert answer not in json.dumps(views)


def test_each_case_block_needs_the_pages_dictionary(tmp_path: Path) -> None:
    run = build_run(tmp_path, cases=3, repeats=2, real_size=True, fail_rate=0.0, regressed=0)
    page = parse(render(run.report, run.run_dir, rootdir=run.rootdir))
    packed = {
        e.attrs["id"]: e.text for e in page.scripts() if e.attrs.get("type") == "application/json"
    }
    dictionary = Dictionary.from_element(packed[DICTIONARY_ID])
    first = dictionary.unpack(packed["nodeval-c0"])
    assert dictionary.data == first[:DICTIONARY_SIZE].encode()
    for key in ("nodeval-c1", "nodeval-c2"):
        with pytest.raises(zlib.error):  # it refers back into the dictionary
            zlib.decompress(base64.b64decode(json.loads(packed[key]))[:-4], -15)
    # Each answer is in the block once, though three views show it (the response, the
    # agent's answer and the next request's last message).
    answers = [
        e["payload"]["text"]
        for e in real_size_events("case-0002", 2, passed=True)
        if e["type"] == "io.output"
    ]
    raw = dictionary.unpack(packed["nodeval-c2"])
    assert [raw.count(json.dumps(a)[1:-1]) for a in answers] == [1] * len(answers)
    assert sum(len(json.dumps(t)) for t in page.timelines().values()) > 3 * len(raw)


def test_the_builder_keeps_one_dictionary_for_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Dictionary] = []

    class Counted(Dictionary):
        def __init__(self, sample: str) -> None:
            super().__init__(sample)
            made.append(self)

    monkeypatch.setattr(html_module, "Dictionary", Counted)
    run = build_run(tmp_path, cases=4, repeats=1)
    page = parse(render(run.report, run.run_dir, rootdir=run.rootdir))
    assert len(made) == 1
    assert len(page.blocks()) == 4
