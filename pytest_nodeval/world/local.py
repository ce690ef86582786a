"""The `local` world: a temporary directory and plain subprocesses.

It isolates nothing (a command can read the developer's files and reach the network),
so choosing it warns once. It is what replay-free unit tests and machines without
Docker or bubblewrap fall back to.

Every command carries a mark in its environment (processes.WORLD_MARK_ENV), so closing
the world kills what its commands left running, even a `setsid` daemon that left their
process group; so does the process ending on SIGTERM (reaper.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from . import ExecResult, reaper
from .hostdir import host_directory
from .processes import WORLD_MARK_ENV, kill_marked, owner_mark


class LocalWorld:
    backend = "local"

    def __init__(self, seed_dir: Path | None = None) -> None:
        self._root = host_directory(self.backend, "nodeval-world-", seed_dir=seed_dir)
        self.workdir = str(self._root)
        self.mark = f"{owner_mark()}:{uuid.uuid4().hex}"
        try:
            reaper.track(self, self._end)
        except BaseException:  # Ctrl-C before the reaper knows the directory
            shutil.rmtree(self._root, ignore_errors=True)
            raise

    def _path(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else self._root / path

    def exec(
        self, argv: Sequence[str], *, timeout_s: float, stdin: bytes | None = None
    ) -> ExecResult:
        start = time.perf_counter()
        # A new session lets a timeout kill the whole process group, not just the shell.
        proc = subprocess.Popen(
            list(argv),
            cwd=self._root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, WORLD_MARK_ENV: self.mark},
        )
        try:
            out, err = proc.communicate(stdin, timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
            timed_out = True
        except BaseException:
            os.killpg(proc.pid, 9)  # interrupted (Ctrl-C): the command must not run on
            raise
        return ExecResult(
            exit_code=proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration_ms=(time.perf_counter() - start) * 1000,
            timed_out=timed_out,
        )

    def read(self, path: str) -> bytes:
        return self._path(path).read_bytes()

    def write(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def list(self, path: str = ".") -> list[str]:
        entries = self._path(path).iterdir()
        return sorted(e.name + ("/" if e.is_dir() else "") for e in entries)

    def close(self) -> None:
        reaper.forget(self)
        self._end()

    def _end(self) -> None:
        kill_marked(self.mark)
        shutil.rmtree(self._root, ignore_errors=True)
