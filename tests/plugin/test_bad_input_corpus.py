"""A corpus of malformed inputs (issue 18): each gives a documented non-zero exit status and
one message naming the file (and the key or line where there is one), never a traceback.

Each entry breaks one thing of a recorded, passing project: a case file, a config, inputs,
assertions, a journal, a baseline, a report, a protocol request or sampler settings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import write_case

ANSWER = [{"text": "Hello there."}]
USAGE, FAILED, COLLECTION = 4, 1, 2


@dataclass(frozen=True)
class Bad:
    id: str
    breaks: Callable[[Path], Any]
    """Breaks the project (its root); the case under test is scenarios/hello."""
    status: int
    says: str
    """The message, or a distinctive part of it (fnmatch pattern: * and ? are wildcards)."""
    run: str = "pytest"
    """pytest (in the project), or a `nodeval` command line (split on spaces)."""


def _write(relative: str, text: str | bytes) -> Callable[[Path], None]:
    def breaks(root: Path) -> None:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode() if isinstance(text, str) else text)

    return breaks


def _edit(relative: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
    """Load a YAML file, change the data, write it back."""

    def breaks(root: Path) -> None:
        path = root / relative
        path.write_text(yaml.safe_dump(change(yaml.safe_load(path.read_text())), sort_keys=False))

    return breaks


def _set(**values: Any) -> Callable[[Any], Any]:
    return lambda data: {**data, **values}


def _lines(
    change: Callable[[list[str]], list[str]], *, torn: bool = False
) -> Callable[[Path], None]:
    def breaks(root: Path) -> None:
        path = root / "scenarios/hello/journal/events.jsonl"
        text = "".join(line + "\n" for line in change(path.read_text().splitlines()))
        path.write_text(text.removesuffix("\n") if torn else text)

    return breaks


def _call_before_the_end(tool: str) -> Callable[[list[str]], list[str]]:
    """A tool.call inserted before session.end, the events renumbered."""

    def change(lines: list[str]) -> list[str]:
        call = {
            "seq": 0,
            "ts": "t",
            "type": "tool.call",
            "turn": 1,
            "payload": {"tool": tool, "call_id": "c9", "args": {}},
        }
        events = [json.loads(line) for line in lines]
        events.insert(len(events) - 1, call)
        return [json.dumps({**event, "seq": seq}) for seq, event in enumerate(events, start=1)]

    return change


def _remove(relative: str) -> Callable[[Path], None]:
    return lambda root: (root / relative).unlink()


def _both(*steps: Callable[[Path], Any]) -> Callable[[Path], None]:
    def breaks(root: Path) -> None:
        for step in steps:
            step(root)

    return breaks


CASE, CONFIG, INPUTS = (
    "scenarios/hello/case.yaml",
    "scenarios/hello/input/config.yaml",
    "scenarios/hello/input/inputs.yaml",
)
ASSERTIONS, EVENTS = "scenarios/hello/assertions.yaml", "scenarios/hello/journal/events.jsonl"
HEADER = "scenarios/hello/journal/header.json"


def _config(**values: Any) -> Callable[[Path], None]:
    return _edit(CONFIG, _set(**values))


def _script_step(**values: Any) -> Callable[[Path], None]:
    def change(data: Any) -> Any:
        data["providers"][0]["script"][0].update(values)
        return data

    return _edit(CONFIG, change)


def _bad_skill(root: Path) -> None:
    _config(skills="skills")(root)
    _write("scenarios/hello/input/skills/notes/SKILL.md", "just text\n")(root)


CORPUS = [
    # -- case.yaml: read at collection ----------------------------------------------------------
    Bad(
        "case-yaml-syntax",
        _write(CASE, "id: hello\ntags: [pr\n"),
        COLLECTION,
        "*case.yaml:3:1: invalid YAML*",
    ),
    Bad(
        "case-duplicate-key",
        _write(CASE, "id: hello\nrepeat: 2\nrepeat: 3\n"),
        COLLECTION,
        "*case.yaml:3:1: invalid YAML: duplicate key 'repeat' (first given on line 2*",
    ),
    Bad(
        "case-repeat-word",
        _edit(CASE, _set(repeat="many")),
        COLLECTION,
        "*case.yaml: repeat: *(got 'many')",
    ),
    Bad(
        "case-repeat-zero",
        _edit(CASE, _set(repeat=0)),
        COLLECTION,
        "*case.yaml: repeat: *greater than or equal to 1*",
    ),
    Bad(
        "case-repeat-huge",
        _edit(CASE, _set(repeat=1_000_000_000)),
        COLLECTION,
        "*case.yaml: repeat: *less than or equal to 10000*",
    ),
    Bad(
        "case-min-pass-rate",
        _edit(CASE, _set(min_pass_rate=2)),
        COLLECTION,
        "*case.yaml: min_pass_rate: *",
    ),
    Bad(
        "case-unknown-key",
        _edit(CASE, _set(colour="blue")),
        COLLECTION,
        "*case.yaml: colour: unknown key (valid keys:*",
    ),
    Bad(
        "case-id-upper",
        _edit(CASE, _set(id="Hello")),
        COLLECTION,
        "*case.yaml: id: *must be lower case*",
    ),
    Bad(
        "case-id-repeat-suffix",
        _edit(CASE, _set(id="hello-r2")),
        COLLECTION,
        "*case.yaml: id: *-r<digits>*",
    ),
    Bad(
        "case-bad-tag",
        _edit(CASE, _set(tags=["not a marker"])),
        COLLECTION,
        "*case.yaml: tags: *not a valid marker*",
    ),
    Bad(
        "case-freshness",
        _edit(CASE, _set(freshness="soon")),
        COLLECTION,
        "*case.yaml: freshness: *30d, 12w*",
    ),
    Bad(
        "case-world-backend",
        _edit(CASE, _set(world={"backend": "podman"})),
        COLLECTION,
        "*case.yaml: world.backend: *",
    ),
    Bad(
        "case-timeout",
        _edit(CASE, _set(timeout_s=-1)),
        COLLECTION,
        "*case.yaml: timeout_s: *greater than 0*",
    ),
    Bad("case-a-list", _write(CASE, "- id: hello\n"), COLLECTION, "*case.yaml: *"),
    Bad(
        "case-not-utf8",
        _write(CASE, b"id: hello\nname: \xff\xfe\n"),
        COLLECTION,
        "*case.yaml: not UTF-8 text*",
    ),
    Bad(
        "case-schema-version",
        _edit(CASE, _set(schema_version=2)),
        COLLECTION,
        "*case.yaml: schema_version: *",
    ),
    Bad(
        "case-duplicate-id",
        _write("scenarios/other/case.yaml", "id: hello\n"),
        COLLECTION,
        "*duplicate case id 'hello'*",
    ),
    # -- input/config.yaml: read when the case runs ----------------------------------------
    Bad(
        "config-syntax", _write(CONFIG, "providers: [\n"), FAILED, "*config.yaml:2:1: invalid YAML*"
    ),
    Bad(
        "config-no-providers",
        _config(providers=[]),
        FAILED,
        "*config.yaml: providers: *at least 1*",
    ),
    Bad(
        "config-unknown-provider",
        _config(providers=[{"name": "gpt", "model": "x"}]),
        FAILED,
        "*config.yaml: providers.0.name: *",
    ),
    Bad(
        "config-unknown-tool",
        _config(tools=["browser"]),
        FAILED,
        "*config.yaml: tools*unknown tool 'browser'*",
    ),
    Bad(
        "config-max-turns-zero",
        _config(limits={"max_turns": 0}),
        FAILED,
        "*config.yaml: limits.max_turns: *",
    ),
    Bad(
        "config-max-turns-huge",
        _config(limits={"max_turns": 10**9}),
        FAILED,
        "*config.yaml: limits.max_turns: *less than or equal to 10000*",
    ),
    Bad(
        "config-timeout-huge",
        _config(limits={"timeout_s": 1e12}),
        FAILED,
        "*config.yaml: limits.timeout_s: *",
    ),
    Bad(
        "config-bad-regex",
        _script_step(when={"input_matches": "(("}),
        FAILED,
        "*config.yaml: providers.0.script.0.when.input_matches: "
        "*'((' is not a valid regular expression*",
    ),
    Bad("config-unknown-key", _config(prompt="hi"), FAILED, "*config.yaml: prompt: unknown key*"),
    Bad(
        "config-duplicate-key",
        _write(CONFIG, "providers: []\nproviders: []\n"),
        FAILED,
        "*config.yaml:2:1: invalid YAML: duplicate key 'providers'*",
    ),
    Bad(
        "config-composio-missing",
        _config(tools=["composio:GITHUB_STAR"]),
        FAILED,
        "*config.yaml: *composio:GITHUB_STAR*",
    ),
    Bad(
        "config-mcp-unknown-server",
        _config(tools=["mcp:files"]),
        FAILED,
        "*config.yaml: *mcp:files*",
    ),
    Bad("config-temperature", _config(temperature="hot"), FAILED, "*config.yaml: temperature: *"),
    Bad(
        "config-skills-missing",
        _config(skills="skills"),
        FAILED,
        "*input/skills: the skills directory named by 'skills' in input/config.yaml "
        "does not exist*",
    ),
    Bad(
        "config-skill-no-front-matter",
        _bad_skill,
        FAILED,
        "*skills/notes/SKILL.md: no front matter*",
    ),
    Bad(
        "config-web-no-section",
        _config(tools=["web"]),
        FAILED,
        "*config.yaml: *tools: 'web' needs a `web:` section with the hosts it may fetch*",
    ),
    Bad(
        "config-web-allow-url",
        _config(tools=["web"], web={"allow": ["https://docs.example.com/x"]}),
        FAILED,
        "*config.yaml: web.allow: *'https://docs.example.com/x' is not a host*",
    ),
    Bad(
        "config-pdf-max-bytes",
        _config(tools=["pdf"], pdf={"max_bytes": 0}),
        FAILED,
        "*config.yaml: pdf.max_bytes: *",
    ),
    # -- input/inputs.yaml -----------------------------------------------------------------
    Bad(
        "inputs-missing",
        _remove(INPUTS),
        FAILED,
        "*inputs.yaml: missing (a case with input/config.yaml needs*",
    ),
    Bad(
        "inputs-syntax",
        _write(INPUTS, "user: {kind: scripted\n"),
        FAILED,
        "*inputs.yaml:2:1: invalid YAML*",
    ),
    Bad(
        "inputs-kind",
        _edit(INPUTS, lambda d: {"user": {"kind": "robot", "inputs": ["hi"]}}),
        FAILED,
        "*inputs.yaml: user: *",
    ),
    Bad(
        "inputs-empty-list",
        _edit(INPUTS, lambda d: {"user": {"kind": "scripted", "inputs": []}}),
        FAILED,
        "*inputs.yaml: user.scripted.inputs: *at least 1*",
    ),
    Bad(
        "inputs-answer-regex",
        _edit(INPUTS, lambda d: {"user": {**d["user"], "answers": [{"text": "y", "when": "(("}]}}),
        FAILED,
        "*inputs.yaml: user.scripted.answers.0.when: *not a valid regular expression*",
    ),
    Bad(
        "inputs-unknown-key",
        _edit(INPUTS, lambda d: {**d, "persona": "x"}),
        FAILED,
        "*inputs.yaml: persona: unknown key*",
    ),
    # -- assertions.yaml -------------------------------------------------------------------
    Bad(
        "assertions-missing",
        _remove(ASSERTIONS),
        FAILED,
        "*assertions.yaml: missing; a case needs assertions*",
    ),
    Bad(
        "assertions-empty",
        _write(ASSERTIONS, ""),
        FAILED,
        "*assertions.yaml: empty; list the case's assertions*",
    ),
    Bad(
        "assertions-unknown-kind",
        _write(ASSERTIONS, "- kind: looks_good\n"),
        FAILED,
        "*assertions.yaml: assertions.0: *",
    ),
    Bad(
        "assertions-missing-tool",
        _write(ASSERTIONS, "- kind: tool_called\n"),
        FAILED,
        "*assertions.yaml: assertions.0.tool_called.tool: required key is missing*",
    ),
    Bad(
        "assertions-args-regex",
        _write(
            ASSERTIONS, "- kind: tool_called\n  tool: shell\n  args: {command: {regex: '(('}}\n"
        ),
        FAILED,
        "*assertions.yaml: *args.command.regex: '((' is not a valid regular expression*",
    ),
    Bad(
        "assertions-where-regex",
        _write(
            ASSERTIONS, "- kind: event_present\n  type: io.output\n  where: {text: {regex: '[a'}}\n"
        ),
        FAILED,
        "*assertions.yaml: *where.text.regex: '[a' is not a valid regular expression*",
    ),
    Bad(
        "assertions-output-regex",
        _write(ASSERTIONS, "- kind: output_matches\n  regex: '*x'\n"),
        FAILED,
        "*assertions.yaml: *regex: '*x' is not a valid regular expression*",
    ),
    Bad(
        "assertions-unknown-tool",
        _write(ASSERTIONS, "- kind: tool_called\n  tool: browser\n"),
        FAILED,
        "*assertions.yaml: 0.tool: tool_called names tool 'browser', "
        "which input/config.yaml does not offer*",
    ),
    Bad(
        "assertions-negative",
        _write(ASSERTIONS, "- kind: max_turns\n  value: -1\n"),
        FAILED,
        "*assertions.yaml: assertions.0.max_turns.value: *",
    ),
    Bad("assertions-a-string", _write(ASSERTIONS, "all good\n"), FAILED, "*assertions.yaml: *"),
    Bad(
        "assertions-duplicate-key",
        _write(ASSERTIONS, "- kind: max_turns\n  value: 1\n  value: 2\n"),
        FAILED,
        "*assertions.yaml:3:3: invalid YAML: duplicate key 'value'*",
    ),
    Bad(
        "assertions-plan-share",
        _write(ASSERTIONS, "- kind: plan_followed\n  min_done: 2\n"),
        FAILED,
        "*assertions.yaml: assertions.0.plan_followed.min_done: *",
    ),
    # -- the golden journal ----------------------------------------------------------------
    Bad(
        "journal-empty",
        _write(EVENTS, ""),
        FAILED,
        "*events.jsonl: no events (an empty golden journal)*",
    ),
    Bad(
        "journal-blank",
        _write(EVENTS, "\n  \n\n"),
        FAILED,
        "*events.jsonl: no events (an empty golden journal)*",
    ),
    Bad(
        "journal-torn-end",
        _lines(lambda lines: [*lines[:-1], lines[-1][:25]], torn=True),
        FAILED,
        "*events.jsonl:*: torn last line (the recording was cut off after*",
    ),
    Bad(
        "journal-no-end",
        _lines(lambda lines: lines[:-1]),
        FAILED,
        "*events.jsonl: no session.end after seq*",
    ),
    Bad(
        "journal-bad-line",
        _lines(lambda lines: [lines[0], "{not json", *lines[1:]]),
        FAILED,
        "*events.jsonl:2: invalid event*",
    ),
    Bad(
        "journal-seq-order",
        _lines(lambda lines: [lines[1], lines[0], *lines[2:]]),
        FAILED,
        "*events.jsonl:2: seq 1 does not follow seq 2*",
    ),
    Bad("journal-header-missing", _remove(HEADER), FAILED, "*header.json: missing*"),
    Bad("journal-header-json", _write(HEADER, "{"), FAILED, "*header.json: *"),
    Bad(
        "journal-header-version",
        _write(HEADER, json.dumps({"schema_version": 2})),
        FAILED,
        "*header.json: *this reader knows schema_version 1*",
    ),
    Bad("journal-events-missing", _remove(EVENTS), FAILED, "*events.jsonl: missing*"),
    Bad(
        "journal-unknown-tool",
        _lines(_call_before_the_end("browser")),
        FAILED,
        "*events.jsonl: seq * calls tool 'browser', which input/config.yaml does not offer*",
    ),
    # -- baselines, reports ------------------------------------------------------------------
    Bad(
        "baseline-missing",
        lambda root: None,
        USAGE,
        "ERROR: --nodeval-baseline: *nope.json: no such report*",
        run="pytest --nodeval-baseline=reports/nope.json",
    ),
    Bad(
        "baseline-corrupt",
        _write("reports/bad.json", '{"schema_version": "1"'),
        USAGE,
        "*reports/bad.json: not a valid report.json (schema_version 1)*",
        run="pytest --nodeval-baseline=reports/bad.json",
    ),
    Bad(
        "baseline-version",
        _write("reports/v2.json", json.dumps({"schema_version": "2"})),
        USAGE,
        "*reports/v2.json: *",
        run="pytest --nodeval-baseline=reports/v2.json",
    ),
    Bad(
        "baseline-command-missing",
        lambda root: None,
        USAGE,
        "nodeval baseline: *nope.json: no such report*",
        run="nodeval baseline --against reports/nope.json --current reports/nope.json",
    ),
    Bad(
        "report-missing",
        _write("reports/run/summary.txt", ""),
        USAGE,
        "nodeval report: *reports/run*",
        run="nodeval report reports/run",
    ),
    Bad(
        "report-corrupt",
        _write("reports/run/report.json", "[1, 2"),
        USAGE,
        "nodeval report: *reports/run/report.json: not a valid report.json*",
        run="nodeval report reports/run",
    ),
    Bad(
        "report-wrong-shape",
        _write("reports/run/report.json", json.dumps({"schema_version": "1", "cases": 3})),
        USAGE,
        "nodeval report: *reports/run/report.json: not a valid report.json*",
        run="nodeval report reports/run",
    ),
    Bad(
        "record-not-a-case",
        lambda root: None,
        USAGE,
        "nodeval record: scenarios/none: not a case directory*",
        run="nodeval record scenarios/none",
    ),
]


@pytest.mark.parametrize("bad", CORPUS, ids=[b.id for b in CORPUS])
def test_bad_input_gives_one_clean_error(
    bad: Bad,
    nodeval_project: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_case(
        nodeval_project.path / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
        tools=["shell"],
    )
    bad.breaks(nodeval_project.path)
    command = bad.run.split()
    if command[0] == "pytest":
        result = nodeval_project.runpytest(*command[1:])
        status, output = result.ret, result.stdout.str() + "\n" + result.stderr.str()
    else:
        from pytest_nodeval.cli import main

        monkeypatch.chdir(nodeval_project.path)
        status = main(command[1:])
        captured = capsys.readouterr()
        output = captured.out + "\n" + captured.err
    assert status == bad.status, output
    assert "Traceback" not in output and "During handling" not in output, output
    shown = [line for line in _without_short_summary(output) if _fnmatch(line, bad.says)]
    assert len(shown) == 1, f"expected one line like {bad.says!r}, found {len(shown)}:\n{output}"


def _without_short_summary(output: str) -> list[str]:
    """The lines of a run's output but pytest's short test summary.

    That section is pytest's index of the errors shown above it, one line per test, and on a
    CI machine (the CI variable set) pytest prints it untruncated, repeating our message.
    """
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if "short test summary info" in line:
            rest = lines[index + 1 :]
            ended = next((i for i, later in enumerate(rest) if later.startswith("=")), len(rest))
            return lines[:index] + rest[ended:]
    return lines


def _fnmatch(line: str, pattern: str) -> bool:
    from fnmatch import fnmatchcase

    return fnmatchcase(line, pattern)


def test_the_corpus_is_big_enough() -> None:
    assert len(CORPUS) + len(PROTOCOL) + len(SAMPLER) >= 60


# -- protocol requests and sampler settings: their own error shapes --------------------------

PROTOCOL = [
    (b"{not json", "malformed_json", "not valid JSON"),
    (b"", "malformed_json", "empty"),
    (json.dumps({"schema": 9, "case_dir": "x"}).encode(), "unknown_schema", "schema"),
    (json.dumps({"schema": 1}).encode(), "invalid_request", ""),
    (
        json.dumps({"schema": 1, "case_dir": "/nonexistent/case"}).encode(),
        "config_error",
        "/nonexistent/case",
    ),
    (
        json.dumps({"schema": 1, "case_dir": "x", "user_inptu": "hi"}).encode(),
        "invalid_request",
        "user_inptu",
    ),
]


@pytest.mark.parametrize(
    ("raw", "outcome", "says"), PROTOCOL, ids=[p[1] + str(i) for i, p in enumerate(PROTOCOL)]
)
def test_a_bad_protocol_request_gets_one_error_response(
    raw: bytes, outcome: str, says: str
) -> None:
    from pytest_nodeval.protocol.inspect_mode import EXIT_CODES, handle

    response, exit_code = handle(raw)
    assert exit_code == EXIT_CODES[outcome] and response.error is not None
    assert says in response.error.message and "Traceback" not in response.error.message


SAMPLER = [
    ({"rate": -0.1}, "rate must be a number from 0 to 1, got -0.1"),
    ({"rate": "half"}, "rate must be a number from 0 to 1"),
    ({"max_bytes": -5}, "max_bytes must be a positive number of bytes, got -5"),
    ({"queue_size": 1.5}, "queue_size must be a positive integer"),
]


@pytest.mark.parametrize(
    ("settings", "says"), SAMPLER, ids=[next(iter(s)) + str(i) for i, (s, _) in enumerate(SAMPLER)]
)
def test_bad_sampler_settings_name_the_setting(settings: dict[str, Any], says: str) -> None:
    from pytest_nodeval.errors import ConfigError
    from pytest_nodeval.sampling.sampler import SamplerSettings

    with pytest.raises(ConfigError) as raised:
        SamplerSettings(**settings)
    assert says in str(raised.value)


def test_a_golden_journal_over_nodeval_max_journal_bytes_is_refused_in_one_line(
    nodeval_project: pytest.Pytester,
) -> None:
    write_case(nodeval_project.path / "scenarios", "hello", script=ANSWER, inputs=["hi"])
    result = nodeval_project.runpytest("-o", "nodeval_max_journal_bytes=100")
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        ["*hello/journal/events.jsonl: *, more than the 100 B a golden journal may be*"]
    )
    assert "Traceback" not in result.stdout.str()
