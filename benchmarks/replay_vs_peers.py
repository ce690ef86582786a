"""Replay against its peers, in one process and one run: the SDK floor, this project, vcrpy.

    python benchmarks/replay_vs_peers.py                     # in-process figures only
    python benchmarks/replay_vs_peers.py --suite 100 1000    # + pytest runs of N generated cases
    python benchmarks/replay_vs_peers.py --suite 10000 --workers 2

In-process (medians of interleaved rounds, so load on the machine hits every variant):

* **SDK floor**: the 20 recorded requests of one session (10 user turns, 20 anthropic calls,
  10 shell calls; requests grow to ~40 KB) sent with `client.messages.create(**body)`, one
  client per session, answered from memory by an injected `httpx2.MockTransport`.
* **nodeval replay**: `run_case(..., mode="deterministic")` on the recorded case: the engine,
  the replay transport, the observed journal, the real SDK.
* **nodeval replay, mock provider**: the same conversation with the keyless `mock` provider.
* **vcrpy** 9.4 (a benchmark-only dependency, `pip install vcrpy`): the same 20 exchanges
  recorded to a cassette through the same SDK, replayed with `record_mode="none"` and its
  default matchers; once with the client built as the floor builds it (an injected
  transport, which vcrpy patches), once with a fresh default client per test (what a test
  usually does: its SSL context costs ~24 ms).

With `--suite N...`: N generated mock-provider cases (20 LLM + 10 tool calls each) in a fresh
project, run by `pytest -p no:cacheprovider` in subprocesses: collection per case
(`--collect-only`, minus a one-case run), the whole run per case, and the peak RSS of the
largest process and of each one (the controller and every xdist worker).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from replay_bench import PADDING, _median_ms, make_case  # noqa: E402

TURNS = 10


# -- the recorded traffic -----------------------------------------------------------------


def recorded_exchanges(case_dir: Path) -> tuple[list[dict[str, Any]], list[bytes]]:
    from pytest_nodeval.journal.reader import read_journal

    events = read_journal(case_dir / "journal").events
    requests = [e.payload.body for e in events if e.type == "llm.request"]
    responses = [json.dumps(e.payload.body).encode() for e in events if e.type == "llm.response"]
    assert len(requests) == len(responses) == 2 * TURNS
    return requests, responses


def mock_case(directory: Path, turns: int = TURNS) -> Path:
    """The same conversation shape with the keyless mock provider (no SDK), recorded."""
    script: list[dict[str, Any]] = []
    for turn in range(turns):
        script.append({"tool_calls": [{"name": "shell", "args": {"command": f"echo step {turn}"}}]})
        script.append({"text": f"Step {turn} done. {PADDING}"})
    (directory / "input").mkdir(parents=True)
    (directory / "case.yaml").write_text(yaml.safe_dump({"id": directory.name, "tags": ["bench"]}))
    (directory / "input" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "providers": [{"name": "mock", "model": "mock-1", "script": script}],
                "system_prompt": "You are a careful ops assistant.",
                "tools": ["shell"],
                "limits": {"max_turns": 2 * turns + 1},
            }
        )
    )
    (directory / "input" / "inputs.yaml").write_text(
        yaml.safe_dump(
            {
                "user": {
                    "kind": "scripted",
                    "inputs": [f"Please run step {t}." for t in range(turns)],
                }
            }
        )
    )
    (directory / "assertions.yaml").write_text(
        yaml.safe_dump([{"kind": "tool_called", "tool": "shell", "times": turns}])
    )
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    observed = run_case(
        load_case(directory),
        AttemptSettings(mode="record", world_backend="local"),
        Path(tempfile.mkdtemp()) / "j",
    )
    assert observed.status == "ok", observed.metrics()
    return directory


class _Answers(http.server.BaseHTTPRequestHandler):
    """Serves the recorded responses in order: what vcrpy records its cassette from."""

    answers: list[bytes] = []
    served = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = _Answers.answers[_Answers.served % len(_Answers.answers)]
        _Answers.served += 1
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def record_cassette(requests: list[dict[str, Any]], responses: list[bytes], cassette: Path) -> str:
    """Record the exchanges through the real SDK and httpx2's transport; returns the base URL."""
    import anthropic
    import vcr

    _Answers.answers, _Answers.served = responses, 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with vcr.use_cassette(str(cassette), record_mode="all"):
            client = anthropic.Anthropic(api_key="k", base_url=base_url, max_retries=0)
            for body in requests:
                client.messages.create(**body)
    finally:
        server.shutdown()
    return base_url


# -- in-process figures ---------------------------------------------------------------------


def in_process(runs: int, rounds: int) -> dict[str, Any]:
    import anthropic
    import httpx2
    import vcr

    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    work = Path(tempfile.mkdtemp(prefix="nodeval-peers-"))
    sdk_case = load_case(make_case(work / "sdk-case", TURNS))
    plain_case = load_case(mock_case(work / "mock-case"))
    requests, responses = recorded_exchanges(sdk_case.directory)
    cassette = work / "cassette.yaml"
    base_url = record_cassette(requests, responses, cassette)

    def floor() -> None:
        answers = iter(responses)
        transport = httpx2.MockTransport(
            lambda request: httpx2.Response(
                200, content=next(answers), headers={"content-type": "application/json"}
            )
        )
        client = anthropic.Anthropic(
            api_key="k",
            base_url=base_url,
            max_retries=0,
            http_client=httpx2.Client(transport=transport),
        )
        for body in requests:
            client.messages.create(**body)

    sessions = iter(range(1_000_000))

    def replay(case: Any) -> Callable[[], None]:
        def run() -> None:
            # A new directory per session, as every attempt of a pytest run has its own.
            journal = work / "observed" / str(next(sessions))
            observed = run_case(case, AttemptSettings(mode="deterministic"), journal)
            assert observed.divergence is None and observed.status == "ok", observed.metrics()

        return run

    def vcrpy(fresh_client: bool) -> Callable[[], None]:
        def run() -> None:
            with vcr.use_cassette(str(cassette), record_mode="none"):
                if fresh_client:  # what a test usually does
                    client = anthropic.Anthropic(api_key="k", base_url=base_url, max_retries=0)
                else:  # built as the floor builds it; vcrpy patches the mock transport
                    transport = httpx2.MockTransport(lambda request: httpx2.Response(500))
                    client = anthropic.Anthropic(
                        api_key="k",
                        base_url=base_url,
                        max_retries=0,
                        http_client=httpx2.Client(transport=transport),
                    )
                for body in requests:
                    client.messages.create(**body)

        return run

    variants = {
        "sdk_floor": floor,
        "nodeval_replay": replay(sdk_case),
        "nodeval_replay_mock": replay(plain_case),
        "vcrpy_injected_client": vcrpy(False),
        "vcrpy_fresh_client": vcrpy(True),
    }
    for fn in variants.values():  # warm up: imports, caches, the first parse of each journal
        for _ in range(3):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):  # interleaved, so drift on the machine hits every variant
        for name, fn in variants.items():
            samples[name].append(_median_ms(fn, runs, warmup=0))  # warmed up above
    ms = {name: round(statistics.median(values), 2) for name, values in samples.items()}
    floor_ms, ours = ms["sdk_floor"], ms["nodeval_replay"]
    calls = len(requests)
    return {
        "per_session_ms": ms,
        "replay_over_floor": round(ours / floor_ms, 2),
        "goal_replay_ms": round(1.15 * floor_ms + 1.0, 2),
        "overhead_per_llm_call_ms": round((ours - floor_ms) / calls, 3),
        "vcrpy_fresh_over_replay": round(ms["vcrpy_fresh_client"] / ours, 2),
        "vcrpy_injected_over_replay": round(ms["vcrpy_injected_client"] / ours, 2),
        "load_average": os.getloadavg()[0],
    }


# -- whole pytest runs ------------------------------------------------------------------------


def _pytest(args: list[str], cwd: Path) -> tuple[float, int]:
    """Wall seconds and the peak RSS (KB) of the largest process of one pytest run."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTEST_ADDOPTS"] = "-p no:hypothesispytest -p no:randomly"
    script = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
        "stderr=subprocess.STDOUT).returncode; "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall, rss, rc = done.stdout.split()
    if int(rc) not in (0, 5):
        raise SystemExit(f"pytest {' '.join(args)} in {cwd} exited {rc}")
    return float(wall), int(rss)


# Each pytest process of a suite run (the controller, every xdist worker) says its own peak RSS.
RSS_CONFTEST = """
import os, resource
from pathlib import Path

def pytest_sessionfinish(session):
    name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    with open(Path(str(session.config.rootpath)) / "rss.txt", "a") as out:
        out.write(f"{name} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n")
"""


def _rss_by_process(project: Path) -> dict[str, int]:
    lines = (project / "rss.txt").read_text().split() if (project / "rss.txt").exists() else []
    return {name: round(int(kb) / 1024) for name, kb in zip(lines[::2], lines[1::2], strict=True)}


def suite(sizes: list[int], workers: str) -> list[dict[str, Any]]:
    project = Path(tempfile.mkdtemp(prefix="nodeval-suite-"))
    template = mock_case(project / "template" / "bench-00000")
    rows = []
    for n in sizes:
        root = project / f"n{n}"
        for count, target in ((1, root / "one"), (n, root / "all")):
            (target / "scenarios").mkdir(parents=True)
            (target / "pytest.ini").write_text(
                "[pytest]\ntestpaths = scenarios\nnodeval_history =\n"
            )
            (target / "conftest.py").write_text(RSS_CONFTEST)
            for i in range(count):
                case = target / "scenarios" / f"bench-{i:05d}"
                shutil.copytree(template, case)
                (case / "case.yaml").write_text(
                    yaml.safe_dump({"id": case.name, "tags": ["bench"]})
                )
        collect_one, _ = _pytest(["--collect-only"], root / "one")
        collect_all, _ = _pytest(["--collect-only"], root / "all")
        run_one, _ = _pytest(["-n", workers], root / "one")
        (root / "all" / "rss.txt").unlink(missing_ok=True)
        run_all, rss = _pytest(["-n", workers], root / "all")
        by_process = _rss_by_process(root / "all")
        rows.append(
            {
                "cases": n,
                "workers": workers,
                "collect_per_case_ms": round((collect_all - collect_one) / max(n - 1, 1) * 1000, 3),
                "run_beyond_startup_s": round(run_all - run_one, 2),
                "run_per_case_ms": round((run_all - run_one) / max(n - 1, 1) * 1000, 2),
                "peak_rss_mb": round(rss / 1024),
                "rss_mb_by_process": by_process,
                "load_average": os.getloadavg()[0],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        shutil.rmtree(root)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="sessions per variant per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument(
        "--suite", type=int, nargs="*", default=[], metavar="N", help="also run N generated cases"
    )
    parser.add_argument("--workers", default="0", help="pytest -n for the suite runs")
    args = parser.parse_args()
    print(json.dumps(in_process(args.runs, args.rounds), indent=2), flush=True)
    if args.suite:
        suite(args.suite, args.workers)


if __name__ == "__main__":
    main()
