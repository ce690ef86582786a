"""Reading a PDF for the `pdf` tool: its page count and the text of a range of pages (pypdf).

The bytes come out of the world (`World.read`), so the tool reads the same file the
agent's other tools see in a docker, bwrap or local world. Everything that stops a PDF
from being read (too large, not a PDF, damaged, encrypted with a password, a page range
outside the document) is a `PdfError`, which the tool turns into an error the model sees.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypdf import PdfReader

_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d*)\s*)?$")


class PdfError(Exception):
    """A PDF that cannot be read as asked: the message is what the model is told."""


@dataclass(frozen=True, slots=True)
class PdfText:
    page_count: int
    pages: list[int]
    """The 1-based numbers of the pages read."""
    text: str


def parse_pages(spec: str, page_count: int) -> list[int]:
    """1-based page numbers from `"2-4"`, `"3"`, `"1,3,5-7"` or `"5-"` (to the end)."""
    pages: list[int] = []
    for part in spec.split(","):
        match = _RANGE.match(part)
        if match is None:
            raise PdfError(
                f"pages {spec!r}: {part.strip()!r} is not a page or a range "
                '(write e.g. "3", "2-4", "1,3,5-7" or "5-")'
            )
        first = int(match.group(1))
        last = first if match.group(2) is None else int(match.group(2) or page_count)
        if last < first:
            raise PdfError(f"pages {spec!r}: {part.strip()!r} ends before it starts")
        if not 1 <= first <= last <= page_count:
            raise PdfError(
                f"pages {spec!r}: {part.strip()!r} is outside the document "
                f"(it has {page_count} page{'s' if page_count != 1 else ''}: 1-{page_count})"
            )
        pages.extend(n for n in range(first, last + 1) if n not in pages)
    return pages


def read_pdf(data: bytes, pages: str | None, max_bytes: int) -> PdfText:
    """The page count and the text of `pages` (all by default) of the PDF in `data`."""
    if len(data) > max_bytes:
        raise PdfError(
            f"the file is {len(data)} bytes, more than the {max_bytes}-byte limit (pdf.max_bytes)"
        )
    if not data.lstrip()[:5] == b"%PDF-":
        raise PdfError("not a PDF (it does not start with %PDF-)")
    reader = _open(data)
    count = _page_count(reader)
    numbers = parse_pages(pages, count) if pages else list(range(1, count + 1))
    parts = [f"--- page {n} ---\n{_page_text(reader, n)}" for n in numbers]
    return PdfText(count, numbers, "\n".join(parts))


def _open(data: bytes) -> PdfReader:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
    except Exception as exc:  # pypdf raises many kinds on a damaged file; each is the file's fault
        raise PdfError(
            f"the PDF is damaged and cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    if reader.is_encrypted:
        _decrypt(reader)
    return reader


def _decrypt(reader: PdfReader) -> None:
    from pypdf.errors import PyPdfError

    # Many PDFs are encrypted with an empty user password (only editing is restricted):
    # a viewer opens those without asking, so the tool does too.
    try:
        opened = reader.decrypt("")
    except (PyPdfError, NotImplementedError) as exc:
        raise PdfError(
            f"the PDF is encrypted and cannot be decrypted ({type(exc).__name__}: {exc})"
        ) from None
    if not opened:
        raise PdfError("the PDF is encrypted with a password; its text cannot be read")


def _page_count(reader: PdfReader) -> int:
    try:
        return len(reader.pages)
    except Exception as exc:  # pypdf raises many kinds on a damaged file; each is the file's fault
        raise PdfError(
            f"the PDF is damaged: its pages cannot be found ({type(exc).__name__}: {exc})"
        ) from None


def _page_text(reader: PdfReader, number: int) -> str:
    try:
        return str(reader.pages[number - 1].extract_text())
    except Exception as exc:  # pypdf raises many kinds on a damaged file; each is the file's fault
        raise PdfError(
            f"page {number} is damaged and cannot be read ({type(exc).__name__}: {exc})"
        ) from None
