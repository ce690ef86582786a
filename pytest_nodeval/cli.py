"""The `nodeval` command. Each subcommand lives in the module of its concept and loads lazily.

A subcommand is `add_arguments(parser)` + `run(args) -> int` in its module; this file
only maps names to them. A problem prints one line on stderr and exits with pytest's status
for it: 4 for a usage error (a bad argument, a missing or invalid file), 7 for the machine's
(infrastructure: no Docker engine, no key, a provider down).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

# name -> (module, one-line help). Keep sorted.
COMMANDS: dict[str, tuple[str, str]] = {
    "baseline": (
        "pytest_nodeval.commands.baseline",
        "Compare a run with a baseline, or bless a run as the baseline.",
    ),
    "clean": ("pytest_nodeval.commands.clean", "Remove world containers that runs left behind."),
    "export-otel": (
        "pytest_nodeval.commands.export_otel",
        "Write a finished run as OpenTelemetry traces (OTLP JSON lines).",
    ),
    "history": ("pytest_nodeval.commands.history", "Show a case's results across past runs."),
    "merge": (
        "pytest_nodeval.commands.merge",
        "Join the runs of --nodeval-shard K/N into one run, gated and reported.",
    ),
    "plan": (
        "pytest_nodeval.commands.plan",
        "How many repeats the gate needs to detect a given drop.",
    ),
    "promote": (
        "pytest_nodeval.commands.promote",
        "Make a reviewable case directory from a captured sample.",
    ),
    "eval": (
        "pytest_nodeval.commands.evaluate",
        "Evaluate for an external harness; the only mode for now is "
        "--inspect-mode (same as `nodeval inspect-mode`).",
    ),
    "inspect-mode": (
        "pytest_nodeval.commands.inspect_mode",
        "One JSON request on stdin, one JSON response on "
        "stdout: the protocol for external harnesses (docs/inspect-mode.md).",
    ),
    "new": (
        "pytest_nodeval.commands.new",
        "Create a case that records and replays at once (--agent: your own agent).",
    ),
    "schemas": (
        "pytest_nodeval.commands.schemas",
        "Copy the JSON Schemas of the case files into a project (editors).",
    ),
    "record": (
        "pytest_nodeval.commands.record",
        "Run a case live and write its journal/ (mock needs no key).",
    ),
    "samples": (
        "pytest_nodeval.commands.samples",
        "List the sessions the production sampler captured.",
    ),
    "report": (
        "pytest_nodeval.commands.report",
        "Render a run's report.html again from its report.json.",
    ),
}

EXIT_USAGE = 4
"""pytest's ExitCode.USAGE_ERROR: the same problem exits the same from `pytest` and `nodeval`."""
EXIT_INFRA = 7
"""The plugin's EXIT_INFRA_ERROR (report/models.py)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own status would be 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nodeval", description="pytest-nodeval: agent evaluations as pytest tests."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in sorted(COMMANDS.items()):
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import NodevalError, no_room

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.error(f"a command is needed, one of: {', '.join(sorted(COMMANDS))} (nodeval -h)")
    try:
        return int(importlib.import_module(args._module).run(args))
    except NodevalError as exc:
        return _fail(args.command, str(exc), EXIT_INFRA if exc.infrastructure else EXIT_USAGE)
    except OSError as exc:
        # A path the checks did not foresee (a command's own checks name the option first).
        where = f"{exc.filename}: " if exc.filename else ""
        machine = no_room(exc) or exc.errno == errno.EIO  # the disk's fault, not the path's
        status = EXIT_INFRA if machine else EXIT_USAGE
        return _fail(args.command, f"{where}{exc.strerror or exc}", status)


def _fail(command: str, message: str, status: int) -> int:
    from .text import printable

    print(printable(f"nodeval {command}: {message}"), file=sys.stderr)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
