"""The `docker` world: one container per attempt, started from the world image (image.py).

testcontainers creates and starts the container; the docker SDK does the rest (exec,
archives, cleanup), since testcontainers' own `exec` has no timeout and no stdin.
testcontainers' reaper (Ryuk) is never used: it is an image pulled from a registry,
which offline machines cannot reach. Instead every container carries labels naming its
run and its owner process, and `cleanup_stale` removes what a killed run left behind.

The `docker` and `testcontainers` packages are imported inside functions only, so
importing `pytest_nodeval.world` costs nothing on machines that never start a container.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import struct
import tarfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import WorldError
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
from .hostdir import host_directory
from .processes import process_alive, process_start

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container
    from testcontainers.core.container import DockerContainer

LABEL_MANAGED = "nodeval.managed"
LABEL_RUN_ID = "nodeval.run-id"
LABEL_HOST = "nodeval.host"
LABEL_PID = "nodeval.pid"
LABEL_PID_START = "nodeval.pid-start"
LABEL_STARTED_AT = "nodeval.started-at"

WORKDIR = "/workspace"
SHARED_DIR = "/run/nodeval"
"""Where the host directory both sides see is bound (`DockerWorld.shared_dir`)."""
WORLD_UID = 1000
"""The image's unprivileged user (see the Dockerfile); seed files are given to it."""

FOREIGN_MAX_AGE_S = 6 * 3600.0
"""A container owned by another host is only presumed abandoned after this long,
since its owner's liveness cannot be checked from here (a shared remote engine)."""

_CLEAN_ENV = ["env", "-i", *(f"{k}={v}" for k, v in sandbox_env(WORKDIR).items())]

# Stdin goes in as a file (the exec API would need a hijacked socket for it); the shell
# opens it, unlinks it, then becomes the command.
_STDIN_SCRIPT = 'exec <"$1" && rm -f -- "$1" && shift && exec "$@"'


class DockerWorld:
    """A container with no network (unless asked), resource limits and a /workspace.

    Any image works that has /bin/sh, coreutils (timeout, cat, ls, mkdir, dirname) and a
    user with uid 1000 as its default user; the top-level Dockerfile makes one.
    """

    backend = "docker"
    workdir = WORKDIR

    def __init__(
        self,
        image: str,
        *,
        run_id: str,
        seed_dir: Path | None = None,
        limits: WorldLimits | None = None,
        network: bool = False,
    ) -> None:
        self.image = image
        self.limits = limits or WorldLimits()
        self.network = network
        self._closed = False
        shared = host_directory(self.backend, "nodeval-docker-")
        shared.chmod(0o777)  # the container's user (uid 1000) is not this process's
        self.shared_dir = (shared, SHARED_DIR)
        """A directory both sides see, (on the host, inside): where a command agent's proxy
        puts its socket (runner/command.py). Bound from this machine: a local engine only."""
        try:
            self._started = _start_container(
                image, owner_labels(run_id), self.limits, network, shared
            )
        except BaseException:
            shutil.rmtree(shared, ignore_errors=True)
            raise
        self._container: Container = self._started.get_wrapped_container()
        reaper.track(self, self._end_in_a_hurry)
        try:
            if seed_dir is not None and seed_dir.is_dir():
                self._put(self.workdir, _seed_archive(seed_dir))
        except BaseException:
            self.close()
            raise

    @property
    def container_id(self) -> str:
        return str(self._container.id)

    def exec(
        self, argv: Sequence[str], *, timeout_s: float, stdin: bytes | None = None
    ) -> ExecResult:
        return self._run(argv_list(argv), self.limits.timeout_for(timeout_s), stdin).decoded()

    def read(self, path: str) -> bytes:
        return run_script(self._run, READ_SCRIPT, absolute(self.workdir, path)).stdout

    def write(self, path: str, data: bytes) -> None:
        run_script(self._run, WRITE_SCRIPT, absolute(self.workdir, path), stdin=data)

    def list(self, path: str = ".") -> list[str]:
        return parse_listing(
            run_script(self._run, LIST_SCRIPT, absolute(self.workdir, path)).stdout
        )

    def close(self) -> None:
        reaper.forget(self)
        if self._closed:
            return
        self._closed = True
        from docker.errors import NotFound

        with suppress(NotFound):  # already removed, e.g. by `nodeval clean`
            self._started.stop(force=True, delete_volume=True)
        shutil.rmtree(self.shared_dir[0], ignore_errors=True)

    def _end_in_a_hurry(self) -> None:
        """Remove the container (and so kill its processes) from a signal handler.

        A client of its own: the main thread may be inside a call on the world's client.
        """
        self._closed = True
        _remove_by_id(self.container_id)
        shutil.rmtree(self.shared_dir[0], ignore_errors=True)

    # Sequence, not list: inside this class body `list` is the World.list method.
    def _run(self, argv: Sequence[str], timeout_s: float, stdin: bytes | None) -> RawResult:
        if self._closed:
            raise WorldError(f"the docker world {self._container.name} is closed")
        start = time.perf_counter()
        if stdin is not None:
            argv = ["sh", "-c", _STDIN_SCRIPT, "nodeval-stdin", self._put_stdin(stdin), *argv]
        # coreutils `timeout` kills the command's whole process group; KILL, because an
        # agent's command may ignore TERM. It then exits 137, as a kill by the engine would.
        # `env -i`: the command's environment is sandbox_env() alone, as in a bwrap world, not
        # the image's plus what the engine adds (HOSTNAME).
        command = [*_CLEAN_ENV, "timeout", "-s", "KILL", f"{timeout_s:.3f}", *argv]
        exit_code, out, err = self._exec(command)
        elapsed = time.perf_counter() - start
        return RawResult(
            exit_code=exit_code,
            stdout=out,
            stderr=err,
            duration_ms=elapsed * 1000,
            timed_out=exit_code == KILLED_EXIT_CODE and elapsed >= timeout_s,
        )

    def _exec(self, command: Sequence[str]) -> tuple[int, bytes, bytes]:
        from docker.errors import APIError

        client = self._container.client
        if client is None:  # only a container not made by a client has none
            raise WorldError(f"container {self._container.id} has no Docker client to exec with")
        api = client.api
        try:
            exec_id = api.exec_create(self._container.id, command, workdir=self.workdir)["Id"]
            out, err = _exec_output(api, exec_id)
            return _exit_code(api, exec_id), out, err
        except APIError as exc:
            raise WorldError(f"exec in docker world {self._container.name} failed: {exc}") from None

    def _put_stdin(self, data: bytes) -> str:
        name = f".nodeval-stdin-{uuid.uuid4().hex}"
        self._put("/tmp", file_archive(name, data))
        return f"/tmp/{name}"

    def _put(self, directory: str, archive: bytes) -> None:
        from docker.errors import APIError

        try:
            self._container.put_archive(directory, archive)
        except APIError as exc:
            raise WorldError(
                f"copying into {directory} of docker world {self._container.name} failed: {exc}"
            ) from None


_FRAME_HEADER = struct.Struct(">BxxxL")
"""A frame of the engine's multiplexed stream: which stream (1 stdout, 2 stderr), then size."""


def _exec_output(api: Any, exec_id: str) -> tuple[bytes, bytes]:
    """Start the exec and read its whole stdout and stderr.

    Not `api.exec_start`: docker-py reads the upgraded connection from the raw socket under the
    HTTP response, so bytes that arrived with the response's headers, already in the response's
    buffer, are lost. A command that answers at once (a `cat` while the machine is busy) then
    comes back with no output and exit code 0 (docker/docker-py#3332; seen here as a PDF read
    empty under load). This reads the same frames through that buffer. Transports whose
    response has no such buffer (ssh, Windows pipes) keep docker-py's own reading.
    """
    if not api.base_url.startswith(("http+docker://localhost", "http://", "https://")):
        out, err = api.exec_start(exec_id, demux=True)
        return out or b"", err or b""
    response = api._post_json(
        api._url("/exec/{0}/start", exec_id),
        headers={"Connection": "Upgrade", "Upgrade": "tcp"},
        data={"Tty": False, "Detach": False},
        stream=True,
    )
    try:
        api._raise_for_status(response)
        buffered = response.raw._fp.fp  # http.client's reader: the buffer, then the socket
        chunks: dict[int, list[bytes]] = {1: [], 2: []}
        while len(header := buffered.read(_FRAME_HEADER.size)) == _FRAME_HEADER.size:
            stream, size = _FRAME_HEADER.unpack(header)
            chunks.setdefault(stream, []).append(buffered.read(size))
        return b"".join(chunks[1]), b"".join(chunks[2])
    finally:
        response.close()


def _exit_code(api: Any, exec_id: str) -> int:
    """The exec's exit code; the engine can take a moment to record it after output ends."""
    for _ in range(50):
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return int(info["ExitCode"])
        time.sleep(0.02)
    raise WorldError(f"docker exec {exec_id[:12]} ended its output but never reported an exit code")


def _start_container(
    image: str, labels: dict[str, str], limits: WorldLimits, network: bool, shared: Path
) -> DockerContainer:
    from testcontainers.core.container import DockerContainer

    started = DockerContainer(
        image, name=container_name(labels[LABEL_RUN_ID]), **run_options(labels, limits, network)
    ).with_volume_mapping(str(shared), SHARED_DIR, "rw")
    try:
        with _without_ryuk():
            started.start()
    except Exception as exc:
        _remove_quietly(started)
        raise WorldError(f"cannot start a docker world from image {image!r}: {exc}") from None
    return started


@contextmanager
def _without_ryuk() -> Iterator[None]:
    """Start without testcontainers' reaper, then put the setting back as it was.

    Ryuk is an image pulled from a registry, and labels + cleanup_stale() do its job
    here; restoring the setting leaves a user's own testcontainers tests unaffected.
    """
    from testcontainers.core.config import testcontainers_config

    previous = testcontainers_config.ryuk_disabled
    testcontainers_config.ryuk_disabled = True
    try:
        yield
    finally:
        testcontainers_config.ryuk_disabled = previous


def run_options(labels: dict[str, str], limits: WorldLimits, network: bool) -> dict[str, Any]:
    """Keyword arguments for the container: limits, labels and a locked-down process."""
    options: dict[str, Any] = {
        "labels": labels,
        "working_dir": WORKDIR,
        "nano_cpus": int(limits.cpus * 1e9),
        "mem_limit": f"{limits.memory_mb}m",
        "memswap_limit": f"{limits.memory_mb}m",  # equal to mem_limit: no swap on top
        "pids_limit": limits.pids,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,  # reaps the orphans an agent's background commands leave
    }
    if not network:
        # `network=None` is passed on purpose: testcontainers otherwise looks for the host's
        # network when it runs inside a container and adds it, which conflicts with "none".
        options.update(network_mode="none", network=None)
    return options


def container_name(run_id: str) -> str:
    safe_run = re.sub(r"[^a-zA-Z0-9_.-]", "-", run_id)[:32]
    return f"nodeval-{safe_run}-{uuid.uuid4().hex[:8]}"


def owner_labels(run_id: str) -> dict[str, str]:
    """Labels that let a later run tell whether this container's owner is still alive."""
    pid = os.getpid()
    return {
        LABEL_MANAGED: "true",
        LABEL_RUN_ID: run_id,
        LABEL_HOST: socket.gethostname(),
        LABEL_PID: str(pid),
        LABEL_PID_START: process_start(pid) or "",
        LABEL_STARTED_AT: f"{time.time():.0f}",
    }


def tree_archive(directory: Path) -> bytes:
    """A tar of the directory's contents (not the directory itself), owned by the world user."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for child in sorted(directory.iterdir()):
            archive.add(child, arcname=child.name, filter=_owned_by_world_user)
    return buffer.getvalue()


def _seed_archive(seed_dir: Path) -> bytes:
    try:
        return tree_archive(seed_dir)
    except OSError as exc:
        raise WorldError(
            f"cannot copy {exc.filename or seed_dir} into the docker world: "
            f"{os.strerror(exc.errno) if exc.errno else exc}"
        ) from None


def file_archive(name: str, data: bytes) -> bytes:
    info = _owned_by_world_user(tarfile.TarInfo(name))
    info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _owned_by_world_user(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = WORLD_UID
    info.uname = info.gname = "nodeval"
    return info


# --- the engine -------------------------------------------------------------------------


def docker_client(timeout_s: float = 60.0) -> DockerClient:
    """A client for the engine the environment points at (DOCKER_HOST or the local socket)."""
    import docker

    try:
        # Typed int in docker's stubs; requests, underneath, takes seconds as a float.
        return docker.from_env(timeout=timeout_s)  # type: ignore[arg-type]
    except docker.errors.DockerException as exc:
        raise WorldError(f"cannot reach the Docker engine at {engine_address()}: {exc}") from None


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def engine_problem(timeout_s: float = 2.0) -> str | None:
    """Why no Docker world can start here, or None when an engine answers a ping."""
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        return "DOCKER_HOST is not set and /var/run/docker.sock does not exist"
    try:
        import docker
        import testcontainers  # noqa: F401  (starts the containers)
    except ImportError as exc:
        return f"the Python package {exc.name!r} is missing (pip install 'pytest-nodeval[docker]')"
    try:
        client = docker.from_env(timeout=timeout_s)  # type: ignore[arg-type]  # as above
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # the SDK raises requests, socket and docker errors alike
        return f"the Docker engine at {engine_address()} did not answer: {exc}"
    return None


# --- cleanup of what killed runs left ---------------------------------------------------


def cleanup_stale(
    keep_run_id: str | None,
    *,
    client: DockerClient | None = None,
    foreign_max_age_s: float = FOREIGN_MAX_AGE_S,
) -> list[str]:
    """Remove worlds whose run is over: call once at session start (controller only).

    A container is stale when its run is not `keep_run_id` and its owner process is
    gone (same host), or, for another host's container, when it is older than
    `foreign_max_age_s`. Worlds of other runs that are still alive are left alone, so
    two pytest sessions on one engine never remove each other's containers.
    Returns the names removed.
    """
    now = time.time()
    stale = [
        c
        for c in _managed_containers(client)
        if is_stale(c.labels, keep_run_id=keep_run_id, now=now, foreign_max_age_s=foreign_max_age_s)
    ]
    return _remove(stale)


def remove_worlds(run_id: str | None = None, *, client: DockerClient | None = None) -> list[str]:
    """Remove every world container (or one run's), alive or not: for `nodeval clean`."""
    containers = _managed_containers(client)
    if run_id is not None:
        containers = [c for c in containers if c.labels.get(LABEL_RUN_ID) == run_id]
    return _remove(containers)


def is_stale(
    labels: dict[str, str], *, keep_run_id: str | None, now: float, foreign_max_age_s: float
) -> bool:
    if keep_run_id is not None and labels.get(LABEL_RUN_ID) == keep_run_id:
        return False
    if labels.get(LABEL_HOST) == socket.gethostname():
        return not owner_alive(labels)
    started_at = float(labels.get(LABEL_STARTED_AT) or 0)
    return now - started_at > foreign_max_age_s


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process that started a container (on this host) still runs (a zombie does
    not)."""
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    return process_alive(pid, labels.get(LABEL_PID_START, ""))


def containers_of(
    owner_pid: int, owner_start: str, *, remove: bool = False, client: DockerClient | None = None
) -> list[str]:
    """Names of the world containers process `owner_pid` of this host started; removed if asked."""
    filters: dict[str, str | list[str] | bool] = {
        "label": [
            f"{LABEL_MANAGED}=true",
            f"{LABEL_PID}={owner_pid}",
            f"{LABEL_HOST}={socket.gethostname()}",
        ]
    }
    found = [
        c
        for c in (client or docker_client(timeout_s=30)).containers.list(all=True, filters=filters)
        if c.labels.get(LABEL_PID_START, "") in ("", owner_start)
    ]
    return _remove(found) if remove else [str(c.name) for c in found]


def engine_present() -> bool:
    """Whether an engine may be there to ask (without the cost of a ping)."""
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        return False
    try:
        import docker  # noqa: F401
    except ImportError:
        return False
    return True


def _remove_by_id(container_id: str) -> None:
    from docker.errors import NotFound

    client = docker_client(timeout_s=30)
    try:
        client.api.remove_container(container_id, force=True, v=True)
    except NotFound:
        pass
    finally:
        client.close()


def _managed_containers(client: DockerClient | None) -> list[Container]:
    client = client or docker_client()
    return list(client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=true"}))


def _remove(containers: list[Container]) -> list[str]:
    from docker.errors import APIError, NotFound

    removed = []
    for container in containers:
        try:
            container.remove(force=True, v=True)
        except NotFound:
            continue  # another cleaner got there first
        except APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise WorldError(f"cannot remove world container {container.name}: {exc}") from None
        removed.append(str(container.name))
    return removed


def _remove_quietly(started: DockerContainer) -> None:
    # it may never have been created; a failed start is what we report
    with suppress(Exception):
        started.stop(force=True, delete_volume=True)
