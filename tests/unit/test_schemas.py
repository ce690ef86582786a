from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_nodeval.schemas import SHIPPED, USER_FILES, render, schemas

SCHEMA_DIR = Path(__file__).parents[2] / "schemas"


@pytest.mark.parametrize("name", sorted(schemas()))
def test_committed_schema_matches_the_model(name: str) -> None:
    for directory in (SCHEMA_DIR, SHIPPED):
        committed = (directory / name).read_text()
        assert committed == render(schemas()[name]), (
            f"{directory.name}/{name} is out of date with its model; if the change is deliberate, run "
            "`python -m pytest_nodeval.schemas` (and bump schema_version if readers would break)")


@pytest.mark.parametrize("relative", sorted(USER_FILES))
def test_every_file_of_the_seed_scenarios_validates_against_its_schema(relative: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    schema = json.loads((SCHEMA_DIR / USER_FILES[relative]).read_text())
    files = sorted((Path(__file__).parents[2] / "scenarios").glob(f"*/{relative}"))
    for path in files:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    if relative in ("case.yaml", "input/config.yaml", "input/inputs.yaml", "assertions.yaml"):
        assert files, f"no seed scenario has a {relative} to check"


def test_a_schema_refuses_what_the_loader_refuses() -> None:
    jsonschema = pytest.importorskip("jsonschema")

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
