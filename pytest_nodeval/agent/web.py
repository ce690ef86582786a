"""Fetching one web page for the `web` tool: the allow-list, the limits, and readable text.

The fetch runs in the harness process, not in the world. The allow-list is checked on
every hop (the first URL and each redirect) before anything is sent, which no world
backend can do: a docker or bwrap world's network is all or nothing. It also means the
world needs neither network nor Python nor an HTML extractor. The body is read as a
stream and reading stops at `max_bytes`, so a huge page costs at most the limit.

HTML becomes readable text through trafilatura (the main content, without navigation
and footers); plain text, JSON, XML, Markdown and CSV pass through as they are.
Everything that can go wrong with a fetch is a `WebError`, which the tool turns into an
error the model sees.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_REDIRECTS = 5
ORIGINAL_URL_HEADER = "x-nodeval-url"
"""Set on requests routed to fakes.web: the URL the tool fetched (the fake answers by it)."""

_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/ld+json")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class WebError(Exception):
    """A fetch that did not give a page: the message is what the model is told."""


@dataclass(frozen=True, slots=True)
class WebPolicy:
    """What one `web` tool may do (from the config's `web:` section)."""

    allow: tuple[str, ...]
    max_bytes: int
    timeout_s: float
    route_to: str | None = None
    """The base URL of a running fakes.web that answers every fetch instead of the network."""


@dataclass(frozen=True, slots=True)
class Page:
    url: str
    """The final URL, after redirects."""
    status: int
    content_type: str
    title: str | None
    text: str


def host_allowed(host: str, port: int, allow: tuple[str, ...]) -> bool:
    """Whether `host:port` is on the allow-list (`host`, `host:port` or `*.domain`)."""
    host = host.lower().rstrip(".")
    for entry in allow:
        name, _, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
        if entry_port and int(entry_port) != port:
            continue
        if name.startswith("*."):
            if host.endswith(name[1:]):
                return True
        elif host == name.strip("[]"):
            return True
    return False


def _has_port(entry: str) -> bool:
    return entry.rsplit("]", 1)[-1].count(":") == 1


def fetch(url: str, policy: WebPolicy) -> Page:
    """The page at `url` as readable text; a WebError for anything else."""
    import httpx2

    transport = _route_to_fake(policy.route_to) if policy.route_to else None
    # Redirects are followed by hand, each one checked against the allow-list first.
    options: dict[str, Any] = {"timeout": policy.timeout_s, "follow_redirects": False}
    if transport is not None:
        # No proxy between the tool and its fake
        options.update(transport=transport, trust_env=False)
    try:
        with httpx2.Client(**options) as client:
            # The clock starts once the client is built (its TLS setup is the harness's time).
            return _follow(
                client, _checked_url(url, policy), policy, time.monotonic() + policy.timeout_s
            )
    except httpx2.TimeoutException:
        raise WebError(_too_slow(url, policy)) from None
    except httpx2.HTTPError as exc:
        raise WebError(f"{url}: {type(exc).__name__}: {exc}") from None


def _checked_url(url: str, policy: WebPolicy) -> Any:
    import httpx2

    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError) as exc:
        raise WebError(f"{url!r} is not a URL: {exc}") from None
    if parsed.scheme not in _DEFAULT_PORTS or not parsed.host:
        raise WebError(f"{url!r}: only http:// and https:// URLs with a host can be fetched")
    port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
    if not host_allowed(parsed.host, port, policy.allow):
        allowed = ", ".join(policy.allow) or "none"
        raise WebError(
            f"{url}: host {parsed.host}:{port} is not allowed "
            f"(web.allow in input/config.yaml: {allowed})"
        )
    return parsed


def _follow(client: Any, url: Any, policy: WebPolicy, deadline: float) -> Page:
    for _ in range(MAX_REDIRECTS + 1):
        if time.monotonic() > deadline:
            raise WebError(_too_slow(str(url), policy))
        headers = {ORIGINAL_URL_HEADER: str(url)} if policy.route_to else {}
        with client.stream("GET", url, headers=headers) as response:
            location = response.headers.get("location")
            if response.is_redirect and location:
                url = _redirect(url, location, policy)
                continue
            if not response.is_success:
                raise WebError(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
            body = _read_limited(response, str(url), policy, deadline)
            return _page(
                str(url), response.status_code, response.headers.get("content-type", ""), body
            )
    raise WebError(f"{url}: more than {MAX_REDIRECTS} redirects")


def _redirect(url: Any, location: str, policy: WebPolicy) -> Any:
    try:
        return _checked_url(str(url.join(location)), policy)
    except WebError as exc:
        raise WebError(f"{url} redirected to {exc}") from None


def _read_limited(response: Any, url: str, policy: WebPolicy, deadline: float) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > policy.max_bytes:
        raise WebError(
            f"{url}: the page is {int(declared)} bytes, more than the "
            f"{policy.max_bytes}-byte limit (web.max_bytes); nothing was read"
        )
    chunks, size = [], 0
    for chunk in _chunks(response, url, deadline, policy):
        size += len(chunk)
        if size > policy.max_bytes:
            raise WebError(
                f"{url}: the page is larger than the {policy.max_bytes}-byte limit "
                f"(web.max_bytes); stopped reading at {size} bytes"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _chunks(response: Any, url: str, deadline: float, policy: WebPolicy) -> Iterator[bytes]:
    # The read timeout is per chunk; a server that trickles bytes must still stop at the limit.
    for chunk in response.iter_bytes():
        if time.monotonic() > deadline:
            raise WebError(_too_slow(url, policy))
        yield chunk


def _too_slow(url: str, policy: WebPolicy) -> str:
    return f"{url}: no answer within the {policy.timeout_s:g}s time limit (web.timeout_s)"


def _page(url: str, status: int, content_type: str, body: bytes) -> Page:
    media = content_type.split(";")[0].strip().lower()
    if media in _HTML_TYPES or (not media and body.lstrip()[:1] == b"<"):
        title, text = readable_html(body, url)
        return Page(url, status, media or "text/html", title, text)
    if media.startswith(_TEXT_TYPES) or media.endswith(("+json", "+xml")):
        return Page(url, status, media, None, body.decode(_charset(content_type), "replace"))
    raise WebError(
        f"{url}: content type {media or 'unknown'} is not text "
        "(the web tool reads HTML, plain text, JSON and XML)"
    )


def _charset(content_type: str) -> str:
    import codecs

    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset":
            try:
                return codecs.lookup(value.strip('"')).name
            except LookupError:
                break
    return "utf-8"


def readable_html(html: bytes, url: str | None = None) -> tuple[str | None, str]:
    """(title, main text) of an HTML page; the whole visible text when no main content is found."""
    import trafilatura

    text = trafilatura.extract(html, url=url, include_comments=False, include_tables=True)
    metadata = trafilatura.extract_metadata(html)
    title = metadata.title if metadata is not None else None
    return title, text if text is not None else trafilatura.html2txt(html)


def _route_to_fake(base_url: str) -> Any:
    """An httpx2 transport that sends every request to fakes.web (which reads
    ORIGINAL_URL_HEADER)."""
    import httpx2

    base = httpx2.URL(base_url)

    class RouteToFake(httpx2.HTTPTransport):
        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            request.url = request.url.copy_with(scheme=base.scheme, host=base.host, port=base.port)
            return super().handle_request(request)

    return RouteToFake()
