"""Production sampling: keep a fraction of real sessions, and every failed one, as case candidates.

    from pytest_nodeval.sampler import Sampler, SamplerSettings, run_with_sampler

    sampler = Sampler(SamplerSettings(active=True, rate=0.05))    # opt-in 1, in code
    result = run_with_sampler(config, ["How big is the workspace?"], sampler)

and `NODEVAL_SAMPLER=1` in the environment of the deployments that should sample (opt-in 2).
Without both the sampler does nothing. Sessions of your own agent are observed the same
way: `sampler.observe(writer.events, error=...)`, or
`run_agent_with_sampler(agent, inputs, sampler)`.

The production path only pays for the decision (a sha256 of the session id) and an
enqueue. Redaction, serialisation, writing and eviction run on one background thread
behind a bounded queue; a full queue drops the session with a log message. Whatever goes
wrong inside the sampler is logged (logger `pytest_nodeval.sampler`) and swallowed: the
production session never sees it. Log messages never quote session content, which may
not be redacted yet.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..agent.config import EngineConfig
from ..errors import ConfigError
from ..journal.events import JournalHeader, new_session_id, now_iso
from ..journal.redact import Redactor, chain, pii_redactor
from ..journal.writer import JournalWriter
from .store import DEFAULT_SAMPLES_DIR, Capture, build_sample, evict, list_samples, write_sample

if TYPE_CHECKING:
    from ..agent.engine import EngineResult
    from ..agent.simulated_user import SimulatedUser
    from ..people.inputs import InputsSpec
    from ..world import World

# Named for the public module (docs/sampling.md), not for where the code lives.
logger = logging.getLogger("pytest_nodeval.sampler")

ENV_SWITCH = "NODEVAL_SAMPLER"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"", "0", "false", "no", "off"})


@dataclass(frozen=True, slots=True)
class SamplerSettings:
    active: bool = False
    """Opt-in 1, in code: a sampler built without `active=True` never captures anything."""
    enabled: bool | None = None
    """Opt-in 2, per deployment: None reads NODEVAL_SAMPLER (1/true/yes/on) from the environment."""
    rate: float = 0.01
    """Fraction of sessions kept, decided from the session id (the same id always decides the
    same)."""
    failure_capture: bool = True
    """Keep every failed session, whatever the rate."""
    out_dir: Path = DEFAULT_SAMPLES_DIR
    """Where samples go (`~` is expanded): one directory per session."""
    max_bytes: int = 256 * 1024 * 1024
    """Size cap of out_dir's samples; the oldest are deleted first when a new one would exceed
    it."""
    redactors: tuple[Redactor, ...] = ()
    """Run after the default redactor (API keys, bearer tokens, e-mail addresses, card-like
    numbers)."""
    queue_size: int = 64
    """Sessions waiting or being written; more are dropped (with a log message)."""

    def __post_init__(self) -> None:
        if (
            isinstance(self.rate, bool)
            or not isinstance(self.rate, (int, float))
            or not 0 <= self.rate <= 1
        ):
            raise ConfigError(
                f"SamplerSettings.rate must be a number from 0 to 1, got {self.rate!r}"
            )
        if (
            isinstance(self.max_bytes, bool)
            or not isinstance(self.max_bytes, int)
            or self.max_bytes < 1
        ):
            raise ConfigError(
                "SamplerSettings.max_bytes must be a positive number of bytes, "
                f"got {self.max_bytes!r}"
            )
        if (
            isinstance(self.queue_size, bool)
            or not isinstance(self.queue_size, int)
            or self.queue_size < 1
        ):
            raise ConfigError(
                f"SamplerSettings.queue_size must be a positive integer, got {self.queue_size!r}"
            )
        not_callable = [r for r in self.redactors if not callable(r)]
        if not_callable:
            raise ConfigError(
                f"SamplerSettings.redactors must be callables (event_type, payload) -> payload, "
                f"got {not_callable[0]!r}"
            )


# -- the decision ---------------------------------------------------------------------------


def sample_point(session_id: str) -> float:
    """The session id mapped to [0, 1) by sha256: uniform, and the same on every machine."""
    digest = hashlib.sha256(session_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_sampled(session_id: str, rate: float) -> bool:
    return sample_point(session_id) < rate


@dataclass(frozen=True, slots=True)
class Decision:
    session_id: str
    reason: Literal["sampled", "failed"] | None
    """Why the session is kept; None when it is not."""
    error: str | None = None

    @property
    def captured(self) -> bool:
        return self.reason is not None


def decide(session_id: str, failure: str | None, settings: SamplerSettings) -> Decision:
    if failure is not None and settings.failure_capture:
        return Decision(session_id, "failed", failure)
    if is_sampled(session_id, settings.rate):
        return Decision(session_id, "sampled", failure)
    return Decision(session_id, None, failure)


def session_failure(events: Sequence[Any], error: BaseException | str | None) -> str | None:
    """Why a session failed (the error given, or a session.end that is not "ok"), or None."""
    if error is not None:
        return error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    ends = [e for e in events if _type(e) == "session.end"]
    if not ends:
        return "the session did not end (no session.end event)"
    end = _payload(ends[-1])
    if end.get("status") == "ok":
        return None
    return f"{end.get('status')}: {end.get('reason') or 'no reason given'}"


def _type(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else getattr(event, "type", None)


def _payload(event: Any) -> dict[str, Any]:
    return dict(event.get("payload") or {}) if isinstance(event, dict) else event.payload_dict()


# -- the sampler ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SamplerStats:
    observed: int = 0
    queued: int = 0
    written: int = 0
    dropped: int = 0
    """Kept sessions that never reached the disk (queue full, too big, write failed)."""


class Sampler:
    """Watches finished sessions and keeps some as sample directories (see the module doc)."""

    def __init__(
        self, settings: SamplerSettings, *, environ: Mapping[str, str] | None = None
    ) -> None:
        self.settings = settings
        self.enabled = settings.active and _switched_on(
            settings.enabled, os.environ if environ is None else environ
        )
        self.redactor: Redactor = chain(pii_redactor, *settings.redactors)
        self._writer = _SampleWriter(
            settings, self.redactor, ["pii", *(_name(r) for r in settings.redactors)]
        )
        self._thread = _CaptureThread(settings.queue_size, self._writer)
        # At exit (or when the sampler is dropped), give queued samples a moment to land.
        weakref.finalize(self, self._thread.stop, 2.0)

    def observe(
        self,
        events: Sequence[Any],
        *,
        config: EngineConfig | None = None,
        error: BaseException | str | None = None,
        header: JournalHeader | None = None,
        session_id: str | None = None,
    ) -> Decision | None:
        """Decide about a finished session and queue it for capture. Never raises.

        `events` are the journal's events (JournalWriter.events, or dicts shaped like the
        lines of events.jsonl); `error` is what made the session fail, if the caller knows.
        Returns the decision, or None when the sampler is off.
        """
        if not self.enabled:
            return None
        try:
            return self._observe(list(events), config, error, header, session_id)
        except Exception as exc:  # the production session must never see the sampler fail
            logger.warning(
                "nodeval sampler: could not observe a session (%s); it was not captured, "
                "and the session itself is unaffected",
                type(exc).__name__,
            )
            return None

    def _observe(
        self,
        events: list[Any],
        config: EngineConfig | None,
        error: BaseException | str | None,
        header: JournalHeader | None,
        session_id: str | None,
    ) -> Decision:
        session_id = session_id or (header.session_id if header else None) or _session_id_of(events)
        decision = decide(session_id, session_failure(events, error), self.settings)
        self._writer.count("observed")
        if decision.reason is not None:
            capture = Capture(
                session_id, decision.reason, decision.error, events, header, config, now_iso()
            )
            if self._thread.submit(capture):
                self._writer.count("queued")
            else:
                self._writer.count("dropped")
                logger.warning(
                    "nodeval sampler: capture queue full (%d sessions waiting); session %s "
                    "(%s) was dropped. Lower the rate or raise SamplerSettings.queue_size",
                    self.settings.queue_size,
                    session_id,
                    decision.reason,
                )
        return decision

    @property
    def stats(self) -> SamplerStats:
        return self._writer.stats()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued session is written (or dropped); False on timeout."""
        return self._thread.flush(timeout)

    def close(self, timeout: float | None = 5.0) -> bool:
        """Flush and stop the background thread; later observations are captured again lazily."""
        return self._thread.stop(timeout)

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _switched_on(enabled: bool | None, environ: Mapping[str, str]) -> bool:
    if enabled is not None:
        return enabled
    value = environ.get(ENV_SWITCH, "").strip().lower()
    if value in _ON:
        return True
    if value not in _OFF:
        logger.warning(
            "nodeval sampler: %s=%r is not one of %s (on) or %s (off); the sampler stays off",
            ENV_SWITCH,
            value,
            "/".join(sorted(_ON)),
            "/".join(sorted(_OFF - {""})),
        )
    return False


def _session_id_of(events: Sequence[Any]) -> str:
    start = next((e for e in events if _type(e) == "session.start"), None)
    found = _payload(start).get("session_id") if start is not None else None
    # Without an id the decision cannot be reproduced; a fresh one still keeps the rate.
    return str(found) if found else new_session_id()


def _name(redactor: Redactor) -> str:
    return getattr(redactor, "__name__", type(redactor).__name__)


class _SampleWriter:
    """Runs on the background thread: redact, size-check, write, evict. Logs instead of raising."""

    def __init__(self, settings: SamplerSettings, redactor: Redactor, redaction: list[str]) -> None:
        self.settings, self.redactor, self.redaction = settings, redactor, redaction
        self.out_dir = Path(settings.out_dir).expanduser()
        self._counts = {"observed": 0, "queued": 0, "written": 0, "dropped": 0}
        self._lock = threading.Lock()
        self._known_bytes: int | None = None
        """The total size of out_dir's samples as last seen; None until first scanned."""

    def count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def stats(self) -> SamplerStats:
        with self._lock:
            return SamplerStats(**self._counts)

    def __call__(self, capture: Capture) -> None:
        try:
            sample = build_sample(capture, self.redactor, self.redaction)
        except Exception as exc:
            # The message may quote unredacted content (a redactor's or a validator's), so only
            # the type.
            self._drop(
                "nodeval sampler: session %s was not captured: preparing the sample failed with %s "
                "(in a redactor, or the events are not journal events)",
                capture.session_id,
                type(exc).__name__,
            )
            return
        if sample.size > self.settings.max_bytes:
            self._drop(
                "nodeval sampler: session %s was not captured: its sample is %d bytes, more than "
                "SamplerSettings.max_bytes=%d",
                capture.session_id,
                sample.size,
                self.settings.max_bytes,
            )
            return
        self._write(capture, sample)

    def _write(self, capture: Capture, sample: Any) -> None:
        if (self.out_dir / sample.info.id).exists():
            logger.info(
                "nodeval sampler: session %s is already in %s", capture.session_id, self.out_dir
            )
            return
        try:
            write_sample(self.out_dir, sample)
        except OSError as exc:
            self._drop(
                "nodeval sampler: session %s was not captured: could not write %s (%s). "
                "The session itself is unaffected; "
                "make SamplerSettings.out_dir a writable directory with free space",
                capture.session_id,
                self.out_dir / sample.info.id,
                exc,
            )
            return
        self.count("written")
        self._keep_under_cap(sample.info.id, sample.size)

    def _keep_under_cap(self, new_id: str, new_size: int) -> None:
        try:
            if self._known_bytes is None:
                self._known_bytes = sum(s.size for s in list_samples(self.out_dir))
            else:
                self._known_bytes += new_size
            if self._known_bytes > self.settings.max_bytes:
                # Rescan: other processes may write to (and evict from) the same out_dir.
                removed, self._known_bytes = evict(
                    self.out_dir, self.settings.max_bytes, keep=new_id
                )
                logger.info(
                    "nodeval sampler: evicted %d oldest sample(s) to stay under %d bytes",
                    len(removed),
                    self.settings.max_bytes,
                )
        except OSError as exc:
            self._known_bytes = None
            logger.warning(
                "nodeval sampler: could not evict old samples in %s (%s)", self.out_dir, exc
            )

    def _drop(self, message: str, *args: Any) -> None:
        self.count("dropped")
        logger.warning(message, *args)


class _CaptureThread:
    """One daemon thread fed by a queue; `queue_size` bounds what waits or is being written.

    Started on first use in each process, so a sampler created before a fork (gunicorn
    `--preload`) still writes from the children.
    """

    def __init__(self, size: int, work: Callable[[Capture], None]) -> None:
        self._size, self._work = size, work
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._queue: queue.SimpleQueue[Capture | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def submit(self, capture: Capture) -> bool:
        with self._lock:
            if self._pid != os.getpid() or self._thread is None:
                self._start()
            if self._pending >= self._size:
                return False
            self._pending += 1
        self._queue.put(capture)
        return True

    def _start(self) -> None:
        if self._pid != os.getpid():  # a forked child inherits the counter but not the thread
            self._pending, self._pid = 0, os.getpid()
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, args=(self._queue,), name="nodeval-sampler", daemon=True
        )
        self._thread.start()

    def _run(self, jobs: queue.SimpleQueue[Capture | None]) -> None:
        while (capture := jobs.get()) is not None:
            try:
                self._work(capture)
            except Exception as exc:  # the writer logs its own failures; this is the last net
                logger.warning(
                    "nodeval sampler: capture failed unexpectedly (%s)", type(exc).__name__
                )
            finally:
                with self._lock:
                    self._pending -= 1
                    self._idle.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def stop(self, timeout: float | None = 5.0) -> bool:
        flushed = self.flush(timeout)
        with self._lock:
            thread, jobs, self._thread = self._thread, self._queue, None
        if thread is not None and self._pid == os.getpid():
            jobs.put(None)
            thread.join(timeout)
        return flushed


# -- running a session with the sampler attached ------------------------------------------------


def run_with_sampler(
    config: EngineConfig,
    inputs: Sequence[str] | InputsSpec | SimulatedUser,
    sampler: Sampler | None = None,
    *,
    session_id: str | None = None,
    world: World | None = None,
    journal_dir: Path | None = None,
) -> EngineResult:
    """Run the reference engine live on one session, then let the sampler observe it.

    The journal is kept in memory unless `journal_dir` is given, so nothing reaches the
    disk but what the sampler writes after redaction. The result (and any exception) is
    the engine's own: the sampler cannot change either.
    """
    from ..runner.session import journal_header

    header = journal_header("live", config.digest())
    if session_id is not None:
        header = header.model_copy(update={"session_id": session_id})
    writer = JournalWriter(journal_dir, header)
    error: BaseException | None = None
    try:
        return _run_engine_live(config, _user_for(inputs), writer, world)
    except BaseException as exc:
        error = exc
        raise
    finally:
        writer.close()
        if sampler is not None:
            sampler.observe(writer.events, config=config, header=header, error=error)


def _run_engine_live(
    config: EngineConfig, user: SimulatedUser, writer: JournalWriter, world: World | None
) -> EngineResult:
    from ..agent.engine import Engine
    from ..agent.providers import Wiring, build_chain
    from ..runner.session import WORLD_TOOLS, build_tools

    own_world = world is None and bool(WORLD_TOOLS & {t.name for t in config.tools})
    if own_world:
        from ..world.local import LocalWorld

        world = LocalWorld()
    chain_ = build_chain(config.providers, Wiring(writer))
    try:
        with ExitStack() as resources:  # MCP sessions close when the session ends
            engine = Engine(
                config,
                writer,
                chain_,
                build_tools(config, resources=resources),
                user,
                world,
                session_id=writer.header.session_id,
                mode="live",
            )
            return engine.run()
    finally:
        chain_.close()
        if own_world and world is not None:
            world.close()


def _user_for(inputs: Sequence[str] | InputsSpec | SimulatedUser) -> SimulatedUser:
    from ..people.inputs import InputsSpec, ScriptedUserSpec
    from ..people.users import ScriptedUser, make_user

    if isinstance(inputs, InputsSpec):
        return make_user(inputs.user, "the inputs given to run_with_sampler")
    if isinstance(inputs, (list, tuple)):
        return ScriptedUser(
            ScriptedUserSpec(kind="scripted", inputs=list(inputs)), "the inputs given"
        )
    return inputs  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class AgentSession:
    """What `run_agent_with_sampler` reports about one session of your own agent."""

    session_id: str
    status: str
    error: str | None = None
    output: str | None = None
    events: list[Any] = field(default_factory=list, repr=False)


def run_agent_with_sampler(
    agent: Any,
    inputs: Sequence[str] | SimulatedUser,
    sampler: Sampler | None = None,
    *,
    session_id: str | None = None,
    journal_dir: Path | None = None,
) -> AgentSession:
    """Run your own agent (see agent/adapter.py) live on one session, then let the sampler
    observe it."""
    from ..agent.adapter import run_agent
    from ..runner.session import journal_header

    header = journal_header("live", None)
    if session_id is not None:
        header = header.model_copy(update={"session_id": session_id})
    writer = JournalWriter(journal_dir, header)
    try:
        run_agent(agent, writer, _user_for(inputs), None, mode="live", guard=False)
    finally:
        writer.close()
        if sampler is not None:
            sampler.observe(writer.events, header=header)
    end = writer.events[-1].payload
    outputs = [e.payload.text for e in writer.events if e.type == "io.output"]
    return AgentSession(
        header.session_id, end.status, end.reason, outputs[-1] if outputs else None, writer.events
    )


__all__ = [
    "AgentSession",
    "Decision",
    "ENV_SWITCH",
    "Sampler",
    "SamplerSettings",
    "SamplerStats",
    "decide",
    "is_sampled",
    "run_agent_with_sampler",
    "run_with_sampler",
    "sample_point",
    "session_failure",
]
