"""pytest-nodeval: agent evaluations as pytest tests."""

__version__ = "0.1.0"
