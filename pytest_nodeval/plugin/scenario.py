"""The test function every case directory is collected into (one module object, shared)."""

from __future__ import annotations

from typing import Any


def test_scenario(nodeval_attempt: Any) -> None:
    """Run the case in the configured mode and check its assertions.yaml."""
    nodeval_attempt.check()
