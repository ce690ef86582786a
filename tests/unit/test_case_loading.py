"""Reading a case directory in two steps (case.yaml, then the rest) and the golden-journal cache."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.case import directory as directory_module
from pytest_nodeval.case.directory import (
    JournalCache,
    find_case_dirs,
    load_case,
    read_case_head,
)
from pytest_nodeval.errors import CaseFormatError, JournalError

from ..conftest import write_case

ANSWER = [{"text": "Hello there."}]


def test_the_head_is_case_yaml_alone_and_load_reads_the_rest(tmp_path: Path) -> None:
    directory = write_case(
        tmp_path, "alpha", script=ANSWER, inputs=["hi"], record=False, case={"tags": ["pr"]}
    )
    (directory / "assertions.yaml").write_text("- kind: output_contains\n  text: [unclosed\n")
    head = read_case_head(directory)
    assert (head.id, head.spec.tags) == ("alpha", ["pr"])
    with pytest.raises(CaseFormatError, match=r"alpha/assertions.yaml:3:1: invalid YAML"):
        head.load()
    with pytest.raises(CaseFormatError, match=r"alpha/assertions.yaml:3:1: invalid YAML"):
        load_case(directory)


def test_cases_without_a_world_block_share_one_default_world(tmp_path: Path) -> None:
    """Collection keeps every case's spec: the default world is one object for all of them,
    equal to the one a `world: {}` block makes, while a case's own block stays its own."""
    for name, text in [("a", "id: a\n"), ("b", "id: b\n"), ("c", "id: c\nworld: {}\n")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "case.yaml").write_text(text)
    a, b, c = (read_case_head(tmp_path / name).spec for name in "abc")
    assert a.world is b.world
    assert c.world == a.world and c.world is not a.world
    assert "world" not in a.model_fields_set and "world" in c.model_fields_set
    assert a.model_dump() == {**c.model_dump(), "id": "a"}


def test_find_case_dirs_does_not_search_inside_a_case(tmp_path: Path) -> None:
    outer = write_case(tmp_path / "group", "outer", script=ANSWER, inputs=["hi"], record=False)
    (outer / "input" / "world" / "copy").mkdir(parents=True)
    (outer / "input" / "world" / "copy" / "case.yaml").write_text("id: copy\n")
    hidden = write_case(tmp_path / ".drafts", "draft", script=ANSWER, inputs=["hi"], record=False)
    assert find_case_dirs([tmp_path]) == [outer]
    assert hidden not in find_case_dirs([tmp_path])
    assert find_case_dirs([outer]) == [outer]


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("journals")
    return [
        write_case(root, f"case-{i}", script=ANSWER, inputs=["hi"]) / "journal" for i in range(3)
    ]


def _size(journal: Path) -> int:
    return (journal / "events.jsonl").stat().st_size


def _get(cache: JournalCache, journal: Path) -> object:
    stat = (journal / "events.jsonl").stat()
    return cache.get(journal, stat.st_mtime_ns, stat.st_size)


def test_the_journal_cache_is_bounded_by_bytes_least_recently_used_out(
    journals: list[Path],
) -> None:
    a, b, c = journals
    cache = JournalCache(max_bytes=_size(a) + max(_size(b), _size(c)))
    first_a = _get(cache, a)
    assert _get(cache, a) is first_a
    _get(cache, b)
    _get(cache, a)  # a is now the most recently used
    _get(cache, c)  # over the bound: b goes
    assert len(cache) == 2 and cache.bytes == _size(a) + _size(c) <= cache.max_bytes < _size(
        a
    ) + _size(b) + _size(c)
    assert _get(cache, a) is first_a
    _get(cache, b)
    assert cache.bytes <= cache.max_bytes


def test_the_journal_cache_rereads_a_rewritten_journal_and_keeps_no_oversized_one(
    journals: list[Path],
) -> None:
    a = journals[0]
    cache = JournalCache(max_bytes=10 * _size(a))
    first = _get(cache, a)
    stat = (a / "events.jsonl").stat()
    os.utime(a / "events.jsonl", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert _get(cache, a) is not first
    assert len(cache) == 1 and cache.bytes == _size(a)
    small = JournalCache(max_bytes=_size(a) - 1)
    assert _get(small, a) is not _get(small, a)
    assert (len(small), small.bytes) == (0, 0)


def test_a_golden_journal_over_the_size_limit_is_refused_before_it_is_read(
    journals: list[Path],
) -> None:
    a = journals[0]
    cache = JournalCache()
    cache.limit_bytes = _size(a) - 1
    with pytest.raises(JournalError, match=r"case-0/journal/events.jsonl: .*, more than the"):
        _get(cache, a)
    cache.limit_bytes = _size(a)
    _get(cache, a)


def test_a_journal_too_big_to_keep_is_read_once_while_its_events_are_held(
    journals: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay stash, the checks' golden events and the judge of one attempt share one read
    of a big journal (issue 28: each was a read of its own, three copies at once)."""
    reads: list[Path] = []
    real = directory_module.read_golden
    monkeypatch.setattr(
        directory_module,
        "read_golden",
        lambda path, **kw: (reads.append(path), real(path, **kw))[1],
    )
    a = journals[0]
    small = JournalCache(max_bytes=_size(a) - 1)
    held = _events(small, a)
    assert _events(small, a) is held and len(reads) == 1
    assert (len(small), small.bytes) == (0, 0), "held weakly, not kept"
    del held
    _events(small, a)
    assert len(reads) == 2, "a journal nothing holds any more is read again"
    held = _events(small, a)
    stat = (a / "events.jsonl").stat()
    os.utime(a / "events.jsonl", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert _events(small, a) is not held, "a rewritten journal is read again"


def _events(cache: JournalCache, journal: Path) -> list[Any]:
    stat = (journal / "events.jsonl").stat()
    return cache.get(journal, stat.st_mtime_ns, stat.st_size).events
