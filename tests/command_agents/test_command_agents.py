"""Programs as agents (issue 27, docs/command-agents.md): a Python process on the Anthropic SDK,
a shell script around curl and a Rust binary each record keylessly against the fake through
the recording proxy, replay with the network blocked, have their own tool call journaled as
derived events (so `tool_called` passes), and diverge when their system prompt changes.

The Python agent runs in the local world (it needs this virtualenv's anthropic SDK); the shell
and Rust agents in bubblewrap, whose network is its own: they reach the proxy through the
relay. The agents themselves are in agents/ (agents/check_agents.py checks them on their own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.world.conftest import require_backend, unavailable

AGENTS = Path(__file__).parent / "agents"
RUST = AGENTS / "rust_agent"
SCRIPT = {
    "rules": [
        {"when": {"after_tool_result": True}, "respond": {"text": "Saved your note."}},
        {
            "when": {"last_user_contains": "mom"},
            "respond": {"tool_calls": [{"name": "save_note", "args": {"text": "call mom"}}]},
        },
        {"respond": {"tool_calls": [{"name": "save_note", "args": {"text": "buy milk"}}]}},
    ]
}
HOME = os.environ.get("HOME", "")
"""This user's home as the suite starts: pytester points HOME elsewhere, and rustup finds its
toolchain there."""
KEY_ENVS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@dataclass(frozen=True)
class Program:
    world: str
    provider: str
    files: dict[str, Path]
    """Copied into input/, by name."""
    command: list[str]


@pytest.fixture(scope="session")
def rust_agent() -> Path:
    if shutil.which("cargo") is None:
        unavailable("cargo is not installed: the Rust agent cannot be built")
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "--quiet"],
        cwd=RUST,
        env={**os.environ, "HOME": HOME},
        check=True,
        timeout=900,
    )
    return RUST / "target" / "release" / "rust_agent"


def _program(name: str, world: str, rust_agent: Path | None) -> Program:
    if name == "python":
        agent = {"agent.py": AGENTS / "python_agent.py"}
        return Program(world, "anthropic", agent, [sys.executable, "agent.py"])
    if name == "shell":
        return Program(world, "openai", {"agent.sh": AGENTS / "shell_agent.sh"}, ["sh", "agent.sh"])
    assert rust_agent is not None
    return Program(world, "anthropic", {"agent": rust_agent}, ["./agent"])


def _case(root: Path, program: Program, case_id: str = "notes", prompt: str = "") -> Path:
    case = root / "scenarios" / case_id
    (case / "input").mkdir(parents=True)
    (case / "case.yaml").write_text(
        yaml.safe_dump({"id": case_id, "world": {"backend": program.world}})
    )
    models = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1-mini"}
    config = {
        "command": program.command,
        "providers": [
            {"name": program.provider, "model": models[program.provider], "base_url": "fake"}
        ],
        "env": {"SYSTEM_PROMPT": prompt or "You keep the user's notes."},
    }
    (case / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    (case / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["Buy milk", "Call mom"]}})
    )
    (case / "input" / "llm.yaml").write_text(yaml.safe_dump(SCRIPT))
    for name, source in program.files.items():
        shutil.copy(source, case / "input" / name)
    (case / "assertions.yaml").write_text(
        yaml.safe_dump(
            [
                {"kind": "tool_called", "tool": "save_note", "args": {"text": "call mom"}},
                {"kind": "tool_called", "tool": "save_note", "times": 2},
                {"kind": "output_contains", "text": "Saved your note."},
            ]
        )
    )
    return case


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for env in KEY_ENVS:
        monkeypatch.delenv(env, raising=False)
    pytester.makeini("[pytest]\nnodeval_cases = scenarios\n")
    # Replay must not reach the upstream: the test process may connect to nothing but
    # Unix sockets and its own loopback (where the proxy and, in the local world, the
    # program talk).
    pytester.makeconftest(
        "import socket, pytest\n"
        "@pytest.fixture(autouse=True)\n"
        "def _no_network(monkeypatch, request):\n"
        "    if request.config.getoption('--nodeval-mode') == 'record':\n"
        "        return\n"
        "    connect = socket.socket.connect\n"
        "    def only_loopback(sock, address, *args):\n"
        "        if sock.family == socket.AF_INET and address[0] != '127.0.0.1':\n"
        "            raise OSError(f'the network is blocked in replay: {address}')\n"
        "        return connect(sock, address, *args)\n"
        "    monkeypatch.setattr(socket.socket, 'connect', only_loopback)\n"
    )
    return pytester


@pytest.mark.parametrize(
    ("name", "world"),
    # The Python agent needs this virtualenv's SDK, which only the local world sees; the
    # image of a docker world has python3 and no curl.
    [("python", "local"), ("shell", "bwrap"), ("rust", "bwrap"), ("rust", "docker")],
)
def test_a_program_records_keylessly_replays_offline_and_diverges_on_its_prompt(
    name: str, world: str, project: pytest.Pytester, request: pytest.FixtureRequest
) -> None:
    if world != "local":
        require_backend(world)
    rust = request.getfixturevalue("rust_agent") if name == "rust" else None
    program = _program(name, world, rust)
    case = _case(project.path, program)

    project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=1)
    events = [yaml.safe_load(line) for line in (case / "journal" / "events.jsonl").open()]
    kinds = [e["type"] for e in events]
    assert kinds.count("tool.call") == 2 and kinds.count("tool.result") == 2
    assert [e["payload"]["text"] for e in events if e["type"] == "io.output"] == [
        "Saved your note."
    ] * 2

    project.runpytest().assert_outcomes(passed=1)
    _diverges_on_a_new_prompt(project, case)


def _diverges_on_a_new_prompt(project: pytest.Pytester, case: Path) -> None:
    """A changed system prompt: replay stops at the program's first request, the run says why
    and the attempt's journal ends saying so."""
    config = yaml.safe_load((case / "input" / "config.yaml").read_text())
    config["env"]["SYSTEM_PROMPT"] = "Be brief."
    (case / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    changed = project.runpytest()
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*replay of 'scenarios/notes' diverged from its journal*"])
    changed.stdout.fnmatch_lines(["*Be brief.*"])
    runs = (project.path / "reports").glob("*/_sessions/notes/r1/journal/events.jsonl")
    observed = max(runs, key=lambda path: path.stat().st_mtime)  # the diverged run's
    end = yaml.safe_load(observed.read_text().splitlines()[-1])
    assert end["payload"]["status"] == "divergence" and "Be brief." in end["payload"]["reason"]


def test_a_program_that_fails_gives_one_clear_error_with_its_stderr(
    project: pytest.Pytester,
) -> None:
    program = Program("local", "anthropic", {}, ["sh", "-c", "echo 'no key file' >&2; exit 3"])
    _case(project.path, program)
    result = project.runpytest("--nodeval-mode", "record")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*the program exited with status 3; the end of its stderr:*", "*no key file*"]
    )


def test_a_program_past_its_timeout_is_killed_with_what_it_started(
    project: pytest.Pytester, tmp_path: Path
) -> None:
    marker = tmp_path / "child.pid"
    program = Program(
        "local", "anthropic", {}, ["sh", "-c", f"sleep 60 & echo $! > {marker}; sleep 60"]
    )
    case = _case(project.path, program)
    config = yaml.safe_load((case / "input" / "config.yaml").read_text())
    config["limits"] = {"timeout_s": 1}
    (case / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    result = project.runpytest("--nodeval-mode", "record")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the program ran past the case's limits.timeout_s (1 s)*"])
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)  # killed with its group: gone once its new parent reaps it
    assert not _running(child), "the program's background child outlived the attempt"


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


PERSONA_SCRIPT = {
    "rules": [
        {
            "when": {"system_contains": "playing a USER", "last_user_contains": "starts"},
            "respond": {"text": "Please note: buy milk"},
        },
        {"when": {"system_contains": "playing a USER"}, "respond": {"text": "Thanks! ###DONE###"}},
        *SCRIPT["rules"],
    ]
}
PERSONA = {
    "kind": "persona",
    "provider": {"name": "anthropic", "model": "claude-sonnet-4-6", "base_url": "fake"},
    "persona": "Someone who keeps lists.",
    "reason": "Wants a note saved.",
}


def _jsonl_case(root: Path, world: str, user: dict[str, object]) -> Path:
    program = Program(world, "anthropic", {"agent.py": AGENTS / "jsonl_agent.py"}, [])
    case = _case(root, program)
    config = yaml.safe_load((case / "input" / "config.yaml").read_text())
    config.update(command=["python3", "agent.py"], stdio="jsonl")
    (case / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    (case / "input" / "inputs.yaml").write_text(yaml.safe_dump({"user": user}))
    (case / "input" / "llm.yaml").write_text(yaml.safe_dump(PERSONA_SCRIPT))
    return case


def _events(case: Path) -> list[dict[str, object]]:
    return [yaml.safe_load(line) for line in (case / "journal" / "events.jsonl").open()]


@pytest.mark.parametrize("world", ["local", "bwrap", "docker"])
def test_a_persona_talks_with_a_program_turn_by_turn_in_json_lines(
    world: str, project: pytest.Pytester
) -> None:
    if world != "local":
        require_backend(world)
    case = _jsonl_case(project.path, world, PERSONA)
    (case / "assertions.yaml").write_text(
        yaml.safe_dump(
            [
                {"kind": "tool_called", "tool": "save_note", "args": {"text": "buy milk"}},
                {"kind": "output_contains", "text": "Saved your note."},
            ]
        )
    )

    project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=1)
    events = _events(case)
    talk = [(e["type"], e["payload"]["text"]) for e in events if str(e["type"]).startswith("io.")]
    assert talk == [("io.input", "Please note: buy milk"), ("io.output", "Saved your note.")]
    end = events[-1]["payload"]
    assert isinstance(end, dict) and (end["status"], end["user_ending"]) == ("ok", "done")

    project.runpytest().assert_outcomes(passed=1)  # the recorded persona, no model asked
    _diverges_on_a_new_prompt(project, case)


def test_scripted_turns_in_json_lines_alternate_with_the_answers(
    project: pytest.Pytester,
) -> None:
    case = _jsonl_case(project.path, "local", {"kind": "scripted", "inputs": ["Buy", "Call mom"]})
    project.runpytest("--nodeval-mode", "record").assert_outcomes(passed=1)
    talk = ("io.input", "tool.call", "tool.result", "io.output")
    kinds = [e["type"] for e in _events(case) if e["type"] in talk]
    assert kinds == list(talk) * 2


def test_a_line_outside_the_json_lines_protocol_fails_the_attempt_naming_it(
    project: pytest.Pytester,
) -> None:
    case = _jsonl_case(project.path, "local", {"kind": "scripted", "inputs": ["Hi"]})
    config = yaml.safe_load((case / "input" / "config.yaml").read_text())
    config["command"] = ["sh", "-c", "read line; echo hello there; read rest"]
    (case / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    result = project.runpytest("--nodeval-mode", "record")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*line 1 of the program's stdout is not a message of the jsonl protocol: 'hello there'*"]
    )


def test_a_persona_beside_one_shot_stdin_is_refused_naming_stdio(
    project: pytest.Pytester,
) -> None:
    case = _jsonl_case(project.path, "local", PERSONA)
    config = yaml.safe_load((case / "input" / "config.yaml").read_text())
    del config["stdio"]
    (case / "input" / "config.yaml").write_text(yaml.safe_dump(config))
    result = project.runpytest("--nodeval-mode", "record")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*set `stdio: jsonl`*"])


def test_a_persona_ending_that_is_no_success_fails_the_program(
    project: pytest.Pytester,
) -> None:
    _jsonl_case(project.path, "local", {**PERSONA, "max_turns": 1})
    result = project.runpytest("--nodeval-mode", "record")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the simulated user ended the conversation with 'turn_limit'*"])


def test_a_programs_stderr_is_kept_and_quoted_without_the_hosts_secrets(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "planted-3f9a7c1e5b2d"
    monkeypatch.setenv("PLANTED_API_KEY", secret)  # the local world inherits this environment
    command = ["sh", "-c", 'echo "key: $PLANTED_API_KEY" >&2; exit 3']
    case = _case(project.path, Program("local", "anthropic", {}, command))
    result = project.runpytest("--nodeval-mode", "record", f"--basetemp={project.path / 'tmp'}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the program exited with status 3*", "*key: *"])
    assert secret not in result.stdout.str()
    kept = list((project.path / "reports").rglob("stderr.txt"))
    assert kept and all(secret not in path.read_text() for path in kept)
    assert "key: " in kept[0].read_text()
    assert not (case / "journal").exists()
