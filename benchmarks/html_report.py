"""report.html at 1,000 scenarios x 5 repeats: render time, file size, page load in Chromium.

    python benchmarks/html_report.py [--cases 1000] [--repeats 5] [--runs 5]

Builds a synthetic run (journals on disk, a failing gate, an 8-run history) with the
tests' generator, then reports medians over --runs: the render in this process (the
first, cold render also pays for importing jinja2 and compiling the template), the file
size, and loading the page in the distribution's headless Chromium (until the page's
script has built the first screen), plus opening one attempt's timeline.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.html.conftest import CHROMIUM, CHROMIUM_ARGS, VIEWPORT  # noqa: E402
from tests.html.synthetic import build_run  # noqa: E402


def timed(action: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds of one call (CPU time shows the work when the machine is busy)."""
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure_render(run: Any, runs: int) -> tuple[tuple[float, float], list[tuple[float, float]], Path]:
    from pytest_nodeval.report.html import write_html

    def render() -> None:
        write_html(run.report, run.run_dir, rootdir=run.rootdir, history=run.history)

    cold = timed(render)
    return cold, [timed(render) for _ in range(runs)], run.run_dir / "report.html"


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"


def measure_browser(html: Path, runs: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    found: dict[str, list[float]] = {"load": [], "ready_mark": [], "attempt": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        for _ in range(runs):
            page = browser.new_page(viewport=VIEWPORT)
            start = time.perf_counter()
            page.goto(html.as_uri(), timeout=120_000)
            page.wait_for_selector("html[data-ready]", state="attached", timeout=120_000)
            found["load"].append(time.perf_counter() - start)
            found["ready_mark"].append(page.evaluate("performance.getEntriesByName('nodeval:ready')[0].startTime") / 1000)
            page.locator("tr.case-row").first.click()
            start = time.perf_counter()
            page.locator("button.open-attempt").first.click()
            page.locator("#attempt-body .ev").first.wait_for()
            found["attempt"].append(time.perf_counter() - start)
            page.close()
        browser.close()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5, help="Timed repetitions of each measurement (median reported).")
    parser.add_argument("--no-browser", action="store_true", help="Skip the Chromium measurements.")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="nodeval-html-bench-") as scratch:
        build = time.perf_counter()
        run = build_run(Path(scratch), cases=args.cases, repeats=args.repeats, regressed=25)
        print(f"synthetic run: {args.cases} x {args.repeats} built in {time.perf_counter() - build:.1f} s "
              f"({sum(1 for c in run.report.cases for a in c.attempts if a.outcome == 'failed')} failed attempts)")
        cold, warm, html = measure_render(run, args.runs)
        size = html.stat().st_size
        print(f"render, first in this process (imports jinja2, compiles the template): {cold[0]:.2f} s wall, "
              f"{cold[1]:.2f} s CPU")
        print(f"render, wall: {summary([w for w, _ in warm])}")
        print(f"render, CPU:  {summary([c for _, c in warm])}")
        print(f"report.html: {size:,} bytes ({size / 1e6:.1f} MB)")
        if not args.no_browser:
            for name, values in measure_browser(html, args.runs).items():
                print(f"chromium {name}: {summary(values)}")
    print(f"machine: {os.cpu_count()} CPU, load average {os.getloadavg()[0]:.1f}, Python {platform.python_version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
