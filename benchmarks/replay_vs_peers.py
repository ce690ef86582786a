"""Replay against its peers, in one process and one run: the SDK floor, this project, vcrpy.

    python benchmarks/replay_vs_peers.py                     # in-process figures only
    python benchmarks/replay_vs_peers.py --suite 100 1000    # + pytest runs of N generated cases
    python benchmarks/replay_vs_peers.py --suite 10000 --workers 2
    python benchmarks/replay_vs_peers.py --suite-only --suite 100 --suite-runs 3  # no vcrpy needed
    python benchmarks/replay_vs_peers.py --frameworks-only  # LangGraph, OpenAI Agents SDK

In-process (medians of interleaved rounds, so load on the machine hits every variant):

* **SDK floor**: the 20 recorded requests of one session (10 user turns, 20 anthropic calls,
  10 shell calls; requests grow to ~40 KB) sent with `client.messages.create(**body)`, one
  client per session, answered from memory by an injected `httpx2.MockTransport`.
* **nodeval replay**: `run_case(..., mode="deterministic")` on the recorded case: the engine,
  the replay transport, the observed journal, the real SDK.
* **nodeval replay, mock provider**: the same conversation with the keyless `mock` provider.
* **nodeval replay, journal files unwritten** (a diagnostic, not a way to run): the replay
  above with the writer's file writes switched off for the session (its directory is still
  made, its events kept in memory): the difference with the replay is what writing the
  observed journal's two files (~230 KB here) costs, most of it in the kernel.
* **the journal's files alone** (a probe of the file system, not of nodeval): the file
  operations an observed journal makes (its directory, header.json through a temporary file,
  events.jsonl written in one piece), with the bytes of one replayed session's journal, timed
  in the same rounds. On a VM's disk they cost from ~0.15 to ~1.3 ms within minutes (seen on
  2026-12-04: after many deletions, creating a file took up to 10 x longer for several
  minutes), so a replay figure is read beside this one. One cause is known: ext4 without a
  journal (as on the VMs measured here) skips, when it allocates an inode, those freed in the
  last minute (six while their inode table block is unwritten), reading each one; after
  thousands of deletions, creating a file or directory costs several times more. So this
  script deletes its files when it ends, unless `--keep-in DIR` keeps them there: a series of
  runs deletes DIR after the last, and starts on a disk with no deletion in the last minutes.
* **vcrpy** 9.4 (a benchmark-only dependency, `pip install vcrpy`): the same 20 exchanges
  recorded to a cassette through the same SDK, replayed with `record_mode="none"` and its
  default matchers; once with the client built as the floor builds it (an injected
  transport, which vcrpy patches), once with a fresh default client per test (what a test
  usually does: its SSL context costs ~24 ms), once with one client (built as the floor
  builds it) reused by every session of the process.

Each variant is timed as wall-clock and as the process's CPU time per session
(`cpu_per_session_ms`: equal to the wall-clock one when nothing waits), with the kernel's part
of it summed over each round (`system_per_session_ms`: file creation and writes, mostly).

`--tree DIR` measures another checkout's pytest_nodeval with this script (run it beside a
run without it to compare revisions).

With `--frameworks` (`--frameworks-only`: without the figures above, so without vcrpy), two
agents written as their frameworks' docs write them, each session 10 model calls (a tool
called nine times in a row, then the answer), the tool `@pytest_nodeval.tool` under the
framework's own decorator; needs the frameworks extra (`pip install -e '.[frameworks]'`):

* **LangGraph**: langchain's `create_agent(ChatAnthropic(model="claude-sonnet-4-6"), tools=[...])`.
* **OpenAI Agents SDK**: `Agent(name=..., model="gpt-4.1-mini", tools=[...])` + `Runner.run_sync`.

For each, the **framework's floor** (the same agent, no nodeval attempt, its SDK client
answered from memory by an `httpx2.MockTransport` with the recorded responses) against
**nodeval replay** (`run_agent_case(..., mode="deterministic")` of a journal recorded once
against fakes.llm, with no client handed over). Target: replay <= 1.2 x floor + 1 ms per call.

With `--suite N...`: N generated mock-provider cases (20 LLM + 10 tool calls each) in a fresh
project, run by `pytest -p no:cacheprovider` in subprocesses: collection per case
(`--collect-only`, minus a one-case run), the whole run per case, each as wall and as CPU time
(user + system of pytest and its workers; medians of `--suite-runs`), and the peak RSS of the
largest process and of each one (the controller and every xdist worker).
"""

from __future__ import annotations

import argparse
import http.server
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from replay_bench import PADDING, _median_ms, make_case  # noqa: E402

if "--tree" in sys.argv:  # another checkout's pytest_nodeval (replay_bench put ROOT first)
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()))

TURNS = 10


# -- the recorded traffic -----------------------------------------------------------------


def recorded_exchanges(case_dir: Path) -> tuple[list[dict[str, Any]], list[bytes]]:
    from pytest_nodeval.journal.reader import read_journal

    events = read_journal(case_dir / "journal").events
    requests = [e.payload.body for e in events if e.type == "llm.request"]
    responses = [json.dumps(e.payload.body).encode() for e in events if e.type == "llm.response"]
    assert len(requests) == len(responses) == 2 * TURNS
    return requests, responses


def sdk_floor_session(
    requests: list[dict[str, Any]], responses: list[bytes], base_url: str
) -> None:
    """The SDK floor, one session: the recorded requests sent with `messages.create`, one client
    per session, answered from memory by an injected `httpx2.MockTransport`."""
    import httpx2

    answers = iter(responses)
    client = mock_transport_client(
        base_url,
        lambda request: httpx2.Response(
            200, content=next(answers), headers={"content-type": "application/json"}
        ),
    )
    for body in requests:
        client.messages.create(**body)


def mock_transport_client(base_url: str, answer: Callable[[Any], Any]) -> Any:
    """An anthropic client whose requests `answer` handles (an `httpx2.MockTransport`)."""
    import anthropic
    import httpx2

    return anthropic.Anthropic(
        api_key="k",
        base_url=base_url,
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )


def mock_case(directory: Path, turns: int = TURNS) -> Path:
    """The same conversation shape with the keyless mock provider (no SDK), recorded."""
    script: list[dict[str, Any]] = []
    for turn in range(turns):
        script.append({"tool_calls": [{"name": "shell", "args": {"command": f"echo step {turn}"}}]})
        script.append({"text": f"Step {turn} done. {PADDING}"})
    (directory / "input").mkdir(parents=True)
    (directory / "case.yaml").write_text(yaml.safe_dump({"id": directory.name, "tags": ["bench"]}))
    (directory / "input" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "providers": [{"name": "mock", "model": "mock-1", "script": script}],
                "system_prompt": "You are a careful ops assistant.",
                "tools": ["shell"],
                "limits": {"max_turns": 2 * turns + 1},
            }
        )
    )
    (directory / "input" / "inputs.yaml").write_text(
        yaml.safe_dump(
            {
                "user": {
                    "kind": "scripted",
                    "inputs": [f"Please run step {t}." for t in range(turns)],
                }
            }
        )
    )
    (directory / "assertions.yaml").write_text(
        yaml.safe_dump([{"kind": "tool_called", "tool": "shell", "times": turns}])
    )
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    observed = run_case(
        load_case(directory),
        AttemptSettings(mode="record", world_backend="local"),
        Path(tempfile.mkdtemp()) / "j",
    )
    assert observed.status == "ok", observed.metrics()
    return directory


class _Answers(http.server.BaseHTTPRequestHandler):
    """Serves the recorded responses in order: what vcrpy records its cassette from."""

    answers: list[bytes] = []
    served = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = _Answers.answers[_Answers.served % len(_Answers.answers)]
        _Answers.served += 1
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def record_cassette(requests: list[dict[str, Any]], responses: list[bytes], cassette: Path) -> str:
    """Record the exchanges through the real SDK and httpx2's transport; returns the base URL."""
    import anthropic
    import vcr

    _Answers.answers, _Answers.served = responses, 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with vcr.use_cassette(str(cassette), record_mode="all"):
            client = anthropic.Anthropic(api_key="k", base_url=base_url, max_retries=0)
            for body in requests:
                client.messages.create(**body)
    finally:
        server.shutdown()
    return base_url


# -- in-process figures ---------------------------------------------------------------------


def in_process(runs: int, rounds: int, keep: Path | None = None) -> dict[str, Any]:
    import anthropic
    import httpx2
    import vcr

    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_case

    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="nodeval-peers-", dir=keep))
    sdk_case = load_case(make_case(work / "sdk-case", TURNS))
    plain_case = load_case(mock_case(work / "mock-case"))
    requests, responses = recorded_exchanges(sdk_case.directory)
    cassette = work / "cassette.yaml"
    base_url = record_cassette(requests, responses, cassette)

    def floor() -> None:
        sdk_floor_session(requests, responses, base_url)

    from pytest_nodeval.journal.writer import write_atomic

    sample = work / "observed-sample"
    run_case(sdk_case, AttemptSettings(mode="deterministic"), sample)
    header_text = (sample / "header.json").read_text()
    events_bytes = (sample / "events.jsonl").read_bytes()

    sessions = iter(range(1_000_000))

    def replay(case: Any) -> Callable[[], None]:
        def run() -> None:
            # A new directory per session, as every attempt of a pytest run has its own.
            journal = work / "observed" / str(next(sessions))
            observed = run_case(case, AttemptSettings(mode="deterministic"), journal)
            assert observed.divergence is None and observed.status == "ok", observed.metrics()

        return run

    def unwritten(run: Callable[[], None]) -> Callable[[], None]:
        from pytest_nodeval.journal.writer import JournalWriter

        def session() -> None:
            saved = JournalWriter._write_pending, JournalWriter.close
            JournalWriter._write_pending = JournalWriter.close = lambda self: None  # type: ignore[method-assign]
            try:
                run()
            finally:
                JournalWriter._write_pending, JournalWriter.close = saved  # type: ignore[method-assign]

        return session

    def journal_files_alone() -> None:
        # What JournalWriter does with a replayed session's files, with that session's bytes.
        directory = work / "probe" / str(next(sessions))
        directory.mkdir(parents=True)
        write_atomic(directory / "header.json", header_text, durable=False, make_parent=False)
        with open(directory / "events.jsonl", "wb") as events:
            events.write(events_bytes)

    reused: list[Any] = []

    def vcrpy_reused() -> None:
        # One client for the whole process, as a suite whose fixture builds it once would.
        if not reused:
            transport = httpx2.MockTransport(lambda request: httpx2.Response(500))
            reused.append(
                anthropic.Anthropic(
                    api_key="k",
                    base_url=base_url,
                    max_retries=0,
                    http_client=httpx2.Client(transport=transport),
                )
            )
        with vcr.use_cassette(str(cassette), record_mode="none"):
            for body in requests:
                reused[0].messages.create(**body)

    def vcrpy(fresh_client: bool) -> Callable[[], None]:
        def run() -> None:
            with vcr.use_cassette(str(cassette), record_mode="none"):
                if fresh_client:  # what a test usually does
                    client = anthropic.Anthropic(api_key="k", base_url=base_url, max_retries=0)
                else:  # built as the floor builds it; vcrpy patches the mock transport
                    client = mock_transport_client(base_url, lambda _: httpx2.Response(500))
                for body in requests:
                    client.messages.create(**body)

        return run

    variants = {
        "sdk_floor": floor,
        "nodeval_replay": replay(sdk_case),
        "nodeval_replay_mock": replay(plain_case),
        "nodeval_replay_unwritten": unwritten(replay(sdk_case)),
        "vcrpy_injected_client": vcrpy(False),
        "vcrpy_fresh_client": vcrpy(True),
        "vcrpy_reused_client": vcrpy_reused,
        "journal_files_alone": journal_files_alone,
    }
    for fn in variants.values():  # warm up: imports, caches, the first parse of each journal
        for _ in range(3):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    cpu_samples: dict[str, list[float]] = {name: [] for name in variants}
    system_samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):  # interleaved, so drift on the machine hits every variant
        for name, fn in variants.items():
            wall, cpu, system = _timed_ms(fn, runs)  # warmed up above
            samples[name].append(wall)
            cpu_samples[name].append(cpu)
            system_samples[name].append(system)
    ms = {name: round(statistics.median(values), 2) for name, values in samples.items()}
    cpu_ms = {name: round(statistics.median(values), 2) for name, values in cpu_samples.items()}
    system_ms = {name: round(statistics.median(v), 2) for name, v in system_samples.items()}
    if keep is None:  # the observed journals: ~230 KB a session
        shutil.rmtree(work, ignore_errors=True)
    floor_ms, ours = ms["sdk_floor"], ms["nodeval_replay"]
    calls = len(requests)
    return {
        "per_session_ms": ms,
        "replay_over_floor": round(ours / floor_ms, 2),
        "goal_replay_ms": round(1.15 * floor_ms + 1.0, 2),
        "overhead_per_llm_call_ms": round((ours - floor_ms) / calls, 3),
        "journal_files_ms": round(ours - ms["nodeval_replay_unwritten"], 2),
        "journal_files_alone_ms": ms["journal_files_alone"],
        "vcrpy_fresh_over_replay": round(ms["vcrpy_fresh_client"] / ours, 2),
        "vcrpy_injected_over_replay": round(ms["vcrpy_injected_client"] / ours, 2),
        "vcrpy_reused_over_replay": round(ms["vcrpy_reused_client"] / ours, 2),
        # The process's CPU time per session (user and system): the wall-clock figures less
        # any wait (on the disk, on other processes); and the kernel's part of it.
        "cpu_per_session_ms": cpu_ms,
        "system_per_session_ms": system_ms,
        "load_average": os.getloadavg()[0],
    }


def _timed_ms(fn: Callable[[], None], runs: int) -> tuple[float, float, float]:
    """The median wall-clock and process CPU time of `runs` calls of `fn`, and their mean
    system time, in ms. The kernel splits CPU time into user and system a tick at a time, so
    the split means something only summed over many calls."""
    wall, cpu = [], []
    system_start = resource.getrusage(resource.RUSAGE_SELF).ru_stime
    for _ in range(runs):
        wall_start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
        fn()
        cpu.append((time.process_time_ns() - cpu_start) / 1e6)
        wall.append((time.perf_counter_ns() - wall_start) / 1e6)
    system = (resource.getrusage(resource.RUSAGE_SELF).ru_stime - system_start) * 1000 / runs
    return statistics.median(wall), statistics.median(cpu), system


# -- framework agents ------------------------------------------------------------------------

FRAMEWORK_CALLS = 10
"""Model calls per framework session: the tool nine times in a row, then the answer."""
FRAMEWORK_INPUT = "Run the plan."
FRAMEWORK_ANSWER = "All nine steps done."
FRAMEWORK_SCRIPT = {
    "rules": [
        {
            "respond": {"tool_calls": [{"name": "lookup", "args": {"step": 1}}]},
            "times": FRAMEWORK_CALLS - 1,
        },
        {"respond": {"text": FRAMEWORK_ANSWER}},
    ]
}
FRAMEWORK_MODULES = {
    "langgraph": ("langchain", "langchain_anthropic", "langgraph", "anthropic"),
    "openai_agents": ("agents", "openai"),
}


def lookup(step: int) -> str:
    """Look up one step of the plan."""
    return f"step {step}: ok"


def _answering(responses: list[bytes]) -> Any:
    """An httpx2.MockTransport answering the recorded responses in order (the floor's)."""
    import httpx2

    answers = iter(responses)
    return httpx2.MockTransport(
        lambda request: httpx2.Response(
            200, content=next(answers), headers={"content-type": "application/json"}
        )
    )


def langgraph_agent(floor: list[bytes] | None = None) -> Callable[[Any], None]:
    """langchain's `create_agent` (a LangGraph graph) over ChatAnthropic, as its docs write it.

    With `floor`, ChatAnthropic's client is one built as ChatAnthropic builds its own (the
    same parameters) over a MockTransport serving those responses: ChatAnthropic takes no
    client or transport, so the benchmark fills its cached `_client` before the first call.
    """
    from langchain.agents import create_agent
    from langchain_anthropic import ChatAnthropic
    from langchain_core.tools import tool as lc_tool

    from pytest_nodeval import tool

    lookup_tool = lc_tool(tool(lookup))

    def agent(ctx: Any) -> None:
        model = ChatAnthropic(model="claude-sonnet-4-6")
        if floor is not None:
            import anthropic
            import httpx2

            params = {**model._client_params, "api_key": "k"}
            http_client = httpx2.Client(transport=_answering(floor))
            model.__dict__["_client"] = anthropic.Anthropic(**params, http_client=http_client)
        graph = create_agent(model, tools=[lookup_tool], system_prompt="You follow the plan.")
        for text in ctx.inputs():
            state = graph.invoke({"messages": [{"role": "user", "content": text}]})
            ctx.output(state["messages"][-1].content)

    return agent


def openai_agents_agent(floor: list[bytes] | None = None) -> Callable[[Any], None]:
    """The OpenAI Agents SDK's `Agent` + `Runner.run_sync`, as its docs write it.

    With `floor`, the agent's model is `OpenAIResponsesModel` over an `AsyncOpenAI` client
    whose httpx2 client sends to a MockTransport serving those responses.
    """
    from agents import Agent, Runner, function_tool

    from pytest_nodeval import tool

    lookup_tool = function_tool(tool(lookup))

    def agent(ctx: Any) -> None:
        model: Any = "gpt-4.1-mini"
        if floor is not None:
            import httpx2
            from agents import OpenAIResponsesModel
            from openai import AsyncOpenAI

            http_client = httpx2.AsyncClient(transport=_answering(floor))
            client = AsyncOpenAI(api_key="k", max_retries=0, http_client=http_client)
            model = OpenAIResponsesModel(model="gpt-4.1-mini", openai_client=client)
        assistant = Agent(
            name="Planner", instructions="You follow the plan.", model=model, tools=[lookup_tool]
        )
        for text in ctx.inputs():
            ctx.output(Runner.run_sync(assistant, text).final_output)

    return agent


FRAMEWORK_AGENTS = {"langgraph": langgraph_agent, "openai_agents": openai_agents_agent}


class _FloorContext:
    """What the floor's agent is given instead of an AgentContext: the input, and its output."""

    def __init__(self) -> None:
        self.outputs: list[str] = []

    def inputs(self) -> list[str]:
        return [FRAMEWORK_INPUT]

    def output(self, text: str) -> None:
        self.outputs.append(text)


def framework_case(directory: Path, make_agent: Callable[..., Any]) -> list[bytes]:
    """Record the framework's agent once against fakes.llm; returns the recorded responses."""
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.journal.reader import read_journal
    from pytest_nodeval.runner.session import AttemptSettings, run_agent_case
    from pytest_nodeval_fakes.llm import LLMFake

    (directory / "input").mkdir(parents=True)
    (directory / "case.yaml").write_text(yaml.safe_dump({"id": directory.name, "tags": ["bench"]}))
    (directory / "input" / "inputs.yaml").write_text(
        yaml.safe_dump({"user": {"kind": "scripted", "inputs": [FRAMEWORK_INPUT]}})
    )
    (directory / "assertions.yaml").write_text(
        yaml.safe_dump([{"kind": "tool_called", "tool": "lookup", "times": FRAMEWORK_CALLS - 1}])
    )
    with LLMFake(FRAMEWORK_SCRIPT) as fake:
        observed = run_agent_case(
            make_agent(),
            load_case(directory),
            AttemptSettings(mode="record"),
            Path(tempfile.mkdtemp()) / "j",
            fakes={"llm": fake},
        )
    assert observed.status == "ok" and observed.output == FRAMEWORK_ANSWER, observed.metrics()
    events = read_journal(directory / "journal").events
    responses = [json.dumps(e.payload.body).encode() for e in events if e.type == "llm.response"]
    results = [e.payload for e in events if e.type == "tool.result"]
    assert len(responses) == FRAMEWORK_CALLS, len(responses)
    assert [r.result for r in results if r.ok] == [lookup(1)] * (FRAMEWORK_CALLS - 1), results
    return responses


def frameworks(runs: int, rounds: int) -> dict[str, Any]:
    """Each framework's floor against nodeval's replay of the same agent, interleaved."""
    from pytest_nodeval.case.directory import load_case
    from pytest_nodeval.runner.session import AttemptSettings, run_agent_case

    skipped = {
        name: f"not installed: {', '.join(missing)} (pip install -e '.[frameworks]')"
        for name, modules in FRAMEWORK_MODULES.items()
        if (missing := [m for m in modules if importlib.util.find_spec(m) is None])
    }
    for name, reason in skipped.items():
        print(f"frameworks: {name} skipped, {reason}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="nodeval-frameworks-"))
    sessions = iter(range(1_000_000))

    def floor(make_agent: Callable[..., Any], responses: list[bytes]) -> Callable[[], None]:
        def run() -> None:
            ctx = _FloorContext()
            make_agent(responses)(ctx)
            assert ctx.outputs == [FRAMEWORK_ANSWER], ctx.outputs

        return run

    def replay(make_agent: Callable[..., Any], case: Any) -> Callable[[], None]:
        def run() -> None:
            journal = work / "observed" / str(next(sessions))
            observed = run_agent_case(
                make_agent(), case, AttemptSettings(mode="deterministic"), journal
            )
            assert observed.divergence is None and observed.status == "ok", observed.metrics()
            assert observed.output == FRAMEWORK_ANSWER, observed.output

        return run

    variants: dict[str, Callable[[], None]] = {}
    for name, make_agent in FRAMEWORK_AGENTS.items():
        if name in skipped:
            continue
        responses = framework_case(work / name, make_agent)
        variants[f"{name}_floor"] = floor(make_agent, responses)
        variants[f"{name}_replay"] = replay(make_agent, load_case(work / name))
    if not variants:
        return {"skipped": skipped}
    for fn in variants.values():  # warm up: imports, caches, the first parse of each journal
        for _ in range(3):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    for _ in range(rounds):  # interleaved, so drift on the machine hits every variant
        for name, fn in order:
            samples[name].append(_median_ms(fn, runs, warmup=0))
        order.reverse()  # and each goes first as often, so neither inherits the other's garbage
    ms = {name: round(statistics.median(values), 2) for name, values in samples.items()}
    result: dict[str, Any] = {"per_session_ms": ms}
    for name in FRAMEWORK_AGENTS:
        if name in skipped:
            continue
        floor_ms, ours = ms[f"{name}_floor"], ms[f"{name}_replay"]
        target = round(1.2 * floor_ms + 1.0 * FRAMEWORK_CALLS, 2)
        result[name] = {
            "floor_ms": floor_ms,
            "replay_ms": ours,
            "replay_over_floor": round(ours / floor_ms, 2),
            # Each round's replay over the same round's floor, run next to it: steadier on a
            # loaded machine than the ratio of the two medians.
            "replay_over_floor_by_round": round(
                statistics.median(
                    r / f
                    for r, f in zip(
                        samples[f"{name}_replay"], samples[f"{name}_floor"], strict=True
                    )
                ),
                2,
            ),
            "overhead_per_llm_call_ms": round((ours - floor_ms) / FRAMEWORK_CALLS, 3),
            "target_replay_ms": target,
            "target_met": ours <= target,
        }
        print(
            f"frameworks: {name}: replay {ours} ms vs floor {floor_ms} ms "
            f"({ours / floor_ms:.2f} x, by round {result[name]['replay_over_floor_by_round']} x, "
            f"{(ours - floor_ms) / FRAMEWORK_CALLS:+.3f} ms per call); "
            f"target 1.2 x floor + 1 ms per call = {target} ms: "
            f"{'holds' if ours <= target else 'does not hold'}",
            flush=True,
        )
    result["skipped"] = skipped
    result["load_average"] = os.getloadavg()[0]
    return result


# -- whole pytest runs ------------------------------------------------------------------------


def _pytest(args: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system, of pytest and its xdist workers) and the peak
    RSS (KB) of the largest process of one pytest run."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTEST_ADDOPTS"] = "-p no:hypothesispytest -p no:randomly"
    script = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
        "stderr=subprocess.STDOUT).returncode; "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss, rc)"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu, rss, rc = done.stdout.split()
    if int(rc) not in (0, 5):
        raise SystemExit(f"pytest {' '.join(args)} in {cwd} exited {rc}")
    return float(wall), float(cpu), int(rss)


# Each pytest process of a suite run (the controller, every xdist worker) says its own peak RSS.
RSS_CONFTEST = """
import os, resource
from pathlib import Path

def pytest_sessionfinish(session):
    name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    with open(Path(str(session.config.rootpath)) / "rss.txt", "a") as out:
        out.write(f"{name} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n")
"""


def _rss_by_process(project: Path) -> dict[str, int]:
    lines = (project / "rss.txt").read_text().split() if (project / "rss.txt").exists() else []
    return {name: round(int(kb) / 1024) for name, kb in zip(lines[::2], lines[1::2], strict=True)}


def suite(sizes: list[int], workers: str, runs: int = 1) -> list[dict[str, Any]]:
    """Per size: a one-case and an N-case project, each collected and run `runs` times
    (alternating); medians."""
    project = Path(tempfile.mkdtemp(prefix="nodeval-suite-"))
    template = mock_case(project / "template" / "bench-00000")
    rows = []
    for n in sizes:
        root = project / f"n{n}"
        for count, target in ((1, root / "one"), (n, root / "all")):
            (target / "scenarios").mkdir(parents=True)
            (target / "pytest.ini").write_text(
                "[pytest]\ntestpaths = scenarios\nnodeval_history =\n"
            )
            (target / "conftest.py").write_text(RSS_CONFTEST)
            for i in range(count):
                case = target / "scenarios" / f"bench-{i:05d}"
                shutil.copytree(template, case)
                (case / "case.yaml").write_text(
                    yaml.safe_dump({"id": case.name, "tags": ["bench"]})
                )
        timed: dict[str, list[tuple[float, float, int]]] = {}
        for _ in range(runs):
            for name, args, where in (
                ("collect_one", ["--collect-only"], "one"),
                ("collect_all", ["--collect-only"], "all"),
                ("run_one", ["-n", workers], "one"),
                ("run_all", ["-n", workers], "all"),
            ):
                (root / where / "rss.txt").unlink(missing_ok=True)
                timed.setdefault(name, []).append(_pytest(args, root / where))
        wall = {name: statistics.median(t[0] for t in ts) for name, ts in timed.items()}
        cpu = {name: statistics.median(t[1] for t in ts) for name, ts in timed.items()}
        collect_one, collect_all, run_one, run_all = (
            wall[n] for n in ("collect_one", "collect_all", "run_one", "run_all")
        )
        rss = max(t[2] for t in timed["run_all"])
        by_process = _rss_by_process(root / "all")
        rows.append(
            {
                "cases": n,
                "workers": workers,
                "collect_per_case_ms": round((collect_all - collect_one) / max(n - 1, 1) * 1000, 3),
                "run_beyond_startup_s": round(run_all - run_one, 2),
                "run_per_case_ms": round((run_all - run_one) / max(n - 1, 1) * 1000, 2),
                "run_beyond_startup_cpu_s": round(cpu["run_all"] - cpu["run_one"], 2),
                "collect_per_case_cpu_ms": round(
                    (cpu["collect_all"] - cpu["collect_one"]) / max(n - 1, 1) * 1000, 3
                ),
                "peak_rss_mb": round(rss / 1024),
                "rss_mb_by_process": by_process,
                "load_average": os.getloadavg()[0],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        shutil.rmtree(root)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="sessions per variant per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument(
        "--suite", type=int, nargs="*", default=[], metavar="N", help="also run N generated cases"
    )
    parser.add_argument("--workers", default="0", help="pytest -n for the suite runs")
    parser.add_argument("--suite-runs", type=int, default=1, help="runs per suite size (medians)")
    parser.add_argument(
        "--suite-only", action="store_true", help="only the suite runs (no in-process sessions)"
    )
    parser.add_argument(
        "--tree", type=Path, help="measure this checkout's pytest_nodeval (a revision to compare)"
    )
    parser.add_argument(
        "--frameworks", action="store_true", help="also a LangGraph and an OpenAI Agents SDK agent"
    )
    parser.add_argument(
        "--frameworks-only", action="store_true", help="only the framework agents (no vcrpy)"
    )
    parser.add_argument(
        "--keep-in",
        type=Path,
        metavar="DIR",
        help="leave the in-process figures' files in DIR (deleted after a series of runs, not "
        "between them: see the module's docstring)",
    )
    args = parser.parse_args()
    if not (args.frameworks_only or args.suite_only):
        print(json.dumps(in_process(args.runs, args.rounds, args.keep_in), indent=2), flush=True)
    if args.frameworks or args.frameworks_only:
        print(json.dumps({"frameworks": frameworks(args.runs, args.rounds)}, indent=2), flush=True)
    if args.suite:
        suite(args.suite, args.workers, args.suite_runs)


if __name__ == "__main__":
    main()
