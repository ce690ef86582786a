"""A case directory: `case.yaml`, `input/`, `journal/`, `assertions.yaml`.

Collection reads `case.yaml` alone (`read_case_head`: id, tags, repeat); the rest of the
directory is read and validated when the case first runs (`CaseHead.load`), so collecting
10,000 cases parses 10,000 small files. Either way a malformed file is an error naming the
file, the field and the problem. The journal is parsed on first use and kept in a cache
bounded by the journals' size on disk (repeats share it).
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections import OrderedDict
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..agent.config import EngineConfig, ProviderSpec
from ..checks.assertions import AssertionsFile
from ..errors import CaseFormatError, JournalError, human_size
from ..journal.reader import Journal, read_golden, read_header
from ..journal.writer import recover_journal
from ..modes import MAX_REPEAT
from ..people.inputs import InputsSpec
from ..yamlfiles import M, load_model, load_yaml
from . import ASSERTIONS_FILE, CASE_FILE, CONFIG_FILE, INPUT_DIR, INPUTS_FILE, JOURNAL_DIR
from .dataset import ROW_SEPARATOR, Filling, Row, dataset_path, find_row, read_rows, render
from .variants import VARIANT_SEPARATOR, Variant

# Matched whole (fullmatch) and written in the syntax Python and ECMA-262 share: the JSON
# Schemas carry these same patterns, so an editor refuses exactly what the loader refuses.
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_REPEAT_SUFFIX = re.compile(r"-r[0-9]+$")
_TAG = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_DURATION = re.compile(r"^\s*([0-9]+)\s*([dwmy])\s*$")
_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}


class WorldSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["docker", "bwrap", "local"] | None = None
    """Force a backend for this case (default: the best one the machine has)."""
    network: bool = False
    """Let commands in the world reach the network."""
    watch: list[str] = Field(default_factory=list)
    """Paths whose final state is journaled (`world.snapshot`); a trailing / lists a directory."""


_NO_WORLD = WorldSpec()
"""The world of every case.yaml without a `world:` block, one object for all (it is frozen):
a case's spec stays with its test for the whole run, and each object more per case is more
for every garbage collection to walk (issue 33)."""


class CaseSpec(BaseModel):
    """`case.yaml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    id: str = Field(
        json_schema_extra={"pattern": _ID.pattern, "not": {"pattern": _REPEAT_SUFFIX.pattern}}
    )
    """Unique across the case roots; lower case, digits, '.', '_' and '-' (not ending in
    -r<digits>, which marks repeats in test ids)."""
    name: str = ""
    description: str = ""
    tags: list[str] = Field(
        default_factory=list,
        json_schema_extra={"items": {"type": "string", "pattern": _TAG.pattern}},
    )
    """Become pytest markers, so `-m pr` selects the case."""
    owner: str | None = None
    freshness: str | None = Field(default=None, json_schema_extra={"pattern": _DURATION.pattern})
    """Warn when the journal is older than this: 30d, 12w, 6m, 1y."""
    model_baseline: str | None = None
    repeat: int | None = Field(default=None, ge=1, le=MAX_REPEAT)
    """Repeats when the command line does not say --repeat."""
    min_pass_rate: float | None = Field(default=None, ge=0, le=1)
    """With repeats, the case passes when at least this fraction of attempts pass."""
    timeout_s: float | None = Field(default=None, gt=0)
    match_ignore: list[str] = Field(default_factory=list)
    """Regular expressions: text in a model request that replay does not compare (a timestamp
    a tool result carries), in the recording and the replay alike."""
    dataset: str | None = Field(default=None, json_schema_extra={"pattern": r"\.(jsonl|csv)$"})
    """A JSON lines or CSV file inside the case: one test per row, each row a scenario of its
    own (`<id>/<row id>`), filling `{{ row.<field> }}` in the case's files (case/dataset.py)."""
    needs_model: bool = True
    """An own agent's recording with no model call in it fails (and is not installed) unless
    this is false."""
    world: WorldSpec = Field(default_factory=lambda: _NO_WORLD)

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        if not _ID.fullmatch(value):
            raise ValueError(
                "must be lower case letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        if _REPEAT_SUFFIX.search(value):
            raise ValueError("must not end in -r<digits> (that suffix marks repeats in test ids)")
        return value

    @field_validator("tags")
    @classmethod
    def _valid_tags(cls, tags: list[str]) -> list[str]:
        bad = [t for t in tags if not _TAG.fullmatch(t)]
        if bad:
            raise ValueError(
                f"tag {bad[0]!r} is not a valid marker name (letters, digits, '_', '-')"
            )
        return tags

    @field_validator("match_ignore")
    @classmethod
    def _valid_patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return patterns

    @field_validator("freshness")
    @classmethod
    def _valid_freshness(cls, value: str | None) -> str | None:
        if value is not None and not _DURATION.fullmatch(value):
            raise ValueError("must be a number and a unit: 30d, 12w, 6m or 1y")
        return value

    def freshness_window(self) -> timedelta | None:
        if self.freshness is None:
            return None
        count, unit = _DURATION.fullmatch(self.freshness).groups()  # type: ignore[union-attr]
        return timedelta(days=int(count) * _DAYS[unit])


@dataclass(frozen=True)
class Case:
    id: str
    """The scenario's id: case.yaml's, or `<case>/<row id>` for a dataset's row."""
    directory: Path
    spec: CaseSpec
    config: EngineConfig | None
    inputs: InputsSpec | None
    assertions: tuple[Any, ...]
    row: Row | None = None
    """The dataset row this scenario is (None for a plain case)."""
    variant: Variant | None = None
    """The matrix variant this scenario runs (None outside a matrix)."""

    @property
    def journal_dir(self) -> Path:
        """journal/, a dataset row's journal/<row>/, a variant's journal[/<row>]/@<label>/."""
        journal = self.directory / JOURNAL_DIR
        if self.row is not None:
            journal /= self.row.id
        if self.variant is not None:
            journal /= VARIANT_SEPARATOR + self.variant.label
        return journal

    @property
    def dataset(self) -> Path | None:
        """The dataset file of a dataset case."""
        name = self.spec.dataset
        return dataset_path(self.directory, name) if name is not None else None

    @property
    def config_path(self) -> Path:
        return self.directory / CONFIG_FILE

    @property
    def inputs_path(self) -> Path:
        return self.directory / INPUTS_FILE

    @cached_property
    def config_digest(self) -> str | None:
        """input/config.yaml's digest (EngineConfig.digest), made once: every attempt's
        journal header carries it."""
        return self.config.digest() if self.config is not None else None

    def journal(self) -> Journal:
        path = self.journal_dir
        try:
            stat = (path / "events.jsonl").stat()
        except FileNotFoundError:
            # A recording's install that a killed process left half done
            if not recover_journal(path):
                return read_golden(path)  # raises the clear "missing" error
            stat = (path / "events.jsonl").stat()
        journal = JOURNALS.get(path, stat.st_mtime_ns, stat.st_size)
        _check_journal_tools(journal, self.config)
        return journal

    def stale_by(self, now: datetime | None = None) -> timedelta | None:
        """How far past its freshness window the journal is, if it is."""
        return _stale_by(self.spec, self.journal_dir, now)


@dataclass(frozen=True, slots=True)
class CaseHead:
    """What collection needs of a case: its case.yaml, without reading the other files."""

    id: str
    directory: Path
    spec: CaseSpec

    def load(self, row_id: str | None = None, variant: Variant | None = None) -> Case:
        """The whole case: input/config.yaml, input/inputs.yaml and assertions.yaml, read and
        validated; for a dataset case, as row `row_id` fills them in; in a matrix, as
        `variant` sets them."""
        directory = self.directory
        config_path = directory / CONFIG_FILE
        inputs_path = directory / INPUTS_FILE
        assertions_path = directory / ASSERTIONS_FILE
        row = self._row(row_id)
        variables = variant.vars if variant is not None else {}
        filling = Filling.of(row, self.dataset, variables) if row or variables else None
        config = _load(EngineConfig, config_path, filling) if config_path.is_file() else None
        inputs = _load(InputsSpec, inputs_path, filling) if inputs_path.is_file() else None
        assertions = _assertions(assertions_path, filling)
        if config is not None and inputs is None:
            raise CaseFormatError(
                f"{inputs_path}: missing (a case with input/config.yaml needs the user's inputs)"
            )
        if variant is not None:
            config = _with_variant(self, config, variant)
        if config is not None:
            _check_assertion_tools(assertions_path, assertions, config.offered_tools())
        scenario = f"{self.id}{ROW_SEPARATOR}{row.id}" if row is not None else self.id
        if variant is not None:
            scenario += VARIANT_SEPARATOR + variant.label
        return Case(scenario, directory, self.spec, config, inputs, tuple(assertions), row, variant)

    @property
    def dataset(self) -> Path | None:
        """The dataset file, for a dataset case."""
        name = self.spec.dataset
        return dataset_path(self.directory, name) if name is not None else None

    def rows(self) -> tuple[Row, ...]:
        """A dataset case's rows (none for a plain case)."""
        dataset = self.dataset
        return read_rows(dataset) if dataset is not None else ()

    def _row(self, row_id: str | None) -> Row | None:
        dataset = self.dataset
        if dataset is None:
            if row_id is not None:
                raise CaseFormatError(
                    f"{self.directory / CASE_FILE}: no dataset: row {row_id!r} does not exist"
                )
            return None
        if row_id is None:
            raise CaseFormatError(
                f"{self.directory / CASE_FILE}: a dataset case runs one row at a time; "
                f"name a row of {dataset.name} (case id '{self.id}/<row id>')"
            )
        return find_row(dataset, row_id)

    def stale_by(self, now: datetime | None = None) -> timedelta | None:
        """How far past its freshness window the journal is, if it is (reads the journal's
        header)."""
        return _stale_by(self.spec, self.directory / JOURNAL_DIR, now)


def _check_assertion_tools(path: Path, assertions: list[Any], offered: set[str] | None) -> None:
    """An assertion about a tool the agent does not have is a typo, not a check."""
    if offered is None:
        return
    for index, spec in enumerate(assertions):
        tool = getattr(spec, "tool", None)
        if isinstance(tool, str) and tool not in offered:
            raise CaseFormatError(
                f"{path}: {index}.tool: {spec.kind} names tool {tool!r}, which input/config.yaml "
                f"does not offer (tools: {', '.join(sorted(offered)) or 'none'})"
            )


def _check_journal_tools(journal: Journal, config: EngineConfig | None) -> None:
    """A golden journal calling a tool the config lacks would replay a session this agent
    cannot have."""
    offered = config.offered_tools() if config is not None else None
    if offered is None or journal.tools_called() <= offered:
        return
    for event in journal.events:
        if event.type == "tool.call" and event.payload.tool not in offered:
            raise CaseFormatError(
                f"{journal.directory / 'events.jsonl'}: seq {event.seq} calls tool "
                f"{event.payload.tool!r}, which input/config.yaml does not offer "
                f"(tools: {', '.join(sorted(offered)) or 'none'}); re-record the "
                "journal, or add the tool to the config"
            )


def _load(model: type[M], path: Path, filling: Filling | None) -> M:
    data = load_yaml(path)
    return load_model(model, path, render(data, filling, path) if filling is not None else data)


def _with_variant(head: CaseHead, config: EngineConfig | None, variant: Variant) -> EngineConfig:
    """The config as the variant sets it; a key that sets nothing of this case is an error."""
    where = f"--nodeval-matrix variant {variant.label}"
    if config is None:
        raise CaseFormatError(
            f"{where}: case '{head.id}' is run by your own agent (no {CONFIG_FILE}), whose model "
            "and prompts nodeval cannot set; vary them in your agent from a {{ vars.KEY }}"
            if set(variant.vars) != {k for k, _ in variant.values}
            else f"{where}: case '{head.id}' has no {CONFIG_FILE} to fill"
        )
    _check_vars_used(head, variant, where)
    update: dict[str, Any] = {}
    first = config.providers[0]
    provider = variant.get("provider")
    if provider is not None:
        first = _variant_provider(head, config, provider, where)
    model = variant.get("model")
    if model is not None:
        first = first.model_copy(update={"model": model})
    if first is not config.providers[0]:
        update["providers"] = [first, *config.providers[1:]]
    prompt = variant.get("system_prompt")
    if prompt is not None:
        path = head.directory / INPUT_DIR / prompt
        try:
            update["system_prompt"] = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CaseFormatError(f"{where}: cannot read {path}: {exc}") from None
    return config.model_copy(update=update) if update else config


def _variant_provider(head: CaseHead, config: EngineConfig, name: str, where: str) -> ProviderSpec:
    """The `variants:` entry a matrix's `provider` value names."""
    entry = config.variants.get(name)
    if entry is None:
        given = ", ".join(config.variants) or "none: the file has no `variants:` block"
        raise CaseFormatError(
            f"{where}: {head.directory / CONFIG_FILE} has no provider entry "
            f"{name!r} under `variants:`; its entries: {given}"
        )
    return entry


def _check_vars_used(head: CaseHead, variant: Variant, where: str) -> None:
    files = [head.directory / name for name in (CONFIG_FILE, INPUTS_FILE, ASSERTIONS_FILE)]
    text = "".join(p.read_text(encoding="utf-8") for p in files if p.is_file())
    unused = [key for key in variant.vars if not re.search(rf"vars\.{re.escape(key)}\b", text)]
    if unused:
        raise CaseFormatError(
            f"{where}: no file of case '{head.id}' uses {{{{ vars.{unused[0]} }}}} "
            f"(its {CONFIG_FILE}, {INPUTS_FILE} or {ASSERTIONS_FILE}); a matrix key must set "
            "something: model, system_prompt, or a {{ vars.KEY }} the case's files use"
        )


def _assertions(path: Path, filling: Filling | None = None) -> list[Any]:
    """assertions.yaml's assertions; a case must have one, or say `[]` on purpose."""
    if not path.is_file():
        raise CaseFormatError(
            f"{path}: missing; a case needs assertions to be judged by (write `[]` in it to "
            "say on purpose that it has none, when the Python tests bound to it check it)"
        )
    data = load_yaml(path)
    if data is None:
        raise CaseFormatError(
            f"{path}: empty; list the case's assertions, or write `[]` to say on purpose "
            "that it has none"
        )
    data = render(data, filling, path) if filling is not None else data
    return load_model(AssertionsFile, path, data).assertions


def _stale_by(spec: CaseSpec, journal_dir: Path, now: datetime | None) -> timedelta | None:
    window = spec.freshness_window()
    if window is None or not journal_dir.is_dir():
        return None
    created = datetime.fromisoformat(read_header(journal_dir).created_at.replace("Z", "+00:00"))
    age = (now or datetime.now(UTC)) - created
    return age - window if age > window else None


JOURNAL_CACHE_BYTES = 8 * 2**20
"""How much journal (events.jsonl size on disk) one process keeps read, by default.

Kept, a journal is parsed whole, about 2.3 times its file size, so this holds ~20 MB; its
repeats parse nothing again. The repeats of a case run one after another, so a few journals
are all a run reuses. A bigger journal keeps its model payloads as their text (about 1.1
times the file) and is found again only while something still holds its events
(`JournalCache.get`)."""


MAX_JOURNAL_BYTES = 1 << 30
"""The default of `nodeval_max_journal_bytes`."""


class JournalCache:
    """Parsed golden journals, least recently used first out, bounded by their files' total size.

    An entry is keyed by the journal directory and holds the mtime and size it was read
    at: a rewritten journal is read again. A journal larger than the whole bound is not
    kept, only referred to weakly: while an attempt still holds its events (the replay stash,
    the golden events the checks and the judge read), it is not read a second time.
    """

    def __init__(self, max_bytes: int = JOURNAL_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.limit_bytes = MAX_JOURNAL_BYTES
        """A golden journal bigger than this is refused before it is read
        (`nodeval_max_journal_bytes`): replaying one takes about 1.2 times its size in memory."""
        self._entries: OrderedDict[str, tuple[int, int, Journal]] = OrderedDict()
        self._held: dict[str, tuple[int, int, Journal, weakref.ref[list[Any]]]] = {}
        """Journals too big to keep: each without its events, and its events weakly."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, directory: Path, mtime_ns: int, size: int) -> Journal:
        key = str(directory)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[:2] == (mtime_ns, size):
                self._entries.move_to_end(key)
                return entry[2]
            held = self._held_journal(key, mtime_ns, size)
            if held is not None:
                return held
        if size > self.limit_bytes:
            raise JournalError(
                f"{directory / 'events.jsonl'}: {human_size(size)}, more than the "
                f"{human_size(self.limit_bytes)} a golden journal may be "
                "(nodeval_max_journal_bytes); raise that ini key, or record a shorter session"
            )
        # One it keeps is parsed whole: its repeats then parse nothing again. One too big to
        # keep holds its model payloads as text, at half the memory.
        journal = read_golden(directory, lazy=size > self.max_bytes)
        with self._lock:
            self._put(key, (mtime_ns, size, journal))
        return journal

    def _held_journal(self, key: str, mtime_ns: int, size: int) -> Journal | None:
        held = self._held.get(key)
        events = held[3]() if held is not None and held[:2] == (mtime_ns, size) else None
        if held is None or events is None:
            self._held.pop(key, None)
            return None
        return held[2].model_copy(update={"events": events})

    def _put(self, key: str, entry: tuple[int, int, Journal]) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        if entry[1] > self.max_bytes:
            journal = entry[2]
            with suppress(TypeError):  # events in a plain list cannot be referred to weakly
                shell = journal.model_copy(update={"events": []})
                self._held[key] = (*entry[:2], shell, weakref.ref(journal.events))
            return
        self._entries[key] = entry
        self.bytes += entry[1]
        while self.bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= dropped[1]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held.clear()
            self.bytes = 0


JOURNALS = JournalCache()
"""The process's golden journals (repeats and checks of one case share one parse)."""


def read_case_head(directory: Path, case_file: Path | None = None) -> CaseHead:
    """Read and validate case.yaml alone (the id defaults to the directory's name);
    `case_file`, when given, is its path (`directory / CASE_FILE`) that the caller holds."""
    if case_file is None:
        case_file = directory / CASE_FILE
    data = load_yaml(case_file)
    if isinstance(data, dict) and "id" not in data:
        data = {**data, "id": directory.name}
    spec = load_model(CaseSpec, case_file, data)
    return CaseHead(spec.id, directory, spec)


def load_case(directory: Path, row_id: str | None = None, variant: Variant | None = None) -> Case:
    """The whole case directory, read and validated now (for commands and tools outside pytest);
    a dataset case as one of its rows fills it in; in a matrix, as a variant sets it."""
    return read_case_head(directory).load(row_id, variant)


def read_case_id(directory: Path) -> str:
    data = load_yaml(directory / CASE_FILE)
    return str(data.get("id", directory.name)) if isinstance(data, dict) else directory.name


def find_case_dirs(roots: list[Path]) -> list[Path]:
    """Every directory holding a case.yaml under the roots, sorted (deterministic ids).

    A case directory's own contents (input/, journal/, ...) are not searched, as pytest
    does not collect them; nor are directories whose names start with '.' or '_'.
    """
    found: set[Path] = set()
    for root in roots:
        if root.is_dir():
            _walk_cases(root, found)
    return sorted(found)


def _walk_cases(directory: Path, found: set[Path]) -> None:
    if (directory / CASE_FILE).is_file():
        found.add(directory)
        return
    with os.scandir(directory) as entries:
        subdirs = [
            e.path
            for e in entries
            if e.is_dir(follow_symlinks=False) and not e.name.startswith((".", "_"))
        ]
    for path in subdirs:
        _walk_cases(Path(path), found)
