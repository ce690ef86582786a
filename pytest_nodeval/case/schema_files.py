"""The JSON Schemas of a case's files as the package ships them, and the line that points an
editor at one (`# yaml-language-server: $schema=...`).

pytest_nodeval/schemas.py generates them from the models; a project gets its own copy with
`nodeval schemas` (or from `nodeval new` and `nodeval promote`, which write files with the line).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "json_schemas"
"""The schemas as the package carries them."""

USER_FILES = {
    "case.yaml": "case.schema.json",
    "input/config.yaml": "config.schema.json",
    "input/inputs.yaml": "inputs.schema.json",
    "assertions.yaml": "assertions.schema.json",
    "input/llm.yaml": "fake-llm.schema.json",
    "input/composio.yaml": "fake-composio.schema.json",
    "input/mcp.yaml": "fake-mcp.schema.json",
    "input/web.yaml": "fake-web.schema.json",
}
"""A case file -> its schema."""

PROJECT_DIR = Path(".nodeval") / "schemas"
"""Where a project keeps its copy, beside its case root."""


def export_shipped(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sorted(SHIPPED.glob("*.schema.json")):
        shutil.copyfile(source, directory / source.name)
        written.append(directory / source.name)
    return written


def project_schemas(case_root: Path) -> Path:
    """The project's copy for cases under case_root, written now if missing."""
    target = case_root.resolve().parent / PROJECT_DIR
    if not (target / "case.schema.json").is_file():
        export_shipped(target)
    return target


def schema_line(path: Path, relative: str, schemas: Path) -> str:
    """The first line of a case file at `path` (`relative` inside its case directory), or ""."""
    name = USER_FILES.get(relative)
    if name is None:
        return ""
    return f"# yaml-language-server: $schema={os.path.relpath(schemas / name, path.parent)}\n"
