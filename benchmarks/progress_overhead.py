"""What the live progress line costs a fast run: the same replayed suite on a terminal, with
the line (`--nodeval-progress=tty`) and without it (`off`), alternating run by run.

    python benchmarks/progress_overhead.py --cases 300 --repeat 2 --rounds 5

Each run is a whole `pytest` process writing to a pseudo-terminal (as a developer's terminal
would receive it), timed from start to exit (wall) and by the CPU time the process and its
children used (less moved by other load); the figures are medians over the rounds, and
the variants alternate so load on the machine hits both. Also printed: the bytes each run
wrote to the terminal.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

INI = (
    "[pytest]\ntestpaths = scenarios\nnodeval_history =\n"
    "addopts = -p no:cacheprovider -p no:randomly\n"
)


def make_suite(root: Path, cases: int) -> None:
    """`cases` recorded cases of the keyless mock provider: replays cost a few ms each."""
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    (root / "pytest.ini").write_text(INI)
    for index in range(cases):
        directory = root / "scenarios" / f"case-{index:04d}"
        (directory / "input").mkdir(parents=True)
        (directory / "case.yaml").write_text(yaml.safe_dump({"id": directory.name}))
        (directory / "input" / "config.yaml").write_text(
            yaml.safe_dump(
                {
                    "providers": [
                        {"name": "mock", "model": "mock-1", "script": [{"text": "Hello."}]}
                    ],
                    "system_prompt": "You are brief.",
                    "tools": [],
                }
            )
        )
        (directory / "input" / "inputs.yaml").write_text(
            yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["hi"]}})
        )
        (directory / "assertions.yaml").write_text(
            yaml.safe_dump([{"kind": "output_contains", "text": "hello"}])
        )
        observed = run_case(
            load_case(directory),
            AttemptSettings(mode="record", world_backend="local"),
            Path(tempfile.mkdtemp()) / "journal",
        )
        assert observed.status == "ok", observed.metrics()


def run_on_terminal(root: Path, *args: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, bytes written) of one pytest run in a 120-column pty."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm", "PYTHONPATH": str(ROOT)}
    cpu_before = _children_cpu()
    start = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", *args],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
    ) as process:
        os.close(slave)
        written = 0
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            written += len(chunk)
        os.close(master)
    elapsed = time.perf_counter() - start
    cpu = _children_cpu() - cpu_before
    if process.returncode != 0:
        raise SystemExit(f"pytest {' '.join(args)} exited {process.returncode}")
    return elapsed, cpu, written


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("-n", default="0", help="xdist workers (0: in process)")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nodeval-progress-bench-"))
    make_suite(root, options.cases)
    base = ("--repeat", str(options.repeat), "-n", options.n)
    variants = {"off": (*base, "--nodeval-progress=off"), "tty": (*base, "--nodeval-progress=tty")}
    run_on_terminal(root, *variants["off"])  # warm-up: .pyc files, page cache
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpus: dict[str, list[float]] = {name: [] for name in variants}
    sizes: dict[str, int] = {}
    for _ in range(options.rounds):
        for name, args in variants.items():
            seconds, cpu, sizes[name] = run_on_terminal(root, *args)
            times[name].append(seconds)
            cpus[name].append(cpu)
    attempts = options.cases * options.repeat
    print(
        f"{attempts} attempts ({options.cases} cases x {options.repeat}), -n {options.n}, "
        f"{options.rounds} rounds, load average {os.getloadavg()[0]:.1f}"
    )
    for name in variants:
        wall, cpu = statistics.median(times[name]), statistics.median(cpus[name])
        print(
            f"  progress {name:<4} wall {wall:6.2f} s, CPU {cpu:6.2f} s "
            f"({cpu / attempts * 1000:.2f} ms per attempt), "
            f"{sizes[name] / 1024:.0f} KiB to the terminal"
        )
    for label, figures in (("wall", times), ("CPU", cpus)):
        ratio = statistics.median(figures["tty"]) / statistics.median(figures["off"])
        print(f"  tty / off, {label}: {ratio:.3f}")


if __name__ == "__main__":
    main()
