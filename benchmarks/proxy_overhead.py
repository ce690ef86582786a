"""What the recording proxy (agent/proxy.py) adds to one model call of a program.

The same anthropic SDK client calls the fake LLM directly and through the proxy (record:
each exchange journaled to a file, as an attempt does), alternating call by call so load
lands on both alike. Prints the median per call of each and the difference.

    python benchmarks/proxy_overhead.py --calls 400
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anthropic

from pytest_nodeval.agent.proxy import RecordingProxy, program_env
from pytest_nodeval.journal.events import EngineInfo, JournalHeader, new_session_id, now_iso
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval_fakes.llm import LLMFake

MESSAGES = [{"role": "user", "content": "What is on my list? " * 20}]


def _call(client: anthropic.Anthropic) -> float:
    start = time.perf_counter()
    client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=MESSAGES)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per variant")
    parser.add_argument(
        "--no-journal-file",
        dest="journal",
        action="store_false",
        help="journal in memory only (the proxy's own cost, without the journal's writes)",
    )
    args = parser.parse_args()
    header = JournalHeader(
        session_id=new_session_id(),
        created_at=now_iso(),
        engine=EngineInfo(version="bench"),
        source="live",
    )
    with (
        LLMFake(
            {"responses": [{"text": "milk, eggs and bread " * 10}] * (args.calls * 2 + 20)}
        ) as fake,
        tempfile.TemporaryDirectory() as scratch,
    ):
        writer = JournalWriter(Path(scratch) / "journal" if args.journal else None, header)
        upstreams = dict.fromkeys(("anthropic", "openai", "gemini"), fake.url)
        with RecordingProxy(writer, None, upstreams=upstreams) as proxy:
            env = program_env(proxy.url)
            direct = anthropic.Anthropic(base_url=fake.url, api_key="k", max_retries=0)
            proxied = anthropic.Anthropic(
                base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"], max_retries=0
            )
            for client in (direct, proxied):  # warm up both connections
                for _ in range(10):
                    _call(client)
            times: dict[str, list[float]] = {"direct": [], "proxy": []}
            for index in range(args.calls * 2):  # one call each in turn
                name = "proxy" if index % 2 else "direct"
                times[name].append(_call(direct if name == "direct" else proxied))
        writer.close()
    direct_ms = statistics.median(times["direct"])
    proxy_ms = statistics.median(times["proxy"])
    print(f"calls per variant: {len(times['direct'])} / {len(times['proxy'])}")
    print(f"direct to the fake: median {direct_ms:.3f} ms per call")
    print(f"through the proxy:  median {proxy_ms:.3f} ms per call")
    print(f"proxy adds:         {proxy_ms - direct_ms:.3f} ms per call (target <= 1 ms)")


if __name__ == "__main__":
    main()
