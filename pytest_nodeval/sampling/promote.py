"""`nodeval promote`: turn a captured sample into a case directory for a person to review.

From the sample it writes `case.yaml` (owner, freshness, the model baseline from the
journal, tags), `input/config.yaml` (the config snapshot as captured), `input/inputs.yaml`
(the `io.input` turns and the answers given to `ask_user`), `journal/` (copied byte for
byte) and an `assertions.yaml` proposed from the trace. The case is assembled in a hidden
staging directory and renamed into place, then replayed once in deterministic mode so
the command can say at once whether it is green.
"""

from __future__ import annotations

import getpass
import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..case import ASSERTIONS_FILE, CASE_FILE, CONFIG_FILE, INPUTS_FILE
from ..case.directory import CaseSpec, find_case_dirs, load_case, read_case_id
from ..errors import CaseFormatError, NodevalError
from ..journal.events import HEADER_FILE
from ..journal.reader import Journal, read_journal
from ..journal.redact import REDACTED
from ..yamlfiles import validate
from .store import DEFAULT_SAMPLES_DIR, read_sample_info

DEFAULT_FRESHNESS = "90d"
PROMOTED_TAG = "promoted"
_PUNCTUATION = " \t.,;:!?\"'()[]{}<>*`"


@dataclass(frozen=True, slots=True)
class PromoteOptions:
    case_id: str
    cases_dir: Path = Path("scenarios")
    owner: str | None = None
    """Default: `git config user.name`, else the login name."""
    tags: tuple[str, ...] = ()
    """Added after the `promoted` tag."""
    freshness: str = DEFAULT_FRESHNESS
    force: bool = False
    """Replace an existing case directory of the same id."""
    verify: bool = True
    """Replay the new case once and report whether it is green."""


@dataclass(frozen=True, slots=True)
class Promoted:
    case_dir: Path
    events: int
    assertions: list[str]
    """Kinds of the proposed assertions, in order."""
    failure: str | None
    """Why the captured session failed, when it did."""
    replay_problems: list[str] | None
    """What keeps the replay from being green (empty: green; None: not checked)."""
    notes: list[str] = field(default_factory=list)


def promote(sample: Path, options: PromoteOptions) -> Promoted:
    """Create `<cases_dir>/<case_id>/` from a sample directory; see the module doc."""
    check_case_id(options.case_id)
    journal = read_sample_journal(sample)
    target = options.cases_dir / options.case_id
    _refuse_conflicts(target, options)
    facts = SampleFacts.of(journal, sample)
    files = case_files(facts, options, has_config=(sample / CONFIG_FILE).is_file())
    staging = _stage(target, files, sample)
    _install(staging, target)
    notes = (
        []
        if (sample / CONFIG_FILE).is_file()
        else [
            "the sample has no input/config.yaml "
            "(it came from your own agent, not the reference engine): "
            "run it from a Python scenario marked @pytest.mark.nodeval_case('"
            + options.case_id
            + "')"
        ]
    )
    problems = verify_replay(target) if options.verify and not notes else None
    return Promoted(
        target,
        len(journal.events),
        [p.spec["kind"] for p in propose_assertions(facts)],
        facts.failure,
        problems,
        notes,
    )


def resolve_sample(argument: str, samples_dir: Path = DEFAULT_SAMPLES_DIR) -> Path:
    """A sample directory given as a path, or as an id under the samples directory."""
    path = Path(argument)
    if path.is_dir():
        return path
    under = samples_dir.expanduser() / argument
    if os.sep not in argument and under.is_dir():
        return under
    raise NodevalError(
        f"{argument}: no such sample directory (nor {under}); list samples with `nodeval samples`"
    )


def check_case_id(case_id: str) -> None:
    """Refuse an id that case.yaml would refuse, with the same rule and words."""
    try:
        CaseSpec(id=case_id)
    except ValidationError as exc:
        rule = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise NodevalError(f"--id {case_id!r} is not a valid case id: it {rule}") from None


def read_sample_journal(sample: Path) -> Journal:
    if not (sample / "journal" / HEADER_FILE).is_file():
        raise NodevalError(
            f"{sample}: not a sample directory (no journal/{HEADER_FILE}); "
            "list samples with `nodeval samples`"
        )
    return read_journal(sample / "journal", warn=lambda message: None)


def _refuse_conflicts(target: Path, options: PromoteOptions) -> None:
    if target.exists() and not options.force:
        raise NodevalError(
            f"{target} already exists; promote never overwrites a case. "
            "Choose another --id, or pass --force to replace it"
        )
    for directory in find_case_dirs([options.cases_dir]):
        if directory.resolve() != target.resolve() and case_id_of(directory) == options.case_id:
            raise NodevalError(
                f"case id {options.case_id!r} is already used by {directory / CASE_FILE}; "
                "choose another --id"
            )


def case_id_of(directory: Path) -> str | None:
    """The id of the case in `directory`; None when its case.yaml cannot be read."""
    try:
        return read_case_id(directory)
    except CaseFormatError:
        return None


# -- what the trace says ------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleFacts:
    """What the proposals are made of, read once from the sample's journal."""

    sample_id: str
    session_id: str
    captured_at: str
    reason: str
    failure: str | None
    status: str | None
    turns: int
    inputs: list[str]
    answers: list[str]
    tool_calls: list[str]
    failed_tools: list[str]
    fallback: bool
    output: str | None
    model: str | None

    @classmethod
    def of(cls, journal: Journal, sample: Path) -> SampleFacts:
        info = read_sample_info(sample)
        candidates, ends = journal.of_type("eval.candidate"), journal.of_type("session.end")
        candidate = candidates[-1] if candidates else None
        end = ends[-1] if ends else None
        outputs = journal.of_type("io.output")
        return cls(
            sample_id=info.id if info else sample.name,
            session_id=journal.header.session_id,
            captured_at=candidate.ts if candidate else journal.header.created_at,
            reason=candidate.payload.reason if candidate else "unknown",
            failure=_failure(candidate, end),
            status=end.payload.status if end else None,
            turns=end.payload.turns if end else 0,
            inputs=[e.payload.text for e in journal.of_type("io.input")],
            answers=[e.payload.text for e in journal.of_type("io.ask.response")],
            tool_calls=[e.payload.tool for e in journal.of_type("tool.call")],
            failed_tools=sorted(
                {e.payload.tool for e in journal.of_type("tool.result") if not e.payload.ok}
            ),
            fallback=bool(journal.of_type("provider.fallback")),
            output=outputs[-1].payload.text if outputs else None,
            model=first_model(journal),
        )

    @property
    def ended_ok(self) -> bool:
        return self.status == "ok"


def _failure(candidate: Any, end: Any) -> str | None:
    if candidate is not None and candidate.payload.error:
        return str(candidate.payload.error)
    if end is not None and end.payload.status != "ok":
        return f"{end.payload.status}: {end.payload.reason or 'no reason given'}"
    return None if end is not None else "the session did not end"


def first_model(journal: Journal) -> str | None:
    """The model of the first LLM request (the case's model_baseline)."""
    for event in journal.of_type("llm.request"):
        body = event.payload.body
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            return str(body["model"])
    return None


def distinctive_piece(text: str, limit: int = 40) -> str | None:
    """A short piece of the text worth checking for: its most specific word and what follows it.

    Numbers and long words are the most specific; redacted spots are never chosen. The
    piece is a substring of the text, so `output_contains` passes on the same output.
    """
    tokens = list(re.finditer(r"\S+", text))
    usable = [
        t for t in tokens if REDACTED not in t.group() and len(t.group().strip(_PUNCTUATION)) >= 3
    ]
    if not usable:
        return None
    best = max(
        usable,
        key=lambda t: (any(c.isdigit() for c in t.group()), len(t.group().strip(_PUNCTUATION))),
    )
    end = best.end()
    for following in tokens[tokens.index(best) + 1 :][:2]:
        too_long = following.end() - best.start() > limit
        if too_long or REDACTED in following.group() or "\n" in text[end : following.start()]:
            break
        end = following.end()
    return text[best.start() : end].strip(_PUNCTUATION)[:limit] or None


# -- the proposed assertions --------------------------------------------------------------------


@dataclass(frozen=True)
class Proposal:
    comment: str
    spec: dict[str, Any]


def propose_assertions(facts: SampleFacts) -> list[Proposal]:
    """Assertions that hold for the captured trace, each with a comment saying what it pins down."""
    proposals = [Proposal(_tool_sequence_comment(facts), {"kind": "same_tool_sequence"})]
    for tool in dict.fromkeys(facts.tool_calls):
        count = facts.tool_calls.count(tool)
        proposals.append(
            Proposal(f"called {count} time(s) in the sample", {"kind": "tool_called", "tool": tool})
        )
    if facts.ended_ok:
        proposals.append(_no_errors(facts))
    piece = distinctive_piece(facts.output) if facts.output else None
    if piece:
        proposals.append(
            Proposal(
                "a distinctive piece of the final output; check it says what matters",
                {"kind": "output_contains", "text": piece},
            )
        )
    if facts.turns:
        slack = max(facts.turns + 2, math.ceil(facts.turns * 1.5))
        proposals.append(
            Proposal(
                f"{facts.turns} turn(s) in the sample, with slack for harmless variation",
                {"kind": "max_turns", "value": slack},
            )
        )
    return proposals


def _tool_sequence_comment(facts: SampleFacts) -> str:
    if not facts.tool_calls:
        return "no tools were called in the sample; in live runs, none may be"
    return "the same tool calls, in order, with the same arguments: " + " -> ".join(
        facts.tool_calls
    )


def _no_errors(facts: SampleFacts) -> Proposal:
    spec: dict[str, Any] = {"kind": "no_errors"}
    notes = []
    if facts.failed_tools:
        spec["allow_tools"] = facts.failed_tools
        notes.append(
            f"{', '.join(facts.failed_tools)} failed in the sample and the agent recovered"
        )
    if facts.fallback:
        spec["allow_fallback"] = True
        notes.append("a provider fallback happened in the sample")
    return Proposal(
        "no failed tool, fallback or session error" + (f" ({'; '.join(notes)})" if notes else ""),
        spec,
    )


def render_assertions(facts: SampleFacts, proposals: list[Proposal]) -> str:
    lines = [
        f"# Proposed by `nodeval promote` from the trace of sample {facts.sample_id}",
        f"# (session {facts.session_id}, captured {facts.captured_at}, reason: {facts.reason}).",
        "# They describe what the agent did then, not what it should do: keep what matters,",
        "# tighten or delete the rest."
        + (" Replaying the journal passes them as written." if facts.ended_ok else ""),
    ]
    if not facts.ended_ok or facts.failure:
        lines += _failure_header(facts)
    for proposal in proposals:
        lines += [
            "",
            f"# {proposal.comment}",
            yaml.safe_dump([proposal.spec], sort_keys=False, allow_unicode=True).rstrip("\n"),
        ]
    return "\n".join(lines) + "\n"


def _failure_header(facts: SampleFacts) -> list[str]:
    lines = [
        "#",
        (
            "# This session FAILED when it was captured: "
            f"{_one_line(facts.failure or 'unknown error')}"
        ),
    ]
    if not facts.ended_ok:
        lines += [
            "# The case fails until the agent behaves differently. A person must decide what the",
            "# correct behaviour is, write it down here, and re-record the journal",
            "# (`nodeval record <case dir>`) once the agent does it. For instance:",
            "# - kind: no_errors",
        ]
    else:
        lines += [
            "# The session itself ended ok; the failure came from the code around it.",
            "# A person must decide what correct behaviour is and add assertions for it.",
        ]
    return lines


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# -- the case files ----------------------------------------------------------------------------


def case_files(facts: SampleFacts, options: PromoteOptions, *, has_config: bool) -> dict[str, str]:
    """case.yaml, input/inputs.yaml and assertions.yaml as text (the journal and config are
    copied)."""
    files = {
        CASE_FILE: _case_yaml(facts, options),
        ASSERTIONS_FILE: render_assertions(facts, propose_assertions(facts)),
    }
    if has_config or facts.inputs:
        files[INPUTS_FILE] = _inputs_yaml(facts)
    return {name: _with_schema_line(options, name, text) for name, text in files.items()}


def _with_schema_line(options: PromoteOptions, name: str, text: str) -> str:
    """Editors complete and check a promoted file through its schema (docs/editors.md)."""
    from ..case.schema_files import project_schemas, schema_line

    path = options.cases_dir / options.case_id / name
    return schema_line(path, name, project_schemas(options.cases_dir)) + text


def _case_yaml(facts: SampleFacts, options: PromoteOptions) -> str:
    data = {
        "schema_version": 1,
        "id": options.case_id,
        "name": _name(facts),
        "description": _description(facts),
        "tags": list(dict.fromkeys([PROMOTED_TAG, *options.tags])),
        "owner": options.owner or default_owner(options.cases_dir),
        "freshness": options.freshness,
        "model_baseline": facts.model,
    }
    validate(
        CaseSpec, data, f"case.yaml of '{options.case_id}' (from --id, --tag, --owner, --freshness)"
    )
    header = (
        f"# Promoted from sample {facts.sample_id} by `nodeval promote`.\n"
        "# Review the name and description; "
        "`freshness` says when the journal is due for re-recording.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _name(facts: SampleFacts) -> str:
    first = _one_line(facts.inputs[0], 60) if facts.inputs else f"session {facts.session_id}"
    return f"Promoted: {first}"


def _description(facts: SampleFacts) -> str:
    day = facts.captured_at[:10]
    why = (
        "sampled from production"
        if facts.reason == "sampled"
        else "captured from production because it failed"
    )
    failure = f" ({_one_line(facts.failure, 160)})" if facts.failure else ""
    return (
        f"Session {facts.session_id}, {why} on {day}{failure}. Describe what this scenario checks."
    )


def _inputs_yaml(facts: SampleFacts) -> str:
    if not facts.inputs:
        raise NodevalError(
            f"sample {facts.sample_id}: the journal has no io.input events, so there are no "
            "user inputs to write to input/inputs.yaml"
        )
    user: dict[str, Any] = {"kind": "scripted", "inputs": facts.inputs}
    if facts.answers:
        user["answers"] = [{"text": text} for text in facts.answers]
    header = (
        "# The user's turns as captured (redacted). Replay reads them from the journal;\n"
        "# live and record modes send these.\n"
    )
    return header + yaml.safe_dump({"user": user}, sort_keys=False, allow_unicode=True, width=100)


def default_owner(where: Path) -> str | None:
    """`git config user.name` (as seen from the cases directory), else the login name."""
    cwd = where if where.is_dir() else Path.cwd()
    try:
        found = subprocess.run(
            ["git", "config", "user.name"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (OSError, KeyError):
        return None


# -- staging, installing, checking ---------------------------------------------------------------


def _stage(target: Path, files: dict[str, str], sample: Path) -> Path:
    staging = target.with_name(f".promote-{target.name}-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(sample / "journal", staging / "journal")
        if (sample / CONFIG_FILE).is_file():
            (staging / "input").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(sample / CONFIG_FILE, staging / CONFIG_FILE)
        for relative, text in files.items():
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            (staging / relative).write_text(text, encoding="utf-8")
        load_case(staging)  # what promote writes must be a case the plugin can collect
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def _install(staging: Path, target: Path) -> None:
    old = target.with_name(f".promote-old-{target.name}-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def verify_replay(case_dir: Path, row_id: str | None = None) -> list[str]:
    """Replay the case (a dataset case's row `row_id`) in deterministic mode; what keeps it
    from passing (empty when green)."""
    from ..checks.assertions import evaluate_all
    from ..runner.session import AttemptSettings, run_case

    case = load_case(case_dir, row_id)
    with tempfile.TemporaryDirectory(prefix="nodeval-promote-") as scratch:
        observed = run_case(case, AttemptSettings(mode="deterministic"), Path(scratch) / "journal")
    if observed.divergence:
        return [observed.divergence]
    problems = (
        []
        if observed.status == "ok"
        else [
            f"the replayed session ends with status '{observed.status}': "
            f"{observed.metrics()['reason']}"
        ]
    )
    return problems + [
        f"{r.description}: {r.message}"
        for r in evaluate_all(case.assertions, observed.evidence)
        if r.status == "failed"
    ]


__all__ = [
    "PromoteOptions",
    "Promoted",
    "SampleFacts",
    "check_case_id",
    "distinctive_piece",
    "first_model",
    "promote",
    "propose_assertions",
    "resolve_sample",
    "verify_replay",
]
