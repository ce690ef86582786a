"""text.printable: what reaches a terminal or summary.txt cannot drive it (issue 18)."""

from __future__ import annotations

from pytest_nodeval.text import printable


def test_control_and_format_characters_are_escaped_lines_and_tabs_kept() -> None:
    assert (
        printable("clear \x1b[2J bell \x07 nul \x00 del \x7f")
        == "clear \\x1b[2J bell \\x07 nul \\x00 del \\x7f"
    )
    assert (
        printable("abc \u202eFED\u202c zero\u200bwidth") == "abc \\u202eFED\\u202c zero\\u200bwidth"
    )
    assert printable("line one\n\tline two") == "line one\n\tline two"
    assert printable("café 日本語 ✓") == "café 日本語 ✓"
    assert printable("c1 \x9b") == "c1 \\x9b"
