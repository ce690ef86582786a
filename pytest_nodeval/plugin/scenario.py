"""The test function every case directory is collected into (one module object, shared)."""

from __future__ import annotations

import inspect
from typing import Any


def test_scenario(nodeval_attempt: Any) -> None:
    """Run the case in the configured mode and check its assertions.yaml."""
    nodeval_attempt.check()


# pytest reads this function's signature for every case it collects (its fixture names, and
# parametrize's checks); inspect.signature returns __signature__ when it is set.
test_scenario.__signature__ = inspect.signature(test_scenario)  # type: ignore[attr-defined]
