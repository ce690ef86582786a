"""`fakes.web`: scripted pages by URL over plain HTTP, and scripts it refuses."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from pytest_nodeval_fakes import ScriptError
from pytest_nodeval_fakes.web import URL_HEADER, WebFake

SCRIPT = {
    "schema_version": 1,
    "pages": [
        {"url": "https://docs.example.com/a", "body": "<p>A</p>"},
        {
            "url": "https://docs.example.com/old",
            "status": 308,
            "location": "https://docs.example.com/a",
        },
        {
            "url": "https://docs.example.com/data",
            "content_type": "application/json",
            "body": '{"n": 1}',
        },
    ],
}


def test_pages_are_answered_by_the_url_in_the_header(http: httpx2.Client) -> None:
    with WebFake(SCRIPT) as fake:
        page = http.get(fake.url + "/anything", headers={URL_HEADER: "https://docs.example.com/a"})
        moved = http.get(fake.url, headers={URL_HEADER: "https://docs.example.com/old"})
        data = http.get(fake.url, headers={URL_HEADER: "https://docs.example.com/data"})
        missing = http.get(fake.url, headers={URL_HEADER: "https://docs.example.com/b"})
    assert (page.status_code, page.headers["content-type"], page.text) == (
        200,
        "text/html; charset=utf-8",
        "<p>A</p>",
    )
    assert moved.status_code == 308 and moved.headers["location"] == "https://docs.example.com/a"
    assert data.json() == {"n": 1}
    assert (
        missing.status_code == 404
        and missing.text == "no page scripted for https://docs.example.com/b"
    )
    assert [url for _, url in fake.requests] == [
        "https://docs.example.com/a",
        "https://docs.example.com/old",
        "https://docs.example.com/data",
        "https://docs.example.com/b",
    ]


def test_a_redirect_without_a_location_names_the_page(tmp_path: Path) -> None:
    script = tmp_path / "web.yaml"
    script.write_text(
        "schema_version: 1\npages:\n  - {url: 'https://x.example/old', status: 301}\n"
    )
    with pytest.raises(ScriptError) as raised:
        WebFake(script)
    assert str(raised.value).startswith(f"{script}: invalid web script")
    assert "pages.0: Value error, https://x.example/old: a 301 redirect needs a `location`" in str(
        raised.value
    )
