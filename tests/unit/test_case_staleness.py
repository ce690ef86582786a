"""`Case.stale_by`: how far past its freshness window a case's journal is."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pytest_nodeval.case.directory import load_case

from ..conftest import write_case

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _case_recorded(root: Path, days_ago: int, freshness: str | None) -> Path:
    directory = write_case(
        root,
        "aging",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        case={"freshness": freshness} if freshness else {},
    )
    header = directory / "journal" / "header.json"
    created = (NOW - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    header.write_text(header.read_text().replace(_created_at(header), created))
    return directory


def _created_at(header: Path) -> str:
    return str(json.loads(header.read_text())["created_at"])


@pytest.mark.parametrize(
    ("days_ago", "freshness", "stale_by"),
    [
        (100, "30d", timedelta(days=70)),
        (100, "12w", timedelta(days=16)),
        (100, "1y", None),
        (10, "1w", timedelta(days=3)),
        (5000, None, None),
    ],
)
def test_stale_by_is_the_age_past_the_window(
    tmp_path: Path, days_ago: int, freshness: str | None, stale_by: timedelta | None
) -> None:
    case = load_case(_case_recorded(tmp_path, days_ago, freshness))
    assert case.stale_by(NOW) == stale_by


def test_a_case_without_a_journal_is_never_stale(tmp_path: Path) -> None:
    directory = write_case(
        tmp_path,
        "fresh",
        script=[{"text": "Hello."}],
        inputs=["hi"],
        case={"freshness": "1d"},
        record=False,
    )
    assert load_case(directory).stale_by(NOW) is None
