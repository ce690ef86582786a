"""A divergence in the text reports: summary.txt prints it whole under its case, and the
Markdown job summary cuts reasons at a word boundary and folds the diff in <details>."""

from __future__ import annotations

import pytest

from pytest_nodeval.report.aggregate import build_case
from pytest_nodeval.report.models import AttemptRecord, CaseMeta, RunReport, Totals
from pytest_nodeval.report.summary_md import REASON_LIMIT, markdown
from pytest_nodeval.report.terminal import divergence_lines, summary_lines
from pytest_nodeval.stats.run_stats import suite_stats
from pytest_nodeval.text import cut_at_word

MESSAGE = (
    "replay of 'greet' diverged from its journal (scenarios/greet/journal/events.jsonl): "
    "at seq 7 (llm.request to 'mock') the request differs from the recording:\n"
    "  at system: recorded 'Be kind.', now 'Be ```rude``` <b>now</b>'\n"
    "  --- recorded\n"
    "  +++ now\n"
    '  - "system": "Be kind.",\n'
    '  + "system": "Be ```rude``` <b>now</b>",\n'
    "If the change is intended, re-record the journal: nodeval record greet"
)
REASON = (
    "the session ended with status 'divergence': replay of 'greet' diverged from its journal "
    "(projects/support-team/agents/refund-desk/scenarios/greet/journal/events.jsonl): "
    "at seq 7 (llm.request to 'mock') the request differs from the recording:"
)


def _attempt(repeat: int, divergence: str | None = MESSAGE) -> AttemptRecord:
    return AttemptRecord(
        nodeid=f"scenarios/greet/case.yaml::test_scenario[greet-{repeat}]",
        case_id="greet",
        repeat=repeat,
        outcome="failed" if divergence else "passed",
        reason=REASON if divergence else None,
        status="divergence" if divergence else "ok",
        divergence=divergence,
        divergence_seq=7 if divergence else None,
    )


def _report(*attempts: AttemptRecord) -> RunReport:
    case = build_case(CaseMeta(id="greet"), list(attempts))
    return RunReport(
        run_id="r",
        started_at="2026-12-01T00:00:00Z",
        finished_at="2026-12-01T00:00:01Z",
        duration_s=1.0,
        mode="deterministic",
        repeat=len(attempts),
        exit_status=1,
        pytest_exit_status=1,
        totals=Totals(cases=1, attempts=len(attempts)),
        suite=suite_stats([case.stats]),
        cases=[case],
    )


@pytest.mark.parametrize(
    ("text", "limit", "cut"),
    [
        ("short enough", 20, "short enough"),
        ("hello world foo bar", 10, "hello…"),
        ("hello world foo bar", 12, "hello world…"),  # the word ends at the limit
        ("a diverged/from/its/journal/events.jsonl", 30, "a diverged/from/its/journal/…"),
        ("x" * 30, 10, "x" * 9 + "…"),  # one word, no punctuation: cut where the limit falls
    ],
)
def test_cut_at_word(text: str, limit: int, cut: str) -> None:
    assert cut_at_word(text, limit) == cut
    assert len(cut) <= limit


def test_a_long_reason_is_never_cut_mid_word_in_the_markdown() -> None:
    text = markdown(_report(_attempt(1)))
    row = next(line for line in text.splitlines() if line.startswith("| greet |"))
    why = row.split(" | ")[-1].removesuffix(" |")
    assert why.endswith("…") and len(why) <= REASON_LIMIT
    assert REASON.startswith(why.removesuffix("…"))
    assert REASON[len(why) - 1] == " "  # the cut falls on a space: the last word is whole


def test_the_markdown_folds_each_diverged_cases_diff_in_details() -> None:
    text = markdown(_report(_attempt(1), _attempt(2)))
    lines = text.splitlines()
    start = lines.index("<details>")
    assert lines[start + 1].startswith("<summary>greet r1: replay of 'greet' diverged")
    assert lines[start + 1].endswith("differs from the recording:</summary>")
    assert lines[start + 2] == ""
    # A fence longer than the backticks inside, so the diff cannot end it; its HTML stays text.
    assert lines[start + 3] == "````text"
    body = lines[start + 4 : lines.index("````", start + 4)]
    assert "  at system: recorded 'Be kind.', now 'Be ```rude``` <b>now</b>'" in body
    assert body[-1] == "If the change is intended, re-record the journal: nodeval record greet"
    assert lines.count("<details>") == 1 and "</details>" in lines  # a case once


def test_the_markdown_has_no_divergence_section_without_one() -> None:
    assert "<details>" not in markdown(_report(_attempt(1, divergence=None)))


def test_summary_txt_prints_each_distinct_divergence_once_under_its_case() -> None:
    lines = summary_lines(_report(_attempt(1), _attempt(2)), divergences=True)
    row = next(i for i, line in enumerate(lines) if line.startswith("greet "))
    assert lines[row + 1] == "    r1, r2 diverged:"
    assert lines[row + 2] == "      " + MESSAGE.splitlines()[0]
    assert (
        lines[row + 3] == "        at system: recorded 'Be kind.', now 'Be ```rude``` <b>now</b>'"
    )
    assert (
        lines[row + 8]
        == "      If the change is intended, re-record the journal: nodeval record greet"
    )
    # The terminal has the message in the test's failure already.
    assert not any("r1, r2 diverged" in line for line in summary_lines(_report(_attempt(1))))


def test_divergence_lines_escape_nothing_themselves_and_cap_distinct_messages() -> None:
    attempts = [_attempt(n, f"{MESSAGE} {n}") for n in range(1, 6)]
    case = _report(*attempts).cases[0]
    lines = divergence_lines(case)
    assert sum(1 for line in lines if line.endswith(" diverged:")) == 3
    assert lines[-1] == "    ... and 2 more divergence(s): report.json has each attempt's"
