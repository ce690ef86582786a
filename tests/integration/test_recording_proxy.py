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

_USER_HI = {"role": "user", "content": "hi"}
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


def test_one_connection_carries_request_after_request_whatever_the_body_framing(
    fake: LLMFake,
) -> None:
    """Keep-alive, and a body sent by its length or in chunks (a client streaming its upload):
    each request answered on the same connection and journaled whole."""
    import http.client
    import json
    from urllib.parse import urlsplit

    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [_USER_HI]}
    raw = json.dumps(body).encode()
    writer = _writer()
    with RecordingProxy(writer, None, upstreams={"anthropic": fake.url}) as proxy:
        connection = http.client.HTTPConnection(urlsplit(proxy.url).netloc)
        sockets = []
        for chunked in (False, True, False):
            connection.request(
                "POST",
                "/anthropic/v1/messages",
                body=iter([raw[:10], raw[10:]]) if chunked else raw,
                headers={"content-type": "application/json"},
                encode_chunked=chunked,
            )
            sockets.append(connection.sock)
            response = connection.getresponse()
            assert response.status == 200
            assert json.loads(response.read())["content"][0]["text"] == "hello from the fake"
        connection.close()
    assert len(set(map(id, sockets))) == 1, "the proxy closed a kept-alive connection"
    requests = [e.payload_dict()["body"] for e in writer.events if e.type == "llm.request"]
    assert requests == [body] * 3


def test_a_client_that_asks_first_gets_a_100_continue(fake: LLMFake) -> None:
    """curl sends `Expect: 100-continue` before a large body and waits for the go-ahead."""
    import json
    import socket
    from urllib.parse import urlsplit

    raw = json.dumps({"model": "m", "max_tokens": 8, "messages": [_USER_HI]}).encode()
    head = (
        "POST /anthropic/v1/messages HTTP/1.1\r\nhost: proxy\r\nexpect: 100-continue\r\n"
        f"content-length: {len(raw)}\r\nconnection: close\r\n\r\n"
    )
    with RecordingProxy(_writer(), None, upstreams={"anthropic": fake.url}) as proxy:
        address = urlsplit(proxy.url)
        with socket.create_connection((address.hostname, address.port), timeout=10) as client:
            client.sendall(head.encode())
            assert client.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
            client.sendall(raw)
            answer = b"".join(iter(lambda: client.recv(65536), b""))  # until the proxy closes
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"hello from the fake" in answer


def test_a_request_it_cannot_read_gets_a_400_and_the_connection_closes(fake: LLMFake) -> None:
    import socket
    from urllib.parse import urlsplit

    with RecordingProxy(_writer(), None, upstreams={"anthropic": fake.url}) as proxy:
        address = urlsplit(proxy.url)
        with socket.create_connection((address.hostname, address.port), timeout=10) as client:
            client.sendall(b"POST /anthropic/v1/messages HTTP/1.1\r\ncontent-length: x\r\n\r\n")
            answer = b"".join(iter(lambda: client.recv(65536), b""))  # until the proxy closes
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"connection: close" in answer
    assert b"is not a length" in answer


def test_a_key_in_the_traffic_never_reaches_the_journal(fake: LLMFake, tmp_path: Path) -> None:
    """The journal's scan reads each body as it came (no JSON escape in it) or the payload
    serialised again (an escape in it): either way a key the program sends is redacted."""
    key = "sk-ant-api03-abcdefghijklmnop"
    writer = _writer(tmp_path / "journal")
    with RecordingProxy(writer, None, upstreams={"anthropic": fake.url}) as proxy:
        claude, _ = _clients(proxy.url)
        for text in (f"my key is {key}", f'my "key" is {key}'):  # the second has escapes
            claude.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=8,
                messages=[{"role": "user", "content": text}],
            )
    writer.close()
    written = (tmp_path / "journal" / "events.jsonl").read_text()
    assert key not in written
    assert written.count("[REDACTED]") == 2
