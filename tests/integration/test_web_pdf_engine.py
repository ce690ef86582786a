"""The engine with the `web` and `pdf` tools: recorded with the mock provider (no key) against a
local HTTP server and a PDF in the world, then replayed with the server gone and sockets blocked."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pytest_nodeval.case.directory import load_case
from pytest_nodeval.runner.session import AttemptSettings, Observed, run_case

from ..conftest import record_case, write_case
from ..pdf_samples import make_pdf

PAGE = (
    b"<html><head><title>Status</title></head><body><nav>Home | Status | Blog</nav><main>"
    b"<h1>Service status</h1>"
    b"<p>All systems are operational since the maintenance window on Monday.</p>"
    b"</main><footer>Example Corp</footer></body></html>"
)


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: Any) -> None:
        pass


def _serve() -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _case(root: Path, base: str) -> Path:
    script = [
        {
            "tool_calls": [
                {"name": "web", "args": {"url": f"{base}/status"}},
                {"name": "web", "args": {"url": "http://blocked.example.net/"}},
            ]
        },
        {
            "when": {"after_tool": "web"},
            "tool_calls": [{"name": "pdf", "args": {"path": "report.pdf", "pages": "2-3"}}],
        },
        {"when": {"after_tool": "pdf"}, "text": "All systems are operational; revenue grew."},
    ]
    directory = write_case(
        root,
        "web-and-pdf",
        script=script,
        inputs=["How are we doing?"],
        tools=["web", "pdf"],
        record=False,
    )
    config_path = directory / "input" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["web"] = {"allow": [base.removeprefix("http://")], "timeout_s": 5}
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    (directory / "input" / "world").mkdir()
    (directory / "input" / "world" / "report.pdf").write_bytes(
        make_pdf(["Cover", "Revenue grew by 12 percent", "Costs fell", "Appendix"])
    )
    return directory


def _results(observed: Observed) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in e.payload_dict().items() if k != "latency_ms"}
        for e in observed.events
        if e.type == "tool.result"
    ]


def test_web_and_pdf_record_live_and_replay_offline(
    tmp_path: Path, block_network: Callable[[], list[Any]]
) -> None:
    server = _serve()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        recorded = record_case(_case(tmp_path, base))
    finally:
        server.shutdown()
        server.server_close()
    web, blocked, pdf = _results(recorded)
    assert web["ok"] and "All systems are operational" in web["result"]["text"]
    assert not blocked["ok"] and "host blocked.example.net:80 is not allowed" in blocked["error"]
    assert (
        pdf["ok"]
        and pdf["result"]["page_count"] == 4
        and "Revenue grew by 12 percent" in pdf["result"]["text"]
    )
    assert "Cover" not in pdf["result"]["text"]

    attempts = block_network()
    replayed = run_case(
        load_case(tmp_path / "web-and-pdf"),
        AttemptSettings(mode="deterministic"),
        tmp_path / "replay",
    )

    assert replayed.divergence is None and replayed.status == "ok", replayed.metrics()
    assert replayed.world_backend is None  # replay opens no world: the pdf result is the journal's
    assert _results(replayed) == [web, blocked, pdf]
    assert replayed.output == "All systems are operational; revenue grew."
    assert attempts == []


def test_a_case_records_its_web_pages_from_the_fake(
    tmp_path: Path, block_network: Callable[[], list[Any]]
) -> None:
    directory = write_case(
        tmp_path,
        "web-fake",
        inputs=["What is the refund window?"],
        tools=["web"],
        record=False,
        script=[
            {"tool_calls": [{"name": "web", "args": {"url": "https://help.example.com/refunds"}}]},
            {"when": {"after_tool": "web"}, "text": "30 days."},
        ],
    )
    config_path = directory / "input" / "config.yaml"
    config = {
        **yaml.safe_load(config_path.read_text()),
        "web": {"allow": ["help.example.com"], "fake": True},
    }
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    page = (
        "<html><body><article><p>Refunds are accepted within 30 days of purchase.</p>"
        "</article></body></html>"
    )
    (directory / "input" / "web.yaml").write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "pages": [{"url": "https://help.example.com/refunds", "body": page}],
            }
        )
    )

    recorded = record_case(directory)
    attempts = block_network()
    replayed = run_case(
        load_case(directory), AttemptSettings(mode="deterministic"), tmp_path / "replay"
    )

    [result] = _results(recorded)
    assert result["ok"] and result["result"]["url"] == "https://help.example.com/refunds"
    assert "within 30 days of purchase" in result["result"]["text"]
    assert replayed.divergence is None and _results(replayed) == [result]
    assert attempts == []


def test_a_fake_web_case_without_its_pages_file_names_the_file(tmp_path: Path) -> None:
    directory = write_case(
        tmp_path, "no-pages", inputs=["hi"], tools=["web"], record=False, script=[{"text": "hi"}]
    )
    config_path = directory / "input" / "config.yaml"
    config = {
        **yaml.safe_load(config_path.read_text()),
        "web": {"allow": ["help.example.com"], "fake": True},
    }
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    try:
        run_case(
            load_case(directory),
            AttemptSettings(mode="record", world_backend="local"),
            tmp_path / "j",
        )
    except Exception as exc:
        message = str(exc)
    else:
        message = ""
    assert f"{directory / 'input' / 'web.yaml'}: missing" in message
    assert "answered by pytest_nodeval_fakes.web" in message
