"""`nodeval clean`: remove the world containers runs left behind (or one run's)."""

from __future__ import annotations

import argparse

from ..errors import NodevalError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run-id", default=None, help="Only this run's containers (default: every nodeval world)."
    )


def run(args: argparse.Namespace) -> int:
    from ..world.docker import engine_problem, remove_worlds

    problem = engine_problem()
    if problem is not None:
        raise NodevalError(f"no Docker engine to clean: {problem}")
    removed = remove_worlds(args.run_id)
    print(
        f"removed {len(removed)} world container(s)"
        + (f": {', '.join(removed)}" if removed else "")
    )
    return 0
