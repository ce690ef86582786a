"""Instructions per replayed model call: what wall-clock figures cannot say on a loaded machine.

    python benchmarks/replay_instructions.py                       # this tree
    python benchmarks/replay_instructions.py --against ../other    # and another checkout, same run
    python benchmarks/replay_instructions.py --sessions 5 --variants replay floor
    python benchmarks/replay_instructions.py --simulate    # + simulated cache and branch misses

The session of benchmarks/replay_vs_peers.py (10 user turns, 20 anthropic calls through the
real SDK, 10 shell calls; requests grow to ~40 KB), recorded once by this tree, then counted in
a fresh process per tree and variant:

* **floor**: the 20 recorded requests sent with `client.messages.create(**body)`, one client
  per session, answered from memory by an `httpx2.MockTransport` (the SDK's own cost);
* **replay**: `run_case(..., mode="deterministic")`: engine, replay transport, observed journal;
* **replay_mock**: the same conversation with the keyless `mock` provider (no SDK).

With valgrind installed, each process runs under callgrind with collection switched on only
inside `operator.call(measured)`, so imports and the three warm-up sessions are not counted:
the figure is the instructions of the measured sessions over their model calls (machine load
does not change it). Without valgrind, cProfile counts Python function calls the same way,
a coarser proxy (one call of a C builtin counts as much as one of a Python function).
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CALLS = 20
"""Model calls per session (replay_vs_peers.TURNS user turns, two calls each)."""
VARIANTS = ("floor", "replay", "replay_mock")
WARMUP = 3


def record_cases(work: Path) -> dict[str, Path]:
    """The anthropic and the mock case, each recorded once by this tree."""
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
    from replay_bench import make_case
    from replay_vs_peers import mock_case

    return {"sdk": make_case(work / "sdk-case", CALLS // 2), "mock": mock_case(work / "mock-case")}


# -- the measured process -------------------------------------------------------------------


def session(variant: str, cases: dict[str, Path]) -> Any:
    """One session of `variant` as a function of no arguments (imports and setup done)."""
    if variant == "floor":
        return _floor(cases["sdk"])
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    case = load_case(cases["sdk" if variant == "replay" else "mock"])
    work = Path(tempfile.mkdtemp(prefix="nodeval-instr-"))
    numbers = iter(range(1_000_000))

    def run() -> None:
        journal = work / str(next(numbers))  # a new directory per session, as per attempt
        observed = run_case(case, AttemptSettings(mode="deterministic"), journal)
        assert observed.divergence is None and observed.status == "ok", observed.metrics()

    return run


def _floor(case_dir: Path) -> Any:
    from replay_vs_peers import recorded_exchanges, sdk_floor_session

    requests, responses = recorded_exchanges(case_dir)
    return lambda: sdk_floor_session(requests, responses, "http://127.0.0.1:9")


def child(tree: str, variant: str, cases: dict[str, Path], sessions: int, profile: bool) -> None:
    sys.path.insert(0, tree)
    run = session(variant, cases)
    for _ in range(WARMUP):  # imports, caches, the first parse of the golden journal
        run()

    def measured() -> None:
        for _ in range(sessions):
            run()

    if not profile:
        operator.call(measured)  # callgrind collects inside this call only
        return
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(measured)
    stats: Any = pstats.Stats(profiler)
    print(f"calls {sum(row[1] for row in stats.stats.values())}")


# -- the driver -------------------------------------------------------------------------------


def count(
    tree: Path, variant: str, cases: dict[str, Path], sessions: int, simulate: bool = False
) -> dict[str, int]:
    """Instructions (callgrind) or Python function calls (cProfile) of `sessions` sessions,
    as {"Ir": n} or {"calls": n}; with `simulate`, callgrind's cache and branch events too."""
    command = [
        sys.executable,
        __file__,
        "--child",
        variant,
        "--tree",
        str(tree),
        "--cases",
        json.dumps({k: str(v) for k, v in cases.items()}),
        "--sessions",
        str(sessions),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if shutil.which("valgrind"):
        command = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--collect-atstart=no",
            "--toggle-collect=_operator_call",
            *(["--cache-sim=yes", "--branch-sim=yes"] if simulate else []),
            *command,
        ]
        pattern = r"Events +: ([\w ]+)\n.*Collected : ([\d ]+)"
    else:
        command.append("--profile")
        pattern = r"^(calls) (\d+)"
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    found = re.search(pattern, done.stdout + done.stderr, re.MULTILINE)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{variant} in {tree} failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    return dict(zip(found.group(1).split(), map(int, found.group(2).split()), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=5, help="measured sessions per process")
    parser.add_argument("--against", type=Path, nargs="*", default=[], help="other checkouts")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--cases", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="also callgrind's simulated cache misses and branch mispredictions, per call",
    )
    args = parser.parse_args()
    if args.child:
        cases = {k: Path(v) for k, v in json.loads(args.cases).items()}
        child(args.tree, args.child, cases, args.sessions, args.profile)
        return
    unit = "instructions" if shutil.which("valgrind") else "Python calls (cProfile)"
    cases = record_cases(Path(tempfile.mkdtemp(prefix="nodeval-instr-cases-")))
    trees = {"this tree": ROOT, **{str(path): path.resolve() for path in args.against}}
    result: dict[str, Any] = {"unit": f"{unit} per model call", "sessions": args.sessions}
    for name, tree in trees.items():
        events = {
            variant: count(tree, variant, cases, args.sessions, args.simulate)
            for variant in args.variants
        }
        per_call = args.sessions * CALLS
        figures: dict[str, Any] = {
            variant: round(next(iter(counted.values())) / per_call)
            for variant, counted in events.items()
        }
        if args.simulate:  # every event callgrind counted, per call
            figures["events"] = {
                variant: {name: round(n / per_call) for name, n in counted.items()}
                for variant, counted in events.items()
            }
        if "floor" in figures and "replay" in figures:
            figures["replay_over_floor"] = round(figures["replay"] / figures["floor"], 3)
            figures["harness_per_call"] = figures["replay"] - figures["floor"]
        result[name] = figures
        print(json.dumps({name: figures}), flush=True)
    result["load_average"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
