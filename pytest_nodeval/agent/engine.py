"""The reference engine: a small, real tool-calling agent loop.

One *turn* is one step of the loop: a model call and the tool calls it asks for. The
engine emits session.*, tool.register, skill.discover, io.*, agent.turn.*, plan.*, tool.*
(and, through its providers, llm.*) events into the journal. It does not know whether it is live or
replayed: the providers' wiring and the replay stash decide where answers come from.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..errors import NodevalError, ProviderError
from ..journal.events import same_json
from ..journal.replay import ReplayStash, ReplayStopped
from ..journal.writer import JournalWriter
from ..world import World, snapshot
from .config import EngineConfig
from .planning import PLAN_INSTRUCTION, parse_plan, plan_result, with_plan
from .providers import ModelRequest, ProviderChain, ToolCallRequest
from .simulated_user import SimulatedUser
from .skills import Skill, discover_payload, skills_prompt
from .tools import Tool, ToolContext, ToolOutcome, missing_arguments, register_payload

# The fields every tool.result has; anything else a recorded result carries is replayed as is.
_RESULT_FIELDS = frozenset({"tool", "call_id", "ok", "result", "error", "latency_ms"})


class _LimitReached(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Clock:
    """Elapsed time of the session: real when live; in replay, the recorded latencies."""

    def __init__(self, journal: JournalWriter, replay: bool) -> None:
        self._start = time.perf_counter()
        self._journal = journal
        self._replay = replay
        self._seen = 0
        self._recorded_ms = 0.0

    def elapsed_s(self) -> float:
        if not self._replay:
            return time.perf_counter() - self._start
        # Replay is instant; a time limit hit while recording must be hit again here.
        events = self._journal.events
        for event in events[self._seen :]:
            if event.type in ("llm.response", "tool.result"):
                self._recorded_ms += event.payload.latency_ms
        self._seen = len(events)
        return self._recorded_ms / 1000


@dataclass
class EngineResult:
    status: str
    reason: str | None = None
    error_kind: str | None = None
    infra: bool = False
    output: str | None = None
    turns: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})


@dataclass
class Engine:
    config: EngineConfig
    journal: JournalWriter
    chain: ProviderChain
    tools: dict[str, Tool]
    user: SimulatedUser
    world: World | None = None
    stash: ReplayStash | None = None
    session_id: str = ""
    mode: str = "live"
    watch: Sequence[str] = ()
    skills: Sequence[Skill] = ()
    """Discovered at boot from the config's `skills` directory (agent/skills.py)."""
    prefix: ReplayStash | None = None
    """A live attempt's --nodeval-from-turn stash: it serves the tool results of the turns
    before N (the world is not touched for them), until it hands over."""
    _result: EngineResult = field(init=False)
    _clock: Clock = field(init=False)
    _system: str = field(init=False, default="")
    _plan: list[str] | None = field(init=False, default=None)
    _called: list[str] = field(init=False, default_factory=list)

    def run(self) -> EngineResult:
        self._result = EngineResult(status="ok")
        self._clock = Clock(self.journal, replay=self.stash is not None)
        self._system = self.config.system_prompt
        self.journal.emit(
            "session.start",
            {
                "engine": "pytest-nodeval",
                "version": __version__,
                "session_id": self.session_id,
                "mode": self.mode,
                # The case's config as written (the header's), not this copy with the fakes'
                # URLs filled in: their ports change every run, and so would every journal.
                "config_digest": self.journal.header.config_digest or self.config.digest(),
            },
        )
        for tool in self.tools.values():
            self.journal.emit("tool.register", register_payload(tool))
        if self.skills:
            self.journal.emit("skill.discover", discover_payload(list(self.skills)))
            self._system = f"{self._system}\n\n{skills_prompt(list(self.skills))}".lstrip()
        try:
            self._conversation()
        except _LimitReached as limit:
            self._end("limit", limit.reason, "agent")
        except ProviderError as exc:
            self._end("error", str(exc), "provider", infra=True)
        except NodevalError as exc:
            self._end("error", str(exc), "harness")
        except ReplayStopped as stop:  # the journal ends saying so, and the attempt stops
            self._end("divergence", str(stop.divergence), "divergence")
            raise
        finally:
            self._finish()
        return self._result

    def _end(self, status: str, reason: str, kind: str, *, infra: bool = False) -> None:
        self._result.status, self._result.reason = status, reason
        self._result.error_kind, self._result.infra = kind, infra

    def _finish(self) -> None:
        if self._plan is not None:
            self.journal.emit(
                "plan.result", plan_result(self._plan, self._called, list(self.tools))
            )
        self._emit_snapshot()
        recorded = self.stash.recorded_end if self.stash is not None else None
        duration_ms = recorded.payload.duration_ms if recorded else self._clock.elapsed_s() * 1000
        self.journal.emit(
            "session.end",
            {
                "status": self._result.status,
                "reason": self._result.reason,
                "error_kind": self._result.error_kind,
                "infra": self._result.infra,
                "duration_ms": round(duration_ms, 3),
                "usage": self._result.usage,
                "turns": self._result.turns,
                "user_ending": getattr(self.user, "ending", None),
            },
        )

    def _emit_snapshot(self) -> None:
        if self.stash is not None:
            for event in self.stash.snapshots:
                self.journal.emit("world.snapshot", event.payload_dict())
        elif self.world is not None and self.watch:
            self.journal.emit(
                "world.snapshot",
                {"backend": self.world.backend, "files": snapshot(self.world, self.watch)},
            )

    def _conversation(self) -> None:
        messages: list[dict[str, Any]] = []
        last_output: str | None = None
        while (turn := self.user.next_input(last_output)) is not None:
            self.journal.emit(
                "io.input", {"text": turn.text, "source": turn.source}, turn=self._result.turns + 1
            )
            messages.append({"role": "user", "text": turn.text})
            if self.config.plan and self._plan is None:
                self._make_plan(messages)
            last_output = self._answer(messages)
            self._result.output = last_output

    def _make_plan(self, messages: list[dict[str, Any]]) -> None:
        """One model call without tools for the plan, which then stays in the system prompt."""
        self.journal.set_turn(self._result.turns + 1)
        reply = self.chain.complete(
            ModelRequest(
                system=f"{self._system}\n\n{PLAN_INSTRUCTION}".lstrip(),
                messages=messages,
                tools=(),
                timeout_s=self._remaining_s(),
                temperature=self.config.temperature,
            )
        )
        self._count_tokens(reply.input_tokens, reply.output_tokens)
        self._plan = parse_plan(reply.text)
        self.journal.emit("plan.created", {"text": reply.text, "steps": self._plan})
        self._system = with_plan(self._system, reply.text)

    def _answer(self, messages: list[dict[str, Any]]) -> str:
        """Steps of the loop until the model replies without asking for tools."""
        while True:
            reply_text, asked_tools = self._step(messages)
            if not asked_tools:
                self.journal.emit("io.output", {"text": reply_text})
                return reply_text

    def _step(self, messages: list[dict[str, Any]]) -> tuple[str, bool]:
        limits = self.config.limits
        if self._result.turns >= limits.max_turns:
            raise _LimitReached(f"max_turns ({limits.max_turns}) reached")
        remaining = self._remaining_s()
        self._result.turns += 1
        self.journal.set_turn(self._result.turns)
        self.journal.emit("agent.turn.start", {})
        reply = self.chain.complete(
            ModelRequest(
                system=self._system,
                messages=messages,
                tools=tuple(t.definition for t in self.tools.values()),
                timeout_s=remaining,
                temperature=self.config.temperature,
            )
        )
        self._count_tokens(reply.input_tokens, reply.output_tokens)
        calls = [{"id": c.id, "name": c.name, "args": c.args} for c in reply.tool_calls]
        messages.append({"role": "assistant", "text": reply.text, "tool_calls": calls})
        for call in reply.tool_calls:
            outcome = self._call_tool(call)
            content = json.dumps(outcome.result) if outcome.ok else f"error: {outcome.error}"
            messages.append(
                {
                    "role": "tool",
                    "call_id": call.id,
                    "name": call.name,
                    "content": content,
                    "is_error": not outcome.ok,
                }
            )
        self.journal.emit("agent.turn.end", {"stop_reason": reply.stop_reason})
        if limits.max_tokens is not None and sum(self._result.usage.values()) > limits.max_tokens:
            raise _LimitReached(f"max_tokens ({limits.max_tokens}) exceeded")
        return reply.text, bool(reply.tool_calls)

    def _remaining_s(self) -> float:
        remaining = self.config.limits.timeout_s - self._clock.elapsed_s()
        if remaining <= 0:
            raise _LimitReached(f"timeout_s ({self.config.limits.timeout_s:g}s) reached")
        return remaining

    def _count_tokens(self, input_tokens: int, output_tokens: int) -> None:
        self._result.usage["input_tokens"] += input_tokens
        self._result.usage["output_tokens"] += output_tokens

    def _call_tool(self, call: ToolCallRequest) -> ToolOutcome:
        payload = {"tool": call.name, "call_id": call.id, "args": call.args}
        stash = self.stash or (self.prefix if self.prefix and self.prefix.serving else None)
        recorded = None
        if stash is None:
            self.journal.emit("tool.call", payload)
        else:
            try:
                recorded_call, recorded = stash.tool_exchange(call.name, call.id, call.args)
            except ReplayStopped:  # the call the journal does not have is journaled first
                self.journal.emit("tool.call", payload)
                raise
            if not recorded_call.payload.model_extra and same_json(
                recorded_call.payload.args, call.args
            ):  # what this call's line would say, byte for byte: served as recorded
                self.journal.emit_recorded(recorded_call)
            else:
                self.journal.emit("tool.call", payload)
        self._called.append(call.name)
        tool = self.tools.get(call.name)
        if recorded is not None and (tool is None or tool.side_effects):
            # Replay: the world is not touched; the recorded result (same tool and call id,
            # the stash checked) is served verbatim.
            self.journal.emit_recorded(recorded)
            served = recorded.payload_dict()  # the golden event's, parsed once per journal
            extra = {k: v for k, v in served.items() if k not in _RESULT_FIELDS}
            return ToolOutcome(
                served["ok"], served.get("result"), served.get("error"), extra or None
            )
        start = time.perf_counter()
        outcome = self._run_tool(tool, call)
        self.journal.emit(
            "tool.result",
            {
                **(outcome.extra or {}),
                "tool": call.name,
                "call_id": call.id,
                "ok": outcome.ok,
                "result": outcome.result,
                "error": outcome.error,
                "latency_ms": round((time.perf_counter() - start) * 1000, 3),
            },
        )
        return outcome

    def _run_tool(self, tool: Tool | None, call: ToolCallRequest) -> ToolOutcome:
        if tool is None:
            return ToolOutcome(
                False, None, f"unknown tool {call.name!r} (available: {', '.join(self.tools)})"
            )
        missing = missing_arguments(tool, call.args)
        if missing:
            return ToolOutcome(False, None, f"missing argument(s): {', '.join(missing)}")
        timeout = min(self.config.limits.tool_timeout_s, self._remaining_s())
        ctx = ToolContext(world=self.world, call_id=call.id, timeout_s=timeout, ask=self._ask)
        try:
            return tool.run(call.args, ctx)
        except NodevalError:
            raise
        except Exception as exc:  # a failing tool is the agent's problem to handle, not a crash
            return ToolOutcome(False, None, f"{type(exc).__name__}: {exc}")

    def _ask(self, call_id: str, question: str) -> str:
        self.journal.emit("io.ask", {"call_id": call_id, "question": question})
        answer = self.user.answer(call_id, question)
        self.journal.emit(
            "io.ask.response", {"call_id": call_id, "text": answer.text, "source": answer.source}
        )
        return answer.text
