"""What the shared rate limiter adds to one live LLM call (issue #16, point 2).

    python benchmarks/limits_overhead.py [--calls 200] [--rounds 5]

The same `anthropic` SDK call, made through `AgentContext.anthropic()` (the journaling
transport over the retrying one) against a local fakes.llm answering at once, in two
variants interleaved in one process: without `nodeval_limits`, and with a line that limits
requests, tokens and requests in flight (high enough never to make a call wait), so every
call takes and gives back a place in the SQLite file. Prints the median per call of each
round's median, and the difference: the limiter's cost per call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_nodeval.agent.adapter import AgentContext
from pytest_nodeval.agent.limits import RunLimits, parse_limits
from pytest_nodeval.agent.providers import side_wiring
from pytest_nodeval_fakes.llm import LLMFake

LINE = "anthropic: rpm=1000000 tpm=1000000000 inflight=64"


def _client(url: str, limits: RunLimits | None) -> Any:
    wiring = side_wiring()
    ctx = AgentContext(wiring.journal, user=None, limits=limits)  # type: ignore[arg-type]
    return ctx.anthropic(base_url=url, api_key="sk-bench")


def _per_call_ms(client: Any, calls: int) -> float:
    samples = []
    for i in range(calls):
        start = time.perf_counter()
        client.messages.create(
            model="claude-sonnet-4-6", max_tokens=8, messages=[{"role": "user", "content": f"q{i}"}]
        )
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        LLMFake({"rules": [{"respond": {"text": "ok"}}]}) as fake,
    ):
        limits = RunLimits(
            parse_limits([LINE], "benchmark"), Path(tmp) / "_shared" / "limits.sqlite"
        )
        plain, limited = _client(fake.url, None), _client(fake.url, limits)
        _per_call_ms(plain, 20), _per_call_ms(limited, 20)  # warm up both
        without, with_limits = [], []
        for _ in range(args.rounds):
            without.append(_per_call_ms(plain, args.calls))
            with_limits.append(_per_call_ms(limited, args.calls))
            fake.reset()  # keep the fake's request list short
    a, b = statistics.median(without), statistics.median(with_limits)
    print(f"per call, median of {args.rounds} rounds x {args.calls} calls:")
    print(f"  without nodeval_limits   {a:7.2f} ms")
    print(f"  with '{LINE}'   {b:7.2f} ms")
    print(
        f"  the limiter adds         {b - a:7.2f} ms per call "
        f"({b / a:.2f}x of a call to a local fake)"
    )


if __name__ == "__main__":
    main()
