"""A matrix run's variants in report.html: one row per variant, each against the first."""

from __future__ import annotations

import pytest

from ..plugin.test_matrix import _vars_case
from .conftest import ReportPage


def test_the_variants_table_shows_each_variant_against_the_first(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    _vars_case(nodeval_project.path / "scenarios")
    nodeval_project.runpytest(
        "--nodeval-mode=live", "--repeat", "5", "--nodeval-matrix=tone=polite,rude"
    ).assert_outcomes(passed=5, failed=5)
    page = report_page.open(nodeval_project.path / "reports" / "latest" / "report.html").page
    assert "compared with tone=polite" in page.locator("#variants-title").inner_text()
    rows = page.locator("#variants tr.variant-row")
    assert rows.count() == 2
    first, rude = (rows.nth(i).inner_text() for i in range(2))
    assert first.startswith("tone=polite") and "100.0%" in first
    assert rude.startswith("tone=rude") and "0.0%" in rude
    assert "FAIL" in rude and "worse on 1: tone" in rude
    cases = page.locator("#variants table.variant-cases")
    assert not cases.is_visible()  # folded under its summary line
    page.locator("#variants details summary").click()
    assert cases.locator("tbody tr").inner_text().split() == ["tone", "100%", "0%"]
    report_page.assert_clean()


def test_a_run_without_a_matrix_has_no_variants_section(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    _vars_case(nodeval_project.path / "scenarios")
    (nodeval_project.path / "scenarios" / "tone" / "input" / "config.yaml").write_text(
        (nodeval_project.path / "scenarios" / "tone" / "input" / "config.yaml")
        .read_text()
        .replace("{{ vars.tone }}", "polite")
    )
    nodeval_project.runpytest("--nodeval-mode=live").assert_outcomes(passed=1)
    page = report_page.open(nodeval_project.path / "reports" / "latest" / "report.html").page
    assert page.locator("#variants").count() == 0
    report_page.assert_clean()
