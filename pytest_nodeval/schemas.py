"""JSON Schemas of the formats on disk, exported to `schemas/` for other tools.

Regenerate after a deliberate model change:  python -m pytest_nodeval.schemas schemas/
A test fails when the committed files and the models drift apart.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def schemas() -> dict[str, dict[str, Any]]:
    from .agent.config import EngineConfig
    from .case.directory import CaseSpec
    from .journal.events import JournalHeader
    from .report.models import RunReport

    return {
        "report.schema.json": RunReport.model_json_schema(),
        "case.schema.json": CaseSpec.model_json_schema(),
        "config.schema.json": EngineConfig.model_json_schema(),
        "journal-header.schema.json": JournalHeader.model_json_schema(),
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def export(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = directory / name
        path.write_text(render(schema))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in export(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(path)
