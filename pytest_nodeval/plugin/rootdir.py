"""A path given to one of our options as a separate argument must not become pytest's rootdir.

pytest picks its rootdir and ini file before it loads plugins, so at that point it does not
know that `--nodeval-report-dir /ci/reports` takes a value: it reads `/ci/reports` as a test
path, and when that path exists outside the project, the rootdir moves out to it (or to an
ancestor it shares with the project) and the project's ini file (`nodeval_cases`, profiles,
markers) is never read. What follows is a run of the wrong tests, with node ids and errors
naming paths that do not exist. The `=` form (`--nodeval-report-dir=/ci/reports`) is one
argument and is not misread.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .keys import PATH_OPTIONS

INI_NAMES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def check_rootdir(config: pytest.Config) -> None:
    """A usage error when one of our options' values moved pytest's rootdir out of the project."""
    args = [str(a) for a in config.invocation_params.args]
    # strict=False: each argument paired with the next one (the last has none).
    pairs = zip(args, args[1:], strict=False)
    values = {value: option for option, value in pairs if option in PATH_OPTIONS}
    existing = {value: option for value, option in values.items() if Path(value).exists()}
    if not existing:
        return
    here = config.invocation_params.dir
    others = [
        Path(a) for a in args if not a.startswith("-") and a not in values and Path(a).exists()
    ]
    project = _nearest_ini_dir(others[0] if others else here) or here
    rootpath = config.rootpath.resolve()
    if rootpath == project.resolve():
        return
    for value, option in existing.items():
        path = (here / value).resolve()
        if path.is_relative_to(rootpath) and not path.is_relative_to(project.resolve()):
            raise pytest.UsageError(
                f"{option} {value}: pytest read this value as a test path "
                f"(it chooses its rootdir before loading the plugin that defines {option}) "
                f"and took {config.rootpath} for its rootdir "
                f"instead of {project}, so it did not read the project's ini file; write "
                f"{option}={value} (one argument)"
            )


def _nearest_ini_dir(start: Path) -> Path | None:
    """The nearest directory at or above `start` holding a file pytest may take for its ini
    (by name only: close enough to tell the project from a directory outside it)."""
    start = start.resolve()
    for directory in (start if start.is_dir() else start.parent, *start.parents):
        if any((directory / name).is_file() for name in INI_NAMES):
            return directory
    return None
