"""`input/inputs.yaml`: who the user is, a script or a persona an LLM plays.

The models only; `users.py` and `persona.py` make them speak.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..agent.config import ProviderSpec
from ..yamlfiles import valid_regex

EndReason = Literal["done", "transfer", "out_of_scope", "turn_limit"]
"""How a persona conversation ended (its stop tokens, or the turn limit)."""


def _done_only() -> list[EndReason]:
    return ["done"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedAnswer(_Strict):
    text: str
    when: str | None = None
    """A regular expression on the agent's question; answers without one are used in order."""

    @field_validator("when")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return None if value is None else valid_regex(value)


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
    """The model that plays the user (mock, anthropic, openai or gemini; `base_url: fake` works)."""
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
    success: list[EndReason] = Field(default_factory=_done_only)
    """Which endings count as success for the case."""


UserSpec = Annotated[ScriptedUserSpec | PersonaUserSpec, Field(discriminator="kind")]


class InputsSpec(_Strict):
    """`input/inputs.yaml`."""

    user: UserSpec
