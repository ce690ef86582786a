"""A world's directory on this machine, with the case's input copied in.

Making it writes to this machine's disk, so a failure there (no room, a read-only file system)
is the machine's fault, never the agent's: it becomes one WorldError naming the path, which
ends the attempt as an infrastructure error, instead of a traceback out of shutil.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import WorldError

_NO_ROOM = {
    errno.ENOSPC: ("its disk is full", "free some space"),
    errno.EDQUOT: ("its disk quota is used up", "free some space"),
    errno.EROFS: ("its file system is read-only", "point TMPDIR at a writable directory"),
}


def host_directory(
    backend: str,
    prefix: str,
    *,
    seed_dir: Path | None = None,
    subdirs: Sequence[str] = (),
    seed_into: str = "",
) -> Path:
    """A new temporary directory holding `subdirs`, with the contents of `seed_dir` (when it
    is a directory) copied into `seed_into`; removed again if any of it fails."""
    root: Path | None = None
    try:
        root = Path(tempfile.mkdtemp(prefix=prefix))
        for name in subdirs:
            (root / name).mkdir()
        if seed_dir is not None and seed_dir.is_dir():
            shutil.copytree(seed_dir, root / seed_into, dirs_exist_ok=True)
    except OSError as exc:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        raise WorldError(cannot_write(exc, backend, root)) from None
    return root


def cannot_write(exc: OSError, backend: str, root: Path | None) -> str:
    """One line for a failure to make a world's files: the path, and what is wrong with it."""
    path, code, reason = _first_failure(exc)
    where = path or str(root or tempfile.gettempdir())
    known = _NO_ROOM.get(code) if code is not None else None
    if known is not None:
        what, remedy = known
        return f"cannot write {where}: {what}; the {backend} world cannot be made ({remedy})"
    return f"cannot make the {backend} world: {where}: {reason}"


def _first_failure(exc: OSError) -> tuple[str | None, int | None, str]:
    """(path, errno, reason) of the error; of the first file that failed, for a copytree error
    (shutil.Error gathers each file's error as text: "[Errno 28] No space left on device")."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        _source, target, why = exc.args[0][0]
        code = next((c for c in _NO_ROOM if f"[Errno {c}]" in str(why)), None)
        return str(target), code, str(why)
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    path = exc.filename2 if exc.filename2 is not None else exc.filename
    return (str(path) if path is not None else None), exc.errno, reason
