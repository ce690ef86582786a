"""Errors and warnings raised by pytest-nodeval.

Every error meant for a user names the file, field or value at fault and what would be
valid, so the plugin can show it without a traceback from inside the library.
"""

from __future__ import annotations

import pytest


class NodevalError(Exception):
    """Base class for errors a user can act on (bad input, missing parts)."""

    infrastructure = False
    """True when the machine, a provider or a key is at fault, never the agent: an attempt that
    stops on such an error is an infrastructure error, counted apart from every pass rate."""


class CaseFormatError(NodevalError):
    """A case file (case.yaml, assertions.yaml, input/*.yaml) is malformed."""


class ConfigError(NodevalError):
    """An option, ini key, profile or engine config has a bad value."""


class JournalError(NodevalError):
    """A journal is missing, unreadable or of an unknown schema version."""


class ReplayDivergence(NodevalError):
    """The agent did something the recorded journal did not, so replay cannot continue."""


class WorldError(NodevalError):
    """An isolated world could not be started or used (no engine, no image, a failed exec)."""

    infrastructure = True


class WorldConfigError(WorldError, ConfigError):
    """A world setting has a bad value: the case's or the command line's mistake."""

    infrastructure = False


class ProviderError(NodevalError):
    """Every provider in the chain failed, a provider (or the judge) cannot be reached, or it
    has no API key."""

    infrastructure = True


class NodevalWarning(pytest.PytestWarning):
    """Soft problems: unknown journal events, stale cases, a world that isolates nothing."""
