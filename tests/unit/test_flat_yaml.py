"""The fast reader of flat case.yaml files reads exactly what the YAML loader reads, or leaves
the file to the loader."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_nodeval.errors import CaseFormatError
from pytest_nodeval.yamlfiles import _Loader, _read_text, flat_mapping, load_yaml


def _loaded(text: str) -> object:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        return exc


def test_a_dumped_case_yaml_is_read_without_the_loader() -> None:
    text = yaml.safe_dump({"id": "bench-00001", "tags": ["bench", "pr"], "repeat": 3})
    assert flat_mapping(text) == {"id": "bench-00001", "tags": ["bench", "pr"], "repeat": 3}
    assert flat_mapping("id: a\ntags:\n  - x\n  - y\ntags_b: []\n") == _loaded(
        "id: a\ntags:\n  - x\n  - y\ntags_b: []\n"
    )


def test_what_yaml_reads_otherwise_goes_to_the_loader() -> None:
    for text in [
        "id: yes\n",  # a boolean
        "on: a\n",  # a boolean key
        "id: Null\n",
        "id: a\ntags:\n",  # null
        "id: a\nid: b\n",  # the loader's error names the duplicate
        "id: a\ntags:\n- x\n  - y\n",  # one scalar 'x - y'
        "id: 1.5\n",
        "id: 0x1f\n",
        "id: 2024-01-01\n",
        "id: 'a'\n",
        "id: a # note\n",
        "id: a",  # no final newline
        "id: a\r\n",
        "",
    ]:
        assert flat_mapping(text) is None, text


WORDS = st.sampled_from(
    ["a", "bench", "b-1", "x.y", "yes", "No", "on", "OFF", "true", "null", "y", "n", "e5", "inf"]
)
LINES = st.one_of(
    st.builds("{}: {}".format, st.sampled_from(["id", "on", "tags", "name", "yes"]), WORDS),
    st.builds("{}: {}".format, st.sampled_from(["repeat", "id"]), st.integers(0, 10**10)),
    st.builds("{}:".format, st.sampled_from(["tags", "id"])),
    st.builds("{}: []".format, st.sampled_from(["tags", "id"])),
    st.builds("- {}".format, WORDS),
    st.builds("  - {}".format, WORDS),
    st.sampled_from(["# c", "", "id: 'q'", "---"]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(LINES, max_size=6))
def test_whatever_it_reads_the_loader_reads_the_same(lines: list[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    flat = flat_mapping(text)
    if flat is not None:
        assert flat == _loaded(text)


def _text_or_error(read: object, path: Path) -> object:
    try:
        return read(path)  # type: ignore[operator]
    except UnicodeDecodeError as exc:
        return (exc.reason, exc.start)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"a", b"id: x", b"\r", b"\n", b"\r\n", b"\xc3\xa9", b"\xc3", b"\xff"]),
        max_size=12,
    ),
    st.integers(min_value=0, max_value=9000),
)
def test_a_file_is_read_as_path_read_text_reads_it(parts: list[bytes], padding: int) -> None:
    """Newlines translated alike, and a file that is not UTF-8 fails at the same byte."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "case.yaml"
        path.write_bytes(b"x" * padding + b"".join(parts))
        expected = _text_or_error(lambda p: p.read_text(encoding="utf-8"), path)
        assert _text_or_error(_read_text, path) == expected


def _error_of(read: object, path: Path) -> object:
    try:
        read(path)  # type: ignore[operator]
    except OSError as exc:
        return type(exc), exc.errno, exc.filename
    raise AssertionError(f"{path} was read")


def test_a_file_that_cannot_be_read_fails_as_path_read_text_fails(tmp_path: Path) -> None:
    """The same exception, naming the same file: a missing file, a directory."""
    for path in (tmp_path / "missing.yaml", tmp_path):
        assert _error_of(_read_text, path) == _error_of(Path.read_text, path)


def test_a_file_longer_than_one_read_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_bytes(("- " + "é" * 1000 + "\r\n").encode() * 200)  # 400 KB, CR LF lines
    assert _read_text(path) == path.read_text(encoding="utf-8")


def test_a_yaml_path_that_is_not_a_readable_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "case.yaml").mkdir()
    with pytest.raises(CaseFormatError, match=r"case\.yaml: cannot be read \(Is a directory\)"):
        load_yaml(tmp_path / "case.yaml")
