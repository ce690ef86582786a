"""Whether a path is under a case root, answered as text, agrees with `Path.is_relative_to`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_nodeval.plugin.keys import resolved_key, under_case_roots

PARTS = st.sampled_from(["a", "ab", "b", "a.b", "scenarios", "scenarios2", "..", "A"])
PATHS = st.builds(lambda parts: Path("/", *parts), st.lists(PARTS, max_size=4))


def _config(roots: list[Path]) -> Any:
    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[resolved_key] = {"case_roots": tuple(roots)}
    return config


@given(st.lists(PATHS, max_size=3), PATHS)
def test_a_path_is_under_a_root_exactly_when_it_is_relative_to_it(
    roots: list[Path], path: Path
) -> None:
    expected = any(path.is_relative_to(root) for root in roots)
    assert under_case_roots(_config(roots), path) == expected


def test_a_directory_whose_name_merely_begins_like_a_root_is_outside_it() -> None:
    assert under_case_roots(_config([Path("/")]), Path("/p/scenarios2/x"))
    config = _config([Path("/p/scenarios")])
    assert not under_case_roots(config, Path("/p/scenarios2/x"))
    assert under_case_roots(config, Path("/p/scenarios"))
    assert under_case_roots(config, Path("/p/scenarios/x"))
