"""The conversation with a program turn by turn (`stdio: jsonl`, docs/command-agents.md).

One JSON object a line each way, on the program's stdin and stdout:

- nodeval sends `{"schema": 1, "type": "user", "text": ...}` for each of the user's turns, and
  closes the program's stdin once the user has no more to say;
- the program prints `{"type": "output", "text": ...}` for each answer (an `io.output`) and
  `{"type": "turn_end"}` when it waits for the user again.

The user hears a turn's answers joined by newlines, which is what a persona replies to. The
program's stdin and stdout are a Unix socket (runner/relay.py makes them so inside the world),
so the same code talks with a program in every world.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

from ..journal.writer import JournalWriter

PROTOCOL = 1
_POLL_S = 0.05
"""How often a wait looks whether the program or the proxy ended it."""
_SHOWN = 120
"""Characters of a line that is not a message quoted in the error."""


class ProtocolError(Exception):
    """The program printed a line that is not a message of the protocol."""


class Dialogue:
    """One program's conversation, over the connection it made to `listener`."""

    def __init__(
        self, listener: socket.socket, journal: JournalWriter, over: Callable[[], bool]
    ) -> None:
        self._listener, self._journal, self._over = listener, journal, over
        """`over()` says the program has exited or replay has stopped it: stop waiting."""
        self._conn: socket.socket | None = None
        self._buffer = b""
        self._line_no = 0
        self._ended = False
        """The program's output ended, or `over()` said so: no more turns."""

    def run(self, user: Any) -> None:
        """Every turn of the user's, each answered in full, then end of file for the program.
        Raises ProtocolError at a line that is no message."""
        self._conn = self._accept()
        if self._conn is None:
            return  # the program ended before it started to listen
        try:
            heard: str | None = None
            turn = 0
            while (said := user.next_input(heard)) is not None:
                turn += 1
                self._journal.set_turn(turn)
                self._journal.emit("io.input", {"text": said.text, "source": said.source})
                if not self._send({"schema": PROTOCOL, "type": "user", "text": said.text}):
                    return
                answers = list(self._answers())
                heard = "\n".join(answers) if answers else None
                if self._ended:
                    return
            self._conn.shutdown(socket.SHUT_WR)  # the user has nothing more to say
            for _ in self._answers(until_eof=True):
                pass
        finally:
            self._conn.close()

    def _accept(self) -> socket.socket | None:
        self._listener.settimeout(_POLL_S)
        while True:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                if self._over():
                    return None
                continue
            conn.settimeout(_POLL_S)
            return conn

    def _send(self, message: dict[str, Any]) -> bool:
        assert self._conn is not None
        try:
            self._conn.sendall(json.dumps(message).encode() + b"\n")
        except OSError:
            return False  # the program is gone: its exit status says why
        return True

    def _answers(self, *, until_eof: bool = False) -> Iterator[str]:
        """The program's answers up to its `turn_end` (or to its end of output), journaled."""
        for line in self._lines():
            kind, text = self._message(line)
            if kind == "output":
                self._journal.emit("io.output", {"text": text})
                yield text
            elif not until_eof:
                return

    def _message(self, line: bytes) -> tuple[str, str]:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict):
            kind, text = message.get("type"), message.get("text")
            if kind == "turn_end":
                return kind, ""
            if kind == "output" and isinstance(text, str):
                return kind, text
        shown = line.decode("utf-8", "replace").strip()
        shown = shown if len(shown) <= _SHOWN else shown[:_SHOWN] + "..."
        raise ProtocolError(
            f"line {self._line_no} of the program's stdout is not a message of the jsonl "
            f'protocol: {shown!r}; print {{"type": "output", "text": "..."}} for an answer '
            'and {"type": "turn_end"} when the user may speak (docs/command-agents.md)'
        )

    def _lines(self) -> Iterator[bytes]:
        """Complete non-empty lines from the program, until its end of output or `over()`."""
        assert self._conn is not None
        while True:
            line, found, rest = self._buffer.partition(b"\n")
            if found:
                self._buffer = rest
                self._line_no += 1
                if line.strip():
                    yield line
                continue
            try:
                chunk = self._conn.recv(65536)
            except TimeoutError:
                if self._over():
                    self._ended = True
                    return
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._ended = True
                if self._buffer.strip():
                    self._line_no += 1
                    line, self._buffer = self._buffer, b""
                    yield line
                return
            self._buffer += chunk
