"""An own agent's case given by its directory (or its case.yaml) runs the tests bound to it.

Such a case has no input/config.yaml: its tests are the Python tests marked
`@pytest.mark.nodeval_case(ID)`, in files of their own, which collecting the directory alone
never finds. So the directory's place on the command line goes to the test tree (testpaths,
else the rootdir, and the case roots), and only the tests bound to the case are kept, beside
whatever the other arguments select. IDEs run a directory or a file: this is what makes
`pytest scenarios/ID` do what it says.

Every process rewrites its own arguments the same way: xdist workers get the invocation's
arguments, not the controller's rewritten ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from ..case import CASE_FILE, CONFIG_FILE
from .keys import bound_key, case_ref, case_roots, refuse_selection


@dataclass(frozen=True)
class BoundRun:
    """Case ids given by directory, and the other arguments' paths, whose tests all stay."""

    case_ids: dict[str, str]
    """Case id -> the argument that named it."""
    other_paths: tuple[Path, ...]
    tree: tuple[Path, ...]
    """Where the bound tests were looked for."""


def rewrite_arguments(config: pytest.Config) -> None:
    """Swap each own agent's case directory on the command line for the test tree."""
    roots = [r.resolve() for r in case_roots(config)]
    case_ids: dict[str, str] = {}
    kept: list[str] = []
    for arg in config.args:
        case_dir = _own_case_dir(config, arg, roots)
        if case_dir is None:
            kept.append(arg)
            continue
        from ..case.directory import read_case_id
        from ..errors import NodevalError

        try:
            case_ids[read_case_id(case_dir)] = arg
        except NodevalError:
            kept.append(arg)  # collected as given, its case.yaml's error reported there
    if not case_ids:
        return
    base = config.invocation_params.dir
    others = tuple((base / a.partition("::")[0]).resolve() for a in kept)
    tree = [p for p in _test_tree(config, roots) if not any(p.is_relative_to(o) for o in others)]
    config.args[:] = kept + [str(p) for p in tree]
    config.stash[bound_key] = BoundRun(case_ids, others, tuple(tree))


def _own_case_dir(config: pytest.Config, arg: str, roots: list[Path]) -> Path | None:
    path_part, _, test_part = arg.partition("::")
    path = (config.invocation_params.dir / path_part).resolve()
    case_dir = path.parent if path.name == CASE_FILE else path
    if (
        test_part
        or not (case_dir / CASE_FILE).is_file()
        or (case_dir / CONFIG_FILE).is_file()
        or not any(case_dir.is_relative_to(r) for r in roots)
    ):
        return None
    return case_dir


def _test_tree(config: pytest.Config, roots: list[Path]) -> list[Path]:
    """testpaths (else the rootdir) and the case roots, none inside another."""
    rootpath = config.rootpath
    paths = [(rootpath / p).resolve() for p in config.getini("testpaths")] or [rootpath]
    paths += roots
    chosen: list[Path] = []
    for path in sorted({p for p in paths if p.exists()}, key=lambda p: (len(p.parts), str(p))):
        if not any(path.is_relative_to(c) for c in chosen):
            chosen.append(path)
    return chosen


def select_bound(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests bound to the cases given by directory, and the other arguments' tests."""
    bound = config.stash.get(bound_key, None)
    if bound is None:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    found: set[str] = set()
    for item in items:
        ref = case_ref(item)
        if ref is not None and ref.case_id in bound.case_ids:
            found.add(ref.case_id)
            kept.append(item)
        elif any(item.path.is_relative_to(p) for p in bound.other_paths):
            kept.append(item)
        else:
            dropped.append(item)
    missing = [arg for case_id, arg in bound.case_ids.items() if case_id not in found]
    if missing:
        where = ", ".join(_shown(config, p) for p in bound.tree)
        refuse_selection(
            config,
            items,
            f"{', '.join(missing)}: your own agent's case, but no test under {where} is bound "
            "to it; bind one with @pytest.mark.nodeval_case("
            f"{', '.join(repr(c) for c, a in bound.case_ids.items() if a in missing)})",
        )
        return
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _shown(config: pytest.Config, path: Path) -> str:
    return (
        str(path.relative_to(config.rootpath))
        if path.is_relative_to(config.rootpath)
        else str(path)
    )
