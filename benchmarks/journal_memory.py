"""Peak memory of reading a big golden journal back and replaying it (issue 28).

    python benchmarks/journal_memory.py --mb 200
    python benchmarks/journal_memory.py --line-mb 52
    python benchmarks/journal_memory.py --engine --mb 200

Builds a journal of about --mb megabytes from scenarios/hello-answer's: its model exchange
repeated, each request carrying a 20 KB user message, and the session's end last (--line-mb:
one exchange whose request carries a message of that many MB, a single line). Then, in a
fresh process each, it measures the peak resident memory (ru_maxrss) of importing the reader
alone, of `read_golden` on the journal, and of a replay of it: the stash built from the
journal and every exchange served through a journal writer as the replay transport serves a
request byte for byte the recorded one. It prints each, and what reading and replaying add as
a multiple of the file's size.

--engine: the whole of a pytest run instead: a case whose scripted user says --turns things
of 20 KB each to the mock model (each request carries the conversation so far), recorded with
`nodeval record`, then replayed by `pytest --nodeval-mode deterministic`, report.html
included; the peak resident memory of that pytest process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SEED = Path(__file__).parents[1] / "scenarios" / "hello-answer" / "journal"
PROBE = """
import sys
from pathlib import Path
from pytest_nodeval.journal.reader import read_golden
from pytest_nodeval.journal.replay import ReplayStash
from pytest_nodeval.journal.writer import JournalWriter
if sys.argv[1] != "idle":
    journal = read_golden(Path(sys.argv[2]))
if sys.argv[1] == "replay":
    stash = ReplayStash(journal, case="big")
    with JournalWriter(Path(sys.argv[3]), journal.header, durable=False) as writer:
        for provider, queue in list(stash._llm.items()):
            while queue:
                request = queue[0].request_event.payload
                body = bytes(queue[0].raw_body)  # what the SDK sends: the recorded body
                served = stash.serve_llm_exact(
                    writer, provider, request.api, request.method, request.path, body
                )
                assert served is not None, "a recorded request was not served"
                del body, served
# VmHWM, not ru_maxrss: that counts the parent's memory at the fork, this only this program's
print(next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM")))
"""


CHILD_PEAK = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, capture_output=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def build(target: Path, megabytes: int, line_megabytes: int = 0) -> int:
    """A journal of about `megabytes` MB (or of one exchange whose request carries a message
    of `line_megabytes` MB); returns its size in bytes."""
    target.mkdir(parents=True)
    (target / "header.json").write_bytes((SEED / "header.json").read_bytes())
    events = [json.loads(line) for line in (SEED / "events.jsonl").open()]
    head = [e for e in events if e["type"] == "session.start"]
    exchange = [e for e in events if e["type"] in ("llm.request", "llm.response")]
    end = [e for e in events if e["type"] == "session.end"]
    filler = "x" * (line_megabytes * 1_000_000 or 20_000)
    if line_megabytes:
        megabytes = 0  # one exchange
    seq, size = 0, 0
    with (target / "events.jsonl").open("w") as out:

        def write(event: dict[str, object]) -> None:
            nonlocal seq, size
            seq += 1
            line = json.dumps({**event, "seq": seq}, separators=(",", ":")) + "\n"
            size += len(line)
            out.write(line)

        for event in head:
            write(event)
        first = True
        while first or size < megabytes * 1_000_000:
            first = False
            for event in exchange:
                if event["type"] == "llm.request":
                    body = dict(event["payload"]["body"])
                    body["messages"] = [{"role": "user", "content": filler}]
                    event = {**event, "payload": {**event["payload"], "body": body}}
                write(event)
        for event in end:
            write(event)
    return size


def peak(*args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def engine_run(scratch: Path, turns: int) -> tuple[int, int]:
    """(journal size, peak RSS of the pytest process replaying it) for --engine."""
    case = scratch / "big"
    (case / "input").mkdir(parents=True)
    (case / "case.yaml").write_text("id: big\nname: A long conversation\ntags: [pr]\n")
    config = {
        "providers": [
            {
                "name": "mock",
                "model": "mock-1",
                "script": [{"text": f"answer {n}"} for n in range(turns)],
            }
        ],
        "system_prompt": "You answer.",
        "tools": [],
        "limits": {"max_turns": turns + 1, "timeout_s": 3600},
    }
    (case / "input" / "config.yaml").write_text(json.dumps(config))
    inputs = [f"{n} " + "x" * 20_000 for n in range(turns)]
    user = {"user": {"kind": "scripted", "inputs": inputs}}
    (case / "input" / "inputs.yaml").write_text(json.dumps(user))
    (case / "assertions.yaml").write_text("- kind: no_errors\n")
    (scratch / "pytest.ini").write_text("[pytest]\nnodeval_cases = .\n")
    nodeval = Path(sys.executable).with_name("nodeval")
    record = [str(nodeval), "record", "--world", "local", "big"]
    subprocess.run(record, cwd=scratch, capture_output=True, check=True)
    replay = [sys.executable, "-m", "pytest", "big", "--nodeval-mode", "deterministic", "-q"]
    replay += ["-p", "no:cacheprovider", "-n", "0"]
    # Through a process of its own: ru_maxrss of the children is the most any child took.
    measured = [sys.executable, "-c", CHILD_PEAK, *replay]
    done = subprocess.run(measured, cwd=scratch, capture_output=True, text=True, check=True)
    return (case / "journal" / "events.jsonl").stat().st_size, int(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="journal size in MB (default 200)")
    parser.add_argument(
        "--line-mb", type=int, default=0, help="one exchange whose request is this many MB"
    )
    parser.add_argument(
        "--engine", action="store_true", help="a whole pytest replay of a long conversation"
    )
    parser.add_argument(
        "--turns", type=int, default=140, help="--engine: user turns (140: about 200 MB)"
    )
    options = parser.parse_args()
    mb = 1e6
    if options.engine:
        with tempfile.TemporaryDirectory() as scratch:
            size, run = engine_run(Path(scratch), options.turns)
        print(f"journal: {size / mb:.1f} MB ({options.turns} turns)")
        print(f"peak RSS of the pytest replay: {run / mb:.0f} MB = {run / size:.2f} x the file")
        return
    with tempfile.TemporaryDirectory() as scratch:
        journal = Path(scratch) / "journal"
        size = build(journal, options.mb, options.line_mb)
        idle, read = peak("idle"), peak("read", str(journal))
        replay = peak("replay", str(journal), str(Path(scratch) / "observed"))
    print(f"journal: {size / mb:.1f} MB")
    print(
        f"peak RSS, reader imported: {idle / mb:.0f} MB; after read_golden: {read / mb:.0f} MB; "
        f"after replay: {replay / mb:.0f} MB"
    )
    print(f"read_golden adds {(read - idle) / mb:.0f} MB = {(read - idle) / size:.2f} x the file")
    print(f"replay adds {(replay - idle) / mb:.0f} MB = {(replay - idle) / size:.2f} x the file")


if __name__ == "__main__":
    main()
