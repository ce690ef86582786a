"""One attempt at a case: wire the engine (or a user's agent) for the mode, run it, observe.

deterministic / full  replay: LLM answers, tool results and user turns come from the
                      case's journal; no world, no network, no key.
live                  real providers (or local fakes), a real world, the simulated user.
record                as live, and the observed journal replaces the case's journal.
Whatever the mode, the attempt writes its own observed journal; assertions read that.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..agent.config import EngineConfig, ProviderSpec
from ..case.directory import Case
from ..checks.assertions import Evidence
from ..errors import NodevalError
from ..journal.events import EngineInfo, JournalHeader, new_session_id, now_iso
from ..journal.replay import ReplayStash, ReplayStopped
from ..journal.writer import JournalWriter, install_journal
from ..modes import REPLAY_MODES, MatchLevel, Mode

if TYPE_CHECKING:
    from ..agent.limits import RunLimits
    from ..journal.events import Event, SessionEnd
    from .cost import Spend

WORLD_TOOLS = frozenset({"shell", "file", "code_exec", "pdf"})
"""Built-in tools that act in the world (`web` fetches from the harness: no world for it alone)."""


@dataclass(frozen=True, slots=True)
class AttemptSettings:
    mode: Mode = "deterministic"
    match: MatchLevel = "default"
    world_backend: str | None = None
    run_id: str = "adhoc"
    seed: int | None = None
    """Seeds stochastic fakes; repeats of a live case get different seeds."""
    judge: ProviderSpec | None = None
    """The judge's ProviderSpec (full, live and record modes grade rubrics with it)."""
    work_dir: Path | None = None
    """Shared scratch space of the run (locks, image builds)."""
    session_id: str | None = None
    """The observed journal's session id (default: a new random one); set by callers that
    must correlate the journal with their own records, such as `nodeval inspect-mode`."""
    limits: RunLimits | None = None
    """The run's shared rate limits (agent.limits.RunLimits), for live model calls; None: none."""
    install: bool = True
    """Record mode: replace the case's journal as soon as the session ends ok. Callers that
    judge the attempt first (the plugin, `nodeval record`) pass False and install only a
    recording that passed its checks (see `install_journal`)."""
    from_turn: int | None = None
    """Live and record modes, --nodeval-from-turn N: user turns 1..N-1 are replayed from the
    case's journal (answers included, requests not compared), turn N onward runs live."""

    @property
    def replay(self) -> bool:
        return self.mode in REPLAY_MODES


@dataclass
class Observed:
    """What one attempt did: its observed events and a summary of them."""

    case_id: str
    mode: str
    events: list[Event]
    journal_dir: Path
    golden: list[Event] | None = None
    divergence: str | None = None
    divergence_seq: int | None = None
    """The recorded event's seq where the replay diverged, when known (`ReplayDivergence.seq`)."""
    world_backend: str | None = None
    wall_ms: float = 0.0
    judged: dict[str, Any] = field(default_factory=dict)
    user_events: list[Event] = field(default_factory=list)
    """The simulated persona's model calls (its side journal, never on disk): priced apart."""
    judge_events: list[Event] = field(default_factory=list)
    """The judge's model calls (its side journals, never on disk): priced apart."""

    def spend(self, prices: Mapping[str, Any]) -> Spend:
        """What the attempt's calls cost, by the agent (its live part), the user and the judge."""
        from .cost import spend_of

        return spend_of(self.live_events, self.user_events, self.judge_events, prices)

    @property
    def end(self) -> SessionEnd | None:
        ends = [e for e in self.events if e.type == "session.end"]
        end: SessionEnd | None = ends[-1].payload if ends else None
        return end

    @property
    def output(self) -> str | None:
        return self.evidence.output

    @property
    def live_from_turn(self) -> int | None:
        """The user turn this attempt went live at (--nodeval-from-turn), if it replayed some."""
        mark = next((e for e in self.events if e.type == "session.live_from"), None)
        return int(mark.payload.turn) if mark is not None else None

    @property
    def live_events(self) -> list[Event]:
        """The events of the attempt's live part: all of them, or from its `session.live_from`
        on (the replayed turns before it cost nothing)."""
        mark = next((i for i, e in enumerate(self.events) if e.type == "session.live_from"), None)
        return self.events if mark is None else self.events[mark:]

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
        # Retries happened only if this attempt reached the network; a replay serves none.
        retries = (
            0
            if self.mode in REPLAY_MODES
            else sum(
                e.payload_dict().get("retries") or 0
                for e in self.events
                if e.type == "llm.response"
            )
        )
        return {
            "status": self.status,
            "reason": self.divergence or (end.reason if end else "the session did not end"),
            "error_kind": "divergence"
            if self.divergence
            else (end.error_kind if end else "harness"),
            "infra": bool(end and end.infra),
            "latency_ms": end.duration_ms if end else None,
            "wall_ms": round(self.wall_ms, 3),
            "input_tokens": end.usage.input_tokens if end else 0,
            "output_tokens": end.usage.output_tokens if end else 0,
            "turns": end.turns if end else 0,
            "llm_calls": llm_calls,
            "tool_calls": tool_calls,
            "retries": retries,
            "user_ending": end.user_ending if end else None,
        }


def journal_header(
    source: str,
    config_digest: str | None,
    session_id: str | None = None,
    case_digests: dict[str, str] | None = None,
) -> JournalHeader:
    """`config_digest`: the engine config's (EngineConfig.digest), None without one."""
    return JournalHeader(
        session_id=session_id or new_session_id(),
        created_at=now_iso(),
        engine=EngineInfo(version=__version__),
        source=source,  # type: ignore[arg-type]
        config_digest=config_digest,
        case_digests=case_digests,
        redaction=["secrets"],
    )


def _digests(case: Case, settings: AttemptSettings) -> dict[str, str] | None:
    """A recording keeps the digests of its case's files (case/digests.py: record mode
    `missing` compares them); other attempts' journals are not installed and skip the reads."""
    if settings.mode != "record":
        return None
    from ..case.digests import case_digests

    return case_digests(case.directory, case.row, case.dataset)


def case_label(case: Case) -> str:
    """The case's directory relative to the working directory, if it is under it."""
    # As text: every replayed attempt names its case (a Path's relative_to parses both).
    directory, here = str(case.directory), os.getcwd()
    if directory == here:
        return "."
    if directory.startswith(here.rstrip(os.sep) + os.sep):
        return directory[len(here.rstrip(os.sep)) + 1 :]
    return directory


Grader = Callable[[JournalWriter, "str | None"], dict[str, Any]]
"""grade(journal, llm_fake_url) -> verdicts by criterion; runs before the journal closes."""


def run_case(
    case: Case,
    settings: AttemptSettings,
    journal_dir: Path,
    *,
    world: Any = None,
    grade: Grader | None = None,
    fakes: Mapping[str, Any] | None = None,
) -> Observed:
    """Run the reference engine on a case in the given mode.

    `world`: use this world (the caller closes it) instead of opening one for the attempt.
    `grade`: the judge, called with the observed journal still open (see people/judge.py).
    `fakes`: running fakes by kind (llm, composio, mcp) to use instead of starting them
    (the caller stops them); only live and record attempts talk to fakes.
    """
    if case.config is None or case.inputs is None:
        raise NodevalError(
            f"{case.config_path}: missing; the reference engine needs input/config.yaml "
            "(a case for your own agent is run from a Python scenario: nodeval_attempt.run(agent))"
        )
    if settings.from_turn is not None and not settings.replay:
        problem = from_turn_problem(case, settings.from_turn)
        if problem is not None:
            raise NodevalError(problem)
    stash = _stash_for(case, settings)
    owns_world = world is None
    if settings.replay and case.config.command is None:
        world = None  # the journal serves every tool result
    elif world is None:
        world = _open_world(case, settings)
    source = "replay" if settings.replay else ("record" if settings.mode == "record" else "live")
    start = time.perf_counter()
    writer = JournalWriter(
        journal_dir,
        journal_header(source, case.config_digest, settings.session_id, _digests(case, settings)),
        durable=not settings.replay,
        golden=stash.golden if stash is not None else None,
    )
    observed = Observed(
        case.id,
        settings.mode,
        writer.events,
        journal_dir,
        world_backend=world.backend if world else None,
    )
    try:
        _run_engine(case, settings, writer, stash, world, observed, grade, fakes)
    finally:
        try:  # closing a journal can fail (no room; a golden line whose file changed)
            writer.close()
        finally:
            if world is not None and owns_world:
                world.close()
    if stash is not None:
        stash.raise_if_golden_changed()
    observed.wall_ms = (time.perf_counter() - start) * 1000
    observed.golden = stash.golden.events if stash is not None else _golden(case, settings)
    if settings.mode == "record" and settings.install and observed.status == "ok":
        install_journal(journal_dir, case.journal_dir)
    return observed


def _run_engine(
    case: Case,
    settings: AttemptSettings,
    writer: JournalWriter,
    stash: ReplayStash | None,
    world: Any,
    observed: Observed,
    grade: Grader | None,
    fakes: Mapping[str, Any] | None,
) -> None:
    from ..agent.fake_urls import REPLAY_URL, with_fake_urls
    from ..agent.providers import Wiring, build_chain

    assert case.config is not None and case.inputs is not None
    chain = None
    # The tools' resources (MCP sessions) close before the fakes they talk to stop.
    with _services(case, settings, fakes) as services, ExitStack() as resources:
        llm_url = services.llm_url
        config, keys = with_fake_urls(case.config, llm_url or REPLAY_URL)
        try:
            if config.command is not None:
                _run_command(case, settings, writer, stash, world, config, keys, llm_url, observed)
            else:
                prefix = _prefix_for(case, settings)
                wiring = Wiring(writer, stash, keys, settings.limits, prefix)
                chain = build_chain(config.providers, wiring)
                _run_reference_engine(
                    case,
                    settings,
                    writer,
                    stash,
                    world,
                    config,
                    chain,
                    services,
                    resources,
                    llm_url,
                    prefix,
                    observed,
                )
        except ReplayStopped as stop:
            observed.divergence = str(stop.divergence)
            observed.divergence_seq = stop.divergence.seq
        finally:
            if chain is not None:
                chain.close()
        if grade is not None and observed.divergence is None:
            observed.judged = grade(writer, llm_url)
            observed.judge_events = _spent_events(grade)


def _run_reference_engine(
    case: Case,
    settings: AttemptSettings,
    writer: JournalWriter,
    stash: ReplayStash | None,
    world: Any,
    config: Any,
    chain: Any,
    services: Any,
    resources: ExitStack,
    llm_url: str | None,
    prefix: ReplayStash | None = None,
    observed: Observed | None = None,
) -> None:
    from ..agent.engine import Engine
    from ..people.users import PrefixUser

    user = _user_for(case, settings, stash, llm_url, observed)
    if prefix is not None:
        user = PrefixUser(prefix, user, writer)
        user.replayed_session = case.journal().header.session_id
    tools = build_tools(config, stash=stash, services=services, resources=resources)
    skills = _skills(case, config, tools)
    engine = Engine(
        config,
        writer,
        chain,
        tools,
        user,
        world,
        stash,
        session_id=writer.header.session_id,
        mode=settings.mode,
        watch=case.spec.world.watch,
        skills=skills,
        prefix=prefix,
    )
    engine.run()
    if stash is not None:
        stash.check_complete()


def _run_command(
    case: Case,
    settings: AttemptSettings,
    writer: JournalWriter,
    stash: ReplayStash | None,
    world: Any,
    config: Any,
    keys: dict[str, str],
    llm_url: str | None,
    observed: Observed | None = None,
) -> None:
    """A program as the agent (runner/command.py); a divergence raises ReplayStopped."""
    if settings.from_turn is not None:
        raise NodevalError(from_turn_refusal(case, "its agent is a program (command)"))
    from ..agent.providers import Wiring, api_key
    from ..provider_keys import KEY_ENVS
    from .command import run_command_agent

    wiring = Wiring(writer, stash, keys, settings.limits)
    proxy_keys = {}
    for spec in config.providers:
        if spec.name in KEY_ENVS and stash is None:
            proxy_keys[spec.name] = api_key(spec, wiring, *KEY_ENVS[spec.name])
    user = _user_for(case, settings, stash, llm_url, observed)
    divergence = run_command_agent(
        config,
        writer,
        stash,
        world,
        user,
        mode=settings.mode,
        keys=proxy_keys,
        limits=settings.limits,
    )
    if divergence is not None:
        assert stash is not None and stash.stopped is not None
        raise ReplayStopped(stash.stopped)


def _user_for(
    case: Case,
    settings: AttemptSettings,
    stash: ReplayStash | None,
    llm_url: str | None,
    observed: Observed | None = None,
) -> Any:
    """The case's user: the recorded one in replay, else the one inputs.yaml describes.
    `observed` keeps a persona's model calls, to price them."""
    from ..people.users import JournalUser, make_user

    assert case.inputs is not None
    if stash is not None:
        return JournalUser(stash)
    user = make_user(case.inputs.user, str(case.inputs_path), llm_url, limits=settings.limits)
    if observed is not None:
        observed.user_events = _spent_events(user)
    return user


def _spent_events(party: Any) -> list[Event]:
    """The model calls a simulated user or the judge made through its side journal (the
    persona's list is live: it grows while the persona talks); none for a script."""
    spent = getattr(party, "spent_events", None)
    events: list[Event] = spent() if callable(spent) else []
    return events


def _skills(case: Case, config: Any, tools: dict[str, Any]) -> list[Any]:
    """The case's skills, discovered live in every mode (boot events are never served)."""
    if not config.skills:
        return []
    from ..agent.skills import TOOL_NAME, SkillTool, discover_skills

    skills = discover_skills(case.directory / "input" / config.skills)
    if skills:
        tools[TOOL_NAME] = SkillTool(skills)
    return skills


@contextmanager
def _services(
    case: Case, settings: AttemptSettings, given: Mapping[str, Any] | None = None
) -> Iterator[Any]:
    """The fakes of this attempt (services.LiveServices), started when something in the case
    points at them."""
    from .services import live_services

    specs = judge_provider_specs(case, settings)  # a judge grades live, even in full mode
    config = None  # in replay the journal serves every model call and tool
    if not settings.replay:
        config = case.config
        specs += (list(case.config.providers) if case.config else []) + user_provider_specs(case)
    with live_services(case, specs, settings.seed, config, given=given) as services:
        yield services


def user_provider_specs(case: Case) -> list[ProviderSpec]:
    """The persona's provider, which a live attempt's fakes must serve too; none for a script."""
    from ..people.inputs import PersonaUserSpec

    user = case.inputs.user if case.inputs else None
    return [user.provider] if isinstance(user, PersonaUserSpec) else []


def judge_provider_specs(case: Case, settings: AttemptSettings) -> list[Any]:
    if settings.mode == "deterministic":
        return []
    specs = [a.judge or settings.judge for a in case.assertions if a.kind == "judge"]
    return [s for s in specs if s is not None]


def run_agent_case(
    agent: Any,
    case: Case,
    settings: AttemptSettings,
    journal_dir: Path,
    inputs: list[str] | None = None,
    fakes: Mapping[str, Any] | None = None,
) -> Observed:
    """Run a user's own agent (see agent/adapter.py) on a case in the given mode."""
    from ..agent.adapter import run_agent
    from ..people.inputs import ScriptedUserSpec
    from ..people.users import JournalUser, ScriptedUser, make_user

    if settings.from_turn is not None:
        raise NodevalError(from_turn_refusal(case, "it is run by your own agent"))
    stash = _stash_for(case, settings)
    if stash is not None:
        user: Any = JournalUser(stash)
    elif inputs is not None:
        user = ScriptedUser(
            ScriptedUserSpec(kind="scripted", inputs=inputs), "the inputs given to the agent"
        )
    elif case.inputs is not None:
        user = make_user(case.inputs.user, str(case.inputs_path), limits=settings.limits)
    else:
        raise NodevalError(
            f"{case.inputs_path}: missing; give the agent's inputs there or pass inputs=[...]"
        )
    source = "replay" if settings.replay else ("record" if settings.mode == "record" else "live")
    start = time.perf_counter()
    header = journal_header(source, None, case_digests=_digests(case, settings))
    writer = JournalWriter(
        journal_dir,
        header,
        durable=not settings.replay,
        golden=stash.golden if stash is not None else None,
    )
    try:
        divergence, _ = run_agent(
            agent,
            writer,
            user,
            stash,
            mode=settings.mode,
            fakes=dict(fakes or {}),
            limits=settings.limits,
            needs_model=settings.mode == "record" and case.spec.needs_model,
        )
    finally:
        writer.close()
    if stash is not None:
        stash.raise_if_golden_changed()
    observed = Observed(
        case.id,
        settings.mode,
        writer.events,
        journal_dir,
        divergence=divergence,
        divergence_seq=stash.stopped.seq if divergence and stash and stash.stopped else None,
        wall_ms=(time.perf_counter() - start) * 1000,
        golden=_golden(case, settings),
        user_events=_spent_events(user),
    )
    if settings.mode == "record" and settings.install and observed.status == "ok":
        install_journal(journal_dir, case.journal_dir)
    return observed


RECORD_JOURNAL_ENV = "NODEVAL_RECORD_JOURNAL"
"""Where `nodeval record` asks a case's `_record/record.py` to write the journal it records."""


def record_agent(
    agent: Any,
    *,
    case_dir: Path | str | None = None,
    journal_dir: Path | str | None = None,
    inputs: list[str] | None = None,
) -> Observed:
    """Record your own agent on a case: what a case's `_record/record.py` calls.

    case_dir: the case directory (default: the current one, where `nodeval record` runs the
    script). journal_dir: where to write the journal (default: the directory `nodeval record`
    names in NODEVAL_RECORD_JOURNAL, which checks the recording before installing it; run by
    hand, the case's journal/, replaced only when the session ends ok).
    """
    from ..case.directory import load_case

    case = load_case(Path(case_dir) if case_dir is not None else Path.cwd())
    target = journal_dir or os.environ.get(RECORD_JOURNAL_ENV)
    if target:
        return run_agent_case(
            agent, case, AttemptSettings(mode="record", install=False), Path(target), inputs
        )
    # Run by hand: recorded beside the case's journal and installed by a rename when the
    # session ends ok and says something new; nothing is left in the temp directory.
    from ..journal.sameness import install_if_changed
    from ..journal.writer import install_staged, recording_beside

    with recording_beside(case.journal_dir) as staging:
        settings = AttemptSettings(mode="record", install=False)
        observed = run_agent_case(agent, case, settings, staging, inputs)
        if observed.status == "ok":
            install_if_changed(case.journal_dir, staging, install_staged)
            observed.journal_dir = case.journal_dir
    return observed


def build_tools(
    config: EngineConfig,
    *,
    stash: ReplayStash | None = None,
    services: Any = None,
    resources: ExitStack | None = None,
) -> dict[str, Any]:
    """The engine's tools; see toolset.build_tools (MCP tools need `resources` to close their
    sessions)."""
    from ..agent.toolset import build_tools as build

    return build(config, stash=stash, services=services, resources=resources)


def _stash_for(case: Case, settings: AttemptSettings) -> ReplayStash | None:
    if not settings.replay:
        return None
    ignore = [re.compile(pattern) for pattern in case.spec.match_ignore]
    return ReplayStash(case.journal(), case=case_label(case), match=settings.match, ignore=ignore)


def _prefix_for(case: Case, settings: AttemptSettings) -> ReplayStash | None:
    """The stash of the turns a --nodeval-from-turn attempt replays before going live."""
    if settings.from_turn is None or settings.replay:
        return None
    return ReplayStash(case.journal(), case=case_label(case), live_from=settings.from_turn)


def from_turn_refusal(case: Case, why: str) -> str:
    return (
        f"case '{case.id}': --nodeval-from-turn replays the reference engine's turns "
        f"(input/config.yaml) only, and {why}; run it without --nodeval-from-turn"
    )


def from_turn_problem(case: Case, turn: int) -> str | None:
    """Why case cannot continue live from user turn `turn` (--nodeval-from-turn), or None.

    It needs the reference engine (not an own agent or a program), a golden journal holding
    the turns before it, and a turn `turn` to run: a scripted input for it, or, for a persona,
    a recorded one."""
    from ..journal.replay import replayed_turns, user_turns
    from ..people.inputs import ScriptedUserSpec

    if case.config is None:
        return from_turn_refusal(case, "it is run by your own agent")
    if case.config.command is not None:
        return from_turn_refusal(case, "its agent is a program (command)")
    if not (case.journal_dir / "events.jsonl").is_file():
        return (
            f"case '{case.id}' has no journal ({case.journal_dir}) to replay "
            f"{replayed_turns(turn)} from; record it first (nodeval record {case.id}), "
            f"then continue from turn {turn}"
        )
    recorded = user_turns(case.journal())
    user = case.inputs.user if case.inputs is not None else None
    scripted = len(user.inputs) if isinstance(user, ScriptedUserSpec) else None
    turns = max(recorded, scripted) if scripted is not None else recorded
    if recorded < turn - 1 or turns < turn:
        return (
            f"case '{case.id}' has {turns} user turn(s) ({recorded} in its journal"
            + (f", {scripted} in input/inputs.yaml" if scripted is not None else "")
            + f"); --nodeval-from-turn {turn} needs {replayed_turns(turn)} in the journal "
            f"and a turn {turn} to run live"
        )
    return None


def _golden(case: Case, settings: AttemptSettings) -> list[Any] | None:
    if settings.mode == "record" or not (case.journal_dir / "events.jsonl").is_file():
        return None
    return case.journal().events


def opens_world(case: Case, settings: AttemptSettings) -> bool:
    """Whether `run_case` opens a world for this case (unless given one): live tools that act
    in it, or a program as the agent (in every mode: its tools run again in replay)."""
    if case.config is not None and case.config.command is not None:
        return True
    return (
        not settings.replay
        and case.config is not None
        and bool(WORLD_TOOLS & {t.name for t in case.config.tools})
    )


def _open_world(case: Case, settings: AttemptSettings) -> Any:
    assert case.config is not None
    if not opens_world(case, settings):
        return None
    from ..world.select import open_world

    # A program runs in a copy of input/ (its code is there); the engine's tools in input/world.
    seed = "input" if case.config.command is not None else "input/world"
    return open_world(
        settings.world_backend,
        run_id=settings.run_id,
        seed_dir=case.directory / seed,
        network=case.spec.world.network,
        lock_dir=settings.work_dir,
    )
