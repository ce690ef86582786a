"""Retries below the journal, through the real SDKs against fakes.llm's scripted faults.

A refused request is tried again by nodeval (not by the SDK), the journal keeps only the
final exchange with the failed tries counted, and replay serves that exchange without
retrying, whether it was an answer or the final refusal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval import AgentContext
from pytest_nodeval.case.directory import load_case
from pytest_nodeval.runner.session import (
    AttemptSettings,
    Observed,
    install_journal,
    run_agent_case,
    run_case,
)
from pytest_nodeval_fakes.llm import LLMFake

KEY = "sk-ant-api03-nodeval-test-secret-0123456789"
HELLO = {"text": "Hello!", "usage": {"input_tokens": 10, "output_tokens": 2}}


def _burst(kind: str, times: int | None) -> dict[str, Any]:
    rule: dict[str, Any] = {"respond": {"fault": {"kind": kind, "retry_after_s": 0.01}}}
    if times is not None:
        rule["times"] = times
    return {"rules": [rule], "responses": [HELLO]}


def _case(root: Path) -> Path:
    directory = root / "retry-case"
    (directory / "input").mkdir(parents=True)
    (directory / "case.yaml").write_text("id: retry-case\n")
    (directory / "assertions.yaml").write_text("[]\n")  # the Python test checks it
    (directory / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["hi"]}})
    )
    return directory


def _anthropic_agent(url: str, max_retries: int) -> Any:
    def agent(ctx: AgentContext) -> None:
        client = ctx.anthropic(base_url=url, api_key=KEY, max_retries=max_retries)
        for text in ctx.inputs():
            message = client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": text}],
            )
            ctx.output(message.content[0].text)

    return agent


def _async_openai_agent(url: str, max_retries: int) -> Any:
    async def agent(ctx: AgentContext) -> None:
        async with ctx.async_openai(
            base_url=url + "/v1", api_key=KEY, max_retries=max_retries
        ) as client:
            for text in ctx.inputs():
                reply = await client.chat.completions.create(
                    model="gpt-5-mini", messages=[{"role": "user", "content": text}]
                )
                ctx.output(reply.choices[0].message.content or "")

    return agent


def _responses(observed: Observed) -> list[dict[str, Any]]:
    return [e.payload_dict() for e in observed.events if e.type == "llm.response"]


def _run(agent: Any, case_dir: Path, mode: str, out: Path) -> Observed:
    return run_agent_case(agent, load_case(case_dir), AttemptSettings(mode=mode), out)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make_agent", "kind"),
    [(_anthropic_agent, "rate_limit"), (_async_openai_agent, "unavailable")],
    ids=["sync-429", "async-503"],
)
def test_a_burst_is_retried_and_the_journal_keeps_the_final_exchange(
    make_agent: Any, kind: str, tmp_path: Path, block_network: Any
) -> None:
    case_dir = _case(tmp_path)
    with LLMFake(_burst(kind, times=2)) as fake:
        observed = _run(make_agent(fake.url, 3), case_dir, "record", tmp_path / "rec")
        # The SDK retried nothing on top
        assert [r.outcome for r in fake.requests] == [
            kind,
            kind,
            "text",
        ]
    assert observed.status == "ok" and observed.output == "Hello!"
    assert [(r["status"], r["retries"]) for r in _responses(observed)] == [(200, 2)]
    assert sum(1 for e in observed.events if e.type == "llm.request") == 1
    assert observed.metrics()["retries"] == 2
    block_network()
    replayed = _run(
        make_agent("http://127.0.0.1:9", 3), case_dir, "deterministic", tmp_path / "rep"
    )
    assert replayed.divergence is None and replayed.output == "Hello!"
    assert replayed.metrics()["retries"] == 0  # nothing was retried here


def test_an_outage_past_the_retries_is_the_infrastructures_and_replays_as_such(
    tmp_path: Path, block_network: Any
) -> None:
    case_dir = _case(tmp_path)
    with LLMFake(_burst("unavailable", times=None)) as fake:
        observed = _run(_anthropic_agent(fake.url, 2), case_dir, "record", tmp_path / "rec")
        assert len(fake.requests) == 3  # one try and two retries
    end = observed.end
    assert (
        end is not None
        and end.status == "error"
        and end.infra
        and "ServiceUnavailableError" in (end.reason or "")
    )
    assert [(r["status"], r["retries"]) for r in _responses(observed)] == [(503, 2)]
    block_network()
    replayed = _install_and_replay(tmp_path, case_dir, max_retries=2)
    # The final refusal is served once; the SDK (told x-should-retry: false) asks for no more.
    assert replayed.divergence is None and replayed.end is not None and replayed.end.infra


def test_a_connection_lost_past_the_retries_replays_as_lost(
    tmp_path: Path, block_network: Any
) -> None:
    case_dir = _case(tmp_path)
    cut = {"rules": [{"respond": {"fault": {"kind": "malformed_stream", "mode": "cut"}}}]}
    with LLMFake(cut) as fake:
        observed = _run(_anthropic_agent(fake.url, 1), case_dir, "record", tmp_path / "rec")
        assert len(fake.requests) == 2
    assert (
        observed.end is not None
        and observed.end.infra
        and "APIConnectionError" in (observed.end.reason or "")
    )
    assert [(r["status"], r["retries"]) for r in _responses(observed)] == [(0, 1)]
    block_network()
    # In replay the SDK keeps its own retry (journals from before need it): each of its tries
    # of the request nodeval gave up on fails the same way, and the journal is not overrun.
    replayed = _install_and_replay(tmp_path, case_dir, max_retries=1)
    assert replayed.divergence is None and replayed.end is not None and replayed.end.infra
    assert "APIConnectionError" in (replayed.end.reason or "")


def _install_and_replay(tmp_path: Path, case_dir: Path, *, max_retries: int) -> Observed:
    """Install the recording by hand (record mode installs only a session that ended ok) and
    replay it with an agent whose client points nowhere."""
    install_journal(tmp_path / "rec", case_dir / "journal")
    agent = _anthropic_agent("http://127.0.0.1:9", max_retries)
    return _run(agent, case_dir, "deterministic", tmp_path / "rep")


def _gemini_case(root: Path, script: dict[str, Any]) -> Path:
    directory = _case(root)
    config = {
        "providers": [
            {"name": "gemini", "model": "gemini-2.5-flash", "base_url": "fake", "max_retries": 2}
        ],
        "system_prompt": "Be brief.",
        "tools": [],
    }
    (directory / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    (directory / "input" / "llm.yaml").write_text(yaml.safe_dump(script))
    return directory


def test_gemini_is_retried_below_the_journal_and_replays_a_final_refusal(
    tmp_path: Path, block_network: Any
) -> None:
    burst = load_case(_gemini_case(tmp_path / "burst", _burst("rate_limit", times=2)))
    observed = run_case(burst, AttemptSettings(mode="live"), tmp_path / "live")
    assert observed.status == "ok" and observed.metrics()["retries"] == 2
    assert [(r["status"], r["retries"]) for r in _responses(observed)] == [(200, 2)]

    down = load_case(_gemini_case(tmp_path / "down", _burst("unavailable", times=None)))
    recorded = run_case(down, AttemptSettings(mode="record"), tmp_path / "rec")
    assert recorded.end is not None and recorded.end.infra
    assert [(r["status"], r["retries"]) for r in _responses(recorded)] == [(503, 2)]
    install_journal(tmp_path / "rec", down.journal_dir)
    block_network()
    # google-genai does not read x-should-retry, and replay keeps its retries for the journals
    # from before: each of them gets the same recorded 503, and the replay does not diverge.
    replayed = run_case(
        load_case(down.directory), AttemptSettings(mode="deterministic"), tmp_path / "rep"
    )
    assert replayed.divergence is None and replayed.end is not None and replayed.end.infra


def test_max_wait_stops_retrying_before_a_long_retry_after(tmp_path: Path) -> None:
    script = {
        "rules": [{"respond": {"fault": {"kind": "rate_limit", "retry_after_s": 120}}}],
        "responses": [HELLO],
    }
    with LLMFake(script) as fake:
        observed = _run(_anthropic_agent(fake.url, 5), _case(tmp_path), "live", tmp_path / "live")
        assert len(fake.requests) == 1  # waiting 120 s would pass the default max_wait of 60 s
    assert (
        observed.end is not None
        and observed.end.infra
        and "RateLimitError" in (observed.end.reason or "")
    )


def test_journals_from_before_replay_with_the_sdks_retries(tmp_path: Path) -> None:
    # The provider-fallback seed as recorded when the SDK retried (kept here since the seed was
    # recorded again): both tries of the overloaded provider are exchanges of their own.
    case = load_case(Path(__file__).parent / "data" / "fallback-sdk-retries")
    statuses = [
        e.payload_dict()["status"] for e in case.journal().events if e.type == "llm.response"
    ]
    assert statuses == [529, 529, 200]
    observed = run_case(case, AttemptSettings(mode="deterministic"), tmp_path / "rep")
    assert observed.divergence is None and observed.status == "ok"


def test_the_reference_engine_retries_through_the_same_layer(tmp_path: Path) -> None:
    directory = tmp_path / "engine-case"
    (directory / "input").mkdir(parents=True)
    (directory / "case.yaml").write_text("id: engine-case\n")
    (directory / "assertions.yaml").write_text("[]\n")  # this test checks the observation itself
    config = {
        "providers": [
            {
                "name": "anthropic",
                "model": "claude-sonnet-4-6",
                "base_url": "fake",
                "max_retries": 3,
            }
        ],
        "system_prompt": "Be brief.",
        "tools": [],
    }
    (directory / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    (directory / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["hi"]}})
    )
    (directory / "input" / "llm.yaml").write_text(yaml.safe_dump(_burst("overloaded", times=3)))
    observed = run_case(load_case(directory), AttemptSettings(mode="live"), tmp_path / "live")
    assert observed.status == "ok" and observed.metrics()["retries"] == 3
    assert [(r["status"], r["retries"]) for r in _responses(observed)] == [(200, 3)]
