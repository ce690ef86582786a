"""What loading the plugin costs: the self time of pytest_nodeval's own modules when the
entry module is imported, this tree against a git revision, measured side by side.

    .venv/bin/python benchmarks/import_time.py [--against REV] [--runs 80]

Each run is `python -X importtime -c "import pytest_nodeval.plugin"` from a neutral
directory, with PYTHONPATH pointing at one tree; runs alternate between the trees so both
see the same machine load. Bytecode caches are warmed first (`-X importtime` without them
measures compiling). Prints the median, over the runs, of each module's self time and of
their sum, in microseconds; pytest's own import is the same for both trees and left out.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OWN_MODULE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s+(pytest_nodeval[\w.]*)")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--against", default="HEAD~1", help="git revision to compare with (default HEAD~1)"
    )
    parser.add_argument("--runs", type=int, default=80, help="runs per tree (default 80)")
    return parser.parse_args()


@contextmanager
def worktree(revision: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="nodeval-import-time-") as parent:
        tree = Path(parent) / "tree"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), revision],
            check=True,
            capture_output=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                capture_output=True,
            )


def own_times(tree: Path, *, measure: bool = True) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    flags = ["-X", "importtime"] if measure else []
    done = subprocess.run(
        [sys.executable, *flags, "-c", "import pytest_nodeval.plugin"],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    return {module: int(us) for us, module in OWN_MODULE.findall(done.stderr)}


def summary(samples: list[dict[str, int]]) -> str:
    modules = sorted({module for sample in samples for module in sample})
    per_module = ", ".join(
        f"{m} {statistics.median(s.get(m, 0) for s in samples):.0f}" for m in modules
    )
    return f"{statistics.median(sum(s.values()) for s in samples):.0f} us in all ({per_module})"


def main() -> None:
    args = parse_args()
    with worktree(args.against) as other:
        trees = {"this tree": REPO, args.against: other}
        for tree in trees.values():
            own_times(tree, measure=False)  # write the bytecode caches
        samples: dict[str, list[dict[str, int]]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, tree in trees.items():
                samples[name].append(own_times(tree))
    for name in trees:
        print(f"{name}: {summary(samples[name])}")
    ratio = statistics.median(sum(s.values()) for s in samples["this tree"]) / statistics.median(
        sum(s.values()) for s in samples[args.against]
    )
    print(
        f"ratio this tree / {args.against}: {ratio:.2f} (medians of {args.runs} interleaved runs, "
        f"load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
