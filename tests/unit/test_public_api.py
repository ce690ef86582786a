"""The public import paths hold whatever the internal layout, and docs/api.md says where each
name lives."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import pytest_nodeval

API_DOC = Path(__file__).parents[2] / "docs" / "api.md"
FACES = ("pytest_nodeval", "pytest_nodeval.gate", "pytest_nodeval.sampler")

# What `from pytest_nodeval import ...` exported before the package had subpackages.
EXPORTED_BEFORE_SUBPACKAGES = {
    "expect",
    "Expect",
    "AgentContext",
    "tool",
    "ToolFailed",
    "Observed",
    "World",
    "ExecResult",
    "SimulatedUser",
    "NodevalError",
    "ReplayDivergence",
    "NodevalWarning",
    "__version__",
}


def documented_rows() -> list[tuple[str, str, str]]:
    """(public module, name, defining module) for every row of docs/api.md's tables."""
    rows, face = [], None
    for line in API_DOC.read_text().splitlines():
        if heading := re.match(r"## `from ([\w.]+) import \.\.\.`", line):
            face = heading.group(1)
        elif face in FACES and line.startswith("| `"):
            names, defined_in = line.split("|")[1:3]
            module = _dotted(defined_in.strip().strip("`"))
            rows += [(face, name, module) for name in re.findall(r"`(\w+)`", names)]
    return rows


def _dotted(path: str) -> str:
    parts = ["pytest_nodeval", *path.removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_top_level_keeps_every_name_it_exported() -> None:
    assert set(pytest_nodeval.__all__) >= EXPORTED_BEFORE_SUBPACKAGES


@pytest.mark.parametrize("face", FACES)
def test_every_name_a_public_module_exports_imports_and_is_documented(face: str) -> None:
    module = importlib.import_module(face)
    documented = {name for public, name, _ in documented_rows() if public == face}
    for name in module.__all__:
        assert getattr(module, name) is not None
    assert sorted(set(module.__all__) - documented) == [], f"missing from docs/api.md under {face}"
    assert sorted(documented - set(module.__all__)) == [], f"documented but not exported by {face}"


@pytest.mark.parametrize(("face", "name", "defined_in"), documented_rows())
def test_docs_api_names_the_module_that_defines_each_name(
    face: str, name: str, defined_in: str
) -> None:
    public = getattr(importlib.import_module(face), name)
    assert getattr(importlib.import_module(defined_in), name) is public


def test_the_gate_keeps_its_import_path() -> None:
    from pytest_nodeval.gate import CaseSample, GatePolicy, compare

    assert (
        compare(
            [CaseSample("a", (True,), (1.0,), (1,))],
            [CaseSample("a", (False,), (1.0,), (1,))],
            GatePolicy(),
        )
        .cases[0]
        .case_id
        == "a"
    )
