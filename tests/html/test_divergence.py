"""A replay that diverged reads whole wherever the run is reported: report.json keeps the
message and the seq, summary.txt prints it under the case, and report.html (in a real
headless Chromium) shows it in the case's "why", the attempt's header and beside the event
where it diverged; the golden-journal tab names the field that changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..conftest import write_case
from .conftest import ReportPage
from .test_browser import shown

RECORDED = "Be kind."
HOSTILE_PROMPT = 'Be rude <img src=x onerror="window.__pwned=1"> now.'
LLM_SEQ = 7
"""The seq of the first llm.request in a mock case's journal (what diverges here)."""


def _diverged_run(project: pytest.Pytester, prompt: str = HOSTILE_PROMPT) -> Path:
    """A case recorded with one system prompt and replayed with another: the run directory."""
    root = project.path / "scenarios"
    case: dict[str, Any] = {
        "script": [{"text": "Hello there."}],
        "inputs": ["hi"],
        "assertions": [{"kind": "output_contains", "text": "hello"}],
    }
    write_case(root, "greet", system_prompt=RECORDED, **case)
    write_case(root, "greet", system_prompt=prompt, record=False, **case)
    project.runpytest().assert_outcomes(failed=1)
    return (project.path / "reports" / "latest").resolve()


def _attempt(run_dir: Path) -> dict[str, Any]:
    report = json.loads((run_dir / "report.json").read_text())
    attempt: dict[str, Any] = report["cases"][0]["attempts"][0]
    return attempt


def test_report_json_keeps_the_whole_divergence_and_its_seq(
    nodeval_project: pytest.Pytester,
) -> None:
    attempt = _attempt(_diverged_run(nodeval_project))
    message = attempt["divergence"]
    assert message.startswith("replay of 'scenarios/greet' diverged from its journal")
    assert f"at system: recorded {RECORDED!r}, now {HOSTILE_PROMPT!r}" in message
    assert f'\n  - "system": "{RECORDED}",\n' in message
    assert "If the change is intended, re-record the journal: nodeval record" in message
    assert attempt["divergence_seq"] == LLM_SEQ
    # reason stays one line of at most 300 characters, cut at a word when the path is long
    whole = "the session ended with status 'divergence': " + message.splitlines()[0]
    reason = attempt["reason"]
    assert len(reason) <= 300
    assert reason == whole or (
        reason.endswith("…") and whole.startswith(reason[:-1]) and whole[len(reason) - 1] == " "
    )


def test_summary_txt_prints_the_divergence_under_its_case(
    nodeval_project: pytest.Pytester,
) -> None:
    summary = (_diverged_run(nodeval_project) / "summary.txt").read_text().splitlines()
    row = next(i for i, line in enumerate(summary) if line.startswith("greet "))
    assert summary[row + 1] == "    r1 diverged:"
    assert summary[row + 2].startswith("      replay of 'scenarios/greet' diverged")
    assert f"        at system: recorded {RECORDED!r}, now {HOSTILE_PROMPT!r}" in summary
    assert f'        - "system": "{RECORDED}",' in summary
    assert any(line.startswith("      If the change is intended") for line in summary)


def test_report_html_shows_the_divergence_in_the_why_the_header_and_the_timeline(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    run_dir = _diverged_run(nodeval_project)
    report_page.open(run_dir / "report.html")
    page = report_page.page
    page.locator('tr.case-row[data-case-id="greet"]').click()
    why = page.locator("table.attempts td.reason details.divergence")
    assert why.locator("summary").inner_text().startswith("replay of 'scenarios/greet' diverged")
    assert not why.locator("pre").is_visible()  # folded: the first line is the row's why
    why.locator("summary").click()
    assert f"now {HOSTILE_PROMPT!r}" in why.locator("pre").inner_text()
    report_page.screenshot("divergence-why")

    page.locator("button.open-attempt").click()
    shown(page, "timeline")
    header = page.locator("#attempt-body .reason details.divergence")
    assert (
        header.locator("summary").inner_text().endswith("the request differs from the recording:")
    )
    marked = page.locator("#attempt-body .ev.diverged")
    assert marked.count() == 1 and marked.get_attribute("data-seq") == str(LLM_SEQ)
    beside = marked.locator(".notes .divergence-note")
    assert beside.is_visible()
    assert f"at system: recorded {RECORDED!r}, now {HOSTILE_PROMPT!r}" in beside.inner_text()
    assert "nodeval record" in beside.inner_text()
    page.locator("#attempt-body .reason button", has_text=f"diverged at seq {LLM_SEQ}").click()
    report_page.screenshot("divergence-timeline", full_page=True)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('#attempt-body img').length") == 0
    report_page.assert_clean()


def test_the_golden_tab_names_and_marks_the_field_that_changed(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    run_dir = _diverged_run(nodeval_project, prompt="Be rude.")
    report_page.open(run_dir / "report.html")
    page = report_page.page
    page.locator('tr.case-row[data-case-id="greet"]').click()
    page.locator("button.open-attempt").click()
    page.locator("#tab-diff").click()
    shown(page, "diff")
    row = page.locator("table.diff tr.changed", has_text="llm.request")
    recorded, observed = row.locator("td").nth(0), row.locator("td").nth(1)
    assert recorded.locator(".change").inner_text().split() == ["body.system", '"Be', 'kind."']
    assert observed.locator(".change").inner_text().split() == ["body.system", '"Be', 'rude."']
    for side in (recorded, observed):
        marked = side.locator(".field.changed-field .label").all_inner_texts()
        assert marked == ["system"]
    report_page.screenshot("golden-tab-changed-field", full_page=True)
    report_page.assert_clean()


def test_a_request_card_shows_each_row_once(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "shell",
        inputs=["How big?"],
        assertions=[],
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": "echo 12M"}}]},
            {"text": "It is 12M."},
        ],
    )
    nodeval_project.runpytest().assert_outcomes(passed=1)
    report_page.open(nodeval_project.path / "reports" / "latest" / "report.html")
    page = report_page.page
    page.locator('tr.case-row[data-case-id="shell"]').click()
    page.locator("button.open-attempt").click()
    shown(page, "timeline")
    cards = page.locator('#attempt-body .ev:has(.ev-type:text-is("llm.request")) .card')
    assert cards.count() == 2
    for card in cards.all():
        labels = card.locator(".field > .label").all_inner_texts()
        assert len(labels) == len(set(labels)), labels
    first = cards.first.locator(".field > .label").all_inner_texts()
    assert first.count("model") == 1 and "messages" in first and "messages[0]" in first
    report_page.assert_clean()


def test_a_skipped_judge_says_why_in_the_attempt_view(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "judged",
        script=[{"text": "Hello there."}],
        inputs=["hi"],
        assertions=[{"kind": "judge", "rubric": ["Greets the user"]}],
    )
    nodeval_project.runpytest().assert_outcomes(passed=1)  # deterministic: not graded
    run_dir = (nodeval_project.path / "reports" / "latest").resolve()
    reason = _attempt(run_dir)["assertions"][0]["message"]
    assert reason
    report_page.open(run_dir / "report.html")
    page = report_page.page
    page.locator('tr.case-row[data-case-id="judged"]').click()
    page.locator("button.open-attempt").click()
    shown(page, "timeline")
    item = page.locator("#attempt-body .assertion-list li.skip")
    assert item.is_visible() and reason in item.inner_text()
    report_page.assert_clean()


def test_a_row_that_opens_shows_a_disclosure_triangle(
    nodeval_project: pytest.Pytester, report_page: ReportPage
) -> None:
    _diverged_run(nodeval_project, prompt="Be rude.")
    report_page.open(nodeval_project.path / "reports" / "latest" / "report.html")
    page = report_page.page
    cell = page.locator('tr.case-row[data-case-id="greet"] > td').first
    marker = "el => getComputedStyle(el, '::before').content"
    assert cell.evaluate(marker) == '"▸"'
    cell.click()
    assert cell.evaluate(marker) == '"▾"'
    report_page.assert_clean()
