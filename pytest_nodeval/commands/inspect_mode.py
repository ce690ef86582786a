"""`nodeval inspect-mode`: one JSON request on stdin, one JSON response on stdout.

The protocol external harnesses drive the engine with; see docs/inspect-mode.md.
"""

from __future__ import annotations

import argparse
import logging
import sys

DESCRIPTION = (
    "Read one JSON request from stdin, run the engine once, write one JSON response to stdout "
    "(schema 1; logs go to stderr; the exit status is in docs/inspect-mode.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true", help="Log more to stderr.")


def run(args: argparse.Namespace) -> int:
    from ..protocol.inspect_mode import serve_stdio

    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if args.verbose else logging.WARNING,
        format="nodeval inspect-mode: %(levelname)s %(message)s",
    )
    return serve_stdio()
