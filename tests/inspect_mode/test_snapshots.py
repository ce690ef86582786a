"""The wire layout is the contract: golden files pin requests and responses byte for byte.

Volatile values (times, latencies, versions, digests, temporary paths) are replaced by
placeholders that name their type, so the files still pin every field's name, order and
type. A deliberate change of layout: run with NODEVAL_UPDATE_SNAPSHOTS=1, review the diff
of tests/inspect_mode/snapshots/, and bump the schema version if old readers would break.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nodeval.protocol.inspect_mode import InspectRequest, InspectResponse, handle

from ..conftest import write_case
from .conftest import check_response, request_bytes, write_config

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("NODEVAL_UPDATE_SNAPSHOTS") == "1"

# Keys whose values are replaced wherever they appear; the placeholder keeps the type.
# input_tokens: the mock provider estimates it from the text of the whole model request,
# which includes the session's remaining time, so it varies by a token or two.
VOLATILE = {
    "wall_ms",
    "latency_ms",
    "duration_ms",
    "ts",
    "version",
    "config_digest",
    "input_tokens",
}


def _placeholder(value: Any) -> Any:
    return None if value is None else f"<{type(value).__name__}>"


def normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _placeholder(v) if k in VOLATILE else normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def canonical(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def wire_snapshot(wire: bytes, tmp_path: Path) -> str:
    """A wire line with volatile values replaced, in the same byte layout."""
    text = wire.decode("utf-8")
    assert text.endswith("\n") and text.count("\n") == 1
    data = json.loads(text)
    # The snapshot is re-serialised, so first prove that our layout is the canonical one.
    assert canonical(data) == text[:-1]
    return canonical(normalise(data)).replace(str(tmp_path), "<tmp>") + "\n"


def assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), (
        f"{path} is missing; create it with NODEVAL_UPDATE_SNAPSHOTS=1 and review it"
    )
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        pytest.fail(
            f"{name} differs from the golden file (a wire-format change? if deliberate, "
            f"update with NODEVAL_UPDATE_SNAPSHOTS=1):\n" + _pretty_diff(expected, text),
            pytrace=False,
        )


def _pretty_diff(expected: str, actual: str) -> str:
    def lines(text: str) -> list[str]:
        try:
            return json.dumps(json.loads(text), indent=1, ensure_ascii=False).splitlines()
        except ValueError:
            return text.splitlines()

    return "\n".join(
        difflib.unified_diff(lines(expected), lines(actual), "golden", "now", lineterm="")
    )


def response_snapshot(
    name: str, raw: bytes, tmp_path: Path, *, keep_message: bool = True
) -> InspectResponse:
    """Serve a request and compare its response with the golden file `name`.

    keep_message=False replaces error.message too: for messages written by other modules
    (a replay diff), whose wording is theirs to change, not part of this protocol.
    """
    response, exit_code = handle(raw)
    check_response(response, exit_code)
    wire = response.to_wire()
    if not keep_message:
        assert response.error is not None
        wire = response.model_copy(
            update={"error": response.error.model_copy(update={"message": "<str>"})}
        ).to_wire()
    assert_snapshot(name, wire_snapshot(wire, tmp_path))
    return response


# -- the models' shape ----------------------------------------------------------------------


@pytest.mark.parametrize("model", [InspectRequest, InspectResponse], ids=["request", "response"])
def test_json_schema(model: type[InspectRequest] | type[InspectResponse]) -> None:
    schema = model.model_json_schema(by_alias=True)
    assert_snapshot(
        f"{model.__name__}.schema.json", json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    )


def test_request_layout() -> None:
    full = InspectRequest.model_validate(
        {
            "schema": 1,
            "config_path": "configs/coding.yaml",
            "case_dir": None,
            "user_input": None,
            "inputs": ["hello", "and then?"],
            "mode": "live",
            "session_id": "run-7.sample-3",
            "timeout_s": 120.0,
            "journal_dir": "out/journal",
            "include_events": False,
        }
    )
    minimal = InspectRequest.model_validate_json(
        b'{"schema": 1, "config_path": "configs/coding.yaml", "user_input": "hello"}'
    )
    text = "".join(m.model_dump_json(by_alias=True) + "\n" for m in (full, minimal))
    assert_snapshot("request.jsonl", text)


# -- responses, one per outcome -------------------------------------------------------------


def test_response_ok(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    response = response_snapshot(
        "response_ok.json",
        request_bytes(
            config_path=str(config),
            user_input="What is the capital of France?",
            session_id="snap-ok",
        ),
        tmp_path,
    )
    assert response.status == "ok"


def test_response_ok_with_kept_journal(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    response_snapshot(
        "response_ok_journal.json",
        request_bytes(
            config_path=str(config),
            inputs=["What is 2 + 2?", "Thanks"],
            session_id="snap-journal",
            journal_dir=str(tmp_path / "journal"),
            include_events=False,
        ),
        tmp_path,
    )


def test_response_session_failed(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        script=[
            {"tool_calls": [{"name": "file", "args": {"op": "list", "path": "."}}]},
            {"text": "done"},
        ],
        tools=["file"],
        limits={"max_turns": 1},
    )
    response_snapshot(
        "response_session_failed.json",
        request_bytes(
            config_path=str(config),
            user_input="List the files.",
            session_id="snap-limit",
            include_events=False,
        ),
        tmp_path,
    )


def test_response_provider_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, script=[{"error": "overloaded"}])
    response_snapshot(
        "response_provider_error.json",
        request_bytes(
            config_path=str(config),
            user_input="hi",
            session_id="snap-provider",
            include_events=False,
        ),
        tmp_path,
    )


def test_response_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    response_snapshot(
        "response_config_error.json",
        request_bytes(config_path="missing.yaml", user_input="hi", session_id="snap-config"),
        tmp_path,
    )


def test_response_replay_divergence(tmp_path: Path) -> None:
    case = write_case(
        tmp_path, "capital", script=[{"text": "Paris."}], inputs=["Capital of France?"], tools=[]
    )
    config = case / "input" / "config.yaml"
    config.write_text(
        yaml.safe_dump({**yaml.safe_load(config.read_text()), "system_prompt": "Changed."})
    )
    response = response_snapshot(
        "response_replay_divergence.json",
        request_bytes(case_dir=str(case), session_id="snap-divergence", include_events=False),
        tmp_path,
        keep_message=False,
    )
    assert response.error is not None and "at system: recorded" in response.error.message


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("malformed_json", b'{"schema": 1, "config_path": '),
        ("unknown_schema", b'{"schema": 2, "config_path": "c.yaml", "user_input": "hi"}'),
        ("invalid_request", b'{"schema": 1, "config_path": "c.yaml", "user_inptu": "hi"}'),
    ],
)
def test_response_refused(name: str, raw: bytes, tmp_path: Path) -> None:
    response_snapshot(f"response_{name}.json", raw, tmp_path)
