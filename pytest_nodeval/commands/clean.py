"""`nodeval clean`: remove the world containers runs left behind (or one run's); with
`--orphan-journals PATH...`, the journals of dataset rows their dataset no longer has."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from ..errors import NodevalError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run-id", default=None, help="Only this run's containers (default: every nodeval world)."
    )
    parser.add_argument(
        "--orphan-journals",
        nargs="+",
        type=Path,
        default=None,
        metavar="PATH",
        help="Instead of containers: remove journal/<row>/ of rows no longer in their case's "
        "dataset, in these case directories or every case under these roots.",
    )


def run(args: argparse.Namespace) -> int:
    if args.orphan_journals is not None:
        return _remove_orphan_journals(args.orphan_journals)
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


def _remove_orphan_journals(paths: list[Path]) -> int:
    from ..case.directory import find_case_dirs, read_case_head

    removed = []
    for path in paths:
        if not path.is_dir():
            raise NodevalError(f"--orphan-journals: {path}: no such directory")
        for directory in find_case_dirs([path]):
            head = read_case_head(directory)
            journals = directory / "journal"
            if head.dataset is None or not journals.is_dir():
                continue
            rows = {row.id for row in head.rows()}
            for journal in sorted(journals.iterdir()):
                if (
                    journal.is_dir()
                    and not journal.name.startswith(".")
                    and journal.name not in rows
                ):
                    shutil.rmtree(journal)
                    removed.append(journal)
    print(f"removed {len(removed)} orphan journal(s)")
    for journal in removed:
        print(f"  {journal}")
    return 0
