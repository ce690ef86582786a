"""A dataset case's rows in report.html: under one folded row of their case, worst first."""

from __future__ import annotations

import json

import pytest

from pytest_nodeval.cli import main

from ..plugin.test_datasets import ROWS, _dataset_case
from .conftest import ReportPage


def test_rows_sit_folded_under_their_case_and_unfold_worst_first(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    root = nodeval_project.path / "scenarios"
    case_dir = _dataset_case(root, ROWS[:3])
    assert main(["record", str(case_dir)]) == 0
    rows = [dict(r, answer="nope") if r["id"] == "sky" else r for r in ROWS[:3]]
    (case_dir / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    nodeval_project.runpytest().assert_outcomes(passed=2, failed=1)
    page = report_page.open(nodeval_project.path / "reports" / "latest" / "report.html").page
    group = page.locator("#scenario-rows tr.dataset-row")
    assert group.count() == 1
    assert "qa dataset, 3 row(s): 1 failed, 2 passed" in group.inner_text()
    assert group.get_attribute("aria-expanded") == "false"
    assert report_page.case_ids() == []  # folded
    group.click()
    assert report_page.case_ids() == ["qa/sky", "qa/capital", "qa/sum"]  # the failed row first
    assert page.locator("#scenario-rows tr.dataset-row").get_attribute("aria-expanded") == "true"
    report_page.assert_clean()
