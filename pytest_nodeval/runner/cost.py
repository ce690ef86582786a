"""What an attempt's model calls cost in money, from their token counts and a price table.

Prices come from genai-prices (a maintained table bundled with the package: looked up
offline, never fetched), overridden per model by `nodeval_prices` lines for private prices.
A call to a model with no known price makes the attempt's cost unknown (None), never 0;
calls to the `mock` provider cost nothing (a script, not a model) unless a line prices it.

An attempt's calls are priced by who made them (`Spend`): the agent's, from the attempt's
journal; a simulated persona's and the judge's, from the side journal each keeps in memory
(`PersonaUser.spent_events`, `RubricGrader.spent_events`), which never reaches the disk. All
three go through the same table and overrides; the run's money budget counts the whole
spend, and the cost gate reads the agent's alone.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")
"""Keys of a price line, in USD per million tokens; cache_read and cache_write default to input."""
_PER = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One model call's tokens, as the journal's llm.response event has them."""

    model: str | None
    api: str
    input_tokens: int = 0
    """Every prompt token, cached ones included."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class AttemptCost:
    cost_usd: float | None
    """None when a call's model has no known price."""
    unpriced: tuple[str, ...] = ()
    """Models without a price, sorted."""
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Spend:
    """An attempt's cost by who called the models: the agent, the simulated user (a persona)
    and the judge."""

    agent: AttemptCost
    user: AttemptCost
    judge: AttemptCost

    @property
    def total_usd(self) -> float | None:
        """The three together; None when one of them is unknown (never a figure too low)."""
        return sum_known(self.agent.cost_usd, self.user.cost_usd, self.judge.cost_usd)

    def paid_usd(self, agent_live: bool) -> float | None:
        """What the run paid for the attempt: the user's and the judge's calls, and the agent's
        when they went to a provider (`agent_live`; a replay serves them from the journal)."""
        return sum_known(
            self.agent.cost_usd if agent_live else 0.0, self.user.cost_usd, self.judge.cost_usd
        )


def sum_known(*costs: float | None) -> float | None:
    """The sum in USD, or None when one of `costs` is unknown."""
    if any(cost is None for cost in costs):
        return None
    return round(sum(cost for cost in costs if cost is not None), 9)


def spend_of(
    agent: Iterable[Any], user: Iterable[Any], judge: Iterable[Any], overrides: Mapping[str, Price]
) -> Spend:
    """Each party's events priced alike: the agent's journal, the user's and the judge's side
    journals."""
    return Spend(
        attempt_cost(agent, overrides),
        attempt_cost(user, overrides),
        attempt_cost(judge, overrides),
    )


def parse_price_line(line: str) -> tuple[str, Price]:
    """`my-model: input=3.00 output=15.00 cache_read=0.30 cache_write=3.75` (USD per million
    tokens).

    The model may be an fnmatch pattern (`my-org/*`). Raises ValueError saying what is wrong.
    """
    model, sep, rest = line.partition(":")
    model = model.strip()
    if not sep or not model:
        raise ValueError(
            f"{line!r} is not 'model: input=USD output=USD [cache_read=USD] [cache_write=USD]'"
        )
    values: dict[str, float] = {}
    for item in rest.split():
        key, eq, raw = item.partition("=")
        if not eq or key not in PRICE_FIELDS:
            raise ValueError(
                f"{line!r}: {item!r} is not key=USD with key one of {', '.join(PRICE_FIELDS)}"
            )
        try:
            number = float(raw)
        except ValueError:
            number = -1.0
        if not number >= 0 or number == float("inf"):
            raise ValueError(
                f"{line!r}: {key}={raw!r} is not a price (USD per million tokens, >= 0)"
            )
        values[key] = number
    missing = [k for k in ("input", "output") if k not in values]
    if missing:
        raise ValueError(f"{line!r}: missing {' and '.join(missing)} (USD per million tokens)")
    return model, Price(
        values["input"],
        values["output"],
        values.get("cache_read", values["input"]),
        values.get("cache_write", values["input"]),
    )


def parse_prices(lines: Iterable[str]) -> dict[str, Price]:
    return dict(parse_price_line(line) for line in lines if line.strip())


def calls_of(events: Iterable[Any]) -> list[CallUsage]:
    """Every answered model call with its model: the response's, else its request's."""
    asked: dict[str, tuple[str, str | None]] = {}  # provider -> (api, model) of its last request
    calls = []
    for event in events:
        payload = event.payload
        if event.type == "llm.request":
            asked[payload.provider] = (payload.api, _requested_model(payload))
        elif event.type == "llm.response" and payload.usage is not None:
            api, model = asked.get(payload.provider, ("", None))
            usage = payload.usage
            calls.append(
                CallUsage(
                    getattr(payload, "model", None) or model,
                    api,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                )
            )
    return calls


def _requested_model(request: Any) -> str | None:
    """The model a request asks for: in its body, or in its path (Gemini's models/<model>:...)."""
    body = request.body if isinstance(request.body, dict) else {}
    if isinstance(body.get("model"), str):
        return str(body["model"])
    found = re.search(r"models/([^/:]+)", request.path or "")
    return found.group(1) if found else None


def attempt_cost(events: Iterable[Any], overrides: Mapping[str, Price]) -> AttemptCost:
    calls = calls_of(events)
    costs = [call_cost(call, overrides) for call in calls]
    unpriced = sorted(
        {
            call.model or "(no model named)"
            for call, cost in zip(calls, costs, strict=True)
            if cost is None
        }
    )
    total = None if unpriced else round(sum(c for c in costs if c is not None), 9)
    return AttemptCost(
        total,
        tuple(unpriced),
        sum(c.cache_read_tokens for c in calls),
        sum(c.cache_write_tokens for c in calls),
    )


def call_cost(call: CallUsage, overrides: Mapping[str, Price]) -> float | None:
    price = _override(call.model, overrides)
    if price is not None:
        return _priced(call, price)
    if call.api == "mock":
        return 0.0
    if not call.model:
        return None
    return _table_cost(call)


def _override(model: str | None, overrides: Mapping[str, Price]) -> Price | None:
    if model is None:
        return None
    if model in overrides:
        return overrides[model]
    return next(
        (p for pattern, p in overrides.items() if fnmatch.fnmatchcase(model, pattern)), None
    )


def _priced(call: CallUsage, price: Price) -> float:
    uncached = max(0, call.input_tokens - call.cache_read_tokens - call.cache_write_tokens)
    return (
        uncached * price.input
        + call.cache_read_tokens * price.cache_read
        + call.cache_write_tokens * price.cache_write
        + call.output_tokens * price.output
    ) / _PER


def _table_cost(call: CallUsage) -> float | None:
    # ~0.3 s on first use (the bundled table loads): only runs that price a call pay it.
    from genai_prices import Usage, calc_price

    usage = Usage(
        input_tokens=call.input_tokens,
        output_tokens=call.output_tokens,
        cache_read_tokens=call.cache_read_tokens,
        cache_write_tokens=call.cache_write_tokens,
    )
    provider = call.api.partition(".")[0] or None
    for provider_id in dict.fromkeys((provider, None)):  # the API's provider first, then any
        try:
            return float(calc_price(usage, call.model or "", provider_id=provider_id).total_price)
        except (LookupError, ValueError):
            continue
    return None
