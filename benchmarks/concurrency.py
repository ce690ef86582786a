"""Attempts in flight per process: a latency-bound live suite, serial against --nodeval-concurrency.

    .venv/bin/python benchmarks/concurrency.py
        [--cases 60] [--delay 1.0] [--runs serial,c30,n2c15] [--rounds 3]

Generates a suite of `--cases` cases x 1 repeat. Each case's agent (the reference engine, an
`anthropic` provider with `base_url: fake`) makes 3 LLM calls to its own `fakes.llm`, which
waits `--delay` seconds before each answer, so one attempt takes about 3 x delay and the
suite about cases x 3 x delay serially. Then times, each as one `pytest` subprocess in live
mode:

    serial  pytest --nodeval-mode live
    c30     pytest --nodeval-mode live --nodeval-concurrency 30
    n2c15   pytest --nodeval-mode live -n 2 --nodeval-concurrency 15

and checks that every run reaches the same verdict per case as the first one timed (half
the cases are built to fail their assertion, so a verdict mix-up would show). The serial
run is timed once (it takes minutes); the others `--rounds` times, interleaved, and their
median is printed with its min and max. Also prints the goal (1.5 x serial work / 30 + the
run's startup) and whether the median met it. Startup is the median of 3 live runs of a
one-case suite whose fake answers at once (what every live run pays before its attempts
overlap, the SDK's import included); the median of 3 `--collect-only` runs is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

VARIANTS = {
    "serial": [],
    "c30": ["--nodeval-concurrency", "30"],
    "n2c15": ["-n", "2", "--nodeval-concurrency", "15"],
}
CALLS = 3


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cases", type=int, default=60, help="cases in the suite, 1 repeat each (default 60)"
    )
    parser.add_argument(
        "--delay", type=float, default=1.0, help="seconds the fake waits per answer (default 1.0)"
    )
    parser.add_argument(
        "--runs",
        default=",".join(VARIANTS),
        help=f"variants, in order (default {','.join(VARIANTS)})",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="timings of each variant but serial (default 3)"
    )
    return parser.parse_args()


def write_suite(root: Path, cases: int, delay: float) -> None:
    (root / "pytest.ini").write_text(
        "[pytest]\ntestpaths = scenarios\naddopts = -p no:randomly -p no:cacheprovider\n"
        "nodeval_history =\n"
    )
    for index in range(cases):
        directory = root / "scenarios" / f"case-{index:03d}"
        (directory / "input").mkdir(parents=True)
        word = "fine" if index % 2 == 0 else "broken"  # half the cases fail their assertion
        _dump(directory / "case.yaml", {"id": directory.name, "name": f"case {index}"})
        _dump(
            directory / "input" / "config.yaml",
            {
                # The SDK's default retries (2), as users run it: under heavy load the fake's 1 s
                # keep-alive can close a connection the client is reusing ("connection reset").
                "providers": [{"name": "anthropic", "model": "claude-bench", "base_url": "fake"}],
                "system_prompt": "Answer briefly.",
                "tools": [],
            },
        )
        _dump(
            directory / "input" / "inputs.yaml",
            {
                "user": {
                    "kind": "scripted",
                    "inputs": [f"question {n}" for n in range(1, CALLS + 1)],
                }
            },
        )
        _dump(
            directory / "input" / "llm.yaml",
            {
                "schema_version": 1,
                "responses": [
                    {
                        "text": f"answer {n}: all {word}",
                        "delay_s": delay,
                        "usage": {"input_tokens": 10, "output_tokens": 5},
                    }
                    for n in range(1, CALLS + 1)
                ],
            },
        )
        _dump(directory / "assertions.yaml", [{"kind": "output_contains", "text": "all fine"}])


def _dump(path: Path, data: object) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def run(root: Path, args: list[str]) -> tuple[float, float, dict[str, str]]:
    """(wall seconds, CPU seconds of every process of the run, outcome per case) of one
    pytest run in live mode.

    The CPU seconds (user + system, the run's processes together) hardly depend on what else
    loads the machine; with W processes the run cannot take less than CPU / W on W free cores.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "--nodeval-mode",
        "live",
        "--nodeval-report-dir=reports",
        *args,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report_path = root / "reports" / "latest" / "report.json"
    if done.returncode not in (0, 1) or not report_path.is_file():
        raise SystemExit(
            f"{' '.join(command)} exited {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    report = json.loads(report_path.read_text())
    verdicts = {a["case_id"]: a["outcome"] for case in report["cases"] for a in case["attempts"]}
    return seconds, cpu, verdicts


def startup(root: Path) -> float:
    """Seconds of a run that collects the suite and runs nothing."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "--nodeval-mode", "live"],
        cwd=root,
        capture_output=True,
        check=False,
    )
    return time.perf_counter() - start


def live_startup(root: Path) -> float:
    """Seconds of a live run of one such case whose fake answers at once: the fixed cost of a
    live run (interpreter, plugin, collection, importing the SDK: `import anthropic` alone is
    ~1.6 s of CPU here, which a --collect-only run never pays) plus one ~0.1 s attempt."""
    return run(root, [])[0]


def main() -> None:
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix="nodeval-bench-concurrency-"))
    write_suite(root, args.cases, args.delay)
    work = args.cases * CALLS * args.delay
    collect = statistics.median(startup(root) for _ in range(3))
    instant = Path(tempfile.mkdtemp(prefix="nodeval-bench-startup-"))
    write_suite(instant, 1, 0.0)
    base = statistics.median(live_startup(instant) for _ in range(3))
    goal = 1.5 * work / 30 + base
    print(
        f"suite: {args.cases} cases x 1 repeat, {CALLS} LLM calls each, "
        f"{args.delay:g} s per answer: {work:.0f} s of waiting serially; "
        f"startup: --collect-only run {collect:.1f} s, live run of one "
        f"instant case {base:.1f} s; goal 1.5 x {work / 30:.0f} s + {base:.1f} s = {goal:.1f} s; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    names = args.runs.split(",")
    times: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[float]] = {name: [] for name in names}
    reference: dict[str, str] | None = None
    for round_ in range(args.rounds):
        for name in names:
            if name == "serial" and round_ > 0:
                continue
            seconds, cpu, verdicts = run(root, VARIANTS[name])
            reference = reference or verdicts
            differ = {
                case: (reference.get(case), verdict)
                for case, verdict in verdicts.items()
                if reference.get(case) != verdict
            }
            if differ or len(verdicts) != len(reference):
                raise SystemExit(
                    f"{name}: verdicts differ from the first run (first, now): {differ}"
                )
            times[name].append(seconds)
            cpus[name].append(cpu)
            passed = sum(v == "passed" for v in verdicts.values())
            print(
                f"  round {round_ + 1} {name}: {seconds:.1f} s wall, {cpu:.1f} s CPU, "
                f"{passed} passed of {len(verdicts)}, same verdict per case; "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    for name in names:
        median = statistics.median(times[name])
        line = f"{name:7s} {' '.join(VARIANTS[name]) or '(no options)':36s} median {median:6.1f} s"
        line += f" (min {min(times[name]):.1f}, max {max(times[name]):.1f}, n={len(times[name])}),"
        line += f" CPU {statistics.median(cpus[name]):.1f} s"
        if name != "serial":
            line += f"   goal <= {goal:.1f} s: {'met' if median <= goal else 'NOT met'}"
        print(line)


if __name__ == "__main__":
    main()
