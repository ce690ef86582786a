"""Nothing a world starts outlives its attempt, however the process that opened it ends.

Every open world registers how to end it in a hurry. When the process gets SIGTERM or
SIGHUP (whose default would end it without running any `finally`), or exits with worlds
still open, those are run first; the signal then does what it would have done. SIGINT
needs nothing here: it raises KeyboardInterrupt, which closes worlds on its way out.

A process killed with SIGKILL runs nothing: `leftovers.remove_left_by` is then for whoever
watched it (inspect-mode stops its worker that way), and the next run's sweep for the rest.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_lock = threading.Lock()
_pending: dict[int, Callable[[], None]] = {}
_installed = False


def track(owner: object, end: Callable[[], None]) -> None:
    """Run `end` if this process is terminated (or exits) before `forget(owner)`."""
    with _lock:
        _pending[id(owner)] = end
    _install()


def forget(owner: object) -> None:
    with _lock:
        _pending.pop(id(owner), None)


def end_all() -> int:
    """Run every pending end (each once, errors logged and skipped); how many ran."""
    with _lock:
        ends = list(_pending.values())
        _pending.clear()
    for end in ends:
        try:
            end()
        except Exception:  # one world that cannot be removed must not keep the others alive
            logger.exception("could not end an open world")
    return len(ends)


def _install() -> None:
    """Hook the exit and the signals once; only the main thread may set signal handlers."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed = True
    atexit.register(end_all)
    for signum in HANDLED_SIGNALS:
        previous = signal.getsignal(signum)
        if previous is signal.SIG_IGN:
            continue  # the process chose to survive this signal; so do its worlds
        signal.signal(signum, _handler(previous))


def _handler(previous: Any) -> Callable[[int, Any], None]:
    def on_signal(signum: int, frame: Any) -> None:
        end_all()
        if callable(previous):
            previous(signum, frame)
            return
        # The default action (end the process), as if we had never been here.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return on_signal
