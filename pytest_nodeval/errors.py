"""Errors and warnings raised by pytest-nodeval.

Every error meant for a user names the file, field or value at fault and what would be
valid, so the plugin can show it without a traceback from inside the library.
"""

from __future__ import annotations

import pytest


class NodevalError(Exception):
    """Base class for errors a user can act on (bad input, missing parts)."""


class CaseFormatError(NodevalError):
    """A case file (case.yaml, assertions.yaml, input/*.yaml) is malformed."""


class ConfigError(NodevalError):
    """An option, ini key, profile or engine config has a bad value."""


class JournalError(NodevalError):
    """A journal is missing, unreadable or of an unknown schema version."""


class ReplayDivergence(NodevalError):
    """The agent did something the recorded journal did not, so replay cannot continue."""


class WorldError(NodevalError):
    """An isolated world could not be started or used."""


class ProviderError(NodevalError):
    """Every provider in the chain failed, or a provider is misconfigured."""


class NodevalWarning(pytest.PytestWarning):
    """Soft problems: unknown journal events, stale cases, a world that isolates nothing."""
