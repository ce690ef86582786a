"""Choosing and opening a world backend.

Without a name (or with "auto"): `docker` when an engine answers a quick ping, else
`bwrap` when a trial sandbox runs, else `local`, which isolates nothing and says so
once per process. Each probe runs at most once per process. An explicit name is
honoured or refused with the reason; it never silently falls back.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

from ..errors import NodevalWarning, WorldConfigError, WorldError
from . import World, WorldLimits

BACKENDS = ("docker", "bwrap", "local")
AUTO = "auto"


def open_world(
    backend: str | None = None,
    *,
    run_id: str,
    seed_dir: Path | None = None,
    network: bool = False,
    limits: WorldLimits | None = None,
    image: str | None = None,
    lock_dir: Path | None = None,
) -> World:
    """A fresh world for one attempt; the caller closes it.

    backend: "docker", "bwrap", "local", or None/"auto" to pick the best available.
    run_id: labels docker containers so `cleanup_stale` can tell runs apart.
    seed_dir: files copied into the world's workdir (a case's input/world/).
    image / lock_dir: docker only; the image to start (default: `ensure_image`, which
    builds the top-level Dockerfile once, serialised by a lock file in lock_dir).
    """
    name = choose_backend(backend)
    limits = limits or WorldLimits()
    if name == "docker":
        return _open_docker(run_id, seed_dir, network, limits, image, lock_dir)
    if name == "bwrap":
        from .bwrap import BwrapWorld

        return BwrapWorld(seed_dir=seed_dir, limits=limits, network=network)
    from .local import LocalWorld

    warn_local_isolates_nothing()
    return LocalWorld(seed_dir)


def _open_docker(
    run_id: str,
    seed_dir: Path | None,
    network: bool,
    limits: WorldLimits,
    image: str | None,
    lock_dir: Path | None,
) -> World:
    from .docker import DockerWorld
    from .image import ensure_image

    tag = image or ensure_image(lock_dir=lock_dir).tag
    return DockerWorld(tag, run_id=run_id, seed_dir=seed_dir, limits=limits, network=network)


def choose_backend(requested: str | None) -> str:
    """The backend to use for `requested` (a name, "auto" or None), or a WorldError."""
    if requested is None or requested == AUTO:
        return next(name for name in BACKENDS if backend_problem(name) is None)
    if requested not in BACKENDS:
        valid = ", ".join((AUTO, *BACKENDS))
        raise WorldConfigError(f"unknown world backend {requested!r}; valid names: {valid}")
    problem = backend_problem(requested)
    if problem is not None:
        raise WorldError(
            f"world backend {requested!r} is not available here: {problem}. "
            f"Choose another (valid names: {', '.join((AUTO, *BACKENDS))})."
        )
    return requested


@functools.cache
def backend_problem(name: str) -> str | None:
    """Why `name` cannot run here, or None when it can; probed once per process."""
    if name == "docker":
        from .docker import engine_problem

        return engine_problem()
    if name == "bwrap":
        from .bwrap import bwrap_problem

        return bwrap_problem()
    if name == "local":
        return None
    return f"unknown world backend {name!r} (valid names: {', '.join(BACKENDS)})"


@functools.cache
def warn_local_isolates_nothing() -> None:
    """Warn once per process: the local world runs commands on the host itself."""
    warnings.warn(
        NodevalWarning(
            "the 'local' world isolates nothing: commands run on this machine, can read "
            "its files and reach the network. Install Docker or bubblewrap (bwrap) for "
            "an isolated world."
        ),
        stacklevel=3,
    )
