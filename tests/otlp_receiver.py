"""A minimal OTLP/HTTP trace receiver on loopback, for the exporter's plugin tests.

It decodes what the real OTLP exporter sends with OpenTelemetry's own protobuf messages and
keeps every request as one OTLP JSON line, which `sampling.otlp_file.read_traces` reads back.
The test against a real receiver (Arize Phoenix) is tests/integration/test_otel_phoenix.py.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from pytest_nodeval.sampling.otlp_file import Span, read_traces


class Receiver:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.lines: list[str] = []
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def traces(self, tmp_path: Path) -> dict[str, list[Span]]:
        path = tmp_path / "received.jsonl"
        path.write_text("".join(line + "\n" for line in self.lines))
        return read_traces(path)


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    receiver = Receiver(server)
    server.receiver = receiver  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest.FromString(body)
        receiver: Receiver = self.server.receiver  # type: ignore[attr-defined]
        receiver.paths.append(self.path)
        receiver.lines.append(json.dumps(MessageToDict(request, use_integers_for_enums=True)))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass
