"""Markers known before collection: the profiles' names, and with `pytest --markers` the case tags.

Collection registers each case's tags as it reads case.yaml (collect.py); `pytest --markers`
collects nothing, so it gets a light scan of the case roots' case.yaml files instead. A path
given on the command line that holds a case outside every case root gets a one-line hint:
pytest would otherwise say only "no tests ran".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..case import CASE_FILE
from .keys import case_roots

_hints_key = pytest.StashKey[list[str]]()


def register_markers(config: pytest.Config) -> None:
    roots = case_roots(config)
    profiles = set()
    for line in config.getini("nodeval_profiles"):
        name = line.partition(":")[0].strip()
        if name:
            profiles.add(name)
            config.addinivalue_line(
                "markers",
                f"{name}: the nodeval profile '{name}' (nodeval_profiles: "
                f"{line.partition(':')[2].strip()}), and the cases tagged '{name}'",
            )
    if config.option.markers:
        for tag in _case_tags(roots):
            if tag not in profiles:
                config.addinivalue_line("markers", f"{tag}: cases tagged '{tag}' (pytest-nodeval)")
    config.stash[_hints_key] = _outside_roots(config, roots)


def _case_tags(roots: tuple[Path, ...]) -> list[str]:
    from ..case.directory import find_case_dirs, read_case_head
    from ..errors import NodevalError

    tags: set[str] = set()
    for directory in find_case_dirs(list(roots)):
        try:
            tags.update(read_case_head(directory).spec.tags)
        except NodevalError:
            continue  # a broken case.yaml is reported when it is collected
    return sorted(tags)


def _outside_roots(config: pytest.Config, roots: tuple[Path, ...]) -> list[str]:
    hints = []
    for arg in config.args:
        path = (config.invocation_params.dir / arg.partition("::")[0]).resolve()
        case_dir = path.parent if path.name == CASE_FILE else path
        if (case_dir / CASE_FILE).is_file() and not any(
            case_dir.is_relative_to(r.resolve()) for r in roots
        ):
            shown = (
                ", ".join(
                    str(r.relative_to(config.rootpath))
                    if r.is_relative_to(config.rootpath)
                    else str(r)
                    for r in roots
                )
                or "none"
            )
            hints.append(
                f"nodeval: {arg} holds a case, but it is not under the case roots (nodeval_cases: "
                f"{shown}), so it is not collected; add its root to nodeval_cases"
            )
    return hints


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    for hint in config.stash.get(_hints_key, []):
        terminalreporter.write_line(hint, yellow=True)
