"""Subcommands of the `nodeval` command line (see cli.py)."""
