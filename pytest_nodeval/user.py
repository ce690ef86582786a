"""The simulated user: who types the inputs and answers the agent's questions.

Chosen in a case's `input/inputs.yaml`. Every turn it produces is journaled as
`io.input` / `io.ask.response` with its source, so replay re-emits the recorded turns
(`JournalUser`) without asking anyone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, Union

from pydantic import BaseModel, ConfigDict, Field

from .config import ProviderSpec
from .errors import NodevalError
from .loading import load_model
from .replay import ReplayStash


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedAnswer(_Strict):
    text: str
    when: str | None = None
    """A regular expression on the agent's question; answers without one are used in order."""


class ScriptedUserSpec(_Strict):
    kind: Literal["scripted"]
    inputs: list[str] = Field(min_length=1)
    """What the user says, one entry per turn of the conversation, in order."""
    answers: list[ScriptedAnswer] = Field(default_factory=list)
    """Answers to `ask_user`: matched by `when` first, then the rest in order."""


class StopTokens(_Strict):
    done: str = "###DONE###"
    transfer: str = "###TRANSFER###"
    out_of_scope: str = "###OUT_OF_SCOPE###"


class PersonaUserSpec(_Strict):
    """An LLM plays the user, from a persona and structured instructions."""

    kind: Literal["persona"]
    provider: ProviderSpec
    """The model that plays the user (mock, anthropic or openai; `base_url: fake` works)."""
    persona: str
    reason: str
    """Why the user starts this conversation."""
    knows: list[str] = Field(default_factory=list)
    does_not_know: list[str] = Field(default_factory=list)
    instructions: str = ""
    first_message: str | None = None
    """Say this first instead of asking the model for an opening."""
    max_turns: int = Field(default=8, ge=1)
    """User messages at most; the conversation then ends as `turn_limit`."""
    stop_tokens: StopTokens = Field(default_factory=StopTokens)
    success: list[Literal["done", "transfer", "out_of_scope", "turn_limit"]] = Field(default_factory=lambda: ["done"])
    """Which endings count as success for the case."""


UserSpec = Annotated[Union[ScriptedUserSpec, PersonaUserSpec], Field(discriminator="kind")]


class InputsSpec(_Strict):
    """`input/inputs.yaml`."""

    user: UserSpec


def load_inputs(path: Path) -> InputsSpec:
    return load_model(InputsSpec, path)


@dataclass(frozen=True, slots=True)
class UserTurn:
    text: str
    source: str


class SimulatedUser(Protocol):
    def next_input(self, last_output: str | None) -> UserTurn | None:
        """The next thing the user says, or None when the conversation is over."""
        ...

    def answer(self, call_id: str, question: str) -> UserTurn:
        """The user's answer to a question the agent asked mid-turn (an `ask_user` call)."""
        ...


class ScriptedUser:
    def __init__(self, spec: ScriptedUserSpec, where: str = "input/inputs.yaml") -> None:
        self._inputs = list(spec.inputs)
        self._answers = list(spec.answers)
        self._where = where

    def next_input(self, last_output: str | None) -> UserTurn | None:
        return UserTurn(self._inputs.pop(0), "scripted") if self._inputs else None

    def answer(self, call_id: str, question: str) -> UserTurn:
        chosen = next((a for a in self._answers if a.when and re.search(a.when, question, re.I)), None)
        chosen = chosen or next((a for a in self._answers if a.when is None), None)
        if chosen is None:
            raise NodevalError(f"the agent asked {question!r} but {self._where} has no answer for it; "
                               "add one under user.answers")
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


def make_user(spec: Any, where: str, llm_url: str | None = None) -> SimulatedUser:
    if isinstance(spec, ScriptedUserSpec):
        return ScriptedUser(spec, where)
    if isinstance(spec, PersonaUserSpec):
        from .persona import PersonaUser

        return PersonaUser(spec, llm_url)
    raise NodevalError(f"{where}: unsupported user kind {getattr(spec, 'kind', spec)!r}")
