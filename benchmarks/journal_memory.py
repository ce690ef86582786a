"""Peak memory of reading a big golden journal back, as replay does (issue 28).

    python benchmarks/journal_memory.py --mb 200

Builds a journal of about --mb megabytes from scenarios/hello-answer's: its model exchange
repeated, each request carrying a long user message, and the session's end last. Then, in a
fresh process each, it measures the peak resident memory (ru_maxrss) of importing the reader
alone and of `read_golden` on the journal, and prints both, their difference and the
difference as a multiple of the file's size.
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
import resource, sys
from pathlib import Path
from pytest_nodeval.journal.reader import read_golden
if sys.argv[1] == "read":
    journal = read_golden(Path(sys.argv[2]))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def build(target: Path, megabytes: int) -> int:
    """A journal of about `megabytes` MB; returns its size in bytes."""
    target.mkdir(parents=True)
    (target / "header.json").write_bytes((SEED / "header.json").read_bytes())
    events = [json.loads(line) for line in (SEED / "events.jsonl").open()]
    head = [e for e in events if e["type"] == "session.start"]
    exchange = [e for e in events if e["type"] in ("llm.request", "llm.response")]
    end = [e for e in events if e["type"] == "session.end"]
    filler = "x" * 20_000
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
        while size < megabytes * 1_000_000:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="journal size in MB (default 200)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        journal = Path(scratch) / "journal"
        size = build(journal, options.mb)
        idle, read = peak("idle"), peak("read", str(journal))
    mb = 1e6
    print(f"journal: {size / mb:.1f} MB")
    print(f"peak RSS, reader imported: {idle / mb:.0f} MB; after read_golden: {read / mb:.0f} MB")
    print(f"read_golden adds {(read - idle) / mb:.0f} MB = {(read - idle) / size:.2f} x the file")


if __name__ == "__main__":
    main()
