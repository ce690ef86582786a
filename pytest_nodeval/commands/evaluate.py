"""`nodeval eval`: evaluate for an external harness. Its only mode for now is --inspect-mode."""

from __future__ import annotations

import argparse

from ..errors import NodevalError
from . import inspect_mode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--inspect-mode", action="store_true", required=True,
                        help="The only mode for now: the same as `nodeval inspect-mode`. " + inspect_mode.DESCRIPTION)
    inspect_mode.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if not args.inspect_mode:  # argparse requires the flag; kept for callers that build args themselves
        raise NodevalError("the only mode of `nodeval eval` for now is --inspect-mode")
    return inspect_mode.run(args)
