"""`nodeval schemas [DIR]`: the JSON Schemas of the files a user writes, copied into a project.

Editors with the YAML language server read the `# yaml-language-server: $schema=...` line
at the top of a case file; PyCharm maps file patterns to schemas (docs/editors.md). The
schemas ship in the package, so this works offline and matches the installed version.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..case.schema_files import PROJECT_DIR, export_shipped
from ..paths import directory_problem, refuse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=PROJECT_DIR,
        help=f"Where to write them (default: {PROJECT_DIR}).",
    )


def run(args: argparse.Namespace) -> int:
    refuse("DIRECTORY", directory_problem(args.directory))
    for path in export_shipped(args.directory):
        print(path)
    return 0
