"""The worked Inspect AI integration runs for real: `inspect eval` on examples/inspect_ai, offline.

`inspect eval` exits 0 even when samples fail, so the log's status and the scores are
what is checked. Proxies point at a closed loopback port and the tokenizer cache is an
empty directory, so any attempt to download something fails the run instead of
quietly succeeding on a machine that happens to be online.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

EXAMPLE = Path(__file__).parents[2] / "examples" / "inspect_ai" / "nodeval_task.py"
NO_NETWORK = "http://127.0.0.1:9"  # the discard port: nothing listens there


def offline_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HTTP_PROXY": NO_NETWORK,
        "HTTPS_PROXY": NO_NETWORK,
        "ALL_PROXY": NO_NETWORK,
        "http_proxy": NO_NETWORK,
        "https_proxy": NO_NETWORK,
        "NO_PROXY": "",
        "no_proxy": "",
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }


def test_inspect_eval_scores_the_engines_answers_offline(tmp_path: Path) -> None:
    (tmp_path / "tiktoken").mkdir()
    logs = tmp_path / "logs"
    # Inspect takes task files relative to the working directory.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "inspect_ai",
            "eval",
            EXAMPLE.name,
            "--display",
            "none",
            "--log-dir",
            str(logs),
        ],
        cwd=EXAMPLE.parent,
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    (log_file,) = logs.glob("*.eval")
    log = read_eval_log(str(log_file))

    assert log.status == "success", log.error
    assert log.eval.model == "mockllm/model"
    assert log.samples is not None and len(log.samples) == 4
    assert all(sample.error is None for sample in log.samples)
    scores = {
        sample.id: sample.scores["nodeval_response"] for sample in log.samples if sample.scores
    }
    assert {sample_id: score.value for sample_id, score in scores.items()} == {
        "capital": "C",
        "arithmetic": "C",
        "unknown": "C",
        "outage": "I",
    }
    assert scores["capital"].answer == "The capital of France is Paris."
    details = scores["capital"].metadata or {}
    assert (details["status"], details["exit_code"], details["session_id"]) == (
        "ok",
        0,
        "inspect-capital-1",
    )
    assert details["usage"]["output_tokens"] > 0 and details["latency_ms"] > 0
    assert (
        scores["outage"].explanation is not None
        and "provider_error" in scores["outage"].explanation
    )
    assert log.results is not None
    assert log.results.scores[0].metrics["accuracy"].value == pytest.approx(0.75)
    assert list((tmp_path / "tiktoken").iterdir()) == []  # no tokenizer was fetched
