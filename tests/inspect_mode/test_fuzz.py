"""Whatever arrives on stdin, the answer is one valid response with a documented code.

Many examples go through `handle()` in process; a few go through the real command, which
is what a harness sees (each of those starts an interpreter).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_nodeval.protocol import inspect_mode
from pytest_nodeval.protocol.inspect_mode import EXIT_CODES, MAX_REQUEST_BYTES, handle

from .conftest import check_response, check_stdout, run_command

# Valid in shape, but the config does not exist: served without starting a worker.
TEMPLATE: dict[str, Any] = {
    "schema": 1,
    "config_path": "no-such-dir/config.yaml",
    "user_input": "hello",
    "inputs": None,
    "mode": "live",
    "session_id": "s-1",
    "timeout_s": 30,
    "journal_dir": None,
    "include_events": True,
}
VALID = json.dumps({k: v for k, v in TEMPLATE.items() if v is not None}).encode()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
# In process an example costs milliseconds, so there are many of them.
fuzz_settings = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(autouse=True)
def _no_worker_and_no_stray_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No fuzzed request may reach a session, and nothing may be written outside tmp_path."""
    monkeypatch.chdir(tmp_path)

    def refuse(*args: Any) -> Any:
        raise AssertionError("a fuzzed request reached the worker")

    monkeypatch.setattr(inspect_mode, "run_worker", refuse)


def serve(raw: bytes) -> str | None:
    response, exit_code = handle(raw)
    check_response(response, exit_code)
    code = response.error.code if response.error else None
    assert code != "internal_error", response.error
    return code


@fuzz_settings
@given(st.binary(max_size=2048))
@example(b"")
@example(b"\x00")
@example(b"\xef\xbb\xbf" + VALID)  # a UTF-8 byte-order mark is tolerated
def test_random_bytes(raw: bytes) -> None:
    serve(raw)


@fuzz_settings
@given(st.data())
def test_truncated_valid_requests_are_malformed(data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(VALID) - 1))
    assert serve(VALID[:cut]) == "malformed_json"


@fuzz_settings
@given(json_values)
def test_any_json_value(value: Any) -> None:
    code = serve(json.dumps(value).encode())
    if not isinstance(value, dict):
        assert code == "invalid_request"
    elif "schema" not in value:
        assert code == "unknown_schema"


@fuzz_settings
@given(st.sampled_from(sorted(TEMPLATE)), json_values)
def test_any_value_in_any_field(field: str, value: Any) -> None:
    request = {**TEMPLATE, field: value}
    code = serve(json.dumps({k: v for k, v in request.items() if v is not None}).encode())
    assert code in ("invalid_request", "unknown_schema", "config_error")


@fuzz_settings
@given(st.text(max_size=40).filter(lambda k: k not in TEMPLATE), json_values)
def test_unknown_fields_are_named(key: str, value: Any) -> None:
    response, _ = handle(
        json.dumps({**{k: v for k, v in TEMPLATE.items() if v is not None}, key: value}).encode()
    )
    assert response.error is not None and response.error.code == "invalid_request"
    assert response.error.field == key


@pytest.mark.parametrize("depth", [100, 999, 1000, 100_000])
def test_deep_nesting(depth: int) -> None:
    serve(b"[" * depth + b"]" * depth)
    serve(b'{"schema": 1, "inputs": ' + b"[" * depth + b"]" * depth + b"}")
    serve(b'{"a":' * depth + b"1" + b"}" * depth)


def test_huge_strings() -> None:
    huge = "x" * (4 * 2**20)
    assert serve(json.dumps({**json.loads(VALID), "user_input": huge}).encode()) == "config_error"
    assert serve(json.dumps({**json.loads(VALID), huge: 1}).encode()) == "invalid_request"
    assert serve(b'"' + b"a" * (MAX_REQUEST_BYTES + 1) + b'"') == "malformed_json"


# -- through the real command ----------------------------------------------------------------

stdin_inputs = st.one_of(
    st.binary(max_size=256),
    st.integers(min_value=0, max_value=len(VALID) - 1).map(lambda cut: VALID[:cut]),
    json_values.map(lambda v: json.dumps(v).encode()),
)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stdin_inputs)
def test_the_command_answers_anything_with_one_json_line(tmp_path: Path, raw: bytes) -> None:
    result = run_command(raw, cwd=tmp_path)
    response = check_stdout(result)
    assert response.error is not None and response.error.code != "internal_error"
    assert result.returncode in EXIT_CODES.values()


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[" * 100_000,
        b'{"schema": 1, "user_input": "' + b"y" * (MAX_REQUEST_BYTES + 10) + b'"}',
    ],
    ids=["empty", "deep", "too-large"],
)
def test_the_command_on_hostile_input(tmp_path: Path, raw: bytes) -> None:
    response = check_stdout(run_command(raw, cwd=tmp_path))
    assert response.error is not None and response.error.code == "malformed_json"
