"""JSON Schemas of the formats on disk, exported to `schemas/` for other tools and editors.

Every file a user writes has one (case.yaml, input/config.yaml, input/inputs.yaml,
assertions.yaml, the fakes' input/llm.yaml, input/composio.yaml, input/mcp.yaml and
input/web.yaml), and so do the files the project writes for others to read (report.json,
a journal's header).
The same files ship in the package (`pytest_nodeval/json_schemas/`), so `nodeval schemas`
and `nodeval new` can give a project its own copy without a network.

Regenerate after a deliberate model change:
    python -m pytest_nodeval.schemas schemas/ pytest_nodeval/json_schemas/
A test fails when the committed files and the models drift apart.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .case.schema_files import SHIPPED, USER_FILES

__all__ = ["SHIPPED", "USER_FILES", "export", "render", "schemas"]


def schemas() -> dict[str, dict[str, Any]]:
    from pytest_nodeval_fakes.composio import ComposioCatalogue
    from pytest_nodeval_fakes.llm import LLMScript
    from pytest_nodeval_fakes.mcp_oauth import MCPScript
    from pytest_nodeval_fakes.web import WebScript

    from .agent.config import EngineConfig
    from .case.directory import CaseSpec
    from .checks.assertions import AssertionsFile
    from .journal.events import JournalHeader
    from .people.inputs import InputsSpec
    from .report.models import RunReport

    assertions = AssertionsFile.model_json_schema()
    # assertions.yaml is usually the bare list; the schema accepts both forms, as the loader does.
    assertions_file = {
        **assertions,
        "anyOf": [{"$ref": "#/$defs/_Assertions"}, assertions["properties"]["assertions"]],
    }
    assertions_file["$defs"] = {
        **assertions.get("$defs", {}),
        "_Assertions": {k: v for k, v in assertions.items() if k not in ("$defs", "title")},
    }
    for key in ("properties", "additionalProperties", "type", "required"):
        assertions_file.pop(key, None)
    config = EngineConfig.model_json_schema()
    _name_or_object(config["properties"]["tools"])
    _name_or_object(assertions_file["$defs"]["SequenceSpec"]["properties"]["events"])
    return {
        "report.schema.json": RunReport.model_json_schema(),
        "case.schema.json": CaseSpec.model_json_schema(),
        "config.schema.json": config,
        "inputs.schema.json": InputsSpec.model_json_schema(),
        "assertions.schema.json": assertions_file,
        "fake-llm.schema.json": LLMScript.model_json_schema(),
        "fake-composio.schema.json": ComposioCatalogue.model_json_schema(),
        "fake-mcp.schema.json": MCPScript.model_json_schema(),
        "fake-web.schema.json": WebScript.model_json_schema(),
        "journal-header.schema.json": JournalHeader.model_json_schema(),
    }


def _name_or_object(field: dict[str, Any]) -> None:
    """A list whose items may also be a bare name (`tools: [shell]`, `events: [io.input]`): the
    models turn names into objects before validating, which their own schemas cannot say."""
    field["items"] = {"anyOf": [{"type": "string"}, field["items"]]}


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
    for target in sys.argv[1:] or ["schemas", str(SHIPPED)]:
        for path in export(Path(target)):
            print(path)
