"""The `web` tool against a real local HTTP server: readable text, the allow-list, the limits."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_nodeval.agent.config import EngineConfig, WebSpec
from pytest_nodeval.agent.tools import ToolContext, ToolOutcome, WebTool
from pytest_nodeval.agent.web import host_allowed
from pytest_nodeval_fakes.web import WebFake

ARTICLE = b"""<!doctype html><html><head><title>Install guide</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/login">Log in</a></nav>
<main><article><h1>Installing the agent</h1>
<p>Run the installer with the --quiet flag to install without any prompts at all.</p>
<p>Then restart the service so that it reads its new configuration file from disk.</p>
</article></main>
<footer>Copyright 2026 Example Corp. All rights reserved. Privacy policy.</footer>
<script>var tracking = "must never reach the model";</script>
</body></html>"""
FIFTY_MB = 50 * 1024 * 1024
CHUNK = 64 * 1024


class _Site(http.server.BaseHTTPRequestHandler):
    """The pages of the test server; `release` ends the sleeping page when the test is done."""

    release: threading.Event
    sent: list[int]

    def do_GET(self) -> None:
        routes: dict[str, Callable[[], None]] = {
            "/article": lambda: self._send("text/html; charset=utf-8", ARTICLE),
            "/data.json": lambda: self._send(
                "application/json", json.dumps({"version": "1.2.3"}).encode()
            ),
            "/notes.txt": lambda: self._send(
                "text/plain; charset=latin-1", "café au lait".encode("latin-1")
            ),
            "/image.png": lambda: self._send("image/png", b"\x89PNG\r\n\x1a\n"),
            "/to-article": lambda: self._redirect("/article"),
            "/to-elsewhere": lambda: self._redirect("http://elsewhere.test/secret"),
            "/slow": self._slow,
            "/huge": self._huge,
            "/huge-declared": self._huge_declared,
        }
        route = routes.get(self.path)
        if route is None:
            self.send_error(404, "Not Found")
            return
        route()

    def _send(self, content_type: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _slow(self) -> None:
        # Longer than any limit in these tests; the test releases it at teardown
        self.release.wait(30)

    def _huge(self) -> None:
        # No Content-Length: the client only learns the size by reading.
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        chunk = b"x" * CHUNK
        try:
            for _ in range(FIFTY_MB // CHUNK):
                self.wfile.write(chunk)
                self.sent[0] += CHUNK
        except OSError:
            pass  # the client stopped reading and closed the connection

    def _huge_declared(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(FIFTY_MB))
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[tuple[str, list[int]]]:
    """(base URL, [bytes the /huge page managed to send]) of a server on an ephemeral port."""
    handler = type("Site", (_Site,), {"release": threading.Event(), "sent": [0]})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.sent
    handler.release.set()
    server.shutdown()
    server.server_close()


def _host(base: str) -> str:
    return base.removeprefix("http://")


def _fetch(
    url: str,
    *,
    allow: list[str],
    timeout_s: float = 10.0,
    max_bytes: int = 2_000_000,
    fake_url: str | None = None,
    fake: bool = False,
) -> ToolOutcome:
    spec = WebSpec(allow=allow, timeout_s=timeout_s, max_bytes=max_bytes, fake=fake)
    ctx = ToolContext(world=None, call_id="c1", timeout_s=30.0, ask=lambda call_id, question: "")
    return WebTool(spec, fake_url).run({"url": url}, ctx)


def test_an_html_page_becomes_its_readable_main_text(site: tuple[str, list[int]]) -> None:
    base, _ = site
    outcome = _fetch(f"{base}/article", allow=[_host(base)])
    assert outcome.ok, outcome.error
    assert outcome.result["title"] == "Installing the agent"  # trafilatura prefers the h1
    assert outcome.result["status"] == 200 and outcome.result["content_type"] == "text/html"
    text = outcome.result["text"]
    assert "Run the installer with the --quiet flag" in text and "restart the service" in text
    assert "tracking" not in text and "<p>" not in text
    assert "All rights reserved" not in text and "Log in" not in text  # boilerplate is left out


def test_json_and_plain_text_pass_through_with_their_charset(site: tuple[str, list[int]]) -> None:
    base, _ = site
    data = _fetch(f"{base}/data.json", allow=[_host(base)])
    assert data.ok and json.loads(data.result["text"]) == {"version": "1.2.3"}
    notes = _fetch(f"{base}/notes.txt", allow=[_host(base)])
    assert notes.ok and notes.result["text"] == "café au lait"


def test_a_binary_page_is_a_tool_error(site: tuple[str, list[int]]) -> None:
    base, _ = site
    outcome = _fetch(f"{base}/image.png", allow=[_host(base)])
    assert not outcome.ok and "image/png is not text" in outcome.error


def test_a_host_not_allowed_is_refused_before_anything_is_sent(site: tuple[str, list[int]]) -> None:
    base, _ = site
    outcome = _fetch(f"{base}/article", allow=["docs.example.com"])
    assert not outcome.ok
    assert outcome.error == (
        f"{base}/article: host {_host(base)} is not allowed "
        "(web.allow in input/config.yaml: docs.example.com)"
    )


def test_with_no_host_allowed_every_fetch_is_refused(site: tuple[str, list[int]]) -> None:
    base, _ = site
    outcome = _fetch(f"{base}/article", allow=[])
    assert (
        not outcome.ok and "is not allowed (web.allow in input/config.yaml: none)" in outcome.error
    )


def test_a_redirect_is_checked_against_the_allow_list_again(site: tuple[str, list[int]]) -> None:
    base, _ = site
    followed = _fetch(f"{base}/to-article", allow=[_host(base)])
    assert followed.ok and followed.result["url"] == f"{base}/article"
    refused = _fetch(f"{base}/to-elsewhere", allow=[_host(base)])
    assert not refused.ok
    assert refused.error.startswith(
        f"{base}/to-elsewhere redirected to http://elsewhere.test/secret: "
        "host elsewhere.test:80 is not allowed"
    )


def test_a_fetch_that_does_not_answer_in_time_is_a_tool_error(site: tuple[str, list[int]]) -> None:
    base, _ = site
    outcome = _fetch(f"{base}/slow", allow=[_host(base)], timeout_s=0.3)
    assert not outcome.ok
    assert outcome.error == f"{base}/slow: no answer within the 0.3s time limit (web.timeout_s)"


def test_a_50_mb_page_is_cut_off_at_the_limit(site: tuple[str, list[int]]) -> None:
    base, sent = site
    outcome = _fetch(f"{base}/huge", allow=[_host(base)], max_bytes=1_000_000)
    assert not outcome.ok
    assert "larger than the 1000000-byte limit (web.max_bytes); stopped reading at" in outcome.error
    stopped_at = int(outcome.error.rsplit("stopped reading at ", 1)[1].split()[0])
    assert 1_000_000 < stopped_at < 1_000_000 + 4 * CHUNK
    assert sent[0] < FIFTY_MB  # the server could not send the rest: the client hung up


def test_a_declared_size_over_the_limit_is_refused_without_reading(
    site: tuple[str, list[int]],
) -> None:
    base, _ = site
    outcome = _fetch(f"{base}/huge-declared", allow=[_host(base)], max_bytes=1_000_000)
    assert not outcome.ok
    assert outcome.error == (
        f"{base}/huge-declared: the page is {FIFTY_MB} bytes, more than the "
        "1000000-byte limit (web.max_bytes); nothing was read"
    )


def test_a_non_2xx_status_is_a_tool_error(site: tuple[str, list[int]]) -> None:
    base, _ = site
    outcome = _fetch(f"{base}/missing", allow=[_host(base)])
    assert not outcome.ok and outcome.error == f"{base}/missing: HTTP 404 Not Found"


def test_a_refused_connection_and_a_bad_url_are_tool_errors() -> None:
    closed = _fetch("http://127.0.0.1:9/", allow=["127.0.0.1"])
    assert not closed.ok and closed.error.startswith("http://127.0.0.1:9/: ConnectError")
    assert "only http:// and https://" in _fetch("file:///etc/passwd", allow=["127.0.0.1"]).error


@pytest.mark.parametrize(
    ("host", "port", "allowed"),
    [
        ("docs.example.com", 443, True),
        ("docs.example.com", 8080, True),
        ("DOCS.example.com.", 443, True),
        ("evil-docs.example.com", 443, False),
        ("127.0.0.1", 8123, True),
        ("127.0.0.1", 8124, False),
        ("api.example.org", 443, True),
        ("example.org", 443, False),
        ("::1", 8000, True),
        ("::1", 8001, False),
    ],
)
def test_the_allow_list_matches_hosts_ports_and_subdomains(
    host: str, port: int, allowed: bool
) -> None:
    allow = ("docs.example.com", "127.0.0.1:8123", "*.example.org", "[::1]:8000")
    assert host_allowed(host, port, allow) is allowed


def test_the_fake_answers_by_the_url_as_written(tmp_path: Any) -> None:
    script = {
        "pages": [
            {"url": "https://docs.example.com/install", "body": ARTICLE.decode()},
            {
                "url": "https://docs.example.com/old",
                "status": 301,
                "location": "https://docs.example.com/install",
            },
            {
                "url": "https://docs.example.com/away",
                "status": 302,
                "location": "https://tracker.example.net/",
            },
        ]
    }
    with WebFake(script) as fake:
        old = _fetch(
            "https://docs.example.com/old", allow=["docs.example.com"], fake=True, fake_url=fake.url
        )
        away = _fetch(
            "https://docs.example.com/away",
            allow=["docs.example.com"],
            fake=True,
            fake_url=fake.url,
        )
        missing = _fetch(
            "https://docs.example.com/nope",
            allow=["docs.example.com"],
            fake=True,
            fake_url=fake.url,
        )
    assert old.ok and old.result["url"] == "https://docs.example.com/install"
    assert "--quiet flag" in old.result["text"]
    assert not away.ok and "host tracker.example.net:443 is not allowed" in away.error
    assert missing.error == "https://docs.example.com/nope: HTTP 404 Not Found"
    assert [url for _, url in fake.requests] == [
        "https://docs.example.com/old",
        "https://docs.example.com/install",
        "https://docs.example.com/away",
        "https://docs.example.com/nope",
    ]


def _config(**sections: Any) -> dict[str, Any]:
    return {"providers": [{"name": "mock", "model": "m", "script": [{"text": "hi"}]}], **sections}


def test_the_web_tool_needs_its_section() -> None:
    with pytest.raises(
        ValidationError,
        match=r"'web' needs a `web:` section .* web: \{allow: \[docs.example.com\]\}",
    ):
        EngineConfig.model_validate(_config(tools=["web"]))
    EngineConfig.model_validate(_config(tools=["web"], web={"allow": []}))


@pytest.mark.parametrize("entry", ["https://docs.example.com", "docs.example.com/path", "", "a b"])
def test_an_allow_entry_that_is_not_a_host_names_the_entry(entry: str) -> None:
    with pytest.raises(ValidationError, match="is not a host: write `docs.example.com`"):
        WebSpec(allow=[entry])
