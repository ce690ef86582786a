"""report.html: one self-contained page per run (styles, script, data and charts inline).

The page makes no network request of any kind: a Content-Security-Policy allows only
its own style and script (by hash) and data: images. Everything that comes from a run
(agent output, tool results, case names) travels as compressed JSON inside
`<script type="application/json">` elements, each a JSON string of base64 (`html_pack`),
so that nothing in it can end the element, and the page's script puts it on screen as
text only. The jinja2 template is
autoescaped for the few values it renders itself.

The page is built and written one scenario at a time (`render_chunks`): a scenario's
journals are read, reduced to event views, written out and dropped before the next
scenario's are read, so the memory it takes does not grow with the number of attempts.
Each scenario's timelines are one script element, compressed (`html_pack`: deflate against
a dictionary the page shares, the start of the first scenario's timelines) and inflated by
the page only when one of its attempts is opened, so a large run loads fast; the run's own
data is one gzip element, inflated on load. Inside a scenario's block, an event view shared
by several attempts (a replay equal to its golden journal, or to another repeat) is stored
once, a long string that several views hold (an answer, which is also the next request's
last message) is stored once, and each LLM request holds only what changed since the
previous request of its attempt. Above `EMBED_ALL_LIMIT` attempts only the failed ones and
the first attempt of each scenario are embedded (the page says so).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import html_data as data
from .html_pack import Dictionary, pack_text, unpack_text
from .models import AttemptRecord, CaseReport, RunReport
from .timeline import GoldenJournal, TextPool, event_views, load_events

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup

HTML_FILE = "report.html"
TEMPLATES = Path(__file__).parent / "templates"
EMBED_ALL_LIMIT = 1_000
"""Up to this many attempts, every attempt's timeline is embedded."""
REGRESSIONS_SHOWN = 12
"""Rows of the regressions table above the fold; the scenarios table has them all."""
DICTIONARY_ID = "nodeval-dict"
SHARED_STRING = 64
"""Strings of views this long or longer are stored once per block and referred to."""
STRING_REF = "\x01"
"""Starts a reference to a block's shared string (a string that starts with it itself gets a
second one)."""


def render(
    report: RunReport, run_dir: Path, *, rootdir: Path | None, history: dict[str, Any] | None = None
) -> str:
    """The page for one run as one string (`write_html` streams it to disk instead)."""
    return "".join(render_chunks(report, run_dir, rootdir=rootdir, history=history))


def render_chunks(
    report: RunReport, run_dir: Path, *, rootdir: Path | None, history: dict[str, Any] | None = None
) -> Iterator[str]:
    """The page for one run, piece by piece; a scenario's journals are read only when its
    timelines are about to be written. `rootdir` locates golden journals (cases' directories
    are relative to it); `history` maps case ids to past runs ({run_id, finished_at, pass_rate})."""
    gate = data.gate_view(report.gate)
    slots, policy = _slots(report)
    page = _page_data(report, gate, data.history_view(history, report.run_id), slots, policy)
    regressions = data.regressions(gate, {c.id: c.name for c in report.cases})
    chunks = _template().generate(
        **_assets(),
        run=page["run"],
        banner=page["banner"],
        gate=gate,
        regressions=regressions[:REGRESSIONS_SHOWN],
        more_regressions=max(0, len(regressions) - REGRESSIONS_SHOWN),
        variants=data.variants_view(report),
        page_json=_inert(pack_text(_json(page))),
        timelines=_scenario_blocks(report, run_dir, rootdir, slots),
    )
    for chunk in chunks:
        # A lone surrogate (from a tool's undecodable bytes) cannot be written as UTF-8.
        yield chunk.encode("utf-8", "replace").decode("utf-8")


def write_html(
    report: RunReport, run_dir: Path, *, rootdir: Path | None, history: dict[str, Any] | None = None
) -> Path:
    """Stream the page to `run_dir/report.html`; readers see the old file or the new one, never
    a torn one."""
    path = run_dir / HTML_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.writelines(render_chunks(report, run_dir, rootdir=rootdir, history=history))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
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


def content_security_policy(script: str, style: str) -> str:
    """Nothing may load; only this page's own script and style (by hash) may run."""
    return (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def _sha256(source: str) -> str:
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return f"'sha256-{digest}'"


@functools.lru_cache(maxsize=1)
def _assets() -> dict[str, Any]:
    """The page's own script and style, and the policy that lets exactly these run."""
    from markupsafe import Markup

    script, style = (TEMPLATES / "report.js").read_text(), (TEMPLATES / "report.css").read_text()
    return {
        "script": Markup(script),
        "style": Markup(style),
        "csp": content_security_policy(script, style),
    }


@functools.lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
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

Slots = list[list[int | None]]
"""Per case, per attempt: its position in the case's embedded timelines, or None."""


def _page_data(
    report: RunReport,
    gate: dict[str, Any] | None,
    trends: dict[str, list[list[Any]]],
    slots: Slots,
    policy: str,
) -> dict[str, Any]:
    changes = gate["cases"] if gate else {}
    rows = [
        data.case_row(i, c, changes.get(c.id), trends.get(c.id, []), _block_id(i), slots[i])
        for i, c in enumerate(report.cases)
    ]
    # Each row carries its own change; the gate's per-case list is not embedded twice.
    gate_summary = {k: v for k, v in gate.items() if k != "cases"} if gate else None
    return {
        "run": data.overview(report, gate),
        "banner": data.headline(report, gate),
        "gate": gate_summary,
        "cases": rows,
        "has_history": bool(trends),
        "timeline_policy": policy,
    }


def _block_id(case_index: int) -> str:
    return f"nodeval-c{case_index}"


def _slots(report: RunReport) -> tuple[Slots, str]:
    """Which attempts get a timeline; decided from report.json alone, before any journal is read."""
    embed_all = report.totals.attempts <= EMBED_ALL_LIMIT
    policy = (
        "every attempt's timeline is embedded"
        if embed_all
        else f"this run has {report.totals.attempts} attempts: "
        "timelines are embedded for failed attempts "
        "and the first attempt of each scenario; the others are in their journal directories"
    )
    slots: Slots = []
    for case in report.cases:
        chosen = [
            embed_all or position == 0 or a.outcome in ("failed", "error")
            for position, a in enumerate(case.attempts)
        ]
        numbers = iter(range(len(chosen)))
        slots.append([next(numbers) if keep else None for keep in chosen])
    return slots, policy


def _scenario_blocks(
    report: RunReport, run_dir: Path, rootdir: Path | None, slots: Slots
) -> Iterator[tuple[str, Markup]]:
    """(element id, content) per case with embedded timelines, one case in memory at a time;
    before the first, the dictionary that every case's block is compressed against."""
    dictionary: Dictionary | None = None
    for index, case in enumerate(report.cases):
        embedded = [
            a for a, slot in zip(case.attempts, slots[index], strict=True) if slot is not None
        ]
        if not embedded:
            continue
        block, golden = _Block(), _Golden(case, rootdir)
        for attempt in embedded:
            block.add(attempt, run_dir, golden)
        text = block.text()
        if dictionary is None:
            dictionary = Dictionary(text)
            yield DICTIONARY_ID, _inert(dictionary.element())
        yield _block_id(index), _inert(dictionary.pack(text))


class _Block:
    """One case's embedded timelines: the distinct event views, and per attempt the indices
    of its own. Replays equal to their golden journal (or to each other) share their views."""

    def __init__(self) -> None:
        self.views: list[str] = []  # each view as JSON, in the order first seen
        self._index: dict[str, int] = {}
        self.attempts: list[dict[str, Any]] = []
        self.strings = _Strings()

    def add(self, attempt: AttemptRecord, run_dir: Path, golden: _Golden) -> None:
        journal, golden_note = golden.load()  # first: the attempt's journal shares its texts
        events, note = (
            load_events(run_dir / attempt.journal, golden.texts)
            if attempt.journal
            else ([], "this attempt wrote no journal (it did not start, or its worker died)")
        )
        diff = journal.diff(events) if journal is not None and events else None
        if diff is not None:
            diff["golden"] = {g: self.intern(view) for g, view in diff["golden"].items()}
        self.attempts.append(
            {
                "nodeid": data.text(attempt.nodeid, 2000),
                "events": [self.intern(v) for v in event_views(events)],
                "note": note,
                "assertions": data.assertion_rows(attempt),
                "diff": diff,
                "golden_note": golden_note,
            }
        )

    def intern(self, view: dict[str, Any]) -> int:
        try:
            key = _json(self.strings.refer(view))
        except ValueError:  # NaN in a request body: show the request without its patch
            key = _json(self.strings.refer({**view, "req": None}))
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.views)
            self.views.append(key)
        return found

    def text(self) -> str:
        """The block as JSON (ASCII): views first, so the dictionary taken from the first
        block holds the shape of events rather than one scenario's long texts."""
        return (
            '{"views":['
            + ",".join(self.views)
            + '],"attempts":'
            + _json(self.attempts)
            + ',"strings":'
            + _json(self.strings.items)
            + "}"
        )


class _Strings:
    """A block's long strings, each stored once: in views they become STRING_REF + index."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def refer(self, value: Any) -> Any:
        """`value` with its long strings (values, not keys) replaced by references."""
        if isinstance(value, str):
            if len(value) >= SHARED_STRING:
                return STRING_REF + str(self._number(value))
            return STRING_REF + value if value.startswith(STRING_REF) else value
        if isinstance(value, list):
            return [self.refer(item) for item in value]
        if isinstance(value, dict):
            return {key: self.refer(item) for key, item in value.items()}
        return value

    def _number(self, value: str) -> int:
        found = self._index.get(value)
        if found is None:
            found = self._index[value] = len(self.items)
            self.items.append(value)
        return found


def resolve_strings(value: Any, strings: list[str]) -> Any:
    """A view with its references replaced by the strings (as report.js does)."""
    if isinstance(value, str):
        if not value.startswith(STRING_REF):
            return value
        return value[1:] if value[1:2] == STRING_REF else strings[int(value[1:])]
    if isinstance(value, list):
        return [resolve_strings(item, strings) for item in value]
    if isinstance(value, dict):
        return {key: resolve_strings(item, strings) for key, item in value.items()}
    return value


def _inert(packed: str) -> Markup:
    """A packed element's text (a JSON string of base64: nothing in it can end the element)
    as markup, so the template writes its quotes as they are."""
    from markupsafe import Markup

    return Markup(packed)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def decode_page_data(element_text: str) -> dict[str, Any]:
    """The run's data element, as the page's script reads it."""
    decoded: dict[str, Any] = json.loads(unpack_text(element_text))
    return decoded


def decode_block(element_text: str, dictionary_text: str) -> dict[str, Any]:
    """One case's timelines element ({"views", "attempts"}), inflated against the page's
    dictionary element and with its shared strings put back, as the page's script reads it."""
    block: dict[str, Any] = json.loads(
        Dictionary.from_element(dictionary_text).unpack(element_text)
    )
    strings = block.pop("strings")
    block["views"] = [resolve_strings(view, strings) for view in block["views"]]
    return block


class _Golden:
    """Finds a case's golden journal (`<rootdir>/<case directory>/journal`), read once for all
    its attempts."""

    def __init__(self, case: CaseReport, rootdir: Path | None) -> None:
        self.case, self.rootdir = case, rootdir
        self._loaded: tuple[GoldenJournal | None, str | None] | None = None
        self.texts = TextPool()
        """The long strings of the case's journals, each kept once (its golden one's and its
        attempts' repeat one another)."""

    def load(self) -> tuple[GoldenJournal | None, str | None]:
        if self._loaded is None:
            self._loaded = self._read()
        return self._loaded

    def _read(self) -> tuple[GoldenJournal | None, str | None]:
        where = f"{self.case.directory or '(unknown directory)'}/journal"
        if self.rootdir is None or not self.case.directory:
            return (
                None,
                (
                    "The golden journal is not available: "
                    f"the project directory of {where} is not known."
                ),
            )
        directory = self.rootdir / self.case.directory / "journal"
        if not (directory / "events.jsonl").is_file():
            return None, f"The golden journal is not available: {where}/events.jsonl was not found."
        events, note = load_events(directory, self.texts)
        return GoldenJournal(events), note and f"Golden journal {where}: {note}"
