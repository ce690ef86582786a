"""Fuzzing the readers of user files (issue 18): whatever the bytes, the journal reader and the
case loader raise only the project's own errors (NodevalError), which name the file."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_nodeval.case.directory import JOURNALS, load_case
from pytest_nodeval.errors import NodevalError
from pytest_nodeval.journal.reader import read_golden, read_journal

SEED = Path(__file__).parents[2] / "scenarios" / "disk-usage"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
keys = st.sampled_from(
    [
        "id",
        "repeat",
        "tags",
        "providers",
        "tools",
        "limits",
        "user",
        "kind",
        "inputs",
        "assertions",
        "tool",
        "args",
        "regex",
        "where",
        "type",
        "name",
        "model",
        "script",
    ]
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=15,
)


@contextmanager
def _fresh_case() -> Iterator[Path]:
    """A copy of the seed case for one example, removed after it (thousands are made)."""
    root = Path(tempfile.mkdtemp(prefix="nodeval-fuzz-"))
    try:
        shutil.copytree(SEED, root / "disk-usage")
        yield root / "disk-usage"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _only_ours(action: Any) -> None:
    try:
        action()
    except NodevalError as exc:
        assert str(exc), "an error without a message"


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_in_events_jsonl(data: bytes) -> None:
    with _fresh_case() as case_dir:
        (case_dir / "journal" / "events.jsonl").write_bytes(data)
        _only_ours(lambda: read_journal(case_dir / "journal", warn=lambda _: None))
        _only_ours(lambda: read_golden(case_dir / "journal"))


@FUZZ
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["seq", "ts", "type", "turn", "payload"]), json_values),
        max_size=5,
    )
)
def test_any_json_lines_in_events_jsonl(lines: list[dict[str, Any]]) -> None:
    with _fresh_case() as case_dir:
        (case_dir / "journal" / "events.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines)
        )
        _only_ours(lambda: read_golden(case_dir / "journal"))


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=200).map(lambda b: b.decode("latin-1")), json_values.map(json.dumps)
    )
)
def test_anything_in_header_json(text: str) -> None:
    with _fresh_case() as case_dir:
        (case_dir / "journal" / "header.json").write_text(
            text, encoding="utf-8", errors="surrogateescape"
        )
        _only_ours(lambda: read_golden(case_dir / "journal"))


@FUZZ
@given(
    st.sampled_from(["case.yaml", "input/config.yaml", "input/inputs.yaml", "assertions.yaml"]),
    st.one_of(documents.map(lambda d: yaml.safe_dump(d)), st.binary(max_size=200)),
)
def test_anything_in_a_case_file(name: str, content: str | bytes) -> None:
    with _fresh_case() as case_dir:
        path = case_dir / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)

        def load_and_replay_journal() -> None:
            case = load_case(case_dir)
            JOURNALS.clear()
            case.journal()

        _only_ours(load_and_replay_journal)
