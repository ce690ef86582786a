"""Fixtures shared by the integration tests."""

# The real OTLP trace receiver (Arize Phoenix, from its own virtualenv).
from tests.integration.phoenix import phoenix  # noqa: F401
