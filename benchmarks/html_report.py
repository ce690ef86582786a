"""report.html at 1,000 scenarios x 5 repeats: build time, file size, peak memory, page load in
Chromium.

    python benchmarks/html_report.py [--cases 1000] [--repeats 5] [--runs 5] [--memory 100 1000]
    python benchmarks/html_report.py --small        # the tests' 17-event journals instead

Builds a synthetic run with the tests' generator (`tests/html/synthetic.py`; journals on
disk, a failing gate, an 8-run history). By default each attempt is real-size: the
session of benchmarks/replay_bench.py (10 user turns, 20 Anthropic-shaped LLM calls whose
requests grow to ~37 KB, 10 tool calls; ~470 KB of journal), with prose-like text
(`--text bench` uses replay_bench's repeated sentence instead, which compresses far
better). It then reports medians over --runs of the build (`write_html` in this process,
after one cold build), the file size, and loading the page in the distribution's headless
Chromium (until `html[data-ready]`), plus opening one attempt's timeline.

--memory N ... builds N x repeats in a fresh process per N and reports the peak of Python
allocations during `write_html` (tracemalloc) and the process's peak RSS.
--code DIR imports pytest_nodeval from DIR (e.g. an export of an older commit) to compare.
--keep FILE copies the page built to FILE; --open PAGE ... then measures only opening pages
in Chromium, the pages taking turns in one browser (so pages built by different code are
compared under the same load).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _code_path(argv: list[str]) -> None:
    """--code must take effect before anything imports pytest_nodeval."""
    sys.path.insert(0, str(ROOT))
    if "--code" in argv:
        sys.path.insert(0, argv[argv.index("--code") + 1])


_code_path(sys.argv)

from tests.html.conftest import CHROMIUM, CHROMIUM_ARGS, VIEWPORT  # noqa: E402
from tests.html.synthetic import build_run  # noqa: E402


def timed(action: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds of one call (CPU time shows the work when the machine is busy)."""
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure_render(
    run: Any, runs: int
) -> tuple[tuple[float, float], list[tuple[float, float]], Path]:
    from pytest_nodeval.report.html import write_html

    def render() -> None:
        write_html(run.report, run.run_dir, rootdir=run.rootdir, history=run.history)

    cold = timed(render)
    return cold, [timed(render) for _ in range(runs)], run.run_dir / "report.html"


def summary(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.2f} s "
        f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
    )


def measure_browser(pages: list[Path], runs: int) -> dict[Path, dict[str, list[float]]]:
    """Per page: navigation to `html[data-ready]`, the page's own ready mark, opening one attempt.
    The pages take turns, run by run, in one browser."""
    from playwright.sync_api import sync_playwright

    found: dict[Path, dict[str, list[float]]] = {
        html: {"load": [], "ready_mark": [], "attempt": []} for html in pages
    }
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        for _ in range(runs):
            for html in pages:
                _open_once(browser, html, found[html])
        browser.close()
    return found


def _open_once(browser: Any, html: Path, found: dict[str, list[float]]) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    start = time.perf_counter()
    page.goto(html.as_uri(), timeout=120_000)
    page.wait_for_selector("html[data-ready]", state="attached", timeout=120_000)
    found["load"].append(time.perf_counter() - start)
    found["ready_mark"].append(
        page.evaluate("performance.getEntriesByName('nodeval:ready')[0].startTime") / 1000
    )
    page.locator("tr.case-row").first.click()
    start = time.perf_counter()
    page.locator("button.open-attempt").first.click()
    page.locator("#attempt-body .ev").first.wait_for()
    found["attempt"].append(time.perf_counter() - start)
    page.close()


def build(scratch: Path, args: argparse.Namespace, cases: int) -> Any:
    return build_run(
        scratch,
        cases=cases,
        repeats=args.repeats,
        regressed=25,
        real_size=not args.small,
        **({"text": args.text} if not args.small else {}),
    )


def memory_child(args: argparse.Namespace) -> None:
    """In a fresh process: build one run, then measure only `write_html`."""
    import gc
    import resource
    import tracemalloc

    from pytest_nodeval.report.html import write_html

    with tempfile.TemporaryDirectory(prefix="nodeval-html-mem-") as scratch:
        run = build(Path(scratch), args, args.cases)
        gc.collect()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        write_html(run.report, run.run_dir, rootdir=run.rootdir, history=run.history)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        size = (run.run_dir / "report.html").stat().st_size
    print(
        json.dumps(
            {
                "cases": args.cases,
                "attempts": args.cases * args.repeats,
                "traced_peak_mb": round(peak / 1e6, 1),
                "maxrss_before_mb": round(before / 1e3, 1),
                "maxrss_after_mb": round(after / 1e3, 1),
                "page_mb": round(size / 1e6, 1),
            }
        )
    )


def measure_memory(args: argparse.Namespace) -> None:
    for cases in args.memory:
        command = (
            [
                sys.executable,
                __file__,
                "--memory-child",
                "--cases",
                str(cases),
                "--repeats",
                str(args.repeats),
                "--text",
                args.text,
            ]
            + (["--small"] if args.small else [])
            + (["--code", args.code] if args.code else [])
        )
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
        print("memory:", done.stdout.strip(), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--runs",
        type=int,
        default=5,
        help="Timed repetitions of each measurement (median reported).",
    )
    parser.add_argument(
        "--small",
        action="store_true",
        help="The tests' 17-event journals instead of real-size ones.",
    )
    parser.add_argument(
        "--text",
        choices=("prose", "bench"),
        default="prose",
        help="Real-size text: a made-up vocabulary (compresses like prose) "
        "or replay_bench's sentence.",
    )
    parser.add_argument(
        "--memory",
        type=int,
        nargs="*",
        default=[],
        help="Scenario counts to measure peak memory for.",
    )
    parser.add_argument("--no-browser", action="store_true", help="Skip the Chromium measurements.")
    parser.add_argument("--no-timing", action="store_true", help="Only the --memory measurements.")
    parser.add_argument("--code", help="Import pytest_nodeval from this directory.")
    parser.add_argument("--keep", type=Path, help="Copy the page built to this file.")
    parser.add_argument(
        "--open",
        type=Path,
        nargs="+",
        default=[],
        help="Only measure opening these pages, taking turns.",
    )
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args)
        return 0
    if args.open:
        for html, measured in measure_browser(args.open, args.runs).items():
            print(f"{html} ({html.stat().st_size:,} bytes)")
            for name, times in measured.items():
                print(f"  chromium {name}: {summary(times)}")
        print(f"machine: {os.cpu_count()} CPU, load average {os.getloadavg()[0]:.1f}")
        return 0
    if args.memory:
        measure_memory(args)
    if not args.no_timing:
        with tempfile.TemporaryDirectory(prefix="nodeval-html-bench-") as scratch:
            start = time.perf_counter()
            run = build(Path(scratch), args, args.cases)
            journals = sum(p.stat().st_size for p in Path(scratch).rglob("events.jsonl"))
            built = time.perf_counter() - start
            failed = sum(1 for c in run.report.cases for a in c.attempts if a.outcome == "failed")
            print(
                f"synthetic run: {args.cases} x {args.repeats} built in {built:.1f} s "
                f"({failed} failed attempts, {journals / 1e9:.2f} GB of journals)",
                flush=True,
            )
            cold, warm, html = measure_render(run, args.runs)
            size = html.stat().st_size
            print(
                "build, first in this process (imports jinja2, compiles the template): "
                f"{cold[0]:.2f} s wall, {cold[1]:.2f} s CPU"
            )
            print(f"build, wall: {summary([w for w, _ in warm])}")
            print(f"build, CPU:  {summary([c for _, c in warm])}")
            print(f"report.html: {size:,} bytes ({size / 1e6:.1f} MB)", flush=True)
            if args.keep:
                shutil.copyfile(html, args.keep)
            if not args.no_browser:
                for name, values in measure_browser([html], args.runs)[html].items():
                    print(f"chromium {name}: {summary(values)}")
    print(
        f"machine: {os.cpu_count()} CPU, load average {os.getloadavg()[0]:.1f}, "
        f"Python {platform.python_version()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
