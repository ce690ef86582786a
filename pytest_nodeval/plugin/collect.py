"""Collecting case directories: each case.yaml becomes a module of scenario tests.

A case's `case.yaml` is collected as a `pytest.Module` whose object is the one shared
`scenario` module, so its test is a plain function that pytest parametrizes: one test per
case x repeat, and fixtures, `-k`, `-m`, `--lf` and IDEs all work. Python scenarios bind to
a case with `@pytest.mark.nodeval_case("<id>")` and are parametrized the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..case import CASE_FILE
from .keys import case_index_key, cases_key, settings_key

if TYPE_CHECKING:
    from ..case.directory import Case


@dataclass(frozen=True, slots=True)
class CaseRef:
    """The parameter of a scenario test: which case, which repeat."""

    case_id: str
    directory: str
    repeat: int

    @property
    def test_id(self) -> str:
        return self.case_id if self.repeat == 1 else f"{self.case_id}-r{self.repeat}"


class CaseFile(pytest.Module):
    """A case directory's case.yaml, collected as a module holding the shared `test_scenario`."""

    case: Case

    def _getobj(self) -> Any:
        from . import scenario as _scenario

        return _scenario

    def collect(self) -> Any:
        from ..errors import NodevalError

        try:
            self.case = load_case_cached(self.config, self.path.parent)
            _warn_if_stale(self.case)
        except NodevalError as exc:
            raise self.CollectError(str(exc)) from None
        return super().collect()


def _warn_if_stale(case: Case) -> None:
    overdue = case.stale_by()
    if overdue is not None:
        import warnings

        from ..errors import NodevalWarning

        warnings.warn(NodevalWarning(
            f"case '{case.id}' ({case.directory / CASE_FILE}): its journal is {overdue.days} day(s) past its "
            f"freshness window ({case.spec.freshness}); re-record it with `nodeval record {case.directory}`"))


def load_case_cached(config: pytest.Config, directory: Path) -> Case:
    from ..case.directory import load_case
    from ..errors import CaseFormatError

    cases = config.stash[cases_key]
    key = str(directory)
    if key not in cases:
        case = load_case(directory)
        other = next((c for c in cases.values() if c.id == case.id), None)
        if other is not None:
            raise CaseFormatError(f"duplicate case id {case.id!r}: {other.directory / CASE_FILE} and "
                                  f"{directory / CASE_FILE}; case ids must be unique")
        for tag in case.spec.tags:
            config.addinivalue_line("markers", f"{tag}: cases tagged '{tag}' (pytest-nodeval)")
        cases[key] = case
    return cases[key]


def case_for(metafunc: pytest.Metafunc) -> Case:
    parent = metafunc.definition.parent
    if isinstance(parent, CaseFile):
        return parent.case
    from ..errors import NodevalError

    marker = metafunc.definition.get_closest_marker("nodeval_case")
    if marker is None or not marker.args:
        raise pytest.Collector.CollectError(
            f"{metafunc.definition.nodeid} uses nodeval_case but names no case; "
            "add @pytest.mark.nodeval_case('<case-id>')")
    case_id = marker.args[0]
    try:
        directory = _case_index(metafunc.config).get(case_id)
        if directory is not None:
            return load_case_cached(metafunc.config, directory)
    except NodevalError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    roots = ", ".join(str(r) for r in metafunc.config.stash[settings_key].case_roots)
    raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: no case with id {case_id!r} under {roots}")


def _case_index(config: pytest.Config) -> dict[str, Path]:
    """Case id -> directory for every case under the roots (built once, for Python scenarios)."""
    if case_index_key not in config.stash:
        from ..case.directory import find_case_dirs, read_case_id

        index: dict[str, Path] = {}
        for directory in find_case_dirs(list(config.stash[settings_key].case_roots)):
            index.setdefault(read_case_id(directory), directory)
        config.stash[case_index_key] = index
    return config.stash[case_index_key]


def parametrize_case(metafunc: pytest.Metafunc) -> None:
    """One test per repeat of the case this test function belongs to."""
    case = case_for(metafunc)
    settings = metafunc.config.stash[settings_key]
    marks = [getattr(pytest.mark, tag) for tag in case.spec.tags]
    refs = [CaseRef(case.id, str(case.directory), r) for r in range(1, settings.repeats_for(case.spec.repeat) + 1)]
    metafunc.parametrize("nodeval_case", [pytest.param(ref, id=ref.test_id, marks=marks) for ref in refs],
                         indirect=True)

