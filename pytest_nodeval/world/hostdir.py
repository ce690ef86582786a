"""A world's directory on this machine, with the case's input copied in.

Making it writes to this machine's disk, so a failure there (no room, a read-only file system)
is the machine's fault, never the agent's: it becomes one line naming the path (errors.py's
DiskFullError for a disk with no room, a WorldError otherwise), which ends the attempt as an
infrastructure error, instead of a traceback out of shutil.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import WorldError, disk_full, no_room


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
    except BaseException as exc:  # Ctrl-C while the seed is copied included
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        if not isinstance(exc, OSError):
            raise
        path, reason = _first_failure(exc)
        where = Path(path or root or tempfile.gettempdir())
        if no_room(exc):  # the errors module's one line, as for a journal or a report
            raise disk_full(exc, where) from None
        raise WorldError(f"cannot make the {backend} world: {where}: {reason}") from None
    return root


def _first_failure(exc: OSError) -> tuple[str | None, str]:
    """(path, reason) of the error; of the first file that failed, for a copytree error
    (shutil.Error gathers each file's error as text: "[Errno 28] No space left on device")."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        _source, target, why = exc.args[0][0]
        return str(target), str(why)
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    path = exc.filename2 if exc.filename2 is not None else exc.filename
    return (str(path) if path is not None else None), reason
