"""A real headless Chromium (the distribution's package) driven by Playwright, for the report.

Playwright never downloads a browser here: it launches /usr/bin/chromium. Without it the
browser tests skip, except in CI (the CI variable set), where a missing browser fails.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}


def require_chromium() -> None:
    if CHROMIUM.is_file():
        return
    reason = (
        f"{CHROMIUM} is missing: install the distribution's chromium package "
        "to run the browser tests"
    )
    if os.environ.get("CI"):
        pytest.fail(reason + " (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class ReportPage:
    """One report open in a fresh browser context, with everything it logged and fetched."""

    page: Any
    artifacts: Path
    node: pytest.Item
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    url: str = ""
    load_seconds: float = 0.0

    def open(self, html: Path, timeout_ms: float = 30_000) -> ReportPage:
        self.url = html.resolve().as_uri()
        start = time.perf_counter()
        self.page.goto(self.url, timeout=timeout_ms)
        self.page.wait_for_selector("html[data-ready]", state="attached", timeout=timeout_ms)
        self.load_seconds = time.perf_counter() - start
        return self

    def screenshot(self, name: str, *, full_page: bool = False) -> Path:
        path = self.artifacts / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        self.node.user_properties.append(("artifact", str(path)))
        print(f"screenshot: {path}")
        return path

    def assert_clean(self) -> None:
        """No console error (a CSP violation is one), no uncaught exception, no request but
        the page."""
        assert self.console_errors == []
        assert self.requests == [self.url]

    def refuse_dialog(self, dialog: Any) -> None:
        """An alert() or confirm() could only come from injected script: record and dismiss it."""
        self.console_errors.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def case_ids(self) -> list[str]:
        return list(self.page.locator("#scenario-rows tr.case-row .case-id").all_inner_texts())


@pytest.fixture
def report_page(
    chromium: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ReportPage]:
    context = chromium.new_context(viewport=VIEWPORT)
    # Anything but the file itself is refused (and still recorded, so the test fails).
    context.route(
        "**/*",
        lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort(),
    )
    page = context.new_page()
    report = ReportPage(page, tmp_path, request.node)
    page.on(
        "console",
        lambda message: (
            report.console_errors.append(message.text) if message.type == "error" else None
        ),
    )
    page.on("pageerror", lambda error: report.console_errors.append(f"uncaught: {error}"))
    page.on("request", lambda req: report.requests.append(req.url))
    page.on("dialog", report.refuse_dialog)
    yield report
    context.close()
