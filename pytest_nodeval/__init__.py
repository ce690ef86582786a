"""pytest-nodeval: agent evaluations as pytest tests.

The public API is imported lazily, so `import pytest_nodeval` (which pytest does for
every run through the plugin's entry point) stays cheap. This module imports nothing of
the package at load, so any module may read `__version__` from it.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> the module that defines it (docs/api.md lists them all).
_LAZY = {
    "expect": "pytest_nodeval.checks.expect",
    "Expect": "pytest_nodeval.checks.expect",
    "AgentContext": "pytest_nodeval.agent.adapter",
    "tool": "pytest_nodeval.agent.adapter",
    "ToolFailed": "pytest_nodeval.agent.adapter",
    "Observed": "pytest_nodeval.runner.session",
    "record_agent": "pytest_nodeval.runner.session",
    "World": "pytest_nodeval.world",
    "ExecResult": "pytest_nodeval.world",
    "SimulatedUser": "pytest_nodeval.agent.simulated_user",
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
