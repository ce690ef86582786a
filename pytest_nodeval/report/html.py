"""report.html: one self-contained page per run (styles, script, data and charts inline).

The page makes no network request of any kind: a Content-Security-Policy allows only
its own style and script (by hash) and data: images. Everything that comes from a run
(agent output, tool results, case names) travels as JSON inside
`<script type="application/json">` elements, escaped so that no string can end the
element, and the page's script puts it on screen as text only. The jinja2 template is
autoescaped for the few values it renders itself.

Attempt timelines are embedded one per script element and parsed only when opened, so a
large run loads fast; above `EMBED_ALL_LIMIT` attempts only the failed ones and the first
attempt of each scenario are embedded (the page says so).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..journal.writer import write_atomic
from . import html_data as data
from .models import AttemptRecord, CaseReport, RunReport
from .timeline import GoldenJournal, event_views, load_events

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup

HTML_FILE = "report.html"
TEMPLATES = Path(__file__).parent / "templates"
EMBED_ALL_LIMIT = 1_000
"""Up to this many attempts, every attempt's timeline is embedded."""
REGRESSIONS_SHOWN = 12
"""Rows of the regressions table above the fold; the scenarios table has them all."""


def render(report: RunReport, run_dir: Path, *, rootdir: Path | None, history: dict[str, Any] | None = None) -> str:
    """The page for one run. `rootdir` locates golden journals (cases' directories are
    relative to it); `history` maps case ids to past runs ({run_id, finished_at, pass_rate})."""
    gate = data.gate_view(report.gate)
    timelines, policy = _timelines(report, run_dir, rootdir)
    page = _page_data(report, gate, data.history_view(history, report.run_id), timelines, policy)
    regressions = data.regressions(gate, {c.id: c.name for c in report.cases})
    html = _template().render(
        **_assets(), run=page["run"], banner=page["banner"], gate=gate,
        regressions=regressions[:REGRESSIONS_SHOWN], more_regressions=max(0, len(regressions) - REGRESSIONS_SHOWN),
        page_json=embed_json(page), timelines=[(key, embed_json(value)) for key, value in timelines.items()],
    )
    # A lone surrogate (from a tool's undecodable bytes) cannot be written as UTF-8.
    return html.encode("utf-8", "replace").decode("utf-8")


def write_html(report: RunReport, run_dir: Path, *, rootdir: Path | None, history: dict[str, Any] | None = None) -> Path:
    path = run_dir / HTML_FILE
    write_atomic(path, render(report, run_dir, rootdir=rootdir, history=history))
    return path


def read_history(path: Path | None, case_ids: list[str]) -> dict[str, Any] | None:
    """The run history for the trend charts; None when there is none or it cannot be read
    (the page then says there is no history; a history that failed to append is reported there)."""
    if path is None or not path.is_file():
        return None
    import sqlite3

    from .history import trends

    try:
        return trends(path, case_ids)
    except sqlite3.Error:
        return None


def embed_json(value: Any) -> Markup:
    """JSON that is safe inside a <script> element: no '<', '>' or '&' (so no '</script>' or
    '<!--'), and ASCII only (so U+2028/2029 and lone surrogates are escapes, not characters)."""
    from markupsafe import Markup

    encoded = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return Markup(encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def content_security_policy(script: str, style: str) -> str:
    """Nothing may load; only this page's own script and style (by hash) may run."""
    return (f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def _sha256(source: str) -> str:
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return f"'sha256-{digest}'"


@functools.lru_cache(maxsize=1)
def _assets() -> dict[str, Any]:
    """The page's own script and style, and the policy that lets exactly these run."""
    from markupsafe import Markup

    script, style = (TEMPLATES / "report.js").read_text(), (TEMPLATES / "report.css").read_text()
    return {"script": Markup(script), "style": Markup(style), "csp": content_security_policy(script, style)}


@functools.lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=_pct, pp=_pp, signed=_signed)
    return env.get_template("report.html.j2")


def _pct(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value * 100:.{digits}f}%"


def _pp(value: float | None) -> str:
    if value is None:
        return "–"
    return "±0 pp" if abs(value) < 0.005 else f"{value * 100:+.0f} pp".replace("-", "−")


def _signed(value: float | None, unit: str = "") -> str:
    return "–" if value is None else f"{value:+,.0f}{unit}".replace("-", "−")


# -- what the page embeds -----------------------------------------------------------------


def _page_data(report: RunReport, gate: dict[str, Any] | None, trends: dict[str, list[list[Any]]],
               timelines: dict[str, Any], policy: str) -> dict[str, Any]:
    ids = _timeline_ids(timelines)
    changes = gate["cases"] if gate else {}
    rows = [data.case_row(i, c, changes.get(c.id), trends.get(c.id, []), ids) for i, c in enumerate(report.cases)]
    # Each row carries its own change; the gate's per-case list is not embedded twice.
    gate_summary = {k: v for k, v in gate.items() if k != "cases"} if gate else None
    return {
        "run": data.overview(report, gate), "banner": data.headline(report, gate), "gate": gate_summary,
        "cases": rows, "has_history": bool(trends), "timeline_policy": policy,
    }


def _timeline_ids(timelines: dict[str, Any]) -> dict[str, str]:
    """nodeid -> the id of the element holding its timeline."""
    return {value["nodeid"]: key for key, value in timelines.items()}


def _timelines(report: RunReport, run_dir: Path, rootdir: Path | None) -> tuple[dict[str, Any], str]:
    embed_all = report.totals.attempts <= EMBED_ALL_LIMIT
    policy = ("every attempt's timeline is embedded" if embed_all else
              f"this run has {report.totals.attempts} attempts: timelines are embedded for failed attempts "
              "and the first attempt of each scenario; the others are in their journal directories")
    timelines: dict[str, Any] = {}
    for case in report.cases:
        golden = _Golden(case, rootdir)
        for position, attempt in enumerate(case.attempts):
            if embed_all or position == 0 or attempt.outcome in ("failed", "error"):
                timelines[f"nodeval-t{len(timelines)}"] = _timeline(attempt, run_dir, golden)
    return timelines, policy


def _timeline(attempt: AttemptRecord, run_dir: Path, golden: _Golden) -> dict[str, Any]:
    events, note = (load_events(run_dir / attempt.journal) if attempt.journal
                    else ([], "this attempt wrote no journal (it did not start, or its worker died)"))
    journal, golden_note = golden.load()
    return {
        "nodeid": data.text(attempt.nodeid, 2000), "events": event_views(events), "note": note,
        "assertions": data.assertion_rows(attempt),
        "diff": journal.diff(events) if journal is not None and events else None,
        "golden_note": golden_note,
    }


class _Golden:
    """Finds a case's golden journal (`<rootdir>/<case directory>/journal`), read once for all its attempts."""

    def __init__(self, case: CaseReport, rootdir: Path | None) -> None:
        self.case, self.rootdir = case, rootdir
        self._loaded: tuple[GoldenJournal | None, str | None] | None = None

    def load(self) -> tuple[GoldenJournal | None, str | None]:
        if self._loaded is None:
            self._loaded = self._read()
        return self._loaded

    def _read(self) -> tuple[GoldenJournal | None, str | None]:
        where = f"{self.case.directory or '(unknown directory)'}/journal"
        if self.rootdir is None or not self.case.directory:
            return None, f"The golden journal is not available: the project directory of {where} is not known."
        directory = self.rootdir / self.case.directory / "journal"
        if not (directory / "events.jsonl").is_file():
            return None, f"The golden journal is not available: {where}/events.jsonl was not found."
        events, note = load_events(directory)
        return GoldenJournal(events), note and f"Golden journal {where}: {note}"
