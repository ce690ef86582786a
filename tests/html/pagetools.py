"""Reading a rendered report.html back: its elements, its embedded JSON, its policy."""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from pytest_nodeval.report.html import DICTIONARY_ID, decode_block, decode_page_data


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""


@dataclass
class Page:
    html: str
    elements: list[Element] = field(default_factory=list)

    def scripts(self) -> list[Element]:
        return [e for e in self.elements if e.tag == "script"]

    def data(self) -> dict[str, Any]:
        element = next(e for e in self.scripts() if e.attrs.get("id") == "nodeval-data")
        return decode_page_data(element.text)

    def blocks(self) -> dict[str, dict[str, Any]]:
        """Each case's timelines element, inflated: {"views": [...], "attempts": [...]}."""
        dictionary = next(
            (e.text for e in self.scripts() if e.attrs.get("id") == DICTIONARY_ID), ""
        )
        return {
            e.attrs["id"]: decode_block(e.text, dictionary)
            for e in self.scripts()
            if e.attrs.get("id", "").startswith("nodeval-c")
        }

    def timelines(self) -> dict[str, Any]:
        """Every embedded attempt's timeline as the page's script sees it:
        "<element id>/<slot>" -> timeline."""
        return {
            f"{key}/{n}": resolve(block, attempt)
            for key, block in self.blocks().items()
            for n, attempt in enumerate(block["attempts"])
        }

    def csp(self) -> str:
        return next(
            e.attrs["content"]
            for e in self.elements
            if e.tag == "meta" and e.attrs.get("http-equiv") == "Content-Security-Policy"
        )


def resolve(block: dict[str, Any], attempt: dict[str, Any]) -> dict[str, Any]:
    """An attempt's timeline with its view indices replaced by the views (as report.js does)."""
    views = block["views"]
    diff = attempt["diff"] and {
        **attempt["diff"],
        "golden": {g: views[i] for g, i in attempt["diff"]["golden"].items()},
    }
    return {**attempt, "events": [views[i] for i in attempt["events"]], "diff": diff}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._raw: Element | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag in ("script", "style"):
            self._raw = element

    def handle_endtag(self, tag: str) -> None:
        self._raw = None

    def handle_data(self, data: str) -> None:
        if self._raw is not None:
            self._raw.text += data


def parse(html: str) -> Page:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return Page(html, collector.elements)


def sha256_source(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def pp(delta: float) -> str:
    """A pass-rate change as the page writes it."""
    return "±0 pp" if abs(delta) < 0.005 else f"{delta * 100:+.0f} pp".replace("-", "−")


def visible_text(html: str) -> str:
    """The HTML outside <script> and <style> elements (what the template itself rendered)."""
    return re.sub(r"<(script|style)\b[^>]*>.*?</\1>", "", html, flags=re.S)
