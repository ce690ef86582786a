"""pytest entry point of pytest-nodeval (kept thin: nothing heavy is imported here)."""
