"""What sending every attempt as an OpenTelemetry trace costs a replay run (issue 31).

    .venv/bin/python benchmarks/otel_export.py [--rounds 9] [--repeat 20]

The seed scenarios are replayed (`pytest -m pr --repeat N scenarios`, one process, no xdist)
without an endpoint and with `--nodeval-otel-endpoint` (and once more with
`--nodeval-otel-content`) pointed at an OTLP/HTTP receiver on loopback that answers 200 to
every request. The three arms are interleaved round by round, so all see the same load.
Prints the median wall time of each arm, its ratio to the run without export, and the spans
the receiver got per round (one trace per attempt: that the export really ran).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class _Sink(BaseHTTPRequestHandler):
    requests = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).requests += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def run(repeat: int, report_dir: str, *extra: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "OTEL_"))}
    env["PYTEST_ADDOPTS"] = "-p no:langsmith_plugin -p no:cacheprovider"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "pr",
        "--repeat",
        str(repeat),
        "-q",
        f"--nodeval-report-dir={report_dir}",
        "scenarios",
        *extra,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    arms = {
        "no export": (),
        "export": (f"--nodeval-otel-endpoint={url}",),
        "export with content": (f"--nodeval-otel-endpoint={url}", "--nodeval-otel-content"),
    }
    times: dict[str, list[float]] = {name: [] for name in arms}
    with tempfile.TemporaryDirectory() as reports:
        run(1, reports)  # warm the caches (bytecode, the page cache)
        for _ in range(args.rounds):
            for name, extra in arms.items():
                before = _Sink.requests
                times[name].append(run(args.repeat, reports, *extra))
                if extra and _Sink.requests == before:
                    raise SystemExit(f"{name}: the receiver got nothing")
    server.shutdown()
    base = statistics.median(times["no export"])
    print(
        f"seed scenarios, --repeat {args.repeat}, {args.rounds} rounds, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"  {name:<22} {median:6.2f} s  x{median / base:.3f}")


if __name__ == "__main__":
    main()
