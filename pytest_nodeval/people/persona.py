"""The persona user: an LLM plays the user from a persona and structured instructions.

It talks through the same providers as the engine (anthropic, openai, gemini, mock; `base_url: fake`
reaches the local LLM fake). Its own model calls are not part of the agent's session, so
they are not in the attempt's journal: they go to a side journal kept in memory, which
`spent_events()` hands to the pricing (runner/cost.py). What it says is journaled
(`io.input`, `io.ask.response`, source "persona"), and replay re-emits that without calling
any model. The conversation ends when the model
says a stop token (done, transfer, out of scope) or at the turn limit.
"""

from __future__ import annotations

from typing import Any

from ..agent.fake_urls import FAKE_KEY, is_fake, resolve
from ..agent.providers import PROVIDERS, ModelRequest, Provider, side_wiring
from ..agent.simulated_user import UserTurn
from .inputs import PersonaUserSpec

SOURCE = "persona"


def persona_prompt(spec: PersonaUserSpec) -> str:
    tokens = spec.stop_tokens
    lines = [
        (
            "You are playing a USER talking to an AI assistant. "
            "Stay in character; never act as the assistant."
        ),
        f"Persona: {spec.persona}",
        f"Why you are here: {spec.reason}",
    ]
    if spec.knows:
        lines.append("What you know: " + "; ".join(spec.knows))
    if spec.does_not_know:
        lines.append("What you do not know (never invent it): " + "; ".join(spec.does_not_know))
    if spec.instructions:
        lines.append(f"Instructions: {spec.instructions}")
    lines += [
        "Write only your next message to the assistant, briefly.",
        f"When your goal is met, reply with exactly {tokens.done}.",
        f"If the assistant hands you over to a human, reply with exactly {tokens.transfer}.",
        f"If the assistant cannot help with this at all, reply with exactly {tokens.out_of_scope}.",
    ]
    return "\n".join(lines)


class PersonaUser:
    def __init__(
        self, spec: PersonaUserSpec, llm_url: str | None = None, *, limits: Any = None
    ) -> None:
        self.spec = spec
        self.ending: str | None = None
        provider_spec = resolve(spec.provider, llm_url).model_copy(update={"label": "user"})
        keys = {"user": FAKE_KEY} if is_fake(spec.provider) else {}
        self._wiring = side_wiring(keys, limits)
        self._provider: Provider = PROVIDERS[provider_spec.name](provider_spec, self._wiring)
        self._system = persona_prompt(spec)
        self._said: list[str] = []
        self._heard: list[str] = []

    def next_input(self, last_output: str | None) -> UserTurn | None:
        if self.ending is not None:
            return None
        if last_output is not None:
            self._heard.append(last_output)
        if len(self._said) >= self.spec.max_turns:
            self.ending = "turn_limit"
            return None
        if not self._said and self.spec.first_message:
            return self._say(self.spec.first_message)
        text = self._ask_model(self._conversation())
        ending = self._ending_in(text)
        if ending is not None:
            self.ending = ending
            return None
        return self._say(text)

    def spent_events(self) -> list[Any]:
        """The events of its model calls (its side journal's, in memory): what it cost. The
        list is the journal's own, so it grows as the persona goes on talking."""
        return self._wiring.journal.events

    def replayed_turn(self, last_output: str | None, text: str) -> None:
        """A turn --nodeval-from-turn served from the journal: the persona said it."""
        if last_output is not None:
            self._heard.append(last_output)
        self._said.append(text)

    def answer(self, call_id: str, question: str) -> UserTurn:
        messages = self._conversation() + [
            {"role": "user", "text": f"The assistant asks: {question}"}
        ]
        return UserTurn(self._ask_model(messages), SOURCE)

    def _say(self, text: str) -> UserTurn:
        self._said.append(text)
        return UserTurn(text, SOURCE)

    def _conversation(self) -> list[dict[str, Any]]:
        # From the persona's side the assistant's words are the "user" turns.
        messages: list[dict[str, Any]] = [
            {"role": "user", "text": "(The conversation starts. Say your first message.)"}
        ]
        # Mid-turn (answer()) the persona has said one message more than it has heard: that
        # last message still belongs in the conversation, before the assistant's question.
        for index, said in enumerate(self._said):
            messages.append({"role": "assistant", "text": said, "tool_calls": []})
            if index < len(self._heard):
                messages.append({"role": "user", "text": self._heard[index]})
        return messages

    def _ask_model(self, messages: list[dict[str, Any]]) -> str:
        reply = self._provider.complete(
            ModelRequest(system=self._system, messages=messages, tools=(), timeout_s=60)
        )
        return reply.text.strip()

    def _ending_in(self, text: str) -> str | None:
        tokens = self.spec.stop_tokens
        for name in ("done", "transfer", "out_of_scope"):
            if getattr(tokens, name) in text:
                return name
        return None
