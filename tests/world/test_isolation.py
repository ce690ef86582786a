"""What every sandboxed world (docker, bwrap) must guarantee, checked against the real thing."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_nodeval.world import KILLED_EXIT_CODE, World, WorldLimits, snapshot

MakeWorld = Callable[..., World]
PY = "python3"


def interfaces(world: World) -> list[str]:
    """The network interfaces a command in the world can see."""
    program = "import socket; print(*sorted(name for _, name in socket.if_nameindex()))"
    return world.exec([PY, "-c", program], timeout_s=30).stdout.split()


def host_processes_running(needle: str) -> list[str]:
    """Command lines on this host containing needle (bwrap's sandboxes are host processes)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue  # the process ended while we looked
        if needle in text:
            found.append(text)
    return found


def test_seed_files_are_in_the_workdir(world: World) -> None:
    assert world.workdir == "/workspace"
    assert world.list() == ["docs/", "hello.txt"]
    assert world.read("hello.txt") == b"hello from the seed\n"
    assert world.read("/workspace/docs/notes.md") == b"# notes\n"
    listed = world.exec(["cat", "hello.txt"], timeout_s=30)
    assert (listed.exit_code, listed.stdout) == (0, "hello from the seed\n")


def test_read_write_list_round_trip(world: World) -> None:
    payload = bytes(range(256)) * 4
    world.write("out/deep/data.bin", payload)
    world.write("/workspace/top.txt", b"top\n")
    assert world.read("out/deep/data.bin") == payload
    assert world.list("out") == ["deep/"]
    assert world.list("/workspace") == ["docs/", "hello.txt", "out/", "top.txt"]
    # What the API wrote, commands see; what commands write, the API reads.
    assert (
        world.exec(["sh", "-c", "wc -c < out/deep/data.bin"], timeout_s=30).stdout.strip() == "1024"
    )
    world.exec(["sh", "-c", "echo from-command > made.txt && mkdir -p d/e"], timeout_s=30)
    assert world.read("made.txt") == b"from-command\n"
    assert snapshot(world, ["made.txt", "d/", "gone.txt"]) == {
        "made.txt": {
            "exists": True,
            "content": "from-command\n",
            "encoding": "utf-8",
            "truncated": False,
        },
        "d/": {"exists": True, "listing": ["e/"]},
        "gone.txt": {"exists": False},
    }


def test_missing_and_mistyped_paths_raise_like_open(world: World) -> None:
    with pytest.raises(FileNotFoundError):
        world.read("nope.txt")
    with pytest.raises(IsADirectoryError):
        world.read("docs")
    with pytest.raises(NotADirectoryError):
        world.list("hello.txt")
    with pytest.raises(FileNotFoundError):
        world.list("no-such-dir")


def test_stdin_reaches_the_command(world: World) -> None:
    result = world.exec(["sh", "-c", "tr a-z A-Z"], timeout_s=30, stdin=b"shout\n")
    assert (result.exit_code, result.stdout) == (0, "SHOUT\n")


def test_no_network_by_default(world: World) -> None:
    connect = "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)"
    resolve = "import socket; socket.getaddrinfo('example.com', 443)"
    for program in (connect, resolve):
        result = world.exec([PY, "-c", program], timeout_s=30)
        assert result.exit_code != 0, result
        assert "Error" in result.stderr or "error" in result.stderr
    assert interfaces(world) == ["lo"]


def test_network_flag_gives_interfaces(make_world: MakeWorld, backend: str) -> None:
    world = make_world(backend, network=True)
    assert set(interfaces(world)) - {"lo"}


def test_writes_outside_the_workspace_never_reach_the_host(world: World, tmp_path: Path) -> None:
    host_file = tmp_path / "host.txt"
    host_file.write_text("original\n")
    script = f"mkdir -p {tmp_path}; echo overwritten > {host_file}; echo pwned > /usr/nodeval-pwned"
    result = world.exec(["sh", "-c", script], timeout_s=30)
    assert "nodeval-pwned" in result.stderr  # the system is read-only (bwrap) or not ours (docker)
    assert host_file.read_text() == "original\n"
    assert not Path("/usr/nodeval-pwned").exists()
    with pytest.raises(PermissionError):
        world.write("/usr/nodeval-pwned", b"x")


def test_a_symlink_to_a_host_file_is_not_followed_by_the_api(world: World, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    world.exec(["ln", "-s", str(secret), "leak"], timeout_s=30)
    with pytest.raises(FileNotFoundError):
        world.read("leak")
    with pytest.raises(OSError):
        world.write("leak", b"overwritten")
    assert secret.read_text() == "host secret\n"


def test_two_worlds_never_see_each_others_files(make_world: MakeWorld, backend: str) -> None:
    first, second = make_world(backend), make_world(backend)
    first.write("mine.txt", b"first's\n")
    first.exec(["sh", "-c", "echo scratch > /tmp/first-scratch"], timeout_s=30)
    assert second.list() == []
    peek = second.exec(["sh", "-c", "cat /workspace/mine.txt /tmp/first-scratch"], timeout_s=30)
    assert peek.exit_code != 0 and peek.stdout == ""
    assert first.exec(["cat", "/tmp/first-scratch"], timeout_s=30).stdout == "scratch\n"


def test_a_command_over_its_time_limit_is_killed(world: World) -> None:
    marker = f"sleep 6{random.randrange(10**6)}"  # unique, so other tests' sleeps never match
    start = time.perf_counter()
    result = world.exec(["sh", "-c", f"{marker} & {marker}"], timeout_s=1.0)
    assert result.timed_out and result.exit_code == KILLED_EXIT_CODE
    assert time.perf_counter() - start < 10
    # The background child died too: neither inside the world nor on the host is it left.
    inside = world.exec(
        ["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], timeout_s=30
    ).stdout
    assert marker not in inside
    assert _gone_from_host(marker)


def _gone_from_host(needle: str, within_s: float = 3.0) -> bool:
    """Killed processes can take a moment to be reaped; give them that, not more."""
    deadline = time.monotonic() + within_s
    while host_processes_running(needle):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_limits_cap_what_a_caller_asks_for(make_world: MakeWorld, backend: str) -> None:
    world = make_world(backend, limits=WorldLimits(exec_timeout_s=1.0))
    result = world.exec(["sleep", "30"], timeout_s=600)
    assert result.timed_out and result.duration_ms < 10_000


def test_a_fast_command_is_not_reported_as_timed_out(world: World) -> None:
    result = world.exec(["sh", "-c", "exit 3"], timeout_s=30)
    assert (result.exit_code, result.timed_out) == (3, False)


def test_a_runaway_allocation_is_stopped_by_the_memory_limit(
    make_world: MakeWorld, backend: str
) -> None:
    world = make_world(backend, limits=WorldLimits(memory_mb=256))
    # str * n writes every byte, so the pages are really used (a calloc'd buffer would not be).
    result = world.exec([PY, "-c", "x = 'x' * (2 * 1024**3); print(len(x))"], timeout_s=60)
    assert result.exit_code != 0, result
    assert not result.timed_out
    assert "2147483648" not in result.stdout


FORK_BOMB = """
import os, time
started = 0
try:
    while started < 2000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        started += 1
except OSError as exc:
    print("refused:", exc.strerror)
print("started", started)
"""


def test_a_fork_bomb_is_stopped_by_the_pids_limit(make_world: MakeWorld, backend: str) -> None:
    world = make_world(backend, limits=WorldLimits(pids=64))
    _require_enforced(world, "pids")
    result = world.exec([PY, "-c", FORK_BOMB], timeout_s=120)
    assert "refused:" in result.stdout, result
    started = int(result.stdout.split("started")[1])
    # The limit counts the world's other processes too (its init, the shell)
    assert 0 < started < 64


def _require_enforced(world: World, limit: str) -> None:
    """A limit this machine cannot enforce for the backend skips (fails in CI), with the reason."""
    from .conftest import unavailable

    missing = getattr(world, "limits_unenforced", {})
    if limit in missing:
        unavailable(f"{world.backend} cannot enforce {limit} here: {missing[limit]}")


@pytest.mark.parametrize("kind", ["docker", "bwrap", "local"])
def test_closing_a_world_kills_what_its_commands_left_running(
    make_world: MakeWorld, kind: str
) -> None:
    world = make_world(kind)
    marker = f"sleep 5{random.randrange(10**6)}"
    # setsid: the command leaves its process group, so a timeout's group kill would miss it.
    started = world.exec(
        ["sh", "-c", f"setsid {marker} >/dev/null 2>&1 </dev/null & echo started"], timeout_s=30
    )
    assert started.stdout == "started\n"
    # Bwrap's pid namespace, and everything in it, already ended with the command
    if kind != "bwrap":
        assert host_processes_running(marker), (
            "the detached command is not running, so the test proves nothing"
        )
    world.close()
    assert _gone_from_host(marker)
    cgroup = getattr(world, "_cgroup", None)
    assert cgroup is None or not any(d.exists() for d in cgroup.dirs)


def test_without_a_cgroup_bwrap_falls_back_and_names_what_it_cannot_cap(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os

    from pytest_nodeval.errors import NodevalWarning
    from pytest_nodeval.world import cgroup

    # As on a machine without them
    monkeypatch.setattr(cgroup, "CGROUP_ROOT", tmp_path / "no-cgroups")
    with pytest.warns(NodevalWarning) as warned:
        world = make_world("bwrap", limits=WorldLimits(memory_mb=256))
    unenforced = world.limits_unenforced  # type: ignore[attr-defined]
    assert set(unenforced) == ({"cpus", "pids"} if os.geteuid() == 0 else {"cpus"})
    assert "no cgroup hierarchy is mounted" in unenforced["cpus"]
    assert "NOT enforced" in world.limits_description  # type: ignore[attr-defined]
    assert sorted(str(w.message).split(" limit")[0].rsplit(" ", 1)[1] for w in warned) == sorted(
        unenforced
    )
    # Memory still has its rlimit: the hog is refused, not left to eat the host.
    result = world.exec([PY, "-c", "x = 'x' * (2 * 1024**3); print(len(x))"], timeout_s=60)
    assert result.exit_code != 0 and "MemoryError" in result.stderr, result


def test_with_a_cgroup_bwrap_enforces_every_limit(make_world: MakeWorld) -> None:
    world = make_world("bwrap")
    if world.limits_unenforced:  # type: ignore[attr-defined]
        from .conftest import unavailable

        unavailable(f"bwrap cannot make a cgroup here: {world.limits_description}")  # type: ignore[attr-defined]
    assert "cgroup" in world.limits_enforced["cpus"]  # type: ignore[attr-defined]
    cgroup_dirs = world._cgroup.dirs  # type: ignore[attr-defined]
    cpu_dirs = [
        d for d in cgroup_dirs if (d / "cpu.cfs_quota_us").exists() or (d / "cpu.max").exists()
    ]
    assert cpu_dirs
    for directory in cpu_dirs:
        text = (
            (directory / "cpu.cfs_quota_us").read_text()
            if (directory / "cpu.cfs_quota_us").exists()
            else (directory / "cpu.max").read_text()
        )
        assert text.split()[0] == "100000"  # 1.0 cpus = one period's worth


PLANTED_ENV = "NODEVAL_PLANTED_API_KEY"

# Every process's environment and command line the world can see, pid by pid; what it could
# not read is named, so a test can tell "clean" from "never looked".
READ_EVERY_PROC = r"""
import glob, sys
for path in sorted(glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        print("UNREADABLE", path, exc.strerror)
        continue
    print("READ", path)
    sys.stdout.write(data.replace(b"\0", b"\n").decode("utf-8", "replace") + "\n")
"""


def test_no_host_variable_reaches_any_process_of_the_world(
    make_world: MakeWorld, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: bwrap's own process (pid 1 inside) kept the host's environment, key included."""
    secret = f"sk-planted-{random.randrange(10**12):012d}-host-only"
    monkeypatch.setenv(PLANTED_ENV, secret)
    world = make_world(backend)
    result = world.exec([PY, "-c", READ_EVERY_PROC], timeout_s=60)
    assert result.exit_code == 0, result
    assert "READ /proc/1/environ" in result.stdout, "the world's first process was not read"
    assert "READ /proc/1/cmdline" in result.stdout
    assert secret not in result.stdout + result.stderr
    assert PLANTED_ENV not in result.stdout


def test_a_command_sees_only_the_worlds_fixed_variables(world: World) -> None:
    result = world.exec(["env"], timeout_s=30)
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert names == {"PATH", "HOME", "LANG", "TERM"}, result.stdout


MAKE_UNREADABLE = (
    "mkdir locked && echo x > locked/inside.txt && chmod 000 locked"
    " && echo sealed > sealed.txt && chmod 000 sealed.txt"
    " && python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\""
)


def test_a_watched_path_the_world_cannot_read_is_recorded_as_unreadable(world: World) -> None:
    """Issue 28: a mode-000 directory in a Docker world ended the attempt in a PermissionError."""
    made = world.exec(["sh", "-c", MAKE_UNREADABLE], timeout_s=30)
    assert made.exit_code == 0, made
    files = snapshot(world, ["locked/", "sealed.txt", "sock", "gone.txt"])
    # A Unix socket is there and no one can read it, root included.
    assert files["sock"]["unreadable"] is True and files["sock"]["exists"] is True
    assert files["gone.txt"] == {"exists": False}
    as_root = world.exec(["id", "-u"], timeout_s=30).stdout.strip() == "0"
    if as_root:  # bwrap run by root: mode 000 stops no one, and the world copes
        assert files["locked/"] == {"exists": True, "listing": ["inside.txt"]}
        assert files["sealed.txt"]["content"] == "sealed\n"
        return
    for path in ("locked/", "sealed.txt"):
        assert files[path]["unreadable"] is True, files[path]
        assert "Permission denied" in str(files[path]["reason"])
