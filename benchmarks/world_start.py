"""How long one world costs an attempt: open + first trivial exec + close, per backend.

    .venv/bin/python benchmarks/world_start.py [--runs 10] [--backends docker,bwrap,local]

Prints the median (and min/max) of N runs per available backend. The Docker image is
ensured before timing starts (its one-time build is not part of an attempt's cost);
the time for that is printed separately.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from pytest_nodeval.errors import NodevalWarning
from pytest_nodeval.world.select import BACKENDS, backend_problem, open_world


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="runs per backend (default 10)")
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated (default: all)"
    )
    return parser.parse_args()


def seed_directory() -> Path:
    """A small seed like a case's input/world/: a few files in a subdirectory."""
    seed = Path(tempfile.mkdtemp(prefix="nodeval-bench-seed-"))
    (seed / "data").mkdir()
    for index in range(5):
        (seed / "data" / f"file{index}.txt").write_text(f"line {index}\n" * 100)
    return seed


def one_start(backend: str, seed: Path, image: str | None) -> tuple[float, float]:
    """(open seconds, first exec + close seconds) for one world."""
    start = time.perf_counter()
    world = open_world(backend, run_id="benchmark", seed_dir=seed, image=image)
    opened = time.perf_counter()
    result = world.exec(["true"], timeout_s=30)
    world.close()
    if result.exit_code != 0:
        raise SystemExit(f"{backend}: `true` failed: {result}")
    return opened - start, time.perf_counter() - opened


def docker_image() -> str:
    from pytest_nodeval.world.image import ensure_image

    start = time.perf_counter()
    image = ensure_image()
    verb = "built" if image.built else "reused"
    print(
        f"docker image {image.tag} {verb} in {time.perf_counter() - start:.2f}s "
        f"(FROM {image.base_image})"
    )
    return image.tag


def measure(backend: str, runs: int, seed: Path) -> list[tuple[float, float]]:
    image = docker_image() if backend == "docker" else None
    one_start(backend, seed, image)  # warm-up: imports, page cache, first client
    return [one_start(backend, seed, image) for _ in range(runs)]


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def row(backend: str, samples: list[tuple[float, float]]) -> str:
    totals = [opened + rest for opened, rest in samples]
    return (
        f"| {backend:<7} | {median_ms(totals):9.1f} | {median_ms([s[0] for s in samples]):7.1f} "
        f"| {median_ms([s[1] for s in samples]):13.1f} "
        f"| {min(totals) * 1000:6.1f} | {max(totals) * 1000:6.1f} |"
    )


def main() -> None:
    args = parse_args()
    warnings.simplefilter("ignore", NodevalWarning)  # the local world's warning is known here
    seed = seed_directory()
    try:
        print("\n".join(table(args, seed)))
    finally:
        shutil.rmtree(seed, ignore_errors=True)


def table(args: argparse.Namespace, seed: Path) -> list[str]:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"{args.runs} runs per backend; {os.cpu_count()} CPUs, load average {load} before the runs"
    )
    lines = [
        "| backend | median ms | open ms | exec+close ms | min ms | max ms |",
        "|---------|----------:|--------:|--------------:|-------:|-------:|",
    ]
    for backend in args.backends.split(","):
        problem = backend_problem(backend)
        if problem is not None:
            lines.append(f"| {backend:<6} | unavailable: {problem} |")
            continue
        lines.append(row(backend, measure(backend, args.runs, seed)))
    return lines


if __name__ == "__main__":
    main()
