"""Serve an ASGI app on loopback from a background thread.

`ServedApp` binds 127.0.0.1 on an ephemeral port (the OS picks it, so parallel tests and
xdist workers never collide), runs uvicorn in a daemon thread with its own event loop, and
returns once the socket accepts connections. `stop()` is prompt: open streams get a short
grace period, then their tasks are cancelled, and the thread is joined.

Each instance owns its socket, loop and thread; nothing is shared between instances, so
any number can run in one process.

Deliberately not covered: TLS, IPv6, Unix sockets, and serving on a fixed port.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
import time
from types import TracebackType
from typing import Any

__all__ = ["ServedApp", "ServerStartError"]

_LOOPBACK = "127.0.0.1"


class ServerStartError(RuntimeError):
    """The app did not start serving within the start timeout (or its startup failed)."""


class ServedApp:
    """An ASGI app served on `http://127.0.0.1:<ephemeral port>` until `stop()`."""

    def __init__(
        self,
        app: Any,
        *,
        name: str = "fake",
        start_timeout_s: float = 10.0,
        grace_s: float = 0.5,
    ) -> None:
        self.app = app
        self.name = name
        self._start_timeout_s = start_timeout_s
        self._grace_s = grace_s
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None
        self._exit_code: int | str | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{self.name} server is not started; call start() first")
        return self._port

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. ``http://127.0.0.1:53411``."""
        return f"http://{_LOOPBACK}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ServedApp:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} server was already started")
        sock = _bind_ephemeral()
        self._port = sock.getsockname()[1]
        self._server = _make_uvicorn_server(self.app, self._grace_s)
        self._thread = threading.Thread(
            target=self._serve, args=(sock,), name=f"{self.name}-{self._port}", daemon=True
        )
        self._thread.start()
        self._wait_started()
        return self

    def signal_stop(self) -> None:
        """Ask the server to stop without waiting (to stop several at once, then `stop()` each)."""
        if self._server is not None:
            self._server.should_exit = True

    def stop(self) -> None:
        """Stop serving and join the thread; safe to call twice."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(self._grace_s + 5.0)
        if thread.is_alive():
            # A lifespan shutdown that hangs must not hang the test run with it.
            server.force_exit = True
            thread.join(5.0)
        self._server = None

    def __enter__(self) -> ServedApp:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.url if self._port is not None else "not started"
        return f"<ServedApp {self.name} {where}>"

    def _serve(self, sock: socket.socket) -> None:
        try:
            self._server.run(sockets=[sock])
        except SystemExit as exit_:
            # uvicorn calls sys.exit() when the app's lifespan startup fails.
            self._exit_code = exit_.code
        finally:
            sock.close()

    def _wait_started(self) -> None:
        deadline = time.monotonic() + self._start_timeout_s
        while time.monotonic() < deadline:
            if self._server.started:
                return
            if not self._thread.is_alive():
                self._server = None
                raise ServerStartError(
                    f"{self.name} server exited during startup (uvicorn exit code "
                    f"{self._exit_code}); its log says why"
                )
            time.sleep(0.005)
        self.stop()
        raise ServerStartError(
            f"{self.name} server did not start within {self._start_timeout_s:g} s"
        )


def _bind_ephemeral() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this. asyncio only sets it itself when the socket's proto is
    # IPPROTO_TCP, which a plain socket() is not; without it every keep-alive response waits
    # ~40 ms on delayed ACKs (headers and body are separate writes).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((_LOOPBACK, 0))
    # Listening before uvicorn starts means a client never races the bind.
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@functools.cache
def _prompt_server_class() -> Any:
    import uvicorn  # lazy: importing `fakes` must not pay for uvicorn

    class PromptServer(uvicorn.Server):
        """uvicorn's server, but it notices `should_exit` within 10 ms instead of 100 ms."""

        async def main_loop(self) -> None:
            ticks = 0
            while not self.should_exit:
                await asyncio.sleep(0.01)
                ticks += 1
                # on_tick refreshes the Date header and enforces limits; it expects 10 Hz.
                if ticks % 10 == 0 and await self.on_tick(ticks // 10 % 864000):
                    return

    return PromptServer


def _make_uvicorn_server(app: Any, grace_s: float) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app,
        # log_config=None keeps uvicorn from reconfiguring the process's logging.
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="auto",
        # Pinned so behaviour does not depend on which optional uvicorn extras are installed.
        http="h11",
        ws="none",
        loop="asyncio",
        timeout_graceful_shutdown=max(grace_s, 0.1),
        # Short keep-alive so idle SDK connections never delay a stop.
        timeout_keep_alive=1,
    )
    return _prompt_server_class()(config)
