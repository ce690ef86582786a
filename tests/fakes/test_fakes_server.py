"""`fakes.server.ServedApp`: ephemeral loopback ports, independent servers, prompt stops."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import httpx2
import pytest

from pytest_nodeval_fakes.llm import LLMFake
from pytest_nodeval_fakes.server import ServedApp, ServerStartError


async def hello(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = scope["path"].encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def test_many_servers_run_at_once_on_distinct_loopback_ports(http: httpx2.Client) -> None:
    servers = [ServedApp(hello, name=f"fake-test-{i}").start() for i in range(4)]
    try:
        assert len({s.port for s in servers}) == 4
        for i, server in enumerate(servers):
            assert server.url.startswith("http://127.0.0.1:")
            assert http.get(f"{server.url}/s{i}").text == f"/s{i}"
    finally:
        for server in servers:
            server.signal_stop()
        for server in servers:
            server.stop()
    assert not any(s.running for s in servers)
    with pytest.raises(httpx2.ConnectError):
        http.get(servers[0].url, timeout=1)


def test_stop_is_prompt_even_with_a_request_in_flight() -> None:
    fake = LLMFake({"responses": [{"fault": {"kind": "timeout", "sleep_s": 30}}]}).start()
    caller = threading.Thread(target=_swallow, args=(f"{fake.url}/v1/messages",))
    caller.start()
    while not fake.requests:
        time.sleep(0.01)
    started = time.monotonic()
    fake.stop()
    assert time.monotonic() - started < 3
    caller.join(5)
    assert not caller.is_alive()


def test_start_failure_is_reported_and_leaves_no_thread() -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.failed", "message": "no"})

    with pytest.raises(ServerStartError):
        ServedApp(broken, name="fake-broken", start_timeout_s=5).start()
    assert not [t for t in threading.enumerate() if t.name.startswith("fake-broken")]


def test_url_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = ServedApp(hello).url


def _swallow(url: str) -> None:
    """POST and ignore the outcome: the server is stopped under this request."""
    with contextlib.suppress(httpx2.HTTPError):
        httpx2.post(url, json={}, timeout=30, verify=False)
