"""`nodeval new ID`: a new case that records and replays green at once.

An engine case (the keyless mock provider) by default; with `--agent`, a case for your own
agent: a Python test bound to it, the agent beside it, and `_record/record.py`. Every YAML
file starts with a `# yaml-language-server: $schema=...` line pointing at the project's copy
of the schemas (`nodeval schemas`), so editors complete and check the keys.
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

from ..errors import NodevalError
from ..paths import directory_problem, refuse

_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "case_id", metavar="ID", help="The case's id: lower case letters, digits, '.', '_', '-'."
    )
    parser.add_argument(
        "--agent",
        action="store_true",
        help="A case for your own agent (a bound Python test and _record/record.py).",
    )
    parser.add_argument(
        "--command",
        dest="program",  # `args.command` is the subcommand's name
        action="store_true",
        help="A case whose agent is a program (input/agent.py, on python3 alone), recorded "
        "against the fake LLM (docs/command-agents.md).",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("scenarios"),
        help="The case root to create it in (one of nodeval_cases; default: scenarios).",
    )


def run(args: argparse.Namespace) -> int:
    from ..case.directory import find_case_dirs, read_case_id

    case_id, root = args.case_id, args.root
    if not _ID.match(case_id) or re.search(r"-r\d+$", case_id):
        raise NodevalError(
            f"{case_id!r} is not a valid case id: lower case letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, not ending in -r<digits>"
        )
    refuse("--root", directory_problem(root))
    directory = root / case_id
    taken = (
        [d for d in find_case_dirs([root]) if read_case_id(d) == case_id] if root.is_dir() else []
    )
    if directory.exists() or taken:
        where = directory if directory.exists() else taken[0]
        raise NodevalError(f"case {case_id!r} already exists at {where}; choose another id")
    from ..case.schema_files import project_schemas

    schemas = project_schemas(root)
    if args.agent and args.program:
        raise NodevalError("--agent and --command: choose one (a Python function or a program)")
    make = _agent_case if args.agent else (_command_case if args.program else _engine_case)
    try:
        make(directory, case_id, schemas)
        observed = _record(directory, agent=args.agent)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    print(f"created {directory}: {observed} (replay it with `pytest {directory}`)")
    return 0


def _write(path: Path, schemas: Path, relative: str, body: str) -> None:
    from ..case.schema_files import schema_line

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema_line(path, relative, schemas) + body)


def _case_yaml(case_id: str, description: str) -> str:
    return (
        f"id: {case_id}\nname: {case_id.replace('-', ' ')}\ndescription: {description}\n"
        "tags: [pr]          # markers: `pytest -m pr` selects it\n"
        "# repeat: 5         # attempts per case when the command line does not say --repeat\n"
        "# min_pass_rate: 0.8\n"
    )


def _engine_case(directory: Path, case_id: str, schemas: Path) -> None:
    _write(
        directory / "case.yaml",
        schemas,
        "case.yaml",
        _case_yaml(case_id, "The reference engine answers one question (edit input/config.yaml)."),
    )
    _write(
        directory / "input" / "config.yaml",
        schemas,
        "input/config.yaml",
        "providers:\n"
        "  # The mock needs no key; add a real provider after it, "
        "e.g. {name: anthropic, model: ...}\n"
        '  - name: mock\n    model: mock-1\n    script:\n      - text: "Hello! How can I help?"\n'
        "system_prompt: You are a helpful assistant.\n"
        "tools: []           # shell, file, code_exec, ask_user, ...\n"
        "limits: {max_turns: 4, timeout_s: 60}\n",
    )
    _write(
        directory / "input" / "inputs.yaml",
        schemas,
        "input/inputs.yaml",
        'user:\n  kind: scripted\n  inputs: ["Hi there"]\n',
    )
    _write(
        directory / "assertions.yaml",
        schemas,
        "assertions.yaml",
        '- kind: output_contains\n  text: "help"\n- kind: no_errors\n',
    )


def _command_case(directory: Path, case_id: str, schemas: Path) -> None:
    _write(
        directory / "case.yaml",
        schemas,
        "case.yaml",
        _case_yaml(case_id, "A program as the agent (input/agent.py, replace it with yours)."),
    )
    _write(
        directory / "input" / "config.yaml",
        schemas,
        "input/config.yaml",
        "# The program, run in the world with input/ as its working directory; its model calls\n"
        "# go through nodeval's proxy (docs/command-agents.md).\n"
        "command: [python3, agent.py]\n"
        "providers:\n"
        "  # base_url: fake records against the fake LLM (input/llm.yaml) with no key; drop\n"
        "  # it to record against the provider (ANTHROPIC_API_KEY).\n"
        "  - {name: anthropic, model: claude-sonnet-4-6, base_url: fake}\n"
        "env: {SYSTEM_PROMPT: You are a helpful assistant.}\n"
        "limits: {timeout_s: 60}\n",
    )
    _write(
        directory / "input" / "inputs.yaml",
        schemas,
        "input/inputs.yaml",
        'user:\n  kind: scripted\n  inputs: ["Hi there"]\n',
    )
    _write(
        directory / "input" / "llm.yaml",
        schemas,
        "input/llm.yaml",
        'responses:\n  - text: "Hello! How can I help?"\n',
    )
    _write(
        directory / "assertions.yaml",
        schemas,
        "assertions.yaml",
        '- kind: output_contains\n  text: "help"\n- kind: no_errors\n',
    )
    (directory / "input" / "agent.py").write_text(_COMMAND_AGENT)


_COMMAND_AGENT = '''"""A starter agent: each stdin line is a user turn, each printed line an answer.

It calls the Anthropic Messages API at $ANTHROPIC_BASE_URL (nodeval's proxy, which records and
replays the calls) with the standard library alone; any language and any SDK that reads
ANTHROPIC_BASE_URL works the same way.
"""

import json
import os
import sys
import urllib.request

URL = os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages"
HEADERS = {
    "content-type": "application/json",
    "x-api-key": os.environ["ANTHROPIC_API_KEY"],
    "anthropic-version": "2023-06-01",
}
conversation = []
for line in sys.stdin:
    conversation.append({"role": "user", "content": line.strip()})
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "system": os.environ.get("SYSTEM_PROMPT", ""),
        "messages": conversation,
    }
    request = urllib.request.Request(URL, json.dumps(body).encode(), HEADERS)
    with urllib.request.urlopen(request) as response:
        reply = json.load(response)
    text = " ".join(b["text"] for b in reply["content"] if b["type"] == "text")
    conversation.append({"role": "assistant", "content": text})
    print(text.replace("\\n", " "), flush=True)
'''


def _agent_case(directory: Path, case_id: str, schemas: Path) -> None:
    module = "agent_" + re.sub(r"\W", "_", case_id)
    _write(
        directory / "case.yaml",
        schemas,
        "case.yaml",
        _case_yaml(case_id, "Your own agent, run by the test bound to this case.")
        + "# The starter agent calls no model; delete this line once yours does, so a\n"
        "# recording without a model call is refused.\n"
        "needs_model: false\n",
    )
    _write(
        directory / "input" / "inputs.yaml",
        schemas,
        "input/inputs.yaml",
        'user:\n  kind: scripted\n  inputs: ["Hi there"]\n',
    )
    _write(
        directory / "assertions.yaml",
        schemas,
        "assertions.yaml",
        '- kind: output_contains\n  text: "help"\n',
    )
    root = directory.parent
    (root / f"{module}.py").write_text(
        f'"""The agent of case {case_id}: replace the body with a call into your own agent.\n\n'
        "ctx.inputs() gives the user's turns, ctx.output() answers; every SDK client built\n"
        "meanwhile is recorded and replayed (docs/frameworks.md); wrap side-effecting\n"
        "functions with @tool.\n"
        '"""\n\nfrom pytest_nodeval import tool\n\n\n'
        '@tool\ndef greeting(name: str) -> str:\n    return f"Hello, {name}! How can I help?"\n\n\n'
        'def agent(ctx):\n    for text in ctx.inputs():\n        ctx.output(greeting("there"))\n'
    )
    (root / f"test_{module}.py").write_text(
        f"import pytest\n\nfrom {module} import agent\n\n\n"
        f"@pytest.mark.nodeval_case({case_id!r})\ndef test_{module}(nodeval_attempt):\n"
        '    observed = nodeval_attempt.run(agent)\n    assert observed.status == "ok"\n'
    )
    (directory / "_record").mkdir()
    (directory / "_record" / "record.py").write_text(
        '"""Records this case\'s journal: `nodeval record` runs it in the case directory."""\n\n'
        "import sys\nfrom pathlib import Path\n\n"
        "sys.path.insert(0, str(Path(__file__).resolve().parents[2]))"
        "  # the case root, where the agent is\n\n"
        f"from {module} import agent  # noqa: E402\n\n"
        "from pytest_nodeval import record_agent  # noqa: E402\n\n"
        "record_agent(agent)\n"
    )


def _record(directory: Path, *, agent: bool) -> str:
    from .record import run as record

    code = record(argparse.Namespace(paths=[directory], world=None, force=False, record_mode="all"))
    if code != 0:
        raise NodevalError(
            f"{directory}: the new case did not record (see above); nothing was kept"
        )
    return "recorded its journal" if not agent else "recorded its journal with _record/record.py"
