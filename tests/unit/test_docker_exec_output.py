"""A docker world reads an exec's output through the HTTP response's buffer.

docker-py's exec_start reads the upgraded connection from the raw socket under the response,
so frames that arrived together with the response's headers (already buffered) were lost: a
fast `cat` came back empty with exit code 0 when the machine was busy (docker/docker-py#3332).
These tests give `_exec_output` a response whose frames sit in the buffer while the raw socket
has nothing more, as on the wire in that race.
"""

from __future__ import annotations

import io
import struct
from typing import Any

from pytest_nodeval.world.docker import _exec_output


def _frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


class _Response:
    """What requests hands back for the upgraded exec: raw._fp.fp is http.client's reader."""

    def __init__(self, buffered: io.BufferedReader) -> None:
        self.raw = type("Raw", (), {"_fp": type("Fp", (), {"fp": buffered})()})()
        self.closed = False

    def close(self) -> None:
        self.closed = True


class _API:
    def __init__(self, wire: bytes, base_url: str = "http+docker://localhost") -> None:
        self.base_url = base_url
        self.wire = wire
        self.posted: list[tuple[str, Any]] = []
        self.response: _Response | None = None

    def _url(self, path: str, *args: str) -> str:
        return path.format(*args)

    def _post_json(self, url: str, **kwargs: Any) -> _Response:
        self.posted.append((url, kwargs))
        buffered = io.BufferedReader(io.BytesIO(self.wire))
        buffered.peek(len(self.wire))  # all of it already in the buffer, none left on the socket
        self.response = _Response(buffered)
        return self.response

    def _raise_for_status(self, response: _Response) -> None:
        assert response is self.response

    def exec_start(self, exec_id: str, demux: bool) -> tuple[bytes | None, bytes | None]:
        self.posted.append(("exec_start", {"demux": demux}))
        return b"over ssh", None


def test_buffered_frames_are_read_and_demultiplexed() -> None:
    pdf = b"%PDF-1.7\n" + bytes(range(256)) * 40  # binary, several KB
    api = _API(_frame(1, pdf[:3000]) + _frame(2, b"warning\n") + _frame(1, pdf[3000:]))
    assert _exec_output(api, "e1") == (pdf, b"warning\n")
    assert api.response is not None and api.response.closed


def test_the_exec_starts_attached_without_a_tty() -> None:
    api = _API(b"")
    assert _exec_output(api, "e2") == (b"", b"")
    url, kwargs = api.posted[0]
    assert url == "/exec/e2/start"
    assert kwargs["data"] == {"Tty": False, "Detach": False} and kwargs["stream"] is True
    assert kwargs["headers"] == {"Connection": "Upgrade", "Upgrade": "tcp"}


def test_a_stream_cut_inside_a_frame_keeps_what_arrived() -> None:
    api = _API(_frame(1, b"complete\n") + _frame(1, b"cut")[:-1])
    assert _exec_output(api, "e3") == (b"complete\ncu", b"")


def test_an_ssh_engine_keeps_docker_pys_own_reading() -> None:
    api = _API(b"", base_url="http+docker://ssh")
    assert _exec_output(api, "e4") == (b"over ssh", b"")
    assert api.posted == [("exec_start", {"demux": True})]
