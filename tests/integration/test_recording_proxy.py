"""agent/proxy.py through the real SDKs: each provider's API on loopback, journaled in record,
answered from the journal in replay, a changed request a divergence, a 429 retried below the
journal; streams too. The SDKs read the base URLs `program_env` gives a program."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from pytest_nodeval.agent.proxy import RecordingProxy, program_env
from pytest_nodeval.journal.events import EngineInfo, JournalHeader, new_session_id, now_iso
from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.journal.replay import ReplayStash
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval_fakes.llm import LLMFake

SCRIPT = {
    "rules": [
        {
            "when": {"last_user_contains": "slow"},
            "times": 1,
            "respond": {"fault": {"kind": "rate_limit", "retry_after_s": 0.01}},
        },
        {"respond": {"text": "hello from the fake"}},
    ]
}


def _writer(directory: Path | None = None) -> JournalWriter:
    header = JournalHeader(
        session_id=new_session_id(),
        created_at=now_iso(),
        engine=EngineInfo(version="test"),
        source="live",
    )
    return JournalWriter(directory, header)


@pytest.fixture
def fake() -> Iterator[LLMFake]:
    with LLMFake(SCRIPT) as running:
        yield running


def _clients(url: str) -> tuple[anthropic.Anthropic, openai.OpenAI]:
    env = program_env(url)
    return (
        anthropic.Anthropic(
            base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"], max_retries=0
        ),
        openai.OpenAI(
            base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"], max_retries=0
        ),
    )


def _session(url: str, text: str = "hi") -> list[str]:
    claude, gpt = _clients(url)
    said = [
        claude.messages.create(
            model="claude-sonnet-4-6", max_tokens=32, messages=[{"role": "user", "content": text}]
        )
        .content[0]
        .text
    ]
    with claude.messages.stream(
        model="claude-sonnet-4-6", max_tokens=32, messages=[{"role": "user", "content": text}]
    ) as stream:
        said.append(stream.get_final_text())
    said.append(
        gpt.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": text}]
        )
        .choices[0]
        .message.content
        or ""
    )
    chunks = gpt.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": text}], stream=True
    )
    said.append("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
    gemini = genai.Client(
        api_key=program_env(url)["GEMINI_API_KEY"],
        http_options=types.HttpOptions(base_url=program_env(url)["GOOGLE_GEMINI_BASE_URL"]),
    )
    said.append(gemini.models.generate_content(model="gemini-2.5-flash", contents=text).text or "")
    return said


def _record(fake: LLMFake, directory: Path, text: str = "hi") -> list[str]:
    writer = _writer(directory)
    upstreams = dict.fromkeys(("anthropic", "openai", "gemini"), fake.url)
    with RecordingProxy(writer, None, upstreams=upstreams) as proxy:
        said = _session(proxy.url, text)
    writer.close()
    return said


def test_record_then_replay_every_api_and_stream_without_the_upstream(
    fake: LLMFake, tmp_path: Path
) -> None:
    recorded = _record(fake, tmp_path / "journal")
    assert recorded == ["hello from the fake"] * 5
    journal = read_journal(tmp_path / "journal")
    paths = [e.payload.path for e in journal.of_type("llm.request")]
    chat, gemini = "/v1/chat/completions", "/models/gemini-2.5-flash:generateContent"
    assert paths[:4] == ["/v1/messages", "/v1/messages", chat, chat]
    assert paths[4].endswith(gemini)  # the SDK picks the API version before it
    streamed = [e.payload.stream for e in journal.of_type("llm.request")]
    assert streamed == [False, True, False, True, False]
    served = len(fake.requests)

    stash = ReplayStash(journal, case="proxy-case")
    with RecordingProxy(_writer(), stash) as proxy:
        assert _session(proxy.url) == recorded
    assert len(fake.requests) == served, "replay reached the upstream"
    assert proxy.stopped is None


def test_a_changed_request_is_a_divergence_the_program_sees_as_a_500(
    fake: LLMFake, tmp_path: Path
) -> None:
    _record(fake, tmp_path / "journal")
    stash = ReplayStash(read_journal(tmp_path / "journal"), case="proxy-case")
    with RecordingProxy(_writer(), stash) as proxy:
        claude, _ = _clients(proxy.url)
        with pytest.raises(anthropic.InternalServerError, match="diverged"):
            claude.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=32,
                messages=[{"role": "user", "content": "something else"}],
            )
    assert proxy.stopped is not None
    assert "proxy-case" in str(proxy.stopped)


def test_a_429_is_retried_below_the_journal(fake: LLMFake, tmp_path: Path) -> None:
    said = _record(fake, tmp_path / "journal", text="slow")
    assert said == ["hello from the fake"] * 5
    responses = read_journal(tmp_path / "journal").of_type("llm.response")
    assert [r.payload.status for r in responses] == [200] * 5
    assert responses[0].payload_dict()["retries"] == 1


def test_an_unknown_prefix_names_what_the_proxy_serves(fake: LLMFake) -> None:
    import httpx2

    with RecordingProxy(_writer(), None, upstreams={"anthropic": fake.url}) as proxy:
        response = httpx2.post(proxy.url + "/v1/messages", json={})
    assert response.status_code == 404
    assert "this proxy serves /anthropic (the providers of" in response.text


def test_real_keys_stay_with_the_proxy() -> None:
    """The program sends a placeholder; the upstream (a fake that checks its key) gets the
    proxy's key."""
    with LLMFake(SCRIPT, api_key="real-key") as checking:
        upstreams = {"anthropic": checking.url}
        keys = {"anthropic": "real-key"}
        with RecordingProxy(_writer(), None, upstreams=upstreams, keys=keys) as proxy:
            claude, _ = _clients(proxy.url)
            reply = claude.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=8,
                messages=[{"role": "user", "content": "hi"}],
            )
            assert "real-key" not in program_env(proxy.url).values()
    assert reply.content[0].text == "hello from the fake"
