"""A fake of the web for the engine's `web` tool: scripted pages by URL, served on loopback.

With `web: {fake: true}` in a case's config, the tool sends every fetch here instead of
the network and names the URL it fetched in the ``x-nodeval-url`` header; the fake answers
by that URL. The URLs (and the allow-list the tool checks them against) stay as the case
writes them, so a case about `https://docs.example.com/...` records with no network.

The script (a case's ``input/web.yaml``)::

    schema_version: 1
    pages:
      - url: https://docs.example.com/install
        content_type: text/html; charset=utf-8   # the default
        body: "<html>...</html>"
      - url: https://docs.example.com/old
        status: 301
        location: https://docs.example.com/install
      - url: https://docs.example.com/down
        status: 503

A URL the script does not have is a 404. Requests arrive in `requests` (URL and method).
Not covered: methods other than GET and HEAD, request bodies, cookies, TLS.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._script import ScriptSource, load_script

URL_HEADER = "x-nodeval-url"


class PageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    status: int = Field(default=200, ge=100, le=599)
    content_type: str = "text/html; charset=utf-8"
    body: str = ""
    location: str | None = None
    """Where a 3xx status redirects to."""

    @model_validator(mode="after")
    def _redirects_go_somewhere(self) -> PageSpec:
        if 300 <= self.status < 400 and self.location is None:
            raise ValueError(f"{self.url}: a {self.status} redirect needs a `location`")
        return self


class WebScript(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    pages: list[PageSpec] = []

    @classmethod
    def load(cls, source: ScriptSource) -> WebScript:
        """From a YAML path, a mapping or a model; raises `ScriptError` naming the field."""
        return load_script(cls, source, what="web script")


class WebFake:
    """The pages of one script, served until `stop()`; `requests` lists what was asked."""

    def __init__(self, script: ScriptSource | None = None) -> None:
        self.script = WebScript.load(script if script is not None else {})
        self.requests: list[tuple[str, str]] = []
        self._pages = {page.url: page for page in self.script.pages}
        self._lock = threading.Lock()
        self._served: Any = None

    @property
    def url(self) -> str:
        if self._served is None:
            raise RuntimeError("WebFake is not started; use start() or a with block")
        return str(self._served.url)

    def start(self) -> WebFake:
        from .server import ServedApp

        self._served = ServedApp(_build_app(self), name="fake-web").start()
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()
            self._served = None

    def __enter__(self) -> WebFake:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def answer(self, method: str, url: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """(status, headers, body) for a request of `url`."""
        with self._lock:
            self.requests.append((method, url))
        page = self._pages.get(url)
        if page is None:
            return (
                404,
                [(b"content-type", b"text/plain; charset=utf-8")],
                f"no page scripted for {url}".encode(),
            )
        headers = [(b"content-type", page.content_type.encode())]
        if page.location is not None:
            headers.append((b"location", page.location.encode()))
        body = page.body.encode() if method != "HEAD" else b""
        return page.status, headers, body


def _build_app(fake: WebFake) -> Any:
    # A plain coroutine function: uvicorn would take a bound method for an ASGI2 app.
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        headers = dict(scope["headers"])
        url = headers.get(URL_HEADER.encode(), b"").decode() or _direct_url(scope, headers)
        status, response_headers, body = fake.answer(scope["method"], url)
        response_headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": body})

    return app


def _direct_url(scope: dict[str, Any], headers: dict[bytes, bytes]) -> str:
    host = headers.get(b"host", b"").decode()
    query = scope.get("query_string", b"").decode()
    return f"http://{host}{scope['path']}" + (f"?{query}" if query else "")


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
