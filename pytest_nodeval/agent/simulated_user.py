"""The simulated user as the engine sees it: a protocol, implemented in people/.

The reference engine and an own agent's `AgentContext` ask the user for inputs and for
answers to `ask_user`; who answers (a script, a persona, the journal) is people/'s concern.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class UserTurn:
    text: str
    source: str


class SimulatedUser(Protocol):
    """The user an agent talks to during an attempt: the plug point people/ implements.

    A user owns the conversation's side of the human: what is said next given the agent's last
    output, the answers to questions asked mid-turn, and when the conversation is over.
    Scripted users read input/inputs.yaml, personas ask a model, and replay's user serves
    the recorded turns.
    """

    def next_input(self, last_output: str | None) -> UserTurn | None:
        """The next thing the user says, or None when the conversation is over."""
        ...

    def answer(self, call_id: str, question: str) -> UserTurn:
        """The user's answer to a question the agent asked mid-turn (an `ask_user` call)."""
        ...
