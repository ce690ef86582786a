"""docs/inspect-mode.md is the protocol's reference: its tables and its shim must be true."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.protocol.inspect_mode import EXIT_CODES, InspectRequest, InspectResponse

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "inspect-mode.md").read_text(encoding="utf-8")


def table_rows(heading: str) -> list[list[str]]:
    section = DOC.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip().strip("`") for cell in row] for row in rows[1:]]


def test_the_exit_table_matches_the_code() -> None:
    documented = {row[2]: int(row[0]) for row in table_rows("Errors and exit status") if row[2]}
    assert documented == {
        "(none)": 0,
        **{code: status for code, status in EXIT_CODES.items() if code != "ok"},
    }


@pytest.mark.parametrize(
    ("heading", "model"), [("The request", InspectRequest), ("The response", InspectResponse)]
)
def test_every_field_is_documented_in_order(heading: str, model: Any) -> None:
    documented = [row[0] for row in table_rows(heading)]
    assert documented == [field.alias or name for name, field in model.model_fields.items()]


def test_the_shim_works_as_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    shim = (
        DOC.split("## A shim for other harnesses", 1)[1]
        .split("```python\n", 1)[1]
        .split("```", 1)[0]
    )
    namespace: dict[str, Any] = {}
    exec(compile(shim, "docs/inspect-mode.md", "exec"), namespace)
    # The shim calls `nodeval` from PATH, as an installed user would.
    monkeypatch.setenv(
        "PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    response = namespace["run_nodeval"](
        str(ROOT / "examples" / "inspect_ai" / "engine.yaml"), "What is 2 + 2?"
    )
    assert response["status"] == "ok" and response["output"] == "2 + 2 = 4."
    assert re.fullmatch(r"[0-9a-f]{32}", response["session_id"])
