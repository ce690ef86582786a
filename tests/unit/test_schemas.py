from __future__ import annotations

from pathlib import Path

import pytest

from pytest_nodeval.schemas import render, schemas

SCHEMA_DIR = Path(__file__).parents[2] / "schemas"


@pytest.mark.parametrize("name", sorted(schemas()))
def test_committed_schema_matches_the_model(name: str) -> None:
    committed = (SCHEMA_DIR / name).read_text()
    assert committed == render(schemas()[name]), (
        f"schemas/{name} is out of date with its model; if the change is deliberate, run "
        "`python -m pytest_nodeval.schemas schemas` (and bump schema_version if readers would break)")


def test_every_gate_threshold_is_an_ini_key() -> None:
    from dataclasses import fields

    from pytest_nodeval.gate import GatePolicy
    from pytest_nodeval.plugin.keys import GATE_INI_ALIASES, GATE_INI_KEYS

    assert set(GATE_INI_KEYS) - set(GATE_INI_ALIASES) == {f.name for f in fields(GatePolicy)}
    assert set(GATE_INI_ALIASES.values()) <= set(GATE_INI_KEYS), "an alias names a real key"
