"""The protocol through `handle()`: every outcome and its code, in process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.journal.reader import read_journal
from pytest_nodeval.protocol import inspect_mode
from pytest_nodeval.protocol.inspect_mode import EXIT_CODES, InspectResponse, handle

from ..conftest import write_case
from .conftest import check_response, request_bytes, write_config


def serve(**fields: Any) -> InspectResponse:
    response, exit_code = handle(request_bytes(**fields))
    check_response(response, exit_code)
    return response


def code_of(response: InspectResponse) -> str | None:
    return response.error.code if response.error else None


# -- requests refused before anything runs -------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"", "malformed_json"),
        (b"  \n", "malformed_json"),
        (b'{"schema": 1', "malformed_json"),
        (b'{"schema": 1} {"schema": 1}', "malformed_json"),
        (b"\xff\xfe{}", "malformed_json"),
        (b'{"schema": 1, "timeout_s": NaN}', "malformed_json"),
        (b'{"schema": 1, "schema": 1}', "malformed_json"),
        (b'{"schema": 1, "user_input": "\\ud800"}', "malformed_json"),
        (b"[" * 5000 + b"]" * 5000, "malformed_json"),
        (b"1" * 5000, "malformed_json"),
        (b"[]", "invalid_request"),
        (b'"hello"', "invalid_request"),
        (b"{}", "unknown_schema"),
        (b'{"schema": 2}', "unknown_schema"),
        (b'{"schema": "1"}', "unknown_schema"),
        (b'{"schema": true}', "unknown_schema"),
        (b'{"schema": 1.0}', "unknown_schema"),
        (b'{"schema": 1}', "invalid_request"),
    ],
)
def test_refused_requests_get_their_code(raw: bytes, code: str) -> None:
    response, exit_code = handle(raw)
    check_response(response, exit_code)
    assert code_of(response) == code
    assert exit_code == EXIT_CODES[code]
    assert response.session_id is None and response.events is None


def test_a_misspelt_field_is_named_with_the_valid_ones(config_path: Path) -> None:
    response = serve(config_path=str(config_path), user_inptu="hello")
    assert response.error is not None and response.error.code == "invalid_request"
    assert response.error.field == "user_inptu"
    assert "unknown field" in response.error.message and "user_input" in response.error.message


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        ({"timeout_s": "5"}, "timeout_s", "valid number"),
        ({"timeout_s": 0}, "timeout_s", "greater than 0"),
        ({"include_events": "yes"}, "include_events", "valid boolean"),
        ({"mode": "full"}, "mode", "'live'"),
        ({"session_id": "has space"}, "session_id", "pattern"),
        ({"inputs": ["a", 2], "user_input": None}, "inputs.1", "valid string"),
    ],
)
def test_wrong_values_name_the_field(
    config_path: Path, fields: dict[str, Any], field: str, text: str
) -> None:
    request = {"config_path": str(config_path), "user_input": "hi", **fields}
    response = serve(**{k: v for k, v in request.items() if v is not None})
    assert response.error is not None and response.error.code == "invalid_request"
    assert response.error.field == field
    assert text in response.error.message


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({}, "config_path"),
        ({"config_path": "c.yaml", "case_dir": "case", "user_input": "x"}, "case_dir"),
        ({"config_path": "c.yaml"}, "user_input"),
        ({"config_path": "c.yaml", "user_input": "x", "inputs": ["y"]}, "inputs"),
        ({"config_path": "c.yaml", "user_input": "x", "mode": "deterministic"}, "mode"),
        ({"case_dir": "case", "user_input": "x"}, "user_input"),
        ({"case_dir": "case", "inputs": ["x"]}, "inputs"),
    ],
)
def test_conflicting_fields_are_refused(fields: dict[str, Any], field: str) -> None:
    response = serve(**fields)
    assert code_of(response) == "invalid_request"
    assert response.error is not None and response.error.field == field


def test_missing_files_are_config_errors_found_without_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inspect_mode, "run_worker", _no_worker)
    response = serve(config_path=str(tmp_path / "missing.yaml"), user_input="hi", session_id="s-1")
    assert code_of(response) == "config_error" and response.error is not None
    assert response.error.field == "config_path"
    assert response.session_id == "s-1" and response.mode == "live"
    response = serve(case_dir=str(tmp_path))
    assert code_of(response) == "config_error" and "no case.yaml" in response.error.message  # type: ignore[union-attr]


def test_a_used_journal_dir_is_refused(
    config_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inspect_mode, "run_worker", _no_worker)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "events.jsonl").write_text("")
    response = serve(
        config_path=str(config_path), user_input="hi", journal_dir=str(tmp_path / "used")
    )
    assert code_of(response) == "invalid_request" and response.error.field == "journal_dir"  # type: ignore[union-attr]


def test_a_bug_becomes_an_internal_error_response(
    config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> Any:
        raise KeyError("something the code did not expect")

    monkeypatch.setattr(inspect_mode, "run_worker", broken)
    response = serve(config_path=str(config_path), user_input="hi")
    assert code_of(response) == "internal_error"
    assert response.exit_code == EXIT_CODES["internal_error"]
    assert "KeyError" in response.error.message  # type: ignore[union-attr]


def _no_worker(*args: Any) -> Any:
    raise AssertionError("no worker should start for this request")


# -- sessions (each starts a worker process) ------------------------------------------------


def test_a_live_run_from_a_config(config_path: Path) -> None:
    response = serve(config_path=str(config_path), user_input="What is the capital of France?")
    assert response.status == "ok" and response.exit_code == 0 and response.error is None
    assert response.output == "Paris is the capital of France."
    assert response.mode == "live" and response.session_status == "ok"
    assert response.usage is not None and response.usage.input_tokens > 0
    assert response.turns == 1 and response.llm_calls == 1 and response.tool_calls == 0
    assert response.latency_ms is not None and response.wall_ms >= response.latency_ms
    assert response.events is not None
    types = [e["type"] for e in response.events]
    assert types[0] == "session.start" and types[-1] == "session.end" and "io.output" in types
    assert response.journal_dir is None


def test_several_inputs_a_session_id_and_a_kept_journal(config_path: Path, tmp_path: Path) -> None:
    journal = tmp_path / "kept" / "journal"
    response = serve(
        config_path=str(config_path),
        inputs=["What is 2 + 2?", "And the capital of France?"],
        session_id="harness-42",
        journal_dir=str(journal),
        include_events=False,
    )
    assert response.status == "ok" and response.output == "Paris is the capital of France."
    assert response.events is None and response.turns == 2
    assert response.session_id == "harness-42"
    assert response.journal_dir == str(journal)
    kept = read_journal(journal)
    assert kept.header.session_id == "harness-42"
    assert [e.payload.text for e in kept.of_type("io.output")] == [
        "2 + 2 = 4.",
        "Paris is the capital of France.",
    ]


def test_a_session_that_hits_a_limit_failed_with_exit_1(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        script=[
            {"tool_calls": [{"name": "file", "args": {"op": "list", "path": "."}}]},
            {"text": "done"},
        ],
        tools=["file"],
        limits={"max_turns": 1},
    )
    response = serve(config_path=str(config), user_input="list the files")
    assert response.status == "failed" and response.exit_code == 1
    assert response.session_status == "limit"
    assert response.error is not None and response.error.code == "session_failed"
    assert "max_turns (1) reached" in response.error.message


def test_a_failing_provider_is_a_provider_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, script=[{"error": "overloaded"}])
    response = serve(config_path=str(config), user_input="hi")
    assert code_of(response) == "provider_error" and response.status == "error"
    assert response.session_status == "error"
    assert "overloaded" in response.error.message  # type: ignore[union-attr]


def test_a_missing_api_key_is_a_provider_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODEVAL_TEST_NO_SUCH_KEY", "")
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "providers": [
                    {
                        "name": "openai",
                        "model": "gpt-5-mini",
                        "api_key_env": "NODEVAL_TEST_NO_SUCH_KEY",
                    }
                ]
            }
        )
    )
    response = serve(config_path=str(config), user_input="hi")
    assert code_of(response) == "provider_error"
    assert "NODEVAL_TEST_NO_SUCH_KEY" in response.error.message  # type: ignore[union-attr]


def test_an_invalid_config_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("providers:\n  - {name: mock, model: m, scrip: []}\n")
    response = serve(config_path=str(config), user_input="hi")
    assert code_of(response) == "config_error" and response.error is not None
    assert response.error.field == "config_path" and "scrip: unknown key" in response.error.message


@pytest.fixture
def case_dir(tmp_path: Path) -> Path:
    return write_case(
        tmp_path / "cases",
        "capital",
        script=[{"text": "Paris."}],
        inputs=["Capital of France?"],
        tools=[],
    )


def test_a_case_is_replayed_by_default(case_dir: Path) -> None:
    response = serve(case_dir=str(case_dir))
    assert response.status == "ok" and response.mode == "deterministic"
    assert response.output == "Paris."
    recorded = read_journal(case_dir / "journal").of_type("session.end")[0]
    assert response.latency_ms == recorded.payload.duration_ms  # replay reports the recorded time


def test_a_changed_agent_is_a_replay_divergence(case_dir: Path) -> None:
    config = case_dir / "input" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["system_prompt"] = "You are someone else now."
    config.write_text(yaml.safe_dump(data))
    response = serve(case_dir=str(case_dir))
    assert code_of(response) == "replay_divergence" and response.status == "error"
    assert response.session_status == "divergence"
    assert "nodeval record" in response.error.message  # type: ignore[union-attr]


def test_record_mode_rewrites_the_case_journal(case_dir: Path) -> None:
    before = read_journal(case_dir / "journal").header.session_id
    response = serve(case_dir=str(case_dir), mode="record", session_id="rerecorded")
    assert response.status == "ok" and response.mode == "record"
    after = read_journal(case_dir / "journal").header.session_id
    assert before != after == "rerecorded"


def test_the_response_layout_is_the_models_field_order(config_path: Path) -> None:
    response = serve(config_path=str(config_path), user_input="hi", include_events=False)
    keys = list(json.loads(response.to_wire()))
    assert keys == [f.alias or name for name, f in InspectResponse.model_fields.items()]
    assert keys[0] == "schema"
