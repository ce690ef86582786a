"""Cost in money: usage with cache counts, price lines, an attempt's cost, the shared budget."""

from __future__ import annotations

import json
import multiprocessing
import socket
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_nodeval.journal.events import LlmRequest, LlmResponse
from pytest_nodeval.journal.transport import extract_model, extract_usage
from pytest_nodeval.runner.budget import Budget, Prior
from pytest_nodeval.runner.cost import (
    Price,
    attempt_cost,
    parse_price_line,
    parse_prices,
)

# --- usage ------------------------------------------------------------------------------


def test_anthropic_cache_counts_are_added_to_its_input_tokens() -> None:
    body = {
        "model": "claude-sonnet-4-6",
        "usage": {
            "input_tokens": 100,
            "output_tokens": 50,
            "cache_read_input_tokens": 600,
            "cache_creation_input_tokens": 300,
        },
    }
    assert extract_usage(body, None) == {
        "input_tokens": 1000,
        "output_tokens": 50,
        "cache_read_tokens": 600,
        "cache_write_tokens": 300,
    }


def test_an_anthropic_stream_gives_its_cache_counts_in_message_start() -> None:
    start = {
        "type": "message_start",
        "message": {
            "model": "claude-x",
            "usage": {
                "input_tokens": 100,
                "output_tokens": 1,
                "cache_read_input_tokens": 600,
                "cache_creation_input_tokens": 0,
            },
        },
    }
    delta = {"type": "message_delta", "usage": {"output_tokens": 42}}
    sse = "".join(f"event: {d['type']}\ndata: {json.dumps(d)}\n\n" for d in (start, delta))
    assert extract_usage(None, sse) == {
        "input_tokens": 700,
        "output_tokens": 42,
        "cache_read_tokens": 600,
        "cache_write_tokens": 0,
    }
    assert extract_model(None, sse) == "claude-x"


@pytest.mark.parametrize(
    "usage",
    [
        {
            "prompt_tokens": 1000,
            "completion_tokens": 50,
            "prompt_tokens_details": {"cached_tokens": 600},
        },
        {"input_tokens": 1000, "output_tokens": 50, "input_tokens_details": {"cached_tokens": 600}},
    ],
)
def test_openai_cached_tokens_are_part_of_its_prompt_tokens(usage: dict[str, Any]) -> None:
    assert extract_usage({"usage": usage}, None) == {
        "input_tokens": 1000,
        "output_tokens": 50,
        "cache_read_tokens": 600,
        "cache_write_tokens": 0,
    }


# --- price lines ------------------------------------------------------------------------


def test_a_price_line_reads_usd_per_million_and_caches_default_to_input() -> None:
    assert parse_price_line("my-model: input=3.00 output=15 cache_read=0.30 cache_write=3.75") == (
        "my-model",
        Price(3.0, 15.0, 0.3, 3.75),
    )
    assert parse_price_line("org/*: input=2 output=8") == ("org/*", Price(2.0, 8.0, 2.0, 2.0))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("my-model input=3 output=15", "is not 'model: input=USD"),
        (
            "my-model: input=3 output=15 cached=1",
            "'cached=1' is not key=USD with key one of input, output",
        ),
        ("my-model: input=three output=15", "input='three' is not a price"),
        ("my-model: input=-1 output=15", "input='-1' is not a price"),
        ("my-model: output=15", "missing input"),
    ],
)
def test_a_bad_price_line_says_what_is_wrong(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_price_line(line)
    assert message in str(caught.value)


# --- an attempt's cost -------------------------------------------------------------------


def _call(
    provider: str, api: str, model: str, usage: dict[str, int] | None, answered: str | None = None
) -> list[Any]:
    request = LlmRequest(provider=provider, api=api, body={"model": model})
    response = LlmResponse(provider=provider, usage=usage, model=answered)
    return [
        SimpleNamespace(type="llm.request", payload=request),
        SimpleNamespace(type="llm.response", payload=response),
    ]


def test_an_override_prices_every_kind_of_token() -> None:
    usage = {
        "input_tokens": 1_000_000,
        "output_tokens": 200_000,
        "cache_read_tokens": 500_000,
        "cache_write_tokens": 100_000,
    }
    events = _call("anthropic", "anthropic.messages", "private-1", usage)
    cost = attempt_cost(
        events, parse_prices(["private-1: input=3 output=15 cache_read=0.3 cache_write=3.75"])
    )
    # 400k uncached x $3 + 500k read x $0.30 + 100k written x $3.75 + 200k out x $15, per million
    assert cost.cost_usd == pytest.approx(1.2 + 0.15 + 0.375 + 3.0)
    assert (cost.cache_read_tokens, cost.cache_write_tokens, cost.unpriced) == (
        500_000,
        100_000,
        (),
    )


def test_the_price_table_knows_public_models_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no network for the price table")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    usage = {
        "input_tokens": 1000,
        "output_tokens": 100,
        "cache_read_tokens": 200,
        "cache_write_tokens": 100,
    }
    events = _call("anthropic", "anthropic.messages", "claude-sonnet-4-6", usage)
    # genai-prices 0.2.3: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million
    assert attempt_cost(events, {}).cost_usd == pytest.approx(
        (700 * 3 + 100 * 15 + 200 * 0.3 + 100 * 3.75) / 1e6
    )


def test_a_model_without_a_price_makes_the_cost_unknown_not_zero() -> None:
    events = _call(
        "anthropic",
        "anthropic.messages",
        "claude-sonnet-4-6",
        {"input_tokens": 10, "output_tokens": 1},
    ) + _call(
        "openai",
        "openai.chat",
        "asked-model",
        {"input_tokens": 10, "output_tokens": 1},
        "house-model-7",
    )
    cost = attempt_cost(events, {})
    assert cost.cost_usd is None and cost.unpriced == ("house-model-7",)  # the model that answered
    assert attempt_cost(events, parse_prices(["house-*: input=1 output=1"])).cost_usd is not None


def test_the_mock_provider_costs_nothing_unless_priced() -> None:
    events = _call("mock", "mock", "mock-1", {"input_tokens": 1_000_000, "output_tokens": 0})
    assert attempt_cost(events, {}).cost_usd == 0.0
    assert attempt_cost(
        events, parse_prices(["mock-1: input=2 output=2"])
    ).cost_usd == pytest.approx(2.0)


def test_failed_calls_without_usage_cost_nothing() -> None:
    events = _call("anthropic", "anthropic.messages", "claude-sonnet-4-6", None)
    assert attempt_cost(events, {}).cost_usd == 0.0


# --- the budget -------------------------------------------------------------------------


def test_the_first_attempt_always_starts_and_the_mean_estimates_the_next(tmp_path: Path) -> None:
    budget = Budget(tmp_path, limit_usd=0.10)
    first = budget.reserve("a")
    assert first.allowed and first.estimate == 0.0
    budget.settle(first, 0.04)
    second = budget.reserve("a")
    assert second.allowed and second.estimate == pytest.approx(0.04)
    # 0.04 spent + 0.04 in flight + 0.04 for a third would pass 0.10
    third = budget.reserve("a")
    assert not third.allowed and third.id is None
    assert "would pass --nodeval-max-cost $0.1" in third.refusal()
    budget.settle(second, 0.01)
    assert budget.reserve("a").estimate == pytest.approx(0.025)
    assert budget.spent() == (pytest.approx(0.05), 0)


def test_attempts_without_an_estimate_wait_for_the_first_cost(tmp_path: Path) -> None:
    budget = Budget(tmp_path, limit_usd=0.10)
    first = budget.reserve("a")
    waiting: list[Any] = []
    thread = threading.Thread(target=lambda: waiting.append(budget.reserve("b")))
    thread.start()
    thread.join(0.5)
    assert thread.is_alive() and not waiting, "with nothing to estimate from, the second waits"
    budget.settle(first, 0.06)
    thread.join(10)
    # estimated at the run's mean: 0.06 + 0.06 passes 0.10, so it is refused, not started at 0
    assert not waiting[0].allowed and waiting[0].estimate == pytest.approx(0.06)


def test_once_costs_are_unknown_the_estimate_is_zero(tmp_path: Path) -> None:
    budget = Budget(tmp_path, limit_usd=0.10)
    budget.settle(budget.reserve("a"), None)
    held = budget.reserve("a")
    assert held.allowed and budget.reserve("a").allowed, (
        "an unpriced run does not wait attempt by attempt"
    )


def test_the_estimate_prefers_the_case_then_the_baseline_then_the_run(tmp_path: Path) -> None:
    budget = Budget(tmp_path, 100.0, Prior({"b": 0.5}, 0.7))
    assert budget.reserve("c").estimate == pytest.approx(0.7)  # nothing ran: the baseline's mean
    budget.settle(budget.reserve("a"), 0.2)
    assert budget.reserve("a").estimate == pytest.approx(0.2)  # the case's own
    assert budget.reserve("b").estimate == pytest.approx(0.5)  # the baseline's of that case
    assert budget.reserve("c").estimate == pytest.approx(0.2)  # the run's


def test_an_unknown_cost_is_not_counted_but_said(tmp_path: Path) -> None:
    budget = Budget(tmp_path, 1.0)
    budget.settle(budget.reserve("a"), None)
    assert budget.spent() == (0.0, 1)


def _reserve_and_settle(path: str, count: int, name: str) -> None:
    budget = Budget(Path(path), limit_usd=1.0)
    allowed = 0
    for _ in range(count):
        reservation = budget.reserve("a")
        if reservation.allowed:
            allowed += 1
            budget.settle(reservation, 0.1)
    (Path(path) / name).write_text(str(allowed))


def test_processes_share_one_budget(tmp_path: Path) -> None:
    # Counts come back in files: a multiprocessing.Queue does not pickle once pytester
    # tests in this process have re-imported multiprocessing.connection.
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_reserve_and_settle, args=(str(tmp_path), 10, f"started-{i}"))
        for i in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    started = sum(int((tmp_path / f"started-{i}").read_text()) for i in range(3))
    spent, _ = Budget(tmp_path, 1.0).spent()
    # Thirty attempts of $0.10 were asked for across three processes; $1 holds ten of them
    # (the run's first attempt starts with a 0 estimate; the others wait for its cost).
    assert started == 10 and spent == pytest.approx(1.0)
    assert (tmp_path / "_shared" / "budget.sqlite").is_file()


# --- per case and per run -----------------------------------------------------------------


def _attempt(
    repeat: int,
    outcome: str,
    cost: float | None,
    unpriced: tuple[str, ...] = (),
    reason: str | None = None,
) -> Any:
    from pytest_nodeval.report.models import AttemptRecord

    return AttemptRecord(
        nodeid=f"c[{repeat}]",
        case_id="c",
        repeat=repeat,
        outcome=outcome,  # type: ignore[arg-type]
        cost_usd=cost,
        cost_unpriced=list(unpriced),
        reason=reason,
    )


def test_attempts_that_never_called_a_model_add_nothing_and_an_unpriced_one_makes_it_unknown() -> (
    None
):
    from pytest_nodeval.report.aggregate import aggregate
    from pytest_nodeval.report.models import BUDGET_REASON, CaseMeta

    known = [
        _attempt(1, "passed", 0.25),
        _attempt(2, "failed", 0.05),
        _attempt(3, "not_run", None, reason=f"{BUDGET_REASON}: the run spent $0.30"),
    ]
    cases, totals, _ = aggregate(known, {"c": CaseMeta(id="c")})
    assert (cases[0].cost_usd, cases[0].cost_per_attempt_usd) == (
        pytest.approx(0.30),
        pytest.approx(0.15),
    )
    assert (totals.cost_usd, totals.not_run_budget, totals.not_run) == (pytest.approx(0.30), 1, 1)
    cases, totals, _ = aggregate(
        [*known, _attempt(4, "passed", None, ("house-7",))], {"c": CaseMeta(id="c")}
    )
    assert cases[0].cost_usd is None and totals.cost_usd is None
    assert (totals.cost_priced_usd, totals.cost_unpriced_attempts, totals.cost_unpriced_models) == (
        pytest.approx(0.30),
        1,
        ["house-7"],
    )


def test_a_gemini_call_names_its_model_in_the_path() -> None:
    request = LlmRequest(
        provider="gemini",
        api="gemini.generate_content",
        path="/v1beta/models/gemini-2.5-flash:generateContent",
        body={"contents": []},
    )
    response = LlmResponse(provider="gemini", usage={"input_tokens": 1_000_000, "output_tokens": 0})
    events = [
        SimpleNamespace(type="llm.request", payload=request),
        SimpleNamespace(type="llm.response", payload=response),
    ]
    cost = attempt_cost(events, parse_prices(["gemini-2.5-flash: input=0.30 output=2.50"]))
    assert cost.cost_usd == pytest.approx(0.30)
    assert attempt_cost(events, {}).cost_usd is not None  # genai-prices knows it
