"""What the installed plugin costs a pytest run that has no nodeval case (issue 33).

    .venv/bin/python benchmarks/idle_plugin.py [--rounds 15]
    .venv/bin/python benchmarks/idle_plugin.py --callgrind    # instructions, needs valgrind

Two generated projects without a case: 50 files of 20 tests, and one file with 1,000
parametrized tests. Each is run with `--collect-only` and in full (`-q`), with the plugin and
with `-p no:nodeval`, the four arms interleaved round by round so both see the same load.
Prints the median CPU time (user + system, of the pytest process) of each arm and the
plugin's cost (with - without): CPU time moves less than wall time with the machine's load.
The other installed plugins load in both arms alike, but for hypothesis and langsmith,
which are off in both (their cost is large and noisy). Bytecode caches are on, as for a
user (PYTHONDONTWRITEBYTECODE is dropped from the environment).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECTS = {
    "50 files x 20 tests": {
        f"test_m{i:02d}.py": "".join(f"def test_{j}():\n    pass\n\n" for j in range(20))
        for i in range(50)
    },
    "1,000 parametrized tests": {
        "test_many.py": (
            "import pytest\n\n\n@pytest.mark.parametrize('n', range(1000))\n"
            "def test_n(n):\n    pass\n"
        )
    },
}
RUNS = (("--collect-only", ("--collect-only", "-q")), ("full", ("-q",)))
"""Each project is collected only, and run in full."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NODEVAL_"))}
    # As a user's Python runs: modules from their bytecode caches, not compiled every run (a
    # development shell may set this; the plugin's modules then took ~14 ms more to import).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # This environment's other heavy plugins are off in both arms: hypothesis imports itself in
    # every terminal summary (~1 s of CPU), whose noise would hide a few milliseconds.
    env["PYTEST_ADDOPTS"] = "-p no:hypothesispytest -p no:langsmith_plugin"
    return env


def run(project: Path, *args: str) -> float:
    """CPU seconds (user + system) of one pytest process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=_env(),
        check=True,
        capture_output=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(project: Path, *args: str) -> int:
    """Instructions one pytest process executes (valgrind's callgrind): unmoved by load."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
        + ["-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    refs = next(line for line in done.stderr.splitlines() if "I   refs:" in line)
    return int(refs.split(":")[1].replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="Count instructions under valgrind (one run per arm) instead of timing CPU.",
    )
    options = parser.parse_args()
    if options.callgrind:
        count_instructions()
        return
    rounds = options.rounds
    print(f"load average {os.getloadavg()[0]:.1f}; {rounds} rounds; median CPU time")
    print("| project | run | with the plugin | without | plugin's cost |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="nodeval-idle-") as parent:
        for name, project in _projects(Path(parent)):
            for label, args in RUNS:
                run(project, *args)  # bytecode caches warm
                timed: dict[bool, list[float]] = {True: [], False: []}
                for _ in range(rounds):
                    for plugin in (True, False):
                        extra = () if plugin else ("-p", "no:nodeval")
                        timed[plugin].append(run(project, *args, *extra))
                with_, without = (statistics.median(timed[p]) * 1000 for p in (True, False))
                print(
                    f"| {name} | {label} | {with_:.0f} ms | {without:.0f} ms "
                    f"| {with_ - without:+.0f} ms |",
                    flush=True,
                )
    print(f"load average {os.getloadavg()[0]:.1f}")


def count_instructions() -> None:
    print("instructions (valgrind --tool=callgrind), one run per arm after a warm-up run")
    print("| project | run | with the plugin | without | plugin's cost |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="nodeval-idle-") as parent:
        for name, project in _projects(Path(parent)):
            for label, args in RUNS:
                run(project, *args)  # bytecode caches warm
                with_ = instructions(project, *args)
                without = instructions(project, *args, "-p", "no:nodeval")
                print(
                    f"| {name} | {label} | {with_ / 1e6:,.0f} M | {without / 1e6:,.0f} M "
                    f"| {(with_ - without) / 1e6:+,.1f} M ({(with_ - without) / without:+.1%}) |",
                    flush=True,
                )


def _projects(parent: Path) -> list[tuple[str, Path]]:
    made = []
    for name, files in PROJECTS.items():
        project = parent / name.replace(" ", "_").replace(",", "")
        project.mkdir()
        (project / "pytest.ini").write_text("[pytest]\n")
        for file, text in files.items():
            (project / file).write_text(text)
        made.append((name, project))
    return made


if __name__ == "__main__":
    main()
