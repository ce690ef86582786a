"""Runs the three command-agent programs against the repository's fake LLM and checks them.

    .venv/bin/python tests/command_agents/agents/check_agents.py

Each program gets two user turns on stdin; the fake asks for `save_note` once per turn, then
answers. Checked: exit status 0, one answer line per turn, notes.txt, non-streaming requests
with the model, max_tokens, system prompt and tool, the tool result sent back, the whole
conversation kept; and that an HTTP error status gives the body on stderr and exit status 1.
The Rust agent is built first (`cargo build --release --locked`; quick when up to date).
Exits 1 on any failure.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_nodeval_fakes.llm import LLMFake

HERE = Path(__file__).resolve().parent
RUST = HERE / "rust_agent"
AGENTS = {  # name: (command, the API it calls)
    "python_agent": ([sys.executable, str(HERE / "python_agent.py")], "anthropic"),
    "shell_agent": (["sh", str(HERE / "shell_agent.sh")], "openai_chat"),
    "rust_agent": ([str(RUST / "target" / "release" / "rust_agent")], "anthropic"),
}
MODELS = {"anthropic": "claude-sonnet-4-6", "openai_chat": "gpt-4.1-mini"}
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
TURNS = "remember to buy milk\nand to call mom\n"
SYSTEM = "Keep the notes, tersely."


def run(command: list[str], fake: LLMFake) -> tuple[subprocess.CompletedProcess[str], str]:
    """Runs an agent in a scratch directory; returns the process and its notes.txt."""
    env = os.environ | {
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "sk-ant-placeholder",
        "OPENAI_BASE_URL": fake.url + "/v1",
        "OPENAI_API_KEY": "sk-placeholder",
        "SYSTEM_PROMPT": SYSTEM,
    }
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run(
            command, input=TURNS, cwd=cwd, env=env, capture_output=True, text=True, timeout=60
        )
        notes = Path(cwd, "notes.txt")
        return done, notes.read_text() if notes.exists() else "<no notes.txt>"


def problems_of(name: str, command: list[str], api: str, fake: LLMFake) -> list[str]:
    fake.reset()
    done, notes = run(command, fake)
    found = []
    if done.returncode != 0:
        found.append(f"exit status {done.returncode}, stderr: {done.stderr[-2000:]}")
    if done.stdout != "Saved your note.\nSaved your note.\n":
        found.append(f"stdout {done.stdout!r}")
    if notes != "buy milk\ncall mom\n":
        found.append(f"notes.txt {notes!r}")
    requests = fake.requests
    if [r.answered_by for r in requests] != ["rules[2]", "rules[0]", "rules[1]", "rules[0]"]:
        found.append(f"requests answered by {[r.answered_by for r in requests]}")
    for r in requests:
        body = r.body
        system = body.get("system") if api == "anthropic" else body["messages"][0]["content"]
        tools = [t.get("name") or t["function"]["name"] for t in body.get("tools", [])]
        wanted = (r.api, body.get("model"), body.get("max_tokens"), system, tools)
        if wanted != (api, MODELS[api], 256, SYSTEM, ["save_note"]) or body.get("stream"):
            found.append(f"request #{r.index}: (api, model, max_tokens, system, tools) {wanted}")
    if requests:
        last = requests[-1].body["messages"]  # user, tool call, result, answer, user, call, result
        if len(last) != (7 if api == "anthropic" else 8) or "saved call mom" not in str(last[-1]):
            found.append(f"last request's messages: {last}")
    with LLMFake({}) as refusing:  # every request gets a 400 "no rule matched" error
        failed, _ = run(command, refusing)
    if failed.returncode != 1 or "no rule matched" not in failed.stderr:
        found.append(f"on a 400: exit status {failed.returncode}, stderr {failed.stderr!r}")
    return [f"{name}: {problem}" for problem in found]


def main() -> int:
    cargo = ["cargo", "build", "--release", "--locked", "--quiet"]
    build = subprocess.run([*cargo, "--manifest-path", str(RUST / "Cargo.toml")], check=False)
    if build.returncode != 0:
        print("rust_agent: cargo build failed", file=sys.stderr)
        return 1
    failures = []
    with LLMFake(SCRIPT) as fake:
        for name, (command, api) in AGENTS.items():
            problems = problems_of(name, command, api, fake)
            print(f"{name}: {'FAILED' if problems else 'ok'}")
            failures += problems
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
