"""The checks of what a command line names (commands/paths.py), shared by nodeval and pytest."""

from __future__ import annotations

import argparse
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from pytest_nodeval.paths import (
    directory_problem,
    fraction,
    history_problem,
    output_file_problem,
    positive_int,
)


@pytest.mark.parametrize("text", ["0", "-3", "abc", "1.5", ""])
def test_positive_int_refuses_what_is_not_a_count(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"got {text!r}"):
        positive_int(text)


def test_positive_int_takes_a_count() -> None:
    assert positive_int("3") == 3


@pytest.mark.parametrize("text", ["0", "-0.1", "1.01", "nan", "inf", "half"])
def test_fraction_refuses_what_is_not_a_share(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="above 0 and at most 1"):
        fraction(text)


def test_fraction_takes_a_share() -> None:
    assert fraction("0.05") == 0.05 and fraction("1") == 1.0


def test_a_history_must_be_sqlite_or_empty_or_not_there_yet(tmp_path: Path) -> None:
    real = tmp_path / "history.sqlite"
    with closing(sqlite3.connect(real)) as db:
        db.execute("CREATE TABLE t (x)")
    (tmp_path / "empty.sqlite").write_bytes(b"")
    (tmp_path / "text.sqlite").write_text("not a database")
    assert history_problem(real) is None
    assert history_problem(tmp_path / "empty.sqlite") is None
    assert history_problem(tmp_path / "new" / "history.sqlite") is None
    assert "is not an SQLite file" in str(history_problem(tmp_path / "text.sqlite"))
    assert "is a directory" in str(history_problem(tmp_path))


def test_nothing_can_be_made_below_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("")
    assert directory_problem(tmp_path / "missing" / "dir") is None
    assert directory_problem(blocker) == f"{blocker} is a file, not a directory"
    assert directory_problem(blocker / "x" / "y") == (
        f"{blocker} is a file, not a directory, so {blocker / 'x' / 'y'} cannot be made"
    )
    assert output_file_problem(tmp_path / "summary.md") is None
    assert output_file_problem(tmp_path) == f"{tmp_path} is a directory; name a file"
    assert "cannot be written" in str(output_file_problem(blocker / "summary.md"))
