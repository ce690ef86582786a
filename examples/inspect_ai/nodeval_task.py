"""Inspect AI evaluates pytest-nodeval's engine through `nodeval inspect-mode`.

The solver sends each sample's input to `nodeval inspect-mode` as a subprocess (one JSON
request on stdin) and keeps the JSON response; the scorer reads that response: a sample
is correct when the session ended "ok" and its output contains the target.

    inspect eval examples/inspect_ai/nodeval_task.py --display none

Everything runs offline. The engine uses its keyless mock provider (engine.yaml), and the
task binds Inspect's own `mockllm/model` with outputs that carry token usage: the agent
under test is nodeval, so nothing here calls Inspect's model, but if something did,
mockllm would count tokens with a tokenizer it downloads unless the output has usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolChoice, ToolInfo
from inspect_ai.util import subprocess

ENGINE_CONFIG = Path(__file__).with_name("engine.yaml")
# The interpreter running Inspect has pytest-nodeval installed; `["nodeval", "inspect-mode"]`
# works as well where the console script is on PATH.
NODEVAL_COMMAND = [sys.executable, "-m", "pytest_nodeval.cli", "inspect-mode"]
RESPONSE_KEY = "nodeval_response"

SAMPLES = [
    Sample(id="capital", input="What is the capital of France?", target="Paris"),
    Sample(id="arithmetic", input="What is 2 + 2?", target="4"),
    Sample(id="unknown", input="Who won the 2087 World Cup?", target="do not know"),
    Sample(id="outage", input="What is the capital of Peru during an outage?", target="Lima"),
]


@solver
def nodeval_agent(config_path: str = str(ENGINE_CONFIG), timeout_s: int = 120) -> Solver:
    """Run the engine once per sample through the inspect-mode protocol."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        request = {
            "schema": 1,
            "config_path": config_path,
            "user_input": state.input_text,
            "session_id": f"inspect-{state.sample_id}-{state.epoch}",
            "timeout_s": timeout_s,
            "include_events": False,
        }
        # The protocol's own deadline stops the engine; this one only guards the pipe.
        result = await subprocess(
            NODEVAL_COMMAND, input=json.dumps(request), timeout=timeout_s + 30
        )
        response = read_response(result.stdout, result.returncode, result.stderr)
        state.store.set(RESPONSE_KEY, response)
        state.output = ModelOutput.from_content(
            model="nodeval", content=response.get("output") or ""
        )
        return state

    return solve


def read_response(stdout: str, exit_code: int, stderr: str) -> dict[str, Any]:
    """Every run that reads its request answers with one JSON line, whatever happened."""
    try:
        response: dict[str, Any] = json.loads(stdout)
    except ValueError:
        raise RuntimeError(
            f"nodeval inspect-mode gave no response (exit status {exit_code}): {stderr[-2000:]}"
        ) from None
    return response


@scorer(metrics=[accuracy(), stderr()])
def nodeval_response() -> Scorer:
    """Correct when the session ended "ok" and its output contains the target."""

    async def score(state: TaskState, target: Target) -> Score:
        response: dict[str, Any] = state.store.get(RESPONSE_KEY) or {}
        output = response.get("output") or ""
        details = {
            k: response.get(k) for k in ("status", "exit_code", "session_id", "usage", "latency_ms")
        }
        if response.get("status") != "ok":
            error = response.get("error") or {}
            return Score(
                value=INCORRECT,
                answer=output,
                metadata=details,
                explanation=(
                    f"nodeval {response.get('status')}: {error.get('code')}: {error.get('message')}"
                ),
            )
        found = any(text.lower() in output.lower() for text in target)
        return Score(
            value=CORRECT if found else INCORRECT,
            answer=output,
            metadata=details,
            explanation=(
                f"{'found' if found else 'did not find'} {target.text!r} in the engine's answer"
            ),
        )

    return score


def output_with_usage(
    input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
) -> ModelOutput:
    """mockllm's default answer, with token usage so that no tokenizer is needed."""
    output = ModelOutput.from_content(
        model="mockllm/model", content="Default output from mockllm/model"
    )
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


@task
def nodeval_engine(config_path: str = str(ENGINE_CONFIG)) -> Task:
    return Task(
        dataset=SAMPLES,
        solver=nodeval_agent(config_path),
        scorer=nodeval_response(),
        model=get_model("mockllm/model", custom_outputs=output_with_usage, memoize=False),
    )
