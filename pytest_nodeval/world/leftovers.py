"""Removing what a killed process's worlds left: containers, cgroups, detached local commands.

For a parent that killed its child with SIGKILL, which gave the child no chance to end its
own worlds (reaper.py); found by the owner's pid and start time, which every world records
(container labels, cgroup names, the local world's environment mark).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def remove_left_by(owner_pid: int, owner_start: str) -> list[str]:
    """Remove every world thing process `owner_pid` (now dead) left; a description of each."""
    from .cgroup import remove_cgroups_of
    from .processes import kill_marked

    removed = [f"process {n}" for n in range(kill_marked(f"{owner_pid}:{owner_start}:"))]
    removed += remove_cgroups_of(owner_pid, owner_start)
    removed += _remove_containers_of(owner_pid, owner_start)
    return removed


def _remove_containers_of(owner_pid: int, owner_start: str) -> list[str]:
    from .docker import containers_of, engine_present

    if not engine_present():
        return []
    try:
        return containers_of(owner_pid, owner_start, remove=True)
    except Exception as exc:  # the engine went away: the next run's sweep removes them
        logger.warning("could not remove the docker worlds of process %d: %s", owner_pid, exc)
        return []
