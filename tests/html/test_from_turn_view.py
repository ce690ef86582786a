"""An attempt run with --nodeval-from-turn (issue 30) says so in report.html (in a real headless
Chromium): the attempt's header names the turn it went live at, and the timeline shows the
`session.live_from` event where the replayed turns end."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import ReportPage
from .test_browser import shown

SEED = Path(__file__).parents[2] / "scenarios" / "multi-turn-refund"


def test_the_attempt_view_says_where_it_went_live(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    shutil.copytree(SEED, nodeval_project.path / "scenarios" / "multi-turn-refund")
    nodeval_project.runpytest(
        "--nodeval-mode", "live", "--nodeval-world", "local", "--nodeval-from-turn", "3"
    ).assert_outcomes(passed=1)
    report_page.open(nodeval_project.path / "reports" / "latest" / "report.html")
    page = report_page.page
    page.locator('tr.case-row[data-case-id="multi-turn-refund"]').click()
    page.locator("button.open-attempt").click()
    shown(page, "timeline")
    assert page.locator("#attempt-body .attempt-facts .live-from").inner_text() == (
        "live from user turn 3"
    )
    mark = page.locator("#attempt-body .ev", has_text="session.live_from")
    assert mark.count() == 1
    assert "live from user turn 3 (--nodeval-from-turn)" in mark.inner_text()
    report_page.screenshot("live-from-turn", full_page=True)
    report_page.assert_clean()
