from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_nodeval.schemas import SHIPPED, USER_FILES, render, schemas

SCHEMA_DIR = Path(__file__).parents[2] / "schemas"


@pytest.mark.parametrize("name", sorted(schemas()))
def test_committed_schema_matches_the_model(name: str) -> None:
    for directory in (SCHEMA_DIR, SHIPPED):
        committed = (directory / name).read_text()
        assert committed == render(schemas()[name]), (
            f"{directory.name}/{name} is out of date with its model; "
            "if the change is deliberate, run "
            "`python -m pytest_nodeval.schemas` (and bump schema_version if readers would break)"
        )


@pytest.mark.parametrize("relative", sorted(USER_FILES))
def test_every_file_of_the_seed_scenarios_validates_against_its_schema(relative: str) -> None:
    import yaml

    schema = json.loads((SCHEMA_DIR / USER_FILES[relative]).read_text())
    files = sorted((Path(__file__).parents[2] / "scenarios").glob(f"*/{relative}"))
    for path in files:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    if relative in ("case.yaml", "input/config.yaml", "input/inputs.yaml", "assertions.yaml"):
        assert files, f"no seed scenario has a {relative} to check"


def test_a_schema_refuses_what_the_loader_refuses() -> None:
    schema = json.loads((SCHEMA_DIR / "assertions.schema.json").read_text())
    jsonschema.validate([{"kind": "tool_called", "tool": "shell"}], schema)
    jsonschema.validate({"assertions": [{"kind": "no_errors"}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{"kind": "tool_called"}], schema)  # no tool
    inputs = json.loads((SCHEMA_DIR / "inputs.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"user": {"kind": "scripted", "inputs": ["hi"], "colour": "x"}}, inputs)


def test_every_gate_threshold_is_an_ini_key() -> None:
    from dataclasses import fields

    from pytest_nodeval.gate import GatePolicy
    from pytest_nodeval.plugin.keys import GATE_INI_ALIASES, GATE_INI_KEYS

    assert set(GATE_INI_KEYS) - set(GATE_INI_ALIASES) == {f.name for f in fields(GatePolicy)}
    assert set(GATE_INI_ALIASES.values()) <= set(GATE_INI_KEYS), "an alias names a real key"


WRONG_FILES = [  # (schema, document, the key the error must name)
    ("case.schema.json", {"id": "x", "colour": "blue"}, "colour"),
    ("case.schema.json", {"id": "x", "repeat": "many"}, "repeat"),
    ("case.schema.json", {"name": "no id"}, "id"),
    (
        "config.schema.json",
        {"providers": [{"name": "mock", "model": "m"}], "prompt": "x"},
        "prompt",
    ),
    (
        "config.schema.json",
        {"providers": [{"name": "mock", "model": "m"}], "limits": {"max_turns": "ten"}},
        "max_turns",
    ),
    ("config.schema.json", {"system_prompt": "no providers"}, "providers"),
    (
        "inputs.schema.json",
        {"user": {"kind": "scripted", "inputs": ["hi"], "colour": "x"}},
        "colour",
    ),
    ("inputs.schema.json", {"user": {"kind": "scripted", "inputs": "hi"}}, "inputs"),
    (
        "inputs.schema.json",
        {"user": {"kind": "persona", "persona": "p", "reason": "r"}},
        "provider",
    ),
    ("assertions.schema.json", [{"kind": "tool_called", "tool": "shell", "colour": 1}], "colour"),
    ("assertions.schema.json", [{"kind": "max_turns", "value": "three"}], "value"),
    ("assertions.schema.json", [{"kind": "tool_called"}], "tool"),
    ("fake-llm.schema.json", {"responses": [{"text": "hi", "colour": 1}]}, "colour"),
]


@pytest.mark.parametrize(
    ("schema", "document", "key"),
    WRONG_FILES,
    ids=[f"{s.split('.')[0]}-{k}-{i}" for i, (s, _, k) in enumerate(WRONG_FILES)],
)
def test_a_wrong_file_fails_its_schema_naming_the_key(schema: str, document: Any, key: str) -> None:
    validator = jsonschema.Draft202012Validator(json.loads((SCHEMA_DIR / schema).read_text()))
    errors = list(validator.iter_errors(document))
    assert errors, f"{schema} accepted {document}"
    # The key is in the error's path, or (unknown or missing keys) named in its message; a union
    # member's errors are in its context.
    said, pending = [], list(errors)
    while pending:
        error = pending.pop()
        said.append(error)
        pending += error.context
    assert any(
        key in [str(p) for p in e.absolute_path]
        or repr(key) in e.message
        or f'"{key}"' in e.message
        for e in said
    ), [e.message for e in said]
