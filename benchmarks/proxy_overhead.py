"""What the recording proxy (agent/proxy.py) adds to one model call of a program.

The same anthropic SDK client calls the fake LLM directly and through the proxy (record:
each exchange journaled to a file, as an attempt does), alternating call by call so load
lands on both alike. Prints the median per call of each and the difference, twice: with the
client in a process of its own, as a program is (the proxy and the fake share this one, as
they share pytest's), and with the client in this process too (one interpreter, one GIL for
all three: how this script measured before). Then replay: the proxy answers from a journal
recorded first, beside the same client calling the fake directly.

    python benchmarks/proxy_overhead.py --calls 400
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anthropic

from pytest_nodeval.agent.proxy import RecordingProxy, program_env
from pytest_nodeval.journal.events import EngineInfo, JournalHeader, new_session_id, now_iso
from pytest_nodeval.journal.writer import JournalWriter
from pytest_nodeval_fakes.llm import LLMFake

# A world runs its own python3 (Debian's, on its PATH); here a pyenv shim may come first.
PYTHON3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"
MESSAGES = [{"role": "user", "content": "What is on my list? " * 20}]


def _call(client: anthropic.Anthropic) -> float:
    start = time.perf_counter()
    client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=MESSAGES)
    return (time.perf_counter() - start) * 1000


def alternate(direct_url: str, proxy_url: str, calls: int) -> dict[str, list[float]]:
    """`calls` calls each to the fake directly and through the proxy, one each in turn."""
    direct = anthropic.Anthropic(base_url=direct_url, api_key="k", max_retries=0)
    proxied = anthropic.Anthropic(base_url=proxy_url, api_key="k", max_retries=0)
    for client in (direct, proxied):  # warm up both connections
        for _ in range(10):
            _call(client)
    times: dict[str, list[float]] = {"direct": [], "proxy": []}
    for index in range(calls * 2):
        name = "proxy" if index % 2 else "direct"
        times[name].append(_call(direct if name == "direct" else proxied))
    return times


def in_a_program(direct_url: str, proxy_url: str, calls: int) -> dict[str, list[float]]:
    """alternate() in a process of its own (this script again, with --program)."""
    argv = [sys.executable, __file__, "--program", direct_url, proxy_url, str(calls)]
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    times: dict[str, list[float]] = json.loads(done.stdout)
    return times


def replayed(
    fake_url: str, scratch: Path, header: JournalHeader, calls: int
) -> dict[str, list[float]]:
    """in_a_program() with the proxy in replay: `calls` exchanges (and the warm-up's) are
    recorded through a proxy first, then served from that journal by a proxy with its stash."""
    from pytest_nodeval.journal.reader import read_journal
    from pytest_nodeval.journal.replay import ReplayStash

    upstreams = dict.fromkeys(("anthropic", "openai", "gemini"), fake_url)
    golden = scratch / "golden"
    recording = JournalWriter(golden, header)
    with RecordingProxy(recording, None, upstreams=upstreams) as proxy:
        client = anthropic.Anthropic(
            base_url=program_env(proxy.url)["ANTHROPIC_BASE_URL"], api_key="k", max_retries=0
        )
        for _ in range(calls + 10):
            _call(client)
    recording.close()
    stash = ReplayStash(read_journal(golden, whole=True, lazy=True), case="bench")
    replaying = JournalWriter(scratch / "replayed", header.model_copy(update={"source": "replay"}))
    with RecordingProxy(replaying, stash, upstreams=upstreams) as proxy:
        times = in_a_program(fake_url, program_env(proxy.url)["ANTHROPIC_BASE_URL"], calls)
        if proxy.stopped is not None:
            raise SystemExit(f"the replay diverged: {proxy.stopped}")
    replaying.close()
    return times


def report(placement: str, times: dict[str, list[float]]) -> None:
    direct_ms = statistics.median(times["direct"])
    proxy_ms = statistics.median(times["proxy"])
    print(f"{placement}: calls per variant {len(times['direct'])} / {len(times['proxy'])}")
    print(f"  direct to the fake: median {direct_ms:.3f} ms per call")
    print(f"  through the proxy:  median {proxy_ms:.3f} ms per call")
    print(f"  proxy adds:         {proxy_ms - direct_ms:.3f} ms per call (target <= 1 ms)")


def start_costs(rounds: int) -> None:
    """An attempt's start beyond the program's: the proxy's start and stop (loopback and Unix
    socket), and the relay a sandboxed world runs before the program (here `true`), beside
    starting the program alone."""
    import json
    import subprocess

    relay = Path(__file__).parents[1] / "pytest_nodeval" / "runner" / "relay.py"
    header = JournalHeader(
        session_id=new_session_id(),
        created_at=now_iso(),
        engine=EngineInfo(version="b"),
        source="live",
    )
    costs: dict[str, list[float]] = {"proxy": [], "unix proxy": [], "true": [], "relay+true": []}
    with tempfile.TemporaryDirectory() as scratch:
        socket_path = Path(scratch) / "proxy.sock"
        plan = json.dumps({"socket": str(socket_path), "env": {}, "argv": ["true"]})
        for _ in range(rounds):
            for name, run in (
                ("proxy", lambda: RecordingProxy(JournalWriter(None, header), None).start().stop()),
                (
                    "unix proxy",
                    lambda: (
                        RecordingProxy(JournalWriter(None, header), None)
                        .start(unix_path=socket_path)
                        .stop()
                    ),
                ),
                ("true", lambda: subprocess.run(["true"], check=True)),
                (
                    "relay+true",
                    lambda: subprocess.run([PYTHON3, "-S", str(relay), plan], check=True),
                ),
            ):
                start = time.perf_counter()
                run()
                costs[name].append((time.perf_counter() - start) * 1000)
                if name == "unix proxy":
                    socket_path.unlink(missing_ok=True)

    for name, values in costs.items():
        print(f"start: {name:<11} median {statistics.median(values):.2f} ms")


def main() -> None:
    if sys.argv[1:2] == ["--program"]:  # the client half, in its own process
        direct_url, proxy_url, calls = sys.argv[2:5]
        print(json.dumps(alternate(direct_url, proxy_url, int(calls))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per variant")
    parser.add_argument("--starts", type=int, default=30, help="rounds of the start costs")
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
    answers = (args.calls * 2 + 20) * 3  # both placements and replay's, warm-up included
    with (
        LLMFake({"responses": [{"text": "milk, eggs and bread " * 10}] * answers}) as fake,
        tempfile.TemporaryDirectory() as scratch,
    ):
        writer = JournalWriter(Path(scratch) / "journal" if args.journal else None, header)
        upstreams = dict.fromkeys(("anthropic", "openai", "gemini"), fake.url)
        with RecordingProxy(writer, None, upstreams=upstreams) as proxy:
            proxy_url = program_env(proxy.url)["ANTHROPIC_BASE_URL"]
            report("program in its own process", in_a_program(fake.url, proxy_url, args.calls))
            report("program in this process", alternate(fake.url, proxy_url, args.calls))
        writer.close()
        replay_times = replayed(fake.url, Path(scratch), header, args.calls)
        report("replay, program in its own process", replay_times)
    start_costs(args.starts)


if __name__ == "__main__":
    main()
