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
from ..journal.writer import JournalWriter
from .inputs import PersonaUserSpec, ScriptedUserSpec


class ScriptedUser:
    def __init__(self, spec: ScriptedUserSpec, where: str = "input/inputs.yaml") -> None:
        self._inputs = list(spec.inputs)
        self._answers = list(spec.answers)
        self._where = where

    def next_input(self, last_output: str | None) -> UserTurn | None:
        return UserTurn(self._inputs.pop(0), "scripted") if self._inputs else None

    def replayed_turn(self, last_output: str | None, text: str) -> None:
        """A turn --nodeval-from-turn served from the journal: its scripted input is used up."""
        if self._inputs:
            self._inputs.pop(0)

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


class PrefixUser:
    """--nodeval-from-turn N: the recorded user for turns 1..N-1, then the live one.

    The journal's inputs and answers are served (and the live user told of each, so a script
    goes on at turn N and a persona knows the conversation so far); when turn N is asked
    for, the stash hands over, `session.live_from` marks the journal, and the live user speaks.
    """

    def __init__(self, stash: ReplayStash, live: SimulatedUser, journal: JournalWriter) -> None:
        self._stash, self._live, self._journal = stash, live, journal
        self.replayed_session: str | None = None
        """The session id of the journal the prefix comes from (said in the mark)."""

    @property
    def ending(self) -> str | None:
        return getattr(self._live, "ending", None)

    def next_input(self, last_output: str | None) -> UserTurn | None:
        if self._stash.serving:
            event = self._stash.next_input()
            if event is not None:
                replayed = getattr(self._live, "replayed_turn", None)
                if replayed is not None:
                    replayed(last_output, event.payload.text)
                return UserTurn(event.payload.text, event.payload.source)
            self._go_live()
        return self._live.next_input(last_output)

    def answer(self, call_id: str, question: str) -> UserTurn:
        if self._stash.serving:
            payload = self._stash.ask_response(call_id, question)
            return UserTurn(payload["text"], payload.get("source", "scripted"))
        return self._live.answer(call_id, question)

    def _go_live(self) -> None:
        self._stash.hand_over()
        turn = self._stash.live_from or 1
        self._journal.emit(
            "session.live_from", {"turn": turn, "replayed_session": self.replayed_session}
        )


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
