"""Collecting a 1,000-row dataset case against pytest's own 1,000 parametrized tests (issue 32).

    .venv/bin/python benchmarks/dataset_collection.py [--rows 1000] [--rounds 9] [--replay]

Three generated projects, each collected with `pytest --collect-only -q` in a fresh process:
one `.py` file with a test parametrized over N values (pytest's own floor for N items), one
dataset case of N rows, and N plain case directories. The arms are interleaved round by round
so all see the same load. Prints the median wall time of each and the dataset's cost beyond
the floor (issue 32's goal: at most 0.5 s). With `--replay`, both nodeval projects are recorded
and run whole in deterministic mode as well: the cost per attempt beyond collection, a dataset's
rows against as many case directories (the goal: the same).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = (
    "providers:\n  - {name: mock, model: mock-1, script: [{text: 'ok {{ row.n }}'}]}\ntools: []\n"
)


def make(root: Path, rows: int) -> dict[str, Path]:
    floor = root / "floor"
    floor.mkdir()
    (floor / "test_many.py").write_text(
        f"import pytest\n\n\n@pytest.mark.parametrize('n', range({rows}))\ndef test_n(n):\n"
        "    pass\n"
    )
    dataset = root / "dataset" / "scenarios" / "big"
    (dataset / "input").mkdir(parents=True)
    (dataset / "case.yaml").write_text("id: big\ndataset: rows.jsonl\n")
    (dataset / "rows.jsonl").write_text(
        "".join(json.dumps({"id": f"row-{i}", "n": i}) + "\n" for i in range(rows))
    )
    (dataset / "input" / "config.yaml").write_text(CONFIG)
    (dataset / "input" / "inputs.yaml").write_text("user: {kind: scripted, inputs: [hi]}\n")
    (dataset / "assertions.yaml").write_text("[]\n")
    cases = root / "cases" / "scenarios"
    for i in range(rows):
        case = cases / f"case-{i}"
        (case / "input").mkdir(parents=True)
        (case / "case.yaml").write_text(f"id: case-{i}\n")
        (case / "input" / "config.yaml").write_text(CONFIG.replace("{{ row.n }}", str(i)))
        (case / "input" / "inputs.yaml").write_text("user: {kind: scripted, inputs: [hi]}\n")
        (case / "assertions.yaml").write_text("[]\n")
    for project in (root / "dataset", root / "cases"):
        (project / "pytest.ini").write_text("[pytest]\ntestpaths = scenarios\n")
    (floor / "pytest.ini").write_text("[pytest]\n")
    return {
        "pytest floor": floor,
        "dataset case": root / "dataset",
        "case directories": root / "cases",
    }


def collect(project: Path, expected: int) -> float:
    return _pytest(project, ["--collect-only"], f"{expected} tests collected")


def replay(project: Path, expected: int) -> float:
    """The whole deterministic run, reports included."""
    return _pytest(project, [], f"{expected} passed")


def _pytest(project: Path, args: list[str], expected: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    # Plugins of the dev environment that are neither pytest nor nodeval: hypothesis imports
    # itself in every terminal summary (about a second here), langsmith at start.
    env["PYTEST_ADDOPTS"] = "-p no:langsmith_plugin -p no:hypothesispytest -p no:cacheprovider"
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # modules from their bytecode caches, as for a user
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if expected not in done.stdout:
        raise SystemExit(f"{project}: {done.stdout[-1500:]}{done.stderr[-1500:]}")
    return elapsed


def record(project: Path) -> None:
    nodeval = Path(sys.executable).with_name("nodeval")
    subprocess.run([nodeval, "record", "scenarios"], cwd=project, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--replay",
        action="store_true",
        help="Also record the dataset and the case directories, and time whole replay runs: "
        "the cost per attempt beyond collection, dataset rows against case directories.",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        projects = make(Path(scratch), args.rows)
        times: dict[str, list[float]] = {name: [] for name in projects}
        replays: dict[str, list[float]] = {}
        if args.replay:
            replays = {name: [] for name in projects if name != "pytest floor"}
            for name in replays:
                record(projects[name])
        for project in projects.values():
            collect(project, args.rows)  # warm: bytecode, the page cache
        for _ in range(args.rounds):
            for name, project in projects.items():
                times[name].append(collect(project, args.rows))
                if name in replays:
                    replays[name].append(replay(project, args.rows))
    floor = statistics.median(times["pytest floor"])
    print(f"{args.rows} items, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"  {name:<18} {median:6.3f} s  beyond the floor {median - floor:+.3f} s")
    per_attempt = {
        name: (statistics.median(runs) - statistics.median(times[name])) / args.rows * 1000
        for name, runs in replays.items()
    }
    for name, ms in per_attempt.items():
        run = statistics.median(replays[name])
        print(f"  replay, {name:<18} {run:6.3f} s  {ms:.2f} ms per attempt beyond collection")
    if per_attempt:
        ratio = per_attempt["dataset case"] / per_attempt["case directories"]
        print(f"  per attempt, dataset rows / case directories: x{ratio:.2f}")


if __name__ == "__main__":
    main()
