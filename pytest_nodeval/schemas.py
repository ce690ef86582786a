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

The schemas of the files a user writes are as strict as the loader within one file: the
models carry the patterns and rules their validators enforce (`json_schema_extra`), and
`_one_error_per_mistake` shapes them so that a validator reports one mistake as one error.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
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

    user_files = {
        "case.schema.json": CaseSpec.model_json_schema(),
        "config.schema.json": _config_file(EngineConfig.model_json_schema()),
        "inputs.schema.json": InputsSpec.model_json_schema(),
        "assertions.schema.json": _assertions_file(AssertionsFile.model_json_schema()),
        "fake-llm.schema.json": LLMScript.model_json_schema(),
        "fake-composio.schema.json": ComposioCatalogue.model_json_schema(),
        "fake-mcp.schema.json": MCPScript.model_json_schema(),
        "fake-web.schema.json": WebScript.model_json_schema(),
    }
    return {
        "report.schema.json": RunReport.model_json_schema(),
        **{name: _one_error_per_mistake(schema) for name, schema in user_files.items()},
        "journal-header.schema.json": JournalHeader.model_json_schema(),
    }


def _assertions_file(assertions: dict[str, Any]) -> dict[str, Any]:
    listing = assertions["properties"]["assertions"]
    union, listing["items"] = listing["items"], {"$ref": "#/$defs/AssertionSpec"}
    # assertions.yaml is usually the bare list; the schema accepts both forms, as the loader
    # does, choosing by the document's type so that a mistake is one error, not one per form.
    schema = {k: v for k, v in assertions.items() if k == "title"}
    schema["$defs"] = {
        **assertions.get("$defs", {}),
        "AssertionSpec": union,
        "_Assertions": {k: v for k, v in assertions.items() if k not in ("$defs", "title")},
    }
    schema.update(
        {"if": {"type": "array"}, "then": listing, "else": {"$ref": "#/$defs/_Assertions"}}
    )
    _name_or_object(schema["$defs"]["SequenceSpec"]["properties"]["events"], {"type": "string"})
    return schema


def _config_file(config: dict[str, Any]) -> dict[str, Any]:
    _name_or_object(
        config["properties"]["tools"], config["$defs"]["ToolSpec"]["properties"]["name"]
    )
    return config


def _name_or_object(field: dict[str, Any], name: dict[str, Any]) -> None:
    """A list whose items may also be a bare name (`tools: [shell]`, `events: [io.input]`): the
    models turn names into objects before validating, which their own schemas cannot say."""
    bare = {k: v for k, v in name.items() if k not in ("title", "description")}
    field["items"] = {"if": {"type": "string"}, "then": bare, "else": field["items"]}


def _one_error_per_mistake(schema: dict[str, Any]) -> dict[str, Any]:
    """A file's schema as an editor should report it: one error for one mistake, as the loader.

    A validator reports every branch of a union (`oneOf`), so a misspelt key in one assertion
    would be an error per assertion kind; and a misspelt key is also its right spelling missing.
    """
    schema = copy.deepcopy(schema)  # the models' json_schema_extra dicts are shared
    _walk(schema, _tagged_union)
    _walk(schema, _rules_once_keys_are_known)
    return schema


def _walk(node: Any, change: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(node, dict):
        change(node)
        for value in node.values():
            _walk(value, change)
    elif isinstance(node, list):
        for item in node:
            _walk(item, change)


def _tagged_union(node: dict[str, Any]) -> None:
    """pydantic's discriminated union (`oneOf` with an OpenAPI `discriminator`, which JSON Schema
    validators ignore) as `if`/`then` on the tag: an unknown tag is one error naming the valid
    ones, and a known tag is checked against its own member only."""
    if "oneOf" not in node or "discriminator" not in node:
        return
    tag = node.pop("discriminator")
    key, mapping = tag["propertyName"], tag["mapping"]
    del node["oneOf"]
    node.update(
        {
            "type": "object",
            "required": [key],
            "properties": {key: {"enum": sorted(mapping)}},
            "allOf": [
                {
                    "if": {"type": "object", "required": [key], "properties": {key: {"const": v}}},
                    "then": {"$ref": ref},
                }
                for v, ref in sorted(mapping.items())
            ],
        }
    )


def _rules_once_keys_are_known(node: dict[str, Any]) -> None:
    """Check an object's required keys and its rules across keys (`allOf`) only when it has no
    unknown key: `valu: 3` is then one error (the unknown key) instead of two (and `value`
    missing). The same files pass and fail as before; the rest shows once the key is fixed."""
    if node.get("additionalProperties") is not False:
        return
    rules = {key: node.pop(key) for key in ("required", "allOf") if key in node}
    if rules:
        known = {"propertyNames": {"enum": sorted(node.get("properties", {}))}}
        node["allOf"] = [{"if": known, "then": rules}]


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
