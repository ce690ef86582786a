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
import socket
import sys
import tempfile
import threading
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
    # Only the case's providers are served: a call to another gets a 404 that names them.
    upstreams: dict[str, str] = {spec.name: _origin(spec) for spec in config.providers}
    proxy = RecordingProxy(journal, stash, upstreams=upstreams, keys=keys, limits=limits)
    if config.stdio == "jsonl":
        result, problem = _converse(proxy, world, config, journal, user)
    else:
        result, problem = _one_shot(proxy, world, config, journal, user), None
    stderr = journal.redacted(result.stderr)  # secrets go from what is kept, as from events
    _keep_stderr(journal, stderr)
    status, reason = _outcome(result, stderr, config)
    reason = problem or reason
    divergence = proxy.stopped
    if divergence is None and reason is None and stash is not None:
        try:  # a program that failed did not finish early: its failure says why
            stash.check_complete()
        except ReplayStopped as stop:
            divergence = stop.divergence
    end_session(
        journal,
        stash,
        "divergence" if divergence else ("error" if reason else status),
        reason,
        str(divergence) if divergence else None,
        start,
        user_ending=getattr(user, "ending", None),
    )
    return str(divergence) if divergence else None


def _one_shot(
    proxy: Any, world: Any, config: EngineConfig, journal: JournalWriter, user: Any
) -> Any:
    """`stdio: lines`: every turn on stdin at once; each line of stdout an answer."""
    turns = _turns(user, journal)
    with _reachable(proxy, world, config) as (argv, _):
        result = world.exec(
            argv,
            timeout_s=config.limits.timeout_s,
            stdin="".join(f"{turn}\n" for turn in turns).encode(),
        )
    for line in result.stdout.splitlines():
        journal.emit("io.output", {"text": line})
    return result


def _converse(
    proxy: Any, world: Any, config: EngineConfig, journal: JournalWriter, user: Any
) -> tuple[Any, str | None]:
    """`stdio: jsonl`: the program runs while the user talks with it turn by turn
    (runner/dialogue.py); returns its result and a broken protocol's message."""
    from .dialogue import Dialogue, ProtocolError

    ran: dict[str, Any] = {}
    done = threading.Event()

    def run(argv: list[str]) -> None:
        try:
            ran["result"] = world.exec(argv, timeout_s=config.limits.timeout_s)
        except BaseException as exc:  # re-raised below, in the attempt's thread
            ran["error"] = exc
        finally:
            done.set()

    problem = None
    with _reachable(proxy, world, config, talk=True) as (argv, listener):
        assert listener is not None
        runner = threading.Thread(target=run, args=(argv,), name="nodeval-command", daemon=True)
        runner.start()
        over = lambda: done.is_set() or proxy.stopped is not None  # noqa: E731
        try:
            Dialogue(listener, journal, over).run(user)
        except ProtocolError as exc:  # the dialogue closed its end: the program reads EOF
            problem = f"the program broke the conversation: {exc}"
        runner.join()
    if "error" in ran:
        raise ran["error"]
    return ran["result"], problem


def _turns(user: Any, journal: JournalWriter) -> list[str]:
    """Every turn up front: the program reads them from stdin, which closes after the last."""
    from ..people.persona import PersonaUser

    if isinstance(user, PersonaUser):
        raise NodevalError(
            "input/config.yaml: a persona user answers turn by turn, and `stdio: lines` gives "
            "the program every turn at once; set `stdio: jsonl` and have the program speak its "
            "JSON lines (docs/command-agents.md), or give the case a scripted user"
        )
    turns: list[str] = []
    while (turn := user.next_input(None)) is not None:
        journal.set_turn(len(turns) + 1)
        journal.emit("io.input", {"text": turn.text, "source": turn.source})
        turns.append(turn.text)
    return turns


@contextmanager
def _reachable(
    proxy: Any, world: Any, config: EngineConfig, *, talk: bool = False
) -> Iterator[tuple[list[str], socket.socket | None]]:
    """Start the proxy where the program can reach it; yields the argv that starts the program
    and, with `talk`, the listener its stdin and stdout connect to (runner/relay.py).

    A local world shares this machine's loopback. A sandboxed one has a network of its own, or
    none: the proxy listens on a Unix socket in a directory both sides see, and the relay
    inside (on the world's python3) gives the program a loopback port to it.
    """
    if world.backend == "local":
        with proxy.start():
            env = _env(config, proxy.url)
            if not talk:
                yield ["env", *(f"{k}={v}" for k, v in env.items()), *(config.command or [])], None
                return
            with tempfile.TemporaryDirectory(prefix="nodeval-talk-") as scratch:
                plan: dict[str, Any] = {"env": env, "argv": config.command}
                with _talk_socket(Path(scratch), scratch, plan) as listener:
                    relay = Path(__file__).parent / "relay.py"
                    yield [sys.executable, "-S", str(relay), json.dumps(plan)], listener
        return
    shared = getattr(world, "shared_dir", None)
    if shared is None:
        raise NodevalError(
            f"a command agent cannot run in a {world.backend} world: it shares no directory "
            "with this machine for the proxy's socket; use a docker, bwrap or local world"
        )
    host_dir, inside = shared
    with proxy.start(unix_path=Path(host_dir) / _SOCKET):
        shutil.copy(Path(__file__).parent / "relay.py", Path(host_dir) / _RELAY)
        plan = {
            "socket": f"{inside}/{_SOCKET}",
            "env": _env(config, "{url}"),
            "argv": config.command,
        }
        argv = ["python3", "-S", f"{inside}/{_RELAY}"]  # -S: no site, a faster start
        if not talk:
            yield [*argv, json.dumps(plan)], None
            return
        with _talk_socket(Path(host_dir), inside, plan) as listener:
            yield [*argv, json.dumps(plan)], listener


@contextmanager
def _talk_socket(host_dir: Path, inside: str, plan: dict[str, Any]) -> Iterator[socket.socket]:
    """Listen where the relay connects the program's stdin and stdout; names it in `plan`."""
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(host_dir / _TALK))
        (host_dir / _TALK).chmod(0o777)  # the world's user is not this process's
        listener.listen(1)
        plan["talk"] = f"{inside}/{_TALK}"
        yield listener
    finally:
        listener.close()


_SOCKET, _RELAY, _TALK = "nodeval-proxy.sock", "nodeval-relay.py", "nodeval-talk.sock"


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


def _outcome(result: Any, stderr: str, config: EngineConfig) -> tuple[str, str | None]:
    if result.timed_out:
        return "error", (
            f"the program ran past the case's limits.timeout_s ({config.limits.timeout_s:g} s) "
            "and was killed with everything it started"
        )
    if result.exit_code == 0:
        return "ok", None
    tail = "\n".join(stderr.strip().splitlines()[-_STDERR_TAIL:])
    where = f"; the end of its stderr:\n{tail}" if tail else " (nothing on stderr)"
    return "error", f"the program exited with status {result.exit_code}{where}"
