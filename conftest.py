"""Repository-level pytest settings for this repo's own scenarios/ (the plugin itself is
loaded through its entry point; the profiles live in pyproject.toml)."""
