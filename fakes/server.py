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
import contextlib
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
            self._server.exit_soon()

    def stop(self) -> None:
        """Stop serving and join the thread; safe to call twice."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.exit_soon()
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
            if self._thread is None or not self._thread.is_alive():
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
        """uvicorn's server, but it stops as soon as `exit_soon()` is called instead of within
        100 ms, and stops without uvicorn's fixed 100 ms of shutdown sleep: every live attempt
        starts and stops a fake, dozens of them at once with --nodeval-concurrency."""

        _wake: asyncio.Event | None = None
        _loop: asyncio.AbstractEventLoop | None = None

        def exit_soon(self) -> None:
            """Set `should_exit` and wake the main loop (from any thread)."""
            self.should_exit = True
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                with contextlib.suppress(RuntimeError):  # a closed loop: it has stopped already
                    loop.call_soon_threadsafe(wake.set)

        async def main_loop(self) -> None:
            self._wake, self._loop = asyncio.Event(), asyncio.get_running_loop()
            counter = 0
            while not self.should_exit:
                # on_tick refreshes the Date header and enforces limits; it expects 10 Hz. A
                # `should_exit` set without `exit_soon()` is still seen within a tick.
                try:
                    await asyncio.wait_for(self._wake.wait(), 0.1)
                except TimeoutError:
                    counter = (counter + 1) % 864000
                    if await self.on_tick(counter):
                        return

        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            """uvicorn's steps (stop accepting, ask connections to close, wait for them and the
            tasks within the graceful timeout, lifespan shutdown), but looking every 10 ms
            where uvicorn sleeps 100 ms: every live attempt stops a fake."""
            for server in self.servers:
                server.close()
            for sock in sockets or []:
                sock.close()
            for connection in list(self.server_state.connections):
                connection.shutdown()
            try:
                await asyncio.wait_for(
                    self._drained(), timeout=self.config.timeout_graceful_shutdown
                )
            except TimeoutError:
                for task in self.server_state.tasks:
                    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
            if not self.force_exit:
                await self.lifespan.shutdown()

        async def _drained(self) -> None:
            state = self.server_state
            while (state.connections or state.tasks) and not self.force_exit:
                await asyncio.sleep(0.01)
            for server in self.servers:
                await server.wait_closed()

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
        # Annotated int in uvicorn, used as asyncio's timeout: a float is what it means here.
        timeout_graceful_shutdown=max(grace_s, 0.1),  # type: ignore[arg-type]
        # Short keep-alive so idle SDK connections never delay a stop.
        timeout_keep_alive=1,
    )
    return _prompt_server_class()(config)
