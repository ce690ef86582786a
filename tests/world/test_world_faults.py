"""World faults are the world's (issue 28): a watched path the world cannot read is recorded as
unreadable and the attempt runs to its end, in every sandboxed backend."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from ..conftest import write_case
from .conftest import require_backend

LOCK_IT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "shell", "args": {"command": "mkdir locked && chmod 000 locked"}}]},
    {"text": "Locked it."},
]


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_an_unreadable_watched_directory_does_not_end_the_attempt(
    backend: str, nodeval_project: pytest.Pytester
) -> None:
    require_backend(backend)
    write_case(
        nodeval_project.path / "scenarios",
        "locked",
        script=LOCK_IT,
        inputs=["Lock the directory."],
        tools=["shell"],
        case={"world": {"watch": ["locked/"]}},
        record=False,
        assertions=[{"kind": "world_file_exists", "path": "locked/"}],
    )
    result = nodeval_project.runpytest("--nodeval-mode", "record", "--nodeval-world", backend)
    result.assert_outcomes(passed=1)
    assert "Traceback" not in result.stdout.str()
    journal = nodeval_project.path / "scenarios" / "locked" / "journal" / "events.jsonl"
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    types = [event["type"] for event in events]
    assert types[-2:] == ["world.snapshot", "session.end"]
    locked = events[-2]["payload"]["files"]["locked/"]
    # Docker's user cannot read a mode-000 directory; bwrap run by root can, and lists it.
    if backend == "bwrap" and os.geteuid() == 0:
        assert locked == {"exists": True, "listing": []}
    else:
        assert locked == {"exists": True, "unreadable": True, "reason": "Permission denied"}
    assert events[-1]["payload"]["status"] == "ok"
