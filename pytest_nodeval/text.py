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


def cut_at_word(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut at a word boundary and ended with "…".

    Cut before escaping (HTML, Markdown), so an entity (`&amp;`) is never split. The cut falls
    after the last whole word; when that would drop more than half the limit (a long path),
    after the last punctuation of that word instead; only text with neither is cut where the
    limit falls.
    """
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if text[limit - 1].isspace():  # the last word ends exactly at the limit
        return head.rstrip() + "…"
    space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    punctuation = max((i for i, ch in enumerate(head) if not ch.isalnum()), default=-1)
    if space < limit // 2 and punctuation >= limit // 2:
        return head[: punctuation + 1] + "…"
    if space > 0:
        return head[:space].rstrip() + "…"
    return head + "…"
