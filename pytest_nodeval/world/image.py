"""The world image: built from the top-level Dockerfile once, then reused by content.

The tag is `nodeval-world:<digest>`, where the digest covers the build context (what
the Dockerfile's .dockerignore lets through) and the base image's id, so any change to
either makes a new image and an unchanged one is never rebuilt. An exclusive file lock
in a directory all of a run's processes share (e.g. the xdist base temp's parent)
serialises the check-then-build, so several workers never build it twice.

The base image comes from the caller, else NODEVAL_BASE_IMAGE, else the first present of
`nodeval-base:bookworm` (made offline by scripts/offline-base-image.sh) and
`debian:bookworm-slim` (pulled when a registry is reachable).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import WorldError
from .docker import LABEL_MANAGED, docker_client

if TYPE_CHECKING:
    from docker import DockerClient

IMAGE_REPOSITORY = "nodeval-world"
OFFLINE_BASE_IMAGE = "nodeval-base:bookworm"
PULLABLE_BASE_IMAGE = "debian:bookworm-slim"
BASE_IMAGE_ENV = "NODEVAL_BASE_IMAGE"
LOCK_FILE_NAME = "nodeval-world-image.lock"
OFFLINE_SCRIPT = "scripts/offline-base-image.sh"

# Images this process already knows to exist, by (context, requested base, engine):
# later attempts of the same run skip the lock and the engine round trips.
_known_ready: dict[tuple[str, str, str], WorldImage] = {}


@dataclass(frozen=True, slots=True)
class WorldImage:
    tag: str
    """What DockerWorld starts containers from."""
    base_image: str
    """The base it was built FROM."""
    built: bool
    """True when this call built it; False when it was already there."""


def ensure_image(
    *,
    lock_dir: Path | None = None,
    base_image: str | None = None,
    context_dir: Path | None = None,
    client: DockerClient | None = None,
) -> WorldImage:
    """The world image's tag, building it first if no image of this content exists.

    lock_dir: a directory shared by every process of the run (default: the system temp
    dir, which also works, just across runs too). base_image: overrides
    NODEVAL_BASE_IMAGE and the defaults. context_dir: a directory with a Dockerfile
    (default: the project's top-level one).
    """
    client = client or docker_client()
    context = (context_dir or default_context_dir()).resolve()
    requested = base_image or os.environ.get(BASE_IMAGE_ENV) or ""
    key = (str(context), requested, str(client.api.base_url))
    if key in _known_ready:
        return _known_ready[key]
    with exclusive_lock((lock_dir or Path(tempfile.gettempdir())) / LOCK_FILE_NAME):
        image = _build_unless_present(client, context, requested)
    _known_ready[key] = WorldImage(image.tag, image.base_image, built=False)
    return image


def _build_unless_present(client: DockerClient, context: Path, requested_base: str) -> WorldImage:
    base, base_id = resolve_base_image(client, requested_base)
    tag = f"{IMAGE_REPOSITORY}:{context_digest(context, base_id)[:12]}"
    if _image_present(client, tag):
        return WorldImage(tag, base, built=False)
    _build(client, context, tag, base)
    return WorldImage(tag, base, built=True)


def resolve_base_image(client: DockerClient, requested: str) -> tuple[str, str]:
    """(name, image id) of the base to build FROM: present locally, or pulled."""
    candidates = [requested] if requested else [OFFLINE_BASE_IMAGE, PULLABLE_BASE_IMAGE]
    for name in candidates:
        image_id = _local_image_id(client, name)
        if image_id:
            return name, image_id
    to_pull = requested or PULLABLE_BASE_IMAGE
    try:
        return to_pull, str(client.images.pull(to_pull).id)
    except Exception as exc:  # no registry, unknown name, auth: all mean "not here"
        raise WorldError(_no_base_message(candidates, to_pull, exc)) from None


def _no_base_message(candidates: list[str], pulled: str, exc: Exception) -> str:
    tried = " nor ".join(repr(name) for name in candidates)
    return (
        f"no base image for the world image: neither {tried} is present locally, and "
        f"pulling {pulled!r} failed "
        f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}). "
        f"On a machine without registry access, run `sudo {OFFLINE_SCRIPT}` (it builds "
        f"{OFFLINE_BASE_IMAGE} from Debian packages), "
        f"or set {BASE_IMAGE_ENV} to an image that is present."
    )


def context_digest(context: Path, base_image_id: str) -> str:
    """sha256 over the base image id and every file docker would send as the build context."""
    from docker.utils.build import exclude_paths

    digest = hashlib.sha256(f"base {base_image_id}\n".encode())
    ignore = context / ".dockerignore"
    if ignore.is_file():
        digest.update(b"dockerignore\n" + ignore.read_bytes())
    for relative in sorted(exclude_paths(str(context), _ignore_patterns(ignore))):
        path = context / relative
        if path.is_file():
            digest.update(f"file {relative} {path.stat().st_mode & 0o111}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _ignore_patterns(ignore: Path) -> list[str]:
    """The .dockerignore patterns, read the way the docker SDK reads them for a build."""
    if not ignore.is_file():
        return []
    lines = (line.strip() for line in ignore.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def default_context_dir() -> Path:
    """The project's top-level directory, which holds the world image's Dockerfile."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "Dockerfile").is_file():
        raise WorldError(
            f"the world image's Dockerfile is not at {root / 'Dockerfile'} (pytest-nodeval "
            f"installed without its source tree?); pass context_dir= a directory with a Dockerfile"
        )
    return root


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path`; it is released if the process dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(client: DockerClient, context: Path, tag: str, base: str) -> None:
    from docker.errors import APIError, BuildError

    try:
        client.images.build(
            path=str(context),
            tag=tag,
            buildargs={"BASE_IMAGE": base},
            pull=False,
            rm=True,
            forcerm=True,
            labels={LABEL_MANAGED: "true"},
        )
    except BuildError as exc:
        log = "".join(str(chunk.get("stream", "")) for chunk in exc.build_log)
        tail = "\n".join(log.strip().splitlines()[-15:])
        raise WorldError(
            f"building world image {tag} FROM {base} ({context}/Dockerfile) failed: "
            f"{exc.msg}\n{tail}"
        ) from None
    except APIError as exc:
        raise WorldError(f"building world image {tag} FROM {base} failed: {exc}") from None


def _image_present(client: DockerClient, name: str) -> bool:
    return _local_image_id(client, name) is not None


def _local_image_id(client: DockerClient, name: str) -> str | None:
    from docker.errors import APIError, ImageNotFound

    try:
        return str(client.images.get(name).id)
    except ImageNotFound:
        return None
    except APIError as exc:  # e.g. a malformed name
        raise WorldError(f"cannot look up image {name!r} on the Docker engine: {exc}") from None
