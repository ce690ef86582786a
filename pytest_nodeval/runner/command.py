"""A program as the agent: `command:` in input/config.yaml (docs/command-agents.md).

The program runs in the attempt's world, in every mode, with the user's turns on its stdin
(one line each, then end of file) and the base URLs of the attempt's recording proxy
(agent/proxy.py) in its environment, with a placeholder for every key. Each line it prints is
an answer (`io.output`); its stderr is kept beside the attempt's journal. Its own tools run
inside it, so the proxy derives them from the model traffic (journal/derived.py): the tool
calls the model asked for and the results the program sent back. Replay answers the model
from the journal while the program's tools run again, in a fresh world.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import __version__
from ..agent.config import EngineConfig
from ..errors import NodevalError
from ..journal.replay import ReplayStash, ReplayStopped
from ..journal.writer import JournalWriter

STDERR_FILE = "stderr.txt"
"""The program's stderr, beside the attempt's events.jsonl."""
_STDERR_TAIL = 5
"""Lines of stderr a failed session's reason quotes."""


def run_command_agent(
    config: EngineConfig,
    journal: JournalWriter,
    stash: ReplayStash | None,
    world: Any,
    user: Any,
    *,
    mode: str,
    keys: Mapping[str, str],
    limits: Any = None,
) -> str | None:
    """Run the program once; returns the divergence, if replay stopped at one."""
    from ..agent.adapter import end_session
    from ..agent.proxy import RecordingProxy

    assert config.command is not None
    journal.emit(
        "session.start",
        {
            "engine": "command",
            "version": __version__,
            "session_id": journal.header.session_id,
            "mode": mode,
        },
    )
    start = time.perf_counter()
    turns = _turns(user, journal)
    # Only the case's providers are served: a call to another gets a 404 that names them.
    upstreams: dict[str, str] = {spec.name: _origin(spec) for spec in config.providers}
    proxy = RecordingProxy(journal, stash, upstreams=upstreams, keys=keys, limits=limits)
    with _reachable(proxy, world, config) as argv:
        result = world.exec(
            argv,
            timeout_s=config.limits.timeout_s,
            stdin="".join(f"{turn}\n" for turn in turns).encode(),
        )
    for line in result.stdout.splitlines():
        journal.emit("io.output", {"text": line})
    _keep_stderr(journal, result.stderr)
    status, reason = _outcome(result, config)
    divergence = proxy.stopped
    if divergence is None and reason is None and stash is not None:
        try:  # a program that failed did not finish early: its failure says why
            stash.check_complete()
        except ReplayStopped as stop:
            divergence = stop.divergence
    end_session(
        journal,
        stash,
        "error" if divergence or reason else status,
        reason,
        str(divergence) if divergence else None,
        start,
    )
    return str(divergence) if divergence else None


def _turns(user: Any, journal: JournalWriter) -> list[str]:
    """Every turn up front: the program reads them from stdin, which closes after the last."""
    if type(user).__name__ == "PersonaUser":
        raise NodevalError(
            "a persona user answers the agent turn by turn, which a command agent cannot do "
            "yet: give the case a scripted user (user: {kind: scripted, inputs: [...]})"
        )
    turns: list[str] = []
    while (turn := user.next_input(None)) is not None:
        journal.set_turn(len(turns) + 1)
        journal.emit("io.input", {"text": turn.text, "source": turn.source})
        turns.append(turn.text)
    return turns


@contextmanager
def _reachable(proxy: Any, world: Any, config: EngineConfig) -> Iterator[list[str]]:
    """Start the proxy where the program can reach it; yields the argv that starts the program.

    A local world shares this machine's loopback. A sandboxed one has a network of its own, or
    none: the proxy listens on a Unix socket in a directory both sides see, and a relay inside
    (runner/relay.py, on the world's python3) gives the program a loopback port to it.
    """
    shared = getattr(world, "shared_dir", None)
    if world.backend == "local":
        with proxy.start():
            env = _env(config, proxy.url)
            yield ["env", *(f"{k}={v}" for k, v in env.items()), *(config.command or [])]
        return
    if shared is None:
        raise NodevalError(
            f"a command agent cannot run in a {world.backend} world: it shares no directory "
            "with this machine for the proxy's socket; use a docker, bwrap or local world"
        )
    host_dir, inside = shared
    with proxy.start(unix_path=Path(host_dir) / _SOCKET):
        relay = f"{inside}/{_RELAY}"
        shutil.copy(Path(__file__).parent / "relay.py", Path(host_dir) / _RELAY)
        plan = {
            "socket": f"{inside}/{_SOCKET}",
            "env": _env(config, "{url}"),
            "argv": config.command,
        }
        yield ["python3", "-S", relay, json.dumps(plan)]  # -S: no site, a faster start


_SOCKET, _RELAY = "nodeval-proxy.sock", "nodeval-relay.py"


def _env(config: EngineConfig, url: str) -> dict[str, str]:
    from ..agent.proxy import program_env

    return {**program_env(url), "NO_PROXY": "127.0.0.1,localhost", **config.env}


def _origin(spec: Any) -> str:
    """Where the proxy sends a provider's requests, whose paths carry the API version: an
    OpenAI base_url ends in /v1 (as its SDK wants it), the others do not."""
    from ..agent.proxy import UPSTREAMS

    if not spec.base_url:
        return UPSTREAMS[spec.name]
    base = str(spec.base_url).rstrip("/")
    return base.removesuffix("/v1") if spec.name == "openai" else base


def _keep_stderr(journal: JournalWriter, stderr: str) -> None:
    if journal.directory is not None and stderr:
        Path(journal.directory, STDERR_FILE).write_text(stderr)


def _outcome(result: Any, config: EngineConfig) -> tuple[str, str | None]:
    if result.timed_out:
        return "error", (
            f"the program ran past the case's limits.timeout_s ({config.limits.timeout_s:g} s) "
            "and was killed with everything it started"
        )
    if result.exit_code == 0:
        return "ok", None
    tail = "\n".join(result.stderr.strip().splitlines()[-_STDERR_TAIL:])
    where = f"; the end of its stderr:\n{tail}" if tail else " (nothing on stderr)"
    return "error", f"the program exited with status {result.exit_code}{where}"
