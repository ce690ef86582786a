"""`nodeval eval`: evaluate for an external harness. Its only mode for now is --inspect-mode."""

from __future__ import annotations

import argparse

from . import inspect_mode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Required while it is the only mode, so that `nodeval eval` alone says what exists.
    parser.add_argument(
        "--inspect-mode",
        action="store_true",
        required=True,
        help="The only mode for now: the same as `nodeval inspect-mode`. "
        + inspect_mode.DESCRIPTION,
    )
    inspect_mode.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return inspect_mode.run(args)
