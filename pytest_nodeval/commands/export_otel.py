"""`nodeval export-otel RUN_DIR --to FILE`: a finished run as OTLP JSON lines (one per attempt)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import NodevalError
from ..paths import refuse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN_DIR",
        help="A run directory (reports/<run-id>, or reports/latest) holding report.json.",
    )
    parser.add_argument(
        "--to",
        dest="target",
        type=Path,
        required=True,
        metavar="FILE",
        help="The OTLP JSON lines file to write (the OpenTelemetry Collector's file format).",
    )
    parser.add_argument(
        "--content",
        action="store_true",
        help="Include message content, tool arguments and results (redacted as the journals "
        "are); `nodeval promote --from-otel` needs it.",
    )


def run(args: argparse.Namespace) -> int:
    if not (args.run_dir / "report.json").is_file():
        raise NodevalError(f"{args.run_dir}: not a run directory (no report.json)")
    refuse("--to", _target_problem(args.target))
    try:
        from ..report.otel_file import export_run
    except ImportError as exc:
        raise NodevalError(
            f"nodeval export-otel needs the OpenTelemetry SDK ({exc.name} is missing): "
            "pip install 'pytest-nodeval[otel]'"
        ) from None
    attempts, spans = export_run(args.run_dir, args.target, content=args.content)
    print(f"wrote {args.target}: {attempts} trace(s), {spans} span(s)")
    return 0


def _target_problem(target: Path) -> str | None:
    if target.is_dir():
        return f"{target} is a directory; name the file to write"
    if not target.parent.is_dir():
        return f"{target.parent}: no such directory to write {target.name} in"
    return None
