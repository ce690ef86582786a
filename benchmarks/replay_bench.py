"""Replay cost against the SDK's own floor, and whole pytest runs of replayed scenarios.

    python benchmarks/replay_bench.py sdk                 # one 20-call session vs the SDK floor
    python benchmarks/replay_bench.py pytest --n 100 1000 # N scenarios, -n 0 and -n 2
    python benchmarks/replay_bench.py collect --n 100 1000 10000 --against <rev>
                                                          # per-case collection cost,
                                                          # beside a revision

Every figure is a median; the compared variants run side by side in one process (sdk) or
one after the other in one invocation (pytest) or alternating run by run (collect), so load
on the machine hits both.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PADDING = "The quick brown fox jumps over the lazy dog. " * 30  # ~1.3 KB of text per answer


def _script(turns: int) -> dict[str, Any]:
    """fakes.llm script: per user turn, one tool call and one ~2 KB answer."""
    responses: list[dict[str, Any]] = []
    for turn in range(turns):
        responses.append(
            {"tool_calls": [{"name": "shell", "args": {"command": f"echo step {turn}"}}]}
        )
        responses.append(
            {
                "text": f"Step {turn} done. {PADDING}",
                "usage": {"input_tokens": 900, "output_tokens": 320},
            }
        )
    return {"schema_version": 1, "responses": responses}


def make_case(directory: Path, turns: int = 10) -> Path:
    """A recorded case: 20 anthropic calls, 10 shell calls, through the real SDK and fakes.llm."""
    (directory / "input").mkdir(parents=True)
    (directory / "case.yaml").write_text(yaml.safe_dump({"id": directory.name, "tags": ["bench"]}))
    (directory / "input" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "providers": [
                    {
                        "name": "anthropic",
                        "model": "claude-sonnet-4-6",
                        "base_url": "fake",
                        "max_retries": 0,
                    }
                ],
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
    (directory / "input" / "llm.yaml").write_text(yaml.safe_dump(_script(turns)))
    (directory / "assertions.yaml").write_text(
        yaml.safe_dump([{"kind": "tool_called", "tool": "shell", "times": turns}])
    )
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    observed = run_case(
        load_case(directory), AttemptSettings(mode="record"), Path(tempfile.mkdtemp()) / "j"
    )
    assert observed.status == "ok", observed.metrics()
    return directory


def _median_ms(fn: Callable[[], Any], runs: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def bench_sdk(runs: int) -> dict[str, float]:
    import anthropic
    import httpx2

    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.journal.reader import read_journal
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    case_dir = make_case(Path(tempfile.mkdtemp()) / "bench-case")
    events = read_journal(case_dir / "journal").events
    requests = [e.payload.body for e in events if e.type == "llm.request"]
    bodies = [json.dumps(e.payload.body).encode() for e in events if e.type == "llm.response"]
    assert len(requests) == 20

    def sdk_floor() -> None:
        # The SDK alone: the same 20 requests, answered from memory by httpx2's MockTransport.
        answers = iter(bodies)
        transport = httpx2.MockTransport(
            lambda request: httpx2.Response(
                200, content=next(answers), headers={"content-type": "application/json"}
            )
        )
        client = anthropic.Anthropic(
            api_key="k",
            base_url="http://floor.invalid",
            max_retries=0,
            http_client=httpx2.Client(transport=transport),
        )
        for body in requests:
            client.messages.create(**body)

    case = load_case(case_dir)
    scratch = Path(tempfile.mkdtemp())

    def replay() -> None:
        observed = run_case(case, AttemptSettings(mode="deterministic"), scratch / "journal")
        assert observed.divergence is None and observed.status == "ok"

    floor = replay_ms = 0.0
    floors, replays = [], []
    for _ in range(3):  # interleave, so drift on the machine hits both
        floors.append(_median_ms(sdk_floor, runs))
        replays.append(_median_ms(replay, runs))
    floor, replay_ms = statistics.median(floors), statistics.median(replays)
    return {
        "sdk_floor_ms": floor,
        "replay_ms": replay_ms,
        "ratio": replay_ms / floor,
        "per_call_floor_ms": floor / 20,
        "per_call_replay_ms": replay_ms / 20,
    }


def _pytest(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 5):
        raise SystemExit(f"pytest {' '.join(args)} failed:\n{done.stdout[-3000:]}")
    return elapsed


def _bench_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTEST_ADDOPTS"] = "-p no:hypothesispytest -p no:randomly"
    return env


def bench_pytest(sizes: list[int], runs: int) -> list[dict[str, Any]]:
    project = Path(tempfile.mkdtemp(prefix="nodeval-bench-"))
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = scenarios\nnodeval_history =\n")
    template = make_case(project / "template" / "bench-0000")
    env = _bench_env()
    rows = []
    for n in sizes:
        scenarios = project / "scenarios"
        shutil.rmtree(scenarios, ignore_errors=True)
        for i in range(n):
            target = scenarios / f"bench-{i:04d}"
            shutil.copytree(template, target)
            (target / "case.yaml").write_text(
                yaml.safe_dump({"id": target.name, "tags": ["bench"]})
            )
        (project / "one").mkdir(exist_ok=True)
        shutil.rmtree(project / "one" / "scenarios", ignore_errors=True)
        shutil.copytree(scenarios / "bench-0000", project / "one" / "scenarios" / "bench-0000")
        (project / "one" / "pytest.ini").write_text((project / "pytest.ini").read_text())
        for workers in ("0", "2"):
            one = statistics.median(
                _pytest(["-n", workers], project / "one", env) for _ in range(runs)
            )
            total = statistics.median(_pytest(["-n", workers], project, env) for _ in range(runs))
            rows.append(
                {
                    "scenarios": n,
                    "workers": workers,
                    "wall_s": round(total, 2),
                    "one_scenario_s": round(one, 2),
                    "per_scenario_ms": round((total - one) / max(n - 1, 1) * 1000, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _case_tree(project: Path, template: Path, n: int) -> None:
    """n copies of the recorded case under project/scenarios, hard-linked (10,000 cost no disk)."""
    (project / "scenarios").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = scenarios\nnodeval_history =\n")
    for i in range(n):
        target = project / "scenarios" / f"bench-{i:05d}"
        shutil.copytree(template, target, copy_function=os.link)
        (target / "case.yaml").unlink()
        (target / "case.yaml").write_text(yaml.safe_dump({"id": target.name, "tags": ["bench"]}))


# pytest's own cost for the same tree shape: per case a directory, a file and one item,
# with nothing read, no fixtures and no parametrization (run with -p no:nodeval).
_FLOOR_CONFTEST = """
import pytest

class _Item(pytest.Item):
    def runtest(self):
        pass

class _File(pytest.File):
    def collect(self):
        return [_Item.from_parent(self, name=f"test_scenario[{self.path.parent.name}]")]

class _Dir(pytest.Directory):
    def collect(self):
        return [_File.from_parent(self, path=self.path / "case.yaml")]

def pytest_collect_directory(path, parent):
    if (path / "case.yaml").is_file():
        return _Dir.from_parent(parent, path=path)
"""


def _floor_tree(project: Path, n: int) -> None:
    (project / "scenarios").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = scenarios\n")
    (project / "conftest.py").write_text(_FLOOR_CONFTEST)
    for i in range(n):
        (project / "scenarios" / f"bench-{i:05d}").mkdir()
        (project / "scenarios" / f"bench-{i:05d}" / "case.yaml").write_text(f"id: bench-{i:05d}\n")


def _collect_only(cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one `pytest --collect-only` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _pytest(["--collect-only"], cwd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _tree_at(revision: str, into: Path) -> Path:
    """The package as it was at a git revision, for PYTHONPATH (it shadows the editable install)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "pytest_nodeval"],
        check=True,
        stdout=subprocess.PIPE,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def bench_collect(sizes: list[int], runs: int, against: str | None) -> list[dict[str, Any]]:
    """Per-case cost of `pytest --collect-only` over N generated cases: this tree, the package
    at `against`, and pytest's floor for the same tree shape.

    per case = (T(N) - T(1)) / (N - 1), from medians of `runs`; the variants alternate run
    by run. Also what the plugin adds to collecting 1,000 plain parametrized tests (no cases).
    """
    work = Path(tempfile.mkdtemp(prefix="nodeval-collect-"))
    template = make_case(work / "template" / "bench-0000")
    env = _bench_env()
    variants: dict[str, tuple[str, dict[str, str]]] = {"this tree": ("cases", env)}
    if against:
        variants[against] = (
            "cases",
            {**env, "PYTHONPATH": str(_tree_at(against, work / "against"))},
        )
    variants["pytest floor"] = (
        "floor",
        {**env, "PYTEST_ADDOPTS": env["PYTEST_ADDOPTS"] + " -p no:nodeval"},
    )
    for n in [1, *sizes]:
        _case_tree(work / f"cases{n}", template, n)
        _floor_tree(work / f"floor{n}", n)
    rows = []
    for n in sizes:
        times: dict[str, dict[int, list[tuple[float, float]]]] = {
            v: {1: [], n: []} for v in variants
        }
        for _ in range(runs):
            for name, (tree, variant_env) in variants.items():
                for size in (1, n):
                    times[name][size].append(_collect_only(work / f"{tree}{size}", variant_env))
        for name in variants:
            row: dict[str, Any] = {"cases": n, "code": name}
            for i, kind in enumerate(("wall", "cpu")):
                one = statistics.median(t[i] for t in times[name][1])
                total = statistics.median(t[i] for t in times[name][n])
                row |= {
                    f"{kind}_s": round(total, 3),
                    f"{kind}_one_case_s": round(one, 3),
                    f"{kind}_per_case_ms": round((total - one) / (n - 1) * 1000, 3),
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
    plain = work / "plain"
    plain.mkdir()
    (plain / "test_plain.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(1000))\ndef test_x(i):\n    pass\n"
    )
    without = statistics.median(
        _pytest(["--collect-only", "-p", "no:nodeval"], plain, env) for _ in range(runs)
    )
    with_plugin = statistics.median(_pytest(["--collect-only"], plain, env) for _ in range(runs))
    rows.append(
        {
            "plain_tests": 1000,
            "without_plugin_s": round(without, 3),
            "with_plugin_s": round(with_plugin, 3),
            "added_ms": round((with_plugin - without) * 1000, 1),
        }
    )
    print(json.dumps(rows[-1]), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("sdk", "pytest", "collect"))
    parser.add_argument("--n", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--against",
        default=None,
        metavar="REV",
        help="collect: also time the package as of this git revision, run by run beside this tree",
    )
    args = parser.parse_args()
    if args.what == "sdk":
        print(json.dumps(bench_sdk(args.runs * 4), indent=2))
    elif args.what == "pytest":
        bench_pytest(args.n, max(1, args.runs // 2))
    else:
        bench_collect(args.n, args.runs, args.against)


if __name__ == "__main__":
    main()
