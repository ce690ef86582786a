"""render() on synthetic runs: structure, escaping, embedded JSON, hostile input, policies."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.report import html as html_module
from pytest_nodeval.report.html import render, write_html
from pytest_nodeval.report.models import RunReport

from .pagetools import Page, parse, pp, sha256_source, visible_text
from .synthetic import HOSTILE, ONE_MB, OUTPUT_SEQ, SyntheticRun, build_run

# What the template itself may produce; anything else would have come from data.
ALLOWED_TAGS = {
    "html",
    "head",
    "meta",
    "link",
    "title",
    "style",
    "body",
    "header",
    "div",
    "h1",
    "h2",
    "p",
    "b",
    "ul",
    "li",
    "main",
    "section",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "button",
    "span",
    "small",
    "dl",
    "dt",
    "dd",
    "label",
    "input",
    "select",
    "option",
    "noscript",
    "figure",
    "figcaption",
    "footer",
    "script",
}
URL_ATTRIBUTES = {
    "href",
    "src",
    "srcset",
    "action",
    "formaction",
    "poster",
    "data",
    "background",
    "xlink:href",
}


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> SyntheticRun:
    return build_run(
        tmp_path_factory.mktemp("hostile"), cases=len(HOSTILE) + 2, repeats=2, hostile=True
    )


@pytest.fixture(scope="module")
def hostile_page(hostile_run: SyntheticRun) -> Page:
    return parse(
        render(
            hostile_run.report,
            hostile_run.run_dir,
            rootdir=hostile_run.rootdir,
            history=hostile_run.history,
        )
    )


def test_the_page_is_made_only_of_the_templates_elements(hostile_page: Page) -> None:
    tags = {e.tag for e in hostile_page.elements}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    for element in hostile_page.elements:
        assert not [name for name in element.attrs if name.startswith("on")], element
        assert not [
            v for v in element.attrs.values() if v.strip().lower().startswith("javascript:")
        ], element


def test_nothing_on_the_page_points_anywhere(hostile_page: Page) -> None:
    urls = [
        (e.tag, name, value)
        for e in hostile_page.elements
        for name, value in e.attrs.items()
        if name in URL_ATTRIBUTES
    ]
    # The empty favicon, so the browser does not fetch one
    assert urls == [("link", "href", "data:,")]


def test_one_script_runs_and_the_policy_allows_only_it_and_the_style(hostile_page: Page) -> None:
    scripts = hostile_page.scripts()
    runnable = [s for s in scripts if s.attrs.get("type") != "application/json"]
    assert len(runnable) == 1 and not runnable[0].attrs
    (style,) = [e for e in hostile_page.elements if e.tag == "style"]
    csp = hostile_page.csp()
    assert csp.startswith("default-src 'none'; ")
    assert f"script-src {sha256_source(runnable[0].text)};" in csp
    assert f"style-src {sha256_source(style.text)};" in csp
    assert "img-src data:;" in csp and "unsafe" not in csp


def test_the_pages_own_script_never_parses_markup() -> None:
    script = (html_module.TEMPLATES / "report.js").read_text()
    for risky in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "</",
    ):
        assert risky not in script


def test_hostile_strings_arrive_as_the_same_text(
    hostile_run: SyntheticRun, hostile_page: Page
) -> None:
    cases = hostile_page.data()["cases"]
    assert [c["id"] for c in cases] == [c.id for c in hostile_run.report.cases]
    assert {c["name"] for c in cases} >= set(HOSTILE)
    timelines = hostile_page.timelines().values()
    shown = json.dumps([t["events"] for t in timelines], ensure_ascii=False)
    for hostile in HOSTILE[1:]:
        assert json.dumps(hostile, ensure_ascii=False)[1:-1] in shown


def test_template_rendered_values_are_escaped(hostile_page: Page) -> None:
    outside_scripts = visible_text(hostile_page.html)
    assert "<img src=x" not in outside_scripts and "<script>window" not in outside_scripts
    # A regressed case's id
    assert "&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;" in outside_scripts


def test_a_one_megabyte_output_is_cut_with_a_marker(hostile_page: Page) -> None:
    events = [e for t in hostile_page.timelines().values() for e in t["events"]]
    outputs = [
        dict(e["fields"])["text"]
        for e in events
        if e["type"] == "io.output" and "AAAA" in dict(e["fields"])["text"]
    ]
    assert outputs
    expected_cut = len(HOSTILE[0]) + len(ONE_MB) - 20_000
    for text in outputs:
        assert len(text) < 20_100 and text.endswith(f"[... {expected_cut} more characters]")
    assert len(hostile_page.html) < 2_000_000


def test_failed_assertions_keep_the_seqs_they_refer_to(hostile_page: Page) -> None:
    failed = [
        a
        for t in hostile_page.timelines().values()
        for a in t["assertions"]
        if a["status"] == "failed"
    ]
    assert failed and all(a["seqs"] == [OUTPUT_SEQ] for a in failed)
    assert {a["message"] for a in failed} <= set(HOSTILE)


def test_a_lone_surrogate_from_undecodable_bytes_still_writes(tmp_path: Path) -> None:
    run = build_run(tmp_path, cases=2, repeats=1, gate=False)
    case = run.report.cases[0]
    case.name = "bad \udcff bytes"
    case.attempts[0].reason = "also \ud800 here"
    path = write_html(run.report, run.run_dir, rootdir=run.rootdir)
    page = parse(path.read_text(encoding="utf-8"))
    # As an escape in the JSON, shown as U+FFFD
    assert page.data()["cases"][0]["name"] == "bad \udcff bytes"


def test_write_html_puts_report_html_in_the_run_directory(tmp_path: Path) -> None:
    run = build_run(tmp_path, cases=3, repeats=2, gate=False)
    path = write_html(run.report, run.run_dir, rootdir=run.rootdir)
    assert path == run.run_dir / "report.html"
    # The temporary file of the atomic write is gone
    assert not list(run.run_dir.glob(".report.html.*"))


# -- what the page says ---------------------------------------------------------------------


def _page(run: SyntheticRun, **changes: Any) -> Page:
    report = run.report.model_copy(update=changes)
    return parse(render(report, run.run_dir, rootdir=run.rootdir, history=run.history))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> SyntheticRun:
    return build_run(tmp_path_factory.mktemp("small"), cases=12, repeats=5, regressed=3)


def test_a_failing_gate_leads_with_its_regressions(small_run: SyntheticRun) -> None:
    page = _page(small_run)
    assert page.data()["banner"] == {
        "level": "fail",
        "title": "Gate failed: scenario_regression",
        "lines": [
            "scenario_regression: FAIL - 3 case(s) dropped by 20 pp or more",
            "suite_pass_rate: INCONCLUSIVE - a 5 pp drop, not significant",
        ],
    }
    rows = [
        e.attrs["data-case-id"]
        for e in page.elements
        if e.tag == "tr" and "regression-row" in e.attrs.get("class", "")
    ]
    assert sorted(rows) == ["case-0000", "case-0001", "case-0002"]
    body = visible_text(page.html)
    assert (
        body.index('id="regressions"') < body.index('id="overview"') < body.index('id="scenarios"')
    )
    deltas = [c["change"]["delta"] for c in page.data()["cases"] if c["id"] == rows[0]]
    assert pp(deltas[0]) in body


def test_without_a_baseline_there_is_no_regressions_section(small_run: SyntheticRun) -> None:
    page = _page(small_run, gate=None)
    assert 'id="regressions"' not in page.html
    failed = sum(1 for c in small_run.report.cases if c.verdict == "failed")
    assert (
        page.data()["banner"]["title"]
        == f"Failed: {failed} of 12 scenario(s) failed (exit status 1)"
    )


@pytest.mark.parametrize(
    ("changes", "level", "title"),
    [
        ({"exit_status": 0, "gate": None}, "pass", "Passed"),
        ({"exit_status": 1, "gate": None}, "fail", "Failed: "),
    ],
)
def test_banner_levels(
    small_run: SyntheticRun, changes: dict[str, Any], level: str, title: str
) -> None:
    banner = _page(small_run, **changes).data()["banner"]
    assert banner["level"] == level and banner["title"].startswith(title)


def test_tolerated_failures_are_amber(small_run: SyntheticRun) -> None:
    totals = small_run.report.totals.model_copy(update={"tolerated_failures": 2})
    banner = _page(small_run, exit_status=0, gate=None, totals=totals).data()["banner"]
    assert banner == {"level": "warn", "title": "Passed, with 2 tolerated failure(s)", "lines": []}


def test_rows_carry_the_statistics_and_the_change(small_run: SyntheticRun) -> None:
    row = _page(small_run).data()["cases"][1]
    case = small_run.report.cases[1]
    assert (row["rate"], row["lo"], row["hi"]) == (
        case.stats.pass_rate,
        case.stats.wilson_low,
        case.stats.wilson_high,
    )
    assert row["phk"] == [5.0, case.stats.pass_hat_k[5]]
    assert row["p95"] == case.stats.latency_p95_ms and row["tokens"] == case.stats.tokens_mean
    assert row["change"]["movement"] == "regressed" and row["change"]["verdict"] == "FAIL"
    assert len(row["trend"]) == 9 and row["trend"][-1][3] is True  # the last point is this run


def test_every_attempt_is_embedded_in_a_small_run(small_run: SyntheticRun) -> None:
    page = _page(small_run)
    assert len(page.timelines()) == 60
    assert all(a["tl"] for c in page.data()["cases"] for a in c["attempts"])
    assert page.data()["timeline_policy"] == "every attempt's timeline is embedded"


def test_a_large_run_embeds_failed_attempts_and_the_first_of_each_case(
    small_run: SyntheticRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(html_module, "EMBED_ALL_LIMIT", 10)
    page = _page(small_run)
    for case in page.data()["cases"]:
        embedded = [a["repeat"] for a in case["attempts"] if a["tl"]]
        expected = [
            a["repeat"] for a in case["attempts"] if a["repeat"] == 1 or a["outcome"] == "failed"
        ]
        assert embedded == expected
    assert (
        "timelines are embedded for failed attempts and the first attempt of each scenario"
        in page.data()["timeline_policy"]
    )


def test_passing_replays_match_their_golden(small_run: SyntheticRun) -> None:
    timelines = _page(small_run).timelines().values()
    passing = [t for t in timelines if all(a["status"] == "passed" for a in t["assertions"])]
    assert passing and all(t["diff"]["same"] == t["diff"]["total"] == 17 for t in passing)
    failing = [t for t in timelines if t not in passing]
    assert failing and all(t["diff"]["same"] < t["diff"]["total"] for t in failing)


def test_without_the_project_directory_the_golden_is_said_to_be_unknown(
    small_run: SyntheticRun,
) -> None:
    page = parse(render(small_run.report, small_run.run_dir, rootdir=None))
    timeline = next(iter(page.timelines().values()))
    assert timeline["diff"] is None
    assert timeline["golden_note"] == (
        "The golden journal is not available: the project directory of "
        "scenarios/c0000/journal is not known."
    )


def test_a_missing_golden_is_said_to_be_missing(small_run: SyntheticRun, tmp_path: Path) -> None:
    page = parse(render(small_run.report, small_run.run_dir, rootdir=tmp_path))
    note = next(iter(page.timelines().values()))["golden_note"]
    assert note == (
        "The golden journal is not available: scenarios/c0000/journal/events.jsonl was not found."
    )


def test_an_attempt_without_a_journal_says_why(small_run: SyntheticRun) -> None:
    report: RunReport = small_run.report.model_copy(deep=True)
    report.cases[0].attempts[0].journal = None
    page = parse(render(report, small_run.run_dir, rootdir=small_run.rootdir))
    timeline = page.timelines()["nodeval-c0/0"]
    assert timeline["events"] == [] and timeline["diff"] is None
    assert (
        timeline["note"] == "this attempt wrote no journal (it did not start, or its worker died)"
    )


# -- compact timelines, written as they are read ------------------------------------------


def test_the_page_is_written_one_scenario_at_a_time(
    small_run: SyntheticRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scenario's journals (its golden one and its 5 attempts') are read only once the
    scenarios before it are written out: the builder never holds every journal's views."""
    loaded: list[Path] = []
    real = html_module.load_events
    monkeypatch.setattr(
        html_module,
        "load_events",
        lambda directory, *pool: (loaded.append(directory), real(directory, *pool))[1],
    )
    written, most_read_ahead = "", 0
    for chunk in html_module.render_chunks(
        small_run.report, small_run.run_dir, rootdir=small_run.rootdir
    ):
        written += chunk
        blocks = written.count('type="application/json" id="nodeval-c')
        most_read_ahead = max(most_read_ahead, len(loaded) - 6 * blocks)
    assert len(loaded) == 6 * 12 and most_read_ahead <= 6


def test_replays_equal_to_their_golden_share_one_copy_of_each_event(
    small_run: SyntheticRun,
) -> None:
    page = _page(small_run)
    for case, block in zip(small_run.report.cases, page.blocks().values(), strict=True):
        events = [len(a["events"]) for a in block["attempts"]]
        assert events == [17] * 5
        if case.verdict == "passed":  # five identical replays: 17 views in all, not 85
            assert (
                len(block["views"]) == 17
                and len({tuple(a["events"]) for a in block["attempts"]}) == 1
            )
        else:
            assert 17 < len(block["views"]) < 85


def test_every_data_element_is_inert_base64_whatever_the_data(hostile_page: Page) -> None:
    """The run's data, the dictionary and each case's block: nothing in them can end their
    element."""
    packed = [e for e in hostile_page.scripts() if e.attrs.get("type") == "application/json"]
    assert [e.attrs["id"] for e in packed[:3]] == ["nodeval-data", "nodeval-dict", "nodeval-c0"]
    for element in packed:
        assert re.fullmatch(r'"[A-Za-z0-9+/=]*"', element.text)
