"""report.html in a real headless Chromium: loads clean, sorts, filters, opens an attempt,
keeps hostile run data inert, and shows a failing gate's regressions in the first screen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.report.html import write_html

from ..conftest import write_case
from .conftest import VIEWPORT, ReportPage
from .pagetools import parse, pp
from .synthetic import HOSTILE, OUTPUT_SEQ, SyntheticRun, build_run


def _write(run: SyntheticRun) -> Path:
    return write_html(run.report, run.run_dir, rootdir=run.rootdir, history=run.history)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> SyntheticRun:
    return build_run(tmp_path_factory.mktemp("browser-small"), cases=12, repeats=5, regressed=3)


@pytest.fixture(scope="module")
def small_html(small_run: SyntheticRun) -> Path:
    return _write(small_run)


def test_a_real_run_loads_clean(nodeval_project: pytest.Pytester, report_page: ReportPage) -> None:
    root = nodeval_project.path / "scenarios"
    write_case(
        root,
        "hello",
        script=[{"text": "Hello there."}],
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
    )
    write_case(
        root,
        "shell",
        inputs=["How big?"],
        assertions=[{"kind": "output_contains", "text": "GB"}],
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": "echo 12M"}}]},
            {"text": "It is 12M."},
        ],
    )
    nodeval_project.runpytest("--repeat", "2").assert_outcomes(passed=2, failed=2)
    report_page.open(nodeval_project.path / "reports" / "latest" / "report.html")
    report_page.screenshot("real-run")
    assert report_page.case_ids() == ["shell", "hello"]  # problems first
    assert (
        report_page.page.locator("#verdict")
        .inner_text()
        .startswith("Failed: 1 of 2 scenario(s) failed")
    )
    report_page.assert_clean()


def test_a_skipped_judge_is_said_beside_the_verdict(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "judged",
        script=[{"text": "Hello there."}],
        inputs=["hi"],
        assertions=[{"kind": "judge", "rubric": ["Greets the user"]}],
    )
    nodeval_project.runpytest().assert_outcomes(passed=1)  # deterministic: the rubric is not graded
    report_page.open(nodeval_project.path / "reports" / "latest" / "report.html")
    row = report_page.page.locator('#scenario-rows tr.case-row[data-case-id="judged"]')
    assert "judge skipped" in row.inner_text()
    report_page.assert_clean()


def test_clicking_a_header_sorts(
    small_html: Path, small_run: SyntheticRun, report_page: ReportPage
) -> None:
    report_page.open(small_html)
    p95 = {c.id: c.stats.latency_p95_ms or 0.0 for c in small_run.report.cases}
    header = report_page.page.locator('th[data-sort="p95"]')
    header.click()
    assert report_page.case_ids() == sorted(p95, key=lambda c: (-p95[c], c))
    assert header.get_attribute("aria-sort") == "descending"
    header.click()
    assert report_page.case_ids() == sorted(p95, key=lambda c: (p95[c], c))
    report_page.page.locator('th[data-sort="id"]').click()
    assert report_page.case_ids() == sorted(p95)
    # Headers sort from the keyboard too
    report_page.page.locator('th[data-sort="id"]').press("Enter")
    assert report_page.case_ids() == sorted(p95, reverse=True)
    report_page.assert_clean()


def test_filters_by_tag_status_and_regression(
    small_html: Path, small_run: SyntheticRun, report_page: ReportPage
) -> None:
    report_page.open(small_html)
    page, cases = report_page.page, small_run.report.cases
    page.select_option("#f-tag", "tools")
    assert sorted(report_page.case_ids()) == [c.id for c in cases if "tools" in c.tags]
    assert page.locator("#f-count").inner_text() == f"showing {len(report_page.case_ids())} of 12"
    page.select_option("#f-tag", "")
    page.select_option("#f-status", "passed")
    assert sorted(report_page.case_ids()) == [c.id for c in cases if c.verdict == "passed"]
    page.select_option("#f-status", "")
    page.select_option("#f-change", "regressed")
    assert sorted(report_page.case_ids()) == ["case-0000", "case-0001", "case-0002"]
    page.select_option("#f-change", "")
    page.fill("#f-text", "number 11")
    assert report_page.case_ids() == ["case-0011"]
    report_page.screenshot("filtered")
    report_page.assert_clean()


def test_an_attempt_opens_as_a_timeline_with_its_failures_beside_the_events(
    small_html: Path, small_run: SyntheticRun, report_page: ReportPage
) -> None:
    case = next(c for c in small_run.report.cases if c.verdict == "failed")
    attempt = next(a for a in case.attempts if a.outcome == "failed")
    report_page.open(small_html)
    page = report_page.page
    page.locator("tr.case-row", has_text=case.id).click()
    page.locator(f'button.open-attempt[data-repeat="{attempt.repeat}"]').click()
    shown(page, "timeline")
    assert page.locator("#attempt-view").is_visible() and not page.locator("main").is_visible()
    assert (
        page.locator("#attempt-title")
        .inner_text()
        .startswith(f"{case.id} · attempt {attempt.repeat}")
    )
    assert page.locator("#attempt-body .ev").count() == 17
    beside = page.locator(f'.ev[data-seq="{OUTPUT_SEQ}"] .note.failed')
    assert beside.is_visible() and "output_contains" in beside.inner_text()
    assert page.locator(".ev", has_text="tool call: shell").first.is_visible()
    report_page.screenshot("attempt-timeline", full_page=True)

    page.locator("#tab-diff").click()
    shown(page, "diff")
    assert "of 17 events match the golden journal" in page.locator("#attempt-body").inner_text()
    assert page.locator("table.diff tr.changed").count() >= 1
    report_page.screenshot("attempt-diff", full_page=True)

    page.locator("#attempt-close").click()
    assert page.locator("main").is_visible() and not page.locator("#attempt-view").is_visible()
    report_page.assert_clean()


def test_the_full_request_of_a_later_call_is_rebuilt_from_the_compact_timeline(
    tmp_path: Path, report_page: ReportPage
) -> None:
    run = build_run(tmp_path, cases=2, repeats=2, real_size=True, fail_rate=0.0, regressed=0)
    case, attempt = run.report.cases[1], run.report.cases[1].attempts[1]
    journal = [
        json.loads(line)
        for line in (run.run_dir / str(attempt.journal) / "events.jsonl").read_text().splitlines()
    ]
    requests = [e for e in journal if e["type"] == "llm.request"]
    report_page.open(_write(run))
    page = report_page.page
    page.locator("tr.case-row", has_text=case.id).click()
    page.locator(f'button.open-attempt[data-repeat="{attempt.repeat}"]').click()
    shown(page, "timeline")
    last = page.locator(f'.ev[data-seq="{requests[-1]["seq"]}"]')
    assert "messages 39 (+2)" in " ".join(last.inner_text().split())  # the card shows what changed
    last.locator("button.show-request").click()
    rebuilt = json.loads(last.locator("pre.full-request").inner_text())
    assert rebuilt == requests[-1]["payload"]["body"]
    assert len(json.dumps(rebuilt)) > 30_000
    report_page.screenshot("full-request")
    report_page.assert_clean()


def test_a_timeline_compressed_against_the_pages_dictionary_opens_with_its_text(
    tmp_path: Path, report_page: ReportPage
) -> None:
    """The third case's block is deflate that refers back into the dictionary (the start of
    the first case's block); its long answers are shared strings. Both come back as text,
    and a string that merely looks like a shared-string reference shows as itself."""
    run = build_run(
        tmp_path, cases=3, repeats=1, real_size=True, fail_rate=0.0, regressed=0, gate=False
    )
    case, attempt = run.report.cases[2], run.report.cases[2].attempts[0]
    path = run.run_dir / str(attempt.journal) / "events.jsonl"
    journal = [json.loads(line) for line in path.read_text().splitlines()]
    question = next(e for e in journal if e["type"] == "io.input")
    question["payload"]["text"] = "\u00010 is not a reference"
    path.write_text("".join(json.dumps(e) + "\n" for e in journal))
    answer = [e for e in journal if e["type"] == "io.output"][-1]
    html = _write(run)
    assert answer["payload"]["text"] not in html.read_text()
    report_page.open(html)
    page = report_page.page
    page.locator("tr.case-row", has_text=case.id).click()
    page.locator("button.open-attempt").click()
    shown(page, "timeline")
    card = page.locator(f'.ev[data-seq="{answer["seq"]}"]')
    card.locator("button", has_text="show all").click()
    assert answer["payload"]["text"] in " ".join(card.inner_text().split())
    assert "\u00010 is not a reference" in str(
        page.locator(f'.ev[data-seq="{question["seq"]}"]').text_content()
    )
    report_page.assert_clean()


def test_hostile_run_data_stays_inert_text(tmp_path: Path, report_page: ReportPage) -> None:
    run = build_run(tmp_path, cases=len(HOSTILE) + 2, repeats=2, hostile=True)
    report_page.open(_write(run))
    page = report_page.page
    assert set(HOSTILE) <= set(page.locator("#scenario-rows .case-name").all_inner_texts())
    for row in page.locator("tr.case-row").all():
        row.click()  # open every scenario's attempts
    for index in range(page.locator("button.open-attempt").count()):
        page.locator("button.open-attempt").nth(index).click()
        shown(page, "timeline")
        _click_all(page.locator("#attempt-body button", has_text="show all"))
        _click_all(page.locator("#attempt-body button.show-request"))
        page.locator("#tab-diff").click()
        shown(page, "diff")
        _click_all(page.locator("#attempt-body button", has_text="identical events"))
        page.locator("#attempt-close").click()
    report_page.screenshot("hostile", full_page=True)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    isolated = page.evaluate("Array.from(document.querySelectorAll('bdi')).map(b => b.textContent)")
    assert isolated and all("\u202e" in text for text in isolated), (
        "a bidi override stays inside its value"
    )
    assert (
        page.evaluate(
            "document.querySelectorAll('img, iframe, base, a, meta[http-equiv=refresh]').length"
        )
        == 0
    )
    assert page.evaluate("document.querySelectorAll('script').length") == len(
        parse(_write(run).read_text()).scripts()
    )
    report_page.assert_clean()


def shown(page: Any, tab: str) -> None:
    """Wait until the open attempt's tab is on screen (its timelines inflate asynchronously)."""
    page.wait_for_selector(f'#attempt-body[data-shown="{tab}"]', state="attached")


def _click_all(buttons: Any) -> None:
    """Click every matching button; each removes itself once clicked."""
    while buttons.count():
        buttons.first.click()


def test_injected_markup_would_have_run_without_the_escaping(
    tmp_path: Path, report_page: ReportPage
) -> None:
    """The check above can fail: the same strings written as markup do set window.__pwned."""
    page = tmp_path / "control.html"
    page.write_text(
        "<!doctype html><title>control</title>"
        + HOSTILE[1]
        + '<script>document.documentElement.setAttribute("data-ready", "1")</script>'
    )
    report_page.open(page)
    report_page.page.wait_for_function("window.__pwned === 1")


def test_a_failing_gate_shows_what_regressed_in_the_first_screen(
    small_html: Path, small_run: SyntheticRun, report_page: ReportPage
) -> None:
    report_page.open(small_html)
    page = report_page.page
    assert page.locator("#verdict").inner_text() == "Gate failed: scenario_regression"
    rows = page.locator("#regressions tr.regression-row")
    assert rows.count() == 3
    changes = {c["case_id"]: c for c in small_run.report.gate["cases"]}  # type: ignore[index]
    for row in rows.all():
        box = row.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"]
        case_id = row.get_attribute("data-case-id")
        assert case_id in row.inner_text() and pp(changes[case_id]["delta"]) in row.inner_text()
    report_page.screenshot("failing-gate-first-screen")
    rows.first.locator("button.jump").click()
    assert page.locator("tr.case-row.open").count() == 1
    report_page.assert_clean()


@pytest.fixture(scope="module")
def large_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(
        build_run(tmp_path_factory.mktemp("browser-large"), cases=1000, repeats=5, regressed=25)
    )


def test_a_thousand_scenarios_by_five_repeats_load_and_stay_usable(
    large_html: Path, report_page: ReportPage
) -> None:
    """Loads and answers; how fast is measured in benchmarks/html_report.py, not asserted here."""
    report_page.open(large_html, timeout_ms=120_000)
    print(
        f"1,000 x 5: {large_html.stat().st_size / 1e6:.1f} MB, "
        f"loaded in {report_page.load_seconds:.2f} s"
    )
    page = report_page.page
    assert page.locator("#f-count").inner_text() == "showing 1000 of 1000"
    assert page.locator("tr.case-row").count() == 150  # the rest come as the table scrolls
    page.locator(".table-scroll").evaluate("box => { box.scrollTop = box.scrollHeight; }")
    # (the page's CSP forbids wait_for_function)
    page.locator("tr.case-row").nth(299).wait_for(state="attached")
    page.locator('th[data-sort="tokens"]').click()
    page.select_option("#f-status", "failed")
    page.locator("tr.case-row").first.click()
    page.locator("button.open-attempt").first.click()
    shown(page, "timeline")
    assert page.locator("#attempt-body .ev").count() == 17
    report_page.screenshot("large-run-attempt")
    report_page.assert_clean()
