"""pytest-nodeval: agent evaluations as pytest tests.

The public API is imported lazily, so `import pytest_nodeval` (which pytest does for
every run through the plugin's entry point) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "expect": "pytest_nodeval.expectations",
    "Expect": "pytest_nodeval.expectations",
    "AgentContext": "pytest_nodeval.adapter",
    "tool": "pytest_nodeval.adapter",
    "ToolFailed": "pytest_nodeval.adapter",
    "Observed": "pytest_nodeval.session",
    "World": "pytest_nodeval.world",
    "ExecResult": "pytest_nodeval.world",
    "SimulatedUser": "pytest_nodeval.user",
    "NodevalError": "pytest_nodeval.errors",
    "ReplayDivergence": "pytest_nodeval.errors",
    "NodevalWarning": "pytest_nodeval.errors",
}

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_nodeval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
