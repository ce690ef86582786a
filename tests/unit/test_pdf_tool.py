"""The `pdf` tool on real PDFs in a world: page count, text, page ranges, and files it cannot
read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.agent.config import PdfSpec
from pytest_nodeval.agent.pdf import PdfError, parse_pages
from pytest_nodeval.agent.tools import PdfTool, ToolContext, ToolOutcome
from pytest_nodeval.world.local import LocalWorld

from ..pdf_samples import encrypt_pdf, make_pdf

PAGES = [
    "Quarterly report overview",
    "Revenue grew by 12 percent",
    "Costs fell by 3 percent",
    "Outlook is stable",
]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[LocalWorld]:
    seed = tmp_path / "seed"
    seed.mkdir()
    report = make_pdf(PAGES)
    (seed / "report.pdf").write_bytes(report)
    (seed / "locked.pdf").write_bytes(encrypt_pdf(report, "secret"))
    (seed / "restricted.pdf").write_bytes(encrypt_pdf(report, ""))
    (seed / "truncated.pdf").write_bytes(report[: len(report) // 3])
    (seed / "notes.txt").write_text("not a pdf\n")
    opened = LocalWorld(seed_dir=seed)
    yield opened
    opened.close()


def _read(
    world: Any, path: str, pages: str | None = None, max_bytes: int = 20_000_000
) -> ToolOutcome:
    ctx = ToolContext(world=world, call_id="c1", timeout_s=30.0, ask=lambda call_id, question: "")
    args = {"path": path, **({"pages": pages} if pages is not None else {})}
    return PdfTool(PdfSpec(max_bytes=max_bytes)).run(args, ctx)


def test_the_page_count_and_the_text_of_every_page(world: LocalWorld) -> None:
    outcome = _read(world, "report.pdf")
    assert outcome.ok, outcome.error
    assert outcome.result["page_count"] == 4 and outcome.result["pages"] == "1-4"
    text = outcome.result["text"]
    assert [line for line in text.splitlines() if not line.startswith("--- page")] == PAGES
    assert "--- page 3 ---\nCosts fell by 3 percent" in text


@pytest.mark.parametrize(
    ("pages", "read", "shown"),
    [
        ("2-3", [2, 3], "2-3"),
        ("4", [4], "4"),
        ("1,3-4", [1, 3, 4], "1,3-4"),
        ("3-", [3, 4], "3-4"),
    ],
)
def test_a_page_range_reads_only_those_pages(
    world: LocalWorld, pages: str, read: list[int], shown: str
) -> None:
    outcome = _read(world, "report.pdf", pages)
    assert outcome.ok, outcome.error
    assert outcome.result["page_count"] == 4 and outcome.result["pages"] == shown
    assert [line for line in outcome.result["text"].splitlines() if not line.startswith("---")] == [
        PAGES[n - 1] for n in read
    ]


@pytest.mark.parametrize(
    ("pages", "message"),
    [
        ("5", "'5' is outside the document (it has 4 pages: 1-4)"),
        ("0-2", "'0-2' is outside the document"),
        ("3-1", "'3-1' ends before it starts"),
        ("two", "'two' is not a page or a range"),
        ("1,,2", "'' is not a page or a range"),
    ],
)
def test_a_bad_page_range_is_a_tool_error(world: LocalWorld, pages: str, message: str) -> None:
    outcome = _read(world, "report.pdf", pages)
    assert not outcome.ok and outcome.error.startswith(f"report.pdf: pages {pages!r}: ")
    assert message in outcome.error


def test_a_pdf_encrypted_with_a_password_is_a_tool_error(world: LocalWorld) -> None:
    outcome = _read(world, "locked.pdf")
    assert not outcome.ok
    assert (
        outcome.error == "locked.pdf: the PDF is encrypted with a password; its text cannot be read"
    )


def test_a_pdf_encrypted_with_an_empty_password_opens_as_in_a_viewer(world: LocalWorld) -> None:
    outcome = _read(world, "restricted.pdf", "2")
    assert outcome.ok and "Revenue grew by 12 percent" in outcome.result["text"]


def test_a_damaged_pdf_and_a_file_that_is_not_one_are_tool_errors(world: LocalWorld) -> None:
    damaged = _read(world, "truncated.pdf")
    assert not damaged.ok and damaged.error.startswith("truncated.pdf: the PDF is damaged")
    text = _read(world, "notes.txt")
    assert not text.ok and text.error == "notes.txt: not a PDF (it does not start with %PDF-)"


def test_a_missing_file_is_a_tool_error(world: LocalWorld) -> None:
    outcome = _read(world, "absent.pdf")
    assert (
        not outcome.ok
        and outcome.error.startswith("absent.pdf: ")
        and "No such file" in outcome.error
    )


def test_a_file_over_the_size_limit_is_a_tool_error(world: LocalWorld) -> None:
    size = len(make_pdf(PAGES))
    outcome = _read(world, "report.pdf", max_bytes=size - 1)
    assert not outcome.ok
    assert outcome.error == (
        f"report.pdf: the file is {size} bytes, more than the {size - 1}-byte limit (pdf.max_bytes)"
    )


def test_page_ranges_parse_without_duplicates() -> None:
    assert parse_pages("1-2,2-3", 5) == [1, 2, 3]
    with pytest.raises(PdfError, match="it has 1 page: 1-1"):
        parse_pages("2", 1)
