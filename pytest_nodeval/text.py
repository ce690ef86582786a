"""Text on its way to a terminal or summary.txt: control characters escaped.

Agent output, assertion names and a server's error body are not ours: an escape sequence in
them could clear the user's screen or recolour the rest of the run, and a bidirectional
override (U+202E) could make a line read backwards. Lines and tabs stay; every other control
or format character is shown as its Python escape (`\\x1b`, `\\u202e`).
"""

from __future__ import annotations

import unicodedata

_KEPT = frozenset("\n\t")


def printable(text: str) -> str:
    if text.isprintable() and "\x1b" not in text:  # the common case costs one scan
        return text
    return "".join(c if c in _KEPT or not _hidden(c) else _escape(c) for c in text)


def _hidden(char: str) -> bool:
    return not char.isprintable() or unicodedata.category(char) in ("Cc", "Cf")


def _escape(char: str) -> str:
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
