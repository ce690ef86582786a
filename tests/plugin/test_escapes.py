"""A model call is journaled whoever made the client, or it fails the attempt loudly (issue 26):
a client's own base_url still goes through the journal; a request sent around it (another
HTTP library) fails with one message naming the host, in record and in replay; a recording
with no model call is not installed; nodeval's placeholder key never reaches a provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

KEY_ENVS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")

AGENTS = """
import json, os, urllib.request
import anthropic
import pytest

def ask(client, text):
    reply = client.messages.create(model="claude-test", max_tokens=64,
                                   messages=[{"role": "user", "content": text}])
    return reply.content[0].text

def around(url):
    # urllib, not httpx2: nodeval cannot journal it
    request = urllib.request.Request(url + "/v1/messages", data=b"{}", method="POST")
    try:
        urllib.request.urlopen(request, timeout=5)
    except Exception:
        pass  # swallowed on purpose: the attempt must fail anyway

@pytest.mark.nodeval_case("own-url")
def test_own_base_url(nodeval_attempt, nodeval_llm_server, request):
    client = anthropic.Anthropic(base_url=nodeval_llm_server.url)  # its own base_url
    def agent(ctx):
        for text in ctx.inputs():
            ctx.output(ask(client, text))
    observed = nodeval_attempt.run(agent)
    assert observed.status == "ok", observed.metrics()
    if request.config.getoption("--nodeval-mode") != "record":
        assert nodeval_llm_server.requests == [], "replay reached the fake"

@pytest.mark.nodeval_case("around")
def test_around(nodeval_attempt, request):
    if request.config.getoption("--nodeval-mode") == "record":
        fake_url = request.getfixturevalue("nodeval_llm_server").url
    else:
        fake_url = "https://api.anthropic.com"
    def agent(ctx):
        for text in ctx.inputs():
            answer = ask(anthropic.Anthropic(), text)
            if os.environ.get("GO_AROUND"):
                around(fake_url)
            ctx.output(answer)
    observed = nodeval_attempt.run(agent)
    assert observed.status == "ok", observed.metrics()["reason"]

@pytest.mark.nodeval_case("no-model")
def test_no_model(nodeval_attempt):
    observed = nodeval_attempt.run(lambda ctx: "done")
    assert observed.status == "ok", observed.metrics()["reason"]
"""


def _case(root: Path, case_id: str, extra: str = "") -> None:
    case = root / "scenarios" / case_id
    (case / "input").mkdir(parents=True)
    (case / "case.yaml").write_text(f"id: {case_id}\n{extra}")
    (case / "assertions.yaml").write_text("[]\n")
    (case / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": ["hello?"]}})
    )
    (case / "input" / "llm.yaml").write_text(yaml.safe_dump({"responses": [{"text": "hi"}]}))


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for env in KEY_ENVS:
        monkeypatch.delenv(env, raising=False)
    for case_id in ("own-url", "around", "no-model"):
        _case(pytester.path, case_id)
    (pytester.path / "scenarios" / "test_agents.py").write_text(AGENTS)
    return pytester


def _journal(project: pytest.Pytester, case_id: str) -> Path:
    return project.path / "scenarios" / case_id / "journal" / "events.jsonl"


def test_a_client_with_its_own_base_url_is_journaled_and_replays_without_the_fake(
    project: pytest.Pytester,
) -> None:
    project.runpytest("--nodeval-mode", "record", "-k", "own_base_url").assert_outcomes(passed=1)
    requests = [
        json.loads(line)
        for line in _journal(project, "own-url").read_text().splitlines()
        if '"llm.request"' in line
    ]
    assert [r["payload"]["path"] for r in requests] == ["/v1/messages"]
    project.runpytest("-k", "own_base_url").assert_outcomes(passed=1)


def test_a_request_around_the_journal_fails_the_recording_with_the_host(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GO_AROUND", "1")
    result = project.runpytest("--nodeval-mode", "record", "-k", "around")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*a request to 127.0.0.1:* went around the attempt's journal*other than httpx2*"]
    )
    assert not _journal(project, "around").exists(), "a recording that escaped was installed"


def test_a_request_around_the_journal_fails_the_replay_with_the_host_not_connection_error(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.runpytest("--nodeval-mode", "record", "-k", "around").assert_outcomes(passed=1)
    monkeypatch.setenv("GO_AROUND", "1")
    result = project.runpytest("-k", "around")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*a request to api.anthropic.com:443 went around*"])
    result.stdout.no_fnmatch_line("*Connection error*")


def test_a_recording_with_no_model_call_is_not_installed_unless_the_case_needs_none(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("--nodeval-mode", "record", "-k", "no_model")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the agent made no model call*needs_model: false*"])
    assert not _journal(project, "no-model").exists()

    case_yaml = project.path / "scenarios" / "no-model" / "case.yaml"
    case_yaml.write_text("id: no-model\nneeds_model: false\n")
    project.runpytest("--nodeval-mode", "record", "-k", "no_model").assert_outcomes(passed=1)
    assert _journal(project, "no-model").exists()


def test_the_placeholder_key_never_reaches_a_real_provider(project: pytest.Pytester) -> None:
    """Live, with no key and no fake: the SDK builds (the placeholder), the request is stopped
    before it leaves, and the attempt is an infrastructure error that says which key to set."""
    result = project.runpytest("--nodeval-mode", "live", "-k", "around")
    result.stdout.fnmatch_lines(
        ["*api.anthropic.com would go to the real provider without a key: set ANTHROPIC_API_KEY*"]
    )
    assert result.ret == 7, "an infrastructure error alone exits 7"


# --- a world's processes never hold the host's keys (issue 28) ------------------------------

# Every /proc/*/environ and /proc/*/cmdline the world can read, printed reversed and in base64
# (as the agent did, past a redactor that only knew the key as it is).
DUMP_EVERY_PROC = (
    'python3 -c "import base64, glob\n'
    "for path in glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline'):\n"
    "    try:\n"
    "        data = open(path, 'rb').read()\n"
    "    except OSError:\n"
    "        continue\n"
    "    print(path, data[::-1].decode('latin-1'), base64.b64encode(data).decode())\""
)


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_shell_command_in_the_world_finds_no_host_key_in_any_process(
    backend: str, nodeval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's escape: bwrap's first process had this process's environment, key and all,
    and the key went into the journal reversed. The local world isolates nothing: not run."""
    import base64
    import random

    from tests.conftest import write_case
    from tests.world.conftest import require_backend

    require_backend(backend)
    secret = f"sk-ant-planted{random.randrange(10**12):012d}hostonly"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    write_case(
        nodeval_project.path / "scenarios",
        "prying",
        script=[
            {"tool_calls": [{"name": "shell", "args": {"command": DUMP_EVERY_PROC}}]},
            {"text": "Looked around."},
        ],
        inputs=["Look around."],
        tools=["shell"],
        record=False,
        assertions=[],
    )
    result = nodeval_project.runpytest("--nodeval-mode", "record", "--nodeval-world", backend)
    result.assert_outcomes(passed=1)
    journal = _journal(nodeval_project, "prying").read_text()
    assert "/proc/1/environ" in journal, "the command did not read the world's first process"
    assert "=YEK_IPA_CIPORHTNA" not in journal, "a process of the world has the host's key name"
    written = b"".join(p.read_bytes() for p in nodeval_project.path.rglob("*") if p.is_file())
    for form in (secret, secret[::-1], base64.b64encode(secret.encode()).decode()[:-4]):
        assert form.encode() not in written
