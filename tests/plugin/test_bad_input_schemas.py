"""The shipped JSON Schemas refuse what the loader refuses (issue 30).

Every file the bad-input corpus (test_bad_input_corpus.py) breaks fails check-jsonschema, as
an editor or a CI job would run it, unless the loader refuses it for a reason no schema of
that one file can say: those entries are listed below with the reason. And a mistake is one
error naming the key, as the loader's message is, not one per member of a union.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_nodeval.case.schema_files import SHIPPED, USER_FILES

from ..conftest import write_case
from .test_bad_input_corpus import ANSWER, CORPUS, Bad

CASE_DIR = "scenarios/hello/"
REGEX = (
    "the loader compiles a Python regular expression; JSON Schema's `regex` format is "
    "ECMA-262, which refuses valid Python patterns such as (?i) or (?P<name>...)"
)
MISSING = "a file that is missing has nothing to validate"
JOURNAL = "events.jsonl is JSON lines (one event per line), not one document with a schema"
COMMAND_LINE = "a path on the command line that names nothing"

NOT_IN_A_SCHEMA = {
    "case-duplicate-id": "two case.yaml files giving one id: each is valid alone",
    "config-bad-regex": REGEX,
    "config-skills-missing": "the directory `skills:` names, beside the file",
    "config-skill-no-front-matter": "a SKILL.md without front matter: Markdown, no schema",
    "inputs-missing": MISSING,
    "inputs-answer-regex": REGEX,
    "assertions-missing": MISSING,
    "assertions-args-regex": REGEX,
    "assertions-where-regex": REGEX,
    "assertions-output-regex": REGEX,
    "assertions-unknown-tool": "a tool that input/config.yaml, another file, does not offer",
    "journal-empty": JOURNAL,
    "journal-blank": JOURNAL,
    "journal-torn-end": JOURNAL,
    "journal-no-end": JOURNAL,
    "journal-bad-line": JOURNAL,
    "journal-seq-order": JOURNAL,
    "journal-unknown-tool": JOURNAL,
    "journal-events-missing": MISSING,
    "journal-header-missing": MISSING,
    "baseline-missing": COMMAND_LINE,
    "baseline-command-missing": COMMAND_LINE,
    "report-missing": "a run directory without report.json (only summary.txt)",
    "record-not-a-case": COMMAND_LINE,
}
"""Corpus entries the schemas do not refuse, and why no schema could."""


def _schema_of(relative: str) -> str | None:
    if relative.startswith(CASE_DIR) and relative.removeprefix(CASE_DIR) in USER_FILES:
        return USER_FILES[relative.removeprefix(CASE_DIR)]
    if relative.startswith("scenarios/") and relative.endswith("/case.yaml"):
        return "case.schema.json"
    if relative.endswith("/journal/header.json"):
        return "journal-header.schema.json"
    if relative.startswith("reports/") and relative.endswith(".json"):
        return "report.schema.json"
    return None


def check_jsonschema(schema: str, files: list[Path]) -> dict[str, Any]:
    """check-jsonschema's JSON report on the files against one shipped schema."""
    # Imported so that a broken install fails the test instead of the subprocess's output.
    import check_jsonschema  # noqa: F401

    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "-o", "JSON", "--schemafile"]
        + [str(SHIPPED / schema), *map(str, files)],
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bool | None]]:
    """Each corpus entry's project as its test builds it -> the files it changes or removes,
    with whether check-jsonschema refuses each (None: removed, or no schema)."""
    base = tmp_path_factory.mktemp("base")
    write_case(
        base / "scenarios",
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
        tools=["shell"],
    )
    before = _files(base)
    changed: dict[str, dict[str, Path | None]] = {}
    by_schema: dict[str, list[Path]] = defaultdict(list)
    for bad in CORPUS:
        root = tmp_path_factory.mktemp(bad.id)
        shutil.copytree(base, root, dirs_exist_ok=True)
        bad.breaks(root)
        after = _files(root)
        changed[bad.id] = {rel: None for rel in before if rel not in after}
        for rel, content in after.items():
            if before.get(rel) != content:
                schema = _schema_of(rel)
                changed[bad.id][rel] = root / rel if schema else None
                if schema:
                    by_schema[schema].append(root / rel)
    refused: set[str] = set()
    for schema, files in by_schema.items():
        report = check_jsonschema(schema, files)
        refused |= {e["filename"] for e in report["errors"] + report.get("parse_errors", [])}
    return {
        entry: {rel: None if path is None else str(path) in refused for rel, path in files.items()}
        for entry, files in changed.items()
    }


@pytest.mark.parametrize("bad", CORPUS, ids=[b.id for b in CORPUS])
def test_the_schema_refuses_what_the_loader_refuses(
    bad: Bad, broken: dict[str, dict[str, bool | None]]
) -> None:
    files = broken[bad.id]
    if bad.id in NOT_IN_A_SCHEMA:
        # The list says only what is true: a schema that learns to refuse it takes it off.
        assert True not in files.values(), (
            f"the schemas now refuse {bad.id}; take it off NOT_IN_A_SCHEMA"
        )
        return
    assert files and None not in files.values(), (
        f"{bad.id} breaks {sorted(files)}: a file without a schema, or none; if no schema can "
        "refuse it, list it in NOT_IN_A_SCHEMA with the reason"
    )
    assert all(files.values()), f"check-jsonschema accepts {bad.id}'s {sorted(files)}"


def test_the_list_names_corpus_entries() -> None:
    assert set(NOT_IN_A_SCHEMA) <= {b.id for b in CORPUS}


CONFIG = "providers: [{name: mock, model: m, script: [{text: hi}]}]\n"
ONE_MISTAKE = [  # (schema, file, what the one error names: a key in its path or its message)
    pytest.param("assertions.schema.json", "- kind: max_turns\n  valu: 3\n", "valu", id="valu"),
    pytest.param(
        "assertions.schema.json",
        "assertions:\n- kind: tool_called\n  tol: shell\n",
        "tol",
        id="assertions-key-tol",
    ),
    pytest.param("case.schema.json", "id: Bad_ID\n", "id", id="id-Bad_ID"),
    pytest.param("case.schema.json", "id: hello-r2\n", "id", id="id-repeat-suffix"),
    pytest.param(
        "case.schema.json", "id: hello\nfreshness: 2 weeks\n", "freshness", id="freshness"
    ),
    pytest.param("config.schema.json", CONFIG + "tools: [shel]\n", "shel", id="tool-shel"),
    pytest.param(
        "config.schema.json", CONFIG + "tools: [{name: shel}]\n", "shel", id="tool-name-shel"
    ),
    pytest.param("config.schema.json", CONFIG + "tools: [web]\n", "web", id="web-no-section"),
    pytest.param(
        "config.schema.json",
        "providers: [{name: mock, model: m, scirpt: [{text: hi}]}]\n",
        "scirpt",
        id="mock-scirpt",
    ),
    pytest.param(
        "inputs.schema.json", "user: {kind: scripted, inptus: [hi]}\n", "inptus", id="inptus"
    ),
    pytest.param(
        "inputs.schema.json", "user: {kind: robot, inputs: [hi]}\n", "robot", id="user-robot"
    ),
]


@pytest.mark.parametrize(("schema", "text", "names"), ONE_MISTAKE)
def test_one_mistake_is_one_error_naming_it(
    schema: str, text: str, names: str, tmp_path: Path
) -> None:
    path = tmp_path / "file.yaml"
    path.write_text(text)
    report = check_jsonschema(schema, [path])
    assert not report.get("parse_errors") and len(report["errors"]) == 1, report
    (error,) = report["errors"]
    assert not error["has_sub_errors"], error
    assert names in error["path"] or repr(names) in error["message"], error


def test_an_unknown_assertion_kind_is_one_error_listing_the_kinds(tmp_path: Path) -> None:
    from typing import get_args

    from pytest_nodeval.checks.assertions import AssertionSpec

    path = tmp_path / "assertions.yaml"
    path.write_text("- kind: looks_good\n  text: hi\n")
    report = check_jsonschema("assertions.schema.json", [path])
    assert len(report["errors"]) == 1 and not report["errors"][0]["has_sub_errors"], report
    kinds = [
        get_args(m.model_fields["kind"].annotation)[0] for m in get_args(get_args(AssertionSpec)[0])
    ]
    message = report["errors"][0]["message"]
    assert all(repr(kind) in message for kind in kinds), message


def test_the_good_files_of_the_corpus_project_pass(tmp_path: Path) -> None:
    """The project every corpus entry breaks passes as written, so a refusal above is the
    entry's doing."""
    write_case(
        tmp_path,
        "hello",
        script=ANSWER,
        inputs=["hi"],
        assertions=[{"kind": "output_contains", "text": "hello"}],
        tools=["shell"],
    )
    files = {**USER_FILES, "journal/header.json": "journal-header.schema.json"}
    for relative, schema in files.items():
        path = tmp_path / "hello" / relative
        if path.exists():
            report = check_jsonschema(schema, [path])
            assert report["status"] == "ok", report


CONFIG_DATA = {"providers": [{"name": "mock", "model": "m", "script": [{"text": "hi"}]}]}
AGREE = [  # (schema, document): the loader and the schema give the same verdict on each
    *[
        ("case.schema.json", {"id": value})
        for value in ("hello", "a.b_c-d9", "Hello", "hello\n", "hello-r2", "hello-r", "-x", "héllo")
    ],
    *[
        ("case.schema.json", {"id": "x", "freshness": value})
        for value in ("30d", " 12w ", "6 m", "1y\n", "2 weeks", "30", "d", "3\u0663d", "-1d")
    ],
    *[
        ("case.schema.json", {"id": "x", "tags": [value]})
        for value in ("pr", "Slow_1", "-x", "not a marker", "pr\n", "1st")
    ],
    *[
        ("config.schema.json", {**CONFIG_DATA, "tools": ["web"], "web": {"allow": [value]}})
        for value in (
            "docs.example.com",
            "Docs.Example.COM:8080",
            "*.example.com",
            "[::1]:8123",
            "https://docs.example.com",
            "docs.example.com/x",
            "docs.example.com\n",
            "*.",
        )
    ],
    *[
        ("config.schema.json", {**CONFIG_DATA, "tools": [value], "mcp": {"servers": [server]}})
        for value, server in [
            ("mcp:files", {"name": "files", "url": "fake"}),
            ("mcp:", {"name": "files", "url": "fake"}),
            ("mcp:a b", {"name": "a b", "url": "fake"}),
            ("mcp:files", {"name": "files", "url": "ftp://x"}),
            ("shell", {"name": "files", "url": "https://mcp.example.com"}),
            ("shel", {"name": "files", "url": "fake"}),
        ]
    ],
    *[
        ("config.schema.json", {**CONFIG_DATA, **extra})
        for extra in (
            {"tools": ["composio:GITHUB_STAR"], "composio": {"user_id": "u", "base_url": "fake"}},
            {"tools": [{"name": "composio:"}], "composio": {"user_id": "u"}},
            {"composio": {"user_id": "u", "base_url": "api.composio.dev"}},
            {"providers": [{"name": "mock", "model": "m"}]},
            {"providers": [{"name": "openai", "model": "m", "script": [{"text": "hi"}]}]},
            {"providers": [{"name": "openai", "model": "m"}], "command": ["./agent"]},
            {"providers": [{"name": "openai", "model": "m"}], "command": ["./a"], "tools": []},
            {"command": ["./agent"]},
            {"stdio": "jsonl"},
            {"env": {"A": "1"}},
            {"env": {}},
        )
    ],
]


def test_the_loader_and_the_schema_agree_on_each_value(tmp_path: Path) -> None:
    from pydantic import BaseModel, ValidationError

    from pytest_nodeval.agent.config import EngineConfig
    from pytest_nodeval.case.directory import CaseSpec

    models: dict[str, type[BaseModel]] = {
        "case.schema.json": CaseSpec,
        "config.schema.json": EngineConfig,
    }
    by_schema: dict[str, list[Path]] = defaultdict(list)
    loader: dict[str, bool] = {}
    for index, (schema, document) in enumerate(AGREE):
        path = tmp_path / f"{index}.json"
        path.write_text(json.dumps(document))
        by_schema[schema].append(path)
        try:
            models[schema].model_validate(document)
            loader[str(path)] = True
        except ValidationError:
            loader[str(path)] = False
    schema_says: dict[str, bool] = {}
    for schema, files in by_schema.items():
        report = check_jsonschema(schema, files)
        refused = {e["filename"] for e in report["errors"] + report.get("parse_errors", [])}
        schema_says |= {str(path): str(path) not in refused for path in files}
    differ = [
        (document, "loader" if loader[str(tmp_path / f"{i}.json")] else "schema", "accepts")
        for i, (_, document) in enumerate(AGREE)
        if loader[str(tmp_path / f"{i}.json")] != schema_says[str(tmp_path / f"{i}.json")]
    ]
    assert not differ, differ
