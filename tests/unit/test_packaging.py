"""The distribution installs only its own names: `pytest_nodeval` and `pytest_nodeval_fakes`.

The repository keeps `fakes/` at the top (its layout is part of the design); pyproject.toml
maps it to `pytest_nodeval_fakes`, so an installed wheel never shadows a project's own `fakes`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _tree_packages() -> set[str]:
    """Every folder of pytest_nodeval/ with Python or data files, as a dotted name."""
    found = set()
    for path in (REPO / "pytest_nodeval").rglob("*"):
        if path.is_dir() and path.name != "__pycache__" and any(path.iterdir()):
            found.add(".".join(path.relative_to(REPO).parts))
    return found | {"pytest_nodeval"}


def test_the_package_list_is_the_tree() -> None:
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == _tree_packages() | {"pytest_nodeval_fakes"}
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"pytest_nodeval_fakes": "fakes"}


def test_the_wheel_has_no_top_level_fakes(tmp_path: Path) -> None:
    # Built from a copy: setuptools leaves build/ and *.egg-info beside the sources.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("pytest_nodeval", "fakes"):
        shutil.copytree(REPO / folder, source / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w"]
        + [str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    assert "deprecat" not in (built.stdout + built.stderr).lower()
    (wheel,) = tmp_path.glob("pytest_nodeval-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"pytest_nodeval", "pytest_nodeval_fakes"}
    assert "pytest_nodeval_fakes/llm.py" in names
    assert "pytest_nodeval/report/templates/report.html.j2" in names
    assert "pytest_nodeval/json_schemas/case.schema.json" in names
