"""The Phoenix fixture's own parts that need no Phoenix: the ports it chooses, and how it tells
a start that lost its port (tried again) from any other failed start (the test fails)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import phoenix


def test_a_chosen_port_is_below_the_ephemeral_range_and_free_on_every_address() -> None:
    for _ in range(20):
        port = phoenix._free_port()
        assert phoenix.PRIVATE_PORTS_FROM <= port < phoenix._first_ephemeral_port()
        assert phoenix._bindable(port)


def test_the_second_port_is_never_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    first = phoenix._free_port()
    second = phoenix._free_port(other_than=first)
    picks = iter([first, first, second])
    monkeypatch.setattr(phoenix.random, "randrange", lambda low, high: next(picks))
    assert phoenix._free_port(other_than=first) == second


def test_a_port_held_by_another_socket_is_not_bindable() -> None:
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        assert not phoenix._bindable(holder.getsockname()[1])


def _exited(tmp_path: Path, printed: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "server.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-c", f"print({printed!r}); raise SystemExit(3)"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    process.wait()
    return process, log


def test_a_start_that_lost_its_port_is_tried_again(tmp_path: Path) -> None:
    process, log = _exited(tmp_path, "RuntimeError: Failed to bind to address [::]:47707")
    ready = phoenix._wait_until_ready(process, "http://127.0.0.1:9", log, last_attempt=False)
    assert ready is False


def test_the_last_attempt_fails_the_test_with_the_log(tmp_path: Path) -> None:
    process, log = _exited(tmp_path, "RuntimeError: Failed to bind to address [::]:47707")
    with pytest.raises(pytest.fail.Exception, match="(?s)exited with 3.*Failed to bind"):
        phoenix._wait_until_ready(process, "http://127.0.0.1:9", log, last_attempt=True)


def test_any_other_exit_fails_the_test_at_once(tmp_path: Path) -> None:
    process, log = _exited(tmp_path, "sqlite3.OperationalError: disk I/O error")
    with pytest.raises(pytest.fail.Exception, match="(?s)exited with 3.*disk I/O error"):
        phoenix._wait_until_ready(process, "http://127.0.0.1:9", log, last_attempt=False)
