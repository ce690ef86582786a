"""The simulated user: who types the inputs and answers the agent's questions.

Chosen in a case's `input/inputs.yaml`. Every turn it produces is journaled as
`io.input` / `io.ask.response` with its source, so replay re-emits the recorded turns
(`JournalUser`) without asking anyone.
"""

from __future__ import annotations

import re
from typing import Any

from ..agent.simulated_user import SimulatedUser, UserTurn
from ..errors import NodevalError
from ..journal.replay import ReplayStash
from .inputs import PersonaUserSpec, ScriptedUserSpec


class ScriptedUser:
    def __init__(self, spec: ScriptedUserSpec, where: str = "input/inputs.yaml") -> None:
        self._inputs = list(spec.inputs)
        self._answers = list(spec.answers)
        self._where = where

    def next_input(self, last_output: str | None) -> UserTurn | None:
        return UserTurn(self._inputs.pop(0), "scripted") if self._inputs else None

    def answer(self, call_id: str, question: str) -> UserTurn:
        chosen = next(
            (a for a in self._answers if a.when and re.search(a.when, question, re.I)), None
        )
        chosen = chosen or next((a for a in self._answers if a.when is None), None)
        if chosen is None:
            raise NodevalError(
                f"the agent asked {question!r} but {self._where} has no answer for it; "
                "add one under user.answers"
            )
        self._answers.remove(chosen)
        return UserTurn(chosen.text, "scripted")


class JournalUser:
    """Replays the recorded user: inputs in seq order, answers by call id, the same ending."""

    def __init__(self, stash: ReplayStash) -> None:
        self._stash = stash
        end = stash.recorded_end.payload_dict() if stash.recorded_end is not None else {}
        self.ending: str | None = end.get("user_ending")

    def next_input(self, last_output: str | None) -> UserTurn | None:
        event = self._stash.next_input()
        return None if event is None else UserTurn(event.payload.text, event.payload.source)

    def answer(self, call_id: str, question: str) -> UserTurn:
        payload = self._stash.ask_response(call_id, question)
        return UserTurn(payload["text"], payload.get("source", "scripted"))


def make_user(
    spec: Any, where: str, llm_url: str | None = None, *, limits: Any = None
) -> SimulatedUser:
    """The simulated user of a live attempt; a persona's model calls go through the run's
    `limits`."""
    if isinstance(spec, ScriptedUserSpec):
        return ScriptedUser(spec, where)
    if isinstance(spec, PersonaUserSpec):
        from .persona import PersonaUser

        return PersonaUser(spec, llm_url, limits=limits)
    raise NodevalError(f"{where}: unsupported user kind {getattr(spec, 'kind', spec)!r}")
