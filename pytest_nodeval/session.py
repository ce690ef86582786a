"""One attempt at a case: wire the engine (or a user's agent) for the mode, run it, observe.

deterministic / full  replay: LLM answers, tool results and user turns come from the
                      case's journal; no world, no network, no key.
live                  real providers (or local fakes), a real world, the simulated user.
record                as live, and the observed journal replaces the case's journal.
Whatever the mode, the attempt writes its own observed journal; assertions read that.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .assertions import Evidence
from .case import Case
from .config import EngineConfig
from .errors import NodevalError
from .journal import EngineInfo, JournalHeader, JournalWriter, new_session_id, now_iso
from .modes import REPLAY_MODES, MatchLevel, Mode
from .replay import ReplayStash, ReplayStopped

WORLD_TOOLS = frozenset({"shell", "file", "code_exec"})


@dataclass(frozen=True, slots=True)
class AttemptSettings:
    mode: Mode = "deterministic"
    match: MatchLevel = "default"
    world_backend: str | None = None
    run_id: str = "adhoc"
    work_dir: Path | None = None
    """Shared scratch space of the run (locks, image builds)."""
    session_id: str | None = None
    """The observed journal's session id (default: a new random one); set by callers that
    must correlate the journal with their own records, such as `nodeval inspect-mode`."""

    @property
    def replay(self) -> bool:
        return self.mode in REPLAY_MODES


@dataclass
class Observed:
    """What one attempt did: its observed events and a summary of them."""

    case_id: str
    mode: str
    events: list[Any]
    journal_dir: Path
    golden: list[Any] | None = None
    divergence: str | None = None
    world_backend: str | None = None
    wall_ms: float = 0.0
    judged: dict[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> Any | None:
        ends = [e for e in self.events if e.type == "session.end"]
        return ends[-1].payload if ends else None

    @property
    def output(self) -> str | None:
        return self.evidence.output

    @property
    def status(self) -> str:
        if self.divergence:
            return "divergence"
        return self.end.status if self.end else "incomplete"

    @property
    def evidence(self) -> Evidence:
        return Evidence(self.events, self.golden, self.judged)

    def metrics(self) -> dict[str, Any]:
        end = self.end
        llm_calls = sum(1 for e in self.events if e.type == "llm.request")
        tool_calls = sum(1 for e in self.events if e.type == "tool.call")
        return {
            "status": self.status,
            "reason": self.divergence or (end.reason if end else "the session did not end"),
            "error_kind": "divergence" if self.divergence else (end.error_kind if end else "harness"),
            "infra": bool(end and end.infra),
            "latency_ms": end.duration_ms if end else None,
            "wall_ms": round(self.wall_ms, 3),
            "input_tokens": end.usage.input_tokens if end else 0,
            "output_tokens": end.usage.output_tokens if end else 0,
            "turns": end.turns if end else 0,
            "llm_calls": llm_calls,
            "tool_calls": tool_calls,
        }


def journal_header(source: str, config: EngineConfig | None, session_id: str | None = None) -> JournalHeader:
    return JournalHeader(
        session_id=session_id or new_session_id(), created_at=now_iso(),
        engine=EngineInfo(version=__version__), source=source,  # type: ignore[arg-type]
        config_digest=config.digest() if config else None, redaction=["secrets"],
    )


def case_label(case: Case) -> str:
    try:
        return str(case.directory.relative_to(Path.cwd()))
    except ValueError:
        return str(case.directory)


def run_case(case: Case, settings: AttemptSettings, journal_dir: Path) -> Observed:
    """Run the reference engine on a case in the given mode."""
    if case.config is None or case.inputs is None:
        raise NodevalError(f"{case.config_path}: missing; the reference engine needs input/config.yaml "
                           "(a case for your own agent is run with the nodeval_session fixture instead)")
    stash = _stash_for(case, settings)
    world = None if settings.replay else _open_world(case, settings)
    source = "replay" if settings.replay else ("record" if settings.mode == "record" else "live")
    start = time.perf_counter()
    writer = JournalWriter(journal_dir, journal_header(source, case.config, settings.session_id))
    observed = Observed(case.id, settings.mode, writer.events, journal_dir,
                        world_backend=world.backend if world else None)
    try:
        _run_engine(case, settings, writer, stash, world, observed)
    finally:
        writer.close()
        if world is not None:
            world.close()
    observed.wall_ms = (time.perf_counter() - start) * 1000
    observed.golden = _golden(case, settings)
    if settings.mode == "record" and observed.status == "ok":
        install_journal(journal_dir, case.journal_dir)
    return observed


def _run_engine(case: Case, settings: AttemptSettings, writer: JournalWriter,
                stash: ReplayStash | None, world: Any, observed: Observed) -> None:
    from .engine import Engine
    from .providers import Wiring, build_chain
    from .user import JournalUser, make_user

    assert case.config is not None and case.inputs is not None
    chain = None
    try:
        chain = build_chain(case.config.providers, Wiring(writer, stash))
        user = JournalUser(stash) if stash is not None else make_user(case.inputs.user, str(case.inputs_path))
        engine = Engine(case.config, writer, chain, build_tools(case.config), user, world, stash,
                        session_id=writer.header.session_id, mode=settings.mode, watch=case.spec.world.watch)
        engine.run()
        if stash is not None:
            stash.check_complete()
    except ReplayStopped as stop:
        observed.divergence = str(stop.divergence)
    finally:
        if chain is not None:
            chain.close()


def run_agent_case(agent: Any, case: Case, settings: AttemptSettings, journal_dir: Path,
                   inputs: list[str] | None = None) -> Observed:
    """Run a user's own agent (see adapter.py) on a case in the given mode."""
    from .adapter import run_agent
    from .user import JournalUser, ScriptedUser, ScriptedUserSpec, make_user

    stash = _stash_for(case, settings)
    if stash is not None:
        user: Any = JournalUser(stash)
    elif inputs is not None:
        user = ScriptedUser(ScriptedUserSpec(kind="scripted", inputs=inputs), "the inputs given to the agent")
    elif case.inputs is not None:
        user = make_user(case.inputs.user, str(case.inputs_path))
    else:
        raise NodevalError(f"{case.inputs_path}: missing; give the agent's inputs there or pass inputs=[...]")
    source = "replay" if settings.replay else ("record" if settings.mode == "record" else "live")
    start = time.perf_counter()
    writer = JournalWriter(journal_dir, journal_header(source, None))
    try:
        divergence, _ = run_agent(agent, writer, user, stash, mode=settings.mode)
    finally:
        writer.close()
    observed = Observed(case.id, settings.mode, writer.events, journal_dir, divergence=divergence,
                        wall_ms=(time.perf_counter() - start) * 1000, golden=_golden(case, settings))
    if settings.mode == "record" and observed.status == "ok":
        install_journal(journal_dir, case.journal_dir)
    return observed


def build_tools(config: EngineConfig) -> dict[str, Any]:
    from .tools import BUILTINS

    return {spec.name: BUILTINS[spec.name]() for spec in config.tools if spec.name in BUILTINS}


def _stash_for(case: Case, settings: AttemptSettings) -> ReplayStash | None:
    if not settings.replay:
        return None
    return ReplayStash(case.journal(), case=case_label(case), match=settings.match)


def _golden(case: Case, settings: AttemptSettings) -> list[Any] | None:
    if settings.mode == "record" or not (case.journal_dir / "events.jsonl").is_file():
        return None
    return case.journal().events


def _open_world(case: Case, settings: AttemptSettings) -> Any:
    assert case.config is not None
    if not WORLD_TOOLS & {t.name for t in case.config.tools}:
        return None
    from .world.local import LocalWorld

    return LocalWorld(case.directory / "input" / "world")


def install_journal(source: Path, target: Path) -> None:
    """Replace a case's journal with a freshly recorded one, never leaving it half-written."""
    staging = target.with_name(f".journal.new-{os.getpid()}")
    old = target.with_name(f".journal.old-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)

