"""`nodeval inspect-mode` as a harness runs it: a process, stdin, stdout and an exit status."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_nodeval.protocol.inspect_mode import EXIT_CODES

from .conftest import CLI, COMMAND_TIMEOUT_S, check_stdout, request_bytes, run_command, write_config


@pytest.mark.parametrize(
    "args", [("inspect-mode",), ("eval", "--inspect-mode")], ids=["inspect-mode", "eval"]
)
def test_one_request_one_response_line(config_path: Path, args: tuple[str, ...]) -> None:
    result = run_command(
        request_bytes(config_path=str(config_path), user_input="What is 2 + 2?"), *args
    )
    response = check_stdout(result)
    assert result.returncode == 0 and response.output == "2 + 2 = 4."


def test_stray_prints_go_to_stderr_not_stdout(tmp_path: Path) -> None:
    noisy = (
        "import pytest_nodeval.protocol.inspect_mode as m\n"
        "serve = m.handle\n"
        "def handle(raw):\n"
        "    print('noise from somewhere')\n"
        "    return serve(raw)\n"
        "m.handle = handle\n"
        "from pytest_nodeval.cli import main\n"
        "raise SystemExit(main(['inspect-mode']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", noisy], input=b"{}", capture_output=True, timeout=COMMAND_TIMEOUT_S
    )
    response = check_stdout(result)
    assert response.error is not None and response.error.code == "unknown_schema"
    assert b"noise from somewhere" in result.stderr


def test_a_closed_stdin_is_an_empty_request(tmp_path: Path) -> None:
    command = " ".join(shlex.quote(part) for part in (*CLI, "inspect-mode"))
    result = subprocess.run(
        ["sh", "-c", f"exec 0<&-; exec {command}"], capture_output=True, timeout=COMMAND_TIMEOUT_S
    )
    response = check_stdout(result)
    assert result.returncode == EXIT_CODES["malformed_json"]
    assert response.error is not None and "empty" in response.error.message


def test_a_bad_command_line_exits_4_without_json() -> None:
    result = subprocess.run(
        [*CLI, "inspect-mode", "--no-such-option"],
        input=b"{}",
        capture_output=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert result.returncode == 4 and result.stdout == b""
    result = subprocess.run(
        [*CLI, "eval"], input=b"{}", capture_output=True, timeout=COMMAND_TIMEOUT_S
    )
    assert result.returncode == 4 and b"--inspect-mode" in result.stderr


def test_the_deadline_stops_the_session_and_its_commands(tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    command = f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300"
    config = write_config(
        tmp_path,
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": command}}]},
            {"text": "done"},
        ],
        tools=["shell"],
    )
    timeout_s = 12  # leaves a busy machine time to start the worker and the command
    start = time.monotonic()
    result = run_command(
        request_bytes(
            config_path=str(config),
            user_input="sleep",
            timeout_s=timeout_s,
            journal_dir=str(tmp_path / "journal"),
        )
    )
    elapsed = time.monotonic() - start
    response = check_stdout(result)
    assert response.error is not None and response.error.code == "timeout"
    assert result.returncode == EXIT_CODES["timeout"]
    assert timeout_s <= elapsed < timeout_s + 30
    assert pid_file.is_file(), (
        "the command never started, so the test proved nothing; raise timeout_s"
    )
    assert _gone(int(pid_file.read_text())), "the tool's command outlived the deadline"
    # The kept journal shows how far the session got.
    assert response.journal_dir == str(tmp_path / "journal")
    assert '"tool.call"' in (tmp_path / "journal" / "events.jsonl").read_text()


def test_killing_the_command_stops_its_worker_and_commands(tmp_path: Path) -> None:
    """A harness that gives up kills `nodeval inspect-mode`; nothing it started may run on."""
    pid_file = tmp_path / "sleeper.pid"
    command = f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300"
    config = write_config(
        tmp_path,
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": command}}]},
            {"text": "done"},
        ],
        tools=["shell"],
    )
    request = tmp_path / "request.json"
    request.write_bytes(request_bytes(config_path=str(config), user_input="sleep", timeout_s=600))
    with request.open("rb") as stdin:
        nodeval = subprocess.Popen(
            [*CLI, "inspect-mode"],
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "NODEVAL_WORLD": "local"},
        )
    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not pid_file.is_file() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline and nodeval.poll() is None, (
                "the command never started"
            )
            time.sleep(0.1)
    finally:
        nodeval.kill()
        nodeval.wait()
    assert _gone(int(pid_file.read_text()), wait_s=15), "the tool's command outlived inspect-mode"


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """True once the process has exited (a zombie waiting for its new parent counts)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        except OSError:
            return not _alive(pid)
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
