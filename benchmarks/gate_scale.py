"""compare() at scale: time and peak memory at 10,000 scenarios x 10 repeats (issue 29.6).

    .venv/bin/python benchmarks/gate_scale.py                      # 10,000 x 10, 3 runs
    .venv/bin/python benchmarks/gate_scale.py --scenarios 2000 --runs 5
    .venv/bin/python benchmarks/gate_scale.py --full-bootstrap      # no early stop: all 4,000
    .venv/bin/python benchmarks/gate_scale.py --before-tree DIR     # side by side with DIR

``--before-tree`` takes a directory holding another copy of the ``pytest_nodeval`` package
(say, the tree before a change): each round then runs that copy and this tree, one after the
other, and both medians are printed, so both are measured under the same load.

Builds a baseline and a current run (numpy seed 29) where every gate has data and every
bootstrap runs: latencies x1.3 (+~600 ms on the pooled p95), tokens and costs x1.2, pass rates
drawn per scenario from 60% solid / 40% flaky. Each run is a fresh process (so imports, caches
and the allocator start cold, as in CI): it builds the samples, then times one compare() with
the default GatePolicy (wall clock and the process's CPU time) and reads its peak resident
memory (ru_maxrss). The script prints each run with the 1-minute load average when it ended
(the machine may be shared), the medians, and the verdicts and bounds of each tree's last run,
so a change in behaviour shows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROBE = """
import json, resource, sys, time
import numpy as np
from pytest_nodeval.gate import CaseSample, GatePolicy, compare

scenarios, repeats = int(sys.argv[1]), int(sys.argv[2])
if sys.argv[3] == "full":  # every bootstrap draws all its resamples, as when a bound is close
    from pytest_nodeval.stats import significance
    significance._PILOT_RESAMPLES = 10**9
rng = np.random.default_rng(29)
rates = np.where(rng.random(scenarios) < 0.6, rng.uniform(0.95, 1, scenarios),
                 rng.uniform(0.5, 0.95, scenarios))
scale_ms = rng.lognormal(7.5, 0.6, scenarios)  # each case its own typical latency

def run(slower):
    samples = []
    for j in range(scenarios):
        outcomes = tuple(bool(x) for x in rng.random(repeats) < rates[j])
        latencies = rng.lognormal(np.log(scale_ms[j]), 0.3, repeats) * slower
        tokens = rng.poisson(2000 * slower, repeats)
        samples.append(CaseSample(
            case_id=f"case-{j:05d}",
            outcomes=outcomes,
            latencies_ms=tuple(float(x) for x in latencies),
            tokens=tuple(int(x) for x in tokens),
            costs=tuple(float(x) * 1e-5 for x in tokens),
        ))
    return samples

baseline, current = run(1.0), run(1.3)
built_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
start, cpu_start = time.perf_counter(), time.process_time()
diff = compare(baseline, current, GatePolicy())
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
gates = {g.name.value: [g.verdict.value, g.numbers.get("lower_bound")] for g in diff.gates}
import pytest_nodeval
print(json.dumps({"seconds": seconds, "cpu": cpu, "built_mb": built_rss / 1e6,
                  "peak_mb": peak_rss / 1e6, "gates": gates,
                  "package": pytest_nodeval.__path__[0]}))
"""


def one_run(scenarios: int, repeats: int, full: bool, tree: str | None) -> dict[str, object]:
    pilot = "full" if full else "pilot"
    command = [sys.executable, "-c", PROBE, str(scenarios), str(repeats), pilot]
    # `python -c` puts the working directory first on the path: run the other copy from its
    # own directory, so that its pytest_nodeval is the one imported.
    output = subprocess.run(
        command, check=True, capture_output=True, text=True, cwd=tree or None
    ).stdout
    result: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    result["load"] = os.getloadavg()[0]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--full-bootstrap",
        action="store_true",
        help="no early stop after the bootstraps' pilot: the cost when a bound is close to 1",
    )
    parser.add_argument(
        "--before-tree",
        metavar="DIR",
        help="a directory holding another copy of pytest_nodeval, run before this tree each round",
    )
    args = parser.parse_args()
    trees = {"before": args.before_tree, "this tree": None} if args.before_tree else {"": None}
    results: dict[str, list[dict[str, object]]] = {label: [] for label in trees}
    for index in range(args.runs):
        for label, tree in trees.items():
            result = one_run(args.scenarios, args.repeats, args.full_bootstrap, tree)
            results[label].append(result)
            print(
                f"run {index + 1}{f' ({label})' if label else ''}: compare() "
                f"{result['seconds']:.2f} s ({result['cpu']:.2f} s CPU), peak RSS "
                f"{result['peak_mb']:.0f} MB (after building the samples "
                f"{result['built_mb']:.0f} MB), load average {result['load']:.2f}",
                flush=True,
            )
    for label, runs in results.items():
        seconds = statistics.median(float(r["seconds"]) for r in runs)  # type: ignore[arg-type]
        peak = statistics.median(float(r["peak_mb"]) for r in runs)  # type: ignore[arg-type]
        cpu = statistics.median(float(r["cpu"]) for r in runs)  # type: ignore[arg-type]
        print(
            f"{label + ': ' if label else ''}{args.scenarios} x {args.repeats}: median compare() "
            f"{seconds:.2f} s ({cpu:.2f} s CPU), median peak RSS {peak:.0f} MB over {args.runs} "
            f"runs (pytest_nodeval from {runs[-1]['package']})"
        )
        print("  verdicts and bounds (last run):", json.dumps(runs[-1]["gates"]))


if __name__ == "__main__":
    main()
