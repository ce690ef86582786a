"""inspect-mode with a Gemini engine config: a missing key, and a case recorded against the fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import write_case
from .test_protocol import code_of, serve

GEMINI = {
    "name": "gemini",
    "model": "gemini-2.5-flash",
    "base_url": "fake",
    "max_retries": 0,
    "stream": True,
}


def test_a_missing_gemini_key_is_a_provider_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({"providers": [{"name": "gemini", "model": "gemini-2.5-flash"}]})
    )
    response = serve(config_path=str(config), user_input="hi")
    assert code_of(response) == "provider_error"
    assert "GEMINI_API_KEY" in response.error.message  # type: ignore[union-attr]


def test_a_gemini_case_records_against_the_fake_and_replays_offline(
    tmp_path: Path, block_network: Any
) -> None:
    case_dir = write_case(
        tmp_path,
        "gemini-capital",
        script=[],
        inputs=["Capital of France?"],
        tools=[],
        providers=[GEMINI],
        record=False,
    )
    (case_dir / "input" / "llm.yaml").write_text(
        yaml.safe_dump({"responses": [{"text": "Paris."}]})
    )
    recorded = serve(case_dir=str(case_dir), mode="record")
    assert recorded.status == "ok" and recorded.output == "Paris.", recorded.error
    attempts = block_network()
    replayed = serve(case_dir=str(case_dir))
    assert (
        replayed.status == "ok" and replayed.mode == "deterministic" and replayed.output == "Paris."
    )
    assert attempts == []
