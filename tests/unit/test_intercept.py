"""agent/intercept.py: which requests an attempt's journal carries, whose journal, and what is
refused or kept home (issue 26). The frameworks' own runs are in tests/frameworks/."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest

from pytest_nodeval.agent import intercept
from pytest_nodeval.agent.intercept import JournalEscape, Routes, activated, target_of
from pytest_nodeval.agent.providers import side_wiring
from pytest_nodeval.errors import NodevalError
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval_fakes.llm import LLMFake


def _writer() -> JournalWriter:
    return side_wiring().journal  # an in-memory journal


class _Stash:
    """A stand-in for a replay stash: only its presence matters to what is tested here."""

    stopped = None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.anthropic.com/v1/messages", ("anthropic", "anthropic.messages", True)),
        ("https://api.openai.com/v1/chat/completions", ("openai", "openai", True)),
        ("https://api.openai.com/v1/models", ("openai", "openai", True)),
        (
            "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent",
            ("gemini", "gemini.generate_content", True),
        ),
        ("http://127.0.0.1:9/v1/messages", ("anthropic", "anthropic.messages", False)),
        ("http://gateway.local/openai/v1/responses", ("openai", "openai", False)),
        ("https://api.openai.com/v1/traces/ingest", None),
        ("http://127.0.0.1:9/v1/tools/execute", None),
        ("https://example.com/", None),
    ],
)
def test_which_requests_the_journal_carries(url: str, expected: tuple[str, str, bool]) -> None:
    target = target_of(httpx2.URL(url))
    assert (target and (target.provider, target.api, target.provider_host)) == expected


@pytest.fixture
def fake() -> Iterator[LLMFake]:
    with LLMFake({"rules": [{"respond": {"text": "hi"}}]}) as running:
        yield running


def _ask(client: anthropic.Anthropic, text: str) -> str:
    reply = client.messages.create(
        model="claude-test", max_tokens=16, messages=[{"role": "user", "content": text}]
    )
    return str(reply.content[0].text)


def test_attempts_in_threads_each_journal_their_own_calls_from_one_shared_client(
    fake: LLMFake,
) -> None:
    """One client made before any attempt (a module-level one), used by two attempts at once."""
    client = anthropic.Anthropic(base_url=fake.url, api_key="k")
    journals = {name: _writer() for name in ("first", "second")}
    start = threading.Barrier(2)

    def attempt(name: str) -> None:
        with activated(Routes(journals[name], None)):
            start.wait()
            for _ in range(3):
                _ask(client, name)

    threads = [threading.Thread(target=attempt, args=(name,)) for name in journals]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, journal in journals.items():
        asked = [
            e.payload.body["messages"][0]["content"]
            for e in journal.events
            if e.type == "llm.request"
        ]
        assert asked == [name] * 3


def test_a_bare_thread_is_served_by_the_only_attempt_and_refused_among_several() -> None:
    one, two = Routes(_writer(), None), Routes(_writer(), None)
    seen: list[Any] = []

    def look() -> None:
        try:
            seen.append(intercept.current())
        except NodevalError as exc:
            seen.append(str(exc))

    with activated(one):
        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
        with intercept._ACTIVE_LOCK:
            intercept._ACTIVE.append(two)  # a second attempt, running elsewhere
        try:
            thread = threading.Thread(target=look)
            thread.start()
            thread.join()
        finally:
            with intercept._ACTIVE_LOCK:
                intercept._ACTIVE.remove(two)
    assert seen[0] is one
    assert "carries no attempt while 2 attempts run at once" in seen[1]
    assert "contextvars.copy_context().run" in seen[1]


def test_a_lookup_of_a_provider_outside_httpx2_is_refused_and_fails_the_attempt() -> None:
    routes = Routes(_writer(), None)
    with activated(routes), pytest.raises(JournalEscape) as refused:
        socket.getaddrinfo("api.anthropic.com", 443)
    assert "a request to api.anthropic.com:443 went around the attempt's journal" in str(
        refused.value
    )
    assert routes.refusals == [("escape", str(refused.value))]


def test_a_lookup_of_the_running_fake_is_refused_but_others_pass(fake: LLMFake) -> None:
    routes = Routes(_writer(), None, fake_url=fake.url)
    url = httpx2.URL(fake.url)
    with activated(routes):
        assert socket.getaddrinfo("127.0.0.1", 1)  # not the fake: resolves
        with pytest.raises(JournalEscape):
            socket.getaddrinfo(url.host, url.port)
    assert len(routes.refusals) == 1


def test_a_lookup_is_no_escape_once_no_attempt_runs() -> None:
    with activated(Routes(_writer(), None)):
        pass
    with pytest.raises(socket.gaierror):  # refused by the resolver here, not by nodeval
        socket.getaddrinfo("api.anthropic.com.invalid", 443)


def test_traces_are_answered_at_home_in_replay_without_the_network(
    no_network: list[Any],
) -> None:
    routes = Routes(_writer(), _Stash())  # type: ignore[arg-type]
    with activated(routes), httpx2.Client() as client:
        response = client.post("https://api.openai.com/v1/traces/ingest", json={"data": []})
    assert response.status_code == 204
    assert no_network == [] and routes.refusals == []


def test_langsmith_tracing_is_off_in_an_attempt_that_stays_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("langsmith", reason="the frameworks extra is not installed")
    import langsmith.run_helpers  # noqa: F401  (imported, as a LangChain agent's module would)
    from langsmith.utils import tracing_is_enabled

    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    inside: list[Any] = []
    with activated(Routes(_writer(), _Stash())):  # type: ignore[arg-type]
        inside.append(tracing_is_enabled())
    assert inside == [False]


def test_a_patch_stands_back_for_a_test_that_blocks_lookups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stand-in put in place of socket.getaddrinfo is left alone, so the patch can never
    keep calling it after its owner put the real one back."""

    def blocked(*args: Any, **kwargs: Any) -> Any:
        raise OSError("blocked")

    monkeypatch.setattr(socket, "getaddrinfo", blocked)
    intercept.install()
    assert socket.getaddrinfo is blocked
    monkeypatch.undo()
    intercept.install()
    assert socket.getaddrinfo is intercept._getaddrinfo
    assert socket.getaddrinfo("127.0.0.1", 80)


def test_a_production_session_is_not_refused_what_it_sends_around() -> None:
    """The sampler's sessions (guard off) are a user's real requests: never failed for it."""
    routes = Routes(_writer(), None)
    routes.guard = False
    with activated(routes):
        try:
            socket.getaddrinfo("api.anthropic.com", 443)
        except JournalEscape:  # pragma: no cover - the failure this test exists to catch
            pytest.fail("a production session's request was refused")
        except OSError:
            pass  # this machine may have no resolver for the host: not nodeval's refusal
    assert routes.refusals == []
