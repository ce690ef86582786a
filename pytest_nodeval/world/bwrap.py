"""The `bwrap` world: each command runs in a fresh bubblewrap sandbox over one workspace.

The sandbox sees the system read-only (the host's /usr and a short list of /etc files,
or a prepared root filesystem), its own /proc and /dev, no network, and exactly two
writable places that persist across the world's commands: /workspace and /tmp, both
host directories private to this world. Every command gets new pid, ipc and uts
namespaces, `--die-with-parent` and `--new-session`; a timeout kills the outer bwrap,
and with it the sandbox's pid 1 and so every process inside.

Limits: each world gets a cgroup of its own (cgroup.py) where the machine allows one,
with the same pids, memory (no swap) and CPU caps as a Docker world; every command of
the world runs in it, so the caps hold for all of them together, as in a container.
Where a cgroup limit cannot be set, the world falls back to an rlimit set in the
sandbox's shell before the command starts: memory becomes RLIMIT_AS of each process,
pids becomes RLIMIT_NPROC (only for a user other than root, for whom the kernel does not
enforce it; it counts all of that user's processes, so it is set above their count now).
CPU has no rlimit equivalent (RLIMIT_CPU caps CPU seconds, not cores). Every limit left
unenforced is named in `limits_description` and in a warning.

Closing the world (or the process ending on SIGTERM, see reaper.py) kills every process
in its cgroup and removes the cgroup and the host directories.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..errors import NodevalWarning, WorldError
from . import KILLED_EXIT_CODE, ExecResult, WorldLimits, reaper, sandbox_env
from ._inside import (
    LIST_SCRIPT,
    READ_SCRIPT,
    WRITE_SCRIPT,
    RawResult,
    absolute,
    argv_list,
    parse_listing,
    run_script,
)
from .cgroup import WorldCgroup, open_cgroup, sweep_stale
from .hostdir import host_directory
from .processes import kill_group

WORKDIR = "/workspace"
SANDBOX_TMP = "/tmp"

# On a merged-/usr system these are symlinks into /usr; elsewhere real directories.
TOP_LEVEL_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")

# The host /etc files programs need to start and to know the users; not all of /etc,
# whose root-owned secrets the sandbox (run by root, it is uid 0 inside) could read.
HOST_ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
    "ssl",
    "ca-certificates",
    "mime.types",
    "protocols",
    "services",
    "hosts",
    "os-release",
    "python3",
    "python3.11",
    "python3.12",
    "python3.13",
)

# Run by the sandbox's /bin/sh: set the fallback rlimits ("-" = none), then become the command.
# The shell exports a PWD of its own; unset, the command's environment is sandbox_env() alone.
_LIMIT_SCRIPT = (
    '{ [ "$1" = - ] || ulimit -v "$1"; } && { [ "$2" = - ] || ulimit -u "$2"; } && ulimit -c 0 '
    '&& unset PWD && shift 2 && exec "$@"'
)

# Run on the host before bwrap: join the world's cgroups (their cgroup.procs files, $2...),
# so bwrap and everything inside start already capped; then become bwrap.
_JOIN_SCRIPT = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n - 1)); '
    'done; exec "$@"'
)


class BwrapWorld:
    """A bubblewrap sandbox: read-only system, private writable /workspace and /tmp."""

    backend = "bwrap"
    workdir = WORKDIR

    def __init__(
        self,
        *,
        seed_dir: Path | None = None,
        limits: WorldLimits | None = None,
        network: bool = False,
        rootfs: Path | None = None,
    ) -> None:
        if rootfs is not None:
            _raise_if_rootfs_unusable(rootfs)
        self.limits = limits or WorldLimits()
        self.network = network
        self._host_root = host_directory(
            self.backend,
            "nodeval-bwrap-",
            seed_dir=seed_dir,
            subdirs=("workspace", "tmp"),
            seed_into="workspace",
        )
        self._mounts = {
            WORKDIR: self._host_root / "workspace",
            SANDBOX_TMP: self._host_root / "tmp",
        }
        self._bwrap = sandbox_argv(
            rootfs=rootfs or Path("/"),
            workspace=self._mounts[WORKDIR],
            tmp=self._mounts[SANDBOX_TMP],
            network=network,
        )
        self._running: set[subprocess.Popen[bytes]] = set()
        self.shared_dir = (self._host_root / "tmp", SANDBOX_TMP)
        """A directory both sides see, (on the host, inside): where a command agent's proxy
        puts its socket (runner/command.py)."""
        _sweep_stale_cgroups_once()
        self._cgroup = open_cgroup(self.limits)
        self._rlimits, self.limits_enforced, self.limits_unenforced = fallback_limits(
            self.limits, self._cgroup
        )
        reaper.track(self, self._end)
        _warn_unenforced(self.limits_unenforced)

    @property
    def limits_description(self) -> str:
        """How each limit is enforced in this world, and why any is not."""
        parts = [f"{name}: {how}" for name, how in self.limits_enforced.items()]
        parts += [f"{name}: NOT enforced ({why})" for name, why in self.limits_unenforced.items()]
        return "; ".join(parts)

    @property
    def host_workspace(self) -> Path:
        """Where /workspace lives on the host (for debugging and tests)."""
        return self._mounts[WORKDIR]

    def exec(
        self, argv: Sequence[str], *, timeout_s: float, stdin: bytes | None = None
    ) -> ExecResult:
        return self._run(argv_list(argv), self.limits.timeout_for(timeout_s), stdin).decoded()

    def read(self, path: str) -> bytes:
        host = self._host_path(path)
        if host is None:
            return run_script(self._run, READ_SCRIPT, absolute(self.workdir, path)).stdout
        with _errors_name(absolute(self.workdir, path)):
            return host.read_bytes()

    def write(self, path: str, data: bytes) -> None:
        host = self._host_path(path)
        if host is None:
            run_script(self._run, WRITE_SCRIPT, absolute(self.workdir, path), stdin=data)
            return
        with _errors_name(absolute(self.workdir, path)):
            host.parent.mkdir(parents=True, exist_ok=True)
            host.write_bytes(data)

    def list(self, path: str = ".") -> list[str]:
        host = self._host_path(path)
        if host is None:
            return parse_listing(
                run_script(self._run, LIST_SCRIPT, absolute(self.workdir, path)).stdout
            )
        with _errors_name(absolute(self.workdir, path)), os.scandir(host) as entries:
            return sorted(
                e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in entries
            )

    def close(self) -> None:
        reaper.forget(self)
        self._end()

    def _end(self) -> None:
        """Kill every process of the world (a running command's bwrap, all in its cgroup), then
        remove it."""
        for proc in list(self._running):
            kill_group(proc.pid)
        self._cgroup.remove()
        shutil.rmtree(self._host_root, ignore_errors=True)

    def _host_path(self, path: str) -> Path | None:
        """The host path behind a world path, when reaching it directly is safe.

        Only /workspace and /tmp qualify, and only when, with symlinks resolved on the
        host, the path stays inside that directory: a link the agent made to
        /root/.ssh must not be followed by the harness. Anything else goes through the
        sandbox (None), where links resolve in the sandbox's own view. No sandbox
        process outlives its exec (the pid namespace dies with it), so nothing can swap
        a path between this check and the access.
        """
        inside = absolute(self.workdir, path)
        for mount, host_dir in self._mounts.items():
            if inside == mount or inside.startswith(mount + "/"):
                candidate = host_dir / inside[len(mount) :].lstrip("/")
                real, real_dir = os.path.realpath(candidate), os.path.realpath(host_dir)
                if real == real_dir or real.startswith(real_dir + os.sep):
                    return candidate
        return None

    # Sequence, not list: inside this class body `list` is the World.list method.
    def _run(self, argv: Sequence[str], timeout_s: float, stdin: bytes | None) -> RawResult:
        command = [
            *self._bwrap,
            "--",
            "/bin/sh",
            "-c",
            _LIMIT_SCRIPT,
            "nodeval-limits",
            *self._rlimits,
            *argv,
        ]
        cgroup_files = self._cgroup.procs_files()
        if cgroup_files:
            command = [
                "/bin/sh",
                "-c",
                _JOIN_SCRIPT,
                "nodeval-cgroup",
                str(len(cgroup_files)),
                *cgroup_files,
                *command,
            ]
        start = time.perf_counter()
        # Its own session, so the timeout can kill bwrap's whole process group at once. Its own
        # environment too: bwrap forks the sandbox's pid 1, whose /proc/1/environ a command
        # reads, and --clearenv cannot wipe that (it is the memory the process started with).
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=sandbox_env(WORKDIR),
        )
        self._running.add(proc)
        try:
            out, err, timed_out = _communicate(proc, stdin, timeout_s)
        finally:
            self._running.discard(proc)
        exit_code = KILLED_EXIT_CODE if proc.returncode < 0 else proc.returncode
        return RawResult(
            exit_code=exit_code,
            stdout=out,
            stderr=err,
            duration_ms=(time.perf_counter() - start) * 1000,
            timed_out=timed_out,
        )


@contextmanager
def _errors_name(world_path: str) -> Iterator[None]:
    """Report an OSError with the path as the world sees it, not the host's temp dir."""
    try:
        yield
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, world_path) from None


def _communicate(
    proc: subprocess.Popen[bytes], stdin: bytes | None, timeout_s: float
) -> tuple[bytes, bytes, bool]:
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
        return out, err, False
    except subprocess.TimeoutExpired:
        # Killing bwrap is enough: --die-with-parent takes the sandbox's pid 1 down with
        # it, and the kernel then kills every process left in that pid namespace.
        kill_group(proc.pid)
        out, err = proc.communicate()
        return out, err, True
    except BaseException:
        kill_group(proc.pid)  # interrupted (Ctrl-C): the command must not run on
        raise


def fallback_limits(
    limits: WorldLimits, cgroup: WorldCgroup
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The sandbox shell's rlimit arguments (memory KiB, nproc; "-" = unset), and per limit
    how it is enforced or why it is not."""
    enforced, unenforced = dict(cgroup.enforced), {}
    memory = nproc = "-"
    if "memory" not in enforced:
        memory = str(limits.memory_mb * 1024)
        enforced["memory"] = f"RLIMIT_AS of each process (no cgroup: {cgroup.problems['memory']})"
    if "pids" not in enforced:
        if os.geteuid() == 0:
            unenforced["pids"] = (
                f"no cgroup ({cgroup.problems['pids']}), and the kernel does not enforce "
                "RLIMIT_NPROC for root"
            )
        else:
            nproc = str(limits.pids + _user_task_count())
            enforced["pids"] = (
                f"RLIMIT_NPROC of {nproc}: this user's {int(nproc) - limits.pids} tasks now, plus "
                f"{limits.pids} (no cgroup: {cgroup.problems['pids']})"
            )
    if "cpus" not in enforced:
        unenforced["cpus"] = f"no cgroup ({cgroup.problems['cpus']}), and no rlimit caps cores"
    return [memory, nproc], enforced, unenforced


def _user_task_count() -> int:
    """Threads this user runs on the machine now (RLIMIT_NPROC counts threads of the user)."""
    uid, count = os.geteuid(), 0
    for proc_dir in Path("/proc").glob("[0-9]*"):
        try:
            if proc_dir.stat().st_uid == uid:
                count += len(os.listdir(proc_dir / "task"))
        except OSError:
            continue
    return count


@functools.cache
def _sweep_stale_cgroups_once() -> None:
    """Remove the cgroups a killed run's worlds left (once per process)."""
    sweep_stale()


_warned: set[str] = set()


def _warn_unenforced(unenforced: dict[str, str]) -> None:
    """Warn once per process and reason: a world with a limit missing is still run."""
    for name, why in unenforced.items():
        message = f"the bwrap world cannot enforce its {name} limit here: {why}"
        if message not in _warned:
            _warned.add(message)
            warnings.warn(NodevalWarning(message), stacklevel=3)


def sandbox_argv(*, rootfs: Path, workspace: Path, tmp: Path, network: bool) -> list[str]:
    """The bwrap command line up to (not including) `--` and the command."""
    argv = [
        _bwrap_binary(),
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "nodeval-world",
    ]
    if not network:
        argv.append("--unshare-net")
    argv += system_binds(rootfs, network)
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--bind",
        str(workspace),
        WORKDIR,
        "--bind",
        str(tmp),
        SANDBOX_TMP,
        "--chdir",
        WORKDIR,
        "--clearenv",
    ]
    for name, value in sandbox_env(WORKDIR).items():
        argv += ["--setenv", name, value]
    argv += [
        # bwrap builds the tree on a tmpfs; making it read-only turns a write to /etc/x
        # into an error instead of a file that silently vanishes after the command.
        "--remount-ro",
        "/",
    ]
    return argv


def _bwrap_binary() -> str:
    """bwrap's full path, found on this process's PATH: bwrap itself runs with the sandbox's."""
    return shutil.which("bwrap") or "bwrap"


def system_binds(rootfs: Path, network: bool) -> list[str]:
    """Read-only binds of the system: /usr, the top-level dirs or links, and /etc."""
    binds = ["--ro-bind", str(rootfs / "usr"), "/usr"]
    for name in TOP_LEVEL_SYSTEM_DIRS:
        source = rootfs / name
        if source.is_symlink():
            binds += ["--symlink", os.readlink(source), f"/{name}"]
        elif source.is_dir():
            binds += ["--ro-bind", str(source), f"/{name}"]
    if rootfs != Path("/"):
        return binds + ["--ro-bind", str(rootfs / "etc"), "/etc"]  # a prepared tree: all of it
    etc_files = HOST_ETC_FILES + (("resolv.conf",) if network else ())
    for name in etc_files:
        binds += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return binds


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot run sandboxes here, or None when a trial sandbox works."""
    if shutil.which("bwrap") is None:
        return "the bwrap binary is not on PATH (apt-get install bubblewrap)"
    trial = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--unshare-net",
        "--unshare-pid",
        "--die-with-parent",
        "true",
    ]
    try:
        done = subprocess.run(trial, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"a trial sandbox failed to run: {exc}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip()
        return f"a trial sandbox failed (exit {done.returncode}): {reason or 'no message'}"
    return None


def _raise_if_rootfs_unusable(rootfs: Path) -> None:
    if not (rootfs / "usr").is_dir() or not (rootfs / "etc").is_dir():
        raise WorldError(
            f"bwrap rootfs {str(rootfs)!r} has no usr/ and etc/; "
            "pass a directory made by debootstrap"
        )
