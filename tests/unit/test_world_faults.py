"""World faults are the world's (issue 28): an unreadable watched path is recorded, not raised,
and a world that cannot be written is one infrastructure error naming the path."""

from __future__ import annotations

import errno
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.checks.assertions import ASSERTION, Evidence, evaluate
from pytest_nodeval.errors import DiskFullError
from pytest_nodeval.journal.events import EVENT_ADAPTER
from pytest_nodeval.world import snapshot
from pytest_nodeval.world.local import LocalWorld


class _DeniedWorld:
    """A world whose user may read nothing (as the Docker world's user and a mode-000 path)."""

    backend = "fake"
    workdir = "/workspace"

    def read(self, path: str) -> bytes:
        raise PermissionError(errno.EACCES, "cat: Permission denied (exit 1 in the world)", path)

    def list(self, path: str = ".") -> list[str]:
        raise PermissionError(errno.EACCES, "cd: can't cd (exit 74 in the world)", path)


def test_a_path_the_world_cannot_read_is_recorded_as_unreadable() -> None:
    files = snapshot(_DeniedWorld(), ["locked/", "sealed.txt"])  # type: ignore[arg-type]
    unreadable = {"exists": True, "unreadable": True, "reason": "Permission denied"}
    assert files == {"locked/": unreadable, "sealed.txt": unreadable}


def test_the_local_world_records_a_socket_as_unreadable(tmp_path: Path) -> None:
    """Root reads any mode-000 file, so the local world's unreadable path is a Unix socket
    (no one can open one for reading)."""
    world = LocalWorld()
    try:
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(Path(world.workdir) / "sock"))
            files = snapshot(world, ["sock"])
    finally:
        world.close()
    assert files["sock"]["unreadable"] is True and files["sock"]["exists"] is True
    assert files["sock"]["reason"] == "No such device or address"


def _snapshot_events(files: dict[str, Any]) -> list[Any]:
    payload = {"backend": "docker", "files": files}
    event = {"seq": 1, "ts": "t", "type": "world.snapshot", "turn": 1, "payload": payload}
    return [EVENT_ADAPTER.validate_python(event)]


def test_a_file_check_on_an_unreadable_path_says_it_was_unreadable() -> None:
    events = _snapshot_events(
        {"locked/": {"exists": True, "unreadable": True, "reason": "Permission denied"}}
    )
    contains = ASSERTION.validate_python(
        {"kind": "world_file_contains", "path": "locked/", "text": "x"}
    )
    result = evaluate(contains, Evidence(events, None))
    headline = result.message.splitlines()[0]  # the evidence below quotes the snapshot
    assert result.status == "failed"
    assert headline == (
        "expected 'locked/' to contain 'x'; it was unreadable in the world at the end "
        "(Permission denied)"
    )
    exists = ASSERTION.validate_python({"kind": "world_file_exists", "path": "locked/"})
    assert evaluate(exists, Evidence(events, None)).status == "passed"


def _no_room(code: int) -> Any:
    def copytree(source: Path, target: Path, **_: Any) -> None:
        raise OSError(code, "cannot copy", str(Path(target) / "data.bin"))

    return copytree


@pytest.mark.parametrize(
    ("code", "what"),
    [(errno.ENOSPC, "its disk is full"), (errno.EROFS, "its file system is read-only")],
)
@pytest.mark.parametrize("backend", ["local", "bwrap"])
def test_a_world_that_cannot_be_written_is_one_infrastructure_error_naming_the_path(
    backend: str,
    code: int,
    what: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed = tmp_path / "input"
    seed.mkdir()
    (seed / "data.bin").write_bytes(b"x")
    monkeypatch.setattr(shutil, "copytree", _no_room(code))
    scratch = tmp_path / "scratch"  # where the world makes its directory: only its own there
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(DiskFullError) as raised:
        _open(backend, seed)
    message = str(raised.value)
    assert raised.value.infrastructure
    assert "\n" not in message and what in message, message
    assert message.startswith(f"cannot write {scratch}/nodeval-"), message
    assert message.split(":")[0].endswith("/data.bin"), message
    assert list(scratch.iterdir()) == [], "the half-made world was left behind"


def test_a_copy_error_gathered_by_copytree_names_the_first_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def copytree(source: Path, target: Path, **_: Any) -> None:
        failed = (str(source), str(Path(target) / "big.bin"), "[Errno 28] No space left on device")
        raise shutil.Error([failed])

    monkeypatch.setattr(shutil, "copytree", copytree)
    seed = tmp_path / "input"
    seed.mkdir()
    with pytest.raises(DiskFullError, match=r"cannot write /\S+/big\.bin: its disk is full"):
        _open("local", seed)


def _open(backend: str, seed: Path) -> Any:
    if backend == "local":
        return LocalWorld(seed)
    from pytest_nodeval.world.bwrap import BwrapWorld

    return BwrapWorld(seed_dir=seed)
